// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! 24-bit packet sequence numbers.
//!
//! PSNs wrap every 2^24 packets, which a busy QP reaches in seconds, so
//! they can never be compared with `<`. IBTA orders them by distance
//! within half the sequence space instead: a PSN up to 2^23 - 1 ahead is
//! "after", one up to 2^23 behind is "before". All arithmetic here is modulo 2^24 so the
//! data path cannot get this wrong by accident.

use core::cmp::Ordering;

/// A packet sequence number, always kept within 24 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Psn(u32);

impl Psn {
    /// Mask of the 24 PSN bits.
    pub const MASK: u32 = 0x00ff_ffff;
    /// Half the PSN space: the largest distance that still has a defined
    /// order. Distances of exactly this size are treated as "behind".
    pub const HALF_WINDOW: u32 = 1 << 23;

    /// A PSN from a value that must already fit in 24 bits; `None`
    /// otherwise, so a caller's arithmetic bug does not silently wrap.
    pub const fn new(value: u32) -> Option<Psn> {
        if value > Self::MASK {
            None
        } else {
            Some(Psn(value))
        }
    }

    /// A PSN from the low 24 bits of `value`, for values taken from a packet
    /// field or produced by modular arithmetic where wrapping is intended.
    pub const fn from_masked(value: u32) -> Psn {
        Psn(value & Self::MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24: the PSN `n` packets later.
    pub const fn add(self, n: u32) -> Psn {
        Psn::from_masked(self.0.wrapping_add(n))
    }

    /// `self - n` modulo 2^24: the PSN `n` packets earlier.
    pub const fn sub(self, n: u32) -> Psn {
        Psn::from_masked(self.0.wrapping_sub(n))
    }

    /// The PSN right after this one.
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// Signed distance from `other` to `self`, in `-2^23 ..= 2^23 - 1`.
    ///
    /// Positive means `self` is after `other`. This is the one primitive
    /// every window check is built on: shift the 24-bit difference into the
    /// top of an i32 and let sign extension bring it back.
    pub const fn distance_from(self, other: Psn) -> i32 {
        // (a - b) mod 2^24, placed in the top 24 bits, reinterpreted as
        // signed, then arithmetically shifted back down.
        let diff = self.0.wrapping_sub(other.0) << 8;
        (diff as i32) >> 8
    }

    /// Window-aware ordering of two PSNs, which is what "earlier" and
    /// "later" mean for sequence numbers that wrap.
    pub const fn compare(self, other: Psn) -> Ordering {
        let d = self.distance_from(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// Whether `self` comes strictly before `other` in the window.
    pub const fn is_before(self, other: Psn) -> bool {
        self.distance_from(other) < 0
    }

    /// Whether `self` comes strictly after `other` in the window.
    pub const fn is_after(self, other: Psn) -> bool {
        self.distance_from(other) > 0
    }

    /// Whether `self` lies in the half-open window of `len` PSNs starting at
    /// `start`; used for "is this within the outstanding requests" checks.
    /// `len` larger than the PSN space covers everything.
    pub const fn in_window(self, start: Psn, len: u32) -> bool {
        // The forward distance from start, modulo 2^24, is < len.
        (self.0.wrapping_sub(start.0) & Self::MASK) < len
    }
}

#[cfg(test)]
mod tests {
    use super::Psn;
    use core::cmp::Ordering;

    use super::super::test_rng::XorShift;

    fn p(v: u32) -> Psn {
        Psn::new(v).unwrap()
    }

    #[test]
    fn construction() {
        assert_eq!(Psn::new(0xff_ffff), Some(p(0xff_ffff)));
        assert_eq!(Psn::new(0x100_0000), None);
        assert_eq!(Psn::from_masked(0x1ff_ffff).value(), 0xff_ffff);
        assert_eq!(Psn::from_masked(u32::MAX).value(), 0xff_ffff);
    }

    #[test]
    fn add_sub_wrap() {
        assert_eq!(p(0xff_ffff).next(), p(0));
        assert_eq!(p(0xff_fffe).add(5), p(3));
        assert_eq!(p(2).sub(5), p(0xff_fffd));
        assert_eq!(p(0).sub(1), p(0xff_ffff));
        assert_eq!(p(7).add(1 << 24), p(7));
        assert_eq!(p(7).add(u32::MAX), p(6));
    }

    #[test]
    fn distance_across_wrap() {
        assert_eq!(p(0).distance_from(p(0xff_ffff)), 1);
        assert_eq!(p(0xff_ffff).distance_from(p(0)), -1);
        assert_eq!(p(5).distance_from(p(0xff_fffb)), 10);
        assert_eq!(p(0x7f_ffff).distance_from(p(0)), 0x7f_ffff);
        // Exactly half the space apart: defined as "behind", both ways.
        assert_eq!(p(0x80_0000).distance_from(p(0)), -0x80_0000);
        assert_eq!(p(0).distance_from(p(0x80_0000)), -0x80_0000);
        assert_eq!(p(0x80_0001).distance_from(p(0)), -0x7f_ffff);
    }

    #[test]
    fn ordering_across_wrap() {
        assert_eq!(p(1).compare(p(0xff_fff0)), Ordering::Greater);
        assert_eq!(p(0xff_fff0).compare(p(1)), Ordering::Less);
        assert_eq!(p(9).compare(p(9)), Ordering::Equal);
        assert!(p(0xff_ffff).is_before(p(0)));
        assert!(p(0).is_after(p(0xff_ffff)));
        assert!(!p(3).is_before(p(3)));
        assert!(!p(3).is_after(p(3)));
    }

    #[test]
    fn properties_hold_for_random_pairs() {
        let mut rng = XorShift(0xabcdef);
        for _ in 0..100_000 {
            let a = Psn::from_masked(rng.next_u32());
            let n = rng.next_u32() % (1 << 23);
            let b = a.add(n);
            // Moving forward less than half the space is "after".
            assert_eq!(b.distance_from(a), n as i32);
            assert_eq!(a.distance_from(b), -(n as i32));
            assert_eq!(b.sub(n), a);
            if n > 0 {
                assert!(b.is_after(a) && a.is_before(b));
                assert_eq!(b.compare(a), Ordering::Greater);
            }
            // Antisymmetry, except at exactly half the space.
            let c = Psn::from_masked(rng.next_u32());
            let d = a.distance_from(c);
            if d != -(1 << 23) {
                assert_eq!(c.distance_from(a), -d);
            }
            assert!((-(1 << 23)..(1 << 23)).contains(&d));
        }
    }

    #[test]
    fn window_membership() {
        let start = p(0xff_fffe);
        assert!(start.in_window(start, 1));
        assert!(!start.in_window(start, 0));
        assert!(p(0xff_ffff).in_window(start, 4));
        assert!(p(0).in_window(start, 4));
        assert!(p(1).in_window(start, 4));
        assert!(!p(2).in_window(start, 4));
        assert!(!p(0xff_fffd).in_window(start, 4));
        assert!(p(0xff_fffd).in_window(start, u32::MAX));
    }
}
