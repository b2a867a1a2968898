// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The RoCE v2 Invariant CRC (IBTA Annex A17).
//!
//! The ICRC is a CRC-32 (the Ethernet/zlib one: reflected polynomial
//! 0xEDB88320, register preset to all ones, result inverted) over the
//! parts of a packet that no router may change. Fields a router does
//! rewrite are replaced by ones before hashing:
//!
//! * eight 0xff bytes first, standing in for the InfiniBand LRH that a
//!   RoCE v2 packet does not have;
//! * IPv4: Type of Service, TTL and header checksum;
//!   IPv6: traffic class, flow label and hop limit;
//! * UDP: checksum;
//! * BTH: byte 4 (FECN, BECN and the reserved bits next to them), which
//!   switches mark for congestion.
//!
//! Everything after the BTH (extension headers, payload, pad bytes) is
//! hashed as is. The ICRC itself is not hashed, and on the wire it is the
//! final CRC value stored least significant byte first ([`to_wire`]),
//! as checked against a packet captured from ConnectX hardware in the
//! tests.
//!
//! The API is incremental because the payload is usually scattered over
//! several pages: [`icrc_start`] hashes the headers, [`icrc_update`] any
//! number of further pieces, [`icrc_finish`] produces the value.

use super::wire::WireError;

/// The reflected CRC-32 polynomial.
pub const CRC32_POLY_REFLECTED: u32 = 0xedb8_8320;

/// Length of the BTH, the last header with masked bits.
const BTH_LEN: usize = 12;
/// Length of the UDP header.
const UDP_LEN: usize = 8;
/// Length of a fixed IPv6 header.
const IPV6_LEN: usize = 40;
/// IP protocol / next-header number of UDP.
const IPPROTO_UDP: u8 = 17;

/// Lookup tables for slicing by 16, built at compile time so the kernel pays
/// nothing at load and nothing here can fail. `TABLES[0]` is the classic
/// byte-at-a-time table; `TABLES[k][b]` is the register contribution of
/// byte `b` followed by `k` zero bytes, so sixteen bytes fold into the
/// register with sixteen independent lookups instead of sixteen dependent
/// ones. Sixteen rather than eight: under QEMU's TCG, where every load is
/// emulated and this is the payload pass oxe picks, a loop turn's fixed
/// cost is spread over twice the bytes, which oxe's own calibration at
/// module load shows faster (docs/history.md has the figures). The
/// tables, 16 KiB, still fit a level-1 cache.
///
/// Why oxe carries its own: the kernel's `crc32_le()` is byte-at-a-time
/// unless the kernel is built with `CONFIG_CRC_OPTIMIZATIONS` (and then it
/// is carry-less multiply only on CPUs with PCLMULQDQ), and the ICRC of
/// every payload byte is computed twice, by sender and receiver: it is the
/// largest per-byte cost of the data path.
static TABLES: [[u32; 256]; SLICES] = build_tables();

/// Bytes folded per table round.
const SLICES: usize = 16;

// Only ever evaluated at compile time (for TABLES): an out-of-range index
// or overflow here would fail the build, it cannot panic at run time.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn build_tables() -> [[u32; 256]; SLICES] {
    let mut t = [[0u32; 256]; SLICES];
    let mut i = 0usize;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ CRC32_POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1usize;
    while k < SLICES {
        let mut i = 0usize;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// Table `k`'s entry for the low byte of `x`.
#[inline(always)]
fn lookup(k: usize, x: u32) -> u32 {
    // The index is masked to 0..=255 and every table has 256 entries, and
    // callers pass a constant `k < SLICES`, so the lookup always succeeds (and
    // the compiler drops both checks).
    TABLES
        .get(k)
        .and_then(|t| t.get(usize::from(x as u8)))
        .copied()
        .unwrap_or(0)
}

/// Feeds one byte into a running CRC register.
#[inline(always)]
fn step(crc: u32, byte: u8) -> u32 {
    (crc >> 8) ^ lookup(0, crc ^ u32::from(byte))
}

/// The register contribution of eight bytes (a little-endian word) followed
/// by `zeros` zero bytes: tables `zeros + 7` down to `zeros`, one per byte.
#[inline(always)]
fn fold8(word: u64, zeros: usize) -> u32 {
    let lo = word as u32;
    let hi = (word >> 32) as u32;
    // Callers pass 0 or 8: the sums are small constants once inlined.
    let t = |k: usize| zeros.wrapping_add(k);
    lookup(t(7), lo)
        ^ lookup(t(6), lo >> 8)
        ^ lookup(t(5), lo >> 16)
        ^ lookup(t(4), lo >> 24)
        ^ lookup(t(3), hi)
        ^ lookup(t(2), hi >> 8)
        ^ lookup(t(1), hi >> 16)
        ^ lookup(zeros, hi >> 24)
}

/// Feeds sixteen bytes (two little-endian words, as loaded) into a running
/// register.
#[inline(always)]
fn step16(crc: u32, first: u64, second: u64) -> u32 {
    fold8(first ^ u64::from(crc), 8) ^ fold8(second, 0)
}

/// Feeds eight bytes (little-endian, as loaded) into a running register.
#[inline(always)]
fn step8(crc: u32, word: u64) -> u32 {
    fold8(word ^ u64::from(crc), 0)
}

/// Feeds `bytes` into a running CRC register and returns the new register.
///
/// The register is the raw CRC state (no final inversion), so calls can be
/// chained over a packet's pieces in order. This is the same contract as
/// the kernel's `crc32_le()`, so the two may be mixed freely.
pub fn icrc_update(crc: u32, bytes: &[u8]) -> u32 {
    let pairs = bytes.chunks_exact(16);
    let rest = pairs.remainder();
    let crc = pairs.fold(crc, |c, p| {
        let (first, second) = p.split_at(8);
        step16(c, le_word(first), le_word(second))
    });
    let words = rest.chunks_exact(8);
    let tail = words.remainder();
    let crc = words.fold(crc, |c, w| step8(c, le_word(w)));
    tail.iter().fold(crc, |c, &b| step(c, b))
}

/// The register after the all-ones preset and the eight 0xff bytes of the
/// pseudo-LRH; every RoCE v2 ICRC starts here. Computed bit by bit at
/// compile time, independently of the table.
pub const ICRC_SEED: u32 = {
    let mut crc = !0u32;
    let mut i = 0;
    while i < 8 * 8 {
        // Each 0xff byte contributes a one bit at every step.
        crc = if (crc ^ 1) & 1 != 0 {
            (crc >> 1) ^ CRC32_POLY_REFLECTED
        } else {
            crc >> 1
        };
        i += 1;
    }
    crc
};

/// Hashes the IP, UDP and BTH headers at the start of `packet` with their
/// variant fields masked, then every remaining byte of `packet` as is.
///
/// `packet` starts at the IP header (v4 or v6, told apart by the version
/// nibble) and may stop anywhere after the BTH; the rest of the packet is
/// then fed with [`icrc_update`]. It must not include the ICRC itself.
/// IPv4 options, if any, are hashed unmasked; IPv6 must carry UDP directly
/// (RoCE v2 does not use extension headers).
pub fn icrc_start(packet: &[u8]) -> Result<u32, WireError> {
    let first = *packet.first().ok_or(WireError::Truncated {
        needed: 1,
        available: 0,
    })?;
    let version = first >> 4;
    let ip_len = match version {
        4 => {
            let ihl = first & 0x0f;
            if ihl < 5 {
                return Err(WireError::BadIpHeaderLength(ihl));
            }
            // ihl <= 15, so this is at most 60.
            usize::from(ihl).wrapping_mul(4)
        }
        6 => IPV6_LEN,
        v => return Err(WireError::BadIpVersion(v)),
    };
    // At most 60 + 8 + 12.
    let needed = ip_len.wrapping_add(UDP_LEN + BTH_LEN);
    let truncated = WireError::Truncated {
        needed,
        available: packet.len(),
    };
    let (head, rest) = packet.split_at_checked(needed).ok_or(truncated)?;

    // The protocol (v4 byte 9) or next header (v6 byte 6) must be UDP.
    let proto_at = if version == 4 { 9 } else { 6 };
    let proto = head.get(proto_at).copied().unwrap_or(0);
    if proto != IPPROTO_UDP {
        return Err(WireError::NotUdp(proto));
    }

    // The headers are hashed a word at a time with their variant fields
    // ORed to ones from a mask built at compile time: a copy of the
    // headers and a pass setting each field cost, under emulation, about
    // as much as the hashing itself.
    let mask = if version == 4 {
        MASKS_V4.get(ip_len.wrapping_sub(20) / 4)
    } else {
        Some(&MASK_V6)
    };
    let mask = mask.ok_or(WireError::BadIpHeaderLength(first & 0x0f))?;
    let words = head.chunks_exact(8);
    let tail = words.remainder();
    let mut masks = mask.chunks_exact(8);
    let mut crc = ICRC_SEED;
    for w in words {
        let m = masks.next().map_or(0, le_word);
        crc = step8(crc, le_word(w) | m);
    }
    let rest_mask = masks.next().unwrap_or(&[]);
    for (i, &b) in tail.iter().enumerate() {
        crc = step(crc, b | rest_mask.get(i).copied().unwrap_or(0));
    }
    Ok(icrc_update(crc, rest))
}

/// An 8-byte chunk as a little-endian word (0 for a shorter slice, which
/// `chunks_exact(8)` never yields).
#[inline(always)]
fn le_word(b: &[u8]) -> u64 {
    b.try_into().map_or(0, u64::from_le_bytes)
}

/// The bytes ORed into an IP (`ip_len` bytes), UDP and BTH header run
/// before it is hashed: ones over every field IBTA A17.4.2 masks.
// Only ever evaluated at compile time: an out-of-range index fails the build.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn header_mask(ip_len: usize, v6: bool) -> [u8; MAX_MASKED] {
    let mut m = [0u8; MAX_MASKED];
    if v6 {
        // The traffic class's top nibble shares byte 0 with the version;
        // bytes 1..=3 hold the rest of it and the flow label; byte 7 is
        // the hop limit.
        m[0] = 0x0f;
        m[1] = 0xff;
        m[2] = 0xff;
        m[3] = 0xff;
        m[7] = 0xff;
    } else {
        // TOS, TTL, header checksum.
        m[1] = 0xff;
        m[8] = 0xff;
        m[10] = 0xff;
        m[11] = 0xff;
    }
    // The UDP checksum; the BTH's resv8a byte (FECN, BECN, resv6).
    m[ip_len + 6] = 0xff;
    m[ip_len + 7] = 0xff;
    m[ip_len + UDP_LEN + 4] = 0xff;
    m
}

/// [`header_mask`] for each IPv4 header length, 20 to 60 bytes.
static MASKS_V4: [[u8; MAX_MASKED]; 11] = v4_masks();

// Compile time only, as `header_mask`.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn v4_masks() -> [[u8; MAX_MASKED]; 11] {
    let mut t = [[0u8; MAX_MASKED]; 11];
    let mut i = 0;
    while i < 11 {
        t[i] = header_mask(20 + 4 * i, false);
        i += 1;
    }
    t
}

/// [`header_mask`] for IPv6.
static MASK_V6: [u8; MAX_MASKED] = header_mask(IPV6_LEN, true);

/// The longest header run [`icrc_start`] masks: IPv4 with options (60
/// bytes; IPv6 is 40), UDP and the BTH.
const MAX_MASKED: usize = 60 + UDP_LEN + BTH_LEN;

/// Turns a running register into the ICRC value.
pub const fn icrc_finish(crc: u32) -> u32 {
    !crc
}

/// The ICRC of a whole packet, from the IP header to the end of the pad
/// bytes (ICRC excluded), when it is all in one buffer.
pub fn icrc(packet: &[u8]) -> Result<u32, WireError> {
    icrc_start(packet).map(icrc_finish)
}

/// The four bytes that carry `icrc` on the wire.
///
/// The CRC register is shifted out least significant bit first, so its low
/// byte goes first; this is the byte order hardware produces and what
/// rdma_rxe writes on little-endian hosts.
pub const fn to_wire(icrc: u32) -> [u8; 4] {
    icrc.to_le_bytes()
}

/// Reads the ICRC value from its four wire bytes.
pub const fn from_wire(bytes: [u8; 4]) -> u32 {
    u32::from_le_bytes(bytes)
}

/// Checks a received packet whose last four bytes are the ICRC.
///
/// `Ok(false)` for a mismatch (a corrupt packet, to be dropped silently);
/// `Err` only when the packet cannot even be parsed far enough.
pub fn verify(packet_with_icrc: &[u8]) -> Result<bool, WireError> {
    let Some((body, tail)) = packet_with_icrc.split_last_chunk::<4>() else {
        return Err(WireError::Truncated {
            needed: 4,
            available: packet_with_icrc.len(),
        });
    };
    Ok(icrc(body)? == from_wire(*tail))
}

#[cfg(test)]
mod tests {
    use super::{
        from_wire, icrc, icrc_finish, icrc_start, icrc_update, to_wire, verify, WireError,
        ICRC_SEED,
    };
    use std::vec::Vec;

    /// Slow reference CRC-32, bit by bit, with no table: an implementation
    /// independent of the one under test.
    fn crc32_bitwise(data: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for &b in data {
            crc ^= b as u32;
            for _ in 0..8 {
                let lsb = crc & 1;
                crc >>= 1;
                if lsb != 0 {
                    crc ^= 0xedb8_8320;
                }
            }
        }
        !crc
    }

    /// Reference ICRC: copy the packet, overwrite the variant fields by
    /// name, prepend the pseudo-LRH, run the bitwise CRC.
    fn reference_icrc(packet: &[u8]) -> u32 {
        let mut p = packet.to_vec();
        let ip_len = if p[0] >> 4 == 4 {
            let ihl = (p[0] & 0xf) as usize * 4;
            p[1] = 0xff; // TOS
            p[8] = 0xff; // TTL
            p[10] = 0xff; // checksum
            p[11] = 0xff;
            ihl
        } else {
            p[0] |= 0x0f; // traffic class (high nibble)
            p[1] = 0xff; // traffic class (low nibble) + flow label
            p[2] = 0xff;
            p[3] = 0xff;
            p[7] = 0xff; // hop limit
            40
        };
        p[ip_len + 6] = 0xff; // UDP checksum
        p[ip_len + 7] = 0xff;
        p[ip_len + 8 + 4] = 0xff; // BTH FECN/BECN/resv6
        let mut all = Vec::from([0xffu8; 8]);
        all.extend_from_slice(&p);
        crc32_bitwise(&all)
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|c| c.is_ascii_hexdigit()).collect();
        s.chunks(2)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect()
    }

    /// A RoCE v2 CNP captured from a Mellanox ConnectX-4 Lx (published as a
    /// test vector with scapy's RoCE layer), IP header onward, ICRC last.
    fn cnp_capture() -> Vec<u8> {
        hex("45c2 003c 718c 4000 4011 9161 0a00 1101 0a00 1201
             0000 12b7 0028 0000
             8100 ffff 4000 0118 0000 0000
             0000 0000 0000 0000 0000 0000 0000 0000
             82fd 002a")
    }

    use super::super::test_rng::XorShift;

    #[test]
    fn table_crc_matches_standard_check_value() {
        // The CRC-32 check value: CRC of "123456789" is 0xCBF43926.
        assert_eq!(icrc_finish(icrc_update(!0, b"123456789")), 0xcbf4_3926);
        assert_eq!(crc32_bitwise(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn seed_is_crc_of_pseudo_lrh() {
        assert_eq!(ICRC_SEED, icrc_update(!0, &[0xff; 8]));
        // The value rdma_rxe hard-codes for the same thing.
        assert_eq!(ICRC_SEED, 0xdebb_20e3);
    }

    #[test]
    fn hardware_captured_cnp() {
        let pkt = cnp_capture();
        let (body, tail) = pkt.split_at(pkt.len() - 4);
        let value = icrc(body).unwrap();
        assert_eq!(to_wire(value), [0x82, 0xfd, 0x00, 0x2a]);
        assert_eq!(value, reference_icrc(body));
        assert_eq!(from_wire([tail[0], tail[1], tail[2], tail[3]]), value);
        assert_eq!(verify(&pkt), Ok(true));
    }

    #[test]
    fn masked_fields_do_not_matter_and_others_do() {
        let pkt = cnp_capture();
        let body = &pkt[..pkt.len() - 4];
        let base = icrc(body).unwrap();
        // TOS, TTL, IP checksum, UDP checksum, BTH byte 4.
        for pos in [1usize, 8, 10, 11, 20 + 6, 20 + 7, 28 + 4] {
            let mut m = body.to_vec();
            m[pos] ^= 0x5a;
            assert_eq!(icrc(&m).unwrap(), base, "masked byte {pos}");
        }
        // Every other byte changes the ICRC.
        for pos in 0..body.len() {
            if [1usize, 8, 10, 11, 26, 27, 32].contains(&pos) {
                continue;
            }
            let mut m = body.to_vec();
            m[pos] ^= 0x01;
            if let Ok(v) = icrc(&m) {
                assert_ne!(v, base, "byte {pos} not covered");
            }
        }
    }

    fn random_packet(rng: &mut XorShift, v6: bool) -> Vec<u8> {
        let payload_len = (rng.next() % 64) as usize * 4;
        let mut p = Vec::new();
        if v6 {
            p.push(0x60 | (rng.next() as u8 & 0x0f));
            p.extend((0..5).map(|_| rng.next() as u8));
            p.push(17);
            p.push(rng.next() as u8);
            p.extend((0..32).map(|_| rng.next() as u8));
        } else {
            p.push(0x45);
            p.extend((0..8).map(|_| rng.next() as u8));
            p.push(17);
            p.extend((0..10).map(|_| rng.next() as u8));
        }
        p.extend((0..8 + 12 + payload_len).map(|_| rng.next() as u8));
        p
    }

    #[test]
    fn random_packets_match_reference() {
        let mut rng = XorShift(0x0bad_c0de_dead_beef);
        for i in 0..500 {
            let p = random_packet(&mut rng, i % 2 == 1);
            assert_eq!(icrc(&p).unwrap(), reference_icrc(&p), "packet {i}");
        }
    }

    #[test]
    fn sliced_crc_matches_bitwise_at_every_length_and_offset() {
        let mut rng = XorShift(0x51ce);
        let data: Vec<u8> = (0..300).map(|_| rng.next() as u8).collect();
        for start in 0..9 {
            for end in start..data.len() {
                let piece = &data[start..end];
                assert_eq!(
                    icrc_finish(icrc_update(!0, piece)),
                    crc32_bitwise(piece),
                    "bytes {start}..{end}"
                );
            }
        }
    }

    #[test]
    fn incremental_equals_one_shot() {
        let mut rng = XorShift(77);
        for i in 0..200 {
            let p = random_packet(&mut rng, i % 2 == 0);
            let hdr = if p[0] >> 4 == 4 { 40 } else { 60 };
            let split = hdr + (rng.next() as usize % (p.len() - hdr + 1));
            let mut crc = icrc_start(&p[..split]).unwrap();
            // Feed the rest in random-sized pieces.
            let mut at = split;
            while at < p.len() {
                let n = 1 + rng.next() as usize % 17;
                let end = (at + n).min(p.len());
                crc = icrc_update(crc, &p[at..end]);
                at = end;
            }
            assert_eq!(icrc_finish(crc), icrc(&p).unwrap());
        }
    }

    #[test]
    fn ipv4_options_are_hashed() {
        let mut rng = XorShift(5);
        let mut p = random_packet(&mut rng, false);
        // Grow the header to 6 words with a 4-byte option.
        p[0] = 0x46;
        p.splice(20..20, [1u8, 1, 1, 1]);
        assert_eq!(icrc(&p).unwrap(), reference_icrc(&p));
    }

    #[test]
    fn malformed_headers_rejected() {
        assert_eq!(
            icrc(&[]),
            Err(WireError::Truncated {
                needed: 1,
                available: 0
            })
        );
        let pkt = cnp_capture();
        assert_eq!(
            icrc(&pkt[..39]),
            Err(WireError::Truncated {
                needed: 40,
                available: 39
            })
        );
        let mut bad = pkt.clone();
        bad[0] = 0x55;
        assert_eq!(icrc(&bad), Err(WireError::BadIpVersion(5)));
        bad[0] = 0x44;
        assert_eq!(icrc(&bad), Err(WireError::BadIpHeaderLength(4)));
        let mut tcp = pkt.clone();
        tcp[9] = 6;
        assert_eq!(icrc(&tcp), Err(WireError::NotUdp(6)));
        let mut rng = XorShift(1);
        let mut v6 = random_packet(&mut rng, true);
        v6[6] = 0; // hop-by-hop options header
        assert_eq!(icrc(&v6), Err(WireError::NotUdp(0)));
        assert!(verify(&[0u8; 3]).is_err());
    }

    #[test]
    fn corrupted_packet_fails_verification() {
        let mut pkt = cnp_capture();
        let n = pkt.len();
        pkt[n - 10] ^= 1;
        assert_eq!(verify(&pkt), Ok(false));
    }
}
