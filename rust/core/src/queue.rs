// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Resizing a mapped queue (a CQ by `ibv_resize_cq()`, an SRQ by
//! `ibv_modify_srq()` with `IBV_SRQ_MAX_WR`).
//!
//! A resized queue is a new buffer with a new mapping. The entries not yet
//! consumed, those between the consumer and the producer index, move to it
//! at the *same free-running indices*, and both indices carry over
//! unchanged (see "Mapped queues" in [`super::abi`]). Only the modulus that
//! turns an index into a slot changes. So no side's private copy of an
//! index has to be told anything: the kernel's producer (CQ) or consumer
//! (SRQ) index, and the provider's, stay valid across the swap, and the
//! entries come out in the order they went in.
//!
//! [`Resize`] checks that the move is possible and lists which slot goes
//! where; the caller, who owns the two buffers, does the copying.

use super::errno::Errno;

/// The move of a queue's outstanding entries to a queue of another size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resize {
    consumer: u32,
    count: u32,
    old_mask: u32,
    new_mask: u32,
}

impl Resize {
    /// Plans moving the entries `consumer..producer` (free-running indices)
    /// of a queue of `old_slots` slots to one of `new_slots` slots.
    ///
    /// `EINVAL` when a slot count is not a power of two, when the indices
    /// are more than a queue apart (one side broke the queue: there is no
    /// telling which entries are real), or when the new queue is too small
    /// for the outstanding entries (a CQ cannot shrink below the completions
    /// it holds, nor an SRQ below the receives posted to it).
    pub fn new(
        consumer: u32,
        producer: u32,
        old_slots: u32,
        new_slots: u32,
    ) -> Result<Self, Errno> {
        if !old_slots.is_power_of_two() || !new_slots.is_power_of_two() {
            return Err(Errno::EINVAL);
        }
        let count = producer.wrapping_sub(consumer);
        if count > old_slots || count > new_slots {
            return Err(Errno::EINVAL);
        }
        Ok(Self {
            consumer,
            count,
            old_mask: old_slots.wrapping_sub(1),
            new_mask: new_slots.wrapping_sub(1),
        })
    }

    /// How many entries move.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// `(old slot, new slot)` for every outstanding entry, oldest first.
    /// The new slots are distinct, since at most `new_slots` consecutive
    /// indices are taken modulo `new_slots`.
    pub fn moves(&self) -> impl Iterator<Item = (u32, u32)> {
        let Self {
            consumer,
            count,
            old_mask,
            new_mask,
        } = *self;
        (0..count).map(move |i| {
            let index = consumer.wrapping_add(i);
            (index & old_mask, index & new_mask)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// A queue of `slots` slots holding `values` at the indices from
    /// `consumer` on, as a producer would have written them.
    fn filled(slots: u32, consumer: u32, values: &[u64]) -> (Vec<u64>, u32) {
        let mut q = std::vec![0u64; slots as usize];
        let mut producer = consumer;
        for &v in values {
            q[(producer & (slots - 1)) as usize] = v;
            producer = producer.wrapping_add(1);
        }
        (q, producer)
    }

    /// Resizes `old` to `new_slots` slots by the plan and reads the entries
    /// back as a consumer of the new queue would, with the same indices.
    fn resize_and_drain(old: &[u64], consumer: u32, producer: u32, new_slots: u32) -> Vec<u64> {
        let plan = Resize::new(consumer, producer, old.len() as u32, new_slots).unwrap();
        let mut new = std::vec![0u64; new_slots as usize];
        let mut written = std::vec![false; new_slots as usize];
        for (from, to) in plan.moves() {
            assert!(!written[to as usize], "slot {to} written twice");
            written[to as usize] = true;
            new[to as usize] = old[from as usize];
        }
        let mut out = Vec::new();
        let mut i = consumer;
        while i != producer {
            out.push(new[(i & (new_slots - 1)) as usize]);
            i = i.wrapping_add(1);
        }
        out
    }

    #[test]
    fn growing_keeps_every_entry_in_order_across_the_wrap() {
        // 5 entries in a queue of 8 starting at slot 6: they wrap to slot 2.
        let values = [10, 11, 12, 13, 14];
        let (old, producer) = filled(8, 6, &values);
        assert_eq!(producer, 11);
        assert_eq!(resize_and_drain(&old, 6, producer, 32), values);
    }

    #[test]
    fn shrinking_to_exactly_the_outstanding_count_works() {
        let values = [1, 2, 3, 4];
        let (old, producer) = filled(16, 13, &values);
        assert_eq!(resize_and_drain(&old, 13, producer, 4), values);
        let plan = Resize::new(13, producer, 16, 4).unwrap();
        assert_eq!(plan.count(), 4);
    }

    #[test]
    fn shrinking_below_the_outstanding_count_is_einval() {
        let (_, producer) = filled(8, 0, &[1, 2, 3]);
        assert_eq!(Resize::new(0, producer, 8, 2), Err(Errno::EINVAL));
        // An empty queue may shrink to one slot.
        assert!(Resize::new(5, 5, 8, 1).is_ok());
    }

    #[test]
    fn indices_wrapping_at_2_pow_32_are_followed() {
        let consumer = u32::MAX - 2;
        let values = [7, 8, 9, 10, 11, 12];
        let (old, producer) = filled(8, consumer, &values);
        assert_eq!(producer, 3);
        assert_eq!(resize_and_drain(&old, consumer, producer, 16), values);
        assert_eq!(resize_and_drain(&old, consumer, producer, 8), values);
    }

    #[test]
    fn a_full_queue_moves_whole() {
        let values: Vec<u64> = (100..116).collect();
        let (old, producer) = filled(16, 9, &values);
        assert_eq!(resize_and_drain(&old, 9, producer, 16), values);
        assert_eq!(resize_and_drain(&old, 9, producer, 64), values);
    }

    #[test]
    fn broken_indices_and_sizes_are_refused() {
        // Producer more than a queue ahead of the consumer (or behind it).
        assert_eq!(Resize::new(0, 9, 8, 64), Err(Errno::EINVAL));
        assert_eq!(Resize::new(5, 4, 8, 64), Err(Errno::EINVAL));
        // Slot counts that are not powers of two, zero included.
        assert_eq!(Resize::new(0, 0, 6, 8), Err(Errno::EINVAL));
        assert_eq!(Resize::new(0, 0, 8, 0), Err(Errno::EINVAL));
    }

    #[test]
    fn moves_list_the_oldest_first() {
        let plan = Resize::new(14, 18, 16, 4).unwrap();
        let moves: Vec<_> = plan.moves().collect();
        assert_eq!(moves, [(14, 2), (15, 3), (0, 0), (1, 1)]);
    }
}
