// SPDX-License-Identifier: GPL-2.0

//! The receive side of a QP (IBTA 9.7.3 responder): sequence checking,
//! SEND placement into receive WQEs, RDMA WRITE/READ and atomics through
//! rkeys with every access checked, duplicate handling, ACK/NAK
//! generation; and UD/GSI datagram receive with the GRH.

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::ib::av::Av;
use crate::ib::pkt::OpenPacket;
use crate::ib::qp::QpEvent;
use crate::mr::Denied;
use crate::oxe_core::abi::{
    OxeCqe, OXE_INLINE_RECV_MAX, OXE_WC_GRH, OXE_WC_WITH_IMM, OXE_WC_WITH_INV,
};
use crate::oxe_core::aeth::{credit_code_for, Aeth, NakCode, Syndrome, CREDITS_INVALID};
use crate::oxe_core::ext_headers::{AtomicAckEth, Reth};
use crate::oxe_core::opcode::{codes as op, Operation, Position};
use crate::oxe_core::qp_state::{QpState, QpType};
use crate::oxe_core::{AccessOp, Psn};
use crate::qp::{
    Qp, QpInner, ReadInProgress, RecvInProgress, Reply, Resource, WriteInProgress, MAX_MSG_SZ,
};
use crate::recv::Packet;
use crate::tx::{self, Headers};
use crate::wr::{self, wc_op, wc_status, RecvWr};
use crate::xfer::{InlinePieces, Local, LocalErr, Remote};
use core::sync::atomic::Ordering;

/// IB access flags on the QP that let peers in.
const QP_REMOTE_WRITE: u32 = 1 << 1;
const QP_REMOTE_READ: u32 = 1 << 2;
const QP_REMOTE_ATOMIC: u32 = 1 << 3;
const QP_FLUSH_GLOBAL: u32 = 1 << 8;
const QP_FLUSH_PERSISTENT: u32 = 1 << 9;

/// FETH placement types (bits; IBTA Memory Placement Extensions).
const FLUSH_GLOBAL: u8 = 1 << 0;
const FLUSH_PERSISTENT: u8 = 1 << 1;
/// FETH selectivity levels: the RETH's range, or the whole region.
const FLUSH_RANGE: u8 = 0;
const FLUSH_MR: u8 = 1;

/// `rdma_network_type` values for the completion's network header type.
const RDMA_NETWORK_IPV4: u32 = 2;
const RDMA_NETWORK_IPV6: u32 = 3;

/// READ responses sent at a time (see [`Qp::read_burst`]): a 64 KiB read
/// at the smallest common MTU (1024) still goes in one.
const READ_BURST: u32 = 64;

/// How many times in a row one READ response may find its ODP page missing
/// and wait for its fault before the READ ends (`Qp::read_burst`).
const READ_FAULT_MISSES: u8 = 4;

/// Bytes of the GRH at the start of a UD receive buffer.
const GRH_LEN: usize = 40;

enum Verdict {
    /// Processed; acknowledge if asked.
    Ack,
    /// Processed and answered already (read responses, atomic ACK).
    Answered,
    /// No receive WQE: RNR NAK, the request will be retried.
    Rnr,
    /// An ODP page was not there, and its fault is queued; nothing of the
    /// packet counts as done. RC answers RNR NAK, as for `Rnr`; UC, which
    /// has no NAK, processes the packet again from the QP's backlog once
    /// the fault has run (crate::odp).
    Fault,
    /// A NAK that moves the QP to the error state.
    Fatal(NakCode),
    /// A receive WQE completed in error (length, protection): as `Fatal`,
    /// and the QP goes to the error state on every connected transport.
    RecvFailed(NakCode),
}

/// Whether a request packet's payload has a length its place in the
/// message allows on the QP's path (IBTA 9.7.5.1.x, the responder's length
/// checks, as rxe makes them): FIRST and MIDDLE exactly one MTU, LAST one
/// byte to one MTU, ONLY at most one MTU. Anything else is an invalid
/// request, whatever the message's length says.
fn payload_fits(p: &Packet<'_>, mtu: u32) -> bool {
    let n = p.payload.len();
    let mtu = mtu as usize;
    match p.info.position {
        Position::First | Position::Middle => n == mtu,
        Position::Last => (1..=mtu).contains(&n),
        Position::Only => n <= mtu,
    }
}

impl Qp {
    fn peer(&self, q: &QpInner) -> Option<Av> {
        q.attr.av
    }

    /// Where a response at `psn` goes, and the MSN it carries, as the
    /// locked state says now; `None` without a path.
    fn reply(&self, q: &QpInner, psn: Psn) -> Option<Reply> {
        Some(Reply {
            av: self.peer(q)?,
            dest_qpn: q.attr.dest_qpn,
            psn,
            msn: q.resp.msn & 0x00ff_ffff,
        })
    }

    /// Sends a response without payload that carries an AETH with
    /// `syndrome` and the current MSN: an ACK or NAK, an atomic
    /// acknowledgement (with `atomic_ack`), or an empty read response.
    fn respond(
        &self,
        drv: &OxeDevice,
        q: &QpInner,
        opcode: u8,
        psn: Psn,
        syndrome: Syndrome,
        atomic_ack: Option<AtomicAckEth>,
    ) {
        // An ACK left for after the unlock goes first: this QP's responses
        // leave in the order they were decided.
        if let Some(a) = q.resp.ack_out.take() {
            self.ack_now(drv, Some(&q.resp.open), &a);
        }
        if let Some(r) = self.reply(q, psn) {
            self.transmit_aeth(drv, Some(&q.resp.open), &r, opcode, syndrome, atomic_ack);
        }
    }

    /// Builds and queues a response without payload with an AETH, after
    /// the packet `open` under the lock, if any.
    fn transmit_aeth(
        &self,
        drv: &OxeDevice,
        open: Option<&OpenPacket>,
        r: &Reply,
        opcode: u8,
        syndrome: Syndrome,
        atomic_ack: Option<AtomicAckEth>,
    ) {
        let h = Headers {
            opcode,
            psn: r.psn,
            dest_qpn: r.dest_qpn,
            aeth: Some(Aeth {
                syndrome,
                msn: r.msn,
            }),
            atomic_ack,
            ..Headers::default()
        };
        let out = tx::Out {
            queue: &self.txq,
            open,
            burst: 1,
        };
        let _ = tx::transmit(drv, &out, &r.av, self.sport, &h, 0, |_| Ok::<(), ()>(()));
    }

    fn send_ack(&self, drv: &OxeDevice, q: &QpInner, psn: Psn, syndrome: Syndrome) {
        self.respond(drv, q, op::RC_ACKNOWLEDGE, psn, syndrome, None);
    }

    /// A plain ACK of everything up to `psn`: built once the QP lock is
    /// released (`Resp::ack_out`). One still waiting is replaced, as this
    /// one acknowledges all it did.
    fn ack(&self, q: &QpInner, psn: Psn) {
        if let Some(r) = self.reply(q, psn) {
            q.resp.ack_out.set(Some(r));
        }
    }

    /// Builds and queues a plain ACK decided under the lock, once it is
    /// released.
    pub(crate) fn send_deferred_ack(&self, drv: &OxeDevice, r: &Reply) {
        self.ack_now(drv, None, r);
    }

    /// Builds and queues a plain ACK, after the packet `open` under the
    /// lock, if any.
    fn ack_now(&self, drv: &OxeDevice, open: Option<&OpenPacket>, r: &Reply) {
        let ack = Syndrome::Ack {
            credits: CREDITS_INVALID,
        };
        self.transmit_aeth(drv, open, r, op::RC_ACKNOWLEDGE, ack, None);
    }

    /// A request packet for this QP.
    pub(crate) fn on_request(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) {
        if !matches!(q.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            return;
        }
        if matches!(self.ty, QpType::Ud | QpType::Gsi) {
            self.ud_receive(drv, q, p);
            return;
        }
        if self.ty == QpType::Uc {
            self.uc_request(drv, q, p);
            return;
        }
        let psn = p.bth.psn;
        let e = q.resp.epsn;
        if psn.is_before(e) {
            crate::counters::inc(&drv.counters.duplicate_request);
            self.duplicate(drv, q, p);
            return;
        }
        if psn != e {
            crate::counters::inc(&drv.counters.rcvd_seq_err);
            if !q.resp.nak_sent {
                q.resp.nak_sent = true;
                self.send_ack(drv, q, e, Syndrome::Nak(NakCode::PsnSequenceError));
            }
            return;
        }
        q.resp.nak_sent = false;
        let verdict = match p.info.operation {
            Operation::Send => self.place_send(drv, q, p),
            Operation::RdmaWrite => self.place_write(drv, q, p),
            Operation::RdmaReadRequest => self.answer_read(drv, q, p, psn),
            Operation::CompareSwap | Operation::FetchAdd => self.execute_atomic(drv, q, p),
            Operation::Flush => self.execute_flush(drv, q, p),
            Operation::AtomicWrite => self.execute_atomic_write(drv, q, p),
            _ => Verdict::Fatal(NakCode::InvalidRequest),
        };
        match verdict {
            Verdict::Ack => {
                q.resp.epsn = psn.next();
                if p.bth.ack_req {
                    self.ack(q, psn);
                }
            }
            Verdict::Answered => {}
            // ODP: nothing of the request was done. It goes to the QP's
            // backlog as it came, the packets after it queue behind it,
            // and the drain runs its fault and processes it again
            // (crate::odp): a cold page costs a trip through process
            // context, not an RNR wait and the resending of all that
            // followed. Only a request that misses again is NAKed.
            Verdict::Fault if !q.resp.odp_last_try => q.resp.odp_retry = true,
            Verdict::Rnr | Verdict::Fault => {
                let timer = q.attr.min_rnr_timer;
                self.send_ack(drv, q, psn, Syndrome::RnrNak { timer });
            }
            Verdict::Fatal(_) | Verdict::RecvFailed(_) => self.refuse(drv, q, psn, verdict),
        }
    }

    /// A request at `psn` the responder cannot carry out: a NAK, and the
    /// QP goes to the error state with whatever message was under way.
    fn refuse(&self, drv: &OxeDevice, q: &mut QpInner, psn: Psn, verdict: Verdict) {
        let (Verdict::Fatal(code) | Verdict::RecvFailed(code)) = verdict else {
            return;
        };
        self.send_ack(drv, q, psn, Syndrome::Nak(code));
        q.resp.recv = None;
        q.resp.write = None;
        // IBTA 11.6.3.1: the responder's error, as the affiliated
        // asynchronous event; one a receive completion reports already
        // needs none.
        if let Verdict::Fatal(code) = verdict {
            self.event(match code {
                NakCode::RemoteAccessError => QpEvent::AccessError,
                NakCode::InvalidRequest => QpEvent::InvalidRequest,
                _ => QpEvent::Fatal,
            });
        }
        self.to_error(q);
    }

    /// A UC request (IBTA 9.7.5.1.x, 9.8): nothing is acknowledged. A gap in
    /// the PSNs drops the message it falls in, and the responder resumes at
    /// the next packet that starts a message, whatever its PSN; a receive WQE
    /// the dropped message had begun to fill is filled again from its start.
    /// Errors the peer would learn of by a NAK on RC drop the message too.
    fn uc_request(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) {
        let psn = p.bth.psn;
        let starts = matches!(p.info.position, Position::First | Position::Only);
        if psn != q.resp.epsn || q.resp.uc_dropping {
            q.resp.epsn = psn.next();
            q.resp.write = None;
            if !starts {
                q.resp.uc_dropping = true;
                return;
            }
            q.resp.uc_dropping = false;
        }
        q.resp.epsn = psn.next();
        let verdict = match p.info.operation {
            Operation::Send => self.place_send(drv, q, p),
            Operation::RdmaWrite => self.place_write(drv, q, p),
            _ => Verdict::Fatal(NakCode::InvalidRequest),
        };
        match verdict {
            Verdict::Ack | Verdict::Answered => {}
            // Nothing of the packet was done (its offset in the message
            // did not move): once more from the backlog, after the fault,
            // as the packet expected still. The packets after it wait in
            // the backlog behind it, in order.
            Verdict::Fault => {
                q.resp.epsn = psn;
                q.resp.odp_retry = true;
            }
            // Local errors end the QP (IBTA 10.7.3.2 class D).
            Verdict::RecvFailed(_) => self.to_error(q),
            Verdict::Rnr | Verdict::Fatal(_) => {
                q.resp.write = None;
                let ends = matches!(p.info.position, Position::Last | Position::Only);
                q.resp.uc_dropping = !ends;
            }
        }
    }

    fn duplicate(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) {
        let psn = p.bth.psn;
        match p.info.operation {
            Operation::RdmaReadRequest => {
                // Reads are idempotent: answer again from memory, if the
                // read is one the responder still holds a resource for and
                // asks for no more than what is left of it (a requester
                // resends from the first response it lacks, IBTA 9.7.5.1.x).
                // Anything else is a stale or forged duplicate: ignored.
                let n = p.reth().map_or(1, |r| r.dma_len.div_ceil(q.mtu()).max(1));
                if q.resources.read_covering(psn, n) {
                    let _ = self.answer_read(drv, q, p, psn);
                }
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                if let Some(orig) = q.resources.atomic_at(psn) {
                    self.atomic_ack(drv, q, psn, orig);
                }
            }
            // Carried out already (the expected PSN is past it): answer
            // again, without placing the ATOMIC WRITE a second time over
            // whatever was written since.
            Operation::Flush | Operation::AtomicWrite => self.empty_read_response(drv, q, psn),
            _ => {
                if p.bth.ack_req {
                    let last = q.resp.epsn.sub(1);
                    self.ack(q, last);
                }
            }
        }
    }

    fn place_send(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) -> Verdict {
        let starts = matches!(p.info.position, Position::First | Position::Only);
        let ends = matches!(p.info.position, Position::Last | Position::Only);
        // Before a receive WQE is taken: refused, the WQE stays for the
        // flush to complete, rather than vanish with the message.
        if !payload_fits(p, q.mtu()) {
            return Verdict::Fatal(NakCode::InvalidRequest);
        }
        if starts {
            if let Some(r) = q.resp.recv.as_mut() {
                // Nothing placed yet: the first packet again, after an RNR
                // NAK for an ODP fault; it keeps the WQE it took.
                if r.off != 0 && self.ty != QpType::Uc {
                    return Verdict::Fatal(NakCode::InvalidRequest);
                }
                // UC: the message that had begun it was dropped.
                r.off = 0;
            } else {
                match self.take_recv(q) {
                    None => return Verdict::Rnr,
                    Some(Err(_)) => return Verdict::Fatal(NakCode::RemoteOperationalError),
                    Some(Ok(wr)) => q.resp.recv = Some(RecvInProgress { wr, off: 0 }),
                }
            }
        }
        let Some(r) = q.resp.recv.as_mut() else {
            return Verdict::Fatal(NakCode::InvalidRequest);
        };
        let local = Local {
            drv,
            pd: self.pd,
            kernel: self.kernel.as_ref(),
        };
        // A one-packet message short enough goes with its completion, for
        // the provider to copy (inline receive); the rest is placed here.
        let inline = if starts && ends {
            self.inline_target(&local, &r.wr.sges, p.payload.len())
        } else {
            Ok(None)
        };
        let placed = match inline {
            Ok(None) => local
                .scatter(&r.wr.sges, r.off.into(), p.payload)
                .map(|()| None),
            other => other,
        };
        let inline = match placed {
            Ok(inline) => inline,
            Err(e) => {
                let (status, nak) = match e {
                    // ODP: the fault is queued; the requester sends this
                    // packet again after the RNR timer (see crate::odp).
                    LocalErr::Fault => return Verdict::Fault,
                    LocalErr::Len => (wc_status::LOC_LEN_ERR, NakCode::InvalidRequest),
                    LocalErr::Prot => (wc_status::LOC_PROT_ERR, NakCode::RemoteOperationalError),
                };
                let c = wr::cqe(self.qpn(), r.wr.wr_id, wc_op::RECV, status, 0);
                q.resp.recv = None;
                self.complete_recv(&c, false);
                return Verdict::RecvFailed(nak);
            }
        };
        r.off += p.payload.len() as u32;
        if ends {
            let Some(r) = q.resp.recv.take() else {
                return Verdict::Fatal(NakCode::InvalidRequest);
            };
            let mut c = wr::cqe(
                self.qpn(),
                r.wr.wr_id,
                wc_op::RECV,
                wc_status::SUCCESS,
                r.off,
            );
            if let Some(imm) = p.imm() {
                c.imm_data = u32::from_ne_bytes(imm);
                c.wc_flags |= OXE_WC_WITH_IMM;
            }
            if let Some(rkey) = p.ieth() {
                // IBTA 10.6.7.2.4: the rkey must name a type 2 window bound
                // through this QP, or a fast-registration MR of its PD.
                // Otherwise the receive completes as a remote invalid
                // request (class J) and the QP fails.
                let by = crate::mr::fastreg::Invalidator::Remote;
                if crate::mr::fastreg::invalidate(drv, self.pd, self.tag(), rkey, by).is_err() {
                    c.status = wc_status::REM_INV_REQ_ERR;
                    c.byte_len = 0;
                    self.complete_recv(&c, false);
                    return Verdict::RecvFailed(NakCode::InvalidRequest);
                }
                c.imm_data = rkey;
                c.wc_flags |= OXE_WC_WITH_INV;
            }
            c.src_qp = q.attr.dest_qpn;
            q.resp.msn = q.resp.msn.wrapping_add(1);
            self.complete_placed(drv, &c, p.payload, inline.as_ref(), p.bth.solicited);
        }
        Verdict::Ack
    }

    /// Inline receive: where a message of `len` bytes goes in the
    /// receiving process, if it goes with its completion (a process's QP
    /// that allows it, a message that fits, pinned memory). Errors are the
    /// receive's own, as `scatter` would find them.
    fn inline_target(
        &self,
        local: &Local<'_>,
        sges: &[crate::oxe_core::abi::OxeSge],
        len: usize,
    ) -> Result<Option<InlinePieces>, LocalErr> {
        if !self.inline_recv || len > OXE_INLINE_RECV_MAX as usize {
            return Ok(None);
        }
        local.user_pieces(sges, len, self.recv_cq.owner())
    }

    /// Completes a receive whose message is `data`: with the message, if
    /// it was not placed but goes `inline`, or as usual.
    fn complete_placed(
        &self,
        drv: &OxeDevice,
        c: &OxeCqe,
        data: &[u8],
        inline: Option<&InlinePieces>,
        solicited: bool,
    ) {
        match inline {
            Some(pieces) => {
                if self
                    .recv_cq
                    .push_inline(c, data, pieces.as_slice(), solicited)
                {
                    crate::counters::inc(&drv.counters.rx_inline_cqe);
                }
            }
            None => self.complete_recv(c, solicited),
        }
    }

    fn remote<'a>(&'a self, drv: &'a OxeDevice) -> Remote<'a> {
        Remote {
            drv,
            pd: self.pd,
            qp: self.tag(),
        }
    }

    fn place_write(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) -> Verdict {
        let starts = matches!(p.info.position, Position::First | Position::Only);
        let ends = matches!(p.info.position, Position::Last | Position::Only);
        if starts {
            let Some(Reth { va, rkey, dma_len }) = p.reth() else {
                return Verdict::Fatal(NakCode::InvalidRequest);
            };
            // (One with nothing written yet is this packet again, after an
            // RNR NAK for an ODP fault: it starts over.)
            if q.resp.write.as_ref().is_some_and(|w| w.off != 0) {
                return Verdict::Fatal(NakCode::InvalidRequest);
            }
            if q.attr.access & QP_REMOTE_WRITE == 0 {
                return Verdict::Fatal(NakCode::RemoteAccessError);
            }
            // A WRITE whose one packet carries all of it is checked by its
            // copy below (`resolve_for_copy`); one with immediate data is
            // checked first, so that a bad key is refused before the wait
            // for a receive WQE, and so is one whose payload is refused
            // below, so that a bad key is still the error it reports.
            let whole = ends
                && p.imm().is_none()
                && p.payload.len() as u64 == u64::from(dma_len)
                && payload_fits(p, q.mtu());
            // IBTA C9-88: a zero-length write checks no key and touches nothing.
            let mr = if dma_len == 0 {
                None
            } else {
                let remote = self.remote(drv);
                let resolved = if whole {
                    remote.resolve_for_copy(rkey, va, dma_len.into(), AccessOp::RemoteWrite)
                } else {
                    remote.resolve(rkey, va, dma_len.into(), AccessOp::RemoteWrite)
                };
                match resolved {
                    Ok(mr) => Some(mr),
                    Err(_) => return Verdict::Fatal(NakCode::RemoteAccessError),
                }
            };
            // A write with immediate needs its receive WQE before anything lands.
            if ends && p.imm().is_some() && self.srq.is_none() && !self.rq_has_wqe(q) {
                return Verdict::Rnr;
            }
            q.resp.write = Some(WriteInProgress {
                mr,
                rkey,
                va,
                off: 0,
                len: dma_len.into(),
            });
        }
        if !payload_fits(p, q.mtu()) {
            return Verdict::Fatal(NakCode::InvalidRequest);
        }
        let Some(w) = q.resp.write.as_mut() else {
            return Verdict::Fatal(NakCode::InvalidRequest);
        };
        let n = p.payload.len() as u64;
        if w.off + n > w.len {
            return Verdict::Fatal(NakCode::InvalidRequest);
        }
        if n > 0 {
            let Some(mr) = w.mr.as_ref() else {
                return Verdict::Fatal(NakCode::InvalidRequest);
            };
            let remote = self.remote(drv);
            // Every packet through the key as it stands now, not only the
            // first: an MR deregistered or a window invalidated while the
            // message is under way grants nothing to its later packets
            // (IBTA 10.6.7: once invalidated, a key no longer gives
            // access). The key must still name what it named at the start.
            if !starts && !mr.still_named(&remote, w.rkey, (w.va + w.off, n, AccessOp::RemoteWrite))
            {
                return Verdict::Fatal(NakCode::RemoteAccessError);
            }
            match remote.write(mr, w.va + w.off, p.payload, w.len - w.off - n) {
                Ok(()) => {}
                Err(Denied::Fault) => return Verdict::Fault,
                Err(_) => return Verdict::Fatal(NakCode::RemoteAccessError),
            }
        }
        w.off += n;
        if ends {
            let Some(w) = q.resp.write.take() else {
                return Verdict::Fatal(NakCode::InvalidRequest);
            };
            if w.off != w.len {
                return Verdict::Fatal(NakCode::InvalidRequest);
            }
            if let Some(imm) = p.imm() {
                match self.take_recv(q) {
                    None => return Verdict::Rnr,
                    Some(Err(_)) => return Verdict::Fatal(NakCode::RemoteOperationalError),
                    Some(Ok(r)) => {
                        let mut c = wr::cqe(
                            self.qpn(),
                            r.wr_id,
                            wc_op::RECV_RDMA_WITH_IMM,
                            wc_status::SUCCESS,
                            w.len as u32,
                        );
                        c.imm_data = u32::from_ne_bytes(imm);
                        c.wc_flags |= OXE_WC_WITH_IMM;
                        c.src_qp = q.attr.dest_qpn;
                        self.complete_recv(&c, p.bth.solicited);
                    }
                }
            }
            q.resp.msn = q.resp.msn.wrapping_add(1);
        }
        Verdict::Ack
    }

    fn rq_has_wqe(&self, q: &QpInner) -> bool {
        self.rq.as_ref().is_some_and(|rq| {
            let n = rq.producer().wrapping_sub(q.resp.rq_cons);
            n != 0 && n <= rq.num_slots()
        })
    }

    /// Answers an RDMA READ request with response packets from `psn` on.
    fn answer_read(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>, psn: Psn) -> Verdict {
        let Some(Reth { va, rkey, dma_len }) = p.reth() else {
            return Verdict::Fatal(NakCode::InvalidRequest);
        };
        // A READ longer than the device's largest message (the
        // `max_msg_sz` it reports) is an invalid request, whatever the key
        // would allow (IBTA 9.7.5.1.x, length errors): without this a
        // single request for 2^32 - 1 bytes of a large MR asked for four
        // million response packets.
        if dma_len > MAX_MSG_SZ {
            return Verdict::Fatal(NakCode::InvalidRequest);
        }
        if q.attr.access & QP_REMOTE_READ == 0 {
            return Verdict::Fatal(NakCode::RemoteAccessError);
        }
        let mr = if dma_len == 0 {
            None
        } else {
            match self
                .remote(drv)
                .resolve(rkey, va, dma_len.into(), AccessOp::RemoteRead)
            {
                Ok(mr) => Some(mr),
                Err(_) => return Verdict::Fatal(NakCode::RemoteAccessError),
            }
        };
        if self.peer(q).is_none() {
            return Verdict::Fatal(NakCode::RemoteOperationalError);
        }
        // ODP: every page translated before the first response goes, since
        // a READ cannot be NAKed once it is being answered.
        if let Some(t) = mr.as_ref() {
            if self.remote(drv).ready(t, va, dma_len.into()) == Err(Denied::Fault) {
                return Verdict::Fault;
            }
        }
        let n = dma_len.div_ceil(q.mtu()).max(1);
        let is_new = psn == q.resp.epsn;
        if is_new {
            q.resp.msn = q.resp.msn.wrapping_add(1);
            q.resp.epsn = psn.add(n);
            let limit = q.attr.max_dest_rd_atomic;
            q.resources.record(Resource::Read { psn, npsn: n }, limit);
        }
        // A duplicate replaces the READ under way, if any: the requester
        // wants its responses again from this PSN (IBTA 9.7.5.1.x).
        q.resp.read = Some(ReadInProgress {
            mr,
            rkey,
            va,
            dma_len,
            psn,
            n,
            next: 0,
            misses: 0,
        });
        self.reading.store(true, Ordering::Release);
        match self.read_burst(drv, q) {
            Err(at) if at == psn => Verdict::Fatal(NakCode::RemoteAccessError),
            // Responses went before the one that failed: the NAK names the
            // PSN the requester waits for next, or it would be ignored.
            Err(at) => {
                self.refuse(drv, q, at, Verdict::Fatal(NakCode::RemoteAccessError));
                Verdict::Answered
            }
            Ok(done) => {
                if !done {
                    if let Some(b) = self.backlog.as_ref() {
                        b.kick();
                    }
                }
                Verdict::Answered
            }
        }
    }

    /// Sends the next burst of responses of the READ under way: at most
    /// [`READ_BURST`], then the backlog's drain sends the next (it runs
    /// again while `reading` is set, and holds the QP's later packets back
    /// meanwhile, so they are answered in order). Returns whether the READ
    /// is done; `Err` with the PSN of the first response not sent if its
    /// memory can no longer be read (an MR deregistered under it), which
    /// ends it.
    ///
    /// Built all at once, one request for 2^31 bytes was two million
    /// packets copied and checksummed under the QP's lock, with softirqs
    /// off, before the first was sent: hardware sends them as the link
    /// drains, and so does this.
    pub(crate) fn read_burst(&self, drv: &OxeDevice, q: &mut QpInner) -> Result<bool, Psn> {
        let (Some(av), true) = (
            self.peer(q),
            matches!(q.state, QpState::Rtr | QpState::Rts | QpState::Sqd),
        ) else {
            self.end_read(q);
            return Ok(true);
        };
        let mtu = q.mtu();
        let msn = q.resp.msn & 0x00ff_ffff;
        let dest_qpn = q.attr.dest_qpn;
        let Some(r) = q.resp.read.as_mut() else {
            self.end_read(q);
            return Ok(true);
        };
        let remote = self.remote(drv);
        let end = r.next.saturating_add(READ_BURST).min(r.n);
        // Through the key as it stands now, as for every WRITE packet: a
        // fast-registration MR invalidated (and maybe registered again, with
        // another key) since the READ began gives nothing more through the
        // old key.
        if let Some(mr) = r.mr.as_ref() {
            let (va, rest) = (r.va, r.dma_len.saturating_sub(r.next * mtu));
            if rest > 0
                && !remote
                    .resolve(
                        r.rkey,
                        va + u64::from(r.next * mtu),
                        rest.into(),
                        AccessOp::RemoteRead,
                    )
                    .is_ok_and(|t| t.same(mr))
            {
                let psn = r.psn.add(r.next);
                self.end_read(q);
                return Err(psn);
            }
        }
        while r.next < end {
            let k = r.next;
            let off = k * mtu;
            let len = r.dma_len.saturating_sub(off).min(mtu);
            let opcode = match (r.n, k) {
                (1, _) => op::RC_RDMA_READ_RESPONSE_ONLY,
                (_, 0) => op::RC_RDMA_READ_RESPONSE_FIRST,
                (n, k) if k + 1 == n => op::RC_RDMA_READ_RESPONSE_LAST,
                _ => op::RC_RDMA_READ_RESPONSE_MIDDLE,
            };
            let first_or_last = k == 0 || k + 1 == r.n;
            let h = Headers {
                opcode,
                psn: r.psn.add(k),
                dest_qpn,
                aeth: first_or_last.then_some(Aeth {
                    syndrome: Syndrome::Ack {
                        credits: credit_code_for(0).max(CREDITS_INVALID),
                    },
                    msn,
                }),
                ..Headers::default()
            };
            let (mr, va) = (&r.mr, r.va);
            let out = tx::Out {
                queue: &self.txq,
                open: Some(&q.resp.open),
                // The first response is longer than the rest (its AETH):
                // a packet of its own.
                burst: if k == 0 { 1 } else { end - k },
            };
            let res = tx::transmit(
                drv,
                &out,
                &av,
                self.sport,
                &h,
                len as usize,
                |buf| match mr {
                    Some(mr) => remote.read(mr, va + u64::from(off), buf),
                    None => Ok(()),
                },
            );
            match res {
                // An ODP page invalidated since the READ began: the
                // responses stop at this packet until its fault brings the
                // page back, as a device's page fault suspends its QP.
                // Dropping the rest instead would cost the requester a
                // timeout and a retry each time, and a READ over memory
                // that is invalidated often would end in retry exhaustion.
                //
                // A page missing again and again at one packet (a fault
                // that fails without marking the page, or memory taken
                // away each time before the packet goes) ends the READ as
                // before, and the requester's retry count bounds the rest.
                Err(tx::TxError::Fill(Denied::Fault)) if r.misses < READ_FAULT_MISSES => {
                    r.misses += 1;
                    q.resp.read_fault = true;
                    return Ok(false);
                }
                Err(tx::TxError::Fill(Denied::Fault)) => {
                    self.end_read(q);
                    return Ok(true);
                }
                Err(tx::TxError::Fill(_)) => {
                    let psn = r.psn.add(k);
                    self.end_read(q);
                    return Err(psn);
                }
                _ => {}
            }
            r.misses = 0;
            r.next += 1;
        }
        if r.next < r.n {
            return Ok(false);
        }
        self.end_read(q);
        Ok(true)
    }

    /// The READ under way is over (answered, or ended): the packets held
    /// back behind it may go on.
    fn end_read(&self, q: &mut QpInner) {
        q.resp.read = None;
        q.resp.read_fault = false;
        self.reading.store(false, Ordering::Release);
    }

    /// Continues the READ under way (from the backlog's drain); a READ
    /// whose memory went away ends as a remote access error, NAKed at the
    /// first response not sent (the requester ignores a NAK behind what it
    /// has). Returns whether it is done.
    pub(crate) fn continue_read(&self, drv: &OxeDevice, q: &mut QpInner) -> bool {
        match self.read_burst(drv, q) {
            Ok(done) => done,
            Err(psn) => {
                self.refuse(drv, q, psn, Verdict::Fatal(NakCode::RemoteAccessError));
                true
            }
        }
    }

    fn atomic_ack(&self, drv: &OxeDevice, q: &QpInner, psn: Psn, orig: u64) {
        let ack = Syndrome::Ack {
            credits: CREDITS_INVALID,
        };
        let orig = Some(AtomicAckEth { orig });
        self.respond(drv, q, op::RC_ATOMIC_ACKNOWLEDGE, psn, ack, orig);
    }

    fn execute_atomic(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) -> Verdict {
        let Some(a) = p.atomic() else {
            return Verdict::Fatal(NakCode::InvalidRequest);
        };
        if q.attr.access & QP_REMOTE_ATOMIC == 0 {
            return Verdict::Fatal(NakCode::RemoteAccessError);
        }
        // IBTA 9.4.5: an atomic's address must be naturally aligned; a
        // misaligned one is an invalid request, not an access violation.
        if a.va % 8 != 0 {
            return Verdict::Fatal(NakCode::InvalidRequest);
        }
        let remote = self.remote(drv);
        let mr = match remote.resolve(a.rkey, a.va, 8, AccessOp::RemoteAtomic) {
            Ok(mr) => mr,
            Err(Denied::Alignment) => return Verdict::Fatal(NakCode::InvalidRequest),
            Err(_) => return Verdict::Fatal(NakCode::RemoteAccessError),
        };
        let cas = p.info.operation == Operation::CompareSwap;
        let orig = match remote.atomic(
            &mr,
            a.va,
            cas,
            if cas { a.compare } else { a.swap_add },
            a.swap_add,
        ) {
            Ok(v) => v,
            Err(Denied::Fault) => return Verdict::Fault,
            Err(_) => return Verdict::Fatal(NakCode::RemoteAccessError),
        };
        let psn = p.bth.psn;
        let limit = q.attr.max_dest_rd_atomic;
        q.resources.record(Resource::Atomic { psn, orig }, limit);
        q.resp.msn = q.resp.msn.wrapping_add(1);
        q.resp.epsn = psn.next();
        self.atomic_ack(drv, q, psn, orig);
        Verdict::Answered
    }

    /// The answer to a FLUSH or an ATOMIC WRITE: an RDMA READ Response Only
    /// without data, as the Memory Placement Extensions define (rdma_rxe
    /// answers the same way, so either side can be the peer).
    fn empty_read_response(&self, drv: &OxeDevice, q: &QpInner, psn: Psn) {
        let ack = Syndrome::Ack {
            credits: CREDITS_INVALID,
        };
        self.respond(drv, q, op::RC_RDMA_READ_RESPONSE_ONLY, psn, ack, None);
    }

    /// A request that was carried out: it takes its PSN and message number
    /// and is answered by an empty read response.
    fn answered_empty(&self, drv: &OxeDevice, q: &mut QpInner, psn: Psn) -> Verdict {
        q.resp.msn = q.resp.msn.wrapping_add(1);
        q.resp.epsn = psn.next();
        self.empty_read_response(drv, q, psn);
        Verdict::Answered
    }

    /// FLUSH: makes every earlier write through the QP reach the placement
    /// point the FETH names, for the RETH's range or the whole region.
    ///
    /// The QP and the region must both grant the placement type. Every write
    /// before the FLUSH was copied into the pages by a CPU before the FLUSH
    /// was processed (the responder is serialized by the QP lock), so a full
    /// fence makes them visible to every CPU: the global visibility point of
    /// a device without a cache of its own. Persistence is never reached,
    /// because no region can be registered with FLUSH_PERSISTENT (oxe does
    /// not pin persistent memory; see `mr::SUPPORTED_ACCESS`), so a
    /// persistent FLUSH is a remote access error, as IBTA requires.
    fn execute_flush(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) -> Verdict {
        let (Some(f), Some(Reth { va, rkey, dma_len })) = (p.feth(), p.reth()) else {
            return Verdict::Fatal(NakCode::InvalidRequest);
        };
        let global = f.placement_type & FLUSH_GLOBAL != 0;
        let persistent = f.placement_type & FLUSH_PERSISTENT != 0;
        if f.placement_type & !(FLUSH_GLOBAL | FLUSH_PERSISTENT) != 0
            || !(global || persistent)
            || !matches!(f.selectivity, FLUSH_RANGE | FLUSH_MR)
        {
            return Verdict::Fatal(NakCode::InvalidRequest);
        }
        let remote = self.remote(drv);
        let points = [
            (global, QP_FLUSH_GLOBAL, AccessOp::FlushGlobal),
            (persistent, QP_FLUSH_PERSISTENT, AccessOp::FlushPersistent),
        ];
        for (_, qp_right, op) in points.into_iter().filter(|&(asked, _, _)| asked) {
            if q.attr.access & qp_right == 0 {
                return Verdict::Fatal(NakCode::RemoteAccessError);
            }
            let checked = if f.selectivity == FLUSH_MR {
                // The whole region: the RETH's address and length mean nothing.
                remote.resolve_key(rkey, op)
            } else {
                remote.resolve(rkey, va, dma_len.into(), op)
            };
            if checked.is_err() {
                return Verdict::Fatal(NakCode::RemoteAccessError);
            }
        }
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        self.answered_empty(drv, q, p.bth.psn)
    }

    /// ATOMIC WRITE: 8 bytes stored at once through an rkey with remote
    /// write rights, at a naturally aligned address (the Memory Placement
    /// Extensions' rules for it, which are an atomic's plus write access).
    fn execute_atomic_write(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) -> Verdict {
        let Some(Reth { va, rkey, dma_len }) = p.reth() else {
            return Verdict::Fatal(NakCode::InvalidRequest);
        };
        let Ok(bytes) = <[u8; 8]>::try_from(p.payload) else {
            return Verdict::Fatal(NakCode::InvalidRequest);
        };
        if dma_len != 8 || va % 8 != 0 {
            return Verdict::Fatal(NakCode::InvalidRequest);
        }
        if q.attr.access & QP_REMOTE_WRITE == 0 {
            return Verdict::Fatal(NakCode::RemoteAccessError);
        }
        let remote = self.remote(drv);
        let stored = remote
            .resolve(rkey, va, 8, AccessOp::RemoteWrite)
            .and_then(|mr| remote.atomic_write(&mr, va, u64::from_ne_bytes(bytes)));
        match stored {
            Ok(()) => {}
            Err(Denied::Fault) => return Verdict::Fault,
            Err(_) => return Verdict::Fatal(NakCode::RemoteAccessError),
        }
        self.answered_empty(drv, q, p.bth.psn)
    }

    /// A UD or GSI datagram: Q_Key check, then GRH and payload into the
    /// next receive WQE. Datagrams without a WQE are dropped (IBTA 9.8.3).
    ///
    /// No datagram takes the QP down, whatever it holds: a UD QP serves any
    /// sender that knows its Q_Key, and QP1 every sender (ib_mad never
    /// recovers a QP1 in error, so one oversized MAD would end MADs and
    /// RDMA-CM on the port). A datagram longer than the next receive WQE is
    /// the sender's fault: it is dropped and counted (`rx_dropped`), the
    /// WQE left for the next one. A WQE the local consumer got wrong (an
    /// SGE outside its MR) completes in error, and the QP stays up.
    fn ud_receive(&self, drv: &OxeDevice, q: &mut QpInner, p: &Packet<'_>) {
        let Some(deth) = p.deth() else { return };
        if !matches!(
            p.bth.opcode,
            op::UD_SEND_ONLY | op::UD_SEND_ONLY_WITH_IMMEDIATE
        ) {
            return;
        }
        if deth.qkey != q.attr.qkey {
            return;
        }
        let total = GRH_LEN + p.payload.len();
        let local = Local {
            drv,
            pd: self.pd,
            kernel: self.kernel.as_ref(),
        };
        // A datagram cannot be NAKed: the receive buffer's ODP pages are
        // checked before its WQE is taken, and a miss has the datagram
        // processed again once the fault has run (crate::recv).
        let ready = |w: &RecvWr| local.ready(&w.sges, total);
        let r = match self.take_recv_fitting(q, u32::try_from(total).unwrap_or(u32::MAX), ready) {
            Some(Ok(r)) => r,
            Some(Err(e)) if e == kernel::error::code::EMSGSIZE => {
                crate::counters::inc(&drv.counters.rx_dropped);
                return;
            }
            Some(Err(e)) if e == kernel::error::code::EAGAIN => {
                q.resp.odp_retry = true;
                return;
            }
            _ => return,
        };
        let mut grh = [0u8; GRH_LEN];
        let v6 = p.ip.len() >= GRH_LEN && p.ip.first().is_some_and(|b| b >> 4 == 6);
        if v6 {
            grh.copy_from_slice(&p.ip[..GRH_LEN]);
        } else if let Some(h) = p.ip.get(..20) {
            grh[20..].copy_from_slice(h);
        }
        // `take_recv_fitting` gave a WQE that holds `total` bytes. A short
        // datagram goes with its completion, GRH first (inline receive).
        let mut image = [0u8; OXE_INLINE_RECV_MAX as usize];
        let inline = self.inline_target(&local, &r.sges, total);
        let res = match inline {
            Ok(Some(pieces)) => {
                image[..GRH_LEN].copy_from_slice(&grh);
                image[GRH_LEN..total].copy_from_slice(p.payload);
                Ok(Some(pieces))
            }
            Ok(None) => local
                .scatter(&r.sges, 0, &grh)
                .and_then(|()| local.scatter(&r.sges, GRH_LEN as u64, p.payload))
                .map(|()| None),
            Err(e) => Err(e),
        };
        let mut c: OxeCqe = wr::cqe(
            self.qpn(),
            r.wr_id,
            wc_op::RECV,
            wc_status::SUCCESS,
            total as u32,
        );
        match res {
            Ok(inline) => {
                c.src_qp = deth.src_qpn;
                c.wc_flags = OXE_WC_GRH;
                c.network_hdr_type = if v6 {
                    RDMA_NETWORK_IPV6
                } else {
                    RDMA_NETWORK_IPV4
                };
                if let Some(imm) = p.imm() {
                    c.imm_data = u32::from_ne_bytes(imm);
                    c.wc_flags |= OXE_WC_WITH_IMM;
                }
                let data = image.get(..total).unwrap_or(&[]);
                self.complete_placed(drv, &c, data, inline.as_ref(), p.bth.solicited);
            }
            Err(e) => {
                c.status = if e == LocalErr::Len {
                    wc_status::LOC_LEN_ERR
                } else {
                    wc_status::LOC_PROT_ERR
                };
                c.byte_len = 0;
                self.complete_recv(&c, false);
            }
        }
    }
}
