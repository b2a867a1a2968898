// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Overflow-safe address arithmetic for memory regions.
//!
//! Every MR check compares an access `[iova, iova + len)` against the
//! region. Done naively (`iova + len <= end`) those sums wrap for addresses
//! near the top of the 64-bit space, and a wrapped sum turns an
//! out-of-bounds access from a peer into an in-bounds one. Everything here
//! is phrased with subtractions that cannot wrap, or with checked
//! arithmetic, and is exercised at the exact boundaries in the tests.

use super::errno::Errno;

/// The span of I/O virtual addresses a memory region covers.
///
/// Construction guarantees `len > 0` and that `iova + len` is representable,
/// so [`Range::end`] never wraps and later checks can rely on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Range {
    iova: u64,
    len: u64,
}

impl Range {
    /// Describes `[iova, iova + len)`.
    ///
    /// `EINVAL` for a zero length (no verb registers an empty region, and
    /// `ib_umem_get()` refuses one too) and for a range whose exclusive end
    /// would pass 2^64. A range that ends exactly at 2^64 is refused as
    /// well, as the kernel's umem code does, so `end()` always fits in u64.
    pub const fn new(iova: u64, len: u64) -> Result<Range, Errno> {
        if len == 0 || iova.checked_add(len).is_none() {
            return Err(Errno::EINVAL);
        }
        Ok(Range { iova, len })
    }

    /// First address of the region.
    pub const fn iova(self) -> u64 {
        self.iova
    }

    /// Length in bytes (never zero).
    pub const fn len(self) -> u64 {
        self.len
    }

    /// Always false; present because a `len()` without it reads as an
    /// oversight, and to say explicitly that empty ranges cannot exist.
    pub const fn is_empty(self) -> bool {
        false
    }

    /// One past the last address. Cannot wrap, by construction.
    pub const fn end(self) -> u64 {
        // new() checked that this sum does not overflow.
        self.iova.wrapping_add(self.len)
    }

    /// Whether `[iova, iova + len)` lies entirely inside the region.
    ///
    /// This is the geometric test. A zero-length span is inside when its
    /// address is in `[start, end]`: the one-past-the-end position counts,
    /// because an empty access there touches no byte outside. Data-path
    /// callers that implement IBTA's zero-length rule want
    /// [`Range::allows_access`] instead.
    pub const fn contains(self, iova: u64, len: u64) -> bool {
        // Phrased as two subtractions that cannot wrap instead of a sum
        // that can: offset from the start <= room left for `len` bytes.
        match (iova.checked_sub(self.iova), self.len.checked_sub(len)) {
            (Some(offset), Some(room)) => offset <= room,
            _ => false,
        }
    }

    /// Whether an access of `len` bytes at `iova` may proceed.
    ///
    /// IBTA C9-88: an RDMA READ or WRITE whose DMA length is zero touches no
    /// memory, so the responder must not validate its virtual address or
    /// R_Key at all. Zero-length accesses are therefore always allowed, at
    /// any address, and callers must also skip the key check for them.
    /// Everything else must be fully contained.
    pub const fn allows_access(self, iova: u64, len: u64) -> bool {
        len == 0 || self.contains(iova, len)
    }

    /// Byte offset of `iova` from the start of the region, or `None` if it
    /// is outside. The one-past-the-end address is accepted (offset ==
    /// `len()`) because it is where a zero-length tail access sits.
    pub const fn offset_of(self, iova: u64) -> Option<u64> {
        if self.contains(iova, 0) {
            iova.checked_sub(self.iova)
        } else {
            None
        }
    }

    /// Number of pages of size `1 << page_shift` the region touches, which
    /// is how many page pointers the module must pin and store.
    pub const fn page_count(self, page_shift: u32) -> Option<u64> {
        pages_spanned(self.iova, self.len, page_shift)
    }

    /// Offset of the region's first byte within its first page, i.e. where
    /// the data starts inside page 0 of the MR's page list.
    pub const fn first_page_offset(self, page_shift: u32) -> Option<u64> {
        page_offset(self.iova, page_shift)
    }

    /// Index into the MR's page list of the page holding `iova`.
    ///
    /// Page 0 is the page containing the region's first byte, even when the
    /// region starts mid-page, which matches how the pinned pages are
    /// stored. `None` if `iova` is not a byte of the region (the end address
    /// included, since no byte lives there) or `page_shift` is invalid.
    pub const fn page_index(self, iova: u64, page_shift: u32) -> Option<u64> {
        if page_shift >= u64::BITS || !self.contains(iova, 1) {
            return None;
        }
        (iova >> page_shift).checked_sub(self.iova >> page_shift)
    }
}

/// Number of `1 << page_shift` pages that `[addr, addr + len)` touches.
///
/// `Some(0)` for an empty span. `None` if the span runs past the top of the
/// address space, if `page_shift` is not below 64, or if the count itself
/// does not fit (only possible with 1-byte pages over the whole space).
pub const fn pages_spanned(addr: u64, len: u64, page_shift: u32) -> Option<u64> {
    if page_shift >= u64::BITS {
        return None;
    }
    let Some(extra) = len.checked_sub(1) else {
        return Some(0); // empty span
    };
    let Some(last) = addr.checked_add(extra) else {
        return None;
    };
    match (last >> page_shift).checked_sub(addr >> page_shift) {
        Some(span) => span.checked_add(1),
        None => None,
    }
}

/// Offset of `addr` within its `1 << page_shift` page; `None` for a shift
/// that is not below 64.
pub const fn page_offset(addr: u64, page_shift: u32) -> Option<u64> {
    match 1u64.checked_shl(page_shift) {
        // A power of two is at least 1, so the subtraction cannot wrap.
        Some(page_size) => Some(addr & page_size.wrapping_sub(1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{page_offset, pages_spanned, Errno, Range};

    use super::super::test_rng::XorShift;

    #[test]
    fn new_rejects_zero_length_and_overflow() {
        assert_eq!(Range::new(0x1000, 0), Err(Errno::EINVAL));
        assert_eq!(Range::new(u64::MAX, 1), Err(Errno::EINVAL));
        assert_eq!(Range::new(1, u64::MAX), Err(Errno::EINVAL));
        assert_eq!(Range::new(u64::MAX, u64::MAX), Err(Errno::EINVAL));
        // Ends exactly at 2^64: refused so end() is representable.
        assert_eq!(Range::new(u64::MAX - 9, 10), Err(Errno::EINVAL));
        // Ends one byte below 2^64: fine.
        let r = Range::new(u64::MAX - 9, 9).unwrap();
        assert_eq!(r.end(), u64::MAX);
        assert!(Range::new(0, u64::MAX).is_ok());
        assert!(!r.is_empty());
    }

    #[test]
    fn contains_exact_bounds() {
        let r = Range::new(0x1000, 0x100).unwrap();
        assert!(r.contains(0x1000, 0x100));
        assert!(!r.contains(0x1000, 0x101));
        assert!(!r.contains(0x0fff, 1));
        assert!(!r.contains(0x0fff, 0x101));
        assert!(r.contains(0x10ff, 1));
        assert!(!r.contains(0x10ff, 2));
        assert!(!r.contains(0x1100, 1));
        assert!(r.contains(0x1001, 0xff));
        assert!(!r.contains(0x1001, 0x100));
        // Zero-length spans: inside at [start, end], outside beyond.
        assert!(r.contains(0x1000, 0));
        assert!(r.contains(0x1100, 0));
        assert!(!r.contains(0x1101, 0));
        assert!(!r.contains(0x0fff, 0));
    }

    #[test]
    fn contains_does_not_wrap_near_top() {
        let r = Range::new(u64::MAX - 0xff, 0xff).unwrap();
        assert!(r.contains(u64::MAX - 0xff, 0xff));
        assert!(r.contains(u64::MAX - 1, 1));
        assert!(!r.contains(u64::MAX, 1));
        assert!(!r.contains(u64::MAX - 1, 2));
        // A huge length that would wrap iova + len back into range.
        assert!(!r.contains(u64::MAX - 0x10, u64::MAX));
        assert!(!r.contains(u64::MAX - 0x10, u64::MAX - 0x10));
        let low = Range::new(0, 0x10).unwrap();
        assert!(!low.contains(u64::MAX, 2));
        assert!(!low.contains(8, u64::MAX));
    }

    #[test]
    fn zero_length_access_always_allowed() {
        let r = Range::new(0x1000, 0x100).unwrap();
        for addr in [0, 0x0fff, 0x1000, 0x1100, 0x1101, u64::MAX] {
            assert!(r.allows_access(addr, 0));
        }
        assert!(!r.allows_access(0x0fff, 1));
        assert!(r.allows_access(0x1000, 1));
    }

    #[test]
    fn offset_of_bounds() {
        let r = Range::new(0x1000, 0x100).unwrap();
        assert_eq!(r.offset_of(0x1000), Some(0));
        assert_eq!(r.offset_of(0x10ff), Some(0xff));
        assert_eq!(r.offset_of(0x1100), Some(0x100));
        assert_eq!(r.offset_of(0x1101), None);
        assert_eq!(r.offset_of(0x0fff), None);
    }

    #[test]
    fn contains_matches_wide_arithmetic() {
        // Property: contains() agrees with the obvious u128 formula.
        let mut rng = XorShift(0xdead_beef_cafe_f00d);
        let pick = |rng: &mut XorShift| -> u64 {
            match rng.next() % 4 {
                0 => rng.next(),
                1 => rng.next() % 64,
                2 => u64::MAX - rng.next() % 64,
                _ => 0x1000 + rng.next() % 0x2000,
            }
        };
        for _ in 0..100_000 {
            let Ok(r) = Range::new(pick(&mut rng), pick(&mut rng)) else {
                continue;
            };
            let (a, l) = (pick(&mut rng), pick(&mut rng));
            let expect = a as u128 >= r.iova() as u128
                && a as u128 + l as u128 <= r.iova() as u128 + r.len() as u128;
            assert_eq!(r.contains(a, l), expect, "{r:?} {a:#x} {l:#x}");
        }
    }

    #[test]
    fn pages_spanned_cases() {
        assert_eq!(pages_spanned(0, 0, 12), Some(0));
        assert_eq!(pages_spanned(0x1234, 0, 12), Some(0));
        assert_eq!(pages_spanned(0, 1, 12), Some(1));
        assert_eq!(pages_spanned(0, 4096, 12), Some(1));
        assert_eq!(pages_spanned(0, 4097, 12), Some(2));
        assert_eq!(pages_spanned(4095, 1, 12), Some(1));
        assert_eq!(pages_spanned(4095, 2, 12), Some(2));
        assert_eq!(pages_spanned(4096, 4096, 12), Some(1));
        assert_eq!(pages_spanned(4097, 4096, 12), Some(2));
        assert_eq!(pages_spanned(u64::MAX, 1, 12), Some(1));
        assert_eq!(pages_spanned(u64::MAX, 2, 12), None);
        assert_eq!(pages_spanned(0, u64::MAX, 12), Some(1 << 52));
        assert_eq!(pages_spanned(1, u64::MAX, 12), Some(1 << 52));
        assert_eq!(pages_spanned(0, 1, 64), None);
        assert_eq!(pages_spanned(0, u64::MAX, 63), Some(2));
        // The only case where the count itself overflows.
        assert_eq!(pages_spanned(0, u64::MAX, 0), Some(u64::MAX));
        assert_eq!(pages_spanned(1, u64::MAX - 1, 0), Some(u64::MAX - 1));
    }

    #[test]
    fn pages_spanned_matches_wide_arithmetic() {
        let mut rng = XorShift(0x5151);
        for _ in 0..50_000 {
            let shift = (rng.next() % 40) as u32;
            let addr = if rng.next() & 1 == 0 {
                rng.next()
            } else {
                u64::MAX - rng.next() % 100_000
            };
            let len = rng.next() % (1 << 30);
            let got = pages_spanned(addr, len, shift);
            let end = addr as u128 + len as u128;
            if len == 0 {
                assert_eq!(got, Some(0));
            } else if end > 1u128 << 64 {
                assert_eq!(got, None);
            } else {
                let first = addr as u128 >> shift;
                let last = (end - 1) >> shift;
                assert_eq!(got, Some((last - first + 1) as u64));
            }
        }
    }

    #[test]
    fn page_offset_and_index() {
        assert_eq!(page_offset(0x1234, 12), Some(0x234));
        assert_eq!(page_offset(0x1234, 0), Some(0));
        assert_eq!(page_offset(u64::MAX, 63), Some(u64::MAX >> 1));
        assert_eq!(page_offset(5, 64), None);

        let r = Range::new(0x1ff0, 0x2020).unwrap(); // 0x1ff0..0x4010
        assert_eq!(r.first_page_offset(12), Some(0xff0));
        assert_eq!(r.page_count(12), Some(4));
        assert_eq!(r.page_index(0x1ff0, 12), Some(0));
        assert_eq!(r.page_index(0x1fff, 12), Some(0));
        assert_eq!(r.page_index(0x2000, 12), Some(1));
        assert_eq!(r.page_index(0x400f, 12), Some(3));
        assert_eq!(r.page_index(0x4010, 12), None);
        assert_eq!(r.page_index(0x1fef, 12), None);
        assert_eq!(r.page_index(0x2000, 64), None);

        let top = Range::new(u64::MAX - 0x1000, 0x1000).unwrap();
        assert_eq!(top.page_count(12), Some(2));
        assert_eq!(top.page_index(u64::MAX - 1, 12), Some(1));
    }
}
