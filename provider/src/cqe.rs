// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Completion entries: what the kernel wrote into a CQ slot, as
//! `ibv_poll_cq()` and the `ibv_cq_ex` readers present it.
//!
//! The kernel writes [`OxeCqe`] with oxe's own `wc_flags` bits because the
//! kernel's and libibverbs' flag values differ; the translation to
//! `IBV_WC_*` happens here, once, for both polling interfaces. Status and
//! opcode need none: `IB_WC_*` and `IBV_WC_*` agree.

use core::ffi::c_int;

use oxe_core::abi::{
    OxeCqe, OxeInlinePiece, OXE_CQE_INLINE_DATA, OXE_CQE_INLINE_PIECES, OXE_CQE_INLINE_SLOT,
    OXE_INLINE_RECV_MAX, OXE_INLINE_RECV_PIECES, OXE_WC_GRH, OXE_WC_INLINE, OXE_WC_WITH_IMM,
    OXE_WC_WITH_INV,
};
use oxe_core::Errno;

use crate::sys;

/// One completion, read out of its slot, in libibverbs' terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Completion {
    /// From the work request.
    pub(crate) wr_id: u64,
    /// `IBV_WC_*` status.
    pub(crate) status: u32,
    /// `IBV_WC_*` opcode.
    pub(crate) opcode: u32,
    /// oxe's detail for an error status.
    pub(crate) vendor_err: u32,
    /// Bytes received or transferred.
    pub(crate) byte_len: u32,
    /// The `ibv_wc` union of immediate data (as on the wire, `__be32`) and
    /// invalidated rkey (host order): the kernel already stored whichever
    /// applies in the form libibverbs wants, so it is passed on untouched.
    pub(crate) imm_or_inv: u32,
    /// The local QP.
    pub(crate) qp_num: u32,
    /// UD receives: the sender's QP.
    pub(crate) src_qp: u32,
    /// `IBV_WC_*` flags.
    pub(crate) wc_flags: u32,
    /// Always 0 on RoCE, but passed on as reported.
    pub(crate) pkey_index: u16,
}

/// The `OXE_WC_*` bits and the `IBV_WC_*` bits they stand for. Bits the
/// kernel sets beyond these (from a newer ABI) are dropped: libibverbs
/// would give them meanings oxe never meant.
const WC_FLAGS: [(u32, u32); 3] = [
    (OXE_WC_GRH, sys::IBV_WC_GRH),
    (OXE_WC_WITH_IMM, sys::IBV_WC_WITH_IMM),
    (OXE_WC_WITH_INV, sys::IBV_WC_WITH_INV),
];

/// Translates `OXE_WC_*` bits to `IBV_WC_*` bits.
pub(crate) fn ibv_wc_flags(oxe: u32) -> u32 {
    WC_FLAGS
        .iter()
        .filter(|&&(from, _)| oxe & from != 0)
        .fold(0, |acc, &(_, to)| acc | to)
}

impl Completion {
    /// Reads a completion from its slot. `None` only for a slot shorter
    /// than a CQE, which a checked queue layout never hands out.
    pub(crate) fn from_slot(slot: &[u8]) -> Option<Self> {
        OxeCqe::from_bytes(slot).map(|cqe| Self::from(&cqe))
    }

    /// The completion as `ibv_poll_cq()` returns it. RoCE has no LIDs or
    /// service levels, so `slid`, `sl` and `dlid_path_bits` are 0.
    pub(crate) fn to_ibv_wc(self) -> sys::ibv_wc {
        sys::ibv_wc {
            wr_id: self.wr_id,
            status: self.status,
            opcode: self.opcode,
            vendor_err: self.vendor_err,
            byte_len: self.byte_len,
            __bindgen_anon_1: sys::ibv_wc__bindgen_ty_1 {
                imm_data: self.imm_or_inv,
            },
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            wc_flags: self.wc_flags,
            pkey_index: self.pkey_index,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
        }
    }
}

impl From<&OxeCqe> for Completion {
    fn from(cqe: &OxeCqe) -> Self {
        Self {
            wr_id: cqe.wr_id,
            status: cqe.status,
            opcode: cqe.opcode,
            vendor_err: cqe.vendor_err,
            byte_len: cqe.byte_len,
            imm_or_inv: cqe.imm_data,
            qp_num: cqe.qp_num,
            src_qp: cqe.src_qp,
            wc_flags: ibv_wc_flags(cqe.wc_flags),
            // P_Key indices are 16 bits in every verbs API; a kernel that
            // sent more sent garbage, and 0 is the only index RoCE has.
            pkey_index: u16::try_from(cqe.pkey_index).unwrap_or(0),
        }
    }
}

/// A receive's message that came in its completion slot (inline receive),
/// with the places in this process it goes to: the receive buffer the
/// kernel resolved through the work request's lkeys and checked, as it
/// checks a buffer it writes itself. A copy, so that nothing borrows the
/// ring while the message is written out (the buffer could even be the
/// ring itself, in a process that registered it).
#[derive(Debug)]
pub(crate) struct InlineRecv {
    data: [u8; OXE_INLINE_RECV_MAX as usize],
    len: usize,
    pieces: [OxeInlinePiece; OXE_INLINE_RECV_PIECES as usize],
}

/// A slot that claims an inline message it cannot hold: the queue is not
/// one this provider understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Malformed;

impl InlineRecv {
    /// The inline message of a slot, if its completion has one.
    pub(crate) fn from_slot(slot: &[u8]) -> Result<Option<Self>, Malformed> {
        let cqe = OxeCqe::from_bytes(slot).ok_or(Malformed)?;
        if cqe.wc_flags & OXE_WC_INLINE == 0 {
            return Ok(None);
        }
        if slot.len() < OXE_CQE_INLINE_SLOT as usize || cqe.byte_len > OXE_INLINE_RECV_MAX {
            return Err(Malformed);
        }
        let len = cqe.byte_len as usize;
        let mut data = [0u8; OXE_INLINE_RECV_MAX as usize];
        let at = OXE_CQE_INLINE_DATA as usize;
        data[..len].copy_from_slice(&slot[at..at + len]);
        let mut pieces = [OxeInlinePiece::default(); OXE_INLINE_RECV_PIECES as usize];
        for (i, p) in pieces.iter_mut().enumerate() {
            let at = OXE_CQE_INLINE_PIECES as usize + i * OxeInlinePiece::SIZE;
            *p = OxeInlinePiece::from_bytes(&slot[at..]).ok_or(Malformed)?;
        }
        Ok(Some(Self { data, len, pieces }))
    }

    /// Each piece of the message with its destination address, in message
    /// order. Pieces past the message's length are cut short or left out.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        let data = &self.data[..self.len];
        let mut done = 0usize;
        self.pieces.iter().map_while(move |p| {
            let n = (p.length as usize).min(data.len() - done);
            if n == 0 {
                return None;
            }
            let piece = &data[done..done + n];
            done += n;
            Some((p.va, piece))
        })
    }
}

/// The optional `ibv_cq_ex` readers a CQ gets, from its `wc_flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CqExReaders {
    /// `read_byte_len`.
    pub(crate) byte_len: bool,
    /// `read_imm_data` (which `ibv_wc_read_invalidated_rkey()` also uses).
    pub(crate) imm_data: bool,
    /// `read_qp_num`.
    pub(crate) qp_num: bool,
    /// `read_src_qp`.
    pub(crate) src_qp: bool,
    /// `read_slid`.
    pub(crate) slid: bool,
    /// `read_sl`.
    pub(crate) sl: bool,
    /// `read_dlid_path_bits`.
    pub(crate) dlid_path_bits: bool,
}

/// The `IBV_WC_EX_WITH_*` fields every oxe completion carries. Timestamps,
/// VLANs, flow tags and tag matching are not among them.
pub(crate) const SUPPORTED_WC_EX_FLAGS: u64 = (sys::IBV_WC_EX_WITH_BYTE_LEN
    | sys::IBV_WC_EX_WITH_IMM
    | sys::IBV_WC_EX_WITH_QP_NUM
    | sys::IBV_WC_EX_WITH_SRC_QP
    | sys::IBV_WC_EX_WITH_SLID
    | sys::IBV_WC_EX_WITH_SL
    | sys::IBV_WC_EX_WITH_DLID_PATH_BITS) as u64;

/// Decides which readers an extended CQ installs. A field the CQ cannot
/// report is refused with `EOPNOTSUPP` at creation rather than left
/// without a reader, which the application would call through NULL.
pub(crate) fn cq_ex_readers(wc_flags: u64) -> Result<CqExReaders, c_int> {
    if wc_flags & !SUPPORTED_WC_EX_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP.to_i32());
    }
    let has = |flag: u32| wc_flags & u64::from(flag) != 0;
    Ok(CqExReaders {
        byte_len: has(sys::IBV_WC_EX_WITH_BYTE_LEN),
        imm_data: has(sys::IBV_WC_EX_WITH_IMM),
        qp_num: has(sys::IBV_WC_EX_WITH_QP_NUM),
        src_qp: has(sys::IBV_WC_EX_WITH_SRC_QP),
        slid: has(sys::IBV_WC_EX_WITH_SLID),
        sl: has(sys::IBV_WC_EX_WITH_SL),
        dlid_path_bits: has(sys::IBV_WC_EX_WITH_DLID_PATH_BITS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe() -> OxeCqe {
        OxeCqe {
            wr_id: 0x1122_3344_5566_7788,
            status: sys::IBV_WC_REM_ACCESS_ERR,
            opcode: sys::IBV_WC_RECV_RDMA_WITH_IMM,
            vendor_err: 0x99,
            byte_len: 4096,
            imm_data: u32::from_ne_bytes([0xde, 0xad, 0xbe, 0xef]),
            qp_num: 0x11,
            src_qp: 0x22,
            wc_flags: OXE_WC_WITH_IMM,
            pkey_index: 0,
            network_hdr_type: 2,
            reserved0: 0,
            reserved1: 0,
        }
    }

    #[test]
    fn flags_translate_bit_by_bit() {
        assert_eq!(ibv_wc_flags(0), 0);
        assert_eq!(ibv_wc_flags(OXE_WC_GRH), sys::IBV_WC_GRH);
        assert_eq!(ibv_wc_flags(OXE_WC_WITH_IMM), sys::IBV_WC_WITH_IMM);
        // The one that differs: oxe bit 2, libibverbs bit 3.
        assert_eq!(OXE_WC_WITH_INV, 1 << 2);
        assert_eq!(ibv_wc_flags(OXE_WC_WITH_INV), sys::IBV_WC_WITH_INV);
        assert_eq!(
            ibv_wc_flags(OXE_WC_GRH | OXE_WC_WITH_INV),
            sys::IBV_WC_GRH | sys::IBV_WC_WITH_INV
        );
        // Unknown bits are dropped, not passed through as IP_CSUM_OK etc.,
        // and so is inline receive, which is the provider's business.
        assert_eq!(ibv_wc_flags(1 << 4 | 1 << 31), 0);
        assert_eq!(ibv_wc_flags(OXE_WC_INLINE | OXE_WC_GRH), sys::IBV_WC_GRH);
    }

    #[test]
    fn completion_reads_every_field_from_the_slot() {
        let mut slot = [0xffu8; 128];
        cqe().write_to(&mut slot);
        let c = Completion::from_slot(&slot).expect("long enough");
        assert_eq!(c.wr_id, 0x1122_3344_5566_7788);
        assert_eq!(c.status, sys::IBV_WC_REM_ACCESS_ERR);
        assert_eq!(c.opcode, sys::IBV_WC_RECV_RDMA_WITH_IMM);
        assert_eq!(c.vendor_err, 0x99);
        assert_eq!(c.byte_len, 4096);
        // Immediate data stays in wire order: its bytes are unchanged.
        assert_eq!(c.imm_or_inv.to_ne_bytes(), [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(c.qp_num, 0x11);
        assert_eq!(c.src_qp, 0x22);
        assert_eq!(c.wc_flags, sys::IBV_WC_WITH_IMM);
        assert_eq!(Completion::from_slot(&slot[..63]), None);
    }

    /// An inline-receive slot: `msg` in pieces of `lens` at addresses
    /// 0x1000, 0x2000, ...
    fn inline_slot(msg: &[u8], lens: &[u32]) -> Vec<u8> {
        let mut slot = vec![0u8; OXE_CQE_INLINE_SLOT as usize];
        OxeCqe {
            byte_len: msg.len() as u32,
            wc_flags: OXE_WC_INLINE,
            ..cqe()
        }
        .write_to(&mut slot);
        let at = OXE_CQE_INLINE_DATA as usize;
        slot[at..at + msg.len()].copy_from_slice(msg);
        for (i, &length) in lens.iter().enumerate() {
            let at = OXE_CQE_INLINE_PIECES as usize + i * OxeInlinePiece::SIZE;
            let p = OxeInlinePiece {
                va: 0x1000 * (i as u64 + 1),
                length,
                reserved: 0,
            };
            slot[at..at + OxeInlinePiece::SIZE].copy_from_slice(&p.to_bytes());
        }
        slot
    }

    #[test]
    fn inline_message_comes_in_pieces_in_order() {
        let msg: Vec<u8> = (0..64u8).collect();
        let slot = inline_slot(&msg, &[1, 62, 1]);
        let inl = InlineRecv::from_slot(&slot).unwrap().expect("inline");
        let got: Vec<(u64, Vec<u8>)> = inl.pieces().map(|(va, b)| (va, b.to_vec())).collect();
        assert_eq!(
            got,
            [
                (0x1000, msg[..1].to_vec()),
                (0x2000, msg[1..63].to_vec()),
                (0x3000, msg[63..].to_vec())
            ]
        );
        // A completion without the flag has no inline message.
        let mut plain = slot.clone();
        OxeCqe {
            wc_flags: 0,
            ..cqe()
        }
        .write_to(&mut plain);
        assert!(InlineRecv::from_slot(&plain).unwrap().is_none());
        // The flag on a short slot, or a message too long, is a broken queue.
        assert_eq!(InlineRecv::from_slot(&slot[..128]).unwrap_err(), Malformed);
        let long = inline_slot(&[0u8; 65], &[65]);
        assert_eq!(InlineRecv::from_slot(&long).unwrap_err(), Malformed);
    }

    #[test]
    fn inline_pieces_never_run_past_the_message() {
        let slot = inline_slot(b"abc", &[2, 9, 4]);
        let inl = InlineRecv::from_slot(&slot).unwrap().expect("inline");
        let got: Vec<(u64, &[u8])> = inl.pieces().collect();
        assert_eq!(got, [(0x1000, &b"ab"[..]), (0x2000, &b"c"[..])]);
        let empty = inline_slot(b"", &[]);
        let inl = InlineRecv::from_slot(&empty).unwrap().expect("inline");
        assert_eq!(inl.pieces().count(), 0);
    }

    #[test]
    fn invalidated_rkey_passes_in_host_order() {
        let c = Completion::from(&OxeCqe {
            opcode: sys::IBV_WC_RECV,
            imm_data: 0x0012_3456,
            wc_flags: OXE_WC_WITH_INV,
            ..cqe()
        });
        assert_eq!(c.imm_or_inv, 0x0012_3456);
        assert_eq!(c.wc_flags, sys::IBV_WC_WITH_INV);
    }

    #[test]
    fn oversized_pkey_index_reads_as_zero() {
        let c = Completion::from(&OxeCqe {
            pkey_index: 0x1_0000,
            ..cqe()
        });
        assert_eq!(c.pkey_index, 0);
        let c = Completion::from(&OxeCqe {
            pkey_index: 3,
            ..cqe()
        });
        assert_eq!(c.pkey_index, 3);
    }

    #[test]
    fn ibv_wc_has_the_fields_and_no_lids() {
        let wc = Completion::from(&cqe()).to_ibv_wc();
        assert_eq!(wc.wr_id, 0x1122_3344_5566_7788);
        assert_eq!(wc.status, sys::IBV_WC_REM_ACCESS_ERR);
        assert_eq!(wc.opcode, sys::IBV_WC_RECV_RDMA_WITH_IMM);
        assert_eq!(wc.vendor_err, 0x99);
        assert_eq!(wc.byte_len, 4096);
        assert_eq!(wc.qp_num, 0x11);
        assert_eq!(wc.src_qp, 0x22);
        assert_eq!(wc.wc_flags, sys::IBV_WC_WITH_IMM);
        assert_eq!((wc.slid, wc.sl, wc.dlid_path_bits), (0, 0, 0));
    }

    #[test]
    fn cq_ex_accepts_the_standard_fields_only() {
        assert_eq!(cq_ex_readers(0), Ok(CqExReaders::default()));
        let all = cq_ex_readers(SUPPORTED_WC_EX_FLAGS).expect("supported");
        assert!(
            all.byte_len
                && all.imm_data
                && all.qp_num
                && all.src_qp
                && all.slid
                && all.sl
                && all.dlid_path_bits
        );
        let some = cq_ex_readers(u64::from(
            sys::IBV_WC_EX_WITH_BYTE_LEN | sys::IBV_WC_EX_WITH_SRC_QP,
        ))
        .expect("supported");
        assert_eq!(
            some,
            CqExReaders {
                byte_len: true,
                src_qp: true,
                ..Default::default()
            }
        );
        for unsupported in [
            sys::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
            sys::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
            sys::IBV_WC_EX_WITH_CVLAN,
            sys::IBV_WC_EX_WITH_FLOW_TAG,
            sys::IBV_WC_EX_WITH_TM_INFO,
        ] {
            let flags = SUPPORTED_WC_EX_FLAGS | u64::from(unsupported);
            assert_eq!(cq_ex_readers(flags), Err(Errno::EOPNOTSUPP.to_i32()));
        }
        assert_eq!(cq_ex_readers(1 << 40), Err(Errno::EOPNOTSUPP.to_i32()));
    }
}
