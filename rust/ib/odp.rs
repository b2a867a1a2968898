// SPDX-License-Identifier: GPL-2.0

//! On-demand paging: user memory an MR translates without pinning it.
//!
//! ib_core's `ib_umem_odp` watches the range with an mmu interval notifier
//! and faults pages in through hmm. Its page list changes while a fault
//! runs, under a mutex, and the receive path runs in softirq, where it can
//! neither sleep nor take that mutex. So each ODP umem keeps a translation
//! table of its own, behind a softirq-safe spinlock: a fault (process
//! context) copies the pages it brought in into the table, and an
//! invalidation empties the invalidated part of it. Every access to the
//! pages runs under the same lock, so an access that raced with an
//! invalidation either finished on the old pages before the invalidation
//! returned (and so before the kernel let the pages go) or finds them gone:
//! never a copy into a page that has left the process.
//!
//! An access that finds a page missing fails with `EAGAIN`; the driver
//! faults the range in from process context ([`OdpUmem::fault`]) and tries
//! again.

use super::device::IbDev;
use super::error::from_err_ptr;
use super::lock::{new_spinlock_bh, SpinLockBh};
use super::umem::UmemRef;
use crate::bindings as b;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::page::{PAGE_SHIFT, PAGE_SIZE};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};
use kernel::types::ScopeGuard;

/// What the owner of ODP memory learns about its pages: the invalidation
/// callback and the fault hook of the driver, for its statistics.
pub(crate) trait OdpEvents: Send + Sync + 'static {
    /// The kernel took `pages` translated pages of the range away
    /// (munmap, MADV_DONTNEED, migration, COW after fork...); the table no
    /// longer has them when this is called.
    fn invalidated(&self, pages: u64);
    /// A fault brought `pages` pages of the range in.
    fn faulted(&self, pages: u64);
}

/// What faults and invalidations did to ODP memory since registration.
#[derive(Clone, Copy, Default)]
pub(crate) struct History {
    /// Pages faults brought in, and the faults that brought any.
    pub(crate) faulted_pages: u64,
    pub(crate) faults: u64,
    /// Pages invalidations took away, and the invalidations that took any.
    pub(crate) invalidated_pages: u64,
    pub(crate) invalidations: u64,
}

/// Counts the events it hears, for an ODP range's (or an implicit MR's)
/// history, and passes them on.
pub(super) struct Tally {
    faulted: AtomicU64,
    faults: AtomicU64,
    invalidated: AtomicU64,
    invalidations: AtomicU64,
    up: Arc<dyn OdpEvents>,
}

impl Tally {
    pub(super) fn new(up: Arc<dyn OdpEvents>) -> Self {
        Tally {
            faulted: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            invalidated: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
            up,
        }
    }

    /// What was heard so far.
    pub(super) fn history(&self) -> History {
        History {
            faulted_pages: self.faulted.load(Ordering::Relaxed),
            faults: self.faults.load(Ordering::Relaxed),
            invalidated_pages: self.invalidated.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
        }
    }
}

impl OdpEvents for Tally {
    fn invalidated(&self, pages: u64) {
        self.invalidated.fetch_add(pages, Ordering::Relaxed);
        self.invalidations.fetch_add(1, Ordering::Relaxed);
        self.up.invalidated(pages);
    }

    fn faulted(&self, pages: u64) {
        self.faulted.fetch_add(pages, Ordering::Relaxed);
        self.faults.fetch_add(1, Ordering::Relaxed);
        self.up.faulted(pages);
    }
}

/// A table entry: the page frame number shifted up, and these flags.
const PRESENT: usize = 1;
const WRITABLE: usize = 2;
/// A fault of the page failed (the address is not mapped, or not
/// writable): accesses fail (EFAULT) instead of asking for the fault
/// again. On a page that is not present, for [`FAILED_FOR_US`] after the
/// failure: the entry keeps its time (jiffies) where a page frame number
/// would be. On a present read-only page, until the mapping changes.
const FAILED: usize = 4;
const PFN_SHIFT: u32 = 3;

/// How long a failed fault's answer stands. It must outlast the longest
/// wait between the NAK that queued the fault and the retry that meets
/// its answer (the largest RNR timer, 655 ms, plus slack for a slow
/// kernel), so that the retry fails instead of faulting again forever.
/// Past it, the page is tried again: the process may have mapped
/// something there since, which no notifier reports.
const FAILED_FOR_US: u64 = 2_000_000;

/// A failed entry, stamped now.
fn failed_now() -> usize {
    ((super::work::jiffies() as usize) << PFN_SHIFT) | FAILED
}

/// How long a failed fault's answer stands, in jiffies.
pub(super) fn failure_jiffies() -> u64 {
    super::work::usecs_to_jiffies(FAILED_FOR_US)
}

/// Whether a demand fault that failed with `e` says the pages cannot be
/// had (and marks them), rather than "not now".
pub(super) fn definitive(e: Error) -> bool {
    e == EFAULT || e == EPERM || e == EINVAL
}

/// Whether the failure recorded in `e` still stands.
fn failure_stands(e: usize) -> bool {
    let now = (super::work::jiffies() as usize) << PFN_SHIFT;
    let age = now.wrapping_sub(e & !((1 << PFN_SHIFT) - 1)) >> PFN_SHIFT;
    (age as u64) < failure_jiffies()
}

/// What the notifier reaches through the umem's `private` pointer.
#[pin_data]
pub(super) struct Shared {
    /// One entry per page of the range, from `base` on (0: not present).
    #[pin]
    table: SpinLockBh<KVVec<usize>>,
    /// This range's faults and invalidations, passed on to its owner.
    events: Tally,
    /// The pages translated now.
    present: AtomicU64,
    /// Held by a fault from start to end (see `OdpUmem::fault`).
    #[pin]
    faulting: Mutex<()>,
    /// Faults running or waiting for `faulting`.
    faults_now: AtomicU32,
}

/// What a fault does about pages that are not translated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultMode {
    /// Faults them in; a page that cannot be had is marked failed, and
    /// the access that wanted it fails.
    Demand,
    /// Faults them in, best effort: read-ahead past what an access needs
    /// (the rest of its message). A page that cannot be had stays as it
    /// was, untranslated and unmarked, for its own access to decide.
    Ahead,
    /// Takes only what the process has mapped already, faulting nothing
    /// (IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT).
    Mapped,
}

/// A failed fault is searched page by page for the pages that cannot be
/// had only up to this many pages.
pub(super) const REFINE_PAGES: u64 = 16;

/// An ODP umem and the translation table in front of it.
///
/// # Invariants
///
/// `umem` is the `umem` of an ib_umem_odp from `ib_umem_odp_get`, whose
/// `private` is `shared`, the box the handle keeps until after the release.
pub(crate) struct OdpUmem {
    umem: UmemRef<Pin<KBox<Shared>>>,
    shared: NonNull<Shared>,
    /// The start of the watched range in the process's address space:
    /// the registered start's page, or its huge page for HUGETLB.
    base: u64,
    /// The offset of the registered start from `base`.
    first_off: u64,
    /// The registered length.
    len: u64,
}

// SAFETY: the umem is owned by this handle and used through ib_core's
// locked functions; the table has its own lock.
unsafe impl Send for OdpUmem {}
// SAFETY: as above.
unsafe impl Sync for OdpUmem {}

/// The ops ib_core's notifier calls: one table, shared by every ODP umem.
static NOTIFIER_OPS: b::mmu_interval_notifier_ops = b::mmu_interval_notifier_ops {
    invalidate: Some(invalidate),
    invalidate_start: None,
    invalidate_finish: None,
};

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn invalidate(
    mni: *mut b::mmu_interval_notifier,
    range: *const b::mmu_notifier_range,
    cur_seq: kernel::ffi::c_ulong,
) -> bool {
    // SAFETY: the notifier is the `notifier` field of a live ib_umem_odp
    // (release removes it, waiting for callbacks, before freeing), and the
    // range is the kernel's, for this call.
    unsafe {
        // The umem mutex sleeps; the OOM reaper's unblockable calls get
        // "retry" (false) and the pages stay until the process exits.
        if (*range).flags & b::MMU_NOTIFIER_RANGE_BLOCKABLE == 0 {
            return false;
        }
        let at = core::mem::offset_of!(b::ib_umem_odp, notifier);
        let odp = mni.cast::<u8>().sub(at).cast::<b::ib_umem_odp>();
        let mutex = core::ptr::addr_of_mut!((*odp).umem_mutex);
        b::mutex_lock(mutex);
        // Set by `get` under this mutex; null before, when nothing was
        // faulted in.
        let shared = (*odp).private.cast::<Shared>().cast_const().as_ref();
        // mmu_interval_set_seq(): faults that started before now retry.
        core::ptr::addr_of_mut!((*mni).invalidate_seq).write_volatile(cur_seq);
        let tree = &(*mni).interval_tree;
        let (start, end) = (
            (*range).start.max(tree.start),
            (*range).end.min(tree.last.wrapping_add(1)),
        );
        let dropped = if start < end {
            let first = (start - tree.start) >> PAGE_SHIFT;
            let last = (end - 1 - tree.start) >> PAGE_SHIFT;
            let mut n = 0u64;
            if let Some(shared) = shared {
                let mut table = shared.table.lock();
                for e in table.iter_mut().take(last + 1).skip(first) {
                    n += u64::from(*e & PRESENT != 0);
                    *e = 0;
                }
                // Under the table's lock, as a fault's count: the two
                // never cross, and `present` never dips below 0.
                shared.present.fetch_sub(n, Ordering::Relaxed);
            }
            b::ib_umem_odp_unmap_dma_pages(odp, start as u64, end as u64);
            n
        } else {
            0
        };
        b::mutex_unlock(mutex);
        if start < end {
            crate::bindings::trace::odp_invalidate(start as u64, end as u64, dropped);
        }
        if let Some(shared) = shared.filter(|_| dropped != 0) {
            shared.events.invalidated(dropped);
        }
    }
    true
}

/// The umem inside an ib_umem_odp, or the ERR_PTR as it came.
pub(super) fn umem_of(p: *mut b::ib_umem_odp) -> *mut b::ib_umem {
    match from_err_ptr(p) {
        // SAFETY: a live ib_umem_odp; its umem is a field of it.
        Ok(p) => unsafe { core::ptr::addr_of_mut!((*p).umem) },
        Err(_) => p.cast(),
    }
}

/// The ib_umem_odp around `umem`.
///
/// # Safety
///
/// `umem` is the `umem` field of an ib_umem_odp.
pub(super) unsafe fn odp_of(umem: *mut b::ib_umem) -> *mut b::ib_umem_odp {
    let at = core::mem::offset_of!(b::ib_umem_odp, umem);
    // SAFETY: the field lies `at` bytes into its ib_umem_odp (caller
    // contract).
    unsafe { umem.cast::<u8>().sub(at).cast() }
}

impl OdpUmem {
    /// Watches `[addr, addr + len)` of the calling process for driver
    /// `D`'s device, with nothing faulted in yet. `access` is the MR's (IB
    /// access flags, ON_DEMAND among them; with HUGETLB, ib_core faults
    /// whole huge pages, and a range that is not backed by them fails its
    /// faults).
    pub(crate) fn get<D: super::driver::Driver>(
        dev: IbDev<D>,
        addr: u64,
        len: u64,
        access: u32,
        events: Arc<dyn OdpEvents>,
    ) -> Result<Self> {
        let len_c = usize::try_from(len).map_err(|_| EINVAL)?;
        let get = || {
            // SAFETY: a registered device (IbDev invariant); ib_umem_odp_get
            // checks the range and the caller's mm itself, and returns an
            // ERR_PTR on failure. The ops are static.
            let p = unsafe {
                b::ib_umem_odp_get(
                    dev.as_ptr(),
                    addr as usize,
                    len_c,
                    access as i32,
                    &NOTIFIER_OPS,
                )
            };
            umem_of(p)
        };
        Self::from_umem(get, addr, len, events)
    }

    /// Watches `[addr, addr + len)` of the process of implicit ODP umem
    /// `root` (a child of chunked ODP memory: see `super::chunked_odp`).
    /// Process context, any process.
    ///
    /// # Safety
    ///
    /// `root` is a live ib_umem_odp from `ib_umem_odp_alloc_implicit`,
    /// whose mm is kept from being freed (mmgrab) for the call.
    pub(super) unsafe fn child(
        root: *mut b::ib_umem_odp,
        addr: u64,
        len: u64,
        events: Arc<dyn OdpEvents>,
    ) -> Result<Self> {
        let len_c = usize::try_from(len).map_err(|_| EINVAL)?;
        let get = || {
            // SAFETY: an implicit root whose mm stays allocated (caller
            // contract); ib_umem_odp_alloc_child takes the mm's users
            // itself, fails if the process has gone, and returns an
            // ERR_PTR on failure. The ops are static.
            let p =
                unsafe { b::ib_umem_odp_alloc_child(root, addr as usize, len_c, &NOTIFIER_OPS) };
            umem_of(p)
        };
        Self::from_umem(get, addr, len, events)
    }

    /// The handle on the ODP umem `get` returns for `[addr, addr + len)`,
    /// with a table for the range its notifier watches.
    fn from_umem(
        get: impl FnOnce() -> *mut b::ib_umem,
        addr: u64,
        len: u64,
        events: Arc<dyn OdpEvents>,
    ) -> Result<Self> {
        let shared = KBox::pin_init(
            pin_init!(Shared {
                table <- new_spinlock_bh!(KVVec::new(), "oxe_odp_table"),
                events: Tally::new(events),
                present: AtomicU64::new(0),
                faulting <- kernel::new_mutex!(()),
                faults_now: AtomicU32::new(0),
            }),
            GFP_KERNEL,
        )?;
        let umem = UmemRef::get(get, shared)?;
        let shared = umem.keep().map(|s| NonNull::from(&**s)).ok_or(EINVAL)?;
        // SAFETY: the umem is a field of a live ib_umem_odp (UmemRef
        // invariant, and `get`'s contract); its interval is fixed at
        // creation.
        let (base, last) = unsafe {
            let odp = odp_of(umem.as_ptr());
            let tree = &(*odp).notifier.interval_tree;
            (tree.start as u64, tree.last as u64)
        };
        // The table covers the watched range, page by page: the
        // notifier's interval and ib_core's page list both start at its
        // (huge) page boundary.
        let pages =
            usize::try_from((last.wrapping_sub(base) >> PAGE_SHIFT) + 1).map_err(|_| EINVAL)?;
        let first_off = addr.checked_sub(base).ok_or(EINVAL)?;
        if first_off
            .checked_add(len)
            .is_none_or(|e| e > last - base + 1)
        {
            return Err(EINVAL);
        }
        let mut table = KVVec::with_capacity(pages, GFP_KERNEL_ACCOUNT)?;
        table.resize(pages, 0, GFP_KERNEL_ACCOUNT)?;
        // SAFETY: kept alive by `umem`; nothing reads the table before
        // `private` is set below.
        *unsafe { shared.as_ref() }.table.lock() = table;
        let this = OdpUmem {
            umem,
            shared,
            base,
            first_off,
            len,
        };
        let odp = this.odp();
        // SAFETY: a live umem, ours. No invalidation reaches the table
        // before `private` is set: it reads `private` under the umem mutex,
        // taken here too, and with nothing faulted in there is nothing to
        // drop before.
        unsafe {
            let mutex = core::ptr::addr_of_mut!((*odp).umem_mutex);
            b::mutex_lock(mutex);
            (*odp).private = shared.as_ptr().cast();
            b::mutex_unlock(mutex);
        }
        // INVARIANT: `private` is `shared`, kept by `umem`.
        Ok(this)
    }

    /// The ib_umem_odp around the umem.
    fn odp(&self) -> *mut b::ib_umem_odp {
        // SAFETY: the umem is a field of an ib_umem_odp (type invariant).
        unsafe { odp_of(self.umem.as_ptr()) }
    }

    fn shared(&self) -> &Shared {
        // SAFETY: kept alive by `umem` (type invariant).
        unsafe { self.shared.as_ref() }
    }

    /// Pages in the range.
    pub(crate) fn page_count(&self) -> usize {
        self.shared().table.lock().len()
    }

    /// What faults and invalidations did to the range since registration.
    pub(crate) fn history(&self) -> History {
        self.shared().events.history()
    }

    /// Whether a fault of the range is running (or waiting to) now.
    pub(crate) fn faulting(&self) -> bool {
        self.shared().faults_now.load(Ordering::Relaxed) != 0
    }

    /// Pages translated now.
    pub(crate) fn present(&self) -> u64 {
        self.shared().present.load(Ordering::Relaxed)
    }

    /// Brings bytes `[off, off + len)` of the range in (writable if
    /// `write`) and into the table, as `mode` says. Sleeps: process
    /// context only.
    pub(crate) fn fault(&self, off: u64, len: u64, write: bool, mode: FaultMode) -> Result {
        let end = off
            .checked_add(len)
            .filter(|&e| e <= self.len)
            .ok_or(EFAULT)?;
        if len == 0 {
            return Ok(());
        }
        // One fault of this range at a time: hmm writes the shared page
        // list without a lock, and a walk that started before another one
        // finished could leave an older page there.
        let s = self.shared();
        s.faults_now.fetch_add(1, Ordering::Relaxed);
        let _now = ScopeGuard::new(|| {
            s.faults_now.fetch_sub(1, Ordering::Relaxed);
        });
        let _one = s.faulting.lock();
        let r = self.fault_locked(off, end, write, mode != FaultMode::Mapped);
        let err = match r {
            Err(e) if mode == FaultMode::Demand && definitive(e) => e,
            r => return r,
        };
        // Nothing mapped there (EFAULT), no write permission (EPERM), or
        // no huge page where HUGETLB asked for one, or the process gone
        // (EINVAL): the pages that cannot be had are marked, one by one,
        // so that their accesses fail instead of faulting again. A long
        // range is not searched: it stays untranslated, to be tried again.
        let first = (self.first_off + off) >> PAGE_SHIFT;
        let last = (self.first_off + end - 1) >> PAGE_SHIFT;
        if last - first < REFINE_PAGES {
            for page in first..=last {
                let lo = (page << PAGE_SHIFT).max(self.first_off + off) - self.first_off;
                let hi = ((page + 1) << PAGE_SHIFT).min(self.first_off + end) - self.first_off;
                if self.fault_locked(lo, hi, write, true).is_err() {
                    let mut table = self.shared().table.lock();
                    if let Some(e) = table.get_mut(page as usize) {
                        if *e & PRESENT == 0 {
                            *e = failed_now();
                        } else if write && *e & WRITABLE == 0 {
                            // Readable, not writable: the mark stands
                            // until the mapping changes (mprotect
                            // invalidates the page).
                            *e |= FAILED;
                        }
                    }
                }
            }
        }
        Err(err)
    }

    /// [`OdpUmem::fault`] of `[off, end)`, with `faulting` held.
    fn fault_locked(&self, off: u64, end: u64, write: bool, fault: bool) -> Result {
        let va = self.base + self.first_off + off;
        let mask = if write {
            b::hmm_pfn_flags_HMM_PFN_WRITE as u64
        } else {
            0
        };
        let odp = self.odp();
        // SAFETY: a live umem (type invariant); the range lies inside it.
        // On success the umem mutex is held, and the page list is valid
        // for the range until it is released.
        let ret = unsafe { b::ib_umem_odp_map_dma_and_lock(odp, va, end - off, mask, fault) };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        let first = ((self.first_off + off) >> PAGE_SHIFT) as usize;
        let last = ((self.first_off + end - 1) >> PAGE_SHIFT) as usize;
        let mut added = 0u64;
        // SAFETY: the mutex is held (above); the page list has an entry
        // per page of the range, as the table does.
        unsafe {
            let list = (*odp).map.pfn_list;
            let mut table = self.shared().table.lock();
            for i in first..=last {
                let hmm = *list.add(i);
                let Some(e) = table.get_mut(i) else { break };
                if hmm & b::hmm_pfn_flags_HMM_PFN_VALID == 0 {
                    continue;
                }
                let pfn = hmm & !b::hmm_pfn_flags_HMM_PFN_FLAGS;
                let w = if hmm & b::hmm_pfn_flags_HMM_PFN_WRITE != 0 {
                    WRITABLE
                } else {
                    0
                };
                added += u64::from(*e & PRESENT == 0);
                *e = (pfn << PFN_SHIFT) | PRESENT | w;
            }
            self.shared().present.fetch_add(added, Ordering::Relaxed);
            drop(table);
            // The device writes through the kernel's mapping, which leaves
            // the process's page table entry as it was: a writable page is
            // marked dirty now, or reclaim could drop what the device
            // wrote (a MADV_FREE page, a clean page of a file). A later
            // clean (writeback, MADV_FREE) invalidates the page first, so
            // the device's next write faults and marks it again.
            for i in first..=last {
                let hmm = *list.add(i);
                let want = b::hmm_pfn_flags_HMM_PFN_VALID | b::hmm_pfn_flags_HMM_PFN_WRITE;
                if hmm & want == want {
                    b::oxe_shim_set_pfn_dirty(hmm & !b::hmm_pfn_flags_HMM_PFN_FLAGS);
                }
            }
            b::mutex_unlock(core::ptr::addr_of_mut!((*odp).umem_mutex));
        }
        if added != 0 {
            self.shared().events.faulted(added);
        }
        if fault {
            crate::bindings::trace::odp_fault(va, va + (end - off), added);
        }
        Ok(())
    }

    /// Runs `f` on the table with its lock held: every access to the pages
    /// happens inside, so an invalidation waits for it.
    pub(crate) fn with_pages<R>(&self, f: impl FnOnce(&OdpPages<'_>) -> R) -> R {
        let table = self.shared().table.lock();
        f(&OdpPages {
            table: &table,
            first_off: self.first_off,
        })
    }
}

/// The table of an [`OdpUmem`], locked.
pub(crate) struct OdpPages<'a> {
    table: &'a KVVec<usize>,
    first_off: u64,
}

impl OdpPages<'_> {
    /// Where byte `off` of the range is: (page frame, offset in it, bytes
    /// left in that page). `EAGAIN` if the page is not translated (or not
    /// writable, for a write), `EFAULT` past the end.
    pub(super) fn locate(&self, off: u64, write: bool) -> Result<(usize, usize, usize)> {
        let abs =
            usize::try_from(off.checked_add(self.first_off).ok_or(EFAULT)?).map_err(|_| EFAULT)?;
        let e = *self.table.get(abs >> PAGE_SHIFT).ok_or(EFAULT)?;
        let need = if write { PRESENT | WRITABLE } else { PRESENT };
        if e & need != need {
            let stands = e & PRESENT != 0 || failure_stands(e);
            return Err(if e & FAILED != 0 && stands {
                EFAULT
            } else {
                EAGAIN
            });
        }
        let in_page = abs & (PAGE_SIZE - 1);
        Ok((e >> PFN_SHIFT, in_page, PAGE_SIZE - in_page))
    }
}

impl OdpUmem {
    /// Whether every page of `[off, off + len)` is translated (writable
    /// if `write`); `EAGAIN` if not.
    pub(crate) fn probe(&self, off: u64, len: u64, write: bool) -> Result {
        if len == 0 {
            return Ok(());
        }
        let last = off.checked_add(len - 1).ok_or(EFAULT)?;
        self.with_pages(|p| {
            let mut o = off;
            loop {
                let (_, _, room) = p.locate(o, write)?;
                match o.checked_add(room as u64) {
                    Some(next) if next <= last => o = next,
                    _ => return Ok(()),
                }
            }
        })
    }
}
