// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The index discipline of oxe's mapped queues, shared by every queue the
//! provider touches (SQ, RQ, SRQ, CQ).
//!
//! A queue is written by one side and read by the other, with a producer
//! and a consumer index in the mapping (see `oxe_core::abi`). Each side
//! keeps a private copy of the index it owns and never reloads it from the
//! mapping: the other side could scribble over it, and the only index worth
//! believing is one this process wrote. The other side's index is read
//! with acquire ordering (its slot accesses happened before it moved the
//! index), and ours is published with release ordering (our slot accesses
//! happen before the other side sees it move).
//!
//! The memory is reached through [`QueueMem`], so the arithmetic here runs
//! unchanged on the real mapping (`ffi::queue`) and on heap rings in the
//! unit tests.

use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, Ordering};

use oxe_core::abi::{OxeQueueMap, OXE_QUEUE_SLOTS};

use crate::verbs::EPROTO;

/// How a mapped queue is cut into slots, as the kernel described it and
/// this provider checked it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueLayout {
    num_slots: u32,
    slot_size: u32,
    map_len: usize,
}

impl QueueLayout {
    /// Checks the kernel's description of a queue before anything is
    /// mapped, so that every later slot access stays inside the mapping
    /// whatever the kernel sent. `min_slot_size` is the largest header the
    /// queue's entries start with.
    ///
    /// A description that breaks the ABI's rules (counts not powers of two,
    /// slots too small to hold their header, a mapping too short for its
    /// slots) is `EPROTO`: the two halves of oxe disagree on the layout.
    pub(crate) fn new(map: &OxeQueueMap, min_slot_size: usize) -> Result<Self, c_int> {
        let slot_size = map.slot_size;
        if !map.num_slots.is_power_of_two()
            || !slot_size.is_power_of_two()
            || (slot_size as usize) < min_slot_size
        {
            return Err(EPROTO);
        }
        let needed = u64::from(map.num_slots)
            .checked_mul(u64::from(slot_size))
            .and_then(|slots| slots.checked_add(u64::from(OXE_QUEUE_SLOTS)))
            .ok_or(EPROTO)?;
        if needed > map.mmap_len {
            return Err(EPROTO);
        }
        let map_len = usize::try_from(map.mmap_len).map_err(|_| EPROTO)?;
        Ok(Self {
            num_slots: map.num_slots,
            slot_size,
            map_len,
        })
    }

    /// Number of slots (a power of two).
    pub(crate) fn num_slots(&self) -> u32 {
        self.num_slots
    }

    /// Bytes per slot.
    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size as usize
    }

    /// The length to map, as the kernel asked.
    pub(crate) fn map_len(&self) -> usize {
        self.map_len
    }

    /// Byte offset of the slot a free-running index designates. Always
    /// inside the mapping: [`QueueLayout::new`] checked the last slot.
    pub(crate) fn slot_offset(&self, index: u32) -> usize {
        let slot = (index & (self.num_slots - 1)) as usize;
        OXE_QUEUE_SLOTS as usize + slot * self.slot_size()
    }
}

/// The memory of one queue: its two indices and its slots.
pub(crate) trait QueueMem {
    /// The checked layout the memory was set up with.
    fn layout(&self) -> QueueLayout;
    /// The producer index, shared with the kernel.
    fn producer_index(&self) -> &AtomicU32;
    /// The consumer index, shared with the kernel.
    fn consumer_index(&self) -> &AtomicU32;
    /// The slot a free-running index designates, for reading.
    fn slot(&self, index: u32) -> &[u8];
    /// The slot a free-running index designates, for writing.
    fn slot_mut(&mut self, index: u32) -> &mut [u8];
}

/// The producing end of a queue that user space fills (SQ, RQ, SRQ).
#[derive(Debug)]
pub(crate) struct Producer<M> {
    mem: M,
    /// The next index to fill; the kernel sees it only on [`Self::publish`].
    next: u32,
}

impl<M: QueueMem> Producer<M> {
    /// A producer for a queue the kernel has just created, whose indices
    /// both start at 0.
    pub(crate) fn new(mem: M) -> Self {
        Self { mem, next: 0 }
    }

    /// The queue's layout.
    pub(crate) fn layout(&self) -> QueueLayout {
        self.mem.layout()
    }

    /// How many more slots may be filled before the kernel consumes some.
    ///
    /// A consumer index that claims the kernel read slots not yet written
    /// (more than a ring apart from ours) reads as a full queue: nothing is
    /// overwritten on the word of a broken index.
    pub(crate) fn free_slots(&self) -> u32 {
        let consumed = self.mem.consumer_index().load(Ordering::Acquire);
        let in_flight = self.next.wrapping_sub(consumed);
        self.layout().num_slots().saturating_sub(in_flight)
    }

    /// The private producer index: the next slot to fill.
    pub(crate) fn next_index(&self) -> u32 {
        self.next
    }

    /// Claims the next slot, or `None` when the queue is full. The slot
    /// stays invisible to the kernel until [`Self::publish`].
    pub(crate) fn claim(&mut self) -> Option<u32> {
        if self.free_slots() == 0 {
            return None;
        }
        let index = self.next;
        self.next = self.next.wrapping_add(1);
        Some(index)
    }

    /// The slot of an index this producer claimed and has not published.
    pub(crate) fn slot_mut(&mut self, index: u32) -> &mut [u8] {
        self.mem.slot_mut(index)
    }

    /// Forgets the claims made since `index` (which must be an earlier
    /// [`Self::next_index`] not yet published), as an aborted batch must.
    pub(crate) fn rewind(&mut self, index: u32) {
        self.next = index;
    }

    /// Hands every claimed slot to the kernel.
    pub(crate) fn publish(&self) {
        self.mem
            .producer_index()
            .store(self.next, Ordering::Release);
    }

    /// Moves to the memory of the resized queue and returns the old one
    /// (to unmap). The kernel moved every posted entry to the same index
    /// and carried both indices over (`oxe_core::queue`), so the private
    /// index stays as it is. Call with everything claimed published: a
    /// claimed slot not yet published would not have moved.
    pub(crate) fn replace_mem(&mut self, mem: M) -> M {
        core::mem::replace(&mut self.mem, mem)
    }

    /// The memory, for tests that play the kernel.
    #[cfg(test)]
    pub(crate) fn mem(&self) -> &M {
        &self.mem
    }
}

/// The consuming end of a queue the kernel fills (CQ).
#[derive(Debug)]
pub(crate) struct Consumer<M> {
    mem: M,
    /// The next index to read; the kernel sees it only on [`Self::release`].
    next: u32,
}

impl<M: QueueMem> Consumer<M> {
    /// A consumer for a queue the kernel has just created.
    pub(crate) fn new(mem: M) -> Self {
        Self { mem, next: 0 }
    }

    /// The slot at the consumer index, `None` if the kernel has produced
    /// nothing new. A producer index more than a ring ahead is `EPROTO`:
    /// reading on would return completions the kernel already overwrote.
    pub(crate) fn peek(&self) -> Result<Option<&[u8]>, c_int> {
        let produced = self.mem.producer_index().load(Ordering::Acquire);
        match produced.wrapping_sub(self.next) {
            0 => Ok(None),
            n if n > self.mem.layout().num_slots() => Err(EPROTO),
            _ => Ok(Some(self.mem.slot(self.next))),
        }
    }

    /// Moves past the slot [`Self::peek`] returned.
    pub(crate) fn advance(&mut self) {
        self.next = self.next.wrapping_add(1);
    }

    /// Gives the slots read so far back to the kernel.
    pub(crate) fn release(&self) {
        self.mem
            .consumer_index()
            .store(self.next, Ordering::Release);
    }

    /// Removes every unread entry `doomed` picks, keeping the others in
    /// order, and returns how many went. The call is the consumer's own
    /// business: the kernel writes only at and past the producer index it
    /// published, and reads nothing here, so rearranging the unread slots
    /// behind that index races with nothing but other consumers (whom the
    /// caller's lock excludes).
    ///
    /// Walks from the newest entry back: a kept entry moves toward the
    /// producer end by the number removed after it, into a slot already
    /// examined, and the consumer index skips the freed slots at the start.
    pub(crate) fn purge(&mut self, mut doomed: impl FnMut(&[u8]) -> bool) -> Result<u32, c_int> {
        let produced = self.mem.producer_index().load(Ordering::Acquire);
        let unread = produced.wrapping_sub(self.next);
        if unread > self.mem.layout().num_slots() {
            return Err(EPROTO);
        }
        let mut removed = 0u32;
        let mut kept = Vec::new();
        for k in (0..unread).rev() {
            let index = self.next.wrapping_add(k);
            if doomed(self.mem.slot(index)) {
                removed += 1;
            } else if removed > 0 {
                kept.clear();
                kept.extend_from_slice(self.mem.slot(index));
                self.mem
                    .slot_mut(index.wrapping_add(removed))
                    .copy_from_slice(&kept);
            }
        }
        self.next = self.next.wrapping_add(removed);
        Ok(removed)
    }

    /// Moves to the memory of the resized queue and returns the old one
    /// (to unmap). As for [`Producer::replace_mem`], the private index
    /// stays; call with every slot read released, since the kernel moved
    /// the entries from the released index on.
    pub(crate) fn replace_mem(&mut self, mem: M) -> M {
        core::mem::replace(&mut self.mem, mem)
    }

    /// The memory, for tests that play the kernel.
    #[cfg(test)]
    pub(crate) fn mem_mut(&mut self) -> &mut M {
        &mut self.mem
    }
}

/// A queue on the heap, for tests: the same indices and slots as a
/// mapping, without the mapping.
#[cfg(test)]
pub(crate) mod heap {
    use super::*;
    use oxe_core::queue::Resize;

    /// A heap-backed [`QueueMem`].
    #[derive(Debug)]
    pub(crate) struct HeapQueue {
        layout: QueueLayout,
        producer: AtomicU32,
        consumer: AtomicU32,
        slots: Vec<u8>,
    }

    impl HeapQueue {
        /// A queue of `num_slots` slots of `slot_size` bytes.
        pub(crate) fn new(num_slots: u32, slot_size: u32) -> Self {
            let map = OxeQueueMap {
                mmap_offset: 0,
                mmap_len: u64::from(OXE_QUEUE_SLOTS) + u64::from(num_slots) * u64::from(slot_size),
                num_slots,
                slot_size,
            };
            Self {
                layout: QueueLayout::new(&map, 0).expect("valid test layout"),
                producer: AtomicU32::new(0),
                consumer: AtomicU32::new(0),
                slots: vec![0; (num_slots * slot_size) as usize],
            }
        }

        /// The queue the kernel makes of `old` when resizing it to
        /// `num_slots` slots: the outstanding entries at their indices, and
        /// the same two indices (`oxe_core::queue::Resize`).
        pub(crate) fn resized(old: &HeapQueue, num_slots: u32) -> Result<Self, oxe_core::Errno> {
            let consumer = old.consumer.load(Ordering::Acquire);
            let producer = old.producer.load(Ordering::Acquire);
            let plan = Resize::new(consumer, producer, old.layout.num_slots(), num_slots)?;
            let mut new = HeapQueue::new(num_slots, old.layout.slot_size() as u32);
            for (from, to) in plan.moves() {
                new.slot_mut(to).copy_from_slice(old.slot(from));
            }
            new.consumer.store(consumer, Ordering::Release);
            new.producer.store(producer, Ordering::Release);
            Ok(new)
        }

        fn range(&self, index: u32) -> core::ops::Range<usize> {
            let start = self.layout.slot_offset(index) - OXE_QUEUE_SLOTS as usize;
            start..start + self.layout.slot_size()
        }
    }

    impl QueueMem for HeapQueue {
        fn layout(&self) -> QueueLayout {
            self.layout
        }
        fn producer_index(&self) -> &AtomicU32 {
            &self.producer
        }
        fn consumer_index(&self) -> &AtomicU32 {
            &self.consumer
        }
        fn slot(&self, index: u32) -> &[u8] {
            &self.slots[self.range(index)]
        }
        fn slot_mut(&mut self, index: u32) -> &mut [u8] {
            let range = self.range(index);
            &mut self.slots[range]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::heap::HeapQueue;
    use super::*;

    fn map(num_slots: u32, slot_size: u32, mmap_len: u64) -> OxeQueueMap {
        OxeQueueMap {
            mmap_offset: 0x1000,
            mmap_len,
            num_slots,
            slot_size,
        }
    }

    #[test]
    fn layout_accepts_a_sound_description() {
        let l = QueueLayout::new(&map(8, 64, 4096), 64).expect("valid");
        assert_eq!(l.num_slots(), 8);
        assert_eq!(l.slot_size(), 64);
        assert_eq!(l.map_len(), 4096);
        // Exactly enough room is enough.
        assert!(QueueLayout::new(&map(8, 64, 128 + 8 * 64), 64).is_ok());
    }

    #[test]
    fn layout_refuses_what_could_lead_outside_the_mapping() {
        // Not powers of two (zero slots included: nothing to index).
        assert_eq!(QueueLayout::new(&map(0, 64, 4096), 16), Err(EPROTO));
        assert_eq!(QueueLayout::new(&map(6, 64, 4096), 16), Err(EPROTO));
        assert_eq!(QueueLayout::new(&map(8, 48, 4096), 16), Err(EPROTO));
        // Slots smaller than their header.
        assert_eq!(QueueLayout::new(&map(8, 32, 4096), 64), Err(EPROTO));
        // Mapping one byte short of the last slot.
        assert_eq!(
            QueueLayout::new(&map(8, 64, 128 + 8 * 64 - 1), 64),
            Err(EPROTO)
        );
        // Huge counts are computed in 64 bits: 2^62 bytes of slots do not
        // fit a 2^62-byte mapping that also holds the indices.
        assert_eq!(
            QueueLayout::new(&map(1 << 31, 1 << 31, 1 << 62), 64),
            Err(EPROTO)
        );
    }

    #[test]
    fn slot_offsets_wrap_with_the_index() {
        let l = QueueLayout::new(&map(4, 64, 4096), 64).expect("valid");
        assert_eq!(l.slot_offset(0), 128);
        assert_eq!(l.slot_offset(3), 128 + 3 * 64);
        assert_eq!(l.slot_offset(4), 128);
        assert_eq!(l.slot_offset(u32::MAX), 128 + 3 * 64);
    }

    #[test]
    fn producer_fills_until_full_and_publishes_with_the_private_index() {
        let mut p = Producer::new(HeapQueue::new(4, 64));
        assert_eq!(p.free_slots(), 4);
        for expect in 0..4 {
            assert_eq!(p.claim(), Some(expect));
        }
        assert_eq!(p.free_slots(), 0);
        assert_eq!(p.claim(), None);
        // Nothing visible before publish.
        assert_eq!(p.mem().producer_index().load(Ordering::Relaxed), 0);
        p.publish();
        assert_eq!(p.mem().producer_index().load(Ordering::Relaxed), 4);
        // The kernel consumes two: two slots free up.
        p.mem().consumer_index().store(2, Ordering::Relaxed);
        assert_eq!(p.free_slots(), 2);
        assert_eq!(p.claim(), Some(4));
        // A scribbled producer index in memory changes nothing here.
        p.mem().producer_index().store(1000, Ordering::Relaxed);
        assert_eq!(p.claim(), Some(5));
        p.publish();
        assert_eq!(p.mem().producer_index().load(Ordering::Relaxed), 6);
    }

    #[test]
    fn producer_treats_a_broken_consumer_index_as_full() {
        let mut p = Producer::new(HeapQueue::new(4, 64));
        // The kernel claims to have consumed slots never produced.
        p.mem().consumer_index().store(3, Ordering::Relaxed);
        assert_eq!(p.free_slots(), 0);
        assert_eq!(p.claim(), None);
    }

    #[test]
    fn producer_indices_wrap_at_2_pow_32() {
        let mut p = Producer::new(HeapQueue::new(4, 64));
        p.rewind(u32::MAX - 1);
        p.mem()
            .consumer_index()
            .store(u32::MAX - 1, Ordering::Relaxed);
        assert_eq!(p.claim(), Some(u32::MAX - 1));
        assert_eq!(p.claim(), Some(u32::MAX));
        assert_eq!(p.claim(), Some(0));
        assert_eq!(p.claim(), Some(1));
        assert_eq!(p.claim(), None);
        p.mem().consumer_index().store(1, Ordering::Relaxed);
        assert_eq!(p.free_slots(), 3);
    }

    #[test]
    fn rewind_drops_unpublished_claims() {
        let mut p = Producer::new(HeapQueue::new(4, 64));
        let start = p.next_index();
        p.claim();
        p.claim();
        p.rewind(start);
        assert_eq!(p.free_slots(), 4);
        assert_eq!(p.claim(), Some(0));
    }

    #[test]
    fn slots_are_distinct_and_sized() {
        let mut p = Producer::new(HeapQueue::new(4, 32));
        let a = p.claim().unwrap();
        let b = p.claim().unwrap();
        p.slot_mut(a).fill(0xaa);
        p.slot_mut(b).fill(0xbb);
        assert_eq!(p.slot_mut(a).len(), 32);
        assert!(p.slot_mut(a).iter().all(|&x| x == 0xaa));
        assert!(p.slot_mut(b).iter().all(|&x| x == 0xbb));
        // Index 4 is slot 0 again.
        assert!(p.slot_mut(4).iter().all(|&x| x == 0xaa));
    }

    #[test]
    fn consumer_reads_what_was_produced_then_releases() {
        let mut c = Consumer::new(HeapQueue::new(4, 64));
        assert_eq!(c.peek(), Ok(None));
        c.mem_mut().slot_mut(0)[0] = 7;
        c.mem_mut().slot_mut(1)[0] = 8;
        c.mem_mut().producer_index().store(2, Ordering::Relaxed);
        assert_eq!(c.peek().unwrap().unwrap()[0], 7);
        // Peeking does not consume.
        assert_eq!(c.peek().unwrap().unwrap()[0], 7);
        c.advance();
        assert_eq!(c.peek().unwrap().unwrap()[0], 8);
        c.advance();
        assert_eq!(c.peek(), Ok(None));
        assert_eq!(c.mem_mut().consumer_index().load(Ordering::Relaxed), 0);
        c.release();
        assert_eq!(c.mem_mut().consumer_index().load(Ordering::Relaxed), 2);
    }

    #[test]
    fn producer_carries_on_in_a_resized_queue() {
        let mut p = Producer::new(HeapQueue::new(4, 64));
        // Indices near the wrap, three slots posted, one consumed.
        p.rewind(u32::MAX - 1);
        p.mem()
            .consumer_index()
            .store(u32::MAX - 1, Ordering::Relaxed);
        for v in 1..=3u8 {
            let i = p.claim().unwrap();
            p.slot_mut(i)[0] = v;
        }
        p.publish();
        p.mem().consumer_index().store(u32::MAX, Ordering::Relaxed);
        // Grow to 16: two entries outstanding, 14 slots free.
        let new = HeapQueue::resized(p.mem(), 16).unwrap();
        let old = p.replace_mem(new);
        assert_eq!(old.layout().num_slots(), 4);
        assert_eq!(p.free_slots(), 14);
        let i = p.claim().unwrap();
        assert_eq!(i, 1);
        p.slot_mut(i)[0] = 4;
        p.publish();
        // The kernel reads what is left, in order, from the new queue.
        let seen: Vec<u8> = [u32::MAX, 0, 1]
            .iter()
            .map(|&i| p.mem().slot(i)[0])
            .collect();
        assert_eq!(seen, [2, 3, 4]);
        // Shrinking below the three outstanding entries is refused.
        assert_eq!(
            HeapQueue::resized(p.mem(), 2).map(|_| ()),
            Err(oxe_core::Errno::EINVAL)
        );
    }

    #[test]
    fn consumer_carries_on_in_a_resized_queue() {
        let mut c = Consumer::new(HeapQueue::new(4, 64));
        // The kernel produces 0..6, the consumer reads and releases four.
        for v in 0..6u32 {
            c.mem_mut().slot_mut(v)[0] = v as u8;
            c.mem_mut().producer_index().store(v + 1, Ordering::Relaxed);
            if v < 4 {
                assert_eq!(c.peek().unwrap().unwrap()[0], v as u8);
                c.advance();
                c.release();
            }
        }
        // Shrink to exactly the two outstanding entries.
        let new = HeapQueue::resized(c.mem_mut(), 2).unwrap();
        c.replace_mem(new);
        assert_eq!(c.peek().unwrap().unwrap()[0], 4);
        c.advance();
        assert_eq!(c.peek().unwrap().unwrap()[0], 5);
        c.advance();
        assert_eq!(c.peek(), Ok(None));
        c.release();
        assert_eq!(c.mem_mut().consumer_index().load(Ordering::Relaxed), 6);
    }

    #[test]
    fn consumer_refuses_a_producer_more_than_a_ring_ahead() {
        let mut c = Consumer::new(HeapQueue::new(4, 64));
        c.mem_mut().producer_index().store(4, Ordering::Relaxed);
        assert!(c.peek().unwrap().is_some());
        c.mem_mut().producer_index().store(5, Ordering::Relaxed);
        assert_eq!(c.peek(), Err(EPROTO));
        // Behind us counts as far ahead, too.
        c.mem_mut()
            .producer_index()
            .store(u32::MAX, Ordering::Relaxed);
        assert_eq!(c.peek(), Err(EPROTO));
    }
}
