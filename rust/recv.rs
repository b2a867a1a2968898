// SPDX-License-Identifier: GPL-2.0

//! The receive path: a device's packets are checked (UDP length,
//! ICRC, BTH, the opcode's headers) and handed to the QP they name, as a
//! response for its completer or a request for its responder; a packet to a
//! multicast group goes to every QP attached to it. Anything malformed is
//! dropped and counted, never trusted further.

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::ib::av::Av;
use crate::ib::pkt::{Batch, Frame, RxPacket, ICRC_LEN};
use crate::oxe_core::bth::Bth;
use crate::oxe_core::opcode::{Operation, Transport};
use crate::oxe_core::qp_state::QpType;
use crate::oxe_core::{gid, packet};
use crate::qp::{Qp, QpLock};
use core::sync::atomic::Ordering;

/// A parsed packet (oxe-core's parser), and the IP header it came with.
pub(crate) struct Packet<'a> {
    hdr: packet::Packet<'a>,
    /// The IP header, for a UD receive's GRH.
    pub(crate) ip: &'a [u8],
    /// The RoCE packet's length, BTH through ICRC.
    pub(crate) len: usize,
}

impl<'a> core::ops::Deref for Packet<'a> {
    type Target = packet::Packet<'a>;

    fn deref(&self) -> &Self::Target {
        &self.hdr
    }
}

/// Parses a packet (ICRC not checked: see [`Frame::icrc_ok`]); `None` for
/// anything malformed.
pub(crate) fn parse<'f>(frame: &'f Frame<'_>) -> Option<Packet<'f>> {
    let roce = frame.roce();
    let body = roce.get(..roce.len().checked_sub(ICRC_LEN)?)?;
    Some(Packet {
        hdr: packet::parse(body)?,
        ip: frame.ip(),
        len: roce.len(),
    })
}

impl OxeDevice {
    /// Drains the loopback queue: packets this host sent to the device,
    /// received in softirq on their sender's CPU as the network's would
    /// be ([`DrainOn::Softirq`]), at most [`LOOPBACK_BUDGET`] a run.
    /// Returns whether some are left.
    ///
    /// [`DrainOn::Softirq`]: crate::ib::work::DrainOn::Softirq
    pub(crate) fn drain_rx(&self) -> bool {
        for _ in 0..LOOPBACK_BUDGET {
            let Some(skb) = self.rx().and_then(|q| q.pop()) else {
                return false;
            };
            self.receive(skb);
        }
        true
    }

    /// Processes one packet in softirq (the network's receive, or the
    /// loopback queue's drain), or leaves it in its QP's backlog.
    ///
    /// The headers are parsed first and the ICRC checked only once the
    /// packet is processed, so that a packet left for another CPU costs
    /// this one no pass over its payload. Nothing but the QP lookup is
    /// done with a packet before its ICRC is checked.
    pub(crate) fn receive(&self, skb: RxPacket) {
        self.receive_one(skb, false);
    }

    /// [`Self::receive`], for a packet that came in a stream if `stream`
    /// (a batch of at least [`STEER_MIN_STREAM`] bytes: see [`Qp::defers`]).
    fn receive_one(&self, mut skb: RxPacket, stream: bool) {
        let (deferred, response, checked, steer, steered) = {
            let Some(frame) = skb.frame() else {
                crate::counters::inc(&self.counters.rx_dropped);
                return;
            };
            let Some(p) = parse(&frame).filter(|p| p.payload.len() <= MAX_PAYLOAD) else {
                crate::counters::inc(&self.counters.rx_dropped);
                return;
            };
            if p.bth.dest_qpn == Bth::MULTICAST_QPN {
                if self.accept(&frame, &p) {
                    self.dispatch_multicast(&p);
                }
                return;
            }
            let Some(qp) = self.qps.get(p.bth.dest_qpn) else {
                crate::counters::inc(&self.counters.rx_dropped);
                return;
            };
            let response = p.info.operation == Operation::RdmaReadResponse;
            let steer = p.info.operation != Operation::RdmaReadRequest;
            let steered = qp.defers(&p, stream);
            if steered || qp.held() {
                (qp, response, false, steer, steered)
            } else {
                // A datagram whose ODP receive buffer was not there, or a
                // UC packet whose ODP page was not, goes to the backlog,
                // whose drain takes the fault and processes it again. So
                // does a packet for a QP busy on another CPU (its
                // requester, most often, building packets while this is
                // the ACK that frees its window): rather than spin here in
                // softirq, it is left, not yet checked or counted, to the
                // backlog, drained in process context on another CPU.
                // A packet processed here that must be again after an ODP
                // fault was checked and counted: the drain does neither
                // again.
                let checked = match qp.try_lock() {
                    Some(q) => {
                        if !(self.accept(&frame, &p) && qp.process_locked(self, q, &p, false)) {
                            return;
                        }
                        true
                    }
                    None => {
                        crate::counters::inc(&self.counters.rx_lock_busy);
                        false
                    }
                };
                (qp, response, checked, steer, false)
            }
        };
        if !deferred.reserve_backlog(1, response) {
            crate::counters::inc(&self.counters.rx_dropped);
            crate::counters::inc(&self.counters.rx_backlog_full);
            return;
        }
        if steered {
            crate::counters::inc(&self.counters.rx_steered);
        }
        if checked {
            skb.set_checked();
        }
        if let Some(b) = deferred.backlog.as_ref() {
            // Steered to another CPU: the receive softirq of a packet from
            // this host runs on its sender's CPU, which is busy building
            // the packets, and would run both ends of a local transfer.
            // A READ request leaves the drain where it runs instead: its
            // sender is the application, which the scheduler moves, and
            // the work it asks for is the responder's (see
            // `RxQueue::push_sticky`).
            if steer {
                b.push(skb);
            } else {
                b.push_sticky(skb);
            }
        }
    }

    /// A GSO packet of `segments` packets taken whole from the socket.
    ///
    /// When the first of them would be left to its QP's backlog anyway (a
    /// large payload in a stream, a READ request, or a QP with packets
    /// waiting there: see [`Qp::defers`] and [`Qp::held`]), and all of
    /// them are for that QP, the packet is
    /// queued there whole, counted as the packets it holds, and the
    /// backlog's drain reads each in place. This CPU, which for a batch
    /// sent on this host is the sender's, then spends nothing per packet on
    /// it: no clone, no headers rebuilt, no parse, no queueing of each.
    /// Otherwise each packet is received on its own, as a clone of its
    /// bytes.
    pub(crate) fn receive_batch(&self, mut batch: RxPacket, segments: u32) {
        let (stream, whole) = self.batch_plan(&mut batch, segments);
        if let Some(qp) = whole {
            // (Its room was taken by `batch_plan`.)
            crate::counters::inc(&self.counters.rx_batch_backlogged);
            batch.set_batch(Batch {
                next: 0,
                count: segments,
            });
            if let Some(b) = qp.backlog.as_ref() {
                b.push(batch);
            }
            return;
        }
        for i in 0..segments {
            if let Some(seg) = batch.segment(i) {
                self.receive_one(seg, stream);
            }
        }
    }

    /// How a GSO packet of `segments` packets is received, from its first
    /// packet's headers alone (the drain checks and parses each packet as
    /// it comes to it): whether it is a stream, at least
    /// [`STEER_MIN_STREAM`] bytes of payload going by its first packet's;
    /// and the QP whose backlog takes it whole, if any (see
    /// [`Self::receive_batch`]).
    fn batch_plan(
        &self,
        batch: &mut RxPacket,
        segments: u32,
    ) -> (bool, Option<kernel::sync::Arc<Qp>>) {
        let one_qp = batch.segments_one_qp(segments);
        let Some(frame) = batch.segment_frame(0) else {
            return (false, None);
        };
        let Some(p) = parse(&frame) else {
            return (false, None);
        };
        let count = usize::try_from(segments).unwrap_or(usize::MAX);
        let stream = p.payload.len().saturating_mul(count) >= STEER_MIN_STREAM;
        if !one_qp || p.payload.len() > MAX_PAYLOAD || p.bth.dest_qpn == Bth::MULTICAST_QPN {
            return (stream, None);
        }
        let response = p.info.operation == Operation::RdmaReadResponse;
        let whole = self.qps.get(p.bth.dest_qpn).filter(|qp| {
            (qp.defers(&p, stream) || qp.held()) && qp.reserve_backlog(segments, response)
        });
        (stream, whole)
    }

    /// Checks a packet's ICRC and counts it: received, or dropped.
    fn accept(&self, frame: &Frame<'_>, p: &Packet<'_>) -> bool {
        if !frame.icrc_ok() {
            crate::counters::inc(&self.counters.rx_dropped);
            return false;
        }
        let multicast = p.bth.dest_qpn == Bth::MULTICAST_QPN;
        self.counters.port.received(p.len, multicast);
        if !multicast {
            crate::counters::inc(&self.counters.rx_packets);
        }
        true
    }
}

/// Loopback packets received per run of the queue's drain, which is a
/// softirq: the drain then queues itself again, behind the BH work queued
/// meanwhile (the BH worker runs for at most 2 ms or 10 rounds before
/// other softirqs get a turn).
const LOOPBACK_BUDGET: u32 = 64;

/// Packets drained from a backlog per run, before other work gets a turn.
const BACKLOG_BUDGET: u32 = 64;

/// Packets a QP's backlog holds; more are dropped, as the network's own
/// per-CPU receive backlog drops past its limit. Unbounded, it let a
/// requester's go-back-N after a timeout (a whole window resent) queue
/// behind the stale packets of the previous attempt, each of which costs
/// an ICRC check before it is found out of sequence: under netem loss the
/// resent packets then reached the responder only after the next timeout,
/// every time, until the retry count ran out. Bounded, a full backlog is
/// drained well within the shortest retransmit timeout.
const BACKLOG_MAX: u32 = 2048;

/// The most room a QP's backlog gives READ responses on top of
/// [`BACKLOG_MAX`], however many more its requester asked for: a bound on
/// the memory a peer's responses can take (8192 packets, 128 READs of
/// 64 KiB at a 1 KiB MTU: perftest's default).
const RESPONSE_BACKLOG_MAX: u32 = 4 * BACKLOG_MAX;

/// The largest payload a packet may carry: the largest path MTU (4096).
/// Anything longer is malformed whatever the QP's MTU, and dropped before
/// it is queued: a UDP datagram can be 64 KiB, and a QP's backlog bound
/// counts packets, so this is what bounds its bytes (2048 packets of at
/// most 4 KiB, not of 64 KiB). The QP's own path MTU is checked when the
/// packet is processed.
const MAX_PAYLOAD: usize = 4096;

/// Payload bytes from which a packet of a stream is processed on another
/// CPU (`Qp::defers`).
const STEER_MIN_PAYLOAD: usize = 512;

/// Payload bytes in one batch (a GSO packet, which a sender on this host,
/// or a peer through a device that passes GSO packets on, built at once)
/// from which its packets are a stream, worth another CPU. In bytes, not
/// packets: a batch holds at most 28 KiB (`ib/pkt.rs`, `BATCH_BYTES`), 6
/// packets at a 4 KiB MTU. A WRITE of up to 16 KiB (its first packet,
/// which carries the RETH, goes alone, the rest in one batch) is received
/// where it lands at any MTU, and so is a SEND of less than 16 KiB (one
/// batch); the batches of a longer message are a stream.
const STEER_MIN_STREAM: usize = 16 * 1024;

impl Qp {
    /// How many packets the backlog may hold when the one to queue is a
    /// READ response (`response`), or any other.
    ///
    /// A requester's READ responses are ones it asked for: the responder
    /// answers at its own pace, from another CPU, and may well be faster
    /// than the drain here, which shares its CPU with the application
    /// polling for completions. Held to [`BACKLOG_MAX`], four `ib_read_bw`
    /// runs in five dropped a thousand or two responses, and each drop
    /// threw away every response after it (the responder works through
    /// the READs already queued before it gets to the one asked again):
    /// a quarter to half of the run. So the responses asked for and not
    /// yet answered (`responses_due`, up to [`RESPONSE_BACKLOG_MAX`]) have
    /// room on top of what any packet has. A peer can fill no more than
    /// that, and the extra only while it owes this QP responses.
    ///
    /// On top, not as the bound: `responses_due` drops as the drain takes
    /// a response, before the drain counts it out of the backlog, and a
    /// backlog holding every response owed (the drain that far behind)
    /// then dropped the next one, which costs the go-back-N above.
    fn backlog_room(&self, response: bool) -> u32 {
        if !response {
            return BACKLOG_MAX;
        }
        let due = self.responses_due.load(Ordering::Relaxed);
        BACKLOG_MAX + due.min(RESPONSE_BACKLOG_MAX)
    }

    /// Takes room in the backlog for `n` more packets, READ responses
    /// (`response`) or any other ([`Qp::backlog_room`]); `false` if there is
    /// not that much. The check and the count are one atomic step: CPUs
    /// receiving for one QP at once cannot together take it past its bound.
    fn reserve_backlog(&self, n: u32, response: bool) -> bool {
        let room = self.backlog_room(response);
        self.backlogged
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                queued.checked_add(n).filter(|&total| total <= room)
            })
            .is_ok()
    }

    /// Whether what the QP receives now waits in its backlog whatever it
    /// is: a QP answering a READ holds everything after it back until the
    /// READ's last response is out; so does anything in its backlog (a
    /// stream's large packet, a READ request, one that found the QP's lock
    /// busy, one waiting for an ODP fault). The QP sees its packets in
    /// order.
    fn held(&self) -> bool {
        self.reading.load(Ordering::Acquire) || self.backlogged.load(Ordering::Acquire) != 0
    }

    /// Whether a packet received in softirq is left to the QP's backlog,
    /// which another CPU drains ([`DrainOn::OtherCpu`]).
    ///
    /// Small packets are processed in the softirq that received it, as
    /// rxe does: a trip through a work item was most of a small message's
    /// latency. Two kinds go to the backlog:
    ///
    /// * Packets with a large payload that come in a `stream`: a batch of
    ///   at least [`STEER_MIN_STREAM`] bytes the sender built at once.
    ///   When both ends of a connection are on this host, the receive
    ///   softirq runs on the sending CPU, and the receiving end's ICRC
    ///   check and copy would share that CPU with the sending end's copy
    ///   and ICRC: moved to another CPU, the two halves of a transfer run
    ///   side by side. A lone message is not a transfer to split: its
    ///   sender has nothing more to build, and the other CPU, in a
    ///   ping-pong, runs the peer's process spinning on its buffer, which
    ///   the work item waits for the scheduler to preempt, for most of a
    ///   scheduler slice: steering every large packet makes a ping-pong of
    ///   512 bytes or more many times slower (docs/data-path.md).
    /// * RDMA READ requests: their responses are a burst of packets, which
    ///   sent from softirq pile up in the per-CPU receive backlog (1000
    ///   packets) behind it and overflow it; from process context each one
    ///   is processed as it is sent.
    ///
    /// (Once anything is deferred, everything is, until the backlog is
    /// drained: see [`Qp::held`], which `OxeDevice::receive_one` and
    /// `OxeDevice::batch_plan` ask as well.)
    ///
    /// [`DrainOn::OtherCpu`]: crate::ib::work::DrainOn::OtherCpu
    fn defers(&self, p: &Packet<'_>, stream: bool) -> bool {
        p.info.operation == Operation::RdmaReadRequest
            || (stream && p.payload.len() >= STEER_MIN_PAYLOAD)
    }

    /// Processes one packet; true for a packet to try again once its ODP
    /// faults have run (nothing of it was done), unless this is
    /// `last_try`.
    fn process(&self, drv: &OxeDevice, p: &Packet<'_>, last_try: bool) -> bool {
        self.process_locked(drv, self.lock(), p, last_try)
    }

    /// [`Qp::process`], with the lock taken.
    fn process_locked(
        &self,
        drv: &OxeDevice,
        mut q: QpLock<'_>,
        p: &Packet<'_>,
        last_try: bool,
    ) -> bool {
        // A packet of another transport than the QP's is invalid (IBTA
        // 9.6.1.5 C9-44): silently dropped.
        let ours = matches!(
            (p.info.transport, self.ty),
            (Transport::Rc, QpType::Rc)
                | (Transport::Uc, QpType::Uc)
                | (Transport::Ud, QpType::Ud | QpType::Gsi)
        );
        if !ours {
            crate::counters::inc(&drv.counters.rx_dropped);
            return false;
        }
        // (Written only when it changes, as `odp_retry` is emptied below
        // only when set: acknowledgements are processed on the requester's
        // CPU, and a write here would take the responder's state from the
        // other CPU on every one; see `QpLock::drop`.)
        if q.resp.odp_last_try != last_try {
            q.resp.odp_last_try = last_try;
        }
        // A connected QP talks to one peer: a packet from anyone else, or
        // to another of this host's addresses, is not on its path and is
        // dropped before its PSN or AETH are looked at (IBTA 9.6.1: a
        // connected QP checks every packet's source against its path; rxe
        // does too). The UDP source port is not compared: RoCE v2 (IBTA
        // Annex A17) leaves it to the sender as flow entropy.
        let connected = matches!(self.ty, QpType::Rc | QpType::Uc);
        if connected && !q.attr.av.is_some_and(|av| on_path(&av, p.ip)) {
            crate::counters::inc(&drv.counters.rx_wrong_path);
            return false;
        }
        if p.info.is_request() {
            self.on_request(drv, &mut q, p);
        } else {
            self.on_response(drv, &mut q, p);
        }
        q.resp.odp_retry && core::mem::take(&mut q.resp.odp_retry)
    }

    /// Processes backlogged packets (the backlog's drain); returns whether
    /// some are left for the next run.
    pub(crate) fn drain_backlog(&self, drv: &OxeDevice) -> bool {
        let Some(backlog) = self.backlog.as_ref() else {
            return false;
        };
        // A READ under way first: its next burst of responses, and nothing
        // that came after it until its last is out.
        if self.reading.load(Ordering::Acquire) {
            let mut q = self.lock();
            if !self.continue_read(drv, &mut q) {
                if core::mem::take(&mut q.resp.read_fault) {
                    drop(q);
                    drv.run_faults(Some(self.pd));
                }
                return true;
            }
        }
        let mut budget = BACKLOG_BUDGET;
        while budget > 0 {
            let Some(mut skb) = backlog.pop() else {
                return false;
            };
            let Some(mut batch) = skb.batch() else {
                budget -= 1;
                let checked = skb.checked();
                if let Some(frame) = skb.frame() {
                    self.process_backlogged(drv, &frame, checked);
                }
                self.backlogged.fetch_sub(1, Ordering::AcqRel);
                if self.reading.load(Ordering::Acquire) {
                    return true;
                }
                continue;
            };
            // A GSO packet queued whole: its segments in order, each
            // counted against the budget as a packet, and out of the
            // backlog, as it was counted in. One the drain stops inside
            // (out of budget, or a READ to answer first) goes back first in
            // line, marked with where to go on.
            while batch.next < batch.count {
                if budget == 0 || self.reading.load(Ordering::Acquire) {
                    skb.set_batch(batch);
                    backlog.push_front(skb);
                    return true;
                }
                budget -= 1;
                match skb.segment_frame(batch.next) {
                    Some(frame) => self.process_backlogged(drv, &frame, false),
                    None => crate::counters::inc(&drv.counters.rx_dropped),
                }
                batch.next += 1;
                self.backlogged.fetch_sub(1, Ordering::AcqRel);
            }
            if self.reading.load(Ordering::Acquire) {
                return true;
            }
        }
        true
    }

    /// Processes a packet taken from the backlog: its ICRC checked first
    /// unless that was done before it was left there (`checked`).
    fn process_backlogged(&self, drv: &OxeDevice, frame: &Frame<'_>, checked: bool) {
        // (Only a packet of a batch queued whole is parsed here first:
        // one that does not parse, or whose payload is past the bound, is
        // dropped and counted, as every other packet was on arrival.)
        let Some(p) = parse(frame).filter(|p| p.payload.len() <= MAX_PAYLOAD) else {
            crate::counters::inc(&drv.counters.rx_dropped);
            return;
        };
        if !(checked || drv.accept(frame, &p)) {
            return;
        }
        // A packet that found an ODP page missing: the faults are taken
        // here, in process context, and it is processed again. If it
        // misses once more, its transport's answer to a missing resource
        // stands: RNR NAK for an RC request; a UC packet, a datagram or a
        // response is dropped (UC then drops the rest of its message; an
        // RC requester asks again).
        if self.process(drv, &p, false) {
            drv.run_faults(Some(self.pd));
            if self.process(drv, &p, true) {
                crate::counters::inc(&drv.counters.rx_dropped);
            }
        }
    }
}

/// Whether a packet's IP header names the path `av` from its far end:
/// sent by the path's destination, to its source.
fn on_path(av: &Av, ip: &[u8]) -> bool {
    gid::addressed(ip, &av.dgid, &av.sgid)
}

impl OxeDevice {
    /// A packet to a multicast group, named by its destination IP address:
    /// a copy to every QP attached to the group. Each QP takes it as a
    /// datagram of its own (state, UD opcode and Q_Key checked there).
    fn dispatch_multicast(&self, p: &Packet<'_>) {
        let delivered = p.info.is_request()
            && gid::destination(p.ip).is_some_and(|mgid| {
                // A group member whose ODP buffer misses loses the datagram
                // (its fault is queued for the next one).
                self.mcast.for_each_member(&mgid, |qp| {
                    qp.process(self, p, false);
                })
            });
        crate::counters::inc(if delivered {
            &self.counters.rx_packets
        } else {
            &self.counters.rx_dropped
        });
    }
}
