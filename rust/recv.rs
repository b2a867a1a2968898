// SPDX-License-Identifier: GPL-2.0

//! The receive path: a device's packets are checked (UDP length,
//! ICRC, BTH, the opcode's headers) and handed to the QP they name, as a
//! response for its completer or a request for its responder; a packet to a
//! multicast group goes to every QP attached to it. Anything malformed is
//! dropped and counted, never trusted further.

use crate::device::OxeDevice;
use crate::ib::pkt::{RxPacket, ICRC_LEN};
use crate::oxe_core::bth::Bth;
use crate::oxe_core::opcode::{Operation, Transport};
use crate::oxe_core::qp_state::QpType;
use crate::oxe_core::{gid, icrc, packet};
use crate::qp::Qp;
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

/// Checks and parses a packet from its IP header on; `None` for a bad ICRC
/// (unless `verified` already) or anything malformed.
pub(crate) fn parse(bytes: &[u8], l4: usize, verified: bool) -> Option<Packet<'_>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(ICRC_LEN)?)?;
    let wire = icrc::from_wire(crc.try_into().ok()?);
    if !verified && crate::ib::pkt::icrc_of(body, l4) != Some(wire) {
        return None;
    }
    let ip = body.get(..l4)?;
    // The UDP header is 8 bytes; its length field was checked by UDP.
    let roce = body.get(l4.checked_add(8)?..)?;
    Some(Packet {
        hdr: packet::parse(roce)?,
        ip,
        len: roce.len().checked_add(ICRC_LEN)?,
    })
}

impl OxeDevice {
    /// Drains the loopback queue (the device's receive work).
    pub(crate) fn drain_rx(&self) {
        while let Some(skb) = self.rx().and_then(|q| q.pop()) {
            self.receive(skb, Context::Work);
        }
    }

    /// Processes one packet (`Context::Softirq`: in the softirq that
    /// received it from the network), or leaves it in its QP's backlog.
    pub(crate) fn receive(&self, mut skb: RxPacket, ctx: Context) {
        let deferred = {
            let Some((bytes, l4)) = skb.bytes() else {
                return;
            };
            let Some(p) = parse(bytes, l4, false) else {
                crate::counters::inc(&self.counters.rx_dropped);
                return;
            };
            self.counters
                .port
                .received(p.len, p.bth.dest_qpn == Bth::MULTICAST_QPN);
            if p.bth.dest_qpn == Bth::MULTICAST_QPN {
                self.dispatch_multicast(&p);
                return;
            }
            let Some(qp) = self.qps.get(p.bth.dest_qpn) else {
                crate::counters::inc(&self.counters.rx_dropped);
                return;
            };
            crate::counters::inc(&self.counters.rx_packets);
            if ctx == Context::Softirq && qp.defers(&p) {
                qp
            } else {
                qp.process(self, &p);
                return;
            }
        };
        deferred.backlogged.fetch_add(1, Ordering::AcqRel);
        deferred.backlog.push(skb);
        deferred.kick();
    }
}

/// Where a packet is being received.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// The network's receive softirq.
    Softirq,
    /// A work item (process context).
    Work,
}

/// Packets drained from a backlog per work run, before other work gets a turn.
const BACKLOG_BUDGET: u32 = 64;

impl Qp {
    /// Whether a packet received in softirq is left to the QP's work item.
    ///
    /// Packets are processed in the softirq that received them, as rxe
    /// does: the trip through a work item per packet was most of a small
    /// message's latency. RDMA READ requests are the exception: their
    /// responses are a burst of packets, which sent from softirq pile up in
    /// the per-CPU receive backlog (1000 packets) behind it and overflow
    /// it; from the work item each one is processed as it is sent. Once
    /// anything is deferred, everything is, until the backlog is drained,
    /// so the QP sees its packets in order.
    ///
    /// Deferring the packets of long messages as well, so that the
    /// receiving side would run on another CPU, was measured and lost:
    /// write and read bandwidth both fell, and reads stalled on responses
    /// that arrived out of order.
    fn defers(&self, p: &Packet<'_>) -> bool {
        self.backlogged.load(Ordering::Acquire) != 0
            || p.info.operation == Operation::RdmaReadRequest
    }

    fn process(&self, drv: &OxeDevice, p: &Packet<'_>) {
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
            return;
        }
        let mut q = self.lock();
        if p.info.is_request() {
            self.on_request(drv, &mut q, p);
        } else {
            self.on_response(drv, &mut q, p);
        }
    }

    /// Processes backlogged packets (the work item); returns whether some
    /// are left for the next run.
    pub(crate) fn drain_backlog(&self, drv: &OxeDevice) -> bool {
        for _ in 0..BACKLOG_BUDGET {
            let Some(mut skb) = self.backlog.pop() else {
                return false;
            };
            // Checked (ICRC included) when it was received.
            if let Some(p) = skb.bytes().and_then(|(bytes, l4)| parse(bytes, l4, true)) {
                self.process(drv, &p);
            }
            self.backlogged.fetch_sub(1, Ordering::AcqRel);
        }
        true
    }
}

impl OxeDevice {
    /// A packet to a multicast group, named by its destination IP address:
    /// a copy to every QP attached to the group. Each QP takes it as a
    /// datagram of its own (state, UD opcode and Q_Key checked there).
    fn dispatch_multicast(&self, p: &Packet<'_>) {
        let delivered = p.info.is_request()
            && gid::destination(p.ip)
                .is_some_and(|mgid| self.mcast.for_each_member(&mgid, |qp| qp.process(self, p)));
        crate::counters::inc(if delivered {
            &self.counters.rx_packets
        } else {
            &self.counters.rx_dropped
        });
    }
}
