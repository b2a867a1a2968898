// SPDX-License-Identifier: GPL-2.0

//! Indirect keys (UMR-style, as mlx5's indirect mkeys): a key whose bytes
//! are other keys' bytes, configured through the send queue.
//!
//! * `oxedv_create_mkey` makes one on a PD with a maximum entry count
//!   (a `reg_mr` with `OXE_REG_MR_INDIRECT`): an MR with a key, no memory
//!   of its own, and Free, so the key resolves to nothing.
//! * `OXE_WR_MKEY_CONFIGURE`, executed in send-queue order like a window
//!   bind or a fast registration, gives it a layout (`oxe_core::layout`: a
//!   list of `(key, addr, length)` entries, or the same interleaved over
//!   rounds), rights and a new key, and makes it Valid. The new key keeps
//!   the index and changes the variant (the provider picks it, as for a
//!   type 1 window's bind), so an rkey handed out for an earlier layout
//!   names nothing in this one. Every entry is checked then:
//!   its key names an MR or a Valid indirect key of the same PD, which
//!   grants every right the new key grants, and holds the entry's whole
//!   extent. Any failure is IBTA's Memory Management Operation Error.
//! * LOCAL_INV, or a peer's SEND with Invalidate if the key was created
//!   for it, makes it Free again (`fastreg::invalidate`).
//!
//! The data path follows the layout in `xfer.rs`, where every key is
//! resolved: each piece of an access goes through the key its entry names
//! (looked up again, and checked again there: PD, bounds, rights), so an
//! entry's MR that was deregistered, invalidated or changed since fails
//! the access cleanly. Entries hold keys, not references: a layout never
//! keeps another MR's pages pinned, and two keys naming each other form no
//! cycle of references; the depth limit ([`OXE_MKEY_MAX_DEPTH`]) is
//! checked when configuring and again on every access, so a cycle made by
//! reconfiguring a key still ends. One access crosses at most
//! [`MAX_PIECES`] pieces, at every level together: a layout of one-byte
//! entries cannot make one packet cost thousands of lookups in softirq.
//!
//! An access following a key's layout counts itself in the key
//! ([`Walking`]), with softirqs off on its CPU so that it cannot be
//! interrupted by one; an invalidation waits for the count to drop to zero
//! after the key is Free, so a copy through the key in progress finishes
//! first and none starts after, as for an MR under its lock. An entry
//! being invalidated is not fenced by the keys naming it: as with mlx5,
//! an application invalidating an MR an indirect key names must first be
//! done with the key.

#![deny(unsafe_code)]

use super::{Mr, MrKind, MrState, Pages};
use crate::counters::inc;
use crate::device::OxeDevice;
use crate::ib::lock::BhOff;
use crate::ib::memory::Memory;
use crate::ib::mr::MrKeys;
use crate::ib::objects::PdId;
use crate::ib::odp::FaultMode;
use crate::limits::{self, Kind as Limit};
use crate::mw::Refused;
use crate::oxe_core::abi::{OxeSge, OXE_MKEY_MAX_DEPTH, OXE_MKEY_MAX_ENTRIES};
use crate::oxe_core::layout::{self, Entry, Piece};
use crate::oxe_core::{Access, AccessOp, Range};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Rights an indirect key may grant. No MW_BIND (a window over an
/// indirect key is not offered), no ODP or HUGETLB (those describe pages,
/// which the entries' MRs have), no FLUSH_PERSISTENT (no MR has it).
/// FLUSH_GLOBAL, like every right, only if every entry's MR grants it: a
/// FLUSH moves no data, so it is checked at the key alone.
const INDIRECT_ACCESS: u32 = Access::LOCAL_WRITE.bits()
    | Access::REMOTE_WRITE.bits()
    | Access::REMOTE_READ.bits()
    | Access::REMOTE_ATOMIC.bits()
    | Access::FLUSH_GLOBAL.bits()
    | Access::RELAXED_ORDERING.bits();

/// The most pieces one access may be cut into, over all levels.
pub(crate) const MAX_PIECES: u32 = 1024;

/// What kind of indirect key, fixed at creation.
#[derive(Clone, Copy)]
pub(crate) struct Kind {
    /// The most entries a configuration may give it.
    pub(crate) max_entries: u32,
    /// A peer's SEND with Invalidate may invalidate it.
    pub(crate) remote_invalidate: bool,
}

/// A configuration in force. Never changed once made: a new
/// configuration replaces it whole, and an access that took it before
/// finishes with the one it took.
pub(crate) struct Layout {
    entries: KVec<Entry>,
    /// Rounds of an interleaved layout; 1 for a list.
    repeat: u32,
    interleaved: bool,
    /// Levels of indirect keys this one spans, itself included.
    depth: u32,
}

impl Layout {
    /// Runs `f` on the pieces of bytes `[off, off + len)`; `None` if the
    /// span is not inside the layout.
    pub(crate) fn walk<E>(
        &self,
        off: u64,
        len: u64,
        f: impl FnMut(Piece) -> Result<(), E>,
    ) -> Option<Result<(), E>> {
        layout::walk(&self.entries, self.repeat, off, len, f)
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub(crate) fn repeat(&self) -> Option<u32> {
        self.interleaved.then_some(self.repeat)
    }

    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }
}

/// `oxedv_create_mkey`: a Free indirect key of PD `pd`.
pub(crate) fn create(drv: &OxeDevice, pd: PdId, kind: Kind) -> Result<(Arc<Mr>, MrKeys)> {
    if kind.max_entries == 0 || kind.max_entries > OXE_MKEY_MAX_ENTRIES {
        return Err(EINVAL);
    }
    limits::admit(&drv.counters, Limit::Mr)?;
    create_admitted(drv, pd, kind).inspect_err(|_| limits::release(&drv.counters, Limit::Mr))
}

fn create_admitted(drv: &OxeDevice, pd: PdId, kind: Kind) -> Result<(Arc<Mr>, MrKeys)> {
    let pages = Pages {
        mem: Arc::new(Memory::None, GFP_KERNEL)?,
        npages: 0,
        counters: drv.counters.clone(),
    };
    Mr::install(drv, MrKind::Indirect(kind), MrState::free(pd, pages)?)
}

/// An `OXE_WR_MKEY_CONFIGURE`'s operands, as the WQE carries them.
pub(crate) struct ConfigReq<'a> {
    /// The key it takes: its index names the key, its variant must be a
    /// new one.
    pub(crate) key: u32,
    /// IBV_ACCESS_* the key grants.
    pub(crate) access: u64,
    /// Rounds of an interleaved layout, 0 for a list.
    pub(crate) repeat: u32,
    /// The SGE slots: a list's entries, or an interleaved layout's in
    /// pairs.
    pub(crate) slots: &'a [OxeSge],
}

impl ConfigReq<'_> {
    /// The entries the slots describe, at most `max` of them, but for the
    /// empty ones, which add nothing to the key and are left out (their
    /// keys are not looked at either).
    fn entries(&self, max: u32) -> Result<KVec<Entry>, Refused> {
        let per_entry = if self.repeat == 0 { 1 } else { 2 };
        let n = self.slots.len() / per_entry;
        if n == 0 || n > max as usize || self.slots.len() % per_entry != 0 {
            return Err(Refused);
        }
        let mut out = KVec::with_capacity(n, GFP_ATOMIC).map_err(|_| Refused)?;
        if self.repeat == 0 {
            for s in self.slots.iter().filter(|s| s.length != 0) {
                let e = Entry {
                    key: s.lkey,
                    addr: s.addr,
                    len: s.length,
                    skip: 0,
                };
                out.push(e, GFP_ATOMIC).map_err(|_| Refused)?;
            }
        } else {
            for pair in self.slots.chunks_exact(2) {
                let [s, t] = pair else {
                    return Err(Refused);
                };
                if t.addr != 0 || t.lkey != 0 {
                    return Err(Refused);
                }
                if s.length == 0 {
                    continue;
                }
                let e = Entry {
                    key: s.lkey,
                    addr: s.addr,
                    len: s.length,
                    skip: t.length,
                };
                out.push(e, GFP_ATOMIC).map_err(|_| Refused)?;
            }
        }
        Ok(out)
    }
}

/// Executes an `OXE_WR_MKEY_CONFIGURE` from the send queue of a QP of PD
/// `pd` (module doc for the checks).
///
/// A request that names an indirect key of the PD moves the key to the
/// request's key even when the configuration is refused (a key not Free, a
/// bad entry): the provider gave the application that key when it built
/// the request, and both then agree again. A Valid key refused this way
/// keeps its layout under the new key.
pub(crate) fn configure(drv: &OxeDevice, pd: PdId, req: &ConfigReq<'_>) -> Result<(), Refused> {
    // Found by index: the provider names the key by the key it takes.
    let mr = drv.keys.lookup_index(req.key).ok_or(Refused)?;
    let kind = mr.indirect.ok_or(Refused)?;
    let layout = new_layout(drv, pd, kind, req);
    let mut st = mr.state.lock();
    // A new variant, or an rkey a peer holds from the last layout would
    // reach the next one.
    if st.revoked || st.pd != pd || mr.lkey() == req.key {
        return Err(Refused);
    }
    mr.key.store(req.key, Ordering::Release);
    // A message that looked the old key up before this (the key Free, its
    // packet not yet at the lock) must not go on into the new layout.
    mr.era.fetch_add(1, Ordering::AcqRel);
    mr.ib.publish_key(req.key);
    let (layout, access, range) = layout?;
    if !st.free {
        return Err(Refused);
    }
    st.access = access;
    st.range = range;
    st.layout = Some(layout);
    st.free = false;
    drop(st);
    inc(&drv.counters.mkey_configure);
    Ok(())
}

/// The layout, rights and range `req` asks for, each entry checked.
fn new_layout(
    drv: &OxeDevice,
    pd: PdId,
    kind: Kind,
    req: &ConfigReq<'_>,
) -> Result<(Arc<Layout>, Access, Range), Refused> {
    let access = u32::try_from(req.access).map_err(|_| Refused)?;
    let access = Access::validate_for_mr(access, INDIRECT_ACCESS).map_err(|_| Refused)?;
    let entries = req.entries(kind.max_entries)?;
    let repeat = req.repeat.max(1);
    let total = layout::total(&entries, repeat).ok_or(Refused)?;
    let range = Range::new(0, total).map_err(|_| Refused)?;
    let mut depth = 1;
    for e in entries.iter() {
        let (addr, len) = e.extent(repeat).ok_or(Refused)?;
        let child = drv.keys.lookup(e.key).ok_or(Refused)?;
        let d = child.grants(pd, access, addr, len).ok_or(Refused)?;
        depth = depth.max(d + 1);
    }
    if depth > OXE_MKEY_MAX_DEPTH {
        return Err(Refused);
    }
    let layout = Arc::new(
        Layout {
            entries,
            repeat,
            interleaved: req.repeat != 0,
            depth,
        },
        GFP_ATOMIC,
    )
    .map_err(|_| Refused)?;
    Ok((layout, access, range))
}

impl Mr {
    /// Whether `[addr, addr + len)` of this key may be an entry of an
    /// indirect key of PD `pd` granting `access`: Valid, of the PD, granting
    /// every right `access` does, holding the span. Some(the levels of
    /// indirect keys below the entry: 0 for an MR).
    fn grants(&self, pd: PdId, access: Access, addr: u64, len: u64) -> Option<u32> {
        let st = self.state.lock();
        st.admit(pd, None).ok()?;
        let needed = access.bits() & !Access::RELAXED_ORDERING.bits();
        if !st.access.contains(Access::from_bits_unchecked(needed)) {
            return None;
        }
        if len != 0 && !st.range.contains(addr, len) {
            return None;
        }
        Some(st.layout.as_ref().map_or(0, |l| l.depth))
    }

    /// Whether this is an indirect key.
    pub(crate) fn is_indirect(&self) -> bool {
        self.indirect.is_some()
    }

    /// For an access of `len` bytes at `iova` for `op` through a QP of PD
    /// `pd`: `None` if this is not a Valid indirect key (the caller goes
    /// on with `Mr::access_as`, which checks everything); else the checks
    /// of the key itself (PD, rights unless a window's stand in, bounds,
    /// atomic alignment), and the layout with the offset of `iova` in it.
    /// `_bh`: softirqs are off on this CPU for as long as the walk lives.
    pub(crate) fn layout_for<'a>(
        &'a self,
        _bh: &'a BhOff,
        pd: PdId,
        (iova, len, op): (u64, u64, AccessOp),
        (check_rights, era): (bool, Option<u32>),
    ) -> Option<core::result::Result<(Walking<'a>, u64), super::Denied>> {
        self.indirect?;
        let st = self.state.lock();
        if let Err(d) = self.same_era(era) {
            return Some(Err(d));
        }
        let layout = st.layout.clone()?;
        let off = match st.check(pd, iova, len, op, check_rights) {
            Ok(off) => off,
            Err(d) => return Some(Err(d)),
        };
        // Counted under the lock an invalidation makes the key Free
        // under: it either sees this walk, or this walk saw it Free.
        self.walkers.fetch_add(1, Ordering::AcqRel);
        let walk = Walking {
            layout,
            walkers: &self.walkers,
            _bh: PhantomData,
        };
        Some(Ok((walk, off)))
    }

    /// Returns once no access follows this key's layout any more.
    pub(super) fn wait_for_walkers(&self) {
        // Walks are short (at most MAX_PIECES pieces, no sleeping) and
        // run with softirqs off, so none is held up on this CPU by the
        // wait, whatever context it runs in.
        while self.walkers.load(Ordering::Acquire) != 0 {
            core::hint::spin_loop();
        }
    }

    /// Whether the key may still be used by a QP of PD `pd` at all (the
    /// checks every access starts with), for a fault through a layout.
    fn admits(&self, pd: PdId) -> bool {
        self.state.lock().admit(pd, None).is_ok()
    }

    /// Whether a peer's SEND with Invalidate may name this key: any
    /// fast-registration MR, an indirect key created for it.
    pub(crate) fn remotely_invalidable(&self) -> bool {
        self.fast.is_some() || self.indirect.is_some_and(|k| k.remote_invalidate)
    }
}

/// An access following an indirect key's layout: the layout it took, and
/// its place in the key's count of walks, given back when it ends.
pub(crate) struct Walking<'a> {
    layout: Arc<Layout>,
    walkers: &'a AtomicU32,
    /// Softirqs are off on the CPU for the walk's whole life.
    _bh: PhantomData<&'a BhOff>,
}

impl core::ops::Deref for Walking<'_> {
    type Target = Layout;

    fn deref(&self) -> &Layout {
        &self.layout
    }
}

impl Drop for Walking<'_> {
    fn drop(&mut self) {
        self.walkers.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `rdma -dd resource show mr`'s and debugfs's view of a layout: its
/// shape and entries, one line each.
pub(crate) fn describe(l: &Layout, w: &mut impl core::fmt::Write) -> core::fmt::Result {
    match l.repeat() {
        None => writeln!(
            w,
            "layout list, {} entries, depth {}",
            l.entries.len(),
            l.depth
        )?,
        Some(r) => writeln!(
            w,
            "layout interleaved, {} entries x {} rounds, depth {}",
            l.entries.len(),
            r,
            l.depth
        )?,
    }
    for (i, e) in l.entries.iter().enumerate() {
        writeln!(
            w,
            "  entry {i}: key {:#010x} addr {:#x} len {} skip {}",
            e.key, e.addr, e.len, e.skip
        )?;
    }
    Ok(())
}

/// Brings in the ODP pages behind `[iova, iova + len)` of `mr`, following
/// an indirect key's layout down to the MRs of its PD (process context),
/// as `mode` says; read-ahead stops at the key's end. At most
/// [`MAX_PIECES`] pieces are faulted: a demand fault is one access, which
/// the data path bounds the same way, and read-ahead is best effort.
pub(crate) fn fault(
    drv: &OxeDevice,
    mr: &Arc<Mr>,
    iova: u64,
    len: u64,
    write: bool,
    mode: FaultMode,
) -> Result {
    let mut budget = MAX_PIECES;
    fault_at(drv, mr, None, (iova, len, write, mode), 0, &mut budget)
}

fn fault_at(
    drv: &OxeDevice,
    mr: &Arc<Mr>,
    pd: Option<PdId>,
    (iova, len, write, mode): (u64, u64, bool, FaultMode),
    depth: u32,
    budget: &mut u32,
) -> Result {
    if !mr.is_indirect() {
        // An entry's MR must still be of the key's PD.
        if pd.is_some_and(|pd| !mr.admits(pd)) {
            return Err(EFAULT);
        }
        return mr.fault(iova, len, write, mode);
    }
    let (layout, len, own_pd) = {
        let st = mr.state.lock();
        let len = match mode {
            FaultMode::Ahead => len.min(st.range.end().saturating_sub(iova)),
            _ => len,
        };
        match &st.layout {
            Some(l) if !st.revoked && len != 0 && st.range.contains(iova, len) => {
                (l.clone(), len, st.pd)
            }
            _ => return Err(EFAULT),
        }
    };
    if depth >= OXE_MKEY_MAX_DEPTH || pd.is_some_and(|pd| pd != own_pd) {
        return Err(EFAULT);
    }
    layout
        .walk(iova, len, |p| {
            *budget = budget.checked_sub(1).ok_or(EFAULT)?;
            let child = drv.keys.lookup(p.key).ok_or(EFAULT)?;
            let span = (p.addr, p.len, write, mode);
            match fault_at(drv, &child, Some(own_pd), span, depth + 1, budget) {
                // A pinned entry has nothing to bring in.
                Err(e) if e != EINVAL => Err(e),
                _ => Ok(()),
            }
        })
        .unwrap_or(Err(EFAULT))
}
