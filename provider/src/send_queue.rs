// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! A QP's send queue as the provider fills it, through either posting API:
//!
//! * `ibv_post_send()`: each request is checked and written whole; the
//!   requests before a bad one stay posted, as the verbs contract says.
//! * `ibv_wr_start()` .. `ibv_wr_complete()`: a builder opens each entry
//!   and setters fill it in; the header is written once the entry is known
//!   complete (at the next builder or at `wr_complete`). The API has no
//!   error returns until `wr_complete`, so the first error is remembered
//!   and the whole batch is dropped then: nothing is published, and the
//!   private producer index goes back to where the batch started.
//!
//! Either way the kernel sees entries only when the producer index is
//! published; ringing the doorbell is left to the caller, which must do it
//! after [`SendQueue::publish`] and may do it after dropping its lock.

use core::ffi::c_int;

use oxe_core::Errno;

use crate::ring::{Producer, QueueMem};
use crate::sys;
use crate::wqe::{QpKind, SendWr, SlotCapacity, UdDest};

const EINVAL: c_int = Errno::EINVAL.to_i32();
const ENOMEM: c_int = Errno::ENOMEM.to_i32();

/// The entry a builder opened and the setters are filling in.
#[derive(Clone, Copy, Debug)]
struct OpenEntry {
    /// Its claimed, unpublished index.
    index: u32,
    wr: SendWr,
    /// SGE count or inline length written so far.
    num: u32,
    inline: bool,
}

/// The state of one `wr_start` .. `wr_complete` batch.
#[derive(Clone, Copy, Debug, Default)]
struct Batch {
    /// The private producer index at `wr_start`, to rewind to.
    start: u32,
    /// The first error, 0 while there is none.
    err: c_int,
    open: Option<OpenEntry>,
}

/// A send queue: its producing end, the QP's kind, what a slot holds, and
/// the extended-API batch in progress.
#[derive(Debug)]
pub(crate) struct SendQueue<M> {
    ring: Producer<M>,
    kind: QpKind,
    cap: SlotCapacity,
    batch: Batch,
}

impl<M: QueueMem> SendQueue<M> {
    /// The send queue of a new QP of `kind`, whose kernel allows
    /// `max_inline` bytes of inline data.
    pub(crate) fn new(mem: M, kind: QpKind, max_inline: u32) -> Self {
        let ring = Producer::new(mem);
        let cap = SlotCapacity::send(ring.layout().slot_size(), max_inline);
        Self {
            ring,
            kind,
            cap,
            batch: Batch::default(),
        }
    }

    /// The QP's kind.
    pub(crate) fn kind(&self) -> QpKind {
        self.kind
    }

    /// What one slot holds.
    pub(crate) fn capacity(&self) -> &SlotCapacity {
        &self.cap
    }

    /// Writes one request with SGEs into the next slot, unpublished.
    pub(crate) fn post_sges(&mut self, wr: &SendWr, sges: &[sys::ibv_sge]) -> Result<(), c_int> {
        wr.check(self.kind, false)?;
        self.cap.check_sge_count(sges.len())?;
        let index = self.ring.claim().ok_or(ENOMEM)?;
        let slot = self.ring.slot_mut(index);
        let num = self.cap.write_sges(slot, sges)?;
        wr.header(num, false).write_to(slot);
        Ok(())
    }

    /// Writes one request with inline payload into the next slot,
    /// unpublished. The caller checked the total length with
    /// [`SlotCapacity::check_inline_len`] before reading the buffers.
    pub(crate) fn post_inline<'a>(
        &mut self,
        wr: &SendWr,
        parts: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<(), c_int> {
        wr.check(self.kind, true)?;
        let index = self.ring.claim().ok_or(ENOMEM)?;
        let slot = self.ring.slot_mut(index);
        match self.cap.write_inline(slot, parts) {
            Ok(len) => {
                wr.header(len, true).write_to(slot);
                Ok(())
            }
            Err(err) => {
                self.ring.rewind(index);
                Err(err)
            }
        }
    }

    /// Hands every entry written so far to the kernel.
    pub(crate) fn publish(&self) {
        self.ring.publish();
    }

    /// `wr_start`: opens a batch.
    pub(crate) fn wr_start(&mut self) {
        self.batch = Batch {
            start: self.ring.next_index(),
            err: 0,
            open: None,
        };
    }

    /// Records an error for the batch; only the first one is kept.
    pub(crate) fn wr_fail(&mut self, err: c_int) {
        if self.batch.err == 0 {
            self.batch.err = err;
        }
    }

    /// A builder (`wr_send`, `wr_rdma_write`, ...): closes the open entry
    /// and opens one for `wr` in the next slot.
    pub(crate) fn wr_begin(&mut self, wr: SendWr) {
        self.wr_close();
        if self.batch.err != 0 {
            return;
        }
        match self.ring.claim() {
            Some(index) => {
                self.batch.open = Some(OpenEntry {
                    index,
                    wr,
                    num: 0,
                    inline: false,
                });
            }
            None => self.wr_fail(ENOMEM),
        }
    }

    /// `wr_set_sge`/`wr_set_sge_list`: the open entry's payload is these
    /// SGEs (replacing any payload set before).
    pub(crate) fn wr_set_sges(&mut self, sges: &[sys::ibv_sge]) {
        let result = match self.open_entry() {
            Ok(open) => {
                let slot = self.ring.slot_mut(open.index);
                self.cap.write_sges(slot, sges).map(|num| (num, false))
            }
            Err(err) => Err(err),
        };
        self.set_payload(result);
    }

    /// `wr_set_inline_data`/`wr_set_inline_data_list`: the open entry's
    /// payload is these bytes. The caller checked the total length with
    /// [`SlotCapacity::check_inline_len`] before reading the buffers.
    pub(crate) fn wr_set_inline<'a>(&mut self, parts: impl IntoIterator<Item = &'a [u8]>) {
        let result = match self.open_entry() {
            Ok(open) => {
                let slot = self.ring.slot_mut(open.index);
                self.cap.write_inline(slot, parts).map(|len| (len, true))
            }
            Err(err) => Err(err),
        };
        self.set_payload(result);
    }

    /// `wr_set_ud_addr`: where the open entry goes.
    pub(crate) fn wr_set_ud(&mut self, ud: UdDest) {
        match self.open_entry() {
            Ok(_) => {
                if let Some(open) = self.batch.open.as_mut() {
                    open.wr.ud = Some(ud);
                }
            }
            Err(err) => self.wr_fail(err),
        }
    }

    /// `wr_complete`: publishes the batch, or drops it whole if anything
    /// in it failed. `Ok(true)` when entries were published and the
    /// doorbell is due.
    pub(crate) fn wr_complete(&mut self) -> Result<bool, c_int> {
        self.wr_close();
        let batch = core::mem::take(&mut self.batch);
        if batch.err != 0 {
            self.ring.rewind(batch.start);
            return Err(batch.err);
        }
        if self.ring.next_index() == batch.start {
            return Ok(false);
        }
        self.ring.publish();
        Ok(true)
    }

    /// `wr_abort`: drops the batch.
    pub(crate) fn wr_abort(&mut self) {
        let batch = core::mem::take(&mut self.batch);
        self.ring.rewind(batch.start);
    }

    /// The open entry, for a setter; a setter with none open (no builder
    /// yet, or the builder failed) is an error of the batch.
    fn open_entry(&self) -> Result<OpenEntry, c_int> {
        if self.batch.err != 0 {
            return Err(self.batch.err);
        }
        self.batch.open.ok_or(EINVAL)
    }

    fn set_payload(&mut self, result: Result<(u32, bool), c_int>) {
        match result {
            Ok((num, inline)) => {
                if let Some(open) = self.batch.open.as_mut() {
                    open.num = num;
                    open.inline = inline;
                }
            }
            Err(err) => self.wr_fail(err),
        }
    }

    /// Checks the open entry, now complete, and writes its header.
    fn wr_close(&mut self) {
        let Some(open) = self.batch.open.take() else {
            return;
        };
        if self.batch.err != 0 {
            return;
        }
        match open.wr.check(self.kind, open.inline) {
            Ok(()) => open
                .wr
                .header(open.num, open.inline)
                .write_to(self.ring.slot_mut(open.index)),
            Err(err) => self.wr_fail(err),
        }
    }

    /// The ring, for tests that play the kernel.
    #[cfg(test)]
    pub(crate) fn ring(&self) -> &Producer<M> {
        &self.ring
    }
}

#[cfg(test)]
mod tests {
    use core::sync::atomic::Ordering;

    use oxe_core::abi::{OxeSendWqe, OxeSge, OXE_SEND_INLINE, OXE_SEND_SIGNALED};

    use super::*;
    use crate::ring::heap::HeapQueue;
    use crate::wqe::{Remote, SendOp};

    fn sge(addr: u64, length: u32, lkey: u32) -> sys::ibv_sge {
        sys::ibv_sge { addr, length, lkey }
    }

    fn rc(slots: u32) -> SendQueue<HeapQueue> {
        SendQueue::new(HeapQueue::new(slots, 128), QpKind::Rc, 32)
    }

    fn produced(sq: &SendQueue<HeapQueue>) -> u32 {
        sq.ring().mem().producer_index().load(Ordering::Acquire)
    }

    fn header(sq: &mut SendQueue<HeapQueue>, index: u32) -> OxeSendWqe {
        OxeSendWqe::from_bytes(sq.ring.slot_mut(index)).expect("slot holds a header")
    }

    #[test]
    fn post_writes_header_and_sges_and_publishes_on_request() {
        let mut sq = rc(4);
        let wr = SendWr {
            remote: Remote {
                addr: 0x5000,
                rkey: 0x77,
                ..Remote::default()
            },
            ..SendWr::new(42, SendOp::Write, sys::IBV_SEND_SIGNALED)
        };
        sq.post_sges(&wr, &[sge(0x1000, 8, 1), sge(0x2000, 8, 2)])
            .expect("posted");
        assert_eq!(produced(&sq), 0);
        sq.publish();
        assert_eq!(produced(&sq), 1);
        let h = header(&mut sq, 0);
        assert_eq!(h.wr_id, 42);
        assert_eq!(h.opcode, sys::IBV_WR_RDMA_WRITE);
        assert_eq!(h.send_flags, OXE_SEND_SIGNALED);
        assert_eq!(h.num_sge, 2);
        assert_eq!((h.remote_addr, h.rkey), (0x5000, 0x77));
        let second = OxeSge::from_bytes(&sq.ring.slot_mut(0)[80..]).unwrap();
        assert_eq!(second.addr, 0x2000);
    }

    #[test]
    fn post_on_a_full_queue_is_enomem() {
        let mut sq = rc(2);
        let wr = SendWr::new(1, SendOp::Send, 0);
        sq.post_sges(&wr, &[]).unwrap();
        sq.post_sges(&wr, &[]).unwrap();
        assert_eq!(sq.post_sges(&wr, &[]), Err(ENOMEM));
        sq.publish();
        // The kernel consumes one.
        sq.ring().mem().consumer_index().store(1, Ordering::Release);
        assert!(sq.post_sges(&wr, &[]).is_ok());
    }

    #[test]
    fn refused_requests_take_no_slot() {
        let mut sq = rc(4);
        let too_many = [sge(0, 0, 0); 5];
        let wr = SendWr::new(1, SendOp::Send, 0);
        assert_eq!(sq.post_sges(&wr, &too_many), Err(EINVAL));
        let bad_op_for_inline = SendWr::new(1, SendOp::Read, sys::IBV_SEND_INLINE);
        assert_eq!(sq.post_inline(&bad_op_for_inline, [&b"x"[..]]), Err(EINVAL));
        assert_eq!(sq.post_inline(&wr, [&[0u8; 33][..]]), Err(EINVAL));
        assert_eq!(sq.ring().next_index(), 0);
    }

    #[test]
    fn inline_post_copies_the_bytes() {
        let mut sq = rc(4);
        let wr = SendWr::new(3, SendOp::Send, sys::IBV_SEND_INLINE);
        sq.post_inline(&wr, [&b"hello "[..], &b"world"[..]])
            .expect("fits");
        let h = header(&mut sq, 0);
        assert_eq!(h.send_flags, OXE_SEND_INLINE);
        assert_eq!(h.num_sge, 11);
        assert_eq!(&sq.ring.slot_mut(0)[64..75], b"hello world");
    }

    #[test]
    fn ud_posts_carry_the_destination() {
        let mut sq = SendQueue::new(HeapQueue::new(4, 128), QpKind::Ud, 0);
        let dest = UdDest {
            ah_num: 5,
            remote_qpn: 0x42,
            remote_qkey: 0x1111,
        };
        let wr = SendWr {
            ud: Some(dest),
            ..SendWr::new(1, SendOp::SendImm, 0)
        };
        sq.post_sges(&wr, &[sge(1, 2, 3)]).unwrap();
        let h = header(&mut sq, 0);
        assert_eq!((h.ah_num, h.remote_qpn, h.remote_qkey), (5, 0x42, 0x1111));
        let write = SendWr {
            op: SendOp::Write,
            ..wr
        };
        assert_eq!(sq.post_sges(&write, &[]), Err(EINVAL));
    }

    #[test]
    fn batch_builds_entries_and_publishes_at_complete() {
        let mut sq = rc(4);
        sq.wr_start();
        sq.wr_begin(SendWr::new(1, SendOp::Send, sys::IBV_SEND_SIGNALED));
        sq.wr_set_sges(&[sge(0x10, 4, 1)]);
        sq.wr_begin(SendWr {
            remote: Remote {
                addr: 0x20,
                rkey: 2,
                ..Remote::default()
            },
            ..SendWr::new(2, SendOp::Write, 0)
        });
        sq.wr_set_inline([&b"abcd"[..]]);
        assert_eq!(produced(&sq), 0);
        assert_eq!(sq.wr_complete(), Ok(true));
        assert_eq!(produced(&sq), 2);
        let a = header(&mut sq, 0);
        assert_eq!(
            (a.wr_id, a.num_sge, a.send_flags),
            (1, 1, OXE_SEND_SIGNALED)
        );
        let b = header(&mut sq, 1);
        assert_eq!((b.wr_id, b.num_sge, b.send_flags), (2, 4, OXE_SEND_INLINE));
        assert_eq!((b.remote_addr, b.rkey), (0x20, 2));
        assert_eq!(&sq.ring.slot_mut(1)[64..68], b"abcd");
    }

    #[test]
    fn empty_batch_needs_no_doorbell() {
        let mut sq = rc(4);
        sq.wr_start();
        assert_eq!(sq.wr_complete(), Ok(false));
        assert_eq!(produced(&sq), 0);
    }

    #[test]
    fn a_failed_batch_is_dropped_whole() {
        let mut sq = rc(4);
        sq.wr_start();
        sq.wr_begin(SendWr::new(1, SendOp::Send, 0));
        sq.wr_set_sges(&[sge(0, 1, 1)]);
        sq.wr_begin(SendWr::new(2, SendOp::Send, 0));
        sq.wr_set_sges(&[sge(0, 1, 1); 5]);
        // Later calls change nothing, and the first error is reported.
        sq.wr_begin(SendWr::new(3, SendOp::Read, 0));
        sq.wr_set_inline([&b"x"[..]]);
        assert_eq!(sq.wr_complete(), Err(EINVAL));
        assert_eq!(produced(&sq), 0);
        assert_eq!(sq.ring().next_index(), 0);
        // The queue is usable again.
        sq.wr_start();
        sq.wr_begin(SendWr::new(4, SendOp::Send, 0));
        assert_eq!(sq.wr_complete(), Ok(true));
        assert_eq!(header(&mut sq, 0).wr_id, 4);
    }

    #[test]
    fn a_batch_checks_each_entry_when_it_is_closed() {
        let mut ud = SendQueue::new(HeapQueue::new(4, 128), QpKind::Ud, 16);
        // A UD entry without wr_set_ud_addr.
        ud.wr_start();
        ud.wr_begin(SendWr::new(1, SendOp::Send, 0));
        assert_eq!(ud.wr_complete(), Err(EINVAL));
        // With it.
        ud.wr_start();
        ud.wr_begin(SendWr::new(1, SendOp::Send, 0));
        ud.wr_set_ud(UdDest {
            ah_num: 1,
            remote_qpn: 2,
            remote_qkey: 3,
        });
        ud.wr_set_sges(&[sge(0, 1, 1)]);
        assert_eq!(ud.wr_complete(), Ok(true));
        assert_eq!(header(&mut ud, 0).remote_qpn, 2);
        // Inline data on an RDMA read.
        let mut rc = rc(4);
        rc.wr_start();
        rc.wr_begin(SendWr::new(1, SendOp::Read, 0));
        rc.wr_set_inline([&b"x"[..]]);
        assert_eq!(rc.wr_complete(), Err(EINVAL));
    }

    #[test]
    fn a_setter_without_a_builder_fails_the_batch() {
        let mut sq = rc(4);
        sq.wr_start();
        sq.wr_set_sges(&[sge(0, 1, 1)]);
        sq.wr_begin(SendWr::new(1, SendOp::Send, 0));
        assert_eq!(sq.wr_complete(), Err(EINVAL));
    }

    #[test]
    fn a_batch_larger_than_the_free_space_is_enomem() {
        let mut sq = rc(2);
        sq.wr_start();
        for id in 0..3 {
            sq.wr_begin(SendWr::new(id, SendOp::Send, 0));
        }
        assert_eq!(sq.wr_complete(), Err(ENOMEM));
        assert_eq!(sq.ring().next_index(), 0);
    }

    #[test]
    fn abort_drops_the_batch() {
        let mut sq = rc(4);
        sq.wr_start();
        sq.wr_begin(SendWr::new(1, SendOp::Send, 0));
        sq.wr_abort();
        assert_eq!(sq.ring().next_index(), 0);
        assert_eq!(produced(&sq), 0);
    }

    #[test]
    fn the_last_payload_setter_wins() {
        let mut sq = rc(4);
        sq.wr_start();
        sq.wr_begin(SendWr::new(1, SendOp::Send, 0));
        sq.wr_set_inline([&b"abc"[..]]);
        sq.wr_set_sges(&[sge(5, 6, 7)]);
        assert_eq!(sq.wr_complete(), Ok(true));
        let h = header(&mut sq, 0);
        assert_eq!((h.num_sge, h.send_flags & OXE_SEND_INLINE), (1, 0));
    }
}
