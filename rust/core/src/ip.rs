// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The IP and UDP headers in front of a RoCE v2 packet's BTH (IBTA Annex
//! A17.4): IPv4 (RFC 791) or IPv6 (RFC 8200), then UDP (RFC 768) to port
//! 4791 with a zero checksum, since the ICRC covers the packet instead (a
//! packet of several segments gets a real one from UDP segmentation, which
//! needs it).
//!
//! The module writes them into the room the kernel reserved in the skb;
//! the route stays the kernel's. The IPv4 identification is 0, as the
//! kernel itself writes in a DF datagram sent without a connected socket
//! (every RoCE packet has DF set: an atomic datagram, RFC 6864).

/// UDP destination port of RoCE v2 (IBTA A17.4.1).
pub const ROCE_V2_PORT: u16 = 4791;
/// Length of an IPv4 header without options (oxe sends none).
pub const IPV4_LEN: usize = 20;
/// Length of the fixed IPv6 header (oxe sends no extension headers).
pub const IPV6_LEN: usize = 40;
/// Length of the UDP header.
pub const UDP_LEN: usize = 8;

const IPPROTO_UDP: u8 = 17;
/// The hop limit of a path that sets none (0 means "unset" in an AV).
const DEFAULT_HOP_LIMIT: u8 = 64;
/// IPv4 "Don't Fragment": RoCE packets are sized to the path MTU.
const IPV4_DF: u16 = 0x4000;

/// What the IP header of one packet says.
#[derive(Clone, Copy, Debug)]
pub struct IpHeader {
    /// Source GID: an IPv6 address, or an IPv4-mapped one
    /// (`::ffff:a.b.c.d`, the address in the last four bytes).
    pub sgid: [u8; 16],
    /// Destination GID, likewise.
    pub dgid: [u8; 16],
    /// IPv6, else IPv4 (the GIDs are then IPv4-mapped).
    pub ipv6: bool,
    /// IPv4 TOS / IPv6 traffic class.
    pub traffic_class: u8,
    /// IPv6 only; 20 bits.
    pub flow_label: u32,
    /// 0 stands for the default.
    pub hop_limit: u8,
}

impl IpHeader {
    /// The IP header's length.
    pub fn len(&self) -> usize {
        if self.ipv6 {
            IPV6_LEN
        } else {
            IPV4_LEN
        }
    }

    /// Never empty; for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn hop_limit(&self) -> u8 {
        if self.hop_limit == 0 {
            DEFAULT_HOP_LIMIT
        } else {
            self.hop_limit
        }
    }
}

/// Writes the IP and UDP headers at the start of `out`, whose whole length
/// is the packet's from the IP header on (`len()` + [`UDP_LEN`] + the UDP
/// payload). The IPv4 identification and checksum are left zero: the
/// identification stays 0 (see above), and [`set_ipv4_checksum`] goes last.
/// Returns `None` (writing nothing) if `out` is shorter than the headers or
/// longer than IP can say.
pub fn write_headers(out: &mut [u8], ip: &IpHeader, sport: u16) -> Option<()> {
    let ip_len = ip.len();
    let total = out.len();
    let udp_total = u16::try_from(total.checked_sub(ip_len)?).ok()?;
    if usize::from(udp_total) < UDP_LEN {
        return None;
    }
    let (iph, rest) = out.split_at_mut_checked(ip_len)?;
    let udp = rest.get_mut(..UDP_LEN)?;
    if ip.ipv6 {
        // Version 6, traffic class, flow label (20 bits).
        let word = (6u32 << 28) | (u32::from(ip.traffic_class) << 20) | (ip.flow_label & 0xf_ffff);
        iph.get_mut(0..4)?.copy_from_slice(&word.to_be_bytes());
        // The payload length: everything after the fixed header.
        iph.get_mut(4..6)?.copy_from_slice(&udp_total.to_be_bytes());
        *iph.get_mut(6)? = IPPROTO_UDP;
        *iph.get_mut(7)? = ip.hop_limit();
        iph.get_mut(8..24)?.copy_from_slice(&ip.sgid);
        iph.get_mut(24..40)?.copy_from_slice(&ip.dgid);
    } else {
        let total = u16::try_from(total).ok()?;
        *iph.get_mut(0)? = 0x45; // version 4, 5 words
        *iph.get_mut(1)? = ip.traffic_class;
        iph.get_mut(2..4)?.copy_from_slice(&total.to_be_bytes());
        iph.get_mut(4..6)?.fill(0); // identification: 0, DF is set (RFC 6864)
        iph.get_mut(6..8)?.copy_from_slice(&IPV4_DF.to_be_bytes());
        *iph.get_mut(8)? = ip.hop_limit();
        *iph.get_mut(9)? = IPPROTO_UDP;
        iph.get_mut(10..12)?.fill(0); // checksum: last
        iph.get_mut(12..16)?.copy_from_slice(ip.sgid.get(12..16)?);
        iph.get_mut(16..20)?.copy_from_slice(ip.dgid.get(12..16)?);
    }
    udp.get_mut(0..2)?.copy_from_slice(&sport.to_be_bytes());
    udp.get_mut(2..4)?
        .copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
    udp.get_mut(4..6)?.copy_from_slice(&udp_total.to_be_bytes());
    // No UDP checksum: IBTA A17.4.2 (the ICRC protects the packet).
    udp.get_mut(6..8)?.fill(0);
    Some(())
}

/// Fills in the checksum of the IPv4 header `iph` (RFC 791: the one's
/// complement of the one's complement sum of its 16-bit words, the
/// checksum field counted as zero).
pub fn set_ipv4_checksum(iph: &mut [u8; IPV4_LEN]) {
    iph[10] = 0;
    iph[11] = 0;
    let mut sum: u32 = 0;
    for w in iph.chunks_exact(2) {
        if let [hi, lo] = *w {
            sum = sum.wrapping_add(u32::from(u16::from_be_bytes([hi, lo])));
        }
    }
    // Ten words of 16 bits cannot carry twice past 32 bits: two folds do.
    sum = (sum & 0xffff).wrapping_add(sum >> 16);
    sum = (sum & 0xffff).wrapping_add(sum >> 16);
    let check = !(sum as u16);
    iph[10..12].copy_from_slice(&check.to_be_bytes());
}

/// Rewrites the IP and UDP headers at the start of `hdr` as UDP
/// segmentation (`SKB_GSO_UDP_L4`) writes them into one segment of a batch:
/// the lengths for a UDP datagram of `udp_len` bytes (header included) and,
/// for IPv4, the identification `id` (the segment's index: the batch's
/// first is 0). A segment's ICRC covers exactly these fields (IBTA A17.4.2 masks
/// only TOS or traffic class, TTL or hop limit, flow label and the
/// checksums), so it is computed over the header so rewritten. Returns
/// `None`, writing nothing, if `hdr` is shorter than its IP and UDP headers.
pub fn set_segment(hdr: &mut [u8], ipv6: bool, udp_len: u16, id: u16) -> Option<()> {
    // Where the UDP length is, and where the UDP header ends: sums of
    // small constants.
    let (udp_at, end) = if ipv6 {
        (IPV6_LEN + 4, IPV6_LEN + UDP_LEN)
    } else {
        (IPV4_LEN + 4, IPV4_LEN + UDP_LEN)
    };
    if hdr.len() < end {
        return None;
    }
    if ipv6 {
        hdr.get_mut(4..6)?.copy_from_slice(&udp_len.to_be_bytes());
    } else {
        let total = udp_len.checked_add(IPV4_LEN as u16)?;
        hdr.get_mut(2..4)?.copy_from_slice(&total.to_be_bytes());
        hdr.get_mut(4..6)?.copy_from_slice(&id.to_be_bytes());
    }
    hdr.get_mut(udp_at..udp_at.wrapping_add(2))?
        .copy_from_slice(&udp_len.to_be_bytes());
    Some(())
}

/// The identification of the IPv4 header at the start of `hdr`.
pub fn ipv4_id(hdr: &[u8]) -> Option<u16> {
    let id = hdr.get(4..6)?;
    Some(u16::from_be_bytes([*id.first()?, *id.get(1)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    #[test]
    fn ipv4_checksum_matches_a_known_header() {
        // A header whose checksum is known (0xb861).
        let mut h: [u8; 20] = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xaa, 0xbb, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        set_ipv4_checksum(&mut h);
        assert_eq!(&h[10..12], &[0xb8, 0x61]);
        // A correct header sums to all ones.
        let mut sum = 0u32;
        for w in h.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff);
    }

    /// 10.0.0.1 to 10.0.0.2 with traffic class `tc`.
    fn path_v4(tc: u8) -> IpHeader {
        IpHeader {
            sgid: v4([10, 0, 0, 1]),
            dgid: v4([10, 0, 0, 2]),
            ipv6: false,
            traffic_class: tc,
            flow_label: 0,
            hop_limit: 0,
        }
    }

    #[test]
    fn ipv4_and_udp_headers() {
        let ip = path_v4(0x20);
        let mut pkt = [0xeeu8; 20 + 8 + 32];
        write_headers(&mut pkt, &ip, 0xc001).unwrap();
        assert_eq!(
            &pkt[..20],
            &[0x45, 0x20, 0, 60, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]
        );
        assert_eq!(&pkt[20..28], &[0xc0, 0x01, 0x12, 0xb7, 0, 40, 0, 0]);
        // The payload is left alone.
        assert!(pkt[28..].iter().all(|&b| b == 0xee));
    }

    #[test]
    fn ipv6_header() {
        let mut s = [0u8; 16];
        s[0] = 0xfe;
        s[1] = 0x80;
        s[15] = 1;
        let mut d = s;
        d[15] = 2;
        let ip = IpHeader {
            sgid: s,
            dgid: d,
            ipv6: true,
            traffic_class: 0xa5,
            // Bits above the 20 of a flow label do not reach the class.
            flow_label: 0x00f0_1234,
            hop_limit: 7,
        };
        let mut pkt = [0u8; 40 + 8 + 16];
        write_headers(&mut pkt, &ip, 1000).unwrap();
        assert_eq!(&pkt[..8], &[0x6a, 0x50, 0x12, 0x34, 0, 24, 17, 7]);
        assert_eq!(&pkt[8..24], &s);
        assert_eq!(&pkt[24..40], &d);
        assert_eq!(&pkt[40..48], &[0x03, 0xe8, 0x12, 0xb7, 0, 24, 0, 0]);
    }

    #[test]
    fn short_or_oversized_buffers_are_refused() {
        let ip = IpHeader {
            sgid: v4([1, 2, 3, 4]),
            dgid: v4([5, 6, 7, 8]),
            ipv6: false,
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 1,
        };
        let mut short = [0u8; 27];
        assert!(write_headers(&mut short, &ip, 1).is_none());
        assert!(short.iter().all(|&b| b == 0));
        let mut huge = vec![0u8; 70_000];
        assert!(write_headers(&mut huge, &ip, 1).is_none());
    }

    #[test]
    fn segment_headers_as_segmentation_writes_them() {
        let ip = path_v4(0);
        let mut batch = [0u8; 28 + 3 * 100];
        write_headers(&mut batch, &ip, 0xc000).unwrap();
        batch[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        let mut seg = [0u8; 28];
        seg.copy_from_slice(&batch[..28]);
        let id = ipv4_id(&seg).unwrap().wrapping_add(2);
        set_segment(&mut seg, false, 8 + 100, id).unwrap();
        assert_eq!(u16::from_be_bytes([seg[2], seg[3]]), 20 + 8 + 100);
        // The identification wraps as the kernel's 16-bit counter does.
        assert_eq!(u16::from_be_bytes([seg[4], seg[5]]), 0);
        assert_eq!(u16::from_be_bytes([seg[24], seg[25]]), 108);
        // Everything else is the batch's.
        assert_eq!(seg[..2], batch[..2]);
        assert_eq!(seg[6..24], batch[6..24]);
        assert_eq!(seg[26..28], batch[26..28]);
        let mut v6 = [0u8; 48];
        v6[0] = 0x60;
        set_segment(&mut v6, true, 1000, 7).unwrap();
        assert_eq!(u16::from_be_bytes([v6[4], v6[5]]), 1000);
        assert_eq!(u16::from_be_bytes([v6[44], v6[45]]), 1000);
        assert!(set_segment(&mut [0u8; 27], false, 8, 0).is_none());
    }
}
