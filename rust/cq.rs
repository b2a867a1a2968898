// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of `OxeCqe` the kernel produces into and the
//! consumer (the provider, or ib_core's poll for kernel consumers) drains.

#![deny(unsafe_code)]

use crate::counters::Counters;
use crate::ib::callback::Callback;
use crate::ib::cq::CqHandle;
use crate::ib::lock::{new_spinlock_bh, DualLock};
use crate::ib::queue::{move_ring, Ring, Uctx};
use crate::ib::umem::{MmId, MmRef};
use crate::limits::{Kind, Quota};
use crate::oxe_core::abi::{
    OxeCqe, OxeInlinePiece, OxeQueueMap, OXE_CQE_INLINE_DATA, OXE_CQE_INLINE_PIECES,
    OXE_CQE_INLINE_SLOT, OXE_WC_INLINE,
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Largest CQ, in entries.
pub(crate) const MAX_CQE: u32 = 1 << 16;

/// `req_notify_cq` arming.
const DISARMED: u32 = 0;
const ARM_SOLICITED: u32 = 1;
const ARM_NEXT: u32 = 2;

#[pin_data]
pub(crate) struct Cq {
    /// The ring. Its `_bh` end holds the producer index, which only the
    /// kernel owns (user space may scribble on the shared copy; we never
    /// read it back), taken by producers in softirq or process context.
    /// Its irq end serializes kernel consumers (ib_poll_cq may run in any
    /// context). A resize holds both.
    #[pin]
    q: DualLock<u32, (), Ring>,
    armed: AtomicU32,
    /// An overrun was reported (once for the CQ's life).
    overrun: AtomicBool,
    /// Its slots hold a message and where it goes after the CQE (inline
    /// receive, `OXE_CQE_INLINE_SLOT`), for a provider that asked; fixed
    /// for the CQ's life, resizes included.
    inline_recv: bool,
    /// The process that created it, which maps and polls its ring: inline
    /// messages only go to memory pinned from that process. Held, so that
    /// no later process can have its identity while the CQ lives.
    owner: Option<MmRef>,
    /// The ib_cq, for completion and error events; gone once destroyed.
    #[pin]
    handle: Callback<CqHandle>,
    /// Its place under the device's CQ limit, given back when the CQ goes.
    quota: Quota,
}

impl Cq {
    pub(crate) fn new(
        counters: &Arc<Counters>,
        uctx: Option<Uctx>,
        cqe: u32,
        inline_recv: bool,
        handle: CqHandle,
    ) -> Result<Arc<Cq>> {
        let quota = Quota::take(counters, Kind::Cq)?;
        // Kernel consumers poll through `poll`, which has no use for it.
        let inline_recv = inline_recv && uctx.is_some();
        let ring = Self::new_ring(uctx, cqe, inline_recv)?;
        let owner = if inline_recv { MmRef::current() } else { None };
        Arc::pin_init(
            pin_init!(Cq {
                q <- DualLock::new(new_spinlock_bh!(0), kernel::new_spinlock_irq!(()), ring),
                armed: AtomicU32::new(DISARMED),
                overrun: AtomicBool::new(false),
                inline_recv,
                owner,
                handle <- Callback::new(handle),
                quota,
            }),
            GFP_KERNEL,
        )
    }

    /// A ring for at least `cqe` completions, mapped for `uctx` if given:
    /// for a new CQ, or for a resize (allocated before any lock is taken).
    pub(crate) fn new_ring(uctx: Option<Uctx>, cqe: u32, inline_recv: bool) -> Result<Ring> {
        if cqe == 0 || cqe > MAX_CQE {
            return Err(EINVAL);
        }
        let slot = if inline_recv {
            OXE_CQE_INLINE_SLOT
        } else {
            OxeCqe::SIZE as u32
        };
        Ring::new(uctx, cqe, slot)
    }

    /// Whether receive completions may carry their message.
    pub(crate) fn inline_recv(&self) -> bool {
        self.inline_recv
    }

    /// The address space that polls the CQ (see [`Cq::push_inline`]).
    pub(crate) fn owner(&self) -> MmId {
        self.owner.as_ref().map(MmRef::id).unwrap_or_default()
    }

    /// Where user space maps the ring.
    pub(crate) fn map(&self) -> OxeQueueMap {
        self.q.irq().shared().map()
    }

    /// Entries the CQ holds.
    pub(crate) fn capacity(&self) -> u32 {
        self.q.irq().shared().num_slots()
    }

    /// Completions not yet consumed.
    pub(crate) fn outstanding(&self) -> u32 {
        let mut q = self.q.bh();
        let (prod, ring) = q.parts();
        prod.wrapping_sub(ring.consumer())
    }

    /// Adds a completion; `solicited` for a receive whose sender asked for an
    /// event. A full CQ is an overrun: the completion is lost and the
    /// consumer gets IB_EVENT_CQ_ERR, as IBTA 11.4.2.1 describes.
    pub(crate) fn push(&self, cqe: &OxeCqe, solicited: bool) -> bool {
        self.push_image(cqe, &cqe.to_bytes(), solicited)
    }

    /// As [`Cq::push`], for a receive whose message goes with the
    /// completion: `data` is the message, `pieces` where the provider puts
    /// it. Only for a CQ with [`Cq::inline_recv`] (else `false`, nothing
    /// pushed); the caller checked the sizes against the ABI's limits.
    pub(crate) fn push_inline(
        &self,
        cqe: &OxeCqe,
        data: &[u8],
        pieces: &[OxeInlinePiece],
        solicited: bool,
    ) -> bool {
        let mut c = *cqe;
        c.wc_flags |= OXE_WC_INLINE;
        let mut slot = [0u8; OXE_CQE_INLINE_SLOT as usize];
        if !self.inline_recv || !fill_inline(&mut slot, &c, data, pieces) {
            return false;
        }
        self.push_image(&c, &slot, solicited)
    }

    /// Publishes one slot's image, `cqe` first.
    fn push_image(&self, cqe: &OxeCqe, image: &[u8], solicited: bool) -> bool {
        let mut q = self.q.bh();
        let (prod, ring) = q.parts();
        let used = prod.wrapping_sub(ring.consumer());
        if used >= ring.num_slots() {
            drop(q);
            // One event per CQ, not per lost completion: ib_core queues each
            // event for user space with GFP_ATOMIC, and a producer a process
            // drives (a flush of receives it keeps posting, a consumer that
            // polls one and posts two) would otherwise queue them without
            // bound. An overrun is the CQ's error (IBTA 11.4.2.1): the CQ
            // is then not to be trusted, and one report says so.
            if !self.overrun.swap(true, Ordering::AcqRel) {
                self.handle.call(CqHandle::error_event);
            }
            return false;
        }
        ring.write_slot(*prod, image);
        *prod = prod.wrapping_add(1);
        ring.set_producer(*prod);
        drop(q);
        let armed = self.armed.load(Ordering::Acquire);
        let fire = armed == ARM_NEXT || (armed == ARM_SOLICITED && (solicited || cqe.status != 0));
        if fire && self.armed.swap(DISARMED, Ordering::AcqRel) != DISARMED {
            self.handle.call(CqHandle::completion);
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
        let q = self.q.irq();
        let ring = q.shared();
        ring.producer() != ring.consumer()
    }

    /// Kernel consumers: moves up to `out.len()` completions out, and
    /// returns how many. The caller looks their QPs up afterwards: a table
    /// lookup holds softirqs off, which must not end inside this irq lock.
    pub(crate) fn poll(&self, out: &mut [OxeCqe]) -> usize {
        // A kernel consumer's CQ never has inline slots (`Cq::new`).
        let q = self.q.irq();
        let ring = q.shared();
        let prod = ring.producer();
        let mut cons = ring.consumer();
        let mut n = 0;
        let mut buf = [0u8; OxeCqe::SIZE];
        while n < out.len() && cons != prod {
            ring.read_slot(cons, &mut buf);
            cons = cons.wrapping_add(1);
            if let (Some(cqe), Some(slot)) = (OxeCqe::from_bytes(&buf), out.get_mut(n)) {
                *slot = cqe;
                n += 1;
            }
        }
        ring.set_consumer(cons);
        n
    }

    /// Moves the CQ to `new` (from [`Cq::new_ring`]), keeping every
    /// completion not yet polled, in order and at its index. `EINVAL` if
    /// they do not fit. Returns, with the result, the ring no longer in use
    /// (the old one, or `new` if refused): the caller drops it after this
    /// returns, out of the locks, since dropping it may sleep.
    ///
    /// The completions move [`crate::ib::queue::RESIZE_STEP`] at a time.
    /// Producers wait for the whole move (softirqs off), so none finds the
    /// old ring full meanwhile; kernel consumers, whose end disables
    /// interrupts, wait for one step at most. A user consumer is expected
    /// to hold its own lock across the verb (the provider does).
    pub(crate) fn resize(&self, new: Ring) -> (Result, Ring) {
        let indices =
            |prod: &mut u32, (): &mut (), ring: &Ring, _: &Ring| Ok((ring.consumer(), *prod));
        let (r, unused, tally) = move_ring(&self.q, new, indices, |_| ());
        self.quota.counters().resized(tally);
        (r, unused)
    }

    /// The destroy verb: no more events to the ib_cq, no more mapping.
    /// Process context (removing the mapping sleeps).
    pub(crate) fn destroy(&self) {
        let detached = self.q.irq().shared().detach();
        drop(detached);
        self.handle.retire();
    }
}

/// Lays out an inline-receive slot: the CQE, the message, its pieces.
/// `false` if they do not fit the ABI's limits.
fn fill_inline(
    slot: &mut [u8; OXE_CQE_INLINE_SLOT as usize],
    cqe: &OxeCqe,
    data: &[u8],
    pieces: &[OxeInlinePiece],
) -> bool {
    let data_at = OXE_CQE_INLINE_DATA as usize;
    let pieces_at = OXE_CQE_INLINE_PIECES as usize;
    if data_at + data.len() > pieces_at
        || pieces_at + pieces.len() * OxeInlinePiece::SIZE > slot.len()
    {
        return false;
    }
    slot[..OxeCqe::SIZE].copy_from_slice(&cqe.to_bytes());
    slot[data_at..data_at + data.len()].copy_from_slice(data);
    for (i, p) in pieces.iter().enumerate() {
        let at = pieces_at + i * OxeInlinePiece::SIZE;
        slot[at..at + OxeInlinePiece::SIZE].copy_from_slice(&p.to_bytes());
    }
    true
}
