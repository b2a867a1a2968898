// SPDX-License-Identifier: GPL-2.0

//! The memory of a queue (CQ, SQ, RQ, SRQ) shared with user space, laid out
//! as `oxe_core::abi` describes: two indices and a power-of-two array of
//! slots. User queues are mapped through rdma_user_mmap entries; kernel
//! consumers' queues are the same memory, just never mapped.
//!
//! The memory is shared with a process that may write anything into it at
//! any time, so the kernel side never hands out references into it: slots
//! are copied in and out, and indices are single atomic loads and stores.

use super::lock::DualLock;
use crate::bindings as b;
use crate::oxe_core::abi::{OxeQueueMap, OXE_QUEUE_CONSUMER, OXE_QUEUE_PRODUCER, OXE_QUEUE_SLOTS};
use crate::oxe_core::queue::Resize;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The largest slot any queue uses. Readers take what a WQE uses from its
/// slot (`Ring::read_slot_at`), not the slot whole.
pub(crate) const MAX_SLOT: usize = 1024;

/// Queue memory (vmap'd pages, mappable to user space), freed when the last owner (the queue, or the mmap entry while
/// user space still has it mapped) lets go.
///
/// # Invariants
///
/// `addr` is a live `RingMem::alloc` mapping, page aligned.
struct RingMem {
    addr: NonNull<u8>,
}

// SAFETY: plain memory; all accesses below are atomic or byte copies.
unsafe impl Send for RingMem {}
// SAFETY: as above.
unsafe impl Sync for RingMem {}

impl RingMem {
    /// `pages` zeroed pages, mapped contiguously in the kernel and mappable
    /// to user space.
    ///
    /// vmalloc_user() charges no memory cgroup, so a process could hold
    /// queue memory past its limit. This builds the same mapping from pages
    /// allocated with __GFP_ACCOUNT when `account` says a process will map
    /// it. At the cgroup's limit the verb fails with ENOMEM
    /// (__GFP_RETRY_MAYFAIL) rather than the OOM killer picking a process
    /// for it.
    fn alloc(pages: usize, account: bool) -> Result<Self> {
        let (array_gfp, gfp) = if account {
            let retry = 1 << b::___GFP_RETRY_MAYFAIL_BIT;
            (
                GFP_KERNEL_ACCOUNT,
                b::GFP_KERNEL_ACCOUNT | retry | b::__GFP_ZERO,
            )
        } else {
            (GFP_KERNEL, b::GFP_KERNEL | b::__GFP_ZERO)
        };
        let mut array = KVVec::<*mut b::page>::with_capacity(pages, array_gfp)?;
        let free = |array: &KVVec<*mut b::page>| {
            for &page in array.iter() {
                // SAFETY: an order-0 page allocated below, not mapped.
                unsafe { b::__free_pages(page, 0) };
            }
        };
        for _ in 0..pages {
            // SAFETY: plain allocation (NULL on failure).
            let page = unsafe { b::alloc_pages(gfp, 0) };
            if page.is_null() || array.push(page, array_gfp).is_err() {
                free(&array);
                return Err(ENOMEM);
            }
        }
        // SAFETY: `pages` pages of ours. On success the mapping owns them
        // and their array (VM_MAP_PUT_PAGES: vfree() frees both; the array
        // is kvmalloc'd, as it requires), and remap_vmalloc_range() accepts
        // it (VM_USERMAP).
        let addr = unsafe { b::oxe_shim_vmap_user(array.as_mut_ptr(), pages as u32) };
        match NonNull::new(addr.cast::<u8>()) {
            Some(addr) => {
                let _ = array.into_raw_parts();
                // INVARIANT: just mapped, page aligned.
                Ok(RingMem { addr })
            }
            None => {
                free(&array);
                Err(ENOMEM)
            }
        }
    }
}

impl Drop for RingMem {
    fn drop(&mut self) {
        // SAFETY: a VM_MAP_PUT_PAGES mapping, freed once (type invariant),
        // with its pages and their array.
        unsafe { b::vfree(self.addr.as_ptr().cast()) };
    }
}

/// An rdma_user_mmap entry that keeps its queue memory alive until
/// ib_core's `mmap_free` (after the object is gone and every mapping closed).
#[repr(C)]
struct MmapEntry {
    rdma: b::rdma_user_mmap_entry,
    mem: Arc<RingMem>,
}

/// A queue of `num_slots` slots of `slot_size` bytes.
pub(crate) struct Ring {
    mem: Arc<RingMem>,
    num_slots: u32,
    slot_size: u32,
    map: OxeQueueMap,
    entry: AtomicPtr<MmapEntry>,
}

// SAFETY: see RingMem; the entry pointer is only passed back to ib_core.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

/// A user context to map queues into.
#[derive(Clone, Copy)]
pub(crate) struct Uctx(pub(super) NonNull<b::ib_ucontext>);

impl Ring {
    /// A queue of at least `min_slots` slots (rounded up to a power of two)
    /// of at least `min_slot` bytes, mapped for `uctx` if given.
    pub(crate) fn new(uctx: Option<Uctx>, min_slots: u32, min_slot: u32) -> Result<Self> {
        let num_slots = min_slots.max(1).checked_next_power_of_two().ok_or(EINVAL)?;
        let slot_size = min_slot.max(16).checked_next_power_of_two().ok_or(EINVAL)?;
        let bytes = (num_slots as usize)
            .checked_mul(slot_size as usize)
            .and_then(|n| n.checked_add(OXE_QUEUE_SLOTS as usize))
            .ok_or(EINVAL)?;
        let len = bytes.checked_next_multiple_of(PAGE_SIZE).ok_or(EINVAL)?;
        if len > (256 << 20) {
            return Err(EINVAL);
        }
        // Charged to the caller's memory cgroup when a process will map it;
        // a kernel consumer's queues are the kernel's.
        let mem = Arc::new(RingMem::alloc(len / PAGE_SIZE, uctx.is_some())?, GFP_KERNEL)?;
        let mut ring = Ring {
            mem: mem.clone(),
            num_slots,
            slot_size,
            map: OxeQueueMap {
                mmap_offset: 0,
                mmap_len: len as u64,
                num_slots,
                slot_size,
            },
            entry: AtomicPtr::new(core::ptr::null_mut()),
        };
        if let Some(uctx) = uctx {
            let entry = KBox::new(
                MmapEntry {
                    rdma: Default::default(),
                    mem,
                },
                GFP_KERNEL,
            )?;
            let entry = KBox::into_raw(entry);
            // SAFETY: a live user context; the entry is ours until inserted,
            // then ib_core's until mmap_free hands it back.
            let ret = unsafe {
                b::rdma_user_mmap_entry_insert(uctx.0.as_ptr(), &raw mut (*entry).rdma, len)
            };
            if ret != 0 {
                // SAFETY: not inserted, so still ours.
                drop(unsafe { KBox::from_raw(entry) });
                return Err(Error::from_errno(ret));
            }
            // (rdma_user_mmap_get_offset(), an inline function.)
            // SAFETY: inserted, and alive until mmap_free (after the object's
            // own reference, which this function returns, goes).
            let pgoff = unsafe { (*entry).rdma.start_pgoff } as u64;
            ring.map.mmap_offset = pgoff << kernel::page::PAGE_SHIFT;
            ring.entry = AtomicPtr::new(entry);
        }
        Ok(ring)
    }

    /// What user space needs to map and use the queue.
    pub(crate) fn map(&self) -> OxeQueueMap {
        self.map
    }

    pub(crate) fn num_slots(&self) -> u32 {
        self.num_slots
    }

    pub(crate) fn slot_size(&self) -> u32 {
        self.slot_size
    }

    fn index(&self, at: u32) -> &AtomicU32 {
        // SAFETY: the index words lie within the live allocation, are 4-byte
        // aligned, and are only ever accessed atomically by both sides.
        unsafe { AtomicU32::from_ptr(self.mem.addr.as_ptr().add(at as usize).cast()) }
    }

    pub(crate) fn producer(&self) -> u32 {
        self.index(OXE_QUEUE_PRODUCER).load(Ordering::Acquire)
    }

    pub(crate) fn set_producer(&self, v: u32) {
        self.index(OXE_QUEUE_PRODUCER).store(v, Ordering::Release)
    }

    pub(crate) fn consumer(&self) -> u32 {
        self.index(OXE_QUEUE_CONSUMER).load(Ordering::Acquire)
    }

    pub(crate) fn set_consumer(&self, v: u32) {
        self.index(OXE_QUEUE_CONSUMER).store(v, Ordering::Release)
    }

    fn slot_ptr(&self, idx: u32) -> *mut u8 {
        let slot = (idx & (self.num_slots - 1)) as usize;
        let off = OXE_QUEUE_SLOTS as usize + slot * self.slot_size as usize;
        // SAFETY: `off + slot_size <= len` by construction in `new`.
        unsafe { self.mem.addr.as_ptr().add(off) }
    }

    /// Copies slot `idx` (modulo the ring) into `out` (up to a slot's size).
    pub(crate) fn read_slot(&self, idx: u32, out: &mut [u8]) {
        let n = out.len().min(self.slot_size as usize);
        // SAFETY: the slot is within the allocation; user space may write it
        // concurrently, which only makes the copied bytes arbitrary; the
        // caller validates them as untrusted input.
        unsafe { core::ptr::copy_nonoverlapping(self.slot_ptr(idx), out.as_mut_ptr(), n) };
    }

    /// Copies the bytes of slot `idx` from byte `at` into `out`: false, with
    /// nothing copied, if they run past the slot. Lets a reader take what a
    /// WQE uses, not the whole slot through a buffer of the largest size.
    pub(crate) fn read_slot_at(&self, idx: u32, at: usize, out: &mut [u8]) -> bool {
        if at
            .checked_add(out.len())
            .is_none_or(|end| end > self.slot_size as usize)
        {
            return false;
        }
        // SAFETY: `at + out.len()` is within the slot (checked above), so
        // within the allocation; concurrent writes from user space only
        // make the bytes arbitrary, as in `read_slot`.
        unsafe {
            core::ptr::copy_nonoverlapping(self.slot_ptr(idx).add(at), out.as_mut_ptr(), out.len())
        };
        true
    }

    /// Copies `data` (up to a slot's size) into slot `idx`.
    pub(crate) fn write_slot(&self, idx: u32, data: &[u8]) {
        let n = data.len().min(self.slot_size as usize);
        // SAFETY: as in `read_slot`.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.slot_ptr(idx), n) };
    }

    /// Copies the entries `[from, to)` (free-running indices) of `old` to
    /// the same indices here. `EINVAL` if they are more than either queue
    /// holds. The caller holds what keeps both rings in place.
    fn copy_entries(&self, old: &Ring, from: u32, to: u32) -> Result {
        let plan = Resize::new(from, to, old.num_slots, self.num_slots)
            .map_err(super::error::from_core)?;
        let n = old.slot_size.min(self.slot_size) as usize;
        for (from, to) in plan.moves() {
            // SAFETY: two distinct live allocations; each slot lies within
            // its own (`slot_ptr`), and `n` is at most either slot's size.
            // User space may write the old slot meanwhile, which only makes
            // the copied bytes arbitrary; readers validate them anyway.
            unsafe { core::ptr::copy_nonoverlapping(old.slot_ptr(from), self.slot_ptr(to), n) };
        }
        Ok(())
    }

    /// Stops mapping: user space can no longer map the queue (the memory
    /// lives on until existing mappings go). Call while the user context
    /// is alive, i.e. from the destroy verb, and never under a spinlock:
    /// removing the entry sleeps. See [`Ring::detach`] for that case.
    pub(crate) fn unmap(&self) {
        drop(self.detach());
    }

    /// Takes the mmap entry off the ring, for removal once the returned
    /// value is dropped: cheap enough for a spinlock's critical section, the
    /// sleeping part left to after it.
    pub(crate) fn detach(&self) -> Detached {
        Detached(self.entry.swap(core::ptr::null_mut(), Ordering::AcqRel))
    }
}

/// Entries a resize copies in one step, with the queue's locks held (and,
/// for a CQ, interrupts off): at 256-byte inline-receive slots, 16 KiB.
/// A queue of 64K entries is moved in a thousand short steps, not one
/// 16 MiB copy that holds interrupts off throughout.
pub(crate) const RESIZE_STEP: u32 = 64;

/// Moves a queue's entries to a new ring a step at a time. The caller
/// takes the queue's locks, calls [`Mover::step`] with the current ring
/// and indices, and lets go of the locks before the next step; the last
/// step returns [`Step::Done`] with the locks still held, for the caller
/// to put the new ring in place under them.
///
/// Between steps producers go on adding entries and consumers taking them.
/// An entry keeps its index in the new ring, so what an earlier step copied
/// stays right: the last step copies only what came after it, and sets the
/// new ring's indices to the old one's at that moment.
#[derive(Default)]
struct Mover {
    /// Entries before this index (and from the consumer on) are copied.
    copied: Option<u32>,
    /// The most entries one step copied.
    most: u32,
    /// The entries the new ring took over (once done).
    moved: u32,
    /// Steps taken so far.
    steps: u32,
}

/// Moves the ring `q` guards to `new`, [`RESIZE_STEP`] entries at a time
/// ([`DualLock::stepwise`]: the `_bh` end held throughout, the irq end for
/// each step). `indices` gives, with both ends held, the queue's consumer
/// and producer index, or refuses the move; `moved` runs under the locks
/// of the last step once the new ring is in place. Returns the result, the
/// ring no longer in use (the old one, or `new` if refused: the caller
/// drops it out of the locks, as dropping a ring may sleep), and what
/// [`Mover::tally`] says of the move.
pub(crate) fn move_ring<B: Unpin, I: Unpin>(
    q: &DualLock<B, I, Ring>,
    mut new: Ring,
    mut indices: impl FnMut(&mut B, &mut I, &Ring, &Ring) -> Result<(u32, u32)>,
    mut moved: impl FnMut(&mut B),
) -> (Result, Ring, (u32, u32)) {
    let mut mover = Mover::default();
    let mut q = q.stepwise();
    let r = loop {
        let step = q.step(|b, i, ring| {
            let (consumer, producer) = match indices(b, i, ring, &new) {
                Ok(at) => at,
                Err(e) => return Step::Done(Err(e)),
            };
            let step = mover.step(&new, ring, consumer, producer);
            if let Step::Done(Ok(())) = step {
                // The new ring in place: `new` holds the old one now.
                core::mem::swap(ring, &mut new);
                moved(b);
            }
            step
        });
        if let Step::Done(r) = step {
            break r;
        }
    };
    drop(q);
    (r, new, mover.tally())
}

/// What a [`Mover::step`] left to do.
enum Step {
    /// Let go of the locks and call again.
    More,
    /// The new ring holds every entry, at its index, and the old ring's
    /// indices (or, with an error, the move is refused).
    Done(Result),
}

impl Mover {
    /// One step of moving `old`'s entries `[consumer, producer)` into `new`.
    fn step(&mut self, new: &Ring, old: &Ring, consumer: u32, producer: u32) -> Step {
        // Every step but the last copies RESIZE_STEP entries further on,
        // unless an index moves back (only user space can): a process
        // that keeps moving its index back could keep the move going, and
        // is refused past twice the steps its queue can take.
        self.steps += 1;
        if self.steps > 2 * (old.num_slots / RESIZE_STEP) + 2 {
            return Step::Done(Err(EAGAIN));
        }
        // Resume after the last step's copy, unless the consumer has passed
        // it (or moved where no consumer could go: the last step decides).
        let from = match self.copied {
            Some(c) if producer.wrapping_sub(c) <= producer.wrapping_sub(consumer) => c,
            _ => consumer,
        };
        let left = producer.wrapping_sub(from);
        if left > RESIZE_STEP && left <= old.num_slots {
            let to = from.wrapping_add(RESIZE_STEP);
            if let Err(e) = new.copy_entries(old, from, to) {
                return Step::Done(Err(e));
            }
            self.copied = Some(to);
            self.most = self.most.max(RESIZE_STEP);
            return Step::More;
        }
        // The last step: every entry from the consumer on must fit, and
        // those not copied yet are.
        if let Err(e) = Resize::new(consumer, producer, old.num_slots, new.num_slots)
            .map_err(super::error::from_core)
            .and_then(|_| new.copy_entries(old, from, producer))
        {
            return Step::Done(Err(e));
        }
        self.most = self.most.max(left);
        self.moved = producer.wrapping_sub(consumer);
        new.set_consumer(consumer);
        new.set_producer(producer);
        Step::Done(Ok(()))
    }

    /// For the device's counters: the entries moved, and the most one
    /// step copied.
    fn tally(&self) -> (u32, u32) {
        (self.moved, self.most)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // Normally done by the destroy verb already.
        self.unmap();
    }
}

/// A ring's mmap entry, taken off by [`Ring::detach`]: removed (so user
/// space can map the queue no more) when dropped, which may sleep.
#[must_use = "dropping it removes the entry; drop it outside the lock"]
pub(crate) struct Detached(*mut MmapEntry);

impl Drop for Detached {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: inserted in `Ring::new` and taken off the ring once
            // (the swap in `detach`), so removed once; ib_core calls
            // mmap_free when its last reference goes.
            unsafe { b::rdma_user_mmap_entry_remove(&raw mut (*self.0).rdma) };
        }
    }
}

/// ops.mmap: maps the queue behind the entry at the vma's offset.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn mmap(
    uctx: *mut b::ib_ucontext,
    vma: *mut b::vm_area_struct,
) -> kernel::ffi::c_int {
    // SAFETY: ib_core's arguments.
    let e = unsafe { b::rdma_user_mmap_entry_get(uctx, vma) };
    if e.is_null() {
        return EINVAL.to_errno();
    }
    let entry = e.cast::<MmapEntry>();
    // SAFETY: every entry oxe inserts is an MmapEntry (rdma field first); the
    // reference we hold keeps it alive. remap_vmalloc_range checks the vma
    // size against the allocation.
    let mem: &Arc<RingMem> = unsafe { &*core::ptr::addr_of!((*entry).mem) };
    // SAFETY: the memory is alive (held by the entry).
    let ret = unsafe { b::remap_vmalloc_range(vma, mem.addr.as_ptr().cast(), 0) };
    // SAFETY: balances rdma_user_mmap_entry_get.
    unsafe { b::rdma_user_mmap_entry_put(e) };
    ret
}

/// ops.mmap_free: the entry's last reference is gone.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn mmap_free(e: *mut b::rdma_user_mmap_entry) {
    // SAFETY: an MmapEntry leaked by Ring::new, handed back exactly once.
    drop(unsafe { KBox::from_raw(e.cast::<MmapEntry>()) });
}
