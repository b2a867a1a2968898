// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! A tiny deterministic PRNG for property-style tests: no dependencies, so
//! the crate stays dependency-free; the same seed replays the same cases.

/// Marsaglia's xorshift64.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    /// The next value of the sequence (never 0 for a non-zero seed).
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// The high half of the next value, for tests that want a `u32`.
    pub(crate) fn next_u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
}
