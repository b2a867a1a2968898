// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! What every RoCE header codec in this crate shares: the error type, the
//! parse/write contract, and bounds-checked big-endian field access.
//!
//! Parsers take the bytes a peer sent, so they must never index out of
//! bounds or trust a length field. Each header is read through a fixed-size
//! array reference obtained with a checked split; after that, field offsets
//! are constants the compiler checks, and no runtime index can fail.

use super::errno::Errno;

/// Why a packet could not be parsed or a header could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The buffer is shorter than the header (or headers) being read or
    /// written. Carries what was needed so a caller can tell a runt packet
    /// from a bad offset.
    Truncated {
        /// Bytes the operation required.
        needed: usize,
        /// Bytes the buffer actually had.
        available: usize,
    },
    /// A field holds a value that does not fit its wire width (for example a
    /// QPN above 24 bits); writing it would silently corrupt a neighbour.
    FieldOutOfRange,
    /// The BTH opcode is not one this device speaks.
    UnknownOpcode(u8),
    /// The IP version nibble is neither 4 nor 6.
    BadIpVersion(u8),
    /// An IPv4 header length below the minimum of 5 words.
    BadIpHeaderLength(u8),
    /// The IP header does not carry UDP directly, so it is not RoCE v2.
    NotUdp(u8),
}

impl WireError {
    /// The errno a verb should return for this. Every wire problem is a
    /// malformed input, hence `EINVAL`; the variant keeps the detail for
    /// logging and counters.
    pub const fn to_errno(self) -> Errno {
        Errno::EINVAL
    }
}

/// A fixed-size header that can be read from and written to a buffer.
///
/// One trait for all headers so that code walking a packet (and the tests)
/// can treat them uniformly.
pub trait WireHeader: Sized {
    /// Size of the header on the wire, in bytes.
    const LEN: usize;

    /// Reads the header from the start of `buf`; trailing bytes are ignored
    /// because the rest of the packet usually follows.
    fn parse(buf: &[u8]) -> Result<Self, WireError>;

    /// Writes the header to the start of `buf`, leaving the rest untouched.
    /// Reserved bits are written as zero, as IBTA requires of senders.
    fn write(&self, buf: &mut [u8]) -> Result<(), WireError>;
}

/// The first `N` bytes of `buf` as an array, or `Truncated`.
pub(crate) fn head<const N: usize>(buf: &[u8]) -> Result<&[u8; N], WireError> {
    buf.first_chunk::<N>().ok_or(WireError::Truncated {
        needed: N,
        available: buf.len(),
    })
}

/// The first `N` bytes of `buf` as a mutable array, or `Truncated`.
pub(crate) fn head_mut<const N: usize>(buf: &mut [u8]) -> Result<&mut [u8; N], WireError> {
    let available = buf.len();
    buf.first_chunk_mut::<N>().ok_or(WireError::Truncated {
        needed: N,
        available,
    })
}

/// Reads a big-endian u32 from four bytes.
pub(crate) const fn be32(b: [u8; 4]) -> u32 {
    u32::from_be_bytes(b)
}

/// Reads a big-endian u64 from eight bytes.
pub(crate) const fn be64(b: [u8; 8]) -> u64 {
    u64::from_be_bytes(b)
}

/// Reads a big-endian 24-bit value from three bytes.
pub(crate) const fn be24(b: [u8; 3]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

/// The low 24 bits of `v` as three big-endian bytes; `FieldOutOfRange` if
/// `v` has any of the upper 8 bits set.
pub(crate) const fn to_be24(v: u32) -> Result<[u8; 3], WireError> {
    if v > 0x00ff_ffff {
        return Err(WireError::FieldOutOfRange);
    }
    let b = v.to_be_bytes();
    Ok([b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::Errno;
    use super::{be24, head, head_mut, to_be24, WireError};

    #[test]
    fn head_checks_length() {
        let buf = [1u8, 2, 3];
        assert_eq!(head::<3>(&buf), Ok(&[1, 2, 3]));
        assert_eq!(head::<2>(&buf), Ok(&[1, 2]));
        assert_eq!(
            head::<4>(&buf),
            Err(WireError::Truncated {
                needed: 4,
                available: 3
            })
        );
        let mut m = [0u8; 2];
        assert!(head_mut::<3>(&mut m).is_err());
        head_mut::<2>(&mut m).unwrap()[1] = 9;
        assert_eq!(m, [0, 9]);
    }

    #[test]
    fn be24_round_trip_and_range() {
        assert_eq!(be24([0x12, 0x34, 0x56]), 0x12_3456);
        assert_eq!(to_be24(0x12_3456), Ok([0x12, 0x34, 0x56]));
        assert_eq!(to_be24(0xff_ffff), Ok([0xff; 3]));
        assert_eq!(to_be24(0x100_0000), Err(WireError::FieldOutOfRange));
    }

    #[test]
    fn errors_map_to_einval() {
        assert_eq!(WireError::FieldOutOfRange.to_errno(), Errno::EINVAL);
        assert_eq!(WireError::NotUdp(6).to_errno(), Errno::EINVAL);
    }
}
