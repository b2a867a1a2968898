// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Extended transport headers: the fixed-size headers an opcode may place
//! between the BTH and the payload (which ones, and in what order, is the
//! opcode table's business).
//!
//! All are big-endian. Each codec rejects values that do not fit their
//! field instead of truncating them, because a silently truncated QPN or
//! MSN is a misrouted or misordered packet. The AETH, whose syndrome needs
//! real decoding, lives in its own module and is re-exported here so every
//! header can be found in one place.

pub use super::aeth::Aeth;
use super::wire::{be24, be32, be64, head, head_mut, to_be24, WireError, WireHeader};

/// RDMA Extended Transport Header: where an RDMA READ/WRITE (or FLUSH, or
/// ATOMIC WRITE) lands on the responder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reth {
    /// Remote virtual address (or offset, for zero-based MRs).
    pub va: u64,
    /// R_Key naming the remote MR or MW.
    pub rkey: u32,
    /// Total length of the whole message, not of this packet. Zero means
    /// the VA and R_Key must not be checked (IBTA C9-88).
    pub dma_len: u32,
}

impl WireHeader for Reth {
    const LEN: usize = 16;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let b = head::<16>(buf)?;
        Ok(Reth {
            va: be64([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            rkey: be32([b[8], b[9], b[10], b[11]]),
            dma_len: be32([b[12], b[13], b[14], b[15]]),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let b = head_mut::<16>(buf)?;
        [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]] = self.va.to_be_bytes();
        [b[8], b[9], b[10], b[11]] = self.rkey.to_be_bytes();
        [b[12], b[13], b[14], b[15]] = self.dma_len.to_be_bytes();
        Ok(())
    }
}

/// Atomic Extended Transport Header: operands of CmpSwap / FetchAdd.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicEth {
    /// Remote address; must be 8-byte aligned (checked by the responder,
    /// not here, since it is a semantic rule rather than a wire one).
    pub va: u64,
    /// R_Key naming the remote MR or MW.
    pub rkey: u32,
    /// Swap value (CmpSwap) or addend (FetchAdd).
    pub swap_add: u64,
    /// Compare value (CmpSwap only; ignored by FetchAdd).
    pub compare: u64,
}

impl WireHeader for AtomicEth {
    const LEN: usize = 28;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let b = head::<28>(buf)?;
        Ok(AtomicEth {
            va: be64([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            rkey: be32([b[8], b[9], b[10], b[11]]),
            swap_add: be64([b[12], b[13], b[14], b[15], b[16], b[17], b[18], b[19]]),
            compare: be64([b[20], b[21], b[22], b[23], b[24], b[25], b[26], b[27]]),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let b = head_mut::<28>(buf)?;
        [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]] = self.va.to_be_bytes();
        [b[8], b[9], b[10], b[11]] = self.rkey.to_be_bytes();
        [b[12], b[13], b[14], b[15], b[16], b[17], b[18], b[19]] = self.swap_add.to_be_bytes();
        [b[20], b[21], b[22], b[23], b[24], b[25], b[26], b[27]] = self.compare.to_be_bytes();
        Ok(())
    }
}

/// Atomic ACK Extended Transport Header: the value the target held before
/// the atomic, returned to the requester.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicAckEth {
    /// Original remote data.
    pub orig: u64,
}

impl WireHeader for AtomicAckEth {
    const LEN: usize = 8;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let b = head::<8>(buf)?;
        Ok(AtomicAckEth { orig: be64(*b) })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        *head_mut::<8>(buf)? = self.orig.to_be_bytes();
        Ok(())
    }
}

/// Datagram Extended Transport Header: what a UD receiver needs to accept
/// a packet and to reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deth {
    /// Queue key; must match the receiving QP's (with the privileged
    /// high-bit rule applied by the receiver, not here).
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qpn: u32,
}

impl WireHeader for Deth {
    const LEN: usize = 8;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let b = head::<8>(buf)?;
        Ok(Deth {
            qkey: be32([b[0], b[1], b[2], b[3]]),
            // b[4] is reserved.
            src_qpn: be24([b[5], b[6], b[7]]),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let qpn = to_be24(self.src_qpn)?;
        let b = head_mut::<8>(buf)?;
        [b[0], b[1], b[2], b[3]] = self.qkey.to_be_bytes();
        b[4] = 0;
        [b[5], b[6], b[7]] = qpn;
        Ok(())
    }
}

/// Immediate data.
///
/// Kept as the four wire bytes, not a number: the transport never
/// interprets it, and verbs hands it to the consumer in network byte order
/// (`__be32 imm_data`), so converting would only invite a double swap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImmDt {
    /// The immediate data exactly as carried on the wire.
    pub data: [u8; 4],
}

impl WireHeader for ImmDt {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        Ok(ImmDt {
            data: *head::<4>(buf)?,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        *head_mut::<4>(buf)? = self.data;
        Ok(())
    }
}

/// Invalidate Extended Transport Header: the R_Key a SEND with Invalidate
/// asks the responder to invalidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ieth {
    /// R_Key to invalidate.
    pub rkey: u32,
}

impl WireHeader for Ieth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        Ok(Ieth {
            rkey: be32(*head::<4>(buf)?),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        *head_mut::<4>(buf)? = self.rkey.to_be_bytes();
        Ok(())
    }
}

/// Flush Extended Transport Header (IBTA Memory Placement Extensions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feth {
    /// Placement type bits (4 bits): which point to flush to (global
    /// visibility, persistence).
    pub placement_type: u8,
    /// Selectivity level (2 bits): the whole region or just the range.
    pub selectivity: u8,
}

impl WireHeader for Feth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let b = head::<4>(buf)?;
        // The fields live in the last byte; the rest is reserved.
        Ok(Feth {
            placement_type: b[3] & 0x0f,
            selectivity: (b[3] >> 4) & 0x03,
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        if self.placement_type > 0x0f || self.selectivity > 0x03 {
            return Err(WireError::FieldOutOfRange);
        }
        *head_mut::<4>(buf)? = [0, 0, 0, (self.selectivity << 4) | self.placement_type];
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::opcode::ExtHeader;
    use super::{AtomicAckEth, AtomicEth, Deth, Feth, Ieth, ImmDt, Reth, WireError, WireHeader};

    use super::super::test_rng::XorShift;

    /// Round-trips `h`, checks truncation handling, and checks that writing
    /// touches exactly LEN bytes.
    fn check<H: WireHeader + PartialEq + core::fmt::Debug>(h: H) {
        let mut buf = [0xa5u8; 40];
        h.write(&mut buf).unwrap();
        assert!(buf[H::LEN..].iter().all(|b| *b == 0xa5));
        assert_eq!(H::parse(&buf).unwrap(), h);
        assert_eq!(H::parse(&buf[..H::LEN]).unwrap(), h);
        assert_eq!(
            H::parse(&buf[..H::LEN - 1]),
            Err(WireError::Truncated {
                needed: H::LEN,
                available: H::LEN - 1
            })
        );
        let mut short = [0u8; 40];
        assert!(h.write(&mut short[..H::LEN - 1]).is_err());
    }

    #[test]
    fn lengths_agree_with_opcode_table() {
        assert_eq!(Reth::LEN, ExtHeader::Reth.wire_len());
        assert_eq!(AtomicEth::LEN, ExtHeader::AtomicEth.wire_len());
        assert_eq!(AtomicAckEth::LEN, ExtHeader::AtomicAckEth.wire_len());
        assert_eq!(Deth::LEN, ExtHeader::Deth.wire_len());
        assert_eq!(ImmDt::LEN, ExtHeader::ImmDt.wire_len());
        assert_eq!(Ieth::LEN, ExtHeader::Ieth.wire_len());
        assert_eq!(Feth::LEN, ExtHeader::Feth.wire_len());
        assert_eq!(super::Aeth::LEN, ExtHeader::Aeth.wire_len());
    }

    #[test]
    fn reth_layout() {
        let r = Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            dma_len: 0x0000_1000,
        };
        let mut buf = [0u8; 16];
        r.write(&mut buf).unwrap();
        assert_eq!(
            buf,
            [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0x10, 0]
        );
        check(r);
    }

    #[test]
    fn atomic_eth_layout() {
        let a = AtomicEth {
            va: 0x1000,
            rkey: 0xdead_beef,
            swap_add: 0x0102_0304_0506_0708,
            compare: 0xf0e0_d0c0_b0a0_9080,
        };
        let mut buf = [0u8; 28];
        a.write(&mut buf).unwrap();
        assert_eq!(&buf[8..12], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&buf[12..20], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            &buf[20..28],
            &[0xf0, 0xe0, 0xd0, 0xc0, 0xb0, 0xa0, 0x90, 0x80]
        );
        check(a);
    }

    #[test]
    fn deth_layout_and_reserved_byte() {
        let d = Deth {
            qkey: 0x8001_0000,
            src_qpn: 1,
        };
        let mut buf = [0xffu8; 8];
        d.write(&mut buf).unwrap();
        assert_eq!(buf, [0x80, 0x01, 0, 0, 0, 0, 0, 1]);
        // The reserved byte is ignored on receive.
        buf[4] = 0x77;
        assert_eq!(Deth::parse(&buf), Ok(d));
        assert_eq!(
            Deth {
                src_qpn: 1 << 24,
                ..d
            }
            .write(&mut buf),
            Err(WireError::FieldOutOfRange)
        );
        check(d);
    }

    #[test]
    fn small_headers() {
        let imm = ImmDt { data: [1, 2, 3, 4] };
        let mut buf = [0u8; 4];
        imm.write(&mut buf).unwrap();
        assert_eq!(buf, [1, 2, 3, 4]);
        check(imm);

        let ieth = Ieth { rkey: 0x0000_1234 };
        ieth.write(&mut buf).unwrap();
        assert_eq!(buf, [0, 0, 0x12, 0x34]);
        check(ieth);

        let ack = AtomicAckEth { orig: 42 };
        check(ack);

        let f = Feth {
            placement_type: 0x2,
            selectivity: 1,
        };
        f.write(&mut buf).unwrap();
        assert_eq!(buf, [0, 0, 0, 0x12]);
        check(f);
        assert_eq!(
            Feth {
                placement_type: 16,
                selectivity: 0
            }
            .write(&mut buf),
            Err(WireError::FieldOutOfRange)
        );
        assert_eq!(
            Feth {
                placement_type: 0,
                selectivity: 4
            }
            .write(&mut buf),
            Err(WireError::FieldOutOfRange)
        );
        // Reserved bits are ignored on receive.
        assert_eq!(
            Feth::parse(&[0xff, 0xff, 0xff, 0xc1]),
            Ok(Feth {
                placement_type: 1,
                selectivity: 0
            })
        );
    }

    #[test]
    fn random_round_trips() {
        let mut rng = XorShift(0x1357_9bdf_2468_ace0);
        for _ in 0..5_000 {
            check(Reth {
                va: rng.next(),
                rkey: rng.next() as u32,
                dma_len: rng.next() as u32,
            });
            check(AtomicEth {
                va: rng.next(),
                rkey: rng.next() as u32,
                swap_add: rng.next(),
                compare: rng.next(),
            });
            check(AtomicAckEth { orig: rng.next() });
            check(Deth {
                qkey: rng.next() as u32,
                src_qpn: rng.next() as u32 & 0xff_ffff,
            });
            check(ImmDt {
                data: (rng.next() as u32).to_ne_bytes(),
            });
            check(Ieth {
                rkey: rng.next() as u32,
            });
            let r = rng.next();
            check(Feth {
                placement_type: (r & 0xf) as u8,
                selectivity: ((r >> 4) & 3) as u8,
            });
        }
    }
}
