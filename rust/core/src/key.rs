// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! L_Key / R_Key layout and how fresh keys are chosen.
//!
//! A key is 32 bits: a 24-bit index naming the object (its slot in the
//! driver's table) and an 8-bit "variant" in the low byte. IBTA gives the
//! low byte to the consumer for fast registration (`IB_WR_REG_MR`), which
//! is why the split sits there, and every Linux driver including rdma_rxe
//! uses the same layout.
//!
//! Design, and why:
//!
//! * Index 0 is never handed out. Key values 0..=0xff therefore never name
//!   an object, so an rkey of 0 can be sent to mean "no remote access" and
//!   a zero-filled or uninitialised key can never hit a live MR.
//! * The module allocates indices from an XArray cyclically, starting at a
//!   random point ([`KeySource::start_hint`]), so the first keys of a boot
//!   are not the same every time and a peer cannot guess a fresh key by
//!   counting up from one it has seen.
//! * The variant changes every time an index is reused (a rereg keeps the
//!   key: see `rereg::ReregPlan`), and never repeats the previous variant of that index
//!   ([`next_variant`]). A peer still holding the old key then fails the
//!   key comparison instead of reaching whatever now sits in that slot.
//!   Only the previous variant is excluded, so the guarantee is one step
//!   deep; older keys collide with probability 1/255 per reuse, which is
//!   the usual price of an 8-bit tag.
//!
//! Randomness comes from the caller (the kernel passes `get_random_u32()`,
//! tests pass a PRNG) so this stays pure and testable.

use super::errno::Errno;

/// An L_Key or R_Key.
///
/// Kept as the raw wire value; index and variant are views of it, so a key
/// read from a packet can be compared to a stored one without conversion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(u32);

impl Key {
    /// Width of the index field. IBTA fixes the variant at 8 bits, leaving
    /// 24 for the index.
    pub const INDEX_BITS: u32 = 24;
    /// Largest index a key can carry.
    pub const MAX_INDEX: u32 = (1 << Self::INDEX_BITS) - 1;

    /// Builds a key for a live object. `None` for index 0 (reserved, see the
    /// module docs) and for indices that do not fit in 24 bits, so a caller
    /// cannot mint a key that would alias the reserved range or another
    /// index after truncation.
    pub const fn new(index: u32, variant: u8) -> Option<Key> {
        if index == 0 || index > Self::MAX_INDEX {
            return None;
        }
        Some(Key((index << 8) | variant as u32))
    }

    /// Wraps a key received from outside (a WQE, a packet). Any value is
    /// representable; whether it names anything is the lookup's business.
    pub const fn from_raw(raw: u32) -> Key {
        Key(raw)
    }

    /// The raw 32-bit value, as it goes on the wire or back to the user.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The table index this key names.
    pub const fn index(self) -> u32 {
        self.0 >> 8
    }

    /// The low byte that distinguishes successive users of one index.
    pub const fn variant(self) -> u8 {
        (self.0 & 0xff) as u8
    }

    /// Whether the key falls in the reserved index-0 range and so can never
    /// name an object; lookups can reject these without touching the table.
    pub const fn is_reserved(self) -> bool {
        self.index() == 0
    }

    /// The same index with a consumer-chosen variant. Fast registration
    /// (`IB_WR_REG_MR`) lets the consumer pick the low byte but never the
    /// index, so the index is kept from `self`.
    pub const fn with_variant(self, variant: u8) -> Key {
        Key((self.0 & !0xff) | variant as u32)
    }

    /// The same index with the next variant (`ibv_inc_rkey`): a window's
    /// or an indirect key's next key.
    pub const fn next(self) -> Key {
        self.with_variant(self.variant().wrapping_add(1))
    }
}

/// Picks the variant for a (re)used index from a caller-supplied random
/// number, never returning `previous`.
///
/// With no previous variant, all 256 values are possible. With one, the
/// random number is scaled onto the 255 other values (multiply-shift, so
/// there is no modulo bias worth speaking of) and the previous value is
/// skipped over; this needs one random number, never a retry loop.
pub const fn next_variant(previous: Option<u8>, random: u32) -> u8 {
    match previous {
        None => (random >> 24) as u8,
        Some(prev) => {
            // random * 255 < 2^40, so neither the product nor the shift can
            // overflow; the result is in 0..=254.
            let r = ((random as u64).wrapping_mul(255) >> 32) as u8;
            if r >= prev {
                // r <= 254, so this stays within u8.
                r.wrapping_add(1)
            } else {
                r
            }
        }
    }
}

/// The index space of one kind of keyed object (MRs, or MWs).
///
/// Giving MRs and MWs disjoint index ranges lets the data path tell from an
/// rkey alone which table to search, as rdma_rxe does; this type carries
/// one such range and mints keys inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySource {
    min_index: u32,
    max_index: u32,
}

impl KeySource {
    /// Describes the range `min_index..=max_index`. `EINVAL` if the range is
    /// empty, includes the reserved index 0, or does not fit in 24 bits,
    /// because any of those would let the pool mint keys that break the
    /// layout rules above.
    pub const fn new(min_index: u32, max_index: u32) -> Result<KeySource, Errno> {
        if min_index == 0 || max_index > Key::MAX_INDEX || min_index > max_index {
            return Err(Errno::EINVAL);
        }
        Ok(KeySource {
            min_index,
            max_index,
        })
    }

    /// Lowest index of the range, for the XArray allocation limit.
    pub const fn min_index(self) -> u32 {
        self.min_index
    }

    /// Highest index of the range, for the XArray allocation limit.
    pub const fn max_index(self) -> u32 {
        self.max_index
    }

    /// Whether `index` belongs to this pool; used to route an rkey to the
    /// right table before looking it up.
    pub const fn contains_index(self, index: u32) -> bool {
        index >= self.min_index && index <= self.max_index
    }

    /// A uniformly spread starting point for cyclic allocation, so that the
    /// first indices handed out differ from boot to boot.
    pub const fn start_hint(self, random: u32) -> u32 {
        // span <= 2^24, so random * span < 2^56 and the scaled offset is
        // < span: min + offset <= max, no overflow anywhere.
        // new() guarantees min <= max.
        let span = (self.max_index.wrapping_sub(self.min_index) as u64).wrapping_add(1);
        let offset = ((random as u64).wrapping_mul(span) >> 32) as u32;
        self.min_index.wrapping_add(offset)
    }

    /// The key for an object just placed at `index`.
    ///
    /// `previous_variant` is the variant last used at this index, if the
    /// caller remembered it (for example as an XArray value entry left
    /// behind when the previous object was freed); passing it guarantees
    /// the old key cannot match the new object. `ERANGE` if `index` is not
    /// in this pool.
    pub const fn key_for(
        self,
        index: u32,
        previous_variant: Option<u8>,
        random: u32,
    ) -> Result<Key, Errno> {
        if !self.contains_index(index) {
            return Err(Errno::ERANGE);
        }
        match Key::new(index, next_variant(previous_variant, random)) {
            Some(key) => Ok(key),
            // Unreachable: contains_index() already excludes 0 and > 24 bits.
            None => Err(Errno::ERANGE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{next_variant, Errno, Key, KeySource};

    use super::super::test_rng::XorShift;

    #[test]
    fn layout() {
        let k = Key::new(0x12_3456, 0x78).unwrap();
        assert_eq!(k.raw(), 0x1234_5678);
        assert_eq!(k.index(), 0x12_3456);
        assert_eq!(k.variant(), 0x78);
        assert_eq!(Key::from_raw(0x1234_5678), k);
        assert!(!k.is_reserved());
    }

    #[test]
    fn index_zero_and_oversized_rejected() {
        assert_eq!(Key::new(0, 5), None);
        assert_eq!(Key::new(1 << 24, 0), None);
        assert!(Key::new(Key::MAX_INDEX, 0xff).is_some());
        assert!(Key::new(1, 0).is_some());
        for raw in [0u32, 1, 0xff] {
            assert!(Key::from_raw(raw).is_reserved());
        }
        assert!(!Key::from_raw(0x100).is_reserved());
    }

    #[test]
    fn with_variant_keeps_index() {
        let k = Key::new(77, 1).unwrap();
        for v in 0..=255u8 {
            let k2 = k.with_variant(v);
            assert_eq!(k2.index(), 77);
            assert_eq!(k2.variant(), v);
        }
    }

    #[test]
    fn next_variant_never_repeats_previous() {
        for prev in 0..=255u8 {
            for random in [0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX, 0x0101_0101] {
                assert_ne!(next_variant(Some(prev), random), prev);
            }
        }
        let mut rng = XorShift(0x1234_5678_9abc_def1);
        for _ in 0..50_000 {
            let prev = rng.next_u32() as u8;
            assert_ne!(next_variant(Some(prev), rng.next_u32()), prev);
        }
    }

    #[test]
    fn next_variant_reaches_every_other_value() {
        // Sweeping the random input must hit all 255 allowed variants, so
        // no variant is structurally unreachable.
        for prev in [0u8, 1, 127, 254, 255] {
            let mut seen = [false; 256];
            for i in 0..=0xffffu32 {
                seen[next_variant(Some(prev), i << 16) as usize] = true;
            }
            for (v, hit) in seen.iter().enumerate() {
                assert_eq!(*hit, v != prev as usize, "prev {prev} v {v}");
            }
        }
        let mut seen = [false; 256];
        for i in 0..=255u32 {
            seen[next_variant(None, i << 24) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn next_variant_is_roughly_uniform() {
        let mut rng = XorShift(42);
        let mut counts = [0u32; 256];
        let n = 255 * 400;
        for _ in 0..n {
            counts[next_variant(Some(9), rng.next_u32()) as usize] += 1;
        }
        assert_eq!(counts[9], 0);
        for (v, c) in counts.iter().enumerate() {
            if v != 9 {
                assert!((250..=550).contains(c), "variant {v} seen {c} times");
            }
        }
    }

    #[test]
    fn key_source_validation() {
        assert_eq!(KeySource::new(0, 10), Err(Errno::EINVAL));
        assert_eq!(KeySource::new(5, 4), Err(Errno::EINVAL));
        assert_eq!(KeySource::new(1, 1 << 24), Err(Errno::EINVAL));
        let s = KeySource::new(1, Key::MAX_INDEX).unwrap();
        assert_eq!((s.min_index(), s.max_index()), (1, Key::MAX_INDEX));
        assert!(KeySource::new(7, 7).is_ok());
    }

    #[test]
    fn start_hint_stays_in_range_and_spreads() {
        let ranges = [
            (1, 1),
            (1, 2),
            (0x1000, 0x1fff),
            (1, Key::MAX_INDEX),
            (0x20_0000, Key::MAX_INDEX),
        ];
        for (min, max) in ranges {
            let s = KeySource::new(min, max).unwrap();
            assert_eq!(s.start_hint(0), min);
            assert_eq!(s.start_hint(u32::MAX), max);
            let mut rng = XorShift(min as u64 * 31 + 1);
            for _ in 0..10_000 {
                let h = s.start_hint(rng.next_u32());
                assert!(s.contains_index(h), "{h} outside {min}..={max}");
            }
        }
        let s = KeySource::new(1, 4).unwrap();
        let mut seen = [false; 5];
        let mut rng = XorShift(99);
        for _ in 0..1000 {
            seen[s.start_hint(rng.next_u32()) as usize] = true;
        }
        assert_eq!(seen, [false, true, true, true, true]);
    }

    #[test]
    fn key_for_respects_pool_and_previous_variant() {
        let mrs = KeySource::new(1, 0x7fff).unwrap();
        let mws = KeySource::new(0x8000, 0xffff).unwrap();
        assert_eq!(mrs.key_for(0x8000, None, 1), Err(Errno::ERANGE));
        assert_eq!(mws.key_for(0x7fff, None, 1), Err(Errno::ERANGE));
        assert_eq!(mrs.key_for(0, None, 1), Err(Errno::ERANGE));

        let mut rng = XorShift(0xfeed);
        let mut last: Option<u8> = None;
        for _ in 0..2000 {
            let k = mrs.key_for(0x1234, last, rng.next_u32()).unwrap();
            assert_eq!(k.index(), 0x1234);
            assert!(mrs.contains_index(k.index()));
            assert!(!mws.contains_index(k.index()));
            if let Some(prev) = last {
                assert_ne!(k.variant(), prev);
            }
            last = Some(k.variant());
        }
    }
}
