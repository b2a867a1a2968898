// SPDX-License-Identifier: GPL-2.0

//! The receive path: a device's packets are checked (UDP length,
//! ICRC, BTH, the opcode's headers) and handed to the QP they name, as a
//! response for its completer or a request for its responder; a packet to a
//! multicast group goes to every QP attached to it. Anything malformed is
//! dropped and counted, never trusted further.

use crate::device::OxeDevice;
use crate::ib::pkt::{RxPacket, ICRC_LEN};
use crate::oxe_core::bth::Bth;
use crate::oxe_core::{gid, icrc, packet};

/// A parsed packet (oxe-core's parser), and the IP header it came with.
pub(crate) struct Packet<'a> {
    hdr: packet::Packet<'a>,
    /// The IP header, for a UD receive's GRH.
    pub(crate) ip: &'a [u8],
}

impl<'a> core::ops::Deref for Packet<'a> {
    type Target = packet::Packet<'a>;

    fn deref(&self) -> &Self::Target {
        &self.hdr
    }
}

/// Checks and parses a packet from its IP header on; `None` for a bad ICRC
/// or anything malformed.
pub(crate) fn parse(bytes: &[u8], l4: usize) -> Option<Packet<'_>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(ICRC_LEN)?)?;
    let wire = icrc::from_wire(crc.try_into().ok()?);
    if crate::ib::pkt::icrc_of(body, l4) != Some(wire) {
        return None;
    }
    let ip = body.get(..l4)?;
    // The UDP header is 8 bytes; its length field was checked by UDP.
    let roce = body.get(l4.checked_add(8)?..)?;
    Some(Packet {
        hdr: packet::parse(roce)?,
        ip,
    })
}

impl OxeDevice {
    /// Drains the loopback queue (the device's receive work).
    pub(crate) fn drain_rx(&self) {
        while let Some(skb) = self.rx().and_then(|q| q.pop()) {
            self.receive(skb);
        }
    }

    /// Processes one packet: in the softirq that received it from the
    /// network, or in the receive work for loopback.
    pub(crate) fn receive(&self, mut skb: RxPacket) {
        let Some((bytes, l4)) = skb.bytes() else {
            return;
        };
        match parse(bytes, l4) {
            Some(p) => self.dispatch(&p),
            None => crate::counters::inc(&self.counters.rx_dropped),
        }
    }

    fn dispatch(&self, p: &Packet<'_>) {
        if p.bth.dest_qpn == Bth::MULTICAST_QPN {
            self.dispatch_multicast(p);
            return;
        }
        let Some(qp) = self.qps.get(p.bth.dest_qpn) else {
            crate::counters::inc(&self.counters.rx_dropped);
            return;
        };
        crate::counters::inc(&self.counters.rx_packets);
        let mut q = qp.inner.lock();
        if p.info.is_request() {
            qp.on_request(self, &mut q, p);
        } else {
            qp.on_response(self, &mut q, p);
        }
    }

    /// A packet to a multicast group, named by its destination IP address:
    /// a copy to every QP attached to the group. Each QP takes it as a
    /// datagram of its own (state, UD opcode and Q_Key checked there).
    fn dispatch_multicast(&self, p: &Packet<'_>) {
        let delivered = p.info.is_request()
            && gid::destination(p.ip).is_some_and(|mgid| {
                self.mcast.for_each_member(&mgid, |qp| {
                    let mut q = qp.inner.lock();
                    qp.on_request(self, &mut q, p);
                })
            });
        crate::counters::inc(if delivered {
            &self.counters.rx_packets
        } else {
            &self.counters.rx_dropped
        });
    }
}
