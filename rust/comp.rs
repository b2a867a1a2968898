// SPDX-License-Identifier: GPL-2.0

//! The completer of a QP's send side (IBTA 9.7.5.1 and 9.9): retires the
//! requester's work requests on acknowledgements, read responses and NAKs,
//! in order; ignores acknowledgements for PSNs it never sent (ghosts);
//! retries on timeout or sequence errors (go-back-N); backs off on RNR NAKs.

#![deny(unsafe_code)]

use crate::bindings::trace;
use crate::device::OxeDevice;
use crate::ib::work;
use crate::oxe_core::abi::OXE_SEND_SIGNALED;
use crate::oxe_core::aeth::{rnr_timer_micros, NakCode, Syndrome};
use crate::oxe_core::opcode::codes as op;
use crate::oxe_core::qp_state::QpState;
use crate::oxe_core::Psn;
use crate::qp::{Qp, QpInner};
use crate::req::{
    is_read_or_atomic, packet_window, wc_opcode, ACK_EVERY, MIN_PACKET_WINDOW, PACKET_WINDOW,
};
use crate::wr::{wc_status, wr_op};
use crate::xfer::LocalErr;
use core::sync::atomic::Ordering;

/// How many retransmit timeouts in a row, without progress, may be put off
/// because the QP's backlog holds packets (`Qp::timers`): a few timeouts'
/// worth of a backlog's drain, at most 8192 responses.
const MAX_TIMEOUTS_PUT_OFF: u8 = 8;

/// Why the requester goes back (go-back-N, IBTA 9.7.5.1).
#[derive(Clone, Copy, PartialEq, Eq)]
enum GoBack {
    /// The retransmit timer ran out: nothing came back at all.
    Timeout,
    /// The responder saw a PSN out of sequence: a packet was lost or
    /// overtaken.
    SequenceNak,
    /// The responder had no receive WQE: nothing was lost.
    RnrNak,
    /// A read response came after a gap: the read window handles it.
    ReadGap,
}

/// The atomics answered by an ATOMIC ACKNOWLEDGE.
fn is_atomic(opcode: u32) -> bool {
    matches!(
        opcode,
        wr_op::ATOMIC_CMP_AND_SWP | wr_op::ATOMIC_FETCH_AND_ADD
    )
}

/// Requests answered by RDMA READ response packets: reads with their data,
/// FLUSH and ATOMIC WRITE with one empty READ RESPONSE Only.
fn answered_by_read_response(opcode: u32) -> bool {
    matches!(
        opcode,
        wr_op::RDMA_READ | wr_op::FLUSH | wr_op::ATOMIC_WRITE
    )
}

impl Qp {
    /// Completes finished requests in order; an error completion moves the
    /// QP to the error state (its successors are then flushed).
    pub(crate) fn retire(&self, q: &mut QpInner) {
        let mut n = 0;
        let mut error = false;
        for p in q.req.pending.iter() {
            if !p.done {
                break;
            }
            n += 1;
            if p.status != wc_status::SUCCESS {
                error = true;
                break;
            }
        }
        if n == 0 {
            return;
        }
        // Free the slots before the completions are visible: a consumer
        // that reaps a completion may post again at once.
        let in_sq = q.req.fetch.wrapping_sub((q.req.pending.len() - n) as u32);
        self.sq.set_consumer(in_sq);
        for p in q.req.pending.iter().take(n) {
            let failed = p.status != wc_status::SUCCESS;
            let signaled = self.sq_sig_all || p.wr.wqe.send_flags & OXE_SEND_SIGNALED != 0;
            if failed || signaled {
                let len = match p.wr.wqe.opcode {
                    wr_op::ATOMIC_CMP_AND_SWP | wr_op::ATOMIC_FETCH_AND_ADD => 8,
                    _ => p.wr.len,
                };
                self.complete_send(p.wr.wqe.wr_id, wc_opcode(p.wr.wqe.opcode), p.status, len);
            }
        }
        let mut k = 0;
        q.req.pending.retain(|_| {
            k += 1;
            k > n
        });
        q.req.sent_through = q.req.sent_through.saturating_sub(n);
        if q.req.pending.iter().all(|p| p.done || p.sent == 0) {
            q.req.deadline = None;
        }
        if error {
            self.to_error(q);
        }
    }

    /// Marks every request whose last PSN is at or before `psn` as
    /// acknowledged (sends and writes; reads and atomics complete on their
    /// responses).
    fn ack_upto(&self, q: &mut QpInner, psn: Psn) -> bool {
        // An acknowledgement that moves the acknowledged PSN forward is
        // progress, even inside a message: with a packet window narrower
        // than a 1 MiB write (1024 packets), waiting for whole requests
        // would count every loss-and-resend cycle against the retry count
        // and end a transfer that is advancing in RETRY_EXC_ERR.
        let mut progress = Self::note_acked(q, psn);
        for p in q.req.pending.iter_mut() {
            if p.done || !p.started {
                continue;
            }
            let last = p.first_psn.add(p.npsn - 1);
            if last.is_after(psn) {
                break;
            }
            if is_read_or_atomic(p.wr.wqe.opcode) {
                // Acknowledged past an unanswered read: the response was lost.
                break;
            }
            if p.sent >= p.npsn {
                p.done = true;
                progress = true;
            }
        }
        progress
    }

    /// Moves the packet window's left edge to `psn`: only forward, and only
    /// over PSNs this QP has handed out. Returns whether it moved.
    fn note_acked(q: &mut QpInner, psn: Psn) -> bool {
        let moved = psn.is_after(q.req.acked) && !psn.is_after(q.req.next_psn.sub(1));
        if moved {
            q.req.acked = psn;
            if q.req.rewound_to.is_some_and(|r| !r.is_after(psn)) {
                q.req.rewound_to = None;
            }
        }
        moved
    }

    /// Go back to `psn`: every unfinished request from there is resent.
    fn rewind(&self, q: &mut QpInner, psn: Psn, why: GoBack) {
        if let Ok(drv) = self.drv() {
            crate::counters::inc(&drv.counters.go_back);
            let reason = match why {
                GoBack::Timeout => 0,
                GoBack::SequenceNak => 1,
                GoBack::RnrNak => 2,
                GoBack::ReadGap => 3,
            };
            let retries_left = q.req.retries_left.into();
            trace::qp_go_back(
                drv.trace_id(),
                self.qpn(),
                psn.value(),
                reason,
                retries_left,
            );
        }
        Self::shrink_window(q, why);
        // Only a timeout's go-back is remembered: the responder may well
        // NAK its PSN from packets it was still working through. After an
        // RNR NAK, the sequence-error NAK for the same PSN can be the one
        // sign that the resend was lost (the responder NAKs a PSN once),
        // and the QP may have no retransmit timer to fall back on.
        q.req.rewound_to = (why == GoBack::Timeout).then_some(psn);
        q.req.sent_through = 0;
        // After a timeout, the oldest read or atomic is asked again, not
        // the ones behind it. A responder that lost them would have NAKed
        // the gap (or a later timeout asks for the next); one that is only
        // slow has them queued, and asked again it would answer every one
        // twice: behind up to `max_dest_rd_atomic` duplicate READs, the
        // answers to newer requests come too late, and the retry count
        // runs out on a responder that never stopped answering.
        let mut asked = false;
        for p in q.req.pending.iter_mut() {
            if p.done || !p.started {
                continue;
            }
            if is_read_or_atomic(p.wr.wqe.opcode) {
                if why == GoBack::Timeout && core::mem::replace(&mut asked, true) {
                    continue;
                }
                p.sent = 0;
                q.req.rd_window = 1;
                continue;
            }
            let last = p.first_psn.add(p.npsn - 1);
            if last.is_before(psn) {
                continue;
            }
            p.sent = if psn.is_after(p.first_psn) {
                psn.distance_from(p.first_psn) as u32
            } else {
                0
            };
        }
        q.req.deadline = None;
    }

    /// Narrows the packet window after a loss; acknowledgements open it
    /// again (`open_window`).
    ///
    /// Go-back-N resends everything from the lost packet on, and the
    /// responder has to work through what was in flight behind the loss
    /// (each packet found out of sequence only once it is processed) before
    /// it gets to the resent ones. With the whole window in flight at every
    /// loss, a slow responder (a debug kernel, a loaded host) falls further
    /// behind with each go-back, its receive backlog takes longer than the
    /// retransmit timeout to drain, the timer fires while the responder is
    /// still busy, and every timeout puts another window on the wire: under
    /// 1% loss with reordering, 11 packets went out for every one that
    /// counted, and the retry count ran out. As TCP does, a timeout starts
    /// again from a narrow window, and a sequence-error NAK halves it.
    fn shrink_window(q: &mut QpInner, why: GoBack) {
        q.req.pkt_window = match why {
            GoBack::Timeout => MIN_PACKET_WINDOW,
            GoBack::SequenceNak => (packet_window(q) / 2).max(MIN_PACKET_WINDOW),
            GoBack::RnrNak | GoBack::ReadGap => return,
        };
    }

    /// Widens a narrowed packet window by an ACK interval for each
    /// acknowledgement that moves it: about a doubling per round trip, as
    /// in TCP's slow start, back to the whole window.
    fn open_window(q: &mut QpInner) {
        if q.req.pkt_window != 0 {
            let w = q.req.pkt_window.saturating_add(ACK_EVERY);
            q.req.pkt_window = if w >= PACKET_WINDOW { 0 } else { w };
        }
    }

    /// The oldest unfinished request's PSN.
    fn oldest_psn(q: &QpInner) -> Option<Psn> {
        q.req
            .pending
            .iter()
            .find(|p| !p.done && p.started)
            .map(|p| p.first_psn.add(p.got))
    }

    fn fail_oldest(&self, q: &mut QpInner, status: u32) {
        if let Some(p) = q.req.pending.iter_mut().find(|p| !p.done) {
            p.done = true;
            p.status = status;
        }
        self.retire(q);
        self.to_error(q);
    }

    /// Retransmit and RNR timers.
    pub(crate) fn timers(&self, drv: &OxeDevice, q: &mut QpInner) {
        let now = work::jiffies();
        if let Some(t) = q.req.rnr_until {
            if now >= t {
                q.req.rnr_until = None;
            }
        }
        if let Some(t) = q.req.deadline {
            if now >= t {
                // Packets wait in this QP's own backlog: the peer answered,
                // and it is this host that has not got to them yet. Going
                // back would ask again for what is queued here, and the
                // answers already on their way would come back as ghosts:
                // in `ib_read_bw -q 4` on a slow host, all four QPs timed
                // out at once with 2300 to 3600 responses each in their
                // backlogs, and the READs asked again came back as 27776
                // ghost responses, a third of the run. So the timeout is
                // put off, a bounded number of times without progress, so
                // that a peer keeping the backlog full of packets that
                // move nothing only delays the retries.
                if self.backlogged.load(Ordering::Acquire) != 0
                    && q.req.timeouts_put_off < MAX_TIMEOUTS_PUT_OFF
                {
                    q.req.timeouts_put_off += 1;
                    crate::counters::inc(&drv.counters.timeout_put_off);
                    self.restart_timer(q);
                    return;
                }
                q.req.deadline = None;
                crate::counters::inc(&drv.counters.ack_timeout);
                let Some(oldest) = Self::oldest_psn(q) else {
                    return;
                };
                // Go back to the first PSN not acknowledged, not to the start
                // of the oldest request: a 1 MiB write acknowledged up to
                // its 900th packet resends 124 packets, not 1024. Resending
                // what the responder has is worse than wasted on a slow
                // peer: it works through the duplicates (each ICRC-checked)
                // before the new packets, past the next timeout, and the
                // retry count runs out while the transfer advances.
                let first_unacked = q.req.acked.next();
                let psn = if first_unacked.is_after(oldest) {
                    first_unacked
                } else {
                    oldest
                };
                if q.req.retries_left == 0 {
                    self.fail_oldest(q, wc_status::RETRY_EXC_ERR);
                    return;
                }
                q.req.retries_left -= 1;
                self.rewind(q, psn, GoBack::Timeout);
            }
        }
    }

    /// An acknowledgement, NAK, read response or atomic acknowledgement
    /// for this QP's requests.
    pub(crate) fn on_response(
        &self,
        drv: &OxeDevice,
        q: &mut QpInner,
        r: &crate::recv::Packet<'_>,
    ) {
        if !matches!(q.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let psn = r.bth.psn;
        if self.ghost(q, r) {
            crate::counters::inc(&drv.counters.ghost_ack);
            return;
        }
        let progress: bool;
        match r.bth.opcode {
            op::RC_ACKNOWLEDGE => {
                let Some(aeth) = r.aeth() else { return };
                match aeth.syndrome {
                    Syndrome::Ack { .. } => progress = self.ack_upto(q, psn),
                    Syndrome::RnrNak { timer } => {
                        progress = self.ack_upto(q, psn.sub(1));
                        if q.req.rnr_left == 0 {
                            self.fail_oldest(q, wc_status::RNR_RETRY_EXC_ERR);
                            return;
                        }
                        // rnr_retry 7 means "retry forever" (IBTA 9.7.5.2.8).
                        if q.req.rnr_left != 7 {
                            q.req.rnr_left -= 1;
                        }
                        let us = rnr_timer_micros(timer).unwrap_or(10).max(10);
                        q.req.rnr_until = Some(work::jiffies() + work::usecs_to_jiffies(us.into()));
                        self.rewind(q, psn, GoBack::RnrNak);
                        // Nothing below wakes the work item while the RNR
                        // wait holds sending back, and the rewind leaves no
                        // retransmit timer: the resend went out only when a
                        // timer armed earlier happened to fire, the whole
                        // retransmit timeout later instead of the NAK's
                        // few milliseconds, and never with timeout 0
                        // (infinite), where no such timer exists. The work
                        // item, run now, queues itself for the RNR wait's
                        // end (`Qp::run_work`).
                        self.kick();
                    }
                    Syndrome::Nak(NakCode::PsnSequenceError) => {
                        progress = self.ack_upto(q, psn.sub(1));
                        // The responder NAKs an expected PSN once. A NAK
                        // for a PSN since acknowledged is stale (it was
                        // sent before the resend it asked for arrived),
                        // and one for where a timeout just went back to
                        // most likely asks for what is on its way: going
                        // back again would put a second copy of every
                        // packet behind the first. If it was the resend
                        // that was lost, the next timeout goes back.
                        if psn.is_after(q.req.acked) && q.req.rewound_to != Some(psn) {
                            self.rewind(q, psn, GoBack::SequenceNak);
                        }
                    }
                    Syndrome::Nak(code) => {
                        self.ack_upto(q, psn.sub(1));
                        let status = match code {
                            NakCode::InvalidRequest => wc_status::REM_INV_REQ_ERR,
                            NakCode::RemoteAccessError => wc_status::REM_ACCESS_ERR,
                            _ => wc_status::REM_OP_ERR,
                        };
                        self.retire(q);
                        self.fail_oldest(q, status);
                        return;
                    }
                    Syndrome::Reserved(_) => return,
                }
            }
            op::RC_ATOMIC_ACKNOWLEDGE => {
                let Some(orig) = r.atomic_ack() else { return };
                // An atomic ACK past an older read or atomic still
                // unanswered means that one's response was lost: ask again
                // from there rather than complete this one first, whose
                // responder resource could otherwise go to a newer request
                // before the older one is resent (the resend would then
                // find none). ghost() found a request starting at this PSN.
                let Some((idx, expect)) = Self::oldest_awaiting(q) else {
                    return;
                };
                if expect != psn {
                    self.ask_again(q, expect);
                    return;
                }
                self.ack_upto(q, psn.sub(1));
                let local = self.local(drv);
                let p = &mut q.req.pending[idx];
                // IBTA 9.7.5.1.x: a response must be of the class of the
                // request it answers. An atomic ACK for a READ would
                // otherwise complete the read with eight bytes of
                // "original value" and none of its data.
                p.status = if !is_atomic(p.wr.wqe.opcode) {
                    wc_status::BAD_RESP_ERR
                } else {
                    match local.scatter(&p.wr.sges, 0, &orig.orig.to_ne_bytes()) {
                        Ok(()) => wc_status::SUCCESS,
                        // ODP: processed again once the fault has run; a
                        // second miss drops it, as if lost, and the
                        // retransmit timer asks again (crate::odp).
                        Err(LocalErr::Fault) => {
                            q.resp.odp_retry = !q.resp.odp_last_try;
                            return;
                        }
                        Err(_) => wc_status::LOC_PROT_ERR,
                    }
                };
                p.done = true;
                q.req.rd_out = q.req.rd_out.saturating_sub(1);
                progress = true;
                let _ = Self::note_acked(q, psn);
            }
            op::RC_RDMA_READ_RESPONSE_FIRST
            | op::RC_RDMA_READ_RESPONSE_MIDDLE
            | op::RC_RDMA_READ_RESPONSE_LAST
            | op::RC_RDMA_READ_RESPONSE_ONLY => {
                let mtu = q.mtu();
                // An atomic there cannot be answered by read responses
                // (below).
                let Some((idx, expect)) = Self::oldest_awaiting(q) else {
                    return;
                };
                if psn != expect {
                    // A gap: a response was lost, or overtaken by a later
                    // one on another CPU's receive backlog.
                    if psn.is_after(expect) {
                        self.ask_again(q, expect);
                        // The responder answers READs in order, and the
                        // one asked again is queued behind every later
                        // READ it already has: up to max_dest_rd_atomic
                        // of them, thousands of response packets that are
                        // discarded here. While they arrive the responder
                        // is not silent, and a timeout would only resend
                        // into the same queue and spend the retry count:
                        // four QPs of 128 64 KiB READs each ran it out on
                        // a slow host (IBV_WC_RETRY_EXC_ERR). The timer
                        // restarts instead, so that it measures the
                        // responder's silence; the retry count still
                        // starts again only with real progress.
                        self.restart_timer(q);
                    }
                    return;
                }
                if let Some(p) = q.req.pending.get(idx) {
                    let first = p.first_psn;
                    self.ack_upto(q, first.sub(1));
                }
                let local = self.local(drv);
                let p = &mut q.req.pending[idx];
                let off = p.got * mtu;
                let read = p.wr.wqe.opcode == wr_op::RDMA_READ;
                // FLUSH and ATOMIC WRITE are answered by one empty response.
                let want = if read {
                    p.wr.len.saturating_sub(off).min(mtu) as usize
                } else {
                    0
                };
                let only = r.bth.opcode == op::RC_RDMA_READ_RESPONSE_ONLY;
                let class_ok = answered_by_read_response(p.wr.wqe.opcode);
                if !class_ok || r.payload.len() != want || (!read && !only) {
                    p.done = true;
                    p.status = wc_status::BAD_RESP_ERR;
                } else if let Err(e) = local.scatter(&p.wr.sges, off.into(), r.payload) {
                    // ODP: as for an atomic's result above.
                    if e == LocalErr::Fault {
                        q.resp.odp_retry = !q.resp.odp_last_try;
                        return;
                    }
                    p.done = true;
                    p.status = if e == LocalErr::Len {
                        wc_status::LOC_LEN_ERR
                    } else {
                        wc_status::LOC_PROT_ERR
                    };
                } else {
                    p.got += 1;
                    if p.got >= p.npsn {
                        p.done = true;
                    }
                }
                if p.done {
                    q.req.rd_out = q.req.rd_out.saturating_sub(1);
                }
                // A response in sequence acknowledges its own PSN.
                let _ = Self::note_acked(q, psn);
                progress = true;
            }
            _ => return,
        }
        if progress {
            // Both retry counts start again with forward progress: they
            // bound the retries of one request, not of the QP's life (an
            // ODP responder's RNR NAK per fault would otherwise spend them).
            q.req.retries_left = q.attr.retry_cnt;
            q.req.rnr_left = q.attr.rnr_retry;
            q.req.deadline = None;
            q.req.read_gap_retried = false;
            q.req.timeouts_put_off = 0;
            Self::open_window(q);
            if q.req.rd_window != 0 {
                let limit = u32::from(q.attr.max_rd_atomic).max(1);
                q.req.rd_window = q.req.rd_window.saturating_mul(2);
                if q.req.rd_window >= limit {
                    q.req.rd_window = 0;
                }
            }
        }
        self.retire(q);
        if q.req
            .pending
            .iter()
            .any(|p| !p.done && p.started && p.sent > 0)
        {
            self.arm_timer(q);
        }
        // Something may now be sendable (a window opened, or a rewind):
        // the work item sends it. Requests go out from process context
        // only, where each packet reaches the peer before the next is
        // sent; a burst sent from this softirq would sit in this CPU's
        // receive backlog while the doorbell, on another CPU, overtakes it,
        // and the peer would see PSNs out of order. Only wake the work item
        // when there is something to send: a wake-up per acknowledgement
        // costs a small message more than its packets do.
        if self.sendable(q) {
            self.kick();
        }
    }

    /// Whether a response names a PSN this QP has no request outstanding
    /// at: a ghost (IBTA 9.7.5.1.x), ignored and counted, so that neither a
    /// stale response nor a forged one can complete or fail a request.
    ///
    /// An ACK may name any PSN up to the last one handed out (an old one
    /// acknowledges nothing new); a NAK, a read response or an atomic ACK
    /// must name one after the last acknowledged, and an atomic ACK the
    /// first PSN of a read or atomic still waiting.
    fn ghost(&self, q: &QpInner, r: &crate::recv::Packet<'_>) -> bool {
        let psn = r.bth.psn;
        if psn.is_after(q.req.last_sent) {
            return true;
        }
        match (r.bth.opcode, r.aeth().map(|a| a.syndrome)) {
            (op::RC_ACKNOWLEDGE, Some(Syndrome::Ack { .. })) => false,
            (op::RC_ATOMIC_ACKNOWLEDGE, _) => !q.req.pending.iter().any(|p| {
                !p.done && p.started && p.first_psn == psn && is_read_or_atomic(p.wr.wqe.opcode)
            }),
            // Not `acked`: a coalesced ACK may move it past a READ whose
            // responses were lost, and their resends must still count.
            _ => Self::oldest_psn(q).is_none_or(|oldest| psn.is_before(oldest)),
        }
    }

    /// The oldest read or atomic still waiting for its response, and the
    /// PSN its next response carries. Responses come back in order, so any
    /// response either answers this one or shows that its own was lost.
    pub(crate) fn oldest_awaiting(q: &QpInner) -> Option<(usize, Psn)> {
        let idx = q
            .req
            .pending
            .iter()
            .position(|p| !p.done && p.started && is_read_or_atomic(p.wr.wqe.opcode))?;
        let p = q.req.pending.get(idx)?;
        Some((idx, p.first_psn.add(p.got)))
    }

    /// Goes back to `expect`, whose response was lost (a later one came),
    /// at once rather than at the timer; once until the next progress,
    /// since every response after the gap shows it too.
    fn ask_again(&self, q: &mut QpInner, expect: Psn) {
        if !q.req.read_gap_retried {
            q.req.read_gap_retried = true;
            self.rewind(q, expect, GoBack::ReadGap);
            self.kick();
        }
    }
}
