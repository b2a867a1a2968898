// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation, the state machine (IBTA 10.3), and the work item
//! that drives the send side. The protocol itself is in `req.rs`
//! (requester), `comp.rs` (completer) and `resp.rs` (responder).
//!
//! All protocol state sits behind one softirq-safe spinlock per QP
//! (`ib/lock.rs`): the receive softirq, the doorbell, the QP's work item
//! (timers, flushes) and the verbs take it, and nothing under it sleeps.
//! Kernel consumers post from any context; they only write the rings
//! (under an irq-safe lock) and kick the work item.

#![deny(unsafe_code)]

use crate::bindings::trace;
use crate::cq::Cq;
use crate::device::OxeDevice;
use crate::ib::av::Av;
use crate::ib::callback::Callback;
use crate::ib::device::IbDev;
use crate::ib::kmem::KernelToken;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh, SpinLockBhBackend};
use crate::ib::objects::PdId;
use crate::ib::pkt::{OpenPacket, TxQueue};
use crate::ib::qp::{QpAttr, QpCaps, QpHandle, QpInit};
use crate::ib::queue::Ring;
use crate::ib::work::{self, Drain, DrainOn, RxQueue, Work, WorkFn};
use crate::limits::{Kind, Quota};
use crate::oxe_core::abi::{OxeCqe, OxeRecvWqe, OxeSendWqe, OxeSge};
use crate::oxe_core::qp_state::{self, QpAttrMask, QpState, QpType};
use crate::oxe_core::Psn;
use crate::srq::Srq;
use crate::wr::{self, wc_status, RecvWr, SendWr};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::lock::Guard;
use kernel::sync::{Arc, SetOnce, SpinLockIrq};

/// Source of [`Qp::uid`].
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Queue depth limit (per queue).
pub(crate) const MAX_WR: u32 = 1 << 14;
/// SGEs per work request.
pub(crate) const MAX_SGE: u32 = 32;
/// Inline payload per send work request.
pub(crate) const MAX_INLINE: u32 = 512;
/// Outstanding RDMA READ / atomic requests, each way: rxe's 128, since
/// perftest refuses to run between devices that offer different numbers.
/// TODO: a smaller number would also bound how long a re-asked READ waits
/// behind queued responses; what that costs throughput is not measured.
pub(crate) const MAX_RD_ATOMIC: u32 = 128;
/// The longest message, the device's `max_msg_sz` (IBTA's 2^31).
pub(crate) const MAX_MSG_SZ: u32 = 1 << 31;
/// The Q_Key of QP1 (IBTA 13.4.6.1... the GSI's well-known Q_Key).
pub(crate) const GSI_QKEY: u32 = 0x8001_0000;

/// A send work request in flight (RC) or being sent (UD).
pub(crate) struct Pending {
    pub(crate) wr: SendWr,
    /// Kernel UD/GSI requests: where to.
    pub(crate) av: Option<Av>,
    pub(crate) first_psn: Psn,
    /// PSNs the request uses (its packets, or a read's response packets).
    pub(crate) npsn: u32,
    /// Packets sent (requests: 0 or 1 for a read or atomic).
    pub(crate) sent: u32,
    /// Read response packets received.
    pub(crate) got: u32,
    pub(crate) started: bool,
    pub(crate) done: bool,
    pub(crate) status: u32,
}

/// Requester and completer state.
#[derive(Default)]
pub(crate) struct Req {
    /// Next SQ slot to read.
    pub(crate) fetch: u32,
    /// Fetched and not yet completed, oldest first.
    pub(crate) pending: KVec<Pending>,
    /// Every request of `pending` before this index is done or sent in
    /// full: where the requester and `Qp::sendable` start looking for the
    /// next packet to send. Requests go out in order, so those form a
    /// prefix; only a go-back (`Qp::rewind`) sends some again, and it
    /// starts the search over. Without it every READ response that came
    /// in walked all 128 outstanding reads to find that none was left to
    /// send.
    pub(crate) sent_through: usize,
    pub(crate) next_psn: Psn,
    /// The last PSN the responder acknowledged (explicitly or by a later
    /// response): the left edge of the packet window (`Qp::window_open`).
    pub(crate) acked: Psn,
    /// The last PSN a request sent so far may be answered at (a READ's
    /// last response): anything later that comes back is a ghost.
    pub(crate) last_sent: Psn,
    pub(crate) retries_left: u8,
    pub(crate) rnr_left: u8,
    /// Retransmit deadline (jiffies) while anything is unacknowledged.
    pub(crate) deadline: Option<u64>,
    /// RNR NAK back-off: no sending before this (jiffies).
    pub(crate) rnr_until: Option<u64>,
    /// A gather missed an ODP page and queued its fault: nothing more is
    /// sent until the QP's work, once it has let go of the QP, has run
    /// the fault (`Qp::run_work`).
    pub(crate) faulted: bool,
    /// The packet being sent has missed already since it last went out:
    /// another miss waits a tick for its fault instead, so a fault that
    /// cannot be had (memory short, pages taken again each time) costs a
    /// try per tick, not a busy CPU.
    pub(crate) missed: bool,
    /// Reads and atomics outstanding.
    pub(crate) rd_out: u32,
    /// A gap in read responses was answered by a retry; cleared on progress.
    pub(crate) read_gap_retried: bool,
    /// Retransmit timeouts put off since the last progress because the
    /// QP's own backlog held packets (see `Qp::timers`).
    pub(crate) timeouts_put_off: u8,
    /// After a loss, how many reads and atomics may be on the wire at once
    /// (0: as many as `max_rd_atomic` allows). See `Qp::read_window_open`.
    pub(crate) rd_window: u32,
    /// After a retransmit timeout or a sequence-error NAK, how many SEND
    /// and WRITE packets may be past the acknowledged PSN (0: the whole
    /// `PACKET_WINDOW`). See `Qp::window_open`.
    pub(crate) pkt_window: u32,
    /// Where the last retransmit timeout went back to, until the
    /// responder acknowledges that far (see the sequence-error NAK in
    /// `Qp::on_response`).
    pub(crate) rewound_to: Option<Psn>,
    /// The request packet still taking segments (`tx::Out`), queued on
    /// `Qp::req_txq` when the lock is released.
    pub(crate) open: OpenPacket,
}

/// A receive being filled by a multi-packet SEND.
pub(crate) struct RecvInProgress {
    pub(crate) wr: RecvWr,
    pub(crate) off: u32,
}

/// An RDMA WRITE being placed.
pub(crate) struct WriteInProgress {
    pub(crate) mr: Option<crate::xfer::Target>,
    /// The RETH's rkey, resolved again for every packet.
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) off: u64,
    pub(crate) len: u64,
}

/// An RDMA READ whose responses are still being sent.
pub(crate) struct ReadInProgress {
    pub(crate) mr: Option<crate::xfer::Target>,
    /// The rkey the READ named: every burst reads through it as it stands
    /// then (an invalidated or re-registered key grants nothing more).
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) dma_len: u32,
    /// The PSN of the first response, and how many there are.
    pub(crate) psn: Psn,
    pub(crate) n: u32,
    /// The next response to send.
    pub(crate) next: u32,
    /// How many times in a row `next` found its ODP page missing.
    pub(crate) misses: u8,
}

/// Responder state.
#[derive(Default)]
pub(crate) struct Resp {
    pub(crate) epsn: Psn,
    /// UC: a packet of the current message was lost; the rest of it is
    /// dropped until a new message starts.
    pub(crate) uc_dropping: bool,
    pub(crate) msn: u32,
    pub(crate) nak_sent: bool,
    pub(crate) recv: Option<RecvInProgress>,
    pub(crate) write: Option<WriteInProgress>,
    pub(crate) read: Option<ReadInProgress>,
    /// The RQ's consumer index (the kernel's, authoritative).
    pub(crate) rq_cons: u32,
    /// The datagram being processed found its ODP receive buffer missing
    /// (the faults are queued): `process` hands it back for another go
    /// from process context (`crate::recv`). Set and taken under the lock.
    pub(crate) odp_retry: bool,
    /// The packet being processed is that other go: a miss now is
    /// answered as the transport answers any missing resource (an RC
    /// request's RNR NAK, a dropped response or datagram), not retried.
    pub(crate) odp_last_try: bool,
    /// The READ under way stopped at an ODP page invalidated since it
    /// began (its fault is queued): the backlog's drain takes the fault,
    /// without the lock, and the READ goes on from that packet.
    pub(crate) read_fault: bool,
    /// A plain ACK decided under the lock and built once it is released
    /// ([`QpLock`]): the latest one only, as a later ACK covers an earlier.
    ///
    /// The receive softirq that places a peer's request holds the QP lock,
    /// and the QP's own process waits on that lock to post its next request
    /// the moment it sees the data land (`ib_write_lat` does exactly that):
    /// building the ACK (an skb, its headers, its ICRC) after the unlock takes
    /// it off that process's path.
    pub(crate) ack_out: core::cell::Cell<Option<Reply>>,
    /// The response packet still taking segments (`tx::Out`), queued on
    /// `Qp::txq` when the lock is released.
    pub(crate) open: OpenPacket,
}

/// Where a response goes and the PSN and MSN it carries, copied out of the
/// locked state: what an ACK built after the unlock needs of it.
#[derive(Clone, Copy)]
pub(crate) struct Reply {
    pub(crate) av: Av,
    pub(crate) dest_qpn: u32,
    pub(crate) psn: Psn,
    pub(crate) msn: u32,
}

/// What the responder keeps of a READ or an atomic it executed, so that a
/// duplicate of it (its response was lost) can be answered again: IBTA's
/// responder resources, `max_dest_rd_atomic` of them (9.7.4.1.x).
#[derive(Clone, Copy, Default)]
pub(crate) enum Resource {
    #[default]
    Free,
    /// A READ and the PSNs its responses span.
    Read { psn: Psn, npsn: u32 },
    /// An atomic and the original value its ACK returned.
    Atomic { psn: Psn, orig: u64 },
}

/// The responder resources, a ring: a new READ or atomic takes the oldest
/// one's place. A duplicate that names none of them is not answered, so a
/// peer can make the responder repeat at most the work it has been
/// granted, never any READ from the past half of the PSN space.
pub(crate) struct Resources {
    slots: [Resource; MAX_RD_ATOMIC as usize],
    next: usize,
    /// The ring's size when it was last filled: a new size starts afresh,
    /// so that no slot past it is searched.
    limit: u8,
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            slots: [Resource::Free; MAX_RD_ATOMIC as usize],
            next: 0,
            limit: 0,
        }
    }
}

impl Resources {
    /// Records `r`, in a ring of `limit` (the QP's `max_dest_rd_atomic`,
    /// at least one).
    pub(crate) fn record(&mut self, r: Resource, limit: u8) {
        if limit != self.limit {
            self.clear();
            self.limit = limit;
        }
        let n = usize::from(limit).clamp(1, self.slots.len());
        if let Some(slot) = self.slots.get_mut(self.next % n) {
            *slot = r;
        }
        self.next = (self.next + 1) % n;
    }

    /// Forgets every resource, in place (the ring is 2 KiB: not a value to
    /// build on the stack under the QP's lock).
    pub(crate) fn clear(&mut self) {
        self.slots.fill(Resource::Free);
        self.next = 0;
    }

    /// The READ whose responses include PSNs `psn` to `psn + n - 1`.
    pub(crate) fn read_covering(&self, psn: Psn, n: u32) -> bool {
        self.slots.iter().any(|r| match *r {
            Resource::Read { psn: first, npsn } => {
                let from = psn.distance_from(first);
                from >= 0 && (from as u32).saturating_add(n) <= npsn
            }
            _ => false,
        })
    }

    /// The original value of the atomic at `psn`.
    pub(crate) fn atomic_at(&self, psn: Psn) -> Option<u64> {
        self.slots.iter().find_map(|r| match *r {
            Resource::Atomic { psn: p, orig } if p == psn => Some(orig),
            _ => None,
        })
    }
}

pub(crate) struct QpInner {
    pub(crate) state: QpState,
    pub(crate) attr: QpAttr,
    pub(crate) req: Req,
    pub(crate) resp: Resp,
    /// The responder resources (kept apart from `resp`, which a reset
    /// rebuilds as a value).
    pub(crate) resources: Resources,
}

impl QpInner {
    /// Path MTU in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        match self.attr.path_mtu {
            1..=5 => 128 << self.attr.path_mtu,
            _ => 1024,
        }
    }
}

/// Kernel consumers' producer indices.
struct KernelPost {
    sq: u32,
    rq: u32,
}

#[pin_data(PinnedDrop)]
pub(crate) struct Qp {
    /// The work item (timers, flushes, the requester); cancelled before
    /// anything of the QP is dropped (`owns_work!` below).
    work: SetOnce<Work>,
    /// Received packets left for another CPU (see `recv.rs`), and how
    /// many of them are not processed yet. Its drain is cancelled as the
    /// work item is.
    pub(crate) backlog: SetOnce<RxQueue>,
    pub(crate) backlogged: AtomicU32,
    /// A doorbell found the lock held: its holder kicks the work item as
    /// it releases the lock (see `Qp::doorbell`).
    doorbell_pending: AtomicBool,
    /// A READ is being answered (`Resp::read`): the packets that follow it
    /// wait in the backlog, whose drain sends the responses in bursts.
    pub(crate) reading: AtomicBool,
    /// How many response PSNs the requester has asked for and not yet
    /// had answered, while it has reads or atomics outstanding (0
    /// otherwise): published at each release of `inner`, for the receive
    /// softirq to size the backlog's room for READ responses
    /// (`Qp::backlog_room`, in `recv.rs`) without taking the lock.
    pub(crate) responses_due: AtomicU32,
    /// Responder packets (acknowledgements, read and atomic responses)
    /// built under `inner`, sent when it is released ([`QpLock`]).
    pub(crate) txq: TxQueue,
    /// Requests, built by the requester under `inner` and sent by the work
    /// item (or doorbell) that built them, after it releases `inner`: only
    /// process context sends requests, on the work's home CPU, so that
    /// they reach the peer in PSN order. A receive softirq that releases
    /// `inner` in between must not send them: its burst would wait on its
    /// CPU's receive backlog while later requests from the home CPU
    /// overtake it.
    pub(crate) req_txq: TxQueue,
    qpn: AtomicU32,
    /// This QP's incarnation, unique for the module's lifetime: QP numbers
    /// are reused, and a type 2 window must not follow its number to a new QP.
    uid: u64,
    pub(crate) ty: QpType,
    pub(crate) pd: PdId,
    pub(crate) dev: IbDev<OxeDevice>,
    pub(crate) send_cq: Arc<Cq>,
    pub(crate) recv_cq: Arc<Cq>,
    pub(crate) srq: Option<Arc<Srq>>,
    pub(crate) sq: Ring,
    pub(crate) rq: Option<Ring>,
    pub(crate) caps: QpCaps,
    pub(crate) sq_sig_all: bool,
    /// Receives of at most `OXE_INLINE_RECV_MAX` bytes into pinned user
    /// memory complete with the message in the CQE, for the provider to
    /// copy (inline receive, `resp.rs`).
    pub(crate) inline_recv: bool,
    pub(crate) kernel: Option<KernelToken>,
    /// UDP source port: spreads QPs over flows, as RoCE v2 intends.
    pub(crate) sport: u16,
    /// Multicast groups the QP is attached to (kept by `mcast.rs`).
    pub(crate) mcast_groups: AtomicU32,
    #[pin]
    kpost: SpinLockIrq<KernelPost>,
    #[pin]
    handle: Callback<QpHandle>,
    /// Its place under the device's QP limit, given back when it goes.
    _quota: Quota,
    /// Kernel UD/GSI QPs: the address of each SQ slot's request (their
    /// AHs are not numbered, as they may be created in atomic context).
    #[pin]
    kav: SpinLockIrq<KVec<Av>>,
    /// Protocol state; taken through [`Qp::lock`].
    #[pin]
    inner: SpinLockBh<QpInner>,
}

/// The QP's protocol state, locked. Dropping it unlocks, then builds the
/// ACK left for after the unlock, if any, and sends the packets built
/// meanwhile (fields drop in declaration order, after `drop` moved the ACK
/// out of the locked state).
pub(crate) struct QpLock<'a> {
    guard: Guard<'a, QpInner, SpinLockBhBackend>,
    send: SendOnUnlock<'a>,
}

impl Drop for QpLock<'_> {
    fn drop(&mut self) {
        // Packets still open for more segments belong to this hold: queued
        // before the unlock, they precede anything built after it.
        //
        // Each slot is looked at before it is emptied: a QP's requester and
        // its responder run on two CPUs (a local peer's requests arrive in
        // its sender's softirq), and a `take` of an empty slot still writes
        // it, which dirtied the other side's state on every release and
        // made the next packet there wait for the line to come back.
        let inner = &mut *self.guard;
        if let Some(p) = take_held(inner.req.open.get_mut()) {
            self.send.qp.req_txq.push(p);
        }
        if let Some(p) = take_held(inner.resp.open.get_mut()) {
            self.send.qp.txq.push(p);
        }
        self.send.ack = take_held(inner.resp.ack_out.get_mut());
        let req = &self.guard.req;
        let due = if req.rd_out > 0 {
            req.last_sent.distance_from(req.acked).max(0) as u32
        } else {
            0
        };
        // Most releases change nothing here (a QP with no reads out keeps
        // 0): only a change is written, so that the line holding it is not
        // dirtied on every release by both CPUs a QP is used from.
        if self.send.qp.responses_due.load(Ordering::Relaxed) != due {
            self.send.qp.responses_due.store(due, Ordering::Relaxed);
        }
    }
}

/// Empties `slot`, writing it only if it holds something (see
/// `QpLock::drop`).
fn take_held<T>(slot: &mut Option<T>) -> Option<T> {
    if slot.is_some() {
        slot.take()
    } else {
        None
    }
}

struct SendOnUnlock<'a> {
    qp: &'a Qp,
    ack: Option<Reply>,
}

impl Drop for SendOnUnlock<'_> {
    fn drop(&mut self) {
        // After the unlock (`QpLock`'s guard drops first): a doorbell that
        // found the lock held left its sending to this holder.
        core::sync::atomic::fence(Ordering::SeqCst);
        if self.qp.doorbell_pending.load(Ordering::Relaxed)
            && self.qp.doorbell_pending.swap(false, Ordering::AcqRel)
        {
            self.qp.kick();
        }
        if let Some(a) = self.ack.take() {
            if let Ok(drv) = self.qp.drv() {
                self.qp.send_deferred_ack(drv, &a);
            }
        }
        // What another CPU keeps queuing behind this release (a READ's
        // responses from the drain) is left to the work item, so that
        // this caller, which may be that work item, gets back to its job.
        if self.qp.txq.send_all() {
            self.qp.kick();
        }
    }
}

impl core::ops::Deref for QpLock<'_> {
    type Target = QpInner;

    fn deref(&self) -> &QpInner {
        &self.guard
    }
}

impl core::ops::DerefMut for QpLock<'_> {
    fn deref_mut(&mut self) -> &mut QpInner {
        &mut self.guard
    }
}

work::owns_work!(pinned Qp { work: work, rx: backlog });

impl WorkFn for Qp {
    fn run(&self) {
        self.run_work();
    }
}

impl Drain for Qp {
    fn drain(&self) -> bool {
        self.drv().is_ok_and(|drv| self.drain_backlog(drv))
    }
}

impl Qp {
    pub(crate) fn create(
        drv: &OxeDevice,
        dev: IbDev<OxeDevice>,
        init: QpInit<OxeDevice>,
        inline_recv: bool,
    ) -> Result<Arc<Qp>> {
        let c = init.caps;
        if c.max_send_wr > MAX_WR
            || c.max_recv_wr > MAX_WR
            || c.max_send_sge > MAX_SGE
            || c.max_recv_sge > MAX_SGE
            || c.max_inline > MAX_INLINE
        {
            return Err(EINVAL);
        }
        let quota = Quota::take(&drv.counters, Kind::Qp)?;
        let send_body = (c.max_send_sge.max(1) * OxeSge::SIZE as u32).max(c.max_inline);
        let sq = Ring::new(
            init.uctx,
            c.max_send_wr.max(1),
            OxeSendWqe::SIZE as u32 + send_body,
        )?;
        let rq = match init.srq {
            Some(_) => None,
            None => Some(Ring::new(
                init.uctx,
                c.max_recv_wr.max(1),
                OxeRecvWqe::SIZE as u32 + c.max_recv_sge.max(1) * OxeSge::SIZE as u32,
            )?),
        };
        let sq_body = sq.slot_size() - OxeSendWqe::SIZE as u32;
        let caps = QpCaps {
            max_send_wr: sq.num_slots(),
            max_send_sge: (sq_body / OxeSge::SIZE as u32).min(MAX_SGE),
            max_inline: sq_body.min(MAX_INLINE),
            max_recv_wr: rq.as_ref().map_or(0, |r| r.num_slots()),
            max_recv_sge: rq.as_ref().map_or(0, |r| {
                ((r.slot_size() - OxeRecvWqe::SIZE as u32) / OxeSge::SIZE as u32).min(MAX_SGE)
            }),
        };
        let qpn_hint = crate::ib::random_u32();
        let mut kav = KVec::new();
        if init.kernel.is_some() && matches!(init.ty, QpType::Ud | QpType::Gsi) {
            kav.resize(sq.num_slots() as usize, Av::default(), GFP_KERNEL)?;
        }
        let txq = TxQueue::new()?;
        let req_txq = TxQueue::new()?;
        // A process's QP whose receive CQ has the slots for it, unless its
        // creator said no; GSI (QP1) is a kernel QP.
        let inline_recv = inline_recv
            && init.uctx.is_some()
            && init.recv_cq.inline_recv()
            && matches!(init.ty, QpType::Rc | QpType::Uc | QpType::Ud);
        let qp = Arc::pin_init(
            pin_init!(Qp {
                work: SetOnce::new(),
                backlog: SetOnce::new(),
                txq,
                req_txq,
                backlogged: AtomicU32::new(0),
                doorbell_pending: AtomicBool::new(false),
                reading: AtomicBool::new(false),
                responses_due: AtomicU32::new(0),
                qpn: AtomicU32::new(0),
                uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
                ty: init.ty,
                pd: init.pd,
                dev,
                send_cq: init.send_cq,
                recv_cq: init.recv_cq,
                srq: init.srq,
                sq,
                rq,
                caps,
                sq_sig_all: init.sq_sig_all,
                inline_recv,
                kernel: init.kernel,
                sport: 0xc000 | (qpn_hint as u16 & 0x3fff),
                mcast_groups: AtomicU32::new(0),
                kpost <- kernel::new_spinlock_irq!(KernelPost { sq: 0, rq: 0 }),
                handle <- Callback::new(init.handle),
                _quota: quota,
                kav <- kernel::new_spinlock_irq!(kav),
                inner <- new_spinlock_bh!(QpInner {
                    state: QpState::Reset,
                    attr: QpAttr { port: 1, ..Default::default() },
                    req: Req::default(),
                    resp: Resp::default(),
                    resources: Resources::default(),
                }),
            }),
            GFP_KERNEL,
        )?;
        work::start_work(&qp)?;
        work::start_rx_queue(&qp, DrainOn::OtherCpu)?;
        let qpn = if init.ty == QpType::Gsi {
            drv.qps.insert_at(1, &qp)?;
            1
        } else {
            drv.qps.insert(&qp, qpn_hint)?
        };
        qp.qpn.store(qpn, Ordering::Release);
        Ok(qp)
    }

    /// Locks the protocol state (see [`QpLock`]).
    pub(crate) fn lock(&self) -> QpLock<'_> {
        QpLock {
            guard: self.inner.lock(),
            send: SendOnUnlock {
                qp: self,
                ack: None,
            },
        }
    }

    /// Locks the protocol state if it is free, for the receive softirq (see
    /// `OxeDevice::receive`).
    pub(crate) fn try_lock(&self) -> Option<QpLock<'_>> {
        Some(QpLock {
            guard: self.inner.try_lock()?,
            send: SendOnUnlock {
                qp: self,
                ack: None,
            },
        })
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qpn.load(Ordering::Acquire)
    }

    /// The QP as a type 2 memory window remembers it.
    pub(crate) fn tag(&self) -> crate::mw::QpTag {
        crate::mw::QpTag {
            qpn: self.qpn(),
            uid: self.uid,
        }
    }

    pub(crate) fn drv(&self) -> Result<&OxeDevice> {
        self.dev.drv()
    }

    /// Runs the work item soon.
    pub(crate) fn kick(&self) {
        if let Some(w) = self.work.as_ref() {
            w.queue();
        }
    }

    pub(crate) fn kick_after(&self, delay: u64) {
        if let Some(w) = self.work.as_ref() {
            w.queue_after(delay);
        }
    }

    /// Runs `f` on the ib_qp handle, if the QP still has one.
    pub(crate) fn with_handle<R>(&self, f: impl FnOnce(&QpHandle) -> R) -> Option<R> {
        self.handle.call(f)
    }

    /// The verbs' async event for this QP, if it still has an ib_qp.
    pub(crate) fn event(&self, ev: crate::ib::qp::QpEvent) {
        self.handle.call(|h| h.event(ev));
    }

    /// The work item: flush in the error state, otherwise run timers and
    /// the requester, [`crate::req::CHUNK`] packets per hold of the lock, each
    /// chunk sent before the next is built, up to [`crate::req::BUDGET`] a run.
    pub(crate) fn run_work(&self) {
        self.run_work_locked(self.lock());
    }

    /// [`Qp::run_work`], its first turn on the lock `first`, which the
    /// caller took.
    fn run_work_locked(&self, first: QpLock<'_>) {
        let Ok(drv) = self.drv() else { return };
        let mut left = crate::req::BUDGET;
        let mut held = Some(first);
        loop {
            let mut q = match held.take() {
                Some(q) => q,
                None => self.lock(),
            };
            let mut sent = 0;
            match q.state {
                QpState::Error => self.flush(&mut q),
                QpState::Rts | QpState::Sqd => {
                    if left == crate::req::BUDGET {
                        self.timers(drv, &mut q);
                    }
                    if q.state == QpState::Error {
                        self.flush(&mut q);
                    } else {
                        sent = self.requester(drv, &mut q, left.min(crate::req::CHUNK));
                        left -= sent;
                    }
                }
                _ => {}
            }
            let more = sent == crate::req::CHUNK && left > 0;
            let next = [q.req.deadline, q.req.rnr_until]
                .into_iter()
                .flatten()
                .min();
            let faulted = core::mem::take(&mut q.req.faulted);
            drop(q);
            if self.req_txq.send_all() {
                // Another CPU's packets, left for the next run (see
                // `SendOnUnlock`): this one still ends as below.
                self.kick();
            }
            if more {
                continue;
            }
            if faulted {
                // Process context, no lock held: the fault runs here, and the
                // WQE goes out again as soon as it is done.
                drv.run_faults(Some(self.pd));
                self.kick();
            } else if left == 0 {
                // The budget is spent with more to send: after other work.
                self.kick();
            } else if let Some(t) = next {
                self.kick_after(t.saturating_sub(work::jiffies()).max(1));
            }
            return;
        }
    }

    /// Posts a completion for a send work request to the send CQ.
    pub(crate) fn complete_send(&self, wr_id: u64, opcode: u32, status: u32, len: u32) {
        let c = wr::cqe(self.qpn(), wr_id, opcode, status, len);
        self.send_cq.push(&c, false);
    }

    /// Posts a receive completion.
    pub(crate) fn complete_recv(&self, c: &OxeCqe, solicited: bool) {
        self.recv_cq.push(c, solicited);
    }

    /// Moves to the error state (from any state but Reset): IBTA 10.3.1.
    pub(crate) fn to_error(&self, q: &mut QpInner) {
        if q.state != QpState::Error && q.state != QpState::Reset {
            self.trace_state(q.state, QpState::Error);
            q.state = QpState::Error;
            self.kick();
        }
    }

    /// The `oxe_qp_state` trace event of a move from `old` to `new`.
    fn trace_state(&self, old: QpState, new: QpState) {
        if let Ok(drv) = self.drv() {
            trace::qp_state(drv.trace_id(), self.qpn(), old as u32, new as u32);
        }
    }

    /// Takes the next receive WQE from the SRQ or the RQ.
    pub(crate) fn take_recv(&self, q: &mut QpInner) -> Option<Result<RecvWr>> {
        self.take_recv_fitting(q, 0, |_| Ok(()))
    }

    /// As [`Qp::take_recv`], for a message of `need` bytes known up front
    /// (a datagram): a receive WQE too short for it is not consumed, and
    /// comes back as `EMSGSIZE`, so the datagram can be dropped without
    /// costing the receiver a WQE or its QP. Nor is one `ready` refuses
    /// (its ODP pages not there yet): that error comes back instead.
    pub(crate) fn take_recv_fitting(
        &self,
        q: &mut QpInner,
        need: u32,
        ready: impl Fn(&RecvWr) -> Result,
    ) -> Option<Result<RecvWr>> {
        if let Some(srq) = &self.srq {
            return srq.take(need, ready);
        }
        let rq = self.rq.as_ref()?;
        let prod = rq.producer();
        let queued = prod.wrapping_sub(q.resp.rq_cons);
        if queued == 0 || queued > rq.num_slots() {
            return None;
        }
        let w = wr::read_recv(rq, q.resp.rq_cons);
        if let Some(e) = w.as_ref().ok().and_then(|w| w.refusal(need, &ready)) {
            return Some(Err(e));
        }
        q.resp.rq_cons = q.resp.rq_cons.wrapping_add(1);
        rq.set_consumer(q.resp.rq_cons);
        Some(w)
    }

    /// Completes everything outstanding with WR_FLUSH_ERR (IBTA 10.3.1:
    /// the error state flushes both queues; an SRQ is not flushed).
    pub(crate) fn flush(&self, q: &mut QpInner) {
        q.req.sent_through = 0;
        for p in core::mem::take(&mut q.req.pending).into_iter() {
            let status = if p.done && p.status != wc_status::SUCCESS {
                p.status
            } else {
                wc_status::WR_FLUSH_ERR
            };
            self.complete_send(
                p.wr.wqe.wr_id,
                crate::req::wc_opcode(p.wr.wqe.opcode),
                status,
                0,
            );
        }
        let prod = self.sq.producer();
        let mut budget = self.sq.num_slots();
        while q.req.fetch != prod && budget > 0 {
            let mut buf = [0u8; OxeSendWqe::SIZE];
            self.sq.read_slot(q.req.fetch, &mut buf);
            if let Some(w) = OxeSendWqe::from_bytes(&buf) {
                self.complete_send(
                    w.wr_id,
                    crate::req::wc_opcode(w.opcode),
                    wc_status::WR_FLUSH_ERR,
                    0,
                );
            }
            q.req.fetch = q.req.fetch.wrapping_add(1);
            budget -= 1;
        }
        self.sq.set_consumer(q.req.fetch);
        q.req.rd_out = 0;
        q.req.deadline = None;
        q.req.rnr_until = None;
        q.req.faulted = false;
        q.req.missed = false;
        if let Some(r) = q.resp.recv.take() {
            let c = wr::cqe(
                self.qpn(),
                r.wr.wr_id,
                wr::wc_op::RECV,
                wc_status::WR_FLUSH_ERR,
                0,
            );
            self.complete_recv(&c, false);
        }
        q.resp.write = None;
        if self.srq.is_none() {
            // A ring's worth per run: user space owns the producer index
            // and may keep posting while this runs, with softirqs off. A
            // loop until the ring is empty then never ended (a soft lockup,
            // and with a full CQ an event per WQE). What is left waits for
            // the next run of the work item, which this one queues.
            let budget = self.rq.as_ref().map_or(0, |rq| rq.num_slots());
            let mut flushed = 0;
            while flushed < budget {
                let Some(w) = self.take_recv(q) else { break };
                flushed += 1;
                if let Ok(w) = w {
                    let c = wr::cqe(
                        self.qpn(),
                        w.wr_id,
                        wr::wc_op::RECV,
                        wc_status::WR_FLUSH_ERR,
                        0,
                    );
                    self.complete_recv(&c, false);
                }
            }
            if flushed == budget {
                self.kick();
            }
        }
    }

    /// ib_modify_qp.
    pub(crate) fn modify(&self, mask: u32, a: &QpAttr) -> Result {
        let mut q = self.lock();
        let m = QpAttrMask(mask);
        let cur = if m.contains(QpAttrMask::CUR_STATE) {
            QpState::from_raw(a.cur_state).ok_or(EINVAL)?
        } else {
            q.state
        };
        let next = if m.contains(QpAttrMask::STATE) {
            QpState::from_raw(a.state).ok_or(EINVAL)?
        } else {
            cur
        };
        qp_state::check_modify(cur, next, self.ty, m).map_err(crate::ib::error::from_core)?;
        if m.contains(QpAttrMask::PORT) && a.port != 1 {
            return Err(EINVAL);
        }
        if m.contains(QpAttrMask::PKEY_INDEX) && a.pkey_index != 0 {
            return Err(EINVAL);
        }
        if m.contains(QpAttrMask::PATH_MTU) && !(1..=5).contains(&a.path_mtu) {
            return Err(EINVAL);
        }
        if m.contains(QpAttrMask::MAX_QP_RD_ATOMIC) && u32::from(a.max_rd_atomic) > MAX_RD_ATOMIC {
            return Err(EINVAL);
        }
        if m.contains(QpAttrMask::MAX_DEST_RD_ATOMIC)
            && u32::from(a.max_dest_rd_atomic) > MAX_RD_ATOMIC
        {
            return Err(EINVAL);
        }
        if m.contains(QpAttrMask::AV) {
            let av = a.av.ok_or(EINVAL)?;
            q.attr.av = Some(av);
        }
        let t = &mut q.attr;
        if m.contains(QpAttrMask::ACCESS_FLAGS) {
            t.access = a.access;
        }
        if m.contains(QpAttrMask::QKEY) {
            t.qkey = a.qkey;
        }
        if m.contains(QpAttrMask::PATH_MTU) {
            t.path_mtu = a.path_mtu;
        }
        if m.contains(QpAttrMask::TIMEOUT) {
            t.timeout = a.timeout;
        }
        if m.contains(QpAttrMask::RETRY_CNT) {
            t.retry_cnt = a.retry_cnt;
        }
        if m.contains(QpAttrMask::RNR_RETRY) {
            t.rnr_retry = a.rnr_retry;
        }
        if m.contains(QpAttrMask::MAX_QP_RD_ATOMIC) {
            t.max_rd_atomic = a.max_rd_atomic;
        }
        if m.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            t.max_dest_rd_atomic = a.max_dest_rd_atomic;
        }
        if m.contains(QpAttrMask::MIN_RNR_TIMER) {
            t.min_rnr_timer = a.min_rnr_timer;
        }
        if m.contains(QpAttrMask::DEST_QPN) {
            t.dest_qpn = a.dest_qpn;
        }
        if m.contains(QpAttrMask::RQ_PSN) {
            t.rq_psn = a.rq_psn & Psn::MASK;
            q.resp.epsn = Psn::from_masked(a.rq_psn);
        }
        if m.contains(QpAttrMask::SQ_PSN) {
            q.attr.sq_psn = a.sq_psn & Psn::MASK;
            q.req.next_psn = Psn::from_masked(a.sq_psn);
            q.req.acked = q.req.next_psn.sub(1);
            q.req.last_sent = q.req.acked;
        }
        if self.ty == QpType::Gsi {
            q.attr.qkey = GSI_QKEY;
        }
        if m.contains(QpAttrMask::STATE) {
            self.enter(&mut q, next);
        }
        Ok(())
    }

    fn enter(&self, q: &mut QpInner, next: QpState) {
        let prev = q.state;
        self.trace_state(prev, next);
        q.state = next;
        match next {
            QpState::Reset => {
                // Everything outstanding is discarded without completions.
                q.req = Req {
                    fetch: self.sq.producer(),
                    ..Req::default()
                };
                self.sq.set_consumer(q.req.fetch);
                let rq_cons = self.rq.as_ref().map_or(0, |r| r.producer());
                if let Some(r) = &self.rq {
                    r.set_consumer(rq_cons);
                }
                q.resp = Resp {
                    rq_cons,
                    ..Resp::default()
                };
                q.resources.clear();
            }
            QpState::Rts => {
                q.req.retries_left = q.attr.retry_cnt;
                q.req.rnr_left = q.attr.rnr_retry;
                self.kick();
            }
            QpState::Error => {
                if prev != QpState::Error {
                    self.kick();
                }
            }
            _ => {}
        }
    }

    /// ib_query_qp.
    pub(crate) fn query(&self) -> QpAttr {
        let q = self.lock();
        let mut a = q.attr;
        a.state = q.state as u32;
        a.cur_state = q.state as u32;
        a.sq_psn = q.req.next_psn.value();
        a.rq_psn = q.resp.epsn.value();
        a
    }

    /// The destroy verb: no more work, no more events, out of the table.
    pub(crate) fn destroy(&self, drv: &OxeDevice) {
        drv.qps.remove(self.qpn());
        drv.mcast.forget(self);
        // A receive softirq may have looked the QP up just before (by
        // number or in a multicast group); once it is done, ib_core's
        // reference is the last, and dropping it (which cancels the work
        // item, so sleeps) happens in process context.
        crate::ib::lock::wait_for_receivers();
        {
            let mut q = self.lock();
            q.state = QpState::Reset;
        }
        if let Some(w) = self.work.as_ref() {
            w.cancel();
        }
        if let Some(b) = self.backlog.as_ref() {
            b.cancel();
        }
        self.handle.retire();
        self.sq.unmap();
        if let Some(r) = &self.rq {
            r.unmap();
        }
    }

    /// User space rang the doorbell (a post_send with no work requests).
    /// The system call is process context already, so the requester runs
    /// right here rather than after a trip through the workqueue: that hop
    /// is most of a small message's latency.
    ///
    /// The caller's CPU becomes the work item's home, so what the work item
    /// sends later leaves from the same CPU as what is sent here.
    pub(crate) fn doorbell(&self) {
        if let Some(w) = self.work.as_ref() {
            w.home_here();
        }
        // The lock taken here is the one the requester runs under: taking
        // it twice (a look, then the run) cost each small message's
        // doorbell a round of the lock.
        if let Some(q) = self.try_lock() {
            self.run_work_locked(q);
            return;
        }
        // With the QP's lock held elsewhere (most often its backlog's
        // drain, working through the responses or acknowledgements of
        // earlier requests, a packet at a time), the process would spin
        // for it, on the CPU the other end of a local transfer needs: in
        // a profile of `ib_read_bw` a tenth of the CPU went to that spin.
        // The holder hands the doorbell to the work item as it releases
        // the lock instead (`SendOnUnlock`); the send then waits for the
        // work item, queued on this CPU, rather than running in this call,
        // which costs a small message's latency only when the lock is
        // held, and the lock holder pays a full barrier at every release.
        // The flag is set before a second look at the lock, and the holder
        // reads it after its release (both with full barriers), so one of
        // the two sees the other. (Only a doorbell that found the lock held
        // writes the flag: the holders on the other CPU read it at every
        // release, and a write per doorbell took its line from them.)
        self.doorbell_pending.store(true, Ordering::SeqCst);
        // (A failed trylock orders nothing by itself.)
        core::sync::atomic::fence(Ordering::SeqCst);
        let Some(q) = self.try_lock() else {
            return;
        };
        // Taken back with a full barrier: another doorbell's flag, taken
        // here, is this one's to serve, and what it posted is seen.
        self.doorbell_pending.swap(false, Ordering::SeqCst);
        self.run_work_locked(q);
    }

    /// Kernel consumers' post_send: writes `wqe` (and its SGEs or inline
    /// bytes) into the SQ. Any context.
    pub(crate) fn post_send_kernel(&self, wqe: &OxeSendWqe, body: &[u8], av: Option<Av>) -> Result {
        let mut kp = self.kpost.lock();
        // Every check before anything is written: the address vector slot
        // belongs to the send slot at the producer index, which, with the
        // queue full, is a request still waiting to go; a refused post
        // must not redirect it.
        if kp.sq.wrapping_sub(self.sq.consumer()) >= self.sq.num_slots() {
            return Err(ENOMEM);
        }
        let size = self.sq.slot_size() as usize;
        if OxeSendWqe::SIZE + body.len() > size.min(wr::MAX_SLOT) {
            return Err(EINVAL);
        }
        if let Some(av) = av {
            let slot = (kp.sq & (self.sq.num_slots() - 1)) as usize;
            let mut kav = self.kav.lock();
            if let Some(a) = kav.get_mut(slot) {
                *a = av;
            }
        }
        let mut buf = [0u8; wr::MAX_SLOT];
        wqe.write_to(&mut buf);
        buf[OxeSendWqe::SIZE..OxeSendWqe::SIZE + body.len()].copy_from_slice(body);
        self.sq
            .write_slot(kp.sq, &buf[..OxeSendWqe::SIZE + body.len()]);
        kp.sq = kp.sq.wrapping_add(1);
        self.sq.set_producer(kp.sq);
        Ok(())
    }

    /// Kernel consumers' post_recv. Any context.
    pub(crate) fn post_recv_kernel(&self, w: &OxeRecvWqe, sges: &[OxeSge]) -> Result {
        let rq = self.rq.as_ref().ok_or(EINVAL)?;
        if sges.len() > self.caps.max_recv_sge as usize {
            return Err(EINVAL);
        }
        let mut kp = self.kpost.lock();
        if kp.rq.wrapping_sub(rq.consumer()) >= rq.num_slots() {
            return Err(ENOMEM);
        }
        crate::srq::write_recv_slot(rq, kp.rq, w, sges);
        kp.rq = kp.rq.wrapping_add(1);
        rq.set_producer(kp.rq);
        Ok(())
    }

    /// The address a kernel UD request in SQ slot `idx` was posted with.
    pub(crate) fn kernel_av(&self, idx: u32) -> Option<Av> {
        let slot = (idx & (self.sq.num_slots() - 1)) as usize;
        self.kav.lock().get(slot).copied()
    }

    /// Whether the QP is in the error state (for posting receives there:
    /// they must complete with a flush error, which the work item does).
    pub(crate) fn kick_if_error(&self) {
        // try_lock: posting may happen in atomic context; a busy lock means
        // the work runs anyway.
        self.kick();
    }
}
