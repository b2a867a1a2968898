// SPDX-License-Identifier: GPL-2.0

//! On-demand paging in chunks: the memory of an implicit ODP MR (one key
//! for the whole address space of a process, `ibv_reg_mr(pd, NULL,
//! SIZE_MAX, IBV_ACCESS_ON_DEMAND | ...)`), and of an explicit one.
//!
//! Nothing is known about an implicit MR's range at registration, and a
//! table for all of it cannot exist. An explicit MR's table could, but
//! ib_core's page list and ours cost 16 bytes per page, allocated and
//! zeroed at registration: more than pinning costs a 1 GiB MR, for an MR
//! whose point is to cost nothing until it is used. So both are an
//! implicit root umem (it holds the process's mm) and a set of children:
//! explicit ODP ranges of [`CHILD_SIZE`] bytes, aligned, each with its own
//! notifier and table ([`OdpUmem`]). A child is created by the first fault
//! that needs it, in process context, and freed once the OS has taken all
//! its pages back (by the next fault of the MR, which finds it empty). An
//! access finds its children by address; one that is missing answers
//! `EAGAIN`, as a missing page does, and the driver's fault creates it.
//! (A HUGETLB MR is one explicit umem still: ib_core's children are of
//! small pages.)
//!
//! The children are 2 MiB: a child costs a table and ib_core's page list
//! (8 bytes per page each) and a notifier in the mm's interval tree, so
//! small children keep what a scattered use of the address space costs
//! close to what it touches. A process has at most [`MAX_CHILDREN`] alive
//! at a time over all its MRs; past that, an MR that needs a child frees
//! its own children with no page present first (a prefetch that does not
//! fault creates such children; a fault that fails, as a peer's access
//! where the process maps nothing does, frees the child it made), and then
//! the one accesses found least recently: its pages
//! are faulted again when next needed, so a peer touching one page in
//! each of many regions cannot fill the MR for good. An MR with no child
//! to give up fails the fault (ENOMEM).

use super::lock::{new_spinlock_bh, SpinLockBh};
use super::odp::{
    definitive, failure_jiffies, odp_of, umem_of, FaultMode, History, OdpEvents, OdpUmem, Tally,
    REFINE_PAGES,
};
use super::umem::UmemRef;
use crate::bindings as b;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kernel::mm::Mm;
use kernel::page::PAGE_SHIFT;
use kernel::prelude::*;
use kernel::sync::aref::ARef;
use kernel::sync::{Arc, Mutex};

/// log2 of [`CHILD_SIZE`].
const CHILD_SHIFT: u32 = 21;
/// The address space is covered by children of this many bytes, aligned.
pub(crate) const CHILD_SIZE: u64 = 1 << CHILD_SHIFT;
/// Children one process may have at once, over all its ODP MRs on every
/// oxe device: 16 GiB of address space translated. A child's page lists
/// are ib_core's (about 9 KiB, `ib_umem_odp_alloc_child`), allocated
/// without `__GFP_ACCOUNT`, which no driver can charge to the process's
/// memory cgroup: this bounds them instead, at about 72 MiB a process,
/// whether a child is made by the process's own verb or by the device's
/// work for it.
const MAX_CHILDREN: usize = 8192;

/// One process's count of children, shared by its MRs.
struct Budget {
    /// The process's `mm_struct`, by address: held (mmgrab) by every MR
    /// that shares the budget, so no other process has it meanwhile.
    mm: usize,
    used: AtomicUsize,
}

impl Budget {
    /// A child's share of the budget, if there is room.
    fn charge(this: &Arc<Self>) -> Option<Charge> {
        this.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_CHILDREN).then_some(n + 1)
            })
            .ok()?;
        Some(Charge(this.clone()))
    }
}

/// One child's place in its process's budget, given back when it goes.
struct Charge(Arc<Budget>);

impl Drop for Charge {
    fn drop(&mut self) {
        self.0.used.fetch_sub(1, Ordering::Release);
    }
}

/// The budget of every process with an ODP MR in chunks, with how many
/// such MRs it has.
struct Budgets(KVec<(Arc<Budget>, usize)>);

kernel::sync::global_lock! {
    // SAFETY: initialized in `init`, from the module initializer, before
    // any device exists.
    unsafe(uninit) static BUDGETS: Mutex<Budgets> = Budgets(KVec::new());
}

/// Sets up the budgets' registry (module init).
pub(crate) fn init() {
    // SAFETY: called once, from module init, before any other use.
    unsafe { BUDGETS.init() };
}

/// Frees the registry's memory (module exit, every MR gone).
pub(crate) fn exit() {
    drop(core::mem::take(&mut BUDGETS.lock().0));
}

/// An MR's hold on its process's budget: the registry forgets a budget
/// with the last MR that holds it. Dropped with the MR's root umem, in
/// process context (it takes the registry's mutex), before the mm goes.
struct BudgetRef(Arc<Budget>);

impl BudgetRef {
    fn of(mm: usize) -> Result<Self> {
        let mut reg = BUDGETS.lock();
        if let Some((b, users)) = reg.0.iter_mut().find(|(b, _)| b.mm == mm) {
            *users += 1;
            return Ok(BudgetRef(b.clone()));
        }
        let b = Arc::new(
            Budget {
                mm,
                used: AtomicUsize::new(0),
            },
            GFP_KERNEL,
        )?;
        reg.0.push((b.clone(), 1), GFP_KERNEL)?;
        Ok(BudgetRef(b))
    }
}

impl Drop for BudgetRef {
    fn drop(&mut self) {
        let mut reg = BUDGETS.lock();
        let Some(i) = reg.0.iter().position(|(b, _)| Arc::ptr_eq(b, &self.0)) else {
            return;
        };
        let last = reg.0.get_mut(i).is_some_and(|(_, users)| {
            *users -= 1;
            *users == 0
        });
        if last {
            drop(reg.0.remove(i));
        }
    }
}

/// The share of an access that one child holds: `[at, end)`, in the
/// child at `index`. (An address the process cannot map gets a child for
/// as long as its fault takes to fail, hmm finding no VMA there; then the
/// child goes.)
struct Piece {
    index: u64,
    at: u64,
    end: u64,
}

impl Piece {
    /// Where the piece starts in its child.
    fn offset(&self) -> u64 {
        self.at - (self.index << CHILD_SHIFT)
    }
}

/// The pieces of `[addr, addr + len)`, in address order.
struct Pieces {
    at: u64,
    end: u64,
}

/// No 64-bit Linux maps user memory above this (x86-64 with 5-level page
/// tables stops at 2^56, arm64 at 2^52). An access past it fails at once,
/// as one outside the MR would, and makes no child.
const USER_END: u64 = 1 << 57;

impl Pieces {
    /// EFAULT if the range reaches past [`USER_END`].
    fn of(addr: u64, len: u64) -> Result<Self> {
        let end = addr
            .checked_add(len)
            .filter(|&e| e <= USER_END)
            .ok_or(EFAULT)?;
        Ok(Pieces { at: addr, end })
    }
}

impl Iterator for Pieces {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.at >= self.end {
            return None;
        }
        let index = self.at >> CHILD_SHIFT;
        // (Below USER_END: no overflow.)
        let child_end = (index + 1) << CHILD_SHIFT;
        let piece = Piece {
            index,
            at: self.at,
            end: self.end.min(child_end),
        };
        self.at = piece.end;
        Some(piece)
    }
}

/// A child: the range `[index << CHILD_SHIFT, +CHILD_SIZE)`.
struct Child {
    index: u64,
    odp: Arc<OdpUmem>,
    /// When an access last found it (jiffies): at the cap, the child used
    /// least recently makes room.
    used: AtomicU64,
    _charge: Charge,
}

#[pin_data]
struct Inner {
    /// The children, by index. Accesses (softirq) clone a child out and
    /// use it without this lock.
    #[pin]
    children: SpinLockBh<KVVec<Child>>,
    /// Held while children are created or freed (process context).
    #[pin]
    growing: Mutex<()>,
    /// What every child heard, freed children included, passed on to the
    /// device's counters.
    totals: Arc<Tally>,
}

/// Which children [`ChunkedOdp::reap`] frees.
#[derive(Clone, Copy)]
enum Reap {
    /// Those the OS has taken every page of back.
    Emptied,
    /// Those with no page present, emptied or never filled (faults at
    /// addresses with nothing mapped make such children).
    Empty,
    /// The one accesses found least recently.
    LeastRecentlyUsed,
    /// The one at this index, if it has no page present.
    Unfilled(u64),
}

/// Ranges a [`ChunkedOdp`] keeps of [`Unfilled`] failures.
const UNFILLED_SLOTS: usize = 16;

/// A failed range of pages and when it failed, in one word (0: none), so
/// that accesses in softirq read it whole without a lock: the first page
/// plus one (45 bits: addresses stop at [`USER_END`]), the page count less
/// one (4 bits: at most [`REFINE_PAGES`]), and the low 15 bits of the
/// jiffies of the failure (far more than a failure stands).
#[derive(Clone, Copy)]
struct Unfilled(u64);

impl Unfilled {
    const STAMP_BITS: u32 = 15;
    const COUNT_BITS: u32 = 4;
    const STAMP_MASK: u64 = (1 << Self::STAMP_BITS) - 1;

    /// The pages of `[at, end)`, failed now; `None` if they are too many.
    fn of(at: u64, end: u64) -> Option<Self> {
        let (first, last) = (at >> PAGE_SHIFT, end.checked_sub(1)? >> PAGE_SHIFT);
        let count = last.checked_sub(first)? + 1;
        if count > REFINE_PAGES || first + 1 >= 1 << (64 - Self::STAMP_BITS - Self::COUNT_BITS) {
            return None;
        }
        let stamp = super::work::jiffies() & Self::STAMP_MASK;
        Some(Unfilled(
            ((first + 1) << (Self::STAMP_BITS + Self::COUNT_BITS))
                | ((count - 1) << Self::STAMP_BITS)
                | stamp,
        ))
    }

    fn first(self) -> u64 {
        (self.0 >> (Self::STAMP_BITS + Self::COUNT_BITS)).wrapping_sub(1)
    }

    fn last(self) -> u64 {
        self.first() + ((self.0 >> Self::STAMP_BITS) & ((1 << Self::COUNT_BITS) - 1))
    }

    fn slot(self) -> usize {
        (self.first() % UNFILLED_SLOTS as u64) as usize
    }

    fn stands(self) -> bool {
        if self.0 == 0 {
            return false;
        }
        let age =
            (super::work::jiffies() & Self::STAMP_MASK).wrapping_sub(self.0) & Self::STAMP_MASK;
        age < failure_jiffies()
    }
}

/// The memory of an implicit ODP MR, or of an explicit one in chunks.
/// Offsets into it are bytes from `origin`: addresses, for an implicit MR.
///
/// # Invariants
///
/// `root` is the umem of an ib_umem_odp from `ib_umem_odp_alloc_implicit`,
/// kept with a reference (mmgrab) on its process's mm.
pub(crate) struct ChunkedOdp {
    root: UmemRef<RootKeep>,
    inner: Pin<KBox<Inner>>,
    /// The address of offset 0: the registered start (0 when implicit).
    origin: u64,
    implicit: bool,
    /// The process has gone (a child could not be made: its mm has no
    /// users, and never will again). Every access fails from then on, as
    /// one outside the MR does, instead of asking for a fault that can
    /// never be had.
    gone: AtomicBool,
    /// The process's count of children, which this MR's count in.
    budget: Arc<Budget>,
    /// Pages whose demand fault failed in a child made for it and freed at
    /// once (`Reap::Unfilled`), which took the pages' failure marks with
    /// it. An access to them fails for as long as the marks would have
    /// stood, instead of asking for the same fault again and again: a
    /// requester gathering from an unmapped source would otherwise never
    /// complete. A few ranges, each in the slot of its first page's hash
    /// (see [`Unfilled`]).
    unfilled: [AtomicU64; UNFILLED_SLOTS],
}

/// What an MR's root umem keeps until it is released (in process context,
/// `UmemRef`): its place in the budgets' registry, then the mm (mmgrab),
/// which names the budget.
struct RootKeep {
    _budget: BudgetRef,
    _mm: ARef<Mm>,
}

// SAFETY: the root is only read (its mm and pid) by ib_core when a child
// is created; the children are behind a lock.
unsafe impl Send for ChunkedOdp {}
// SAFETY: as above.
unsafe impl Sync for ChunkedOdp {}

impl ChunkedOdp {
    /// An implicit MR's memory: the calling process's address space.
    /// `access` is the MR's (IB access flags); `events` hears every
    /// child's faults and invalidations.
    pub(crate) fn implicit<D: super::driver::Driver>(
        dev: super::device::IbDev<D>,
        access: u32,
        events: Arc<dyn OdpEvents>,
    ) -> Result<Self> {
        Self::new(dev, access, events, 0, true)
    }

    /// An explicit MR's memory, from `start` in the calling process (the
    /// MR checks its bounds).
    pub(crate) fn explicit<D: super::driver::Driver>(
        dev: super::device::IbDev<D>,
        start: u64,
        access: u32,
        events: Arc<dyn OdpEvents>,
    ) -> Result<Self> {
        Self::new(dev, access, events, start, false)
    }

    fn new<D: super::driver::Driver>(
        dev: super::device::IbDev<D>,
        access: u32,
        events: Arc<dyn OdpEvents>,
        origin: u64,
        implicit: bool,
    ) -> Result<Self> {
        // ib_core's root only records the mm; children are made from it
        // later, from the device's work, after the registering call has
        // returned. The mm must still be there to be asked then (a child
        // checks that the process lives), so the root keeps it.
        let mm: ARef<Mm> = ARef::from(&**kernel::current!().mm().ok_or(EFAULT)?);
        let member = BudgetRef::of(mm.as_raw() as usize)?;
        let budget = member.0.clone();
        let get = || {
            // SAFETY: a registered device (IbDev invariant), in the
            // registering process's context; an ERR_PTR on failure.
            let p = unsafe { b::ib_umem_odp_alloc_implicit(dev.as_ptr(), access as i32) };
            umem_of(p)
        };
        // INVARIANT: an implicit root, kept with its mm.
        let keep = RootKeep {
            _budget: member,
            _mm: mm,
        };
        let root = UmemRef::get(get, keep)?;
        let totals = Arc::new(Tally::new(events), GFP_KERNEL)?;
        let inner = KBox::pin_init(
            pin_init!(Inner {
                children <- new_spinlock_bh!(KVVec::new(), "oxe_odp_children"),
                growing <- kernel::new_mutex!(()),
                totals,
            }),
            GFP_KERNEL,
        )?;
        Ok(ChunkedOdp {
            root,
            inner,
            origin,
            implicit,
            gone: AtomicBool::new(false),
            budget,
            unfilled: [const { AtomicU64::new(0) }; UNFILLED_SLOTS],
        })
    }

    /// The child covering address `index << CHILD_SHIFT`, if there is one.
    fn child(&self, index: u64) -> Option<Arc<OdpUmem>> {
        let children = self.inner.children.lock();
        let at = children.binary_search_by_key(&index, |c| c.index).ok()?;
        let c = &children[at];
        c.used.store(super::work::jiffies(), Ordering::Relaxed);
        Some(c.odp.clone())
    }

    /// Whether this is an implicit MR's memory.
    pub(crate) fn is_implicit(&self) -> bool {
        self.implicit
    }

    /// The pieces of the bytes at `[off, off + len)`, and the address of
    /// the first.
    fn pieces(&self, off: u64, len: u64) -> Result<(u64, Pieces)> {
        if self.gone.load(Ordering::Relaxed) {
            return Err(EFAULT);
        }
        let addr = self.origin.checked_add(off).ok_or(EFAULT)?;
        Ok((addr, Pieces::of(addr, len)?))
    }

    /// Runs `f` on each child's share of bytes `[off, off + len)`: the
    /// child, the offset in it, and the bytes of the request it holds. A
    /// missing child is `EAGAIN`, before anything of it runs.
    pub(super) fn for_each_span(
        &self,
        off: u64,
        len: u64,
        mut f: impl FnMut(&OdpUmem, u64, Range<usize>) -> Result,
    ) -> Result {
        let (addr, pieces) = self.pieces(off, len)?;
        for p in pieces {
            let Some(odp) = self.child(p.index) else {
                return Err(if self.failed_unfilled(p.at, p.end) {
                    EFAULT
                } else {
                    EAGAIN
                });
            };
            let from = usize::try_from(p.at - addr).map_err(|_| EFAULT)?;
            let to = usize::try_from(p.end - addr).map_err(|_| EFAULT)?;
            f(&odp, p.offset(), from..to)?;
        }
        Ok(())
    }

    /// Whether every page of bytes `[off, off + len)` is translated
    /// (writable if `write`); `EAGAIN` if not.
    pub(crate) fn probe(&self, off: u64, len: u64, write: bool) -> Result {
        self.for_each_span(off, len, |odp, off, r| {
            odp.probe(off, (r.end - r.start) as u64, write)
        })
    }

    /// Brings bytes `[off, off + len)` in (writable if `write`) as `mode`
    /// says, creating the children it needs. Sleeps: process context, any
    /// process.
    pub(crate) fn fault(&self, off: u64, len: u64, write: bool, mode: FaultMode) -> Result {
        for p in self.pieces(off, len)?.1 {
            let (odp, made) = match self.child(p.index) {
                Some(odp) => (odp, false),
                None => (self.create(p.index)?, true),
            };
            if let Err(e) = odp.fault(p.offset(), p.end - p.at, write, mode) {
                // A child made for a fault that brought nothing in (a
                // peer's access where the process maps nothing) goes at
                // once: it would hold a place in the process's budget
                // that only this MR could give back. What its marks said
                // is kept here instead.
                if made {
                    let _grow = self.inner.growing.lock();
                    if self.reap(Reap::Unfilled(p.index))
                        && mode == FaultMode::Demand
                        && definitive(e)
                    {
                        self.note_unfilled(p.at, p.end);
                    }
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Creates the child at `index` (or finds the one a concurrent fault
    /// created), after freeing the children the OS emptied.
    fn create(&self, index: u64) -> Result<Arc<OdpUmem>> {
        let _grow = self.inner.growing.lock();
        if let Some(odp) = self.child(index) {
            return Ok(odp);
        }
        self.reap(Reap::Emptied);
        // At the process's cap, this MR makes room among its own
        // children, or the fault fails: another MR's children are its own.
        let mut charge = Budget::charge(&self.budget);
        // Dropping a translation is always allowed: the pages come back on
        // their next access.
        for step in [Reap::Empty, Reap::LeastRecentlyUsed] {
            if charge.is_some() {
                break;
            }
            self.reap(step);
            charge = Budget::charge(&self.budget);
        }
        let charge = charge.ok_or(ENOMEM)?;
        // (`index` is below USER_END >> CHILD_SHIFT: no overflow.)
        let addr = index << CHILD_SHIFT;
        // SAFETY: the root is an implicit ib_umem_odp whose mm is grabbed
        // (type invariant), live while `self` is.
        let odp = unsafe {
            let root = odp_of(self.root.as_ptr());
            let events: Arc<dyn OdpEvents> = self.inner.totals.clone();
            OdpUmem::child(root, addr, CHILD_SIZE, events)
        }
        // ib_core's EFAULT: the mm has no users left.
        .inspect_err(|&e| {
            if e == EFAULT {
                self.gone.store(true, Ordering::Relaxed);
            }
        })?;
        let odp = Arc::new(odp, GFP_KERNEL)?;
        // Only this function and `reap` change the set, both under
        // `growing`: the length read here holds until the insert below,
        // and a bigger vector is allocated outside the spinlock.
        let (len, room) = {
            let children = self.inner.children.lock();
            (children.len(), children.capacity() > children.len())
        };
        let bigger = match room {
            true => None,
            false => Some(KVVec::with_capacity((2 * len).max(16), GFP_KERNEL)?),
        };
        let mut children = self.inner.children.lock();
        if let Some(mut v) = bigger {
            for c in children.drain_all() {
                v.push_within_capacity(c).map_err(|_| ENOMEM)?;
            }
            *children = v;
        }
        // (Not found: `growing` kept anyone else from inserting it.)
        let (Ok(slot) | Err(slot)) = children.binary_search_by_key(&index, |c| c.index);
        let child = Child {
            index,
            odp: odp.clone(),
            used: AtomicU64::new(super::work::jiffies()),
            _charge: charge,
        };
        children
            .insert_within_capacity(slot, child)
            .map_err(|_| ENOMEM)?;
        Ok(odp)
    }

    /// Frees children, `which` of them; with `growing` held. A child a
    /// fault is filling now stays. Returns whether any went.
    fn reap(&self, which: Reap) -> bool {
        let lru = match which {
            Reap::LeastRecentlyUsed => {
                let children = self.inner.children.lock();
                children
                    .iter()
                    .filter(|c| !c.odp.faulting())
                    .min_by_key(|c| c.used.load(Ordering::Relaxed))
                    .map(|c| c.index)
            }
            _ => None,
        };
        let goes = |c: &Child| {
            !c.odp.faulting()
                && match which {
                    Reap::Emptied => c.odp.present() == 0 && c.odp.history().invalidated_pages != 0,
                    Reap::Empty => c.odp.present() == 0,
                    Reap::LeastRecentlyUsed => Some(c.index) == lru,
                    Reap::Unfilled(i) => c.index == i && c.odp.present() == 0,
                }
        };
        let n = self
            .inner
            .children
            .lock()
            .iter()
            .filter(|c| goes(c))
            .count();
        if n == 0 {
            return false;
        }
        let Ok(mut gone) = KVVec::with_capacity(n, GFP_KERNEL) else {
            return false;
        };
        self.inner
            .children
            .lock()
            .retain(|c| !(goes(c) && gone.push_within_capacity(c.odp.clone()).is_ok()));
        let any = !gone.is_empty();
        // Released here, outside the lock (a release sleeps), unless an
        // access still holds one: then when it lets go.
        drop(gone);
        any
    }

    /// Keeps the failure of the pages of `[at, end)` (addresses), whose
    /// child went with its marks; a range longer than a failed fault's
    /// search ([`REFINE_PAGES`]) was not marked, and is not kept.
    fn note_unfilled(&self, at: u64, end: u64) {
        if let Some(u) = Unfilled::of(at, end) {
            self.unfilled[u.slot()].store(u.0, Ordering::Relaxed);
        }
    }

    /// Whether a page of `[at, end)` failed in a child freed since, and
    /// the failure still stands.
    fn failed_unfilled(&self, at: u64, end: u64) -> bool {
        let (first, last) = (at >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT);
        self.unfilled.iter().any(|e| {
            let u = Unfilled(e.load(Ordering::Relaxed));
            u.stands() && u.first() <= last && first <= u.last()
        })
    }

    /// Pages translated now, in all the children.
    pub(crate) fn present(&self) -> u64 {
        let children = self.inner.children.lock();
        children
            .iter()
            .fold(0u64, |n, c| n.saturating_add(c.odp.present()))
    }

    /// What faults and invalidations did to the children since
    /// registration (freed children included).
    pub(crate) fn history(&self) -> History {
        self.inner.totals.history()
    }

    /// Children alive, and the pages they cover.
    pub(crate) fn children(&self) -> (usize, usize) {
        let children = self.inner.children.lock();
        let pages = children.iter().map(|c| c.odp.page_count()).sum();
        (children.len(), pages)
    }
}
