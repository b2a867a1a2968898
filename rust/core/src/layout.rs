// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Indirect-key layouts: how a byte of an indirect (UMR-style) key maps
//! onto the keys it is built from.
//!
//! An indirect key is zero based, as mlx5's are: byte 0 of the key is the
//! first byte of its first entry. Two shapes exist:
//!
//! * a **list**: the entries one after another, each `len` bytes at `addr`
//!   of the key it names;
//! * an **interleaved** pattern: the entries one after another, the whole
//!   round `repeat` times, and in round `r` entry `i` starts at
//!   `addr + r * (len + skip)`: a strided view of each entry's memory.
//!
//! A list is an interleaved pattern of one round whose skips are never
//! used, so one walk serves both. The walk is pure arithmetic, shared by the
//! kernel (which resolves every piece through the key table) and tested
//! here at every boundary; all of it is checked, so a configuration whose
//! extent does not fit 64 bits is refused rather than wrapped.

/// One entry of a layout, as configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The key the entry's bytes are reached through (an MR's, or another
    /// indirect key's).
    pub key: u32,
    /// Where the entry starts, in that key's address space.
    pub addr: u64,
    /// Bytes of the entry in each round.
    pub len: u32,
    /// Interleaved only: bytes of the named key passed over after each
    /// round's `len`.
    pub skip: u32,
}

impl Entry {
    /// The bytes of the named key this entry may touch over `repeat`
    /// rounds: `(start, length)`, `None` if they reach 2^64.
    pub fn extent(&self, repeat: u32) -> Option<(u64, u64)> {
        if self.len == 0 {
            return Some((self.addr, 0));
        }
        let stride = u64::from(self.len).checked_add(u64::from(self.skip))?;
        let last = stride.checked_mul(u64::from(repeat).checked_sub(1)?)?;
        let len = last.checked_add(u64::from(self.len))?;
        self.addr.checked_add(len)?;
        Some((self.addr, len))
    }
}

/// Bytes of a layout of `entries` over `repeat` rounds (at least one),
/// `None` if that passes 2^64 or is zero.
pub fn total(entries: &[Entry], repeat: u32) -> Option<u64> {
    let round = entries
        .iter()
        .try_fold(0u64, |acc, e| acc.checked_add(u64::from(e.len)))?;
    let t = round.checked_mul(u64::from(repeat))?;
    (t != 0).then_some(t)
}

/// A piece of an access: `len` bytes at `addr` of key `key`, the
/// `at`-th byte onwards of the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The key the piece is reached through.
    pub key: u32,
    /// Where it starts, in that key's address space.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Its offset in the access.
    pub at: u64,
}

/// Calls `f` on the pieces of bytes `[off, off + len)` of a layout, in
/// order; stops at the first error. `None` (nothing called) if the span
/// is not inside the layout.
pub fn walk<E>(
    entries: &[Entry],
    repeat: u32,
    off: u64,
    len: u64,
    mut f: impl FnMut(Piece) -> Result<(), E>,
) -> Option<Result<(), E>> {
    let t = total(entries, repeat)?;
    if off > t || len > t.checked_sub(off)? {
        return None;
    }
    // Not zero, and no sum overflows: `total` checked the round times
    // `repeat`.
    let round = entries
        .iter()
        .try_fold(0u64, |acc, e| acc.checked_add(u64::from(e.len)))?;
    let mut r = off.checked_div(round)?;
    let mut in_round = off.checked_rem(round)?;
    let mut i = 0usize;
    // The entry byte `in_round` falls in.
    for e in entries {
        if in_round < u64::from(e.len) {
            break;
        }
        in_round = in_round.checked_sub(u64::from(e.len))?;
        i = i.checked_add(1)?;
    }
    let mut done = 0u64;
    while done < len {
        let e = entries.get(i)?;
        let elen = u64::from(e.len);
        if in_round < elen {
            let n = elen.checked_sub(in_round)?.min(len.checked_sub(done)?);
            let stride = elen.checked_add(u64::from(e.skip))?;
            let addr = e
                .addr
                .checked_add(stride.checked_mul(r)?)?
                .checked_add(in_round)?;
            let p = Piece {
                key: e.key,
                addr,
                len: n,
                at: done,
            };
            if let Err(x) = f(p) {
                return Some(Err(x));
            }
            done = done.checked_add(n)?;
        }
        in_round = 0;
        i = i.checked_add(1)?;
        if i == entries.len() {
            i = 0;
            r = r.checked_add(1)?;
        }
    }
    Some(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(key: u32, addr: u64, len: u32, skip: u32) -> Entry {
        Entry {
            key,
            addr,
            len,
            skip,
        }
    }

    fn pieces(entries: &[Entry], repeat: u32, off: u64, len: u64) -> Option<Vec<Piece>> {
        let mut v = Vec::new();
        walk::<()>(entries, repeat, off, len, |p| {
            v.push(p);
            Ok(())
        })?
        .unwrap();
        Some(v)
    }

    fn p(key: u32, addr: u64, len: u64, at: u64) -> Piece {
        Piece { key, addr, len, at }
    }

    #[test]
    fn list_pieces_cross_entries_at_odd_offsets() {
        let l = [e(1, 0x1003, 7, 0), e(2, 0x2000, 5, 0), e(3, 0x3001, 9, 0)];
        assert_eq!(total(&l, 1), Some(21));
        assert_eq!(
            pieces(&l, 1, 0, 21).unwrap(),
            vec![p(1, 0x1003, 7, 0), p(2, 0x2000, 5, 7), p(3, 0x3001, 9, 12)]
        );
        // Starting in the middle of the second entry, ending in the third.
        assert_eq!(
            pieces(&l, 1, 9, 5).unwrap(),
            vec![p(2, 0x2002, 3, 0), p(3, 0x3001, 2, 3)]
        );
        // The last byte, and exactly at each boundary.
        assert_eq!(pieces(&l, 1, 20, 1).unwrap(), vec![p(3, 0x3009, 1, 0)]);
        assert_eq!(pieces(&l, 1, 7, 1).unwrap(), vec![p(2, 0x2000, 1, 0)]);
        assert_eq!(
            pieces(&l, 1, 6, 2).unwrap(),
            vec![p(1, 0x1009, 1, 0), p(2, 0x2000, 1, 1)]
        );
    }

    #[test]
    fn bounds_plus_and_minus_one() {
        let l = [e(1, 0, 8, 0), e(2, 0, 8, 0)];
        assert!(pieces(&l, 1, 0, 16).is_some());
        assert!(pieces(&l, 1, 0, 17).is_none());
        assert!(pieces(&l, 1, 15, 1).is_some());
        assert!(pieces(&l, 1, 16, 1).is_none());
        assert!(pieces(&l, 1, u64::MAX, 2).is_none());
        // An empty access at the end touches nothing.
        assert_eq!(pieces(&l, 1, 16, 0).unwrap(), vec![]);
    }

    #[test]
    fn interleaved_rounds_stride_each_entry() {
        // mlx5's test pattern: two entries of 8 bytes, skipping 2, 3 rounds.
        let l = [e(1, 0x100, 8, 2), e(1, 0x140, 8, 2)];
        assert_eq!(total(&l, 3), Some(48));
        let v = pieces(&l, 3, 0, 48).unwrap();
        let addrs: Vec<u64> = v.iter().map(|p| p.addr).collect();
        assert_eq!(addrs, vec![0x100, 0x140, 0x10a, 0x14a, 0x114, 0x154]);
        // Round 1, entry 1, from its 5th byte, into round 2.
        assert_eq!(
            pieces(&l, 3, 28, 6).unwrap(),
            vec![p(1, 0x14e, 4, 0), p(1, 0x114, 2, 4)]
        );
        assert!(pieces(&l, 3, 47, 2).is_none());
    }

    #[test]
    fn empty_entries_are_passed_over() {
        let l = [
            e(1, 0, 0, 0),
            e(2, 0x10, 4, 0),
            e(3, 0, 0, 0),
            e(4, 0x20, 4, 0),
        ];
        assert_eq!(
            pieces(&l, 1, 0, 8).unwrap(),
            vec![p(2, 0x10, 4, 0), p(4, 0x20, 4, 4)]
        );
        assert_eq!(pieces(&l, 1, 4, 4).unwrap(), vec![p(4, 0x20, 4, 0)]);
        assert_eq!(total(&[e(1, 0, 0, 0)], 1), None);
    }

    #[test]
    fn extents_and_overflow() {
        assert_eq!(e(1, 0x100, 8, 2).extent(3), Some((0x100, 28)));
        assert_eq!(e(1, 0x100, 8, 2).extent(1), Some((0x100, 8)));
        assert_eq!(e(1, 0x100, 8, 2).extent(0), None);
        // Ending at 2^64 is refused, as `Range` refuses it.
        assert_eq!(e(1, u64::MAX - 8, 8, 0).extent(1), Some((u64::MAX - 8, 8)));
        assert_eq!(e(1, u64::MAX - 7, 8, 0).extent(1), None);
        assert_eq!(e(1, u64::MAX - 8, 8, 0).extent(2), None);
        assert_eq!(e(1, 0, u32::MAX, u32::MAX).extent(u32::MAX), None);
        let m = u64::from(u32::MAX);
        assert_eq!(total(&[e(1, 0, u32::MAX, 0)], u32::MAX), Some(m * m));
        assert_eq!(total(&[e(1, 0, u32::MAX, 0); 2], u32::MAX), None);
    }
}
