// SPDX-License-Identifier: GPL-2.0

//! Building and sending one RoCE v2 packet: BTH, the opcode's extension
//! headers in wire order, payload, pad and ICRC. A packet to this host goes
//! straight to the device's receive queue (the kernel would deliver it to
//! `lo`, where no oxe device listens).

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::ib::av::Av;
use crate::ib::pkt::{TxPacket, TxQueue, ICRC_LEN};
use crate::oxe_core::aeth::Aeth;
use crate::oxe_core::bth::Bth;
use crate::oxe_core::ext_headers::{AtomicAckEth, AtomicEth, Deth, Feth, Ieth, ImmDt, Reth};
use crate::oxe_core::opcode::{self, ExtHeader, BTH_LEN};
use crate::oxe_core::wire::WireHeader;
use crate::oxe_core::Psn;
use kernel::prelude::*;

/// Everything that goes before the payload.
#[derive(Default)]
pub(crate) struct Headers {
    pub(crate) opcode: u8,
    pub(crate) psn: Psn,
    pub(crate) dest_qpn: u32,
    pub(crate) ack_req: bool,
    pub(crate) solicited: bool,
    pub(crate) deth: Option<Deth>,
    pub(crate) feth: Option<Feth>,
    pub(crate) reth: Option<Reth>,
    pub(crate) atomic: Option<AtomicEth>,
    pub(crate) aeth: Option<Aeth>,
    pub(crate) atomic_ack: Option<AtomicAckEth>,
    pub(crate) imm: Option<[u8; 4]>,
    pub(crate) ieth: Option<u32>,
}

/// Why a packet was not sent.
pub(crate) enum TxError<E> {
    /// Filling the payload failed (e.g. a local protection error).
    Fill(E),
    /// No route, no memory, or a header that cannot be encoded.
    Net,
}

fn put<H: WireHeader>(buf: &mut [u8], at: Option<usize>, h: Option<H>) -> Result {
    match (at, h) {
        (Some(at), Some(h)) => h
            .write(buf.get_mut(at..).ok_or(EINVAL)?)
            .map_err(|_| EINVAL),
        (None, None) => Ok(()),
        // A header the opcode does not carry, or one it needs and lacks.
        _ => Err(EINVAL),
    }
}

/// Builds one packet of `payload_len` bytes, which `fill` writes, and
/// queues it on `out` (sent when the QP's lock is released).
pub(crate) fn transmit<E>(
    drv: &OxeDevice,
    out: &TxQueue,
    av: &Av,
    sport: u16,
    h: &Headers,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> core::result::Result<(), E>,
) -> core::result::Result<(), TxError<E>> {
    let info = opcode::info(h.opcode).ok_or(TxError::Net)?;
    let hdr_len = info.header_len();
    let pad = (4 - payload_len % 4) % 4;
    let total = hdr_len + payload_len + pad + ICRC_LEN;
    let mut pkt =
        TxPacket::new(&drv.netdev, av, out.route(), sport, total).map_err(|_| TxError::Net)?;
    let buf = pkt.payload();
    let bth = Bth {
        opcode: h.opcode,
        solicited: h.solicited,
        mig_req: false,
        pad: pad as u8,
        tver: Bth::TVER,
        pkey: Bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qpn: h.dest_qpn,
        ack_req: h.ack_req,
        psn: h.psn,
    };
    let hs = info.headers;
    let wrote = (|| -> Result {
        bth.write(buf).map_err(|_| EINVAL)?;
        let at = |x: ExtHeader| hs.offset_of(x);
        put(buf, at(ExtHeader::Deth), h.deth)?;
        put(buf, at(ExtHeader::Feth), h.feth)?;
        put(buf, at(ExtHeader::Reth), h.reth)?;
        put(buf, at(ExtHeader::AtomicEth), h.atomic)?;
        put(buf, at(ExtHeader::Aeth), h.aeth)?;
        put(buf, at(ExtHeader::AtomicAckEth), h.atomic_ack)?;
        put(buf, at(ExtHeader::ImmDt), h.imm.map(|data| ImmDt { data }))?;
        put(buf, at(ExtHeader::Ieth), h.ieth.map(|rkey| Ieth { rkey }))?;
        Ok(())
    })();
    wrote.map_err(|_| TxError::Net)?;
    let _ = BTH_LEN;
    let (_, rest) = buf.split_at_mut(hdr_len);
    let (data, tail) = rest.split_at_mut(payload_len);
    fill(data).map_err(TxError::Fill)?;
    tail.fill(0);
    pkt.seal().map_err(|_| TxError::Net)?;
    drv.counters
        .port
        .sent(total, crate::oxe_core::gid::is_multicast(&av.dgid));
    if pkt.is_local() {
        crate::ib::device::loop_back::<crate::device::OxeDevice>(pkt);
    } else {
        out.push(pkt);
    }
    Ok(())
}
