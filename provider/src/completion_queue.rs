// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! A completion queue as the provider consumes it, for both polling
//! interfaces: `ibv_poll_cq()`, which copies out a batch, and the
//! `ibv_cq_ex` one, which walks completions in place between `start_poll`
//! and `end_poll`.
//!
//! The kernel produces and flushes every completion itself; nothing here
//! ever makes one up.

use core::ffi::c_int;

use crate::cqe::{Completion, InlineRecv};
use crate::ring::{Consumer, QueueMem};
use crate::verbs::EPROTO;

/// `ENOENT`: what `start_poll`/`next_poll` return when the CQ is empty.
pub(crate) const ENOENT: c_int = 2;

/// A CQ's consuming end and the completion an extended poll is on.
#[derive(Debug)]
pub(crate) struct CompletionQueue<M> {
    ring: Consumer<M>,
    /// The completion `start_poll`/`next_poll` moved to, copied out of its
    /// slot: the readers read this copy, so the slot itself can go back to
    /// the kernel at `end_poll` without a reader ever seeing it reused.
    current: Completion,
}

impl<M: QueueMem> CompletionQueue<M> {
    /// The consumer of a freshly created CQ.
    pub(crate) fn new(mem: M) -> Self {
        Self {
            ring: Consumer::new(mem),
            current: Completion::default(),
        }
    }

    /// Takes the oldest completion, if the kernel produced one, handing a
    /// message that came with it to `deliver` first (inline receive: the
    /// receive is complete once the message is in its buffer). The slot is
    /// only given back to the kernel by [`Self::release`].
    pub(crate) fn poll_one(
        &mut self,
        deliver: impl FnOnce(&InlineRecv),
    ) -> Result<Option<Completion>, c_int> {
        let Some(slot) = self.ring.peek()? else {
            return Ok(None);
        };
        // The layout was checked to hold whole CQEs, so this cannot fail;
        // if it did, the queue is not one this provider understands.
        let completion = Completion::from_slot(slot).ok_or(EPROTO)?;
        let message = InlineRecv::from_slot(slot).map_err(|_| EPROTO)?;
        self.ring.advance();
        // Out of the slot, which the kernel gets back only at `release`.
        if let Some(message) = message {
            deliver(&message);
        }
        Ok(Some(completion))
    }

    /// Gives the slots of every completion taken so far back to the kernel.
    pub(crate) fn release(&self) {
        self.ring.release();
    }

    /// `start_poll`/`next_poll`: moves to the next completion, `ENOENT` if
    /// there is none.
    pub(crate) fn step(&mut self, deliver: impl FnOnce(&InlineRecv)) -> Result<&Completion, c_int> {
        match self.poll_one(deliver)? {
            Some(c) => {
                self.current = c;
                Ok(&self.current)
            }
            None => Err(ENOENT),
        }
    }

    /// Drops the unread completions of QP `qp_num` (it was just reset) and
    /// gives their slots back to the kernel. Called under the CQ's lock,
    /// outside any extended poll.
    ///
    /// A QP that went through the error state left flush completions (and
    /// the completion of the error itself) behind; after a reset they
    /// describe work requests the QP no longer has. mlx4 and mlx5 remove
    /// them on the way to RESET, and rdma-core's tests count on it: they
    /// reset a QP after an error and poll its CQ for the next request's
    /// completion (`test_mr_rereg_pd`, `test_mr_rereg_addr`). rdma_rxe
    /// leaves them in the CQ, where they complete requests the QP's next
    /// life never posted.
    pub(crate) fn purge_qp(&mut self, qp_num: u32) -> Result<u32, c_int> {
        let removed = self
            .ring
            .purge(|slot| Completion::from_slot(slot).is_some_and(|c| c.qp_num == qp_num))?;
        self.ring.release();
        Ok(removed)
    }

    /// `ibv_resize_cq()`: moves to the kernel's new ring and returns the
    /// old memory (to unmap). The kernel moved the completions from the
    /// released index on, so call [`Self::release`] before the resize (the
    /// caller holds the CQ's lock throughout, outside any extended poll).
    pub(crate) fn replace_mem(&mut self, mem: M) -> M {
        self.ring.replace_mem(mem)
    }

    /// The completion the last successful [`Self::step`] moved to.
    pub(crate) fn current(&self) -> &Completion {
        &self.current
    }

    /// The ring, for tests that play the kernel.
    #[cfg(test)]
    pub(crate) fn ring_mut(&mut self) -> &mut Consumer<M> {
        &mut self.ring
    }
}

#[cfg(test)]
mod tests {
    use core::sync::atomic::Ordering;

    use oxe_core::abi::{OxeCqe, OXE_WC_WITH_INV};

    use super::*;
    use crate::ring::heap::HeapQueue;
    use crate::sys;

    /// Plays the kernel: writes a CQE for `wr_id` at `index` and publishes
    /// everything up to it.
    fn produce(cq: &mut CompletionQueue<HeapQueue>, index: u32, wr_id: u64) {
        let cqe = OxeCqe {
            wr_id,
            opcode: sys::IBV_WC_RECV,
            wc_flags: OXE_WC_WITH_INV,
            imm_data: 0x77,
            ..Default::default()
        };
        publish(cq, index, &cqe);
    }

    /// Plays the kernel: writes `cqe` at `index` and publishes up to it.
    fn publish(cq: &mut CompletionQueue<HeapQueue>, index: u32, cqe: &OxeCqe) {
        let mem = cq.ring_mut().mem_mut();
        cqe.write_to(mem.slot_mut(index));
        mem.producer_index()
            .store(index.wrapping_add(1), Ordering::Release);
    }

    fn consumer_index(cq: &mut CompletionQueue<HeapQueue>) -> u32 {
        cq.ring_mut()
            .mem_mut()
            .consumer_index()
            .load(Ordering::Acquire)
    }

    #[test]
    fn poll_returns_completions_in_order_then_none() {
        let mut cq = CompletionQueue::new(HeapQueue::new(4, 64));
        assert_eq!(cq.poll_one(|_| ()), Ok(None));
        produce(&mut cq, 0, 10);
        produce(&mut cq, 1, 11);
        let a = cq.poll_one(|_| ()).unwrap().unwrap();
        assert_eq!(a.wr_id, 10);
        assert_eq!(a.wc_flags, sys::IBV_WC_WITH_INV);
        assert_eq!(a.imm_or_inv, 0x77);
        assert_eq!(cq.poll_one(|_| ()).unwrap().unwrap().wr_id, 11);
        assert_eq!(cq.poll_one(|_| ()), Ok(None));
        // Slots go back only on release.
        assert_eq!(consumer_index(&mut cq), 0);
        cq.release();
        assert_eq!(consumer_index(&mut cq), 2);
    }

    #[test]
    fn an_inline_message_is_delivered_before_its_completion_returns() {
        use oxe_core::abi::{
            OxeInlinePiece, OXE_CQE_INLINE_DATA, OXE_CQE_INLINE_PIECES, OXE_WC_INLINE,
        };
        let mut cq = CompletionQueue::new(HeapQueue::new(2, 256));
        let cqe = OxeCqe {
            wr_id: 3,
            opcode: sys::IBV_WC_RECV,
            byte_len: 5,
            wc_flags: OXE_WC_INLINE,
            ..Default::default()
        };
        let mem = cq.ring_mut().mem_mut();
        let slot = mem.slot_mut(0);
        cqe.write_to(slot);
        let at = OXE_CQE_INLINE_DATA as usize;
        slot[at..at + 5].copy_from_slice(b"hello");
        let piece = OxeInlinePiece {
            va: 0xabc0,
            length: 5,
            reserved: 0,
        };
        let at = OXE_CQE_INLINE_PIECES as usize;
        slot[at..at + OxeInlinePiece::SIZE].copy_from_slice(&piece.to_bytes());
        mem.producer_index().store(1, Ordering::Release);
        produce(&mut cq, 1, 4);
        let mut seen = Vec::new();
        let c = cq
            .poll_one(|m| seen.extend(m.pieces().map(|(va, b)| (va, b.to_vec()))))
            .unwrap()
            .unwrap();
        assert_eq!((c.wr_id, c.byte_len, c.wc_flags), (3, 5, 0));
        assert_eq!(seen, [(0xabc0, b"hello".to_vec())]);
        // A completion without a message calls nobody.
        let c = cq.poll_one(|_| panic!("no message")).unwrap().unwrap();
        assert_eq!(c.wr_id, 4);
    }

    #[test]
    fn poll_survives_index_wrap_around_the_ring() {
        let mut cq = CompletionQueue::new(HeapQueue::new(2, 64));
        for i in 0..7u32 {
            produce(&mut cq, i, u64::from(i));
            assert_eq!(cq.poll_one(|_| ()).unwrap().unwrap().wr_id, u64::from(i));
            cq.release();
        }
        assert_eq!(consumer_index(&mut cq), 7);
    }

    #[test]
    fn a_broken_producer_index_is_an_error_not_stale_data() {
        let mut cq = CompletionQueue::new(HeapQueue::new(2, 64));
        cq.ring_mut()
            .mem_mut()
            .producer_index()
            .store(3, Ordering::Release);
        assert_eq!(cq.poll_one(|_| ()), Err(EPROTO));
        assert_eq!(cq.step(|_| ()).map(|c| c.wr_id), Err(EPROTO));
    }

    #[test]
    fn polling_goes_on_in_the_resized_queue() {
        let mut cq = CompletionQueue::new(HeapQueue::new(4, 64));
        for i in 0..4u32 {
            produce(&mut cq, i, u64::from(i));
        }
        assert_eq!(cq.poll_one(|_| ()).unwrap().unwrap().wr_id, 0);
        cq.release();
        // The kernel grows the CQ to 8, keeping the three left.
        let new = HeapQueue::resized(cq.ring_mut().mem_mut(), 8).unwrap();
        cq.replace_mem(new);
        produce(&mut cq, 4, 4);
        produce(&mut cq, 5, 5);
        let rest: Vec<u64> = core::iter::from_fn(|| cq.poll_one(|_| ()).unwrap())
            .map(|c| c.wr_id)
            .collect();
        assert_eq!(rest, [1, 2, 3, 4, 5]);
        cq.release();
        assert_eq!(consumer_index(&mut cq), 6);
    }

    /// Plays the kernel: a completion of `wr_id` for QP `qp` at `index`.
    fn produce_for(cq: &mut CompletionQueue<HeapQueue>, index: u32, qp: u32, wr_id: u64) {
        let cqe = OxeCqe {
            wr_id,
            qp_num: qp,
            ..Default::default()
        };
        publish(cq, index, &cqe);
    }

    #[test]
    fn purge_drops_one_qps_completions_and_keeps_the_rest_in_order() {
        let mut cq = CompletionQueue::new(HeapQueue::new(8, 64));
        // Start near the end of the ring so the purge crosses the wrap.
        for i in 0..6u32 {
            produce_for(&mut cq, i, 9, 100);
            cq.poll_one(|_| ()).unwrap();
        }
        cq.release();
        let qps = [7, 9, 7, 7, 8, 9, 7];
        for (k, qp) in qps.iter().enumerate() {
            produce_for(&mut cq, 6 + k as u32, *qp, k as u64);
        }
        // One completion already taken (and not released) stays taken.
        assert_eq!(cq.poll_one(|_| ()).unwrap().unwrap().wr_id, 0);
        assert_eq!(cq.purge_qp(7), Ok(3));
        let rest: Vec<(u64, u32)> = core::iter::from_fn(|| cq.poll_one(|_| ()).unwrap())
            .map(|c| (c.wr_id, c.qp_num))
            .collect();
        assert_eq!(rest, [(1, 9), (4, 8), (5, 9)]);
        cq.release();
        assert_eq!(consumer_index(&mut cq), 13);
        // Nothing of that QP left: a second purge removes nothing.
        assert_eq!(cq.purge_qp(9), Ok(0));
        assert_eq!(cq.poll_one(|_| ()), Ok(None));
    }

    #[test]
    fn purge_of_a_broken_producer_index_is_an_error() {
        let mut cq = CompletionQueue::new(HeapQueue::new(2, 64));
        cq.ring_mut()
            .mem_mut()
            .producer_index()
            .store(3, Ordering::Release);
        assert_eq!(cq.purge_qp(1), Err(EPROTO));
    }

    #[test]
    fn extended_poll_keeps_a_copy_of_the_current_completion() {
        let mut cq = CompletionQueue::new(HeapQueue::new(2, 64));
        assert_eq!(cq.step(|_| ()).map(|c| c.wr_id), Err(ENOENT));
        produce(&mut cq, 0, 5);
        assert_eq!(cq.step(|_| ()).map(|c| c.wr_id), Ok(5));
        // end_poll gives the slot back; the kernel may reuse it at once.
        cq.release();
        produce(&mut cq, 1, 6);
        produce(&mut cq, 2, 7);
        assert_eq!(cq.current().wr_id, 5);
        assert_eq!(cq.step(|_| ()).map(|c| c.wr_id), Ok(6));
        assert_eq!(cq.step(|_| ()).map(|c| c.wr_id), Ok(7));
        assert_eq!(cq.step(|_| ()).map(|c| c.wr_id), Err(ENOENT));
        // A failed step leaves the last completion readable.
        assert_eq!(cq.current().wr_id, 7);
        cq.release();
        assert_eq!(consumer_index(&mut cq), 3);
    }
}
