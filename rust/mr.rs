// SPDX-License-Identifier: GPL-2.0

//! Memory regions: registration, rereg and deregistration of user memory.
//!
//! The rules (IBTA 10.6 and the kernel's ib_check_mr_access) live in
//! `oxe_core::access`/`oxe_core::rereg`; this file applies them to pinned pages.

#![deny(unsafe_code)]

pub(crate) mod fastreg;
pub(crate) mod indirect;

use crate::bindings::trace;
use crate::counters::{dec, inc, Counters};
use crate::device::OxeDevice;
use crate::ib::chunked_odp::{ChunkedOdp, CHILD_SIZE};
use crate::ib::device::IbDev;
use crate::ib::error::from_core;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::memory::Memory;
use crate::ib::mr::{IbMrLink, MrInfo, MrKeys, Rereg};
use crate::ib::objects::PdId;
use crate::ib::odp::{FaultMode, OdpUmem};
use crate::ib::umem::{MmId, Umem};
use crate::limits::{self, Kind};
use crate::oxe_core::abi::OxeRegMrResp;
use crate::oxe_core::key::Key;
use crate::oxe_core::rereg::{self, ReregFlags};
use crate::oxe_core::{Access, AccessOp, Range};
use core::ffi::CStr;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::page::{PAGE_SHIFT, PAGE_SIZE};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

/// Access flags oxe implements for MRs. HUGETLB asks ODP to fault whole
/// huge pages (pinned memory takes whatever pages back the range, and
/// ignores it, as ib_umem_get does). No ZERO_BASED yet, and no
/// FLUSH_PERSISTENT: oxe cannot make a range persistent (it would need
/// persistent memory behind every page, which rdma_rxe checks page by page;
/// oxe does not claim the capability at all). Asking for either is
/// EOPNOTSUPP rather than a silent downgrade.
pub(crate) const SUPPORTED_ACCESS: u32 = Access::LOCAL_WRITE.bits()
    | Access::ON_DEMAND.bits()
    | Access::REMOTE_WRITE.bits()
    | Access::REMOTE_READ.bits()
    | Access::REMOTE_ATOMIC.bits()
    | Access::MW_BIND.bits()
    | Access::FLUSH_GLOBAL.bits()
    | Access::RELAXED_ORDERING.bits()
    | Access::HUGETLB.bits();

/// One memory region.
#[pin_data]
pub(crate) struct Mr {
    /// The lkey, which is also the rkey. A rereg keeps it; only a fast
    /// registration or an indirect key's configuration changes it, and
    /// then only its variant.
    key: AtomicU32,
    /// Memory windows bound to this MR; dereg waits for none.
    mw_binds: AtomicU32,
    /// Allocated for fast registration (`fastreg`), by a kernel consumer.
    fast: Option<fastreg::FastKind>,
    /// An indirect key (`indirect`): its bytes are other keys'.
    indirect: Option<indirect::Kind>,
    /// Taken by every access from the data path (softirq included), so
    /// only for as long as a copy: rereg pins new pages before taking it.
    #[pin]
    state: SpinLockBh<MrState>,
    /// Serializes reregs, which read the state, pin, then commit.
    #[pin]
    rereg: Mutex<()>,
    /// Held by the fault of this MR running now (`crate::odp`), which may
    /// wait for good on a page that never comes: only this MR's faults,
    /// and its PD's QPs that wait for them, ever take it.
    #[pin]
    pub(crate) fault_lock: Mutex<()>,
    /// What the driver did for the MR's ODP memory: faults the data path
    /// deferred and how long they waited, prefetches.
    pub(crate) faults: crate::odp::FaultStats,
    /// An indirect key: accesses following its layout right now
    /// (`indirect::Walking`), which an invalidation waits for.
    walkers: AtomicU32,
    /// Its `ib_mr`, whose keys follow an indirect key's.
    #[pin]
    pub(crate) ib: IbMrLink,
    /// Invalidations and reregs so far. A message names its target once,
    /// at its first packet, and its later packets go on only while this is
    /// unchanged: a fast-registration MR may get its old key back, an
    /// indirect key's new key comes from its provider, and a rereg keeps
    /// the key, yet none may carry a message begun before
    /// into what the key names now (IBTA 10.6.7: an invalidated key grants
    /// nothing more). Moved on under the state lock, and compared under it
    /// by every access of such a message.
    era: AtomicU32,
}

struct MrState {
    access: Access,
    /// The address range remote and local accesses use (iova, length).
    range: Range,
    /// The user virtual address the pages were pinned from.
    start: u64,
    pd: PdId,
    pages: Pages,
    /// An indirect key's configuration in force (`None` while Free, and
    /// for every other MR).
    layout: Option<Arc<indirect::Layout>>,
    /// Deregistered: its keys no longer resolve, and a reference taken
    /// before (a multi-packet transfer's target) grants nothing either.
    /// Set under the same lock under which a bind checks it, so a window
    /// cannot bind to an MR that dereg has let go.
    revoked: bool,
    /// A fast-registration MR in the Free state (allocated, or
    /// invalidated): its keys grant nothing until the next REG_MR.
    free: bool,
}

/// The MR's memory, and its share of the device's `pages_pinned` gauge
/// (none for on-demand paging, which pins nothing).
struct Pages {
    /// Shared with a fault in progress, which runs without the MR's lock.
    mem: Arc<Memory>,
    npages: u64,
    counters: Arc<Counters>,
}

impl Pages {
    /// Pins `[start, start + len)`, or, for ON_DEMAND, watches it (all
    /// of the address space for an implicit MR: [`implicit`]).
    fn get(
        dev: IbDev<OxeDevice>,
        counters: &Arc<Counters>,
        start: u64,
        len: u64,
        access: Access,
    ) -> Result<Self> {
        if access.contains(Access::ON_DEMAND) {
            let events: Arc<dyn crate::ib::odp::OdpEvents> = counters.clone();
            // Chunks but for HUGETLB, which ib_core's children cannot
            // hold (crate::ib::chunked_odp): registration allocates
            // nothing per page.
            let a = access.bits();
            let mem = if implicit(start, len) {
                Memory::Chunked(ChunkedOdp::implicit(dev, a, events)?)
            } else if access.contains(Access::HUGETLB) {
                Memory::Odp(OdpUmem::get(dev, start, len, a, events)?)
            } else {
                Memory::Chunked(ChunkedOdp::explicit(dev, start, a, events)?)
            };
            return Ok(Pages {
                mem: Arc::new(mem, GFP_KERNEL)?,
                npages: 0,
                counters: counters.clone(),
            });
        }
        let umem = Umem::pin(dev, start, len, access.bits())
            .inspect_err(|_| inc(&counters.pin_failures))?;
        let npages = umem.page_count() as u64;
        let mem = Arc::new(Memory::Pinned(umem), GFP_KERNEL)?;
        counters.pages_pinned.fetch_add(npages, Ordering::Relaxed);
        Ok(Pages {
            mem,
            npages,
            counters: counters.clone(),
        })
    }

    /// Whether writes may land in the pages as they are: a pin taken for
    /// writing, or ODP, which faults a page writable when a write needs it.
    fn writable(&self) -> bool {
        match &*self.mem {
            Memory::Pinned(u) => u.writable(),
            // (A kernel consumer's own memory: it granted the rights.)
            Memory::Odp(_) | Memory::Chunked(_) | Memory::Kernel(_) => true,
            // (An indirect key writes nothing itself.)
            Memory::None => false,
        }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        self.counters
            .pages_pinned
            .fetch_sub(self.npages, Ordering::Relaxed);
    }
}

/// The driver-private part of the reg and rereg replies: the same for
/// every MR, so a verb can write it before it changes anything.
pub(crate) fn reply() -> [u8; OxeRegMrResp::SIZE] {
    OxeRegMrResp {
        page_shift: PAGE_SHIFT as u32,
        reserved: 0,
    }
    .to_bytes()
}

impl crate::keys::Keyed for Mr {
    fn current_key(&self) -> u32 {
        self.lkey()
    }
}

impl Mr {
    pub(crate) fn lkey(&self) -> u32 {
        self.key.load(Ordering::Acquire)
    }

    /// The invalidations so far (see the field).
    pub(crate) fn era(&self) -> u32 {
        self.era.load(Ordering::Acquire)
    }

    fn keys(&self, st: &MrState) -> MrKeys {
        let lkey = self.lkey();
        MrKeys {
            lkey,
            // The rkey is the lkey whether or not remote rights are granted,
            // as mlx5 and rdma_rxe hand it out: a rereg that adds remote
            // rights then needs no new key, and rdma-core's tests rely on
            // that. The rights, not the key, are what the data path checks.
            rkey: lkey,
            iova: st.range.iova(),
            length: st.range.len(),
            page_size: PAGE_SIZE as u32,
        }
    }

    pub(crate) fn info(&self) -> MrInfo {
        let st = self.state.lock();
        let odp = st.pages.mem.odp_stats();
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        MrInfo {
            pages: u32::try_from(st.pages.mem.page_count()).unwrap_or(u32::MAX),
            page_size: PAGE_SIZE as u32,
            pinned: matches!(*st.pages.mem, Memory::Pinned(_)),
            pinned_writable: matches!(*st.pages.mem, Memory::Pinned(_)) && st.pages.writable(),
            access: st.access.bits(),
            odp: match &odp {
                None => c"no",
                Some(o) if o.implicit => c"implicit",
                Some(_) => c"explicit",
            },
            odp_present: clamp(odp.as_ref().map_or(0, |o| o.present)),
            odp_faulted: clamp(odp.as_ref().map_or(0, |o| o.history.faulted_pages)),
            odp_invalidated: clamp(odp.as_ref().map_or(0, |o| o.history.invalidated_pages)),
            fastreg: self.fast_state(&st),
            indirect: match (self.indirect, &st.layout) {
                (None, _) => c"no",
                (Some(_), None) => c"none",
                (Some(_), Some(l)) if l.repeat().is_some() => c"interleaved",
                (Some(_), Some(_)) => c"list",
            },
            indirect_entries: st.layout.as_ref().map_or(0, |l| l.entries().len() as u32),
            indirect_rounds: st.layout.as_ref().map_or(0, |l| l.repeat().unwrap_or(1)),
            indirect_depth: st.layout.as_ref().map_or(0, |l| l.depth()),
            indirect_first: {
                let mut first = [(0, 0); crate::ib::mr::SHOWN_ENTRIES];
                let entries = st.layout.as_ref().map_or(&[][..], |l| l.entries());
                for (slot, e) in first.iter_mut().zip(entries) {
                    *slot = (e.len, e.skip);
                }
                first
            },
        }
    }

    /// `rdma statistic mr`: the MR's ODP counters, each through `put`
    /// (nothing for a pinned MR). The page counts start again at a rereg
    /// that changes the memory; the driver's (faults deferred, their
    /// wait, prefetches) run for the MR's life.
    pub(crate) fn statistics(&self, put: &mut dyn FnMut(&CStr, u64) -> Result) -> Result {
        let Some(o) = self.state.lock().pages.mem.odp_stats() else {
            return Ok(());
        };
        let h = o.history;
        let f = &self.faults;
        let (avg_us, max_us) = f.wait_us();
        let entries: [(&CStr, u64); 10] = [
            (c"page_faults", h.faulted_pages),
            (c"page_fault_events", h.faults),
            (c"page_invalidations", h.invalidated_pages),
            (c"page_invalidation_events", h.invalidations),
            (c"prefetch_ranges", f.prefetches()),
            (c"pages_present", o.present),
            (c"faults_deferred", f.deferred()),
            (c"faults_run", f.run()),
            (c"fault_wait_avg_us", avg_us),
            (c"fault_wait_max_us", max_us),
        ];
        for (name, value) in entries {
            put(name, value)?;
        }
        Ok(())
    }
}

/// Why a data-path access to an MR was refused; the caller turns it into a
/// local protection error or a remote access NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// The MR belongs to another PD than the QP.
    Pd,
    /// The MR's access rights do not include the operation.
    Rights,
    /// The span is not entirely inside the MR.
    Bounds,
    /// An atomic on an address that is not 8-byte aligned.
    Alignment,
    /// An ODP page is not translated now; a fault was queued (not a
    /// refusal: the request is tried again once it has run).
    Fault,
}

impl Mr {
    /// Checks an access of `len` bytes at `iova` for `op` through a QP of
    /// PD `pd`, then runs `f` with the MR's memory and the byte offset of
    /// `iova` in it, under the MR's lock (so a concurrent rereg can
    /// neither move the pages nor change the rights halfway through).
    /// `check_rights` is false for an access through a memory window bound
    /// to this MR: the window's rights were checked and replace the MR's
    /// own remote rights (IBTA 10.6.7.2: the MR only needs MW_BIND, checked
    /// at bind time); PD, bounds and alignment are still checked here.
    /// An indirect key's layout is followed in `xfer.rs`, not here.
    pub(crate) fn access_as<R>(
        &self,
        pd: PdId,
        iova: u64,
        len: u64,
        op: AccessOp,
        (check_rights, era): (bool, Option<u32>),
        f: impl FnOnce(&Memory, u64) -> Result<R>,
    ) -> core::result::Result<Result<R>, Denied> {
        let st = self.state.lock();
        self.same_era(era)?;
        let off = st.check(pd, iova, len, op, check_rights)?;
        Ok(f(&st.pages.mem, off))
    }

    /// `Err` unless the MR is in era `era` (if given): read under the state
    /// lock, under which an invalidation moves it on, so an access that
    /// passes cannot meet what the key names after a later invalidation.
    pub(crate) fn same_era(&self, era: Option<u32>) -> core::result::Result<(), Denied> {
        match era {
            Some(e) if e != self.era() => Err(Denied::Rights),
            _ => Ok(()),
        }
    }

    /// Where `[iova, iova + len)` lies in the registering process, checked
    /// as a local write through a QP of PD `pd` is: for inline receive,
    /// which has the provider write it there (`resp.rs`). `Ok(None)` for
    /// memory other than user pages pinned writable (ODP, kernel pages),
    /// which the device goes on writing itself: a user page an ODP MR
    /// covers may not be mapped writable, and the provider must not fault
    /// on a write the kernel would have refused with a completion error.
    ///
    /// `reader` is the address space that will copy the message (the one
    /// that created the receive CQ): the address is only given for pages
    /// pinned from it. A process that shares its verbs context with another
    /// (`ibv_import_device`) may name the other's MR in a receive; the
    /// device writes that one as before.
    pub(crate) fn user_va(
        &self,
        pd: PdId,
        iova: u64,
        len: u64,
        reader: MmId,
    ) -> core::result::Result<Option<u64>, Denied> {
        let st = self.state.lock();
        st.admit(pd, Some(AccessOp::LocalWrite))?;
        if !st.range.contains(iova, len) {
            return Err(Denied::Bounds);
        }
        let ours = match &*st.pages.mem {
            Memory::Pinned(u) => u.writable() && u.owner() == reader,
            _ => false,
        };
        Ok(ours.then(|| st.start.wrapping_add(iova - st.range.iova())))
    }

    /// Brings `[iova, iova + len)` of an ODP MR in (writable if `write`),
    /// as `mode` says. Sleeps: process context. EINVAL for an MR that is
    /// not ODP, EFAULT out of range.
    pub(crate) fn fault(&self, iova: u64, len: u64, write: bool, mode: FaultMode) -> Result {
        let (mem, off, len) = {
            let st = self.state.lock();
            // Read-ahead stops at the MR's end; anything else must lie
            // inside.
            let len = match mode {
                FaultMode::Ahead => len.min(st.range.end().saturating_sub(iova)),
                _ => len,
            };
            if st.revoked || !st.range.contains(iova, len) {
                return Err(EFAULT);
            }
            (st.pages.mem.clone(), iova - st.range.iova(), len)
        };
        mem.fault(off, len, write, mode)
    }

    /// Whether `[iova, iova + len)` lies inside the MR.
    pub(crate) fn contains(&self, iova: u64, len: u64) -> bool {
        self.state.lock().range.contains(iova, len)
    }

    /// Whether the MR is an ODP one.
    pub(crate) fn is_odp(&self) -> bool {
        self.state.lock().pages.mem.odp_stats().is_some()
    }
}

impl Mr {
    /// Checks that a QP of PD `pd` may use the region for `op` at all,
    /// wherever in it.
    pub(crate) fn check_rights(&self, pd: PdId, op: AccessOp) -> core::result::Result<(), Denied> {
        self.state.lock().admit(pd, Some(op))
    }
}

impl MrState {
    /// The checks of an access of `len` bytes at `iova` for `op` by a QP of
    /// PD `pd`: [`MrState::admit`], bounds, atomic alignment. The offset of
    /// `iova` in the region.
    fn check(
        &self,
        pd: PdId,
        iova: u64,
        len: u64,
        op: AccessOp,
        check_rights: bool,
    ) -> core::result::Result<u64, Denied> {
        self.admit(pd, check_rights.then_some(op))?;
        if !self.range.contains(iova, len) {
            return Err(Denied::Bounds);
        }
        if op == AccessOp::RemoteAtomic && iova % 8 != 0 {
            return Err(Denied::Alignment);
        }
        Ok(iova - self.range.iova())
    }

    /// The checks every use of the region starts with: a QP of PD `pd`, and
    /// (unless a window's rights stand in for the MR's) the right for `op`.
    fn admit(&self, pd: PdId, op: Option<AccessOp>) -> core::result::Result<(), Denied> {
        if self.revoked || self.free {
            return Err(Denied::Rights);
        }
        if self.pd != pd {
            return Err(Denied::Pd);
        }
        if op.is_some_and(|op| !self.access.permits(op)) {
            return Err(Denied::Rights);
        }
        Ok(())
    }
}

/// Why a bind of a window onto an MR was refused (the bind completes with
/// IBV_WC_MW_BIND_ERR whatever the reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BindRefused;

impl Mr {
    /// Lends `[addr, addr + len)` of this MR (or its first `len` bytes, for
    /// a zero-based window) to a window with rights `access`, for a QP of
    /// PD `pd`. The checks are IBTA's for a bind (C10-72..75): same PD, the
    /// MR grants MW_BIND, a window that can write needs an MR with
    /// LOCAL_WRITE, and the range lies inside the MR. Returns the MR iova
    /// the window's first byte maps to. The window count rises under the
    /// same lock a rereg commits under, so a rereg either sees the window
    /// (and refuses) or happened before these checks.
    pub(crate) fn bind_window(
        &self,
        pd: PdId,
        addr: u64,
        len: u64,
        zero_based: bool,
        access: Access,
    ) -> core::result::Result<u64, BindRefused> {
        let st = self.state.lock();
        st.admit(pd, Some(AccessOp::MwBind))
            .map_err(|_| BindRefused)?;
        let writes =
            access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC);
        if writes && !st.access.contains(Access::LOCAL_WRITE) {
            return Err(BindRefused);
        }
        let base = if zero_based { st.range.iova() } else { addr };
        if !st.range.contains(base, len) {
            return Err(BindRefused);
        }
        self.mw_binds.fetch_add(1, Ordering::AcqRel);
        Ok(base)
    }

    /// A window bound by [`Mr::bind_window`] lets go.
    pub(crate) fn unbind_window(&self) {
        self.mw_binds.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Pages listed one by one in the debugfs view; the rest are summarized.
const DESCRIBE_MAX_PAGES: usize = 4096;

impl Mr {
    /// The debugfs view: keys, rights, range and the page-by-page translation
    /// (iova of each page → page frame number of the pinned page).
    pub(crate) fn describe(&self, w: &mut impl core::fmt::Write) -> core::fmt::Result {
        let st = self.state.lock();
        let key = Key::from_raw(self.lkey());
        let keys = self.keys(&st);
        writeln!(
            w,
            "lkey     {:#010x} (index {}, variant {:#04x})",
            key.raw(),
            key.index(),
            key.variant()
        )?;
        writeln!(w, "rkey     {:#010x}", keys.rkey)?;
        writeln!(w, "access   {:#x}", st.access.bits())?;
        writeln!(w, "iova     {:#x}", st.range.iova())?;
        writeln!(w, "length   {}", st.range.len())?;
        writeln!(w, "start    {:#x}", st.start)?;
        let umem = match &*st.pages.mem {
            Memory::Pinned(u) => u,
            Memory::None => {
                // An indirect key: the keys its bytes are, as configured.
                writeln!(
                    w,
                    "indirect {}",
                    self.fast_state(&st).to_str().unwrap_or("?")
                )?;
                return match &st.layout {
                    Some(l) => indirect::describe(l, w),
                    None => writeln!(w, "layout   none"),
                };
            }
            Memory::Kernel(list) => {
                // What the last REG_MR put in force (a Free MR keeps it
                // until the next one, and grants nothing meanwhile).
                let v = list.view();
                let kind = if self.maps_gaps() {
                    "sg_gaps"
                } else {
                    "mem_reg"
                };
                writeln!(
                    w,
                    "fastreg  {} ({kind})",
                    self.fast_state(&st).to_str().unwrap_or("?")
                )?;
                writeln!(
                    w,
                    "pages    kernel memory, {} segments of {} B pages, {} bytes",
                    v.segments, v.page_size, v.bytes
                )?;
                return list.describe(w, DESCRIBE_MAX_PAGES);
            }
            Memory::Odp(_) | Memory::Chunked(_) => {
                // Faulted in and invalidated as the process and the
                // device go: how many pages are translated right now, and
                // (chunked) in how many children, made by the faults that
                // need them and freed when emptied.
                match &*st.pages.mem {
                    Memory::Chunked(c) => {
                        let (children, pages) = c.children();
                        let kind = if c.is_implicit() { "implicit " } else { "" };
                        write!(
                            w,
                            "pages    {kind}on demand in {children} children of \
                             {CHILD_SIZE} B ({pages} pages watched)"
                        )?;
                    }
                    m => write!(
                        w,
                        "pages    {} x {} B, huge pages on demand",
                        m.page_count(),
                        PAGE_SIZE
                    )?,
                }
                let Some(s) = st.pages.mem.odp_stats() else {
                    return Ok(());
                };
                let (faulted, invalidated) = (s.history.faulted_pages, s.history.invalidated_pages);
                return writeln!(
                    w,
                    ", {} present ({faulted} faulted in, {invalidated} invalidated so far)",
                    s.present
                );
            }
        };
        let pin = if umem.writable() {
            "writable"
        } else {
            "read-only"
        };
        writeln!(
            w,
            "pages    {} x {} B, pinned {}",
            st.pages.npages, PAGE_SIZE, pin
        )?;
        writeln!(w, "page  iova                pfn")?;
        let first = st.range.iova() & !(PAGE_SIZE as u64 - 1);
        let shown = (st.pages.npages as usize).min(DESCRIBE_MAX_PAGES);
        let mut buf = [0usize; 64];
        let mut done = 0;
        while done < shown {
            let want = buf.len().min(shown - done);
            let n = umem.pfns(done, &mut buf[..want]);
            if n == 0 {
                break;
            }
            for (i, pfn) in buf[..n].iter().enumerate() {
                let page = done + i;
                let iova = first.wrapping_add((page as u64) << PAGE_SHIFT);
                writeln!(w, "{page:<5} {iova:#018x}  {pfn:#x}")?;
            }
            done += n;
        }
        if (st.pages.npages as usize) > shown {
            writeln!(w, "... {} more pages", st.pages.npages as usize - shown)?;
        }
        Ok(())
    }
}

/// The device-side range `[iova, iova+length)` of user memory at `start`.
/// Zero length and ranges that wrap past 2^64 are EINVAL, on both sides.
fn translation(start: u64, iova: u64, length: u64) -> Result<Range> {
    Range::new(start, length).map_err(from_core)?;
    Range::new(iova, length).map_err(from_core)
}

/// Whether `[start, start + len)` asks for the whole address space: an
/// implicit ODP MR, when ON_DEMAND is asked for too.
fn implicit(start: u64, len: u64) -> bool {
    start == 0 && len == u64::MAX
}

/// An implicit MR names addresses as they are: its iova is 0 (as mlx5
/// asks), and it is ODP (the whole address space cannot be pinned;
/// `ib_umem_get` would refuse it anyway, as EINVAL too).
fn check_implicit(start: u64, len: u64, iova: u64, access: Access) -> Result {
    if implicit(start, len) && (iova != 0 || !access.contains(Access::ON_DEMAND)) {
        return Err(EINVAL);
    }
    Ok(())
}

/// ibv_reg_mr / ibv_reg_mr_iova: pin `[start, start+length)` and name it
/// `[iova, iova+length)` for the device.
pub(crate) fn reg_user(
    drv: &OxeDevice,
    dev: IbDev<OxeDevice>,
    pd: PdId,
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
) -> Result<(Arc<Mr>, MrKeys)> {
    let access = Access::validate_for_mr(access, SUPPORTED_ACCESS).map_err(from_core)?;
    check_implicit(start, length, iova, access)?;
    let range = translation(start, iova, length)?;
    limits::admit(&drv.counters, Kind::Mr)?;
    reg_admitted(drv, dev, pd, start, length, range, access)
        .inspect_err(|_| limits::release(&drv.counters, Kind::Mr))
}

/// [`reg_user`] once the MR is counted against the device's limit.
fn reg_admitted(
    drv: &OxeDevice,
    dev: IbDev<OxeDevice>,
    pd: PdId,
    start: u64,
    length: u64,
    range: Range,
    access: Access,
) -> Result<(Arc<Mr>, MrKeys)> {
    let pages = Pages::get(dev, &drv.counters, start, length, access)?;
    let registered = MrState {
        access,
        range,
        start,
        pd,
        pages,
        layout: None,
        revoked: false,
        free: false,
    };
    Mr::install(drv, MrKind::User, registered)
}

/// What an MR is, fixed when it is made.
pub(crate) enum MrKind {
    /// Registered from user memory.
    User,
    /// Allocated for fast registration by a kernel consumer.
    Fast(fastreg::FastKind),
    /// An indirect key.
    Indirect(indirect::Kind),
}

impl MrState {
    /// The state of an MR made Free, over `pages` (which it does not use
    /// until a fast registration or a configuration): no rights, and a
    /// placeholder range that `admit` never lets an access reach.
    fn free(pd: PdId, pages: Pages) -> Result<Self> {
        Ok(MrState {
            access: Access::empty(),
            range: Range::new(0, 1).map_err(from_core)?,
            start: 0,
            pd,
            pages,
            layout: None,
            revoked: false,
            free: true,
        })
    }
}

impl Mr {
    /// Makes an MR of `kind` in state `st`, and publishes it under a new
    /// key: from here on, the data path can find it.
    fn install(drv: &OxeDevice, kind: MrKind, st: MrState) -> Result<(Arc<Mr>, MrKeys)> {
        let (fast, indirect, kind) = match kind {
            MrKind::User => (None, None, 0),
            MrKind::Fast(k) => (Some(k), None, 1),
            MrKind::Indirect(k) => (None, Some(k), 2),
        };
        let mr = Arc::pin_init(
            pin_init!(Mr {
                key: AtomicU32::new(0),
                mw_binds: AtomicU32::new(0),
                fast,
                indirect,
                state <- new_spinlock_bh!(st),
                rereg <- kernel::new_mutex!(()),
                fault_lock <- kernel::new_mutex!((), "oxe_mr_fault"),
                faults: crate::odp::FaultStats::default(),
                walkers: AtomicU32::new(0),
                ib <- IbMrLink::new(),
                era: AtomicU32::new(0),
            }),
            GFP_KERNEL,
        )?;
        let key = drv.keys.insert(&mr)?;
        mr.key.store(key.raw(), Ordering::Release);
        inc(&drv.counters.mr_reg);
        let st = mr.state.lock();
        trace::mr_reg(
            drv.trace_id(),
            key.raw(),
            kind,
            st.range.iova(),
            st.range.len(),
            st.start,
            st.access.bits(),
            st.pages.mem.odp_stats().is_some(),
        );
        let keys = mr.keys(&st);
        drop(st);
        Ok((mr, keys))
    }
}

/// ibv_rereg_mr, in place. Every check and the new pin happen before anything
/// changes, so a failed rereg leaves the MR exactly as it was (and deregisterable).
pub(crate) fn rereg_user(
    drv: &OxeDevice,
    dev: IbDev<OxeDevice>,
    mr: &Arc<Mr>,
    req: &Rereg,
) -> Result<MrKeys> {
    // uverbs refuses a rereg without flags before it gets here, and clears
    // CHANGE_PD when the PD named is the MR's own: a request that asked
    // for nothing else is then a no-op, which mlx5 also treats as success.
    // An indirect key has no translation of its own to change: its
    // layout is changed through the send queue.
    if mr.indirect.is_some() {
        return Err(EINVAL);
    }
    if req.flags == 0 {
        return Ok(mr.keys(&mr.state.lock()));
    }
    let flags = ReregFlags::from_raw(req.flags).map_err(from_core)?;
    let _rereg = mr.rereg.lock();
    if mr.mw_binds.load(Ordering::Acquire) != 0 {
        return Err(EBUSY);
    }
    // Only reregs change the state, and they are serialized: what is read
    // here still holds at the commit below, after pinning (which sleeps).
    let (current, old_start, old_range) = {
        let st = mr.state.lock();
        let current = rereg::MrState {
            access: st.access,
            pinned_writable: st.pages.writable(),
        };
        (current, st.start, st.range)
    };
    let plan = rereg::plan(flags, current, req.access, SUPPORTED_ACCESS).map_err(from_core)?;
    let (start, range) = if flags.trans() {
        check_implicit(req.start, req.length, req.iova, plan.new_access)?;
        (req.start, translation(req.start, req.iova, req.length)?)
    } else {
        (old_start, old_range)
    };
    // A new translation, or write rights over pages pinned read-only, needs a
    // new pin: reusing a read-only pin for write access would let the device
    // write into pages the process could only read (the 2026 upstream fix).
    // (Switching between pinned and on-demand pages needs a new
    // translation: `rereg::plan`.)
    let new_pages = match plan.repin.is_some() {
        true => Some(Pages::get(
            dev,
            &drv.counters,
            start,
            range.len(),
            plan.new_access,
        )?),
        false => None,
    };
    // Commit: nothing below can fail but a window bound meanwhile (IBTA
    // 10.6.7.2.1: an MR with windows bound keeps its translation and rights).
    let mut st = mr.state.lock();
    if mr.mw_binds.load(Ordering::Acquire) != 0 {
        return Err(EBUSY);
    }
    st.access = plan.new_access;
    st.start = start;
    st.range = range;
    if plan.change_pd {
        st.pd = req.pd;
    }
    let old_pages = new_pages.map(|p| core::mem::replace(&mut st.pages, p));
    // The key stays, but what it names has changed: a message begun
    // before goes no further ([`Mr::era`]).
    mr.era.fetch_add(1, Ordering::AcqRel);
    let keys = mr.keys(&st);
    trace::mr_rereg(
        drv.trace_id(),
        mr.lkey(),
        req.flags,
        old_range.iova(),
        old_range.len(),
        current.access.bits(),
        range.iova(),
        range.len(),
        plan.new_access.bits(),
    );
    drop(st);
    // Unpin the old pages outside the MR lock.
    drop(old_pages);
    inc(&drv.counters.mr_rereg);
    Ok(keys)
}

/// Undoes [`reg_user`] when the verb fails after it: the keys stop
/// resolving at once, and the pages are unpinned when the last reference
/// (a packet being placed may hold one) goes.
pub(crate) fn withdraw(drv: &OxeDevice, mr: &Arc<Mr>) {
    mr.state.lock().revoked = true;
    drv.keys.remove(Key::from_raw(mr.lkey()).index());
    trace::mr_dereg(drv.trace_id(), mr.lkey());
    dec(&drv.counters.mr_reg);
    limits::release(&drv.counters, Kind::Mr);
}

/// ibv_dereg_mr: refused while windows are bound (IBTA 10.6.7.2.1); otherwise the
/// key stops resolving at once and the pages are unpinned when the last
/// user lets go (immediately, when no data path holds the MR).
pub(crate) fn dereg(drv: &OxeDevice, mr: &Arc<Mr>) -> Result {
    {
        // Under the state lock that bind_window holds from its checks to
        // its count: a bind either counted before this looks (EBUSY) or
        // finds the MR revoked.
        let mut st = mr.state.lock();
        if mr.mw_binds.load(Ordering::Acquire) != 0 {
            return Err(EBUSY);
        }
        st.revoked = true;
    }
    drv.keys.remove(Key::from_raw(mr.lkey()).index());
    trace::mr_dereg(drv.trace_id(), mr.lkey());
    inc(&drv.counters.mr_dereg);
    limits::release(&drv.counters, Kind::Mr);
    Ok(())
}
