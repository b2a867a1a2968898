// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! A queue the kernel maps into the process: the memory behind the safe
//! ring logic in `ring`.
//!
//! The kernel allocates each queue and describes it in its reply to the
//! create verb ([`OxeQueueMap`]); the provider maps it from the context's
//! uverbs file descriptor and unmaps it when the object is destroyed. The
//! description is checked ([`QueueLayout::new`]) before anything is
//! mapped, which is what keeps every index and slot access below inside
//! the mapping.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use core::sync::atomic::AtomicU32;

use oxe_core::abi::{OxeQueueMap, OXE_QUEUE_CONSUMER, OXE_QUEUE_PRODUCER};

use super::errno::errno;
use crate::ring::{QueueLayout, QueueMem};
use crate::sys;
use crate::verbs::EPROTO;

/// One mapped queue; unmapped on drop.
#[derive(Debug)]
pub(crate) struct MappedQueue {
    base: NonNull<u8>,
    layout: QueueLayout,
}

// SAFETY: the mapping belongs to the process, not to a thread; the
// `MappedQueue` owns it alone (nothing else unmaps it), and the queue
// objects that hold one serialise their use of it with a lock.
unsafe impl Send for MappedQueue {}

impl MappedQueue {
    /// Maps the queue `map` describes from `cmd_fd`; `min_slot_size` is the
    /// header every slot must hold.
    pub(crate) fn map(
        cmd_fd: c_int,
        map: &OxeQueueMap,
        min_slot_size: usize,
    ) -> Result<Self, c_int> {
        let layout = QueueLayout::new(map, min_slot_size)?;
        let offset = sys::__off_t::try_from(map.mmap_offset).map_err(|_| EPROTO)?;
        // SAFETY: a fresh shared mapping chosen by the kernel (NULL hint) of
        // the uverbs file at the offset the kernel handed out; it overlaps
        // no existing Rust object. The result is checked below.
        let addr = unsafe {
            sys::mmap(
                core::ptr::null_mut(),
                layout.map_len(),
                (sys::PROT_READ | sys::PROT_WRITE) as c_int,
                sys::MAP_SHARED as c_int,
                cmd_fd,
                offset,
            )
        };
        // MAP_FAILED is `(void *)-1`.
        if addr as usize == usize::MAX {
            return Err(errno());
        }
        let base = NonNull::new(addr.cast::<u8>()).ok_or(EPROTO)?;
        Ok(Self { base, layout })
    }

    /// The address of byte `offset` of the mapping.
    fn at(&self, offset: usize) -> *mut u8 {
        self.base.as_ptr().wrapping_add(offset)
    }

    /// The index at byte `offset` of the mapping.
    fn index(&self, offset: u32) -> &AtomicU32 {
        // SAFETY: `offset` is OXE_QUEUE_PRODUCER or OXE_QUEUE_CONSUMER,
        // inside the mapping (its length covers the slots, which start
        // after both) and 4-byte aligned (the mapping is page aligned). The
        // kernel touches the word only atomically, and the reference lives
        // no longer than `self`, which keeps the mapping.
        unsafe { &*self.at(offset as usize).cast::<AtomicU32>() }
    }
}

impl QueueMem for MappedQueue {
    fn layout(&self) -> QueueLayout {
        self.layout
    }

    fn producer_index(&self) -> &AtomicU32 {
        self.index(OXE_QUEUE_PRODUCER)
    }

    fn consumer_index(&self) -> &AtomicU32 {
        self.index(OXE_QUEUE_CONSUMER)
    }

    fn slot(&self, index: u32) -> &[u8] {
        // SAFETY: `slot_offset` stays inside the mapping, whose length was
        // checked to hold every slot; the slot is behind the indices, so it
        // overlaps neither. The queue discipline (`ring`) only hands out a
        // slot while the kernel leaves it alone.
        unsafe {
            core::slice::from_raw_parts(
                self.at(self.layout.slot_offset(index)),
                self.layout.slot_size(),
            )
        }
    }

    fn slot_mut(&mut self, index: u32) -> &mut [u8] {
        // SAFETY: as for `slot`; `&mut self` makes this the only reference
        // into the slots that this process holds.
        unsafe {
            core::slice::from_raw_parts_mut(
                self.at(self.layout.slot_offset(index)),
                self.layout.slot_size(),
            )
        }
    }
}

impl Drop for MappedQueue {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of that length; every reference
        // into it borrowed `self`, so none is left. A failure (which would
        // mean the range is not mapped) leaves nothing to clean up.
        unsafe { sys::munmap(self.base.as_ptr().cast::<c_void>(), self.layout.map_len()) };
    }
}
