// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The Base Transport Header: the 12 bytes every RoCE v2 packet carries
//! right after the UDP header.
//!
//! Layout (big-endian, IBTA 9.2):
//!
//! ```text
//! byte 0      OpCode
//! byte 1      SE(7) M(6) PadCnt(5:4) TVer(3:0)
//! bytes 2-3   P_Key
//! byte 4      FECN(7) BECN(6) Resv6(5:0)     <- "resv8a" for the ICRC
//! bytes 5-7   DestQP
//! byte 8      AckReq(7) Resv7(6:0)
//! bytes 9-11  PSN
//! ```
//!
//! FECN/BECN are RoCE v2 congestion bits living in what InfiniBand calls a
//! reserved byte; they are parsed so congestion handling can see them.

use super::psn::Psn;
use super::wire::{be24, head, head_mut, to_be24, WireError, WireHeader};

/// A decoded Base Transport Header.
///
/// Fields are public because a BTH has no invariants beyond field widths,
/// which [`WireHeader::write`] checks; a builder would add nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bth {
    /// Transport and operation, see the opcode module.
    pub opcode: u8,
    /// Solicited event: the receiver should raise a completion event.
    pub solicited: bool,
    /// Migration request. IBTA has it mirror the QP's path-migration state,
    /// which without an alternate path (always, on RoCE) is "migrated",
    /// i.e. 1; that is what hardware sends. rdma_rxe sends 0. Receivers
    /// without APM ignore it either way.
    pub mig_req: bool,
    /// Number of pad bytes (0..=3) that round the payload up to 4 bytes.
    pub pad: u8,
    /// Transport header version; IBTA defines only 0 ([`Bth::TVER`]).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification (set by the network).
    pub fecn: bool,
    /// Backward explicit congestion notification (echoed by the receiver).
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qpn: u32,
    /// Ask the responder to acknowledge this packet.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Bth {
    /// The only transport header version IBTA defines; receivers drop
    /// packets carrying any other.
    pub const TVER: u8 = 0;
    /// The default partition key (full member of the default partition),
    /// which RoCE uses when no partitioning is configured.
    pub const DEFAULT_PKEY: u16 = 0xffff;
    /// The DestQP of every multicast packet, as IBTA defines it: each QP attached
    /// to the group its destination GID names receives it.
    pub const MULTICAST_QPN: u32 = 0x00ff_ffff;
}

impl WireHeader for Bth {
    const LEN: usize = 12;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let b = head::<12>(buf)?;
        Ok(Bth {
            opcode: b[0],
            solicited: b[1] & 0x80 != 0,
            mig_req: b[1] & 0x40 != 0,
            pad: (b[1] >> 4) & 0x3,
            tver: b[1] & 0x0f,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qpn: be24([b[5], b[6], b[7]]),
            ack_req: b[8] & 0x80 != 0,
            psn: Psn::from_masked(be24([b[9], b[10], b[11]])),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        if self.pad > 3 || self.tver > 0x0f {
            return Err(WireError::FieldOutOfRange);
        }
        let qpn = to_be24(self.dest_qpn)?;
        let psn = to_be24(self.psn.value())?;
        let b = head_mut::<12>(buf)?;
        b[0] = self.opcode;
        b[1] = (u8::from(self.solicited) << 7)
            | (u8::from(self.mig_req) << 6)
            | (self.pad << 4)
            | self.tver;
        [b[2], b[3]] = self.pkey.to_be_bytes();
        b[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        [b[5], b[6], b[7]] = qpn;
        b[8] = u8::from(self.ack_req) << 7;
        [b[9], b[10], b[11]] = psn;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Bth, Psn, WireError, WireHeader};

    use super::super::test_rng::XorShift;

    #[test]
    fn parse_known_bytes() {
        // A CNP captured from a ConnectX-4 Lx: opcode 0x81, BECN set,
        // P_Key 0xffff, DestQP 0x118, PSN 0.
        let bytes = [0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0, 0, 0, 0];
        let bth = Bth::parse(&bytes).unwrap();
        assert_eq!(bth.opcode, 0x81);
        assert!(bth.becn && !bth.fecn);
        assert_eq!(bth.pkey, 0xffff);
        assert_eq!(bth.dest_qpn, 0x118);
        assert_eq!(bth.psn, Psn::from_masked(0));
        assert!(!bth.ack_req && !bth.solicited && !bth.mig_req);
        assert_eq!((bth.pad, bth.tver), (0, 0));
    }

    #[test]
    fn every_field_lands_in_its_bits() {
        let bth = Bth {
            opcode: 0x0a,
            solicited: true,
            mig_req: true,
            pad: 3,
            tver: 0,
            pkey: 0x8001,
            fecn: true,
            becn: false,
            dest_qpn: 0xab_cdef,
            ack_req: true,
            psn: Psn::from_masked(0x12_3456),
        };
        let mut buf = [0u8; 12];
        bth.write(&mut buf).unwrap();
        assert_eq!(
            buf,
            [0x0a, 0xf0, 0x80, 0x01, 0x80, 0xab, 0xcd, 0xef, 0x80, 0x12, 0x34, 0x56]
        );
        assert_eq!(Bth::parse(&buf), Ok(bth));
    }

    #[test]
    fn reserved_bits_ignored_on_parse_and_zeroed_on_write() {
        let bytes = [0x04, 0x00, 0xff, 0xff, 0x3f, 0, 0, 1, 0x7f, 0, 0, 2];
        let bth = Bth::parse(&bytes).unwrap();
        assert!(!bth.fecn && !bth.becn && !bth.ack_req);
        let mut out = [0xffu8; 12];
        bth.write(&mut out).unwrap();
        assert_eq!(out[4], 0);
        assert_eq!(out[8], 0);
    }

    #[test]
    fn truncation_and_range_errors() {
        assert_eq!(
            Bth::parse(&[0u8; 11]),
            Err(WireError::Truncated {
                needed: 12,
                available: 11
            })
        );
        let mut small = [0u8; 11];
        assert!(Bth::default().write(&mut small).is_err());
        let mut buf = [0u8; 12];
        for bad in [
            Bth {
                pad: 4,
                ..Bth::default()
            },
            Bth {
                tver: 16,
                ..Bth::default()
            },
            Bth {
                dest_qpn: 1 << 24,
                ..Bth::default()
            },
        ] {
            assert_eq!(bad.write(&mut buf), Err(WireError::FieldOutOfRange));
        }
        // A longer buffer is fine and only the first 12 bytes change.
        let mut long = [0xaau8; 16];
        Bth::default().write(&mut long).unwrap();
        assert_eq!(&long[12..], &[0xaa; 4]);
    }

    #[test]
    fn random_round_trip() {
        let mut rng = XorShift(0x0123_4567_89ab_cdef);
        for _ in 0..20_000 {
            let r = rng.next();
            let bth = Bth {
                opcode: r as u8,
                solicited: r & (1 << 8) != 0,
                mig_req: r & (1 << 9) != 0,
                pad: ((r >> 10) & 3) as u8,
                tver: ((r >> 12) & 0xf) as u8,
                pkey: (r >> 16) as u16,
                fecn: r & (1 << 32) != 0,
                becn: r & (1 << 33) != 0,
                dest_qpn: (rng.next() as u32) & 0xff_ffff,
                ack_req: r & (1 << 34) != 0,
                psn: Psn::from_masked(rng.next() as u32),
            };
            let mut buf = [0u8; 12];
            bth.write(&mut buf).unwrap();
            assert_eq!(Bth::parse(&buf), Ok(bth));
        }
    }
}
