// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: one ring of receive WQEs that several QPs of a PD
//! draw from, with the limit event IBTA 10.2.9.3 describes, and resizing
//! (modify_srq with IB_SRQ_MAX_WR).

#![deny(unsafe_code)]

use crate::counters::Counters;
use crate::ib::callback::Callback;
use crate::ib::lock::{new_spinlock_bh, DualLock};
use crate::ib::objects::PdId;
use crate::ib::queue::{move_ring, Ring, Uctx};
use crate::ib::srq::SrqHandle;
use crate::limits::{Kind, Quota};
use crate::oxe_core::abi::{OxeQueueMap, OxeRecvWqe, OxeSge};
use crate::wr::{self, RecvWr};
use kernel::prelude::*;
use kernel::sync::Arc;

#[pin_data]
pub(crate) struct Srq {
    pub(crate) pd: PdId,
    pub(crate) max_sge: u32,
    /// The ring. Its `_bh` end holds the kernel's consumer index
    /// (authoritative) and the armed limit, for the receive path, which
    /// takes WQEs in softirq. Its irq end holds kernel consumers' producer
    /// index (ib_post_srq_recv may come with interrupts off). A resize
    /// holds both.
    #[pin]
    q: DualLock<SrqState, u32, Ring>,
    #[pin]
    handle: Callback<SrqHandle>,
    /// Its place under the device's SRQ limit, given back when it goes.
    quota: Quota,
}

struct SrqState {
    consumer: u32,
    /// 0: not armed.
    limit: u32,
}

/// Bytes of a slot for `max_sge` SGEs.
fn slot_size(max_sge: u32) -> u32 {
    OxeRecvWqe::SIZE as u32 + max_sge.max(1) * OxeSge::SIZE as u32
}

impl Srq {
    pub(crate) fn new(
        counters: &Arc<Counters>,
        uctx: Option<Uctx>,
        pd: PdId,
        max_wr: u32,
        max_sge: u32,
        limit: u32,
        handle: SrqHandle,
    ) -> Result<Arc<Srq>> {
        let quota = Quota::take(counters, Kind::Srq)?;
        if max_wr == 0 || max_wr > crate::qp::MAX_WR || max_sge > crate::qp::MAX_SGE {
            return Err(EINVAL);
        }
        let ring = Ring::new(uctx, max_wr, slot_size(max_sge))?;
        let max_sge = (ring.slot_size() - OxeRecvWqe::SIZE as u32) / OxeSge::SIZE as u32;
        Arc::pin_init(
            pin_init!(Srq {
                pd,
                max_sge,
                q <- DualLock::new(
                    new_spinlock_bh!(SrqState { consumer: 0, limit }),
                    kernel::new_spinlock_irq!(0),
                    ring,
                ),
                handle <- Callback::new(handle),
                quota,
            }),
            GFP_KERNEL,
        )
    }

    /// Where user space maps the ring.
    pub(crate) fn map(&self) -> OxeQueueMap {
        self.q.irq().shared().map()
    }

    /// WQEs the SRQ holds (`max_wr` as granted).
    pub(crate) fn capacity(&self) -> u32 {
        self.q.irq().shared().num_slots()
    }

    /// Takes the next receive WQE, if any, and raises the limit event when
    /// the queue drops below an armed limit.
    ///
    /// A WQE shorter than `need` bytes stays queued and comes back as
    /// `EMSGSIZE` (see `Qp::take_recv`).
    pub(crate) fn take(
        &self,
        need: u32,
        ready: impl Fn(&RecvWr) -> Result,
    ) -> Option<Result<RecvWr>> {
        let mut q = self.q.bh();
        let (st, ring) = q.parts();
        let prod = ring.producer();
        let queued = prod.wrapping_sub(st.consumer);
        if queued == 0 || queued > ring.num_slots() {
            return None;
        }
        let w = wr::read_recv(ring, st.consumer);
        if let Some(e) = w.as_ref().ok().and_then(|w| w.refusal(need, &ready)) {
            return Some(Err(e));
        }
        st.consumer = st.consumer.wrapping_add(1);
        ring.set_consumer(st.consumer);
        let reached = st.limit != 0 && queued - 1 < st.limit;
        if reached {
            st.limit = 0;
        }
        drop(q);
        // Out of the SRQ's lock: the handler may well re-arm the limit.
        if reached {
            self.handle.call(SrqHandle::limit_reached);
        }
        Some(w)
    }

    /// Arms (or, with 0, disarms) the limit event.
    pub(crate) fn set_limit(&self, limit: u32) -> Result {
        let mut q = self.q.bh();
        let (st, ring) = q.parts();
        if limit > ring.num_slots() {
            return Err(EINVAL);
        }
        st.limit = limit;
        Ok(())
    }

    pub(crate) fn limit(&self) -> u32 {
        let mut q = self.q.bh();
        q.parts().0.limit
    }

    /// A ring for a resize to at least `max_wr` WQEs of this SRQ's SGEs,
    /// mapped for `uctx` if given; allocated before any lock is taken.
    pub(crate) fn new_ring(&self, uctx: Option<Uctx>, max_wr: u32) -> Result<Ring> {
        if max_wr == 0 || max_wr > crate::qp::MAX_WR {
            return Err(EINVAL);
        }
        Ring::new(uctx, max_wr, slot_size(self.max_sge))
    }

    /// Moves the SRQ to `new` (from [`Srq::new_ring`]), keeping every WQE
    /// not yet taken, in order and at its index, and arms `limit` if given.
    /// `EINVAL` if the WQEs do not fit, or the limit (the new one, else the
    /// armed one) would exceed the new size. Returns, with the result, the
    /// ring no longer in use (the old one, or `new` if refused), for the
    /// caller to drop out of the locks, since dropping it may sleep. The
    /// receive path waits meanwhile, kernel posters for one step at most;
    /// a user poster is expected to hold its own lock across the verb (the
    /// provider does).
    pub(crate) fn resize(&self, new: Ring, limit: Option<u32>) -> (Result, Ring) {
        // The WQEs move as a CQ's completions do (`Cq::resize`), with the
        // receive path held off throughout and kernel posters between
        // steps. The producer index in the ring: user space's, or for
        // kernel consumers the one kept at the irq end, stored there on
        // each post.
        let indices = |st: &mut SrqState, _: &mut u32, ring: &Ring, new: &Ring| {
            if limit.unwrap_or(st.limit) > new.num_slots() {
                return Err(EINVAL);
            }
            Ok((st.consumer, ring.producer()))
        };
        let moved = |st: &mut SrqState| st.limit = limit.unwrap_or(st.limit);
        let (r, unused, tally) = move_ring(&self.q, new, indices, moved);
        self.quota.counters().resized(tally);
        (r, unused)
    }

    /// A kernel consumer's ib_post_srq_recv: copies one WQE into the ring.
    pub(crate) fn post_kernel(&self, w: &OxeRecvWqe, sges: &[OxeSge]) -> Result {
        let mut q = self.q.irq();
        let (prod, ring) = q.parts();
        if prod.wrapping_sub(ring.consumer()) >= ring.num_slots() {
            return Err(ENOMEM);
        }
        if sges.len() > self.max_sge as usize {
            return Err(EINVAL);
        }
        write_recv_slot(ring, *prod, w, sges);
        *prod = prod.wrapping_add(1);
        ring.set_producer(*prod);
        Ok(())
    }

    /// The destroy verb: no more events, no more mapping. Process context
    /// (removing the mapping sleeps).
    pub(crate) fn destroy(&self) {
        self.handle.retire();
        let detached = self.q.irq().shared().detach();
        drop(detached);
    }
}

/// Writes a receive WQE and its SGEs into slot `idx` of `ring`.
pub(crate) fn write_recv_slot(ring: &Ring, idx: u32, w: &OxeRecvWqe, sges: &[OxeSge]) {
    let mut buf = [0u8; wr::MAX_SLOT];
    w.write_to(&mut buf);
    for (i, s) in sges.iter().enumerate() {
        let at = OxeRecvWqe::SIZE + i * OxeSge::SIZE;
        if let Some(dst) = buf.get_mut(at..) {
            s.write_to(dst);
        }
    }
    let n = (OxeRecvWqe::SIZE + sges.len() * OxeSge::SIZE).min(wr::MAX_SLOT);
    ring.write_slot(idx, &buf[..n]);
}
