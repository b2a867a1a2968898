// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The port's Performance Management Agent: answers to PerfMgmt class
//! MADs (IBTA chapter 16.1), as ib_core asks them through `process_mad` to
//! fill `/sys/class/infiniband/<dev>/ports/<n>/counters/`, and as a remote
//! performance manager may ask them over QP1.
//!
//! Three attributes are answered, all with Get: ClassPortInfo (whose
//! capability mask says the extended, 64-bit counters exist), PortCounters
//! (the 8-, 16- and 32-bit originals, which stop at all ones instead of
//! wrapping, IBTA 16.1.3.5) and PortCountersExt. Data counters count
//! 4-byte words, as IBTA defines PortXmitData and PortRcvData.
//!
//! A MAD is 256 bytes: a 24-byte common header, then the class's own
//! layout; for PerfMgmt, 40 reserved bytes and the attribute at byte 64.

/// Bytes in a MAD (IB base version 1).
pub const MAD_LEN: usize = 256;

/// Management class of Performance Management MADs.
pub const CLASS_PERF_MGMT: u8 = 0x04;
/// The PerfMgmt class version this agent speaks.
const CLASS_VERSION: u8 = 1;
/// Method Get, and its response.
const METHOD_GET: u8 = 0x01;
const METHOD_GET_RESP: u8 = 0x81;
/// Method Set (counters are never cleared by a manager here).
const METHOD_SET: u8 = 0x02;
/// The bit that marks a response method: never answered.
const METHOD_RESPONSE: u8 = 0x80;

/// Attribute ids.
const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
const ATTR_PORT_COUNTERS: u16 = 0x0012;
const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;

/// MAD status codes (the common header's status field, IBTA 13.4.7).
pub mod status {
    /// The class version is not supported.
    pub const BAD_VERSION: u16 = 0x0004;
    /// The method is not supported by this class.
    pub const UNSUPPORTED_METHOD: u16 = 0x0008;
    /// The method/attribute combination is not supported.
    pub const UNSUPPORTED_METHOD_ATTR: u16 = 0x000c;
    /// A field of the attribute (here: PortSelect) holds an invalid value.
    pub const INVALID_FIELD: u16 = 0x001c;
}

/// ClassPortInfo capability bit: PortCountersExt is implemented with all
/// of its counters (IBTA 16.1.2, bit 9).
pub const CAP_EXT_WIDTH: u16 = 1 << 9;

// Byte offsets in the MAD.
const HDR_MGMT_CLASS: usize = 1;
const HDR_CLASS_VERSION: usize = 2;
const HDR_METHOD: usize = 3;
const HDR_STATUS: usize = 4;
const HDR_ATTR_ID: usize = 16;
const HDR_LEN: usize = 24;
/// Where a PerfMgmt attribute starts.
const DATA: usize = 64;
/// PortSelect and CounterSelect, at the start of both counter attributes.
const PORT_SELECT: usize = DATA + 1;
const COUNTER_SELECT: usize = DATA + 2;

/// What a port has counted since its device was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// RoCE packet bytes sent (BTH through ICRC).
    pub xmit_bytes: u64,
    /// RoCE packet bytes received intact.
    pub rcv_bytes: u64,
    /// Packets sent.
    pub xmit_packets: u64,
    /// Packets received intact.
    pub rcv_packets: u64,
    /// Of the packets sent, those to a multicast group.
    pub multicast_xmit_packets: u64,
    /// Of the packets received, those to a multicast group.
    pub multicast_rcv_packets: u64,
    /// Times the port went from active to down.
    pub link_downed: u64,
}

/// What to do with a MAD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The response is in the output buffer; send it back.
    Reply,
    /// Not a PerfMgmt request: for ib_core's MAD layer and its agents
    /// (the connection manager's MADs come through here too). The output
    /// buffer is untouched.
    NotMine,
}

/// Answers `req`, a MAD received on port `port`, into `resp`.
pub fn answer(
    req: &[u8; MAD_LEN],
    resp: &mut [u8; MAD_LEN],
    port: u8,
    counts: &PortCounts,
) -> Answer {
    let (class, version, method) = (req[HDR_MGMT_CLASS], req[HDR_CLASS_VERSION], req[HDR_METHOD]);
    if class != CLASS_PERF_MGMT || method & METHOD_RESPONSE != 0 {
        return Answer::NotMine;
    }
    // The response carries the request's header (TID included) with the
    // response method and a status; the attribute part is built afresh.
    resp.fill(0);
    if let Some(hdr) = req.first_chunk::<HDR_LEN>() {
        put(resp, 0, hdr);
    }
    put_u8(resp, HDR_METHOD, METHOD_GET_RESP);
    let st = if version != CLASS_VERSION {
        status::BAD_VERSION
    } else {
        match method {
            METHOD_GET => get(req, resp, port, counts),
            METHOD_SET => status::UNSUPPORTED_METHOD_ATTR,
            _ => status::UNSUPPORTED_METHOD,
        }
    };
    put_u16(resp, HDR_STATUS, st);
    Answer::Reply
}

/// A Get: fills the attribute, returns the status.
fn get(req: &[u8; MAD_LEN], resp: &mut [u8; MAD_LEN], port: u8, c: &PortCounts) -> u16 {
    let attr = u16::from_be_bytes([req[HDR_ATTR_ID], req[HDR_ATTR_ID + 1]]);
    match attr {
        ATTR_CLASS_PORT_INFO => {
            put_u8(resp, DATA, 1); // BaseVersion
            put_u8(resp, DATA + 1, CLASS_VERSION);
            put_u16(resp, DATA + 2, CAP_EXT_WIDTH);
            0
        }
        ATTR_PORT_COUNTERS | ATTR_PORT_COUNTERS_EXT => {
            // Both attributes start with PortSelect and CounterSelect,
            // echoed back. This port has no AllPortSelect.
            put_u8(resp, PORT_SELECT, req[PORT_SELECT]);
            put_u8(resp, COUNTER_SELECT, req[COUNTER_SELECT]);
            put_u8(resp, COUNTER_SELECT + 1, req[COUNTER_SELECT + 1]);
            if req[PORT_SELECT] != port {
                return status::INVALID_FIELD;
            }
            if attr == ATTR_PORT_COUNTERS {
                port_counters(resp, c);
            } else {
                port_counters_ext(resp, c);
            }
            0
        }
        _ => status::UNSUPPORTED_METHOD_ATTR,
    }
}

/// PortCounters: narrow counters that stop at all ones.
fn port_counters(resp: &mut [u8; MAD_LEN], c: &PortCounts) {
    let sat32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    put_u8(
        resp,
        DATA + 7,
        u8::try_from(c.link_downed).unwrap_or(u8::MAX),
    );
    put_u32(resp, DATA + 24, sat32(c.xmit_bytes / 4));
    put_u32(resp, DATA + 28, sat32(c.rcv_bytes / 4));
    put_u32(resp, DATA + 32, sat32(c.xmit_packets));
    put_u32(resp, DATA + 36, sat32(c.rcv_packets));
}

/// PortCountersExt: the 64-bit data and packet counters.
fn port_counters_ext(resp: &mut [u8; MAD_LEN], c: &PortCounts) {
    let fields = [
        c.xmit_bytes / 4,
        c.rcv_bytes / 4,
        c.xmit_packets,
        c.rcv_packets,
        c.xmit_packets.saturating_sub(c.multicast_xmit_packets),
        c.rcv_packets.saturating_sub(c.multicast_rcv_packets),
        c.multicast_xmit_packets,
        c.multicast_rcv_packets,
    ];
    for (at, v) in (DATA + 8..MAD_LEN).step_by(8).zip(fields) {
        put_u64(resp, at, v);
    }
}

fn put(resp: &mut [u8; MAD_LEN], at: usize, bytes: &[u8]) {
    if let Some(dst) = at
        .checked_add(bytes.len())
        .and_then(|end| resp.get_mut(at..end))
    {
        dst.copy_from_slice(bytes);
    }
}

fn put_u8(resp: &mut [u8; MAD_LEN], at: usize, v: u8) {
    put(resp, at, &[v]);
}

fn put_u16(resp: &mut [u8; MAD_LEN], at: usize, v: u16) {
    put(resp, at, &v.to_be_bytes());
}

fn put_u32(resp: &mut [u8; MAD_LEN], at: usize, v: u32) {
    put(resp, at, &v.to_be_bytes());
}

fn put_u64(resp: &mut [u8; MAD_LEN], at: usize, v: u64) {
    put(resp, at, &v.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::wire::be64;
    use super::*;

    /// A 64-bit counter of a PortCountersExt response, by its index in the
    /// attribute (0 = PortXmitData).
    fn ext_counter(resp: &[u8; MAD_LEN], index: usize) -> Option<u64> {
        let at = DATA.checked_add(8)?.checked_add(index.checked_mul(8)?)?;
        let b = resp.get(at..at.checked_add(8)?)?;
        Some(be64(b.try_into().ok()?))
    }

    fn request(method: u8, attr: u16, port_select: u8) -> [u8; MAD_LEN] {
        let mut m = [0u8; MAD_LEN];
        m[0] = 1;
        m[HDR_MGMT_CLASS] = CLASS_PERF_MGMT;
        m[HDR_CLASS_VERSION] = 1;
        m[HDR_METHOD] = method;
        m[8..16].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        m[HDR_ATTR_ID..HDR_ATTR_ID + 2].copy_from_slice(&attr.to_be_bytes());
        m[PORT_SELECT] = port_select;
        m[COUNTER_SELECT] = 0xab;
        m
    }

    fn ask(req: &[u8; MAD_LEN], c: &PortCounts) -> (Answer, [u8; MAD_LEN]) {
        let mut resp = [0x5a; MAD_LEN];
        let a = answer(req, &mut resp, 1, c);
        (a, resp)
    }

    fn status_of(resp: &[u8; MAD_LEN]) -> u16 {
        u16::from_be_bytes([resp[HDR_STATUS], resp[HDR_STATUS + 1]])
    }

    fn be32_at(resp: &[u8; MAD_LEN], at: usize) -> u32 {
        u32::from_be_bytes(resp[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn class_port_info_advertises_extended_counters() {
        let (a, r) = ask(
            &request(METHOD_GET, ATTR_CLASS_PORT_INFO, 0),
            &PortCounts::default(),
        );
        assert_eq!(a, Answer::Reply);
        assert_eq!(status_of(&r), 0);
        assert_eq!(r[HDR_METHOD], METHOD_GET_RESP);
        assert_eq!(r[8..16], 0x0102_0304_0506_0708u64.to_be_bytes(), "TID kept");
        assert_eq!(
            u16::from_be_bytes([r[DATA + 2], r[DATA + 3]]),
            CAP_EXT_WIDTH
        );
        assert!(r[DATA + 4..].iter().all(|&b| b == 0));
    }

    #[test]
    fn extended_counters_in_words_and_packets() {
        let c = PortCounts {
            xmit_bytes: 4000,
            rcv_bytes: 4003,
            xmit_packets: 10,
            rcv_packets: 11,
            multicast_xmit_packets: 2,
            multicast_rcv_packets: 3,
            link_downed: 1,
        };
        let (a, r) = ask(&request(METHOD_GET, ATTR_PORT_COUNTERS_EXT, 1), &c);
        assert_eq!(a, Answer::Reply);
        assert_eq!(status_of(&r), 0);
        assert_eq!(r[PORT_SELECT], 1);
        assert_eq!(r[COUNTER_SELECT], 0xab);
        let got: Vec<u64> = (0..8).map(|i| ext_counter(&r, i).unwrap()).collect();
        assert_eq!(got, [1000, 1000, 10, 11, 8, 8, 2, 3]);
        // The sysfs offsets (in bits, from the attribute): 64 and 128.
        assert_eq!(be64(r[DATA + 8..DATA + 16].try_into().unwrap()), 1000);
        assert_eq!(be64(r[DATA + 16..DATA + 24].try_into().unwrap()), 1000);
    }

    #[test]
    fn narrow_counters_saturate() {
        let c = PortCounts {
            xmit_bytes: u64::MAX,
            rcv_bytes: 8,
            xmit_packets: 1 << 40,
            rcv_packets: 7,
            link_downed: 300,
            ..Default::default()
        };
        let (_, r) = ask(&request(METHOD_GET, ATTR_PORT_COUNTERS, 1), &c);
        assert_eq!(status_of(&r), 0);
        assert_eq!(r[DATA + 7], 255, "LinkDownedCounter stops at all ones");
        assert_eq!(be32_at(&r, DATA + 24), u32::MAX);
        assert_eq!(be32_at(&r, DATA + 28), 2);
        assert_eq!(be32_at(&r, DATA + 32), u32::MAX);
        assert_eq!(be32_at(&r, DATA + 36), 7);
        let small = PortCounts {
            link_downed: 3,
            ..Default::default()
        };
        let (_, r) = ask(&request(METHOD_GET, ATTR_PORT_COUNTERS, 1), &small);
        assert_eq!(r[DATA + 7], 3);
    }

    #[test]
    fn wrong_port_select_is_an_invalid_field() {
        for port in [0u8, 2, 0xff] {
            let (a, r) = ask(
                &request(METHOD_GET, ATTR_PORT_COUNTERS_EXT, port),
                &PortCounts::default(),
            );
            assert_eq!(a, Answer::Reply);
            assert_eq!(status_of(&r), status::INVALID_FIELD);
        }
    }

    #[test]
    fn unsupported_attribute_method_and_version() {
        let c = PortCounts::default();
        let (a, r) = ask(&request(METHOD_GET, 0x0010, 1), &c);
        assert_eq!(
            (a, status_of(&r)),
            (Answer::Reply, status::UNSUPPORTED_METHOD_ATTR)
        );
        let (_, r) = ask(&request(METHOD_SET, ATTR_PORT_COUNTERS, 1), &c);
        assert_eq!(status_of(&r), status::UNSUPPORTED_METHOD_ATTR);
        let (_, r) = ask(&request(0x06, ATTR_PORT_COUNTERS, 1), &c);
        assert_eq!(status_of(&r), status::UNSUPPORTED_METHOD);
        let mut v2 = request(METHOD_GET, ATTR_PORT_COUNTERS, 1);
        v2[HDR_CLASS_VERSION] = 2;
        let (_, r) = ask(&v2, &c);
        assert_eq!(status_of(&r), status::BAD_VERSION);
    }

    #[test]
    fn other_classes_and_responses_are_left_alone() {
        let c = PortCounts::default();
        let mut cm = request(METHOD_GET, 0x0010, 1);
        cm[HDR_MGMT_CLASS] = 0x07;
        let (a, r) = ask(&cm, &c);
        assert_eq!(a, Answer::NotMine);
        assert!(r.iter().all(|&b| b == 0x5a), "output untouched");
        let (a, _) = ask(&request(METHOD_GET_RESP, ATTR_PORT_COUNTERS, 1), &c);
        assert_eq!(a, Answer::NotMine);
    }
}
