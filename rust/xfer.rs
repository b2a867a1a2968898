// SPDX-License-Identifier: GPL-2.0

//! Moving bytes between packets and registered memory, with every access
//! checked against the memory registration rules (IBTA 10.6.3):
//!
//! * a local SGE names an MR by lkey; the MR must be in the QP's PD, contain
//!   the whole SGE, and grant LOCAL_WRITE wherever the device writes;
//! * a remote access names an MR by rkey; the MR must be in the QP's PD,
//!   contain the whole span, and grant the remote right for the operation.
//!
//! Keys resolve through the key table, which hands out a counted reference:
//! an MR deregistered mid-operation keeps its pages pinned until the
//! operation lets go, and is not found by the next one. An indirect key
//! (`mr::indirect`) is followed here too, in [`follow`]: every piece of
//! its layout is resolved again through the key table, as an lkey or rkey
//! would be, and checked against what that key grants.

#![deny(unsafe_code)]

use crate::bindings::trace;
use crate::device::OxeDevice;
use crate::ib::kmem::KernelToken;
use crate::ib::lock::BhOff;
use crate::ib::memory::Memory;
use crate::ib::objects::PdId;
use crate::ib::umem::MmId;
use crate::mr::{Denied, Mr};
use crate::mw::QpTag;
use crate::oxe_core::abi::{OxeInlinePiece, OxeSge, OXE_INLINE_RECV_PIECES, OXE_MKEY_MAX_DEPTH};
use crate::oxe_core::AccessOp;
use core::ops::Range;
use kernel::prelude::*;
use kernel::sync::Arc;

/// What runs on the memory behind an access: the memory, the offset in it,
/// and which bytes of the access are there.
type OnMemory<'a, R> = dyn FnMut(&Memory, u64, Range<usize>) -> Result<R> + 'a;

/// Why following an indirect key's layout stopped.
enum Stop {
    Denied(Denied),
    Failed(Error),
}

/// How [`follow`] goes.
#[derive(Clone, Copy)]
struct How {
    /// Check the key's own rights: false through a window, whose rights
    /// were checked.
    own_rights: bool,
    /// The access must land in one piece (an atomic).
    whole: bool,
    /// A check of a whole message, before any of it moves: an indirect
    /// key is checked itself (PD, rights, bounds), its entries are left
    /// to the accesses that move the data, packet by packet. Walking a
    /// message's worth of entries at once would let a peer's 2 GiB READ,
    /// through a key of one-byte entries, hold a CPU for billions of steps.
    shallow: bool,
    /// Indirect keys followed on the way here.
    depth: u32,
    /// The era ([`Mr::era`]) a message's first packet found the key in,
    /// checked again under the key's lock by this access: none for a
    /// local key, or an indirect key's entries, looked up anew.
    era: Option<u32>,
}

impl How {
    const COPY: How = How {
        own_rights: true,
        whole: false,
        shallow: false,
        depth: 0,
        era: None,
    };
    const ATOMIC: How = How {
        whole: true,
        ..How::COPY
    };
    const CHECK: How = How {
        shallow: true,
        ..How::COPY
    };
}

/// Runs `f` on the memory behind `[iova, iova + len)` of `mr` (found by
/// key) for `op` by a QP of PD `pd`, as `how` says: an MR's own, under its
/// lock, in one call; or, for an indirect key, each piece of its layout
/// through the key its entry names, which must grant `op` too (rights
/// intersect) and is checked again there. The result is the last piece's
/// (the only one's, for an atomic). The pieces of one access, over every
/// level, are at most `budget` (`indirect::MAX_PIECES`); past it the
/// access is refused as out of bounds.
fn follow<R: Default>(
    drv: &OxeDevice,
    mr: &Arc<Mr>,
    pd: PdId,
    span: (u64, u64, AccessOp),
    how: How,
    budget: &mut u32,
    f: &mut OnMemory<'_, R>,
) -> Result<Result<R>, Denied> {
    let (iova, len, op) = span;
    let rights = (how.own_rights, how.era);
    if !mr.is_indirect() {
        let n = usize::try_from(len).map_err(|_| Denied::Bounds)?;
        return mr.access_as(pd, iova, len, op, rights, |m, o| f(m, o, 0..n));
    }
    // Softirqs off for the whole walk: an invalidation of the key waits
    // for it (`indirect::Walking`).
    let bh = BhOff::new();
    let (layout, off) = match mr.layout_for(&bh, pd, span, rights) {
        // Free: refused by the checks every MR access makes.
        None => return mr.access_as(pd, iova, len, op, rights, |_, _| Ok(R::default())),
        Some(r) => r?,
    };
    if how.depth >= OXE_MKEY_MAX_DEPTH {
        return Err(Denied::Rights);
    }
    if how.shallow {
        return Ok(Ok(R::default()));
    }
    crate::counters::inc(&drv.counters.mkey_access);
    let inner = How {
        own_rights: true,
        depth: how.depth + 1,
        era: None,
        ..how
    };
    let mut last = R::default();
    let walked = layout.walk(off, len, |p| {
        // An atomic that two entries would share is refused at its first
        // piece, before any of it is carried out.
        if how.whole && p.len != len {
            return Err(Stop::Denied(Denied::Alignment));
        }
        *budget = budget.checked_sub(1).ok_or(Stop::Denied(Denied::Bounds))?;
        let child = drv.keys.lookup(p.key).ok_or(Stop::Denied(Denied::Rights))?;
        let at = usize::try_from(p.at).map_err(|_| Stop::Denied(Denied::Bounds))?;
        let mut g = |m: &Memory, o: u64, r: Range<usize>| f(m, o, r.start + at..r.end + at);
        match follow(drv, &child, pd, (p.addr, p.len, op), inner, budget, &mut g) {
            Err(d) => Err(Stop::Denied(d)),
            Ok(Err(e)) => Err(Stop::Failed(e)),
            Ok(Ok(v)) => {
                last = v;
                Ok(())
            }
        }
    });
    match walked {
        None => Err(Denied::Bounds),
        Some(Err(Stop::Denied(d))) => Err(d),
        Some(Err(Stop::Failed(e))) => Ok(Err(e)),
        Some(Ok(())) => Ok(Ok(last)),
    }
}

/// [`follow`] from the key an access names, with a fresh budget.
fn follow_key<R: Default>(
    drv: &OxeDevice,
    mr: &Arc<Mr>,
    pd: PdId,
    span: (u64, u64, AccessOp),
    how: How,
    f: &mut OnMemory<'_, R>,
) -> Result<Result<R>, Denied> {
    let mut budget = crate::mr::indirect::MAX_PIECES;
    follow(drv, mr, pd, span, how, &mut budget, f)
}

/// The lkey kernel consumers use for kernel virtual addresses (the PD's
/// local_dma_lkey). Key 0 never names an MR.
pub(crate) const LOCAL_DMA_LKEY: u32 = 0;

/// Why a local data movement failed; becomes the work completion status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocalErr {
    /// Bad lkey, wrong PD, missing right or out of bounds: IBV_WC_LOC_PROT_ERR.
    Prot,
    /// The data does not fit the SGE list: IBV_WC_LOC_LEN_ERR.
    Len,
    /// An ODP page is not translated now: a fault was queued, and the
    /// caller tries again once it has run (nothing is completed).
    Fault,
}

/// Whose memory the SGEs of a QP refer to.
pub(crate) struct Local<'a> {
    pub(crate) drv: &'a OxeDevice,
    pub(crate) pd: PdId,
    /// Present for kernel consumers' QPs only.
    pub(crate) kernel: Option<&'a KernelToken>,
}

/// Total bytes an SGE list describes, or `None` if it overflows 2^32.
pub(crate) fn sge_total(sges: &[OxeSge]) -> Option<u32> {
    sges.iter()
        .try_fold(0u32, |acc, s| acc.checked_add(s.length))
}

impl Local<'_> {
    fn mr(&self, lkey: u32) -> Result<Arc<Mr>, LocalErr> {
        self.drv.keys.lookup(lkey).ok_or(LocalErr::Prot)
    }

    /// Runs `f` on the memory behind `[addr, addr + n)` of `mr` ([`follow`]).
    fn access(
        &self,
        mr: &Arc<Mr>,
        (addr, n, op): (u64, u64, AccessOp),
        how: How,
        f: &mut OnMemory<'_, ()>,
    ) -> core::result::Result<Result<()>, Denied> {
        follow_key(self.drv, mr, self.pd, (addr, n, op), how, f)
    }

    /// Walks the SGE list from byte `off` over `len` bytes, calling `f` for
    /// each piece with (sge, offset within it, piece offset, piece length).
    fn walk(
        &self,
        sges: &[OxeSge],
        mut off: u64,
        len: usize,
        mut f: impl FnMut(&OxeSge, u64, usize, usize) -> Result<(), LocalErr>,
    ) -> Result<(), LocalErr> {
        let mut done = 0usize;
        for sge in sges {
            if done == len {
                break;
            }
            let slen = u64::from(sge.length);
            if off >= slen {
                off -= slen;
                continue;
            }
            let n = ((slen - off) as usize).min(len - done);
            f(sge, off, done, n)?;
            done += n;
            off = 0;
        }
        if done < len {
            return Err(LocalErr::Len);
        }
        Ok(())
    }

    /// Copies `data` into the SGE list from byte `off` (a receive, a read
    /// response, an atomic's original value).
    pub(crate) fn scatter(&self, sges: &[OxeSge], off: u64, data: &[u8]) -> Result<(), LocalErr> {
        self.walk(sges, off, data.len(), |sge, in_sge, at, n| {
            let piece = data.get(at..at + n).ok_or(LocalErr::Len)?;
            let addr = sge.addr.checked_add(in_sge).ok_or(LocalErr::Prot)?;
            if sge.lkey == LOCAL_DMA_LKEY {
                let k = self.kernel.ok_or(LocalErr::Prot)?;
                k.write(addr, piece);
                return Ok(());
            }
            let mr = self.mr(sge.lkey)?;
            let span = (addr, n as u64, AccessOp::LocalWrite);
            let r = self.access(&mr, span, How::COPY, &mut |m, o, r| {
                m.write(o, piece.get(r).ok_or(EINVAL)?)
            });
            self.placed(&mr, addr, n, rest_of(sge, in_sge, n), true, r)
        })
    }

    /// Copies from the SGE list, from byte `off`, into `out` (a send's or
    /// write's payload).
    pub(crate) fn gather(&self, sges: &[OxeSge], off: u64, out: &mut [u8]) -> Result<(), LocalErr> {
        let len = out.len();
        self.walk(sges, off, len, |sge, in_sge, at, n| {
            let piece = out.get_mut(at..at + n).ok_or(LocalErr::Len)?;
            let addr = sge.addr.checked_add(in_sge).ok_or(LocalErr::Prot)?;
            if sge.lkey == LOCAL_DMA_LKEY {
                let k = self.kernel.ok_or(LocalErr::Prot)?;
                k.read(addr, piece);
                return Ok(());
            }
            let mr = self.mr(sge.lkey)?;
            let span = (addr, n as u64, AccessOp::LocalRead);
            let r = self.access(&mr, span, How::COPY, &mut |m, o, r| {
                m.read(o, piece.get_mut(r).ok_or(EINVAL)?)
            });
            self.placed(&mr, addr, n, rest_of(sge, in_sge, n), false, r)
        })
    }

    /// The outcome of a copy to or from `[addr, addr + n)` of `mr`: an ODP
    /// miss queues the fault, with the `ahead` bytes of the SGE after it.
    fn placed(
        &self,
        mr: &Arc<Mr>,
        addr: u64,
        n: usize,
        ahead: u64,
        write: bool,
        r: core::result::Result<Result<()>, Denied>,
    ) -> Result<(), LocalErr> {
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if e == EAGAIN => {
                self.drv
                    .fault_later(mr, self.pd, (addr, n as u64, ahead), write);
                Err(LocalErr::Fault)
            }
            _ => Err(LocalErr::Prot),
        }
    }

    /// Inline receive: where the first `len` bytes of the SGE list lie in
    /// the process that posted it, with every check [`Local::scatter`]
    /// makes and the same errors, but without touching a page. `Ok(None)`
    /// when the list cannot go inline (memory the device must write
    /// itself, or cut into more pieces than a completion carries): the
    /// caller then scatters as usual.
    /// `reader` is the address space that copies it (`Mr::user_va`).
    pub(crate) fn user_pieces(
        &self,
        sges: &[OxeSge],
        len: usize,
        reader: MmId,
    ) -> Result<Option<InlinePieces>, LocalErr> {
        let mut out = InlinePieces::default();
        let mut inline = true;
        self.walk(sges, 0, len, |sge, in_sge, _, n| {
            let addr = sge.addr.checked_add(in_sge).ok_or(LocalErr::Prot)?;
            // A user QP has no kernel lkey (`scatter` says the same).
            if sge.lkey == LOCAL_DMA_LKEY {
                return Err(LocalErr::Prot);
            }
            let mr = self.mr(sge.lkey)?;
            match mr.user_va(self.pd, addr, n as u64, reader) {
                Err(_) => Err(LocalErr::Prot),
                Ok(Some(va)) => {
                    inline &= out.push(va, n as u32);
                    Ok(())
                }
                Ok(None) => {
                    inline = false;
                    Ok(())
                }
            }
        })?;
        Ok(inline.then_some(out))
    }

    /// Whether the first `len` bytes of the SGE list are translated now
    /// for the device to write (ODP pages present); a miss queues the
    /// fault and is `EAGAIN`. Any other problem is left to the placement.
    pub(crate) fn ready(&self, sges: &[OxeSge], len: usize) -> Result {
        let r = self.walk(sges, 0, len, |sge, in_sge, _, n| {
            if sge.lkey == LOCAL_DMA_LKEY {
                return Ok(());
            }
            let Some(addr) = sge.addr.checked_add(in_sge) else {
                return Ok(());
            };
            let Ok(mr) = self.mr(sge.lkey) else {
                return Ok(());
            };
            let span = (addr, n as u64, AccessOp::LocalWrite);
            // Every piece probed (at most a packet's worth here): an ODP
            // page missing behind an indirect key is faulted before the
            // WQE is taken, as for an MR's own.
            let r = self.access(&mr, span, How::COPY, &mut |m, o, r| {
                m.probe(o, r.len() as u64, true)
            });
            match self.placed(&mr, addr, n, 0, true, r) {
                Err(LocalErr::Fault) => Err(LocalErr::Fault),
                _ => Ok(()),
            }
        });
        match r {
            Err(LocalErr::Fault) => Err(EAGAIN),
            _ => Ok(()),
        }
    }

    /// Checks every SGE of a list up front: an SGE no access could ever
    /// use is a local protection error before anything goes on the wire.
    pub(crate) fn check(&self, sges: &[OxeSge], op: AccessOp) -> Result<(), LocalErr> {
        for sge in sges.iter().filter(|s| s.length != 0) {
            if sge.lkey == LOCAL_DMA_LKEY {
                if self.kernel.is_none() {
                    return Err(LocalErr::Prot);
                }
                continue;
            }
            let mr = self.mr(sge.lkey)?;
            let span = (sge.addr, sge.length.into(), op);
            self.access(&mr, span, How::CHECK, &mut |_, _, _| Ok(()))
                .map_err(|_| LocalErr::Prot)?
                .map_err(|_| LocalErr::Prot)?;
        }
        Ok(())
    }
}

/// Where an inline-received message goes, piece by piece, in the
/// receiving process (`OxeInlinePiece`).
#[derive(Default)]
pub(crate) struct InlinePieces {
    pieces: [OxeInlinePiece; OXE_INLINE_RECV_PIECES as usize],
    n: usize,
}

impl InlinePieces {
    /// Adds a piece; `false` once the completion has no room for it.
    fn push(&mut self, va: u64, length: u32) -> bool {
        let Some(p) = self.pieces.get_mut(self.n) else {
            return false;
        };
        *p = OxeInlinePiece {
            va,
            length,
            reserved: 0,
        };
        self.n += 1;
        true
    }

    /// The pieces, in message order.
    pub(crate) fn as_slice(&self) -> &[OxeInlinePiece] {
        &self.pieces[..self.n]
    }
}

/// The bytes of `sge` after a piece of `n` bytes at `in_sge`: what a
/// fault reads ahead for the rest of the SGE.
fn rest_of(sge: &OxeSge, in_sge: u64, n: usize) -> u64 {
    u64::from(sge.length).saturating_sub(in_sge + n as u64)
}

/// A remote peer's access through an rkey, checked; `Err` is a remote
/// access error (NAK), whatever the reason, so a peer cannot probe which
/// check failed.
pub(crate) struct Remote<'a> {
    pub(crate) drv: &'a OxeDevice,
    pub(crate) pd: PdId,
    /// The responder QP, which a type 2 window must have been bound through.
    pub(crate) qp: QpTag,
}

/// Where a checked remote access lands: an MR, reached through its own
/// rkey or through a window's. Held for a whole message, so an MR
/// deregistered meanwhile keeps its pages until the message is done.
pub(crate) struct Target {
    mr: Arc<Mr>,
    /// Through a window: the window's rights were checked, and its
    /// addresses map to the MR's by adding `shift` (wrapping; zero-based
    /// windows start at 0).
    window: Option<u64>,
    /// The MR's era ([`Mr::era`]) when the key was resolved.
    era: u32,
    /// The key the peer named (the window's, through a window).
    key: u32,
}

impl Target {
    fn new(mr: Arc<Mr>, window: Option<u64>, key: u32) -> Self {
        let era = mr.era();
        Target {
            mr,
            window,
            era,
            key,
        }
    }

    /// Whether `other` reaches the same memory the same way: the same MR,
    /// not invalidated in between, directly or through a window with the
    /// same translation.
    pub(crate) fn same(&self, other: &Target) -> bool {
        Arc::ptr_eq(&self.mr, &other.mr) && self.era == other.era && self.window == other.window
    }

    /// Whether `rkey`, which resolved to this target when its message
    /// began, still does, for the `len` bytes at `va` a later packet of the
    /// message brings: IBTA 10.6.7, a key invalidated meanwhile grants
    /// nothing more.
    ///
    /// Through an MR's own key, what can change is the MR's state (a
    /// dereg, an invalidation, a rereg of its PD, rights or range), its
    /// key (a fast registration after an invalidation, with another
    /// variant) and what the key names (an indirect key configured again,
    /// under the same key): the access each packet then makes checks the
    /// state under the MR's lock, so comparing the key and the era (the
    /// invalidations, [`Mr::era`]) is what is left. Looking the
    /// key up again instead took the key tables' locks twice per packet
    /// (the windows' first) and the MR's lock once more, for the same
    /// answer. A window's key is resolved again in full: the window may be
    /// invalidated or bound again elsewhere, which the MR cannot see.
    pub(crate) fn still_named(
        &self,
        r: &Remote<'_>,
        rkey: u32,
        (va, len, op): (u64, u64, AccessOp),
    ) -> bool {
        if self.window.is_none() {
            return self.mr.lkey() == rkey && self.mr.era() == self.era;
        }
        r.resolve(rkey, va, len, op).is_ok_and(|t| t.same(self))
    }

    /// The MR address for a peer's address `va`.
    fn mr_iova(&self, va: u64) -> u64 {
        self.window.map_or(va, |shift| va.wrapping_add(shift))
    }

    /// Runs `f` on the memory behind `[va, va + len)` for `op`, with the
    /// checks the way in calls for ([`follow`]).
    fn access<R: Default>(
        &self,
        r: &Remote<'_>,
        (va, len, op): (u64, u64, AccessOp),
        how: How,
        f: &mut OnMemory<'_, R>,
    ) -> core::result::Result<Result<R>, Denied> {
        let span = (self.mr_iova(va), len, op);
        let how = How {
            own_rights: self.window.is_none(),
            era: Some(self.era),
            ..how
        };
        follow_key(r.drv, &self.mr, r.pd, span, how, f)
            .inspect_err(|d| r.refused(self.key, (va, len, op), *d))
    }
}

impl Remote<'_> {
    /// Resolves `rkey` (an MR's or a window's) for `len` bytes at `va` and
    /// checks `op` against it.
    pub(crate) fn resolve(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        op: AccessOp,
    ) -> Result<Target, Denied> {
        let t = self.target(rkey, va, len, op)?;
        self.check(&t, va, len, op)?;
        Ok(t)
    }

    /// As [`Remote::resolve`], for a caller whose next step is a copy over
    /// exactly `[va, va + len)` for `op` through the result ([`Remote::write`],
    /// [`Remote::read`]): that copy makes, under the MR's lock, the check
    /// `resolve` makes first, and refuses with the same [`Denied`] before
    /// touching memory. So a plain MR's check is left to it: one MR lock per
    /// single-packet WRITE, not two. A window's rkey, or an indirect key
    /// (whose copy could have placed some pieces before refusing a later
    /// one), is checked here all the same.
    pub(crate) fn resolve_for_copy(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        op: AccessOp,
    ) -> Result<Target, Denied> {
        let t = self.target(rkey, va, len, op)?;
        if t.window.is_some() || t.mr.is_indirect() {
            self.check(&t, va, len, op)?;
        }
        Ok(t)
    }

    /// What `rkey` names: a window (its own rights and range checked by
    /// its resolution) over its MR, or an MR, not yet checked.
    fn target(&self, rkey: u32, va: u64, len: u64, op: AccessOp) -> Result<Target, Denied> {
        let t = match self.drv.mw_keys.lookup(rkey) {
            Some(mw) => mw
                .resolve(self.pd, self.qp, va, len, op)
                .map(|(mr, iova)| Target::new(mr, Some(iova.wrapping_sub(va)), rkey)),
            None => self
                .drv
                .keys
                .lookup(rkey)
                .map(|mr| Target::new(mr, None, rkey))
                .ok_or(Denied::Rights),
        };
        t.inspect_err(|d| self.refused(rkey, (va, len, op), *d))
    }

    /// Traces a refusal of the peer's access through `key` (an ODP miss
    /// is not one: its fault is queued and the access tried again).
    fn refused(&self, key: u32, (va, len, op): (u64, u64, AccessOp), d: Denied) {
        let reason = match d {
            Denied::Pd => 0,
            Denied::Rights => 1,
            Denied::Bounds => 2,
            Denied::Alignment => 3,
            Denied::Fault => return,
        };
        let op = match op {
            AccessOp::LocalRead => 0,
            AccessOp::LocalWrite => 1,
            AccessOp::RemoteRead => 2,
            AccessOp::RemoteWrite => 3,
            AccessOp::RemoteAtomic => 4,
            AccessOp::MwBind => 5,
            AccessOp::FlushGlobal | AccessOp::FlushPersistent => 6,
        };
        trace::key_refused(self.drv.trace_id(), self.qp.qpn, key, va, len, op, reason);
    }

    /// Checks `op` on `[va, va + len)` through `t`, touching nothing.
    fn check(&self, t: &Target, va: u64, len: u64, op: AccessOp) -> Result<(), Denied> {
        t.access(self, (va, len, op), How::CHECK, &mut |_, _, _| Ok(()))?
            .map_err(|_| {
                self.refused(t.key, (va, len, op), Denied::Bounds);
                Denied::Bounds
            })
    }

    /// Resolves `rkey` for an operation on the whole region (a FLUSH of
    /// selectivity MR): PD and rights are checked, no address range. A
    /// window's rkey is refused, as that selectivity names a region; a
    /// window bound with FLUSH_GLOBAL takes range FLUSHes through `resolve`.
    pub(crate) fn resolve_key(&self, rkey: u32, op: AccessOp) -> Result<Target, Denied> {
        let mr = self.drv.keys.lookup(rkey).ok_or(Denied::Rights);
        let mr = mr
            .and_then(|mr| mr.check_rights(self.pd, op).map(|()| mr))
            .inspect_err(|d| self.refused(rkey, (0, 0, op), *d))?;
        Ok(Target::new(mr, None, rkey))
    }

    /// Writes `data` at `va` through `t` (checked again, under the MR
    /// lock); `ahead` bytes of the message follow it.
    pub(crate) fn write(&self, t: &Target, va: u64, data: &[u8], ahead: u64) -> Result<(), Denied> {
        let len = data.len() as u64;
        let span = (va, len, AccessOp::RemoteWrite);
        let r = t.access(self, span, How::COPY, &mut |m, o, r| {
            m.write(o, data.get(r).ok_or(EINVAL)?)
        })?;
        self.placed(
            t,
            (va, len, ahead),
            AccessOp::RemoteWrite,
            r,
            Denied::Bounds,
        )
    }

    /// Reads `out.len()` bytes at `va` through `t`.
    pub(crate) fn read(&self, t: &Target, va: u64, out: &mut [u8]) -> Result<(), Denied> {
        let len = out.len() as u64;
        let span = (va, len, AccessOp::RemoteRead);
        let r = t.access(self, span, How::COPY, &mut |m, o, r| {
            m.read(o, out.get_mut(r).ok_or(EINVAL)?)
        })?;
        self.placed(t, (va, len, 0), AccessOp::RemoteRead, r, Denied::Bounds)
    }

    /// Checks that `[va, va + len)` through `t` is translated now for
    /// reading; an ODP page that is not queues its fault ([`Denied::Fault`]).
    pub(crate) fn ready(&self, t: &Target, va: u64, len: u64) -> Result<(), Denied> {
        let span = (va, len, AccessOp::RemoteRead);
        // Through an indirect key, the first `indirect::MAX_PIECES` pieces
        // are probed; a READ cut finer finds any later miss packet by
        // packet.
        let r = t.access(self, span, How::COPY, &mut |m, o, r| {
            m.probe(o, r.len() as u64, false)
        })?;
        self.placed(t, (va, len, 0), AccessOp::RemoteRead, r, Denied::Bounds)
    }

    /// Stores 8 bytes at `va` (8-byte aligned) as one store, atomic against
    /// the device's other atomics and any CPU's aligned loads.
    pub(crate) fn atomic_write(&self, t: &Target, va: u64, value: u64) -> Result<(), Denied> {
        let span = (va, 8, AccessOp::RemoteWrite);
        let r = t.access(self, span, How::ATOMIC, &mut |m, o, _| {
            m.atomic_store(o, value)
        })?;
        self.placed(t, (va, 8, 0), AccessOp::RemoteWrite, r, Denied::Alignment)
    }

    /// The outcome of an access to `len` bytes at `va` through `t`, with
    /// `ahead` bytes of its message after them: an ODP miss queues the
    /// fault and is [`Denied::Fault`]; any other failure is `other`.
    fn placed<R>(
        &self,
        t: &Target,
        (va, len, ahead): (u64, u64, u64),
        op: AccessOp,
        r: Result<R>,
        other: Denied,
    ) -> Result<R, Denied> {
        let write = op != AccessOp::RemoteRead;
        match r {
            Ok(v) => Ok(v),
            Err(e) if e == EAGAIN => {
                self.drv
                    .fault_later(&t.mr, self.pd, (t.mr_iova(va), len, ahead), write);
                Err(Denied::Fault)
            }
            Err(_) => {
                self.refused(t.key, (va, len, op), other);
                Err(other)
            }
        }
    }

    /// An 8-byte atomic at `va`: compare-and-swap or fetch-and-add.
    pub(crate) fn atomic(
        &self,
        t: &Target,
        va: u64,
        cas: bool,
        cmp_add: u64,
        swap: u64,
    ) -> Result<u64, Denied> {
        let span = (va, 8, AccessOp::RemoteAtomic);
        let r = t.access(self, span, How::ATOMIC, &mut |m, o, _| {
            m.atomic(o, cas, cmp_add, swap)
        })?;
        self.placed(t, (va, 8, 0), AccessOp::RemoteAtomic, r, Denied::Alignment)
    }
}
