// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The RoCE packet parser: from the BTH to the end of the pad (the ICRC,
//! checked by the caller, excluded), the headers the opcode carries in wire
//! order and the payload.
//!
//! This is what a peer controls completely, so it is a total function:
//! every byte string gives a packet or `None`, never a panic, and every
//! length or offset it trusts comes from the opcode table, not the wire.
//! The tests below include a mutation fuzzer over valid packets of every
//! opcode.

use super::aeth::Aeth;
use super::bth::Bth;
use super::ext_headers::{AtomicAckEth, AtomicEth, Deth, Feth, Ieth, ImmDt, Reth};
use super::opcode::{self, ExtHeader, OpcodeInfo};
use super::wire::WireHeader;

/// A parsed packet.
///
/// The extension headers are read from the packet when asked for, not
/// copied out here: the receive path parses every packet, most of them
/// need one header or none, and under emulation building every `Option`
/// of a header the opcode does not carry was a measurable share of a
/// packet's handling. Their presence and lengths were checked by
/// [`parse`], so an accessor returns the header exactly when the opcode
/// carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The base transport header.
    pub bth: Bth,
    /// What the opcode table says about the packet.
    pub info: OpcodeInfo,
    /// The BTH and the extension headers that follow it.
    headers: &'a [u8],
    /// The payload, pad removed.
    pub payload: &'a [u8],
}

impl Packet<'_> {
    fn ext<H: WireHeader>(&self, h: ExtHeader) -> Option<H> {
        let at = self.info.headers.offset_of(h)?;
        H::parse(self.headers.get(at..)?).ok()
    }

    /// Datagram ETH (UD).
    pub fn deth(&self) -> Option<Deth> {
        self.ext(ExtHeader::Deth)
    }

    /// Flush ETH (FLUSH).
    pub fn feth(&self) -> Option<Feth> {
        self.ext(ExtHeader::Feth)
    }

    /// RDMA ETH (first/only WRITE, READ request, FLUSH, ATOMIC WRITE).
    pub fn reth(&self) -> Option<Reth> {
        self.ext(ExtHeader::Reth)
    }

    /// Atomic ETH.
    pub fn atomic(&self) -> Option<AtomicEth> {
        self.ext(ExtHeader::AtomicEth)
    }

    /// ACK ETH.
    pub fn aeth(&self) -> Option<Aeth> {
        self.ext(ExtHeader::Aeth)
    }

    /// Atomic ACK ETH.
    pub fn atomic_ack(&self) -> Option<AtomicAckEth> {
        self.ext(ExtHeader::AtomicAckEth)
    }

    /// Immediate data, as on the wire.
    pub fn imm(&self) -> Option<[u8; 4]> {
        self.ext::<ImmDt>(ExtHeader::ImmDt).map(|i| i.data)
    }

    /// The rkey to invalidate.
    pub fn ieth(&self) -> Option<u32> {
        self.ext::<Ieth>(ExtHeader::Ieth).map(|i| i.rkey)
    }
}

/// Parses a packet from its BTH to the end of its pad; `None` for anything
/// malformed: unknown opcode, truncated headers, a pad longer than the
/// payload, or a payload on an opcode that carries none.
pub fn parse(roce: &[u8]) -> Option<Packet<'_>> {
    let bth = Bth::parse(roce).ok()?;
    let info = opcode::info(bth.opcode)?;
    let (headers, body) = roce.split_at_checked(info.header_len())?;
    let payload = body.get(..body.len().checked_sub(bth.pad.into())?)?;
    if !info.has_payload() && !payload.is_empty() {
        return None;
    }
    Some(Packet {
        bth,
        info,
        headers,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::super::psn::Psn;
    use super::super::test_rng::XorShift;
    use super::*;
    use std::vec::Vec;

    /// A valid packet of `opcode` with `payload` bytes of payload (when the
    /// opcode carries one), every header filled with recognizable values.
    fn build(opcode: u8, payload: usize) -> Vec<u8> {
        let info = opcode::info(opcode).unwrap();
        let plen = if info.has_payload() { payload } else { 0 };
        let pad = (4 - plen % 4) % 4;
        let mut v = std::vec![0u8; info.header_len() + plen + pad];
        Bth {
            opcode,
            solicited: false,
            mig_req: false,
            pad: pad as u8,
            tver: 0,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qpn: 0x12_3456,
            ack_req: true,
            psn: Psn::from_masked(77),
        }
        .write(&mut v)
        .unwrap();
        for (i, b) in v.iter_mut().enumerate().skip(info.header_len()).take(plen) {
            *b = i as u8;
        }
        v
    }

    fn all_opcodes() -> impl Iterator<Item = u8> {
        (0..=255u8).filter(|op| opcode::info(*op).is_some())
    }

    #[test]
    fn every_opcode_parses_with_its_headers_and_payload() {
        for op in all_opcodes() {
            let v = build(op, 37);
            let p = parse(&v).unwrap_or_else(|| panic!("opcode {op:#x}"));
            let info = opcode::info(op).unwrap();
            assert_eq!(p.bth.opcode, op);
            assert_eq!(p.payload.len(), if info.has_payload() { 37 } else { 0 });
            assert_eq!(p.feth().is_some(), info.headers.has(ExtHeader::Feth));
            assert_eq!(p.reth().is_some(), info.headers.has(ExtHeader::Reth));
            assert_eq!(p.aeth().is_some(), info.headers.has(ExtHeader::Aeth));
            assert_eq!(p.deth().is_some(), info.headers.has(ExtHeader::Deth));
            assert_eq!(p.imm().is_some(), info.headers.has(ExtHeader::ImmDt));
        }
    }

    #[test]
    fn truncation_never_panics_and_never_invents_bytes() {
        for op in all_opcodes() {
            let v = build(op, 9);
            for len in 0..v.len() {
                if let Some(p) = parse(&v[..len]) {
                    assert!(p.payload.len() <= len);
                }
            }
        }
    }

    #[test]
    fn bad_pad_and_unexpected_payload_are_refused() {
        // A pad longer than what follows the headers.
        let mut v = build(super::super::opcode::codes::RC_ACKNOWLEDGE, 0);
        v[1] |= 3 << 4;
        assert_eq!(parse(&v), None);
        // Bytes after an ACK, which carries no payload.
        let mut v = build(super::super::opcode::codes::RC_ACKNOWLEDGE, 0);
        v.extend_from_slice(&[0; 4]);
        assert_eq!(parse(&v), None);
    }

    /// The fuzz target: random mutations (bit flips, byte sets, cuts and
    /// extensions) of valid packets of every opcode, and random bytes.
    /// Whatever comes in, `parse` returns, and a returned payload lies
    /// inside the input.
    #[test]
    fn fuzz_mutations() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let ops: Vec<u8> = all_opcodes().collect();
        for _ in 0..200_000 {
            let op = ops[(rng.next() % ops.len() as u64) as usize];
            let mut v = build(op, (rng.next() % 300) as usize);
            for _ in 0..(rng.next() % 6) {
                match rng.next() % 4 {
                    0 if !v.is_empty() => {
                        let i = (rng.next() % v.len() as u64) as usize;
                        v[i] ^= 1 << (rng.next() % 8);
                    }
                    1 if !v.is_empty() => {
                        let i = (rng.next() % v.len() as u64) as usize;
                        v[i] = rng.next() as u8;
                    }
                    2 => {
                        let n = (rng.next() % (v.len() as u64 + 1)) as usize;
                        v.truncate(n);
                    }
                    _ => v.extend((0..rng.next() % 16).map(|_| rng.next() as u8)),
                }
            }
            if let Some(p) = parse(&v) {
                let start = p.payload.as_ptr() as usize - v.as_ptr() as usize;
                assert!(start + p.payload.len() <= v.len());
            }
        }
        for _ in 0..50_000 {
            let n = (rng.next() % 80) as usize;
            let v: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            let _ = parse(&v);
        }
    }
}
