// SPDX-License-Identifier: GPL-2.0

//! The receive path: a device's queued packets are checked (UDP length,
//! ICRC, BTH, the opcode's headers) and handed to the QP they name, as a
//! response for its completer or a request for its responder. Anything
//! malformed is dropped and counted, never trusted further.

use crate::device::OxeDevice;
use crate::ib::pkt::ICRC_LEN;
use crate::oxe_core::aeth::Aeth;
use crate::oxe_core::bth::Bth;
use crate::oxe_core::ext_headers::{AtomicAckEth, AtomicEth, Deth, Ieth, ImmDt, Reth};
use crate::oxe_core::icrc;
use crate::oxe_core::opcode::{self, ExtHeader, OpcodeInfo};
use crate::oxe_core::wire::WireHeader;

/// A parsed packet: its headers, and its payload without pad and ICRC.
pub(crate) struct Packet<'a> {
    pub(crate) bth: Bth,
    pub(crate) info: OpcodeInfo,
    pub(crate) deth: Option<Deth>,
    pub(crate) reth: Option<Reth>,
    pub(crate) atomic: Option<AtomicEth>,
    pub(crate) aeth: Option<Aeth>,
    pub(crate) atomic_ack: Option<AtomicAckEth>,
    pub(crate) imm: Option<[u8; 4]>,
    pub(crate) ieth: Option<u32>,
    pub(crate) payload: &'a [u8],
    /// The IP header, for a UD receive's GRH.
    pub(crate) ip: &'a [u8],
}

fn ext<H: WireHeader>(bytes: &[u8], info: &OpcodeInfo, h: ExtHeader) -> Option<Option<H>> {
    match info.headers.offset_of(h) {
        Some(at) => H::parse(bytes.get(at..)?).ok().map(Some),
        None => Some(None),
    }
}

/// Parses a packet from its IP header on; `None` for anything malformed.
pub(crate) fn parse(bytes: &[u8], l4: usize) -> Option<Packet<'_>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(ICRC_LEN)?)?;
    let wire = icrc::from_wire(crc.try_into().ok()?);
    if crate::ib::pkt::icrc_of(body, l4) != Some(wire) {
        return None;
    }
    let ip = bytes.get(..l4)?;
    let udp = bytes.get(l4..)?;
    let roce = udp.get(8..udp.len().checked_sub(ICRC_LEN)?)?;
    let bth = Bth::parse(roce).ok()?;
    let info = opcode::info(bth.opcode)?;
    let hlen = info.header_len();
    let body = roce.get(hlen..)?;
    let payload = body.get(..body.len().checked_sub(bth.pad.into())?)?;
    if !info.has_payload() && !payload.is_empty() {
        return None;
    }
    Some(Packet {
        bth,
        info,
        deth: ext(roce, &info, ExtHeader::Deth)?,
        reth: ext(roce, &info, ExtHeader::Reth)?,
        atomic: ext(roce, &info, ExtHeader::AtomicEth)?,
        aeth: ext(roce, &info, ExtHeader::Aeth)?,
        atomic_ack: ext(roce, &info, ExtHeader::AtomicAckEth)?,
        imm: ext::<ImmDt>(roce, &info, ExtHeader::ImmDt)?.map(|i| i.data),
        ieth: ext::<Ieth>(roce, &info, ExtHeader::Ieth)?.map(|i| i.rkey),
        payload,
        ip,
    })
}

impl OxeDevice {
    /// Drains the receive queue (the device's receive work).
    pub(crate) fn drain_rx(&self) {
        while let Some(mut skb) = self.rx().and_then(|q| q.pop()) {
            let Some((bytes, l4)) = skb.bytes() else {
                continue;
            };
            match parse(bytes, l4) {
                Some(p) => self.dispatch(&p),
                None => crate::counters::inc(&self.counters.rx_dropped),
            }
        }
    }

    fn dispatch(&self, p: &Packet<'_>) {
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
}
