// SPDX-License-Identifier: GPL-2.0

//! Building and sending one RoCE v2 packet: BTH, the opcode's extension
//! headers in wire order, payload, pad and ICRC. A packet to this host goes
//! straight to the device's receive queue (the kernel would deliver it to
//! `lo`, where no oxe device listens).

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::ib::av::Av;
use crate::ib::pkt::{OpenPacket, TxPacket, TxQueue, ICRC_LEN};
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

/// Where `transmit` puts a packet.
pub(crate) struct Out<'a> {
    /// The queue it is sent from.
    pub(crate) queue: &'a TxQueue,
    /// The packet being built under the QP's lock, which a packet of the
    /// same size to the same destination joins as one more segment (see
    /// `TxPacket`). `None` outside the lock.
    pub(crate) open: Option<&'a OpenPacket>,
    /// How many packets of this size the caller means to build in a row,
    /// this one included: the room a new packet asks for.
    pub(crate) burst: u32,
}

impl Out<'_> {
    /// Hands on a built packet: kept open for more segments while it has
    /// room, else queued (or delivered, for this host).
    fn put(&self, pkt: TxPacket) {
        match self.open {
            Some(open) if pkt.is_open() => open.set(Some(pkt)),
            _ if pkt.is_local() => crate::ib::device::loop_back::<crate::device::OxeDevice>(pkt),
            _ => self.queue.push(pkt),
        }
    }

    /// The packet a segment of `len` bytes goes in, its last: the open one
    /// if it can join, else a new one (the open one is queued first, so
    /// that packets leave in the order they were built).
    fn packet(&self, drv: &OxeDevice, av: &Av, sport: u16, len: usize) -> Result<TxPacket> {
        if let Some(mut pkt) = self.open.and_then(|o| o.take()) {
            if pkt.append(av, sport, len, self.burst <= 1) {
                return Ok(pkt);
            }
            self.queue.push(pkt);
        }
        TxPacket::new(&drv.netdev, av, self.queue.route(), sport, len, self.burst)
    }

    /// A segment that could not be built is taken back out; a packet left
    /// with none is dropped.
    fn discard(&self, mut pkt: TxPacket) {
        if pkt.segments() > 1 {
            pkt.unappend();
            self.put(pkt);
        }
    }
}

/// Builds one packet of `payload_len` bytes, which `fill` writes, and
/// queues it on `out` (sent when the QP's lock is released).
pub(crate) fn transmit<E>(
    drv: &OxeDevice,
    out: &Out<'_>,
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
    let mut pkt = out
        .packet(drv, av, sport, total)
        .map_err(|_| TxError::Net)?;
    match build(&mut pkt, h, info, payload_len, pad, fill) {
        Ok(()) => {}
        Err(e) => {
            out.discard(pkt);
            return Err(e);
        }
    }
    drv.counters
        .port
        .sent(total, crate::oxe_core::gid::is_multicast(&av.dgid));
    out.put(pkt);
    Ok(())
}

/// Writes the headers, the payload and its `pad` bytes, and the ICRC of
/// `pkt`'s last segment.
fn build<E>(
    pkt: &mut TxPacket,
    h: &Headers,
    info: opcode::OpcodeInfo,
    payload_len: usize,
    pad: usize,
    fill: impl FnOnce(&mut [u8]) -> core::result::Result<(), E>,
) -> core::result::Result<(), TxError<E>> {
    let hdr_len = info.header_len();
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
    pkt.seal().map_err(|_| TxError::Net)
}
