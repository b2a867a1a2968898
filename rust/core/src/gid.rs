// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! RoCE v2 GIDs as IP addresses (IBTA Annex A17): an IPv6 address, or
//! an IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`). What the receive
//! path needs of them: the GID a packet was sent to, taken from its IP
//! header, and whether a GID names a multicast group.

use core::ops::Range;

/// A 16-byte GID, in network byte order.
pub type Gid = [u8; 16];

/// Bytes 0..12 of an IPv4-mapped IPv6 address.
const V4_MAPPED_PREFIX: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// The GID of IPv4 address `addr` (`::ffff:a.b.c.d`).
pub fn from_ipv4(addr: [u8; 4]) -> Gid {
    let mut g = [0u8; 16];
    let (prefix, v4) = g.split_at_mut(12);
    prefix.copy_from_slice(&V4_MAPPED_PREFIX);
    v4.copy_from_slice(&addr);
    g
}

/// The IPv4 address inside an IPv4-mapped GID; `None` for an IPv6 GID.
pub fn to_ipv4(gid: &Gid) -> Option<[u8; 4]> {
    let (prefix, v4) = gid.split_first_chunk::<12>()?;
    if *prefix != V4_MAPPED_PREFIX {
        return None;
    }
    v4.try_into().ok()
}

/// Whether `gid` is a multicast address: IPv6 `ff00::/8`, or IPv4
/// `224.0.0.0/4` mapped.
pub fn is_multicast(gid: &Gid) -> bool {
    match to_ipv4(gid) {
        Some([a, ..]) => a & 0xf0 == 0xe0,
        None => gid.first() == Some(&0xff),
    }
}

/// The Ethernet address a multicast group's frames go to, for the
/// netdev's filter: `01:00:5e` and the low 23 bits of an IPv4 group
/// (RFC 1112 6.4), `33:33` and the low 32 bits of an IPv6 one (RFC 2464 7).
pub fn multicast_mac(gid: &Gid) -> [u8; 6] {
    match to_ipv4(gid) {
        Some([_, b, c, d]) => [0x01, 0x00, 0x5e, b & 0x7f, c, d],
        None => {
            let [.., a, b, c, d] = *gid;
            [0x33, 0x33, a, b, c, d]
        }
    }
}

/// The modified EUI-64 of a 48-bit MAC (RFC 4291 appendix A): `ff:fe`
/// in the middle and the universal/local bit flipped. A RoCE device's node
/// GUID, as every RoCE driver derives it from its netdev.
pub fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    let [a, b, c, d, e, f] = mac;
    [a ^ 0x02, b, c, 0xff, 0xfe, d, e, f]
}

/// Where a packet's source and destination addresses lie in its IP header
/// (IPv4 or IPv6, by the version nibble); `None` for neither version.
fn address_fields(ip: &[u8]) -> Option<(Range<usize>, Range<usize>)> {
    match ip.first()? >> 4 {
        4 => Some((12..16, 16..20)),
        6 => Some((8..24, 24..40)),
        _ => None,
    }
}

/// The GID an address field holds: IPv4-mapped for a 4-byte one.
fn gid_of(field: &[u8]) -> Option<Gid> {
    match field.first_chunk::<4>() {
        Some(v4) if field.len() == 4 => Some(from_ipv4(*v4)),
        _ => field.try_into().ok(),
    }
}

/// Whether an address field holds `gid`, compared in place.
fn holds(field: &[u8], gid: &Gid) -> bool {
    if field.len() == 4 {
        to_ipv4(gid).is_some_and(|v4| v4 == *field)
    } else {
        *gid == *field
    }
}

/// The destination GID of a packet, from its IP header (IPv4 or IPv6, by
/// the version nibble); `None` if the header is too short or of neither
/// version.
pub fn destination(ip: &[u8]) -> Option<Gid> {
    let (_, dst) = address_fields(ip)?;
    gid_of(ip.get(dst)?)
}

/// The source GID of a packet, from its IP header, as [`destination`]
/// reads the destination: what a connected QP compares with its path.
pub fn source(ip: &[u8]) -> Option<Gid> {
    let (src, _) = address_fields(ip)?;
    gid_of(ip.get(src)?)
}

/// Whether a packet's IP header has `src` for its source and `dst` for its
/// destination: [`source`] and [`destination`] compared in place, as a
/// connected QP checks every packet it receives against its path.
pub fn addressed(ip: &[u8], src: &Gid, dst: &Gid) -> bool {
    let Some((s, d)) = address_fields(ip) else {
        return false;
    };
    match (ip.get(s), ip.get(d)) {
        (Some(s), Some(d)) => holds(s, src) && holds(d, dst),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{
        addressed, destination, eui64_from_mac, from_ipv4, is_multicast, multicast_mac, source,
        to_ipv4, Gid,
    };

    #[test]
    fn multicast_macs() {
        // 239.129.2.3: the top bit of the second byte is dropped.
        assert_eq!(
            multicast_mac(&from_ipv4([239, 129, 2, 3])),
            [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]
        );
        let mut g = [0u8; 16];
        g[0] = 0xff;
        g[1] = 0x12;
        g[12..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(multicast_mac(&g), [0x33, 0x33, 0xde, 0xad, 0xbe, 0xef]);
    }

    fn v6(s: [u16; 8]) -> Gid {
        let mut g = [0u8; 16];
        for (i, w) in s.iter().enumerate() {
            g[2 * i..2 * i + 2].copy_from_slice(&w.to_be_bytes());
        }
        g
    }

    #[test]
    fn ipv4_mapping_round_trips() {
        let g = from_ipv4([230, 0, 2, 15]);
        assert_eq!(g, v6([0, 0, 0, 0, 0, 0xffff, 0xe600, 0x020f]));
        assert_eq!(to_ipv4(&g), Some([230, 0, 2, 15]));
        assert_eq!(to_ipv4(&v6([0xfe80, 0, 0, 0, 0, 0, 0, 1])), None);
        // ::a.b.c.d (IPv4-compatible, deprecated) is not the mapped form.
        assert_eq!(to_ipv4(&v6([0, 0, 0, 0, 0, 0, 0xe600, 1])), None);
    }

    #[test]
    fn multicast_is_class_d_or_ff00() {
        for a in [224u8, 230, 239] {
            assert!(is_multicast(&from_ipv4([a, 1, 2, 3])), "{a}");
        }
        for a in [10u8, 127, 223, 240, 255] {
            assert!(!is_multicast(&from_ipv4([a, 1, 2, 3])), "{a}");
        }
        assert!(is_multicast(&v6([0xff02, 0, 0, 0, 0, 0, 0, 1])));
        assert!(is_multicast(&v6([0xff0e, 0, 0, 0, 0, 0, 0, 0x101])));
        assert!(!is_multicast(&v6([0xfe80, 0, 0, 0, 0, 0, 0, 1])));
        assert!(!is_multicast(&v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1])));
        assert!(!is_multicast(&[0; 16]));
    }

    #[test]
    fn destination_of_ip_headers() {
        let mut h4 = [0u8; 20];
        h4[0] = 0x45;
        h4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        h4[16..20].copy_from_slice(&[230, 0, 0, 1]);
        assert_eq!(destination(&h4), Some(from_ipv4([230, 0, 0, 1])));
        assert_eq!(destination(&h4[..19]), None);

        let mut h6 = [0u8; 40];
        h6[0] = 0x60;
        let d = v6([0xff12, 0, 0, 0, 0, 0, 0, 7]);
        h6[24..40].copy_from_slice(&d);
        assert_eq!(destination(&h6), Some(d));
        assert_eq!(destination(&h6[..39]), None);

        h6[0] = 0x50;
        assert_eq!(destination(&h6), None);
        assert_eq!(destination(&[]), None);
    }

    #[test]
    fn eui64_of_macs() {
        let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
        assert_eq!(
            eui64_from_mac(mac),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
        // A locally administered address has the bit set, the GUID clear.
        assert_eq!(eui64_from_mac([0x02, 0, 0, 0, 0, 1])[0], 0);
    }

    #[test]
    fn source_of_ip_headers() {
        let mut h4 = [0u8; 20];
        h4[0] = 0x45;
        h4[12..16].copy_from_slice(&[10, 11, 0, 2]);
        h4[16..20].copy_from_slice(&[10, 11, 0, 1]);
        assert_eq!(source(&h4), Some(from_ipv4([10, 11, 0, 2])));
        assert_eq!(source(&h4[..15]), None);

        let mut h6 = [0u8; 40];
        h6[0] = 0x60;
        let s = v6([0xfd11, 0, 0, 0, 0, 0, 0, 2]);
        h6[8..24].copy_from_slice(&s);
        assert_eq!(source(&h6), Some(s));
        assert_eq!(source(&h6[..23]), None);
        h6[0] = 0x50;
        assert_eq!(source(&h6), None);
    }

    #[test]
    fn addressed_agrees_with_source_and_destination() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        for (i, b) in v6[8..40].iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        let gids: [Gid; 4] = [
            from_ipv4([10, 0, 0, 1]),
            from_ipv4([10, 0, 0, 2]),
            v6[8..24].try_into().unwrap(),
            v6[24..40].try_into().unwrap(),
        ];
        for ip in [
            &v4[..],
            &v6[..],
            &v4[..12],
            &v6[..30],
            &[0x55u8; 40][..],
            &[][..],
        ] {
            for a in &gids {
                for b in &gids {
                    let want = source(ip) == Some(*a) && destination(ip) == Some(*b);
                    assert_eq!(addressed(ip, a, b), want);
                }
            }
        }
        assert!(addressed(&v4, &gids[0], &gids[1]));
        assert!(addressed(&v6, &gids[2], &gids[3]));
    }
}
