// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of `OxeCqe` the kernel produces into and the
//! consumer (the provider, or ib_core's poll for kernel consumers) drains.

use crate::ib::cq::CqHandle;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::queue::{Ring, Uctx};
use crate::oxe_core::abi::OxeCqe;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLockIrq};

/// Largest CQ, in entries.
pub(crate) const MAX_CQE: u32 = 1 << 16;

/// `req_notify_cq` arming.
const DISARMED: u32 = 0;
const ARM_SOLICITED: u32 = 1;
const ARM_NEXT: u32 = 2;

#[pin_data]
pub(crate) struct Cq {
    ring: Ring,
    /// The producer index, which only the kernel owns (user space may
    /// scribble on the shared copy; we never read it back).
    #[pin]
    producer: SpinLockBh<u32>,
    /// Serializes kernel consumers (ib_poll_cq may run in softirq).
    #[pin]
    poll: SpinLockIrq<()>,
    armed: AtomicU32,
    /// The ib_cq, for completion and error events; gone once destroyed.
    #[pin]
    handle: SpinLockIrq<Option<CqHandle>>,
}

impl Cq {
    pub(crate) fn new(uctx: Option<Uctx>, cqe: u32, handle: CqHandle) -> Result<Arc<Cq>> {
        if cqe == 0 || cqe > MAX_CQE {
            return Err(EINVAL);
        }
        let ring = Ring::new(uctx, cqe, OxeCqe::SIZE as u32)?;
        Arc::pin_init(
            pin_init!(Cq {
                ring,
                producer <- new_spinlock_bh!(0),
                poll <- kernel::new_spinlock_irq!(()),
                armed: AtomicU32::new(DISARMED),
                handle <- kernel::new_spinlock_irq!(Some(handle)),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Entries the CQ holds.
    pub(crate) fn capacity(&self) -> u32 {
        self.ring.num_slots()
    }

    /// Adds a completion; `solicited` for a receive whose sender asked for an
    /// event. A full CQ is an overrun: the completion is lost and the
    /// consumer gets IB_EVENT_CQ_ERR, as IBTA 11.4.2.1 describes.
    pub(crate) fn push(&self, cqe: &OxeCqe, solicited: bool) -> bool {
        let mut prod = self.producer.lock();
        let used = prod.wrapping_sub(self.ring.consumer());
        if used >= self.ring.num_slots() {
            drop(prod);
            if let Some(h) = self.handle.lock().as_ref() {
                h.error_event();
            }
            return false;
        }
        self.ring.write_slot(*prod, &cqe.to_bytes());
        *prod = prod.wrapping_add(1);
        self.ring.set_producer(*prod);
        drop(prod);
        let armed = self.armed.load(Ordering::Acquire);
        let fire = armed == ARM_NEXT || (armed == ARM_SOLICITED && (solicited || cqe.status != 0));
        if fire && self.armed.swap(DISARMED, Ordering::AcqRel) != DISARMED {
            if let Some(h) = self.handle.lock().as_ref() {
                h.completion();
            }
        }
        true
    }

    /// ib_req_notify_cq. Returns whether completions are already waiting
    /// (for IB_CQ_REPORT_MISSED_EVENTS).
    pub(crate) fn arm(&self, solicited_only: bool) -> bool {
        self.armed.store(
            if solicited_only {
                ARM_SOLICITED
            } else {
                ARM_NEXT
            },
            Ordering::Release,
        );
        self.ring.producer() != self.ring.consumer()
    }

    /// Kernel consumers: moves up to `out.len()` completions out.
    pub(crate) fn poll(&self, mut each: impl FnMut(OxeCqe) -> bool, max: usize) -> usize {
        let _g = self.poll.lock();
        let prod = self.ring.producer();
        let mut cons = self.ring.consumer();
        let mut n = 0;
        let mut buf = [0u8; OxeCqe::SIZE];
        while n < max && cons != prod {
            self.ring.read_slot(cons, &mut buf);
            cons = cons.wrapping_add(1);
            if let Some(cqe) = OxeCqe::from_bytes(&buf) {
                if each(cqe) {
                    n += 1;
                }
            }
        }
        self.ring.set_consumer(cons);
        n
    }

    /// The destroy verb: no more events to the ib_cq, no more mapping.
    pub(crate) fn destroy(&self) -> Option<CqHandle> {
        self.handle.lock().take()
    }
}
