// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The ACK Extended Transport Header and its syndrome.
//!
//! An AETH is four bytes: an 8-bit syndrome and a 24-bit MSN. The syndrome
//! packs three different messages into one byte:
//!
//! ```text
//! bit 7      reserved (0)
//! bits 6:5   00 ACK, 01 RNR NAK, 10 reserved, 11 NAK
//! bits 4:0   ACK: credit count code; RNR NAK: timer code; NAK: NAK code
//! ```
//!
//! It gets its own module because decoding it correctly (the credit and
//! RNR-timer encodings are logarithmic tables, not numbers) is where
//! requesters go wrong.

use super::wire::{be24, head, head_mut, to_be24, WireError, WireHeader};

/// Credit count code meaning "no credit information" (the responder does
/// not do end-to-end flow control, e.g. an SRQ).
pub const CREDITS_INVALID: u8 = 31;

/// Receive WQE counts for credit codes 0..=30 (IBTA's credit encoding).
const CREDIT_TABLE: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// RNR NAK timer values in microseconds for codes 0..=31 (the same encoding
/// as `IB_RNR_TIMER_*`; note code 0 is the longest, 655.36 ms).
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// How many receive WQEs a credit code advertises; `None` for
/// [`CREDITS_INVALID`] and for values that do not fit in five bits.
pub fn credit_count(code: u8) -> Option<u32> {
    CREDIT_TABLE.get(usize::from(code)).copied()
}

/// The credit code to advertise when `available` receive WQEs are posted.
///
/// Rounds down to the largest encodable count not above `available`:
/// over-advertising would invite sends the responder must RNR-NAK.
pub fn credit_code_for(available: u32) -> u8 {
    // Code 0 (zero credits) always qualifies, so the search cannot fail;
    // the table has 31 entries, so the index fits in a u8.
    CREDIT_TABLE
        .iter()
        .rposition(|&count| count <= available)
        .map_or(0, |code| code as u8)
}

/// Minimum RNR NAK wait for a timer code, in microseconds; `None` for codes
/// that do not fit in five bits.
pub fn rnr_timer_micros(code: u8) -> Option<u32> {
    RNR_TIMER_US.get(usize::from(code)).copied()
}

/// NAK codes (syndrome bits 4:0 when the type is NAK).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// PSN sequence error: the requester must retry from the expected PSN.
    PsnSequenceError,
    /// Invalid request (unsupported opcode, bad length...).
    InvalidRequest,
    /// Remote access error (bad R_Key, out-of-range address, no rights).
    RemoteAccessError,
    /// Remote operational error: the responder could not complete it.
    RemoteOperationalError,
    /// Invalid RD request; defined for RD, which oxe does not implement,
    /// but decoded so it is not mistaken for a reserved code.
    InvalidRdRequest,
    /// A code IBTA reserves (5..=31). Kept rather than rejected so a
    /// requester can log it and treat it as a fatal NAK.
    Reserved(u8),
}

impl NakCode {
    const fn from_bits(bits: u8) -> NakCode {
        match bits {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            other => NakCode::Reserved(other),
        }
    }

    const fn to_bits(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(b) => b,
        }
    }
}

/// A decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement, with a credit count code (see
    /// [`credit_count`]).
    Ack {
        /// 5-bit credit code; [`CREDITS_INVALID`] when not tracked.
        credits: u8,
    },
    /// Receiver not ready: retry after the encoded delay.
    RnrNak {
        /// 5-bit timer code (see [`rnr_timer_micros`]).
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// Type bits 10, which IBTA reserves; carries the syndrome byte (bit 7
    /// cleared, like every decoded field).
    Reserved(u8),
}

impl Syndrome {
    /// Decodes a syndrome byte. Bit 7 is reserved and ignored, as IBTA
    /// requires of receivers.
    pub const fn from_byte(byte: u8) -> Syndrome {
        let low = byte & 0x1f;
        match (byte >> 5) & 0x3 {
            0 => Syndrome::Ack { credits: low },
            1 => Syndrome::RnrNak { timer: low },
            3 => Syndrome::Nak(NakCode::from_bits(low)),
            _ => Syndrome::Reserved(byte & 0x7f),
        }
    }

    /// Encodes the syndrome, or `None` if a 5-bit field does not fit. A
    /// reserved syndrome is passed through with bit 7 cleared.
    pub const fn to_byte(self) -> Option<u8> {
        let (kind, low) = match self {
            Syndrome::Ack { credits } => (0u8, credits),
            Syndrome::RnrNak { timer } => (1, timer),
            Syndrome::Nak(code) => (3, code.to_bits()),
            Syndrome::Reserved(byte) => return Some(byte & 0x7f),
        };
        if low > 0x1f {
            return None;
        }
        Some((kind << 5) | low)
    }

    /// An ACK with no credit information; what a responder without
    /// end-to-end credits sends.
    pub const fn ack_without_credits() -> Syndrome {
        Syndrome::Ack {
            credits: CREDITS_INVALID,
        }
    }
}

/// ACK Extended Transport Header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    /// What kind of acknowledgement this is.
    pub syndrome: Syndrome,
    /// Message sequence number: count of completed requests (24 bits).
    pub msn: u32,
}

impl WireHeader for Aeth {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let b = head::<4>(buf)?;
        Ok(Aeth {
            syndrome: Syndrome::from_byte(b[0]),
            msn: be24([b[1], b[2], b[3]]),
        })
    }

    fn write(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let syn = match self.syndrome.to_byte() {
            Some(s) => s,
            None => return Err(WireError::FieldOutOfRange),
        };
        let msn = to_be24(self.msn)?;
        let b = head_mut::<4>(buf)?;
        b[0] = syn;
        [b[1], b[2], b[3]] = msn;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{
        credit_code_for, credit_count, rnr_timer_micros, Aeth, NakCode, Syndrome, WireError,
        WireHeader, CREDITS_INVALID,
    };

    #[test]
    fn syndrome_decoding() {
        assert_eq!(Syndrome::from_byte(0x00), Syndrome::Ack { credits: 0 });
        assert_eq!(Syndrome::from_byte(0x1f), Syndrome::ack_without_credits());
        assert_eq!(Syndrome::from_byte(0x20), Syndrome::RnrNak { timer: 0 });
        assert_eq!(Syndrome::from_byte(0x3f), Syndrome::RnrNak { timer: 31 });
        assert_eq!(
            Syndrome::from_byte(0x60),
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Syndrome::from_byte(0x61),
            Syndrome::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            Syndrome::from_byte(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            Syndrome::from_byte(0x63),
            Syndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            Syndrome::from_byte(0x64),
            Syndrome::Nak(NakCode::InvalidRdRequest)
        );
        assert_eq!(
            Syndrome::from_byte(0x65),
            Syndrome::Nak(NakCode::Reserved(5))
        );
        assert_eq!(Syndrome::from_byte(0x40), Syndrome::Reserved(0x40));
        // Bit 7 is ignored.
        assert_eq!(
            Syndrome::from_byte(0xe2),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(Syndrome::from_byte(0x85), Syndrome::Ack { credits: 5 });
    }

    #[test]
    fn syndrome_round_trip_all_bytes() {
        for b in 0..=0x7fu8 {
            let s = Syndrome::from_byte(b);
            assert_eq!(s.to_byte(), Some(b), "{b:#04x}");
            assert_eq!(Syndrome::from_byte(b | 0x80), s);
        }
    }

    #[test]
    fn syndrome_rejects_wide_fields() {
        assert_eq!(Syndrome::Ack { credits: 32 }.to_byte(), None);
        assert_eq!(Syndrome::RnrNak { timer: 0xff }.to_byte(), None);
        assert_eq!(Syndrome::Nak(NakCode::Reserved(40)).to_byte(), None);
    }

    #[test]
    fn credit_table() {
        assert_eq!(credit_count(0), Some(0));
        assert_eq!(credit_count(5), Some(6));
        assert_eq!(credit_count(30), Some(32768));
        assert_eq!(credit_count(CREDITS_INVALID), None);
        assert_eq!(credit_count(200), None);
        // Strictly increasing, so the encoding is unambiguous.
        for c in 1..31u8 {
            assert!(credit_count(c).unwrap() > credit_count(c - 1).unwrap());
        }
        assert_eq!(credit_code_for(0), 0);
        assert_eq!(credit_code_for(5), 4);
        assert_eq!(credit_code_for(6), 5);
        assert_eq!(credit_code_for(7), 5);
        assert_eq!(credit_code_for(32767), 29);
        assert_eq!(credit_code_for(u32::MAX), 30);
        // Never over-advertises, and never under-advertises more than needed.
        for n in 0..70_000u32 {
            let code = credit_code_for(n);
            let adv = credit_count(code).unwrap();
            assert!(adv <= n);
            if let Some(next) = credit_count(code + 1) {
                assert!(next > n);
            }
        }
    }

    #[test]
    fn rnr_timer_table() {
        assert_eq!(rnr_timer_micros(0), Some(655_360));
        assert_eq!(rnr_timer_micros(1), Some(10));
        assert_eq!(rnr_timer_micros(14), Some(1280));
        assert_eq!(rnr_timer_micros(31), Some(491_520));
        assert_eq!(rnr_timer_micros(32), None);
        for c in 2..32u8 {
            assert!(rnr_timer_micros(c).unwrap() > rnr_timer_micros(c - 1).unwrap());
        }
    }

    #[test]
    fn aeth_wire() {
        let a = Aeth {
            syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
            msn: 0x01_0203,
        };
        let mut buf = [0u8; 4];
        a.write(&mut buf).unwrap();
        assert_eq!(buf, [0x62, 0x01, 0x02, 0x03]);
        assert_eq!(Aeth::parse(&buf), Ok(a));
        assert!(Aeth::parse(&buf[..3]).is_err());
        let bad = Aeth { msn: 1 << 24, ..a };
        assert_eq!(bad.write(&mut buf), Err(WireError::FieldOutOfRange));
        let bad = Aeth {
            syndrome: Syndrome::RnrNak { timer: 33 },
            msn: 0,
        };
        assert_eq!(bad.write(&mut buf), Err(WireError::FieldOutOfRange));
    }
}
