// SPDX-License-Identifier: GPL-2.0

//! The requester of a QP's send side (IBTA 9.7): turns send work requests
//! into packets, within the packet and read windows, and resends from where
//! the completer (`comp.rs`) rewinds it to.

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::ib::av::Av;
use crate::ib::work;
use crate::oxe_core::abi::flush_attrs_split;
use crate::oxe_core::abi::{OXE_SEND_FENCE, OXE_SEND_SOLICITED};
use crate::oxe_core::ext_headers::{AtomicEth, Deth, Feth, Reth};
use crate::oxe_core::opcode::codes as op;
use crate::oxe_core::qp_state::{QpState, QpType};
use crate::oxe_core::AccessOp;
use crate::qp::{Pending, Qp, QpInner, GSI_QKEY};
use crate::tx::{self, Headers, TxError};
use crate::wr::{self, wc_op, wc_status, wr_op};
use crate::xfer::{Local, LocalErr};
use kernel::prelude::*;

/// Packets one work run sends before yielding the worker.
pub(crate) const BUDGET: u32 = 64;

/// Packets built per hold of the QP's lock, sent once it is released.
/// The packets of one hold share skbs (`tx::Out`), up to 27 MTU-sized ones
/// per skb, so a longer hold means fewer skbs and a faster stream. It can
/// be this long because a packet that finds the lock held (an
/// acknowledgement arriving on the other CPU) goes to the QP's backlog
/// instead of spinning in softirq (`recv.rs`); the figures behind 32 are
/// in docs/history.md.
pub(crate) const CHUNK: u32 = 32;
/// Ask for an ACK at least this often within a long message.
pub(crate) const ACK_EVERY: u32 = 16;
/// At most this many SEND and WRITE packets beyond the last acknowledged PSN
/// (see `Qp::window_open`). Well under the responder's receive backlog bound
/// (2048 packets), and many ACK intervals wide, so a fast peer never waits
/// on it.
pub(crate) const PACKET_WINDOW: u32 = 256;
/// The packet window a go-back-N starts again from (see
/// `Qp::shrink_window`): two ACK intervals, so that acknowledgements keep
/// coming while it is that narrow.
pub(crate) const MIN_PACKET_WINDOW: u32 = 2 * ACK_EVERY;
/// The packet window in force: narrowed after a loss (`pkt_window`), else
/// the whole [`PACKET_WINDOW`].
pub(crate) fn packet_window(q: &QpInner) -> u32 {
    match q.req.pkt_window {
        0 => PACKET_WINDOW,
        w => w,
    }
}

/// The UC transport's opcode range (IBTA 9.2.1: RC 0x00, UC 0x20).
const UC_TRANSPORT: u8 = 0x20;
/// Floor for the retransmit timer: a software peer under emulation can be
/// slow to answer, and a premature retry only costs a duplicate.
const MIN_TIMEOUT_US: u64 = 100_000;

/// The completion opcode for a send work request opcode.
pub(crate) fn wc_opcode(wr_opcode: u32) -> u32 {
    match wr_opcode {
        wr_op::RDMA_WRITE | wr_op::RDMA_WRITE_WITH_IMM => wc_op::RDMA_WRITE,
        wr_op::RDMA_READ => wc_op::RDMA_READ,
        wr_op::ATOMIC_CMP_AND_SWP => wc_op::COMP_SWAP,
        wr_op::ATOMIC_FETCH_AND_ADD => wc_op::FETCH_ADD,
        wr_op::FLUSH => wc_op::FLUSH,
        wr_op::ATOMIC_WRITE => wc_op::ATOMIC_WRITE,
        wr_op::BIND_MW => wc_op::BIND_MW,
        wr_op::LOCAL_INV => wc_op::LOCAL_INV,
        wr_op::REG_MR => wc_op::REG_MR,
        wr_op::MKEY_CONFIGURE => wc_op::MKEY_CONFIGURE,
        _ => wc_op::SEND,
    }
}

/// Requests the responder answers with data rather than an acknowledgement,
/// and holds a responder resource for (IBTA 9.7.4.1.x; the Memory Placement
/// Extensions put FLUSH and ATOMIC WRITE in this class too): each is one
/// request packet, counts against `max_rd_atomic`, and completes on its
/// response only.
pub(crate) fn is_read_or_atomic(opcode: u32) -> bool {
    matches!(
        opcode,
        wr_op::RDMA_READ
            | wr_op::ATOMIC_CMP_AND_SWP
            | wr_op::ATOMIC_FETCH_AND_ADD
            | wr_op::FLUSH
            | wr_op::ATOMIC_WRITE
    )
}

impl Pending {
    /// The packets the requester sends for this request: one for a read
    /// or atomic (its responses are the responder's), else one per PSN.
    fn request_packets(&self) -> u32 {
        if is_read_or_atomic(self.wr.wqe.opcode) {
            1
        } else {
            self.npsn
        }
    }

    /// Whether nothing of this request is left to send: finished, or all
    /// its packets out (what `Req::sent_through` counts past).
    fn sent_in_full(&self) -> bool {
        self.done || self.sent >= self.request_packets()
    }
}

fn packets(len: u32, mtu: u32) -> u32 {
    len.div_ceil(mtu).max(1)
}

/// The retransmit timeout for the QP's `timeout` attribute (4.096 µs × 2^t;
/// 0 means infinite), in jiffies.
fn retransmit_jiffies(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        return None;
    }
    let us = (4096u64 << timeout.min(31)) / 1000;
    Some(work::usecs_to_jiffies(us.max(MIN_TIMEOUT_US)))
}

impl Qp {
    pub(crate) fn local<'a>(&'a self, drv: &'a OxeDevice) -> Local<'a> {
        Local {
            drv,
            pd: self.pd,
            kernel: self.kernel.as_ref(),
        }
    }

    /// Restarts a running retransmit timer from now, without touching the
    /// retry count: the responder is alive and working through requests
    /// sent before the one it must answer again, so its silence has not
    /// begun. The work item's pending run finds the deadline later and
    /// queues itself for it.
    pub(crate) fn restart_timer(&self, q: &mut QpInner) {
        if q.req.deadline.is_some() {
            if let Some(j) = retransmit_jiffies(q.attr.timeout) {
                q.req.deadline = Some(work::jiffies() + j);
            }
        }
    }

    pub(crate) fn arm_timer(&self, q: &mut QpInner) {
        if q.req.deadline.is_none() {
            if let Some(j) = retransmit_jiffies(q.attr.timeout) {
                q.req.deadline = Some(work::jiffies() + j);
                // The work item runs the timers; a no-op if it is due sooner.
                self.kick_after(j);
            }
        }
    }

    /// Whether the SQ holds a request not fetched yet; a producer index more
    /// than a ring ahead is a corrupt queue and counts as empty.
    fn sq_has_new(&self, q: &QpInner) -> bool {
        let prod = self.sq.producer();
        let ahead = prod.wrapping_sub(q.req.fetch);
        ahead != 0 && ahead <= self.sq.num_slots()
    }

    /// Fetches the next send WQE, checks it as far as it can be checked
    /// locally, and queues it. Returns false when nothing can be fetched.
    fn fetch(&self, drv: &OxeDevice, q: &mut QpInner) -> bool {
        if !self.sq_has_new(q) {
            return false;
        }
        let idx = q.req.fetch;
        let w = match wr::read_send(&self.sq, idx, self.caps.max_inline) {
            Ok(w) => w,
            Err(_) => {
                // Unreadable slot: complete it in error so the consumer learns.
                let mut buf = [0u8; crate::oxe_core::abi::OxeSendWqe::SIZE];
                self.sq.read_slot(idx, &mut buf);
                let wr_id =
                    crate::oxe_core::abi::OxeSendWqe::from_bytes(&buf).map_or(0, |w| w.wr_id);
                q.req.fetch = idx.wrapping_add(1);
                self.complete_send(wr_id, wc_op::SEND, wc_status::LOC_LEN_ERR, 0);
                self.to_error(q);
                return false;
            }
        };
        let opcode = w.wqe.opcode;
        // Fences and the read/atomic limit hold a request back, unfetched.
        if w.wqe.send_flags & OXE_SEND_FENCE != 0 && q.req.rd_out > 0 {
            return false;
        }
        if is_read_or_atomic(opcode) && q.req.rd_out >= u32::from(q.attr.max_rd_atomic).max(1) {
            return false;
        }
        // A local invalidate waits for the earlier requests that use the
        // key locally to finish, as hardware fences it: a READ response
        // still to land in the memory it takes back, or a WRITE not yet
        // sent (or to be sent again) from it, would otherwise fail or reach
        // memory the consumer already reuses. Others go on meanwhile
        // (rdma_rw starts every reused MR's chain with one).
        if opcode == wr_op::LOCAL_INV && self.key_in_use(q, w.wqe.imm_data) {
            return false;
        }
        q.req.fetch = idx.wrapping_add(1);
        let ud = matches!(self.ty, QpType::Ud | QpType::Gsi);
        if matches!(
            opcode,
            wr_op::BIND_MW | wr_op::LOCAL_INV | wr_op::REG_MR | wr_op::MKEY_CONFIGURE
        ) {
            // Local operations take effect here, in send queue order, and
            // complete (in order) without a packet.
            let status = if ud {
                wc_status::LOC_QP_OP_ERR
            } else {
                self.memory_operation(drv, &w)
            };
            let p = Pending {
                wr: w,
                av: None,
                first_psn: q.req.next_psn,
                npsn: 0,
                sent: 0,
                got: 0,
                started: false,
                done: true,
                status,
            };
            if q.req.pending.push(p, GFP_ATOMIC).is_err() {
                self.event(crate::ib::qp::QpEvent::Fatal);
                self.to_error(q);
                return false;
            }
            return true;
        }
        let mut status = wc_status::SUCCESS;
        let allowed = if ud {
            matches!(opcode, wr_op::SEND | wr_op::SEND_WITH_IMM)
        } else if self.ty == QpType::Uc {
            // IBTA table 38: nothing that needs an answer, no invalidation.
            matches!(
                opcode,
                wr_op::SEND | wr_op::SEND_WITH_IMM | wr_op::RDMA_WRITE | wr_op::RDMA_WRITE_WITH_IMM
            )
        } else {
            matches!(
                opcode,
                wr_op::SEND
                    | wr_op::SEND_WITH_IMM
                    | wr_op::SEND_WITH_INV
                    | wr_op::RDMA_WRITE
                    | wr_op::RDMA_WRITE_WITH_IMM
                    | wr_op::RDMA_READ
                    | wr_op::ATOMIC_CMP_AND_SWP
                    | wr_op::ATOMIC_FETCH_AND_ADD
                    | wr_op::FLUSH
                    | wr_op::ATOMIC_WRITE
            )
        };
        let mtu = q.mtu();
        if !allowed {
            status = wc_status::LOC_QP_OP_ERR;
        } else if (ud && w.len > mtu) || w.len > crate::qp::MAX_MSG_SZ {
            // Longer than a message may be: refused here, as the responder
            // would refuse it (an invalid request that ends the QP).
            status = wc_status::LOC_LEN_ERR;
        } else if matches!(
            opcode,
            wr_op::ATOMIC_CMP_AND_SWP | wr_op::ATOMIC_FETCH_AND_ADD | wr_op::ATOMIC_WRITE
        ) && (w.len < 8 || w.wqe.remote_addr % 8 != 0)
        {
            status = if w.len < 8 {
                wc_status::LOC_LEN_ERR
            } else {
                wc_status::REM_INV_REQ_ERR
            };
        } else if !w.is_inline() && !Self::lkeys_left_to_gather(&w, mtu) {
            let access = if is_read_or_atomic(opcode) {
                AccessOp::LocalWrite
            } else {
                AccessOp::LocalRead
            };
            if self.local(drv).check(&w.sges, access).is_err() {
                status = wc_status::LOC_PROT_ERR;
            }
        }
        let npsn = if opcode == wr_op::RDMA_READ {
            packets(w.len, mtu)
        } else if is_read_or_atomic(opcode) {
            1
        } else {
            packets(w.len, mtu)
        };
        let failed = status != wc_status::SUCCESS;
        let av = if self.kernel.is_some() && ud {
            self.kernel_av(idx)
        } else {
            None
        };
        let p = Pending {
            wr: w,
            av,
            first_psn: q.req.next_psn,
            npsn,
            sent: 0,
            got: 0,
            started: !failed,
            done: failed,
            status,
        };
        if !failed && !ud {
            q.req.next_psn = q.req.next_psn.add(npsn);
            if is_read_or_atomic(opcode) {
                q.req.rd_out += 1;
            }
        }
        if q.req.pending.push(p, GFP_ATOMIC).is_err() {
            // No memory to track the request: nothing can complete it, so
            // the consumer learns of it from the catastrophic error event.
            self.event(crate::ib::qp::QpEvent::Fatal);
            self.to_error(q);
            return false;
        }
        true
    }

    /// Whether `w`'s lkeys are left to the gather of its first packet, which
    /// makes every check [`crate::xfer::Local::check`] would make at fetch:
    /// a SEND or WRITE (not inline) that fits one packet reads all its
    /// SGEs' bytes as it is built, with the same rights and the same
    /// completion error for a bad lkey, before anything is on the wire.
    /// Checking up front as well took each small message a second key
    /// lookup and MR lock. Longer messages are still checked whole at fetch
    /// (their later SGEs are read only packets later), as are READs and
    /// atomics (the local side is written when the answer comes).
    fn lkeys_left_to_gather(w: &wr::SendWr, mtu: u32) -> bool {
        !w.is_inline()
            && matches!(
                w.wqe.opcode,
                wr_op::SEND
                    | wr_op::SEND_WITH_IMM
                    | wr_op::SEND_WITH_INV
                    | wr_op::RDMA_WRITE
                    | wr_op::RDMA_WRITE_WITH_IMM
            )
            && packets(w.len, mtu) == 1
    }

    /// Whether a request not yet finished names `key`'s MR in its SGEs.
    fn key_in_use(&self, q: &QpInner, key: u32) -> bool {
        let index = crate::oxe_core::key::Key::from_raw(key).index();
        q.req.pending.iter().any(|p| {
            !p.done
                && p.wr
                    .sges
                    .iter()
                    .any(|s| crate::oxe_core::key::Key::from_raw(s.lkey).index() == index)
        })
    }

    /// A bind, a local invalidate (of a window, a fast-registration MR or
    /// an indirect key), a fast registration or an indirect key's
    /// configuration; its completion status. Any failure is
    /// IBTA's Memory Management Operation Error (IBV_WC_MW_BIND_ERR),
    /// which moves the QP to the error state.
    ///
    /// A bind's operands ride in the send WQE as `oxe_core::abi` documents:
    /// the new rkey in `rkey`, the window's current rkey in `imm_data`, the
    /// range in `remote_addr`/`compare_add`, the rights in `swap` and the
    /// MR's lkey in `remote_qpn`.
    fn memory_operation(&self, drv: &OxeDevice, w: &wr::SendWr) -> u32 {
        let wqe = &w.wqe;
        let done = if wqe.opcode == wr_op::BIND_MW {
            let req = crate::mw::BindReq {
                mw_rkey: wqe.imm_data,
                new_rkey: wqe.rkey,
                mr_lkey: wqe.remote_qpn,
                addr: wqe.remote_addr,
                len: wqe.compare_add,
                access: wqe.swap as u32,
            };
            wqe.swap <= u64::from(u32::MAX)
                && crate::mw::bind(drv, self.pd, self.tag(), &req).is_ok()
        } else if wqe.opcode == wr_op::REG_MR {
            // Kernel consumers only: the request names an MR by its key,
            // which only the kernel post_send vouches for.
            let req = crate::mr::fastreg::RegReq {
                mr_key: wqe.imm_data,
                key: wqe.rkey,
                iova: wqe.remote_addr,
                len: wqe.compare_add,
                access: wqe.swap as u32,
            };
            self.kernel.is_some()
                && wqe.swap <= u64::from(u32::MAX)
                && crate::mr::fastreg::register(drv, self.pd, &req).is_ok()
        } else if wqe.opcode == wr_op::MKEY_CONFIGURE {
            // User QPs only: an indirect key is a process's object.
            let req = crate::mr::indirect::ConfigReq {
                key: wqe.imm_data,
                access: wqe.swap,
                repeat: u32::try_from(wqe.compare_add).unwrap_or(u32::MAX),
                slots: &w.sges,
            };
            self.kernel.is_none()
                && !w.is_inline()
                && wqe.compare_add <= u64::from(u32::MAX)
                && crate::mr::indirect::configure(drv, self.pd, &req).is_ok()
        } else {
            let by = crate::mr::fastreg::Invalidator::Local;
            crate::mr::fastreg::invalidate(drv, self.pd, self.tag(), wqe.imm_data, by).is_ok()
        };
        if done {
            wc_status::SUCCESS
        } else {
            wc_status::MW_BIND_ERR
        }
    }

    /// The requester: fetch, then send what the window allows.
    /// Sends at most `budget` packets; returns how many went.
    pub(crate) fn requester(&self, drv: &OxeDevice, q: &mut QpInner, budget: u32) -> u32 {
        if q.state != QpState::Rts || q.req.rnr_until.is_some() {
            return 0;
        }
        let mut left = budget;
        let mut i = q.req.sent_through.min(q.req.pending.len());
        while left > 0 && q.state == QpState::Rts && q.req.rnr_until.is_none() && !q.req.faulted {
            if i == q.req.pending.len() && !self.fetch(drv, q) {
                break;
            }
            let Some(p) = q.req.pending.get(i) else { break };
            if p.sent_in_full() {
                if q.req.sent_through == i {
                    q.req.sent_through = i + 1;
                }
                i += 1;
                continue;
            }
            if !self.windows_open(q, p) {
                break;
            }
            // The packets of this request still to go in this run, which
            // one packet may carry as segments (`tx::Out`). A WRITE's first
            // is longer than the rest (its RETH): a packet of its own.
            let first_write = p.sent == 0
                && matches!(
                    p.wr.wqe.opcode,
                    wr_op::RDMA_WRITE | wr_op::RDMA_WRITE_WITH_IMM
                );
            let burst = if first_write {
                1
            } else {
                left.min(p.request_packets() - p.sent)
            };
            match self.send_next(drv, q, i, burst) {
                Ok(()) => left -= 1,
                Err(status) => {
                    if let Some(p) = q.req.pending.get_mut(i) {
                        p.done = true;
                        p.status = status;
                    }
                    break;
                }
            }
        }
        self.retire(q);
        budget - left
    }

    fn av(&self, drv: &OxeDevice, q: &QpInner, p: &Pending) -> Option<Av> {
        match self.ty {
            QpType::Ud | QpType::Gsi if self.kernel.is_some() => p.av,
            QpType::Ud | QpType::Gsi => drv
                .ahs
                .get(p.wr.wqe.ah_num)
                .filter(|a| a.pd == self.pd)
                .map(|a| a.av),
            _ => q.attr.av,
        }
    }

    /// Sends the next packet of pending request `i`, of `burst` to be sent
    /// in a row.
    fn send_next(&self, drv: &OxeDevice, q: &mut QpInner, i: usize, burst: u32) -> Result<(), u32> {
        let mtu = q.mtu();
        let dest_qpn = q.attr.dest_qpn;
        let qkey = q.attr.qkey;
        let (hdrs, off, len) = {
            let p = q.req.pending.get(i).ok_or(wc_status::LOC_QP_OP_ERR)?;
            let w = &p.wr.wqe;
            let mut h = Headers {
                solicited: w.send_flags & OXE_SEND_SOLICITED != 0,
                ..Headers::default()
            };
            match self.ty {
                QpType::Ud | QpType::Gsi => {
                    h.opcode = if w.opcode == wr_op::SEND_WITH_IMM {
                        h.imm = Some(w.imm_data.to_ne_bytes());
                        op::UD_SEND_ONLY_WITH_IMMEDIATE
                    } else {
                        op::UD_SEND_ONLY
                    };
                    h.dest_qpn = w.remote_qpn & 0x00ff_ffff;
                    h.psn = q.req.next_psn;
                    let wq = if w.remote_qkey & 0x8000_0000 != 0 && self.ty == QpType::Ud {
                        qkey
                    } else {
                        w.remote_qkey
                    };
                    h.deth = Some(Deth {
                        qkey: if self.ty == QpType::Gsi && h.dest_qpn == 1 {
                            GSI_QKEY
                        } else {
                            wq
                        },
                        src_qpn: self.qpn(),
                    });
                    (h, 0u32, p.wr.len)
                }
                _ => {
                    h.dest_qpn = dest_qpn;
                    match w.opcode {
                        wr_op::RDMA_READ => {
                            let done_bytes = p.got * mtu;
                            h.opcode = op::RC_RDMA_READ_REQUEST;
                            h.psn = p.first_psn.add(p.got);
                            h.ack_req = true;
                            h.reth = Some(Reth {
                                va: w.remote_addr.wrapping_add(done_bytes.into()),
                                rkey: w.rkey,
                                dma_len: p.wr.len.saturating_sub(done_bytes),
                            });
                            (h, 0, 0)
                        }
                        wr_op::FLUSH => {
                            let (placement_type, selectivity) = flush_attrs_split(w.swap);
                            h.opcode = op::RC_FLUSH;
                            h.psn = p.first_psn;
                            h.ack_req = true;
                            h.feth = Some(Feth {
                                placement_type,
                                selectivity,
                            });
                            h.reth = Some(Reth {
                                va: w.remote_addr,
                                rkey: w.rkey,
                                dma_len: w.compare_add as u32,
                            });
                            (h, 0, 0)
                        }
                        wr_op::ATOMIC_WRITE => {
                            h.opcode = op::RC_ATOMIC_WRITE;
                            h.psn = p.first_psn;
                            h.ack_req = true;
                            h.reth = Some(Reth {
                                va: w.remote_addr,
                                rkey: w.rkey,
                                dma_len: 8,
                            });
                            (h, 0, 8)
                        }
                        wr_op::ATOMIC_CMP_AND_SWP | wr_op::ATOMIC_FETCH_AND_ADD => {
                            let cas = w.opcode == wr_op::ATOMIC_CMP_AND_SWP;
                            h.opcode = if cas {
                                op::RC_COMPARE_SWAP
                            } else {
                                op::RC_FETCH_ADD
                            };
                            h.psn = p.first_psn;
                            h.ack_req = true;
                            h.atomic = Some(AtomicEth {
                                va: w.remote_addr,
                                rkey: w.rkey,
                                swap_add: if cas { w.swap } else { w.compare_add },
                                compare: if cas { w.compare_add } else { 0 },
                            });
                            (h, 0, 0)
                        }
                        _ => {
                            let k = p.sent;
                            let n = p.npsn;
                            let off = k * mtu;
                            let len = p.wr.len.saturating_sub(off).min(mtu);
                            let first = k == 0;
                            let last = k + 1 == n;
                            let write =
                                matches!(w.opcode, wr_op::RDMA_WRITE | wr_op::RDMA_WRITE_WITH_IMM);
                            let imm = matches!(
                                w.opcode,
                                wr_op::RDMA_WRITE_WITH_IMM | wr_op::SEND_WITH_IMM
                            );
                            let inv = w.opcode == wr_op::SEND_WITH_INV;
                            h.opcode = match (write, first, last) {
                                (true, true, true) if imm => op::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
                                (true, true, true) => op::RC_RDMA_WRITE_ONLY,
                                (true, true, false) => op::RC_RDMA_WRITE_FIRST,
                                (true, false, true) if imm => op::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
                                (true, false, true) => op::RC_RDMA_WRITE_LAST,
                                (true, false, false) => op::RC_RDMA_WRITE_MIDDLE,
                                (false, true, true) if imm => op::RC_SEND_ONLY_WITH_IMMEDIATE,
                                (false, true, true) if inv => op::RC_SEND_ONLY_WITH_INVALIDATE,
                                (false, true, true) => op::RC_SEND_ONLY,
                                (false, true, false) => op::RC_SEND_FIRST,
                                (false, false, true) if imm => op::RC_SEND_LAST_WITH_IMMEDIATE,
                                (false, false, true) if inv => op::RC_SEND_LAST_WITH_INVALIDATE,
                                (false, false, true) => op::RC_SEND_LAST,
                                (false, false, false) => op::RC_SEND_MIDDLE,
                            };
                            if write && first {
                                h.reth = Some(Reth {
                                    va: w.remote_addr,
                                    rkey: w.rkey,
                                    dma_len: p.wr.len,
                                });
                            }
                            if last && imm {
                                h.imm = Some(w.imm_data.to_ne_bytes());
                            }
                            if last && inv {
                                h.ieth = Some(w.imm_data);
                            }
                            if !last {
                                h.solicited = false;
                            }
                            h.psn = p.first_psn.add(k);
                            if self.ty == QpType::Uc {
                                // UC opcodes are the RC ones in the UC
                                // transport's range; nothing is acknowledged.
                                h.opcode |= UC_TRANSPORT;
                            } else {
                                h.ack_req = last || (k + 1) % ACK_EVERY == 0;
                            }
                            (h, off, len)
                        }
                    }
                }
            }
        };
        let p = q.req.pending.get(i).ok_or(wc_status::LOC_QP_OP_ERR)?;
        let av = self.av(drv, q, p).ok_or(wc_status::LOC_QP_OP_ERR)?;
        let local = self.local(drv);
        let out = tx::Out {
            queue: &self.req_txq,
            open: Some(&q.req.open),
            burst,
        };
        let res = tx::transmit(drv, &out, &av, self.sport, &hdrs, len as usize, |buf| {
            if p.wr.wqe.opcode == wr_op::ATOMIC_WRITE {
                buf.copy_from_slice(&p.wr.wqe.compare_add.to_ne_bytes());
                Ok(())
            } else if p.wr.is_inline() {
                let src =
                    p.wr.inline
                        .get(off as usize..(off + len) as usize)
                        .ok_or(LocalErr::Len)?;
                buf.copy_from_slice(src);
                Ok(())
            } else {
                local.gather(&p.wr.sges, off.into(), buf)
            }
        });
        match res {
            Ok(()) => q.req.missed = false,
            // ODP: the fault is queued; the QP's work runs it and sends
            // this packet then (crate::odp), at once the first time.
            Err(TxError::Fill(LocalErr::Fault)) => {
                if q.req.missed {
                    q.req.rnr_until = Some(work::jiffies() + 1);
                } else {
                    q.req.faulted = true;
                }
                q.req.missed = true;
                return Ok(());
            }
            Err(TxError::Fill(LocalErr::Len)) => return Err(wc_status::LOC_LEN_ERR),
            Err(TxError::Fill(LocalErr::Prot)) => return Err(wc_status::LOC_PROT_ERR),
            // No route yet: treat as loss for RC (the retry timer recovers),
            // as a dropped datagram for UD. The gather did not run, so a
            // request whose lkeys were left to it (`lkeys_left_to_gather`)
            // is checked here: a datagram with a bad lkey must not complete
            // as sent.
            Err(TxError::Net) => {
                if Self::lkeys_left_to_gather(&p.wr, mtu)
                    && local.check(&p.wr.sges, AccessOp::LocalRead).is_err()
                {
                    return Err(wc_status::LOC_PROT_ERR);
                }
            }
        }
        // A READ is answered up to its last response's PSN.
        let answered_to = if p.wr.wqe.opcode == wr_op::RDMA_READ {
            p.first_psn.add(p.npsn.max(1) - 1)
        } else {
            hdrs.psn
        };
        if answered_to.is_after(q.req.last_sent) {
            q.req.last_sent = answered_to;
        }
        let ud = matches!(self.ty, QpType::Ud | QpType::Gsi);
        if ud {
            q.req.next_psn = q.req.next_psn.next();
        }
        if let Some(p) = q.req.pending.get_mut(i) {
            p.sent += 1;
            // Unacknowledged transports complete once the last packet is out.
            if ud || (self.ty == QpType::Uc && p.sent >= p.npsn) {
                p.done = true;
            }
        }
        if self.ty == QpType::Rc {
            self.arm_timer(q);
        }
        Ok(())
    }

    /// Whether the next packet of `p` may go now: the requester stops at a
    /// read or atomic the read window holds back, and at a packet past the
    /// packet window.
    ///
    /// The oldest unanswered read or atomic is never held: after a timeout
    /// it alone is asked again (`Qp::rewind`), while the later ones still
    /// count as on the wire.
    fn windows_open(&self, q: &QpInner, p: &Pending) -> bool {
        let held_read = is_read_or_atomic(p.wr.wqe.opcode)
            && p.sent == 0
            && !Self::read_window_open(q)
            && !Self::oldest_read(q, p);
        !held_read && self.window_open(q, p)
    }

    /// Whether `p` is the oldest read or atomic not answered yet.
    fn oldest_read(q: &QpInner, p: &Pending) -> bool {
        Self::oldest_awaiting(q)
            .and_then(|(i, _)| q.req.pending.get(i))
            .is_some_and(|o| core::ptr::eq(o, p))
    }

    /// Whether the next packet of `p` fits in the packet window: the ACK
    /// clock that keeps a fast requester from burying a slow responder.
    ///
    /// Without it, `ib_write_bw` keeps 128 writes of 64 packets in flight:
    /// 8192 packets, four times what a responder's receive backlog holds.
    /// A peer that cannot keep up (a KASAN + lockdep kernel runs about three
    /// times slower) then either drops the excess, or takes longer than the
    /// retransmit timeout to work through it, and every go-back-N resend
    /// piles more on: RETRY_EXC_ERR. IBTA leaves flow control of RDMA WRITE
    /// to the requester (end-to-end credits cover only receive WQEs, 9.7.7.2),
    /// so the requester holds at most [`PACKET_WINDOW`] SEND and WRITE
    /// packets past the last acknowledged PSN, and the responder's ACKs
    /// (asked for every [`ACK_EVERY`] packets) open it again. UC has no
    /// acknowledgements and no window.
    ///
    /// After a loss the window is narrower, and opens again with the
    /// acknowledgements that follow (`Qp::shrink_window`).
    fn window_open(&self, q: &QpInner, p: &Pending) -> bool {
        if self.ty != QpType::Rc || is_read_or_atomic(p.wr.wqe.opcode) {
            return true;
        }
        let psn = p.first_psn.add(p.sent);
        let ahead = psn.distance_from(q.req.acked);
        ahead <= packet_window(q) as i32
    }

    /// Whether another read or atomic may go on the wire.
    ///
    /// Going back after a loss resends every read still unanswered, and each
    /// is answered in full again: with 128 reads of 64 packets outstanding
    /// that is 8192 response packets at once, more than the receive backlog
    /// holds, so the retry loses packets too and, repeated, exhausts the
    /// retry count (seen as RETRY_EXC_ERR in ib_read_bw). After a loss the
    /// requester therefore starts again with one read on the wire and
    /// doubles the window with every acknowledgement, as TCP's slow start
    /// does.
    fn read_window_open(q: &QpInner) -> bool {
        if q.req.rd_window == 0 {
            return true;
        }
        let on_wire = q
            .req
            .pending
            .iter()
            .filter(|p| !p.done && p.sent > 0 && is_read_or_atomic(p.wr.wqe.opcode))
            .count();
        on_wire < q.req.rd_window as usize
    }

    /// Whether the requester has a packet it could send now.
    pub(crate) fn sendable(&self, q: &QpInner) -> bool {
        if q.state != QpState::Rts || q.req.rnr_until.is_some() {
            return false;
        }
        let next = q
            .req
            .pending
            .iter()
            .skip(q.req.sent_through)
            .find(|p| !p.sent_in_full());
        match next {
            Some(p) => self.windows_open(q, p),
            None => self.sq_has_new(q),
        }
    }
}
