// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: one ring of receive WQEs that several QPs of a PD
//! draw from, with the limit event IBTA 10.2.9.3 describes.

use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::objects::PdId;
use crate::ib::queue::{Ring, Uctx};
use crate::ib::srq::SrqHandle;
use crate::oxe_core::abi::{OxeRecvWqe, OxeSge};
use crate::wr::{self, RecvWr};
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLockIrq};

#[pin_data]
pub(crate) struct Srq {
    pub(crate) ring: Ring,
    pub(crate) pd: PdId,
    pub(crate) max_sge: u32,
    /// The kernel's consumer index (authoritative) and the armed limit
    /// (0: not armed).
    #[pin]
    state: SpinLockBh<SrqState>,
    /// Kernel consumers' producer index.
    #[pin]
    kpost: SpinLockIrq<u32>,
    #[pin]
    handle: SpinLockIrq<Option<SrqHandle>>,
}

struct SrqState {
    consumer: u32,
    limit: u32,
}

impl Srq {
    pub(crate) fn new(
        uctx: Option<Uctx>,
        pd: PdId,
        max_wr: u32,
        max_sge: u32,
        limit: u32,
        handle: SrqHandle,
    ) -> Result<Arc<Srq>> {
        if max_wr == 0 || max_wr > crate::qp::MAX_WR || max_sge > crate::qp::MAX_SGE {
            return Err(EINVAL);
        }
        let slot = OxeRecvWqe::SIZE as u32 + max_sge.max(1) * OxeSge::SIZE as u32;
        let ring = Ring::new(uctx, max_wr, slot)?;
        let max_sge = (ring.slot_size() - OxeRecvWqe::SIZE as u32) / OxeSge::SIZE as u32;
        Arc::pin_init(
            pin_init!(Srq {
                ring,
                pd,
                max_sge,
                state <- new_spinlock_bh!(SrqState { consumer: 0, limit }),
                kpost <- kernel::new_spinlock_irq!(0),
                handle <- kernel::new_spinlock_irq!(Some(handle)),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes the next receive WQE, if any, and raises the limit event when
    /// the queue drops below an armed limit.
    pub(crate) fn take(&self) -> Option<Result<RecvWr>> {
        let mut st = self.state.lock();
        let prod = self.ring.producer();
        let queued = prod.wrapping_sub(st.consumer);
        if queued == 0 || queued > self.ring.num_slots() {
            return None;
        }
        let w = wr::read_recv(&self.ring, st.consumer);
        st.consumer = st.consumer.wrapping_add(1);
        self.ring.set_consumer(st.consumer);
        if st.limit != 0 && queued - 1 < st.limit {
            st.limit = 0;
            if let Some(h) = self.handle.lock().as_ref() {
                h.limit_reached();
            }
        }
        Some(w)
    }

    /// Arms (or, with 0, disarms) the limit event.
    pub(crate) fn set_limit(&self, limit: u32) -> Result {
        if limit > self.ring.num_slots() {
            return Err(EINVAL);
        }
        self.state.lock().limit = limit;
        Ok(())
    }

    pub(crate) fn limit(&self) -> u32 {
        self.state.lock().limit
    }

    /// Kernel consumers' ib_post_srq_recv: copies WQEs into the ring.
    pub(crate) fn post_kernel(&self, wqes: &[(OxeRecvWqe, KVec<OxeSge>)]) -> Result {
        let mut prod = self.kpost.lock();
        for (w, sges) in wqes {
            if prod.wrapping_sub(self.ring.consumer()) >= self.ring.num_slots() {
                return Err(ENOMEM);
            }
            if sges.len() > self.max_sge as usize {
                return Err(EINVAL);
            }
            write_recv_slot(&self.ring, *prod, w, sges);
            *prod = prod.wrapping_add(1);
            self.ring.set_producer(*prod);
        }
        Ok(())
    }

    pub(crate) fn destroy(&self) {
        self.handle.lock().take();
        self.ring.unmap();
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
