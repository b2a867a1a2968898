// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! A receive queue as the provider fills it: a QP's RQ or an SRQ, which
//! share one slot layout. Posting receives needs no system call: the
//! kernel looks at the queue when a message arrives.

use core::ffi::c_int;

use oxe_core::Errno;

use crate::ring::{Producer, QueueMem};
use crate::sys;
use crate::wqe::{write_recv, SlotCapacity};

const ENOMEM: c_int = Errno::ENOMEM.to_i32();

/// A receive queue's producing end and what its slots hold.
#[derive(Debug)]
pub(crate) struct RecvQueue<M> {
    ring: Producer<M>,
    cap: SlotCapacity,
}

impl<M: QueueMem> RecvQueue<M> {
    /// The receive queue of a new QP or SRQ.
    pub(crate) fn new(mem: M) -> Self {
        let ring = Producer::new(mem);
        let cap = SlotCapacity::recv(ring.layout().slot_size());
        Self { ring, cap }
    }

    /// What one slot holds.
    pub(crate) fn capacity(&self) -> &SlotCapacity {
        &self.cap
    }

    /// Writes one receive request into the next slot, unpublished.
    pub(crate) fn post(&mut self, wr_id: u64, sges: &[sys::ibv_sge]) -> Result<(), c_int> {
        self.cap.check_sge_count(sges.len())?;
        let index = self.ring.claim().ok_or(ENOMEM)?;
        write_recv(&self.cap, self.ring.slot_mut(index), wr_id, sges)
    }

    /// Hands every request written so far to the kernel.
    pub(crate) fn publish(&self) {
        self.ring.publish();
    }

    /// An SRQ resize: moves to the kernel's new ring and returns the old
    /// memory (to unmap). Everything posted is published already (posting
    /// publishes before it lets go of the queue's lock).
    pub(crate) fn replace_mem(&mut self, mem: M) -> M {
        let old = self.ring.replace_mem(mem);
        self.cap = SlotCapacity::recv(self.ring.layout().slot_size());
        old
    }
}

#[cfg(test)]
mod tests {
    use core::sync::atomic::Ordering;

    use oxe_core::abi::{OxeRecvWqe, OxeSge};

    use super::*;
    use crate::ring::heap::HeapQueue;

    fn sge(addr: u64, length: u32, lkey: u32) -> sys::ibv_sge {
        sys::ibv_sge { addr, length, lkey }
    }

    #[test]
    fn receives_are_written_then_published() {
        let mut rq = RecvQueue::new(HeapQueue::new(2, 64));
        assert_eq!(rq.capacity().max_sge(), 3);
        rq.post(7, &[sge(0x1000, 64, 3)]).expect("posted");
        rq.post(8, &[]).expect("posted");
        assert_eq!(rq.post(9, &[]), Err(ENOMEM));
        assert_eq!(rq.ring.mem().producer_index().load(Ordering::Acquire), 0);
        rq.publish();
        assert_eq!(rq.ring.mem().producer_index().load(Ordering::Acquire), 2);
        let first = OxeRecvWqe::from_bytes(rq.ring.slot_mut(0)).unwrap();
        assert_eq!((first.wr_id, first.num_sge), (7, 1));
        let sge0 = OxeSge::from_bytes(&rq.ring.slot_mut(0)[16..]).unwrap();
        assert_eq!((sge0.addr, sge0.length, sge0.lkey), (0x1000, 64, 3));
        let second = OxeRecvWqe::from_bytes(rq.ring.slot_mut(1)).unwrap();
        assert_eq!((second.wr_id, second.num_sge), (8, 0));
    }

    #[test]
    fn too_many_sges_take_no_slot() {
        let mut rq = RecvQueue::new(HeapQueue::new(2, 64));
        assert_eq!(rq.post(1, &[sge(0, 0, 0); 4]), Err(Errno::EINVAL.to_i32()));
        assert_eq!(rq.ring.next_index(), 0);
    }

    #[test]
    fn posting_goes_on_in_the_resized_queue() {
        let mut rq = RecvQueue::new(HeapQueue::new(2, 64));
        rq.post(1, &[]).unwrap();
        rq.post(2, &[]).unwrap();
        rq.publish();
        assert_eq!(rq.post(3, &[]), Err(ENOMEM));
        let new = HeapQueue::resized(rq.ring.mem(), 8).unwrap();
        let old = rq.replace_mem(new);
        assert_eq!(old.layout().num_slots(), 2);
        assert_eq!(rq.capacity().max_sge(), 3);
        rq.post(3, &[]).unwrap();
        rq.publish();
        let ids: Vec<u64> = (0..3)
            .map(|i| OxeRecvWqe::from_bytes(rq.ring.slot_mut(i)).unwrap().wr_id)
            .collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(rq.ring.free_slots(), 5);
    }

    #[test]
    fn slots_free_up_as_the_kernel_consumes() {
        let mut rq = RecvQueue::new(HeapQueue::new(2, 32));
        rq.post(1, &[]).unwrap();
        rq.post(2, &[]).unwrap();
        rq.publish();
        rq.ring.mem().consumer_index().store(2, Ordering::Release);
        rq.post(3, &[]).unwrap();
        rq.post(4, &[]).unwrap();
        rq.publish();
        assert_eq!(rq.ring.mem().producer_index().load(Ordering::Acquire), 4);
        let third = OxeRecvWqe::from_bytes(rq.ring.slot_mut(2)).unwrap();
        assert_eq!(third.wr_id, 3);
    }
}
