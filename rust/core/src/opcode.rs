// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The BTH opcode table for the transports oxe speaks: RC, UC and UD.
//!
//! An opcode's top three bits name the transport and its low five bits the
//! operation (the IBTA OpCode field definition). The operation fixes which extension
//! headers follow the BTH, in which order, and whether a payload follows;
//! parsing and building packets both start from this table, so it is the
//! one place where that knowledge lives.
//!
//! Besides the classic opcodes the table includes FLUSH and ATOMIC WRITE
//! (IBTA Memory Placement Extensions), which rdma_rxe also implements.
//! RD and the RoCE CNP are deliberately absent: oxe has no RD QPs, and a
//! CNP is handled by congestion control, not the transport.

/// BTH opcode values (`IB_OPCODE_*` in include/rdma/ib_pack.h).
pub mod codes {
    /// RC SEND First.
    pub const RC_SEND_FIRST: u8 = 0x00;
    /// RC SEND Middle.
    pub const RC_SEND_MIDDLE: u8 = 0x01;
    /// RC SEND Last.
    pub const RC_SEND_LAST: u8 = 0x02;
    /// RC SEND Last with Immediate.
    pub const RC_SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    /// RC SEND Only.
    pub const RC_SEND_ONLY: u8 = 0x04;
    /// RC SEND Only with Immediate.
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    /// RC RDMA WRITE First.
    pub const RC_RDMA_WRITE_FIRST: u8 = 0x06;
    /// RC RDMA WRITE Middle.
    pub const RC_RDMA_WRITE_MIDDLE: u8 = 0x07;
    /// RC RDMA WRITE Last.
    pub const RC_RDMA_WRITE_LAST: u8 = 0x08;
    /// RC RDMA WRITE Last with Immediate.
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    /// RC RDMA WRITE Only.
    pub const RC_RDMA_WRITE_ONLY: u8 = 0x0a;
    /// RC RDMA WRITE Only with Immediate.
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0b;
    /// RC RDMA READ Request.
    pub const RC_RDMA_READ_REQUEST: u8 = 0x0c;
    /// RC RDMA READ Response First.
    pub const RC_RDMA_READ_RESPONSE_FIRST: u8 = 0x0d;
    /// RC RDMA READ Response Middle.
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0e;
    /// RC RDMA READ Response Last.
    pub const RC_RDMA_READ_RESPONSE_LAST: u8 = 0x0f;
    /// RC RDMA READ Response Only.
    pub const RC_RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    /// RC Acknowledge.
    pub const RC_ACKNOWLEDGE: u8 = 0x11;
    /// RC ATOMIC Acknowledge.
    pub const RC_ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// RC CmpSwap.
    pub const RC_COMPARE_SWAP: u8 = 0x13;
    /// RC FetchAdd.
    pub const RC_FETCH_ADD: u8 = 0x14;
    /// RC SEND Last with Invalidate.
    pub const RC_SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    /// RC SEND Only with Invalidate.
    pub const RC_SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    /// RC FLUSH.
    pub const RC_FLUSH: u8 = 0x1c;
    /// RC ATOMIC WRITE.
    pub const RC_ATOMIC_WRITE: u8 = 0x1d;
    /// UC SEND First.
    pub const UC_SEND_FIRST: u8 = 0x20;
    /// UC SEND Middle.
    pub const UC_SEND_MIDDLE: u8 = 0x21;
    /// UC SEND Last.
    pub const UC_SEND_LAST: u8 = 0x22;
    /// UC SEND Last with Immediate.
    pub const UC_SEND_LAST_WITH_IMMEDIATE: u8 = 0x23;
    /// UC SEND Only.
    pub const UC_SEND_ONLY: u8 = 0x24;
    /// UC SEND Only with Immediate.
    pub const UC_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x25;
    /// UC RDMA WRITE First.
    pub const UC_RDMA_WRITE_FIRST: u8 = 0x26;
    /// UC RDMA WRITE Middle.
    pub const UC_RDMA_WRITE_MIDDLE: u8 = 0x27;
    /// UC RDMA WRITE Last.
    pub const UC_RDMA_WRITE_LAST: u8 = 0x28;
    /// UC RDMA WRITE Last with Immediate.
    pub const UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x29;
    /// UC RDMA WRITE Only.
    pub const UC_RDMA_WRITE_ONLY: u8 = 0x2a;
    /// UC RDMA WRITE Only with Immediate.
    pub const UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x2b;
    /// UD SEND Only.
    pub const UD_SEND_ONLY: u8 = 0x64;
    /// UD SEND Only with Immediate.
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x65;
}

/// Size of the BTH, which every opcode carries.
pub const BTH_LEN: usize = 12;

/// The transport an opcode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected.
    Rc,
    /// Unreliable Connected.
    Uc,
    /// Unreliable Datagram.
    Ud,
}

impl Transport {
    /// The transport encoded in an opcode's top three bits, or `None` for
    /// RD, CNP and the reserved/manufacturer ranges, which oxe does not
    /// speak.
    pub const fn of(opcode: u8) -> Option<Transport> {
        match opcode & 0xe0 {
            0x00 => Some(Transport::Rc),
            0x20 => Some(Transport::Uc),
            0x60 => Some(Transport::Ud),
            _ => None,
        }
    }
}

/// An extension header that may follow the BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    /// Datagram ETH (UD: Q_Key and source QP).
    Deth,
    /// Flush ETH (placement type and selectivity).
    Feth,
    /// RDMA ETH (virtual address, R_Key, DMA length).
    Reth,
    /// Atomic ETH (address, R_Key, swap/add and compare data).
    AtomicEth,
    /// ACK ETH (syndrome and MSN).
    Aeth,
    /// Atomic ACK ETH (original remote data).
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate ETH (the R_Key to invalidate).
    Ieth,
}

impl ExtHeader {
    /// The order in which extension headers appear after the BTH. No opcode
    /// carries two headers whose relative order this does not settle.
    pub const WIRE_ORDER: [ExtHeader; 8] = [
        ExtHeader::Deth,
        ExtHeader::Feth,
        ExtHeader::Reth,
        ExtHeader::AtomicEth,
        ExtHeader::Aeth,
        ExtHeader::AtomicAckEth,
        ExtHeader::ImmDt,
        ExtHeader::Ieth,
    ];

    /// Size on the wire, in bytes.
    pub const fn wire_len(self) -> usize {
        match self {
            ExtHeader::Deth => 8,
            ExtHeader::Feth => 4,
            ExtHeader::Reth => 16,
            ExtHeader::AtomicEth => 28,
            ExtHeader::Aeth => 4,
            ExtHeader::AtomicAckEth => 8,
            ExtHeader::ImmDt => 4,
            ExtHeader::Ieth => 4,
        }
    }

    /// The header's position in a [`HeaderSet`] (its bit's index).
    pub const fn index(self) -> usize {
        self.bit().0.trailing_zeros() as usize
    }

    /// The header's bit in a [`HeaderSet`].
    #[inline]
    pub const fn bit(self) -> HeaderSet {
        HeaderSet(match self {
            ExtHeader::Deth => 1 << 0,
            ExtHeader::Feth => 1 << 1,
            ExtHeader::Reth => 1 << 2,
            ExtHeader::AtomicEth => 1 << 3,
            ExtHeader::Aeth => 1 << 4,
            ExtHeader::AtomicAckEth => 1 << 5,
            ExtHeader::ImmDt => 1 << 6,
            ExtHeader::Ieth => 1 << 7,
        })
    }
}

/// Which extension headers an opcode carries, plus whether a payload
/// follows them. A bit set rather than a list so that "does this packet
/// have a RETH" is one AND on the data path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeaderSet(u16);

impl HeaderSet {
    /// No extension header and no payload.
    pub const EMPTY: HeaderSet = HeaderSet(0);
    /// A payload follows the headers (it may still be zero bytes long).
    pub const PAYLOAD: HeaderSet = HeaderSet(1 << 8);

    /// Union of two sets.
    pub const fn with(self, other: HeaderSet) -> HeaderSet {
        HeaderSet(self.0 | other.0)
    }

    /// Union with one extension header.
    pub const fn with_ext(self, h: ExtHeader) -> HeaderSet {
        self.with(h.bit())
    }

    /// Whether every member of `other` is present.
    pub const fn contains(self, other: HeaderSet) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether extension header `h` is present.
    #[inline]
    pub const fn has(self, h: ExtHeader) -> bool {
        self.contains(h.bit())
    }

    /// Bytes of BTH plus extension headers, i.e. where the payload starts.
    #[inline]
    pub fn header_len(self) -> usize {
        LAYOUTS
            .get(self.layout_index())
            .map_or(BTH_LEN, |row| usize::from(row[LEN_SLOT]))
    }

    /// Offset of extension header `h` from the start of the BTH, or `None`
    /// if this set does not include it.
    #[inline]
    pub fn offset_of(self, h: ExtHeader) -> Option<usize> {
        if !self.has(h) {
            return None;
        }
        let row = LAYOUTS.get(self.layout_index())?;
        row.get(h.index()).copied().map(usize::from)
    }

    /// The row of [`LAYOUTS`] for this set: its header bits (the payload bit
    /// does not move a header).
    const fn layout_index(self) -> usize {
        (self.0 & 0xff) as usize
    }

    /// [`Self::header_len`], walking the headers in wire order (builds
    /// [`LAYOUTS`]).
    const fn walk_header_len(self) -> usize {
        let mut len = BTH_LEN;
        let mut rest = ExtHeader::WIRE_ORDER.as_slice();
        while let [h, tail @ ..] = rest {
            if self.has(*h) {
                // At most 12 + 8 + 4 + 16 + 28 + 4 + 8 + 4 + 4 bytes.
                len = len.wrapping_add(h.wire_len());
            }
            rest = tail;
        }
        len
    }

    /// [`Self::offset_of`], walking the headers in wire order (builds
    /// [`LAYOUTS`]).
    const fn walk_offset_of(self, h: ExtHeader) -> usize {
        let mut off = BTH_LEN;
        let mut rest = ExtHeader::WIRE_ORDER.as_slice();
        while let [cur, tail @ ..] = rest {
            if *cur as u8 == h as u8 {
                return off;
            }
            if self.has(*cur) {
                off = off.wrapping_add(cur.wire_len());
            }
            rest = tail;
        }
        off
    }
}

/// Where [`LAYOUTS`] keeps a set's header length, after the eight offsets.
const LEN_SLOT: usize = 8;

/// Every combination of extension headers, laid out once at compile time:
/// each header's offset from the BTH (by [`ExtHeader::index`]) and the
/// total header length. Building and parsing a packet asks these a dozen
/// times; walking the wire order each time cost a few percent of a
/// transfer under emulation. All values are below 256 (at most 88 bytes).
// Compile-time evaluation: an index out of range would fail the build.
#[allow(clippy::indexing_slicing)]
static LAYOUTS: [[u8; 9]; 256] = {
    let mut t = [[0u8; 9]; 256];
    let mut s = 0;
    while s < 256 {
        let set = HeaderSet(s as u16);
        let mut rest = ExtHeader::WIRE_ORDER.as_slice();
        while let [h, tail @ ..] = rest {
            t[s][h.index()] = set.walk_offset_of(*h) as u8;
            rest = tail;
        }
        t[s][LEN_SLOT] = set.walk_header_len() as u8;
        s += 1;
    }
    t
};

/// The operation an opcode carries out, independent of transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND, consuming a receive WQE.
    Send,
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response data.
    RdmaReadResponse,
    /// Plain acknowledgement (or NAK).
    Acknowledge,
    /// Acknowledgement carrying an atomic's original value.
    AtomicAcknowledge,
    /// Compare and swap.
    CompareSwap,
    /// Fetch and add.
    FetchAdd,
    /// FLUSH to a visibility or persistence point.
    Flush,
    /// 8-byte atomic write.
    AtomicWrite,
}

/// Where a packet sits in its message. Multi-packet messages must arrive
/// First, Middle..., Last; checking that needs only this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// A single-packet message.
    Only,
}

/// Everything the table knows about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// The transport encoded in the opcode.
    pub transport: Transport,
    /// The operation.
    pub operation: Operation,
    /// The packet's place in its message.
    pub position: Position,
    /// Extension headers and payload presence.
    pub headers: HeaderSet,
}

impl OpcodeInfo {
    /// Whether the packet travels requester to responder (as opposed to a
    /// response or acknowledgement coming back).
    pub const fn is_request(self) -> bool {
        !matches!(
            self.operation,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }

    /// Whether a payload follows the headers.
    pub const fn has_payload(self) -> bool {
        self.headers.contains(HeaderSet::PAYLOAD)
    }

    /// Whether immediate data is carried (and so a receive completion with
    /// immediate is generated).
    pub const fn with_immediate(self) -> bool {
        self.headers.has(ExtHeader::ImmDt)
    }

    /// Whether the packet asks the responder to invalidate an R_Key.
    pub const fn with_invalidate(self) -> bool {
        self.headers.has(ExtHeader::Ieth)
    }

    /// Whether the packet begins a message (First or Only).
    pub const fn starts_message(self) -> bool {
        matches!(self.position, Position::First | Position::Only)
    }

    /// Whether the packet ends a message (Last or Only).
    pub const fn ends_message(self) -> bool {
        matches!(self.position, Position::Last | Position::Only)
    }

    /// Bytes of BTH plus extension headers.
    #[inline]
    pub fn header_len(self) -> usize {
        self.headers.header_len()
    }
}

/// Looks an opcode up. `None` for opcodes oxe does not speak, including
/// valid IBTA opcodes used with the wrong transport (an RDMA READ on UC),
/// which a receiver must treat as an invalid request.
pub const fn info(opcode: u8) -> Option<OpcodeInfo> {
    use ExtHeader::{Aeth, AtomicAckEth, AtomicEth, Feth, Ieth, ImmDt, Reth};
    use Operation as Op;
    use Position::{First, Last, Middle, Only};

    let transport = match Transport::of(opcode) {
        Some(t) => t,
        None => return None,
    };
    let p = HeaderSet::PAYLOAD;
    let e = HeaderSet::EMPTY;
    // (operation, position, headers, allowed on UC, allowed on UD).
    // Every entry is allowed on RC.
    let (operation, position, headers, uc, ud) = match opcode & 0x1f {
        0x00 => (Op::Send, First, p, true, false),
        0x01 => (Op::Send, Middle, p, true, false),
        0x02 => (Op::Send, Last, p, true, false),
        0x03 => (Op::Send, Last, p.with_ext(ImmDt), true, false),
        0x04 => (Op::Send, Only, p, true, true),
        0x05 => (Op::Send, Only, p.with_ext(ImmDt), true, true),
        0x06 => (Op::RdmaWrite, First, p.with_ext(Reth), true, false),
        0x07 => (Op::RdmaWrite, Middle, p, true, false),
        0x08 => (Op::RdmaWrite, Last, p, true, false),
        0x09 => (Op::RdmaWrite, Last, p.with_ext(ImmDt), true, false),
        0x0a => (Op::RdmaWrite, Only, p.with_ext(Reth), true, false),
        0x0b => (
            Op::RdmaWrite,
            Only,
            p.with_ext(Reth).with_ext(ImmDt),
            true,
            false,
        ),
        0x0c => (Op::RdmaReadRequest, Only, e.with_ext(Reth), false, false),
        0x0d => (Op::RdmaReadResponse, First, p.with_ext(Aeth), false, false),
        0x0e => (Op::RdmaReadResponse, Middle, p, false, false),
        0x0f => (Op::RdmaReadResponse, Last, p.with_ext(Aeth), false, false),
        0x10 => (Op::RdmaReadResponse, Only, p.with_ext(Aeth), false, false),
        0x11 => (Op::Acknowledge, Only, e.with_ext(Aeth), false, false),
        0x12 => (
            Op::AtomicAcknowledge,
            Only,
            e.with_ext(Aeth).with_ext(AtomicAckEth),
            false,
            false,
        ),
        0x13 => (Op::CompareSwap, Only, e.with_ext(AtomicEth), false, false),
        0x14 => (Op::FetchAdd, Only, e.with_ext(AtomicEth), false, false),
        0x16 => (Op::Send, Last, p.with_ext(Ieth), false, false),
        0x17 => (Op::Send, Only, p.with_ext(Ieth), false, false),
        0x1c => (
            Op::Flush,
            Only,
            e.with_ext(Feth).with_ext(Reth),
            false,
            false,
        ),
        0x1d => (Op::AtomicWrite, Only, p.with_ext(Reth), false, false),
        _ => return None,
    };
    let headers = match transport {
        Transport::Rc => headers,
        Transport::Uc if uc => headers,
        Transport::Ud if ud => headers.with_ext(ExtHeader::Deth),
        _ => return None,
    };
    Some(OpcodeInfo {
        transport,
        operation,
        position,
        headers,
    })
}

/// Bytes of BTH plus extension headers for `opcode`, i.e. the offset of the
/// payload; `None` for an opcode oxe does not speak.
pub fn header_len(opcode: u8) -> Option<usize> {
    info(opcode).map(OpcodeInfo::header_len)
}

#[cfg(test)]
mod tests {
    use super::codes::*;
    use super::{header_len, info, ExtHeader, HeaderSet, Operation, Position, Transport};

    #[test]
    fn header_lengths_match_ibta() {
        // Expected totals, BTH included (rdma_rxe's table agrees).
        let cases: [(u8, usize); 39] = [
            (RC_SEND_FIRST, 12),
            (RC_SEND_MIDDLE, 12),
            (RC_SEND_LAST, 12),
            (RC_SEND_LAST_WITH_IMMEDIATE, 16),
            (RC_SEND_ONLY, 12),
            (RC_SEND_ONLY_WITH_IMMEDIATE, 16),
            (RC_RDMA_WRITE_FIRST, 28),
            (RC_RDMA_WRITE_MIDDLE, 12),
            (RC_RDMA_WRITE_LAST, 12),
            (RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 16),
            (RC_RDMA_WRITE_ONLY, 28),
            (RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
            (RC_RDMA_READ_REQUEST, 28),
            (RC_RDMA_READ_RESPONSE_FIRST, 16),
            (RC_RDMA_READ_RESPONSE_MIDDLE, 12),
            (RC_RDMA_READ_RESPONSE_LAST, 16),
            (RC_RDMA_READ_RESPONSE_ONLY, 16),
            (RC_ACKNOWLEDGE, 16),
            (RC_ATOMIC_ACKNOWLEDGE, 24),
            (RC_COMPARE_SWAP, 40),
            (RC_FETCH_ADD, 40),
            (RC_SEND_LAST_WITH_INVALIDATE, 16),
            (RC_SEND_ONLY_WITH_INVALIDATE, 16),
            (RC_FLUSH, 32),
            (RC_ATOMIC_WRITE, 28),
            (UC_SEND_FIRST, 12),
            (UC_SEND_MIDDLE, 12),
            (UC_SEND_LAST, 12),
            (UC_SEND_LAST_WITH_IMMEDIATE, 16),
            (UC_SEND_ONLY, 12),
            (UC_SEND_ONLY_WITH_IMMEDIATE, 16),
            (UC_RDMA_WRITE_FIRST, 28),
            (UC_RDMA_WRITE_MIDDLE, 12),
            (UC_RDMA_WRITE_LAST, 12),
            (UC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 16),
            (UC_RDMA_WRITE_ONLY, 28),
            (UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
            (UD_SEND_ONLY, 20),
            (UD_SEND_ONLY_WITH_IMMEDIATE, 24),
        ];
        for (op, len) in cases {
            assert_eq!(header_len(op), Some(len), "opcode {op:#04x}");
        }
        // Exactly these 39 opcodes are known.
        let known = (0..=255u8).filter(|o| info(*o).is_some()).count();
        assert_eq!(known, cases.len());
    }

    #[test]
    fn unknown_and_wrong_transport_rejected() {
        for op in [
            0x15u8, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x2c, 0x40, 0x44, 0x60, 0x66, 0x80, 0x81, 0xe0,
            0xff,
        ] {
            assert_eq!(info(op), None, "{op:#04x}");
        }
        // Valid IBTA operations on a transport that lacks them.
        for op in [0x2c, 0x2d, 0x31, 0x33, 0x37, 0x3c, 0x3d, 0x6a, 0x6c, 0x71] {
            assert_eq!(info(op), None, "{op:#04x}");
        }
        assert_eq!(Transport::of(0x40), None);
        assert_eq!(Transport::of(0x81), None);
    }

    #[test]
    fn extension_offsets_follow_wire_order() {
        let wi = info(RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE).unwrap().headers;
        assert_eq!(wi.offset_of(ExtHeader::Reth), Some(12));
        assert_eq!(wi.offset_of(ExtHeader::ImmDt), Some(28));
        assert_eq!(wi.offset_of(ExtHeader::Aeth), None);

        let aa = info(RC_ATOMIC_ACKNOWLEDGE).unwrap().headers;
        assert_eq!(aa.offset_of(ExtHeader::Aeth), Some(12));
        assert_eq!(aa.offset_of(ExtHeader::AtomicAckEth), Some(16));

        let ud = info(UD_SEND_ONLY_WITH_IMMEDIATE).unwrap().headers;
        assert_eq!(ud.offset_of(ExtHeader::Deth), Some(12));
        assert_eq!(ud.offset_of(ExtHeader::ImmDt), Some(20));

        let fl = info(RC_FLUSH).unwrap().headers;
        assert_eq!(fl.offset_of(ExtHeader::Feth), Some(12));
        assert_eq!(fl.offset_of(ExtHeader::Reth), Some(16));
    }

    #[test]
    fn offsets_are_contiguous_for_every_opcode() {
        for op in 0..=255u8 {
            let Some(i) = info(op) else { continue };
            let mut expect = 12;
            for h in ExtHeader::WIRE_ORDER {
                if let Some(off) = i.headers.offset_of(h) {
                    assert_eq!(off, expect, "{op:#04x} {h:?}");
                    expect += h.wire_len();
                }
            }
            assert_eq!(i.header_len(), expect);
        }
    }

    #[test]
    fn classification() {
        let ack = info(RC_ACKNOWLEDGE).unwrap();
        assert!(!ack.is_request() && !ack.has_payload());
        assert_eq!(ack.operation, Operation::Acknowledge);

        let rr = info(RC_RDMA_READ_REQUEST).unwrap();
        assert!(rr.is_request() && !rr.has_payload() && rr.starts_message() && rr.ends_message());

        let mid = info(RC_RDMA_READ_RESPONSE_MIDDLE).unwrap();
        assert!(!mid.is_request() && mid.has_payload());
        assert_eq!(mid.position, Position::Middle);
        assert!(!mid.starts_message() && !mid.ends_message());

        let inv = info(RC_SEND_ONLY_WITH_INVALIDATE).unwrap();
        assert!(inv.with_invalidate() && !inv.with_immediate());

        let ud = info(UD_SEND_ONLY).unwrap();
        assert_eq!(ud.transport, Transport::Ud);
        assert!(ud.headers.has(ExtHeader::Deth));

        let uc = info(UC_RDMA_WRITE_LAST_WITH_IMMEDIATE).unwrap();
        assert_eq!((uc.transport, uc.position), (Transport::Uc, Position::Last));
        assert!(uc.with_immediate() && uc.ends_message() && !uc.starts_message());

        for op in 0..=255u8 {
            let Some(i) = info(op) else { continue };
            // Only UD carries a DETH, and every UD opcode does.
            assert_eq!(i.headers.has(ExtHeader::Deth), i.transport == Transport::Ud);
            // Opcodes whose name says "with immediate" carry ImmDt.
            if matches!(op & 0x1f, 0x03 | 0x05 | 0x09 | 0x0b) {
                assert!(i.with_immediate());
            }
            // Atomics carry exactly an AtomicETH and no payload.
            if matches!(i.operation, Operation::CompareSwap | Operation::FetchAdd) {
                assert_eq!(i.headers, HeaderSet::EMPTY.with_ext(ExtHeader::AtomicEth));
            }
        }
    }
}
