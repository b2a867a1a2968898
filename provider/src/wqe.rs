// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Work queue entries: which work requests a QP accepts, and the bytes of
//! the slot the kernel reads for each.
//!
//! The provider refuses what it can tell is wrong without the kernel
//! (opcodes a QP type cannot carry, unknown flags, more SGEs or inline
//! bytes than a slot holds), so `ibv_post_send()` fails on the offending
//! request with `bad_wr` pointing at it, as applications expect. Everything
//! that needs the QP's state or the MRs (keys, ranges, alignment) is the
//! kernel's to check when it consumes the slot.

use core::ffi::c_int;

use oxe_core::abi::{
    OxeRecvWqe, OxeSendWqe, OxeSge, OXE_SEND_FENCE, OXE_SEND_INLINE, OXE_SEND_SIGNALED,
    OXE_SEND_SOLICITED, OXE_WR_MKEY_CONFIGURE,
};
use oxe_core::Errno;

use crate::sys;

const EINVAL: c_int = Errno::EINVAL.to_i32();

// The ABI passes send flags through unchanged.
const _: () = {
    assert!(OXE_SEND_FENCE == sys::IBV_SEND_FENCE);
    assert!(OXE_SEND_SIGNALED == sys::IBV_SEND_SIGNALED);
    assert!(OXE_SEND_SOLICITED == sys::IBV_SEND_SOLICITED);
    assert!(OXE_SEND_INLINE == sys::IBV_SEND_INLINE);
};

/// The send flags a work request may carry.
const SEND_FLAGS: u32 = OXE_SEND_FENCE | OXE_SEND_SIGNALED | OXE_SEND_SOLICITED | OXE_SEND_INLINE;

/// The QP types the provider creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpKind {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl QpKind {
    /// The kind for an `IBV_QPT_*` value, `None` for the types oxe does not
    /// implement (XRC, raw packet, driver-specific).
    pub(crate) fn from_ibv(qp_type: u32) -> Option<Self> {
        match qp_type {
            sys::IBV_QPT_RC => Some(Self::Rc),
            sys::IBV_QPT_UC => Some(Self::Uc),
            sys::IBV_QPT_UD => Some(Self::Ud),
            _ => None,
        }
    }
}

/// The send operations oxe implements (`IBV_WR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendOp {
    /// `IBV_WR_SEND`.
    Send,
    /// `IBV_WR_SEND_WITH_IMM`.
    SendImm,
    /// `IBV_WR_SEND_WITH_INV`.
    SendInv,
    /// `IBV_WR_RDMA_WRITE`.
    Write,
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    WriteImm,
    /// `IBV_WR_RDMA_READ`.
    Read,
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`.
    CmpSwap,
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
    FetchAdd,
    /// `IBV_WR_FLUSH`: the range in `Remote::compare_add`, placement type
    /// and selectivity in `Remote::swap` (see `oxe_core::abi::flush_attrs`).
    Flush,
    /// `IBV_WR_ATOMIC_WRITE`: the 8 bytes in `Remote::compare_add`.
    AtomicWrite,
    /// `IBV_WR_BIND_MW`: the range in `Remote::addr`/`compare_add`, the
    /// window's new rkey in `Remote::rkey`, its rights in `Remote::swap`,
    /// the window and the MR in [`SendWr::bind`].
    Bind,
    /// `IBV_WR_LOCAL_INV`: the rkey in `imm_data`.
    LocalInv,
    /// oxe's own (`oxedv_wr_mr_list`, `oxedv_wr_mr_interleaved`): configure
    /// the indirect key in `imm_data` with the rights in `Remote::swap`
    /// and, interleaved, the rounds in `Remote::compare_add`; the entries
    /// are its SGEs.
    MkeyConfigure,
}

/// Which member of `ibv_send_wr`'s `wr` union an operation reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RemoteKind {
    /// None: sends.
    None,
    /// `wr.rdma`.
    Rdma,
    /// `wr.atomic`.
    Atomic,
    /// `bind_mw`.
    Bind,
}

/// What `ibv_send_wr`'s `imm_data`/`invalidate_rkey` union holds for an
/// operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImmKind {
    /// Nothing.
    None,
    /// `imm_data`.
    Imm,
    /// `invalidate_rkey`.
    Inv,
    /// The key an indirect-key configuration names (no `ibv_send_wr`
    /// carries one).
    Key,
}

impl SendOp {
    /// The operation for an `IBV_WR_*` value in an `ibv_send_wr`, `None` for
    /// those oxe does not implement (TSO, driver-specific)
    /// and for FLUSH and ATOMIC WRITE, whose operands `ibv_send_wr` has no
    /// member for (libibverbs offers them through `ibv_wr_*` only).
    pub(crate) fn from_ibv(opcode: u32) -> Option<Self> {
        Some(match opcode {
            sys::IBV_WR_SEND => Self::Send,
            sys::IBV_WR_SEND_WITH_IMM => Self::SendImm,
            sys::IBV_WR_SEND_WITH_INV => Self::SendInv,
            sys::IBV_WR_RDMA_WRITE => Self::Write,
            sys::IBV_WR_RDMA_WRITE_WITH_IMM => Self::WriteImm,
            sys::IBV_WR_RDMA_READ => Self::Read,
            sys::IBV_WR_ATOMIC_CMP_AND_SWP => Self::CmpSwap,
            sys::IBV_WR_ATOMIC_FETCH_AND_ADD => Self::FetchAdd,
            sys::IBV_WR_BIND_MW => Self::Bind,
            sys::IBV_WR_LOCAL_INV => Self::LocalInv,
            _ => return None,
        })
    }

    /// The `IBV_WR_*` value, which the ABI also uses.
    pub(crate) fn ibv(self) -> u32 {
        match self {
            Self::Send => sys::IBV_WR_SEND,
            Self::SendImm => sys::IBV_WR_SEND_WITH_IMM,
            Self::SendInv => sys::IBV_WR_SEND_WITH_INV,
            Self::Write => sys::IBV_WR_RDMA_WRITE,
            Self::WriteImm => sys::IBV_WR_RDMA_WRITE_WITH_IMM,
            Self::Read => sys::IBV_WR_RDMA_READ,
            Self::CmpSwap => sys::IBV_WR_ATOMIC_CMP_AND_SWP,
            Self::FetchAdd => sys::IBV_WR_ATOMIC_FETCH_AND_ADD,
            Self::Flush => sys::IBV_WR_FLUSH,
            Self::AtomicWrite => sys::IBV_WR_ATOMIC_WRITE,
            Self::Bind => sys::IBV_WR_BIND_MW,
            Self::LocalInv => sys::IBV_WR_LOCAL_INV,
            Self::MkeyConfigure => OXE_WR_MKEY_CONFIGURE,
        }
    }

    /// The remote side the operation names.
    pub(crate) fn remote(self) -> RemoteKind {
        match self {
            Self::Send | Self::SendImm | Self::SendInv | Self::LocalInv | Self::MkeyConfigure => {
                RemoteKind::None
            }
            Self::Bind => RemoteKind::Bind,
            Self::Write | Self::WriteImm | Self::Read | Self::Flush | Self::AtomicWrite => {
                RemoteKind::Rdma
            }
            Self::CmpSwap | Self::FetchAdd => RemoteKind::Atomic,
        }
    }

    /// What the operation carries in the immediate-data union.
    pub(crate) fn imm(self) -> ImmKind {
        match self {
            Self::SendImm | Self::WriteImm => ImmKind::Imm,
            Self::SendInv | Self::LocalInv => ImmKind::Inv,
            Self::MkeyConfigure => ImmKind::Key,
            _ => ImmKind::None,
        }
    }

    /// Whether a QP of this kind can carry the operation (IBTA table 38): a
    /// datagram QP only sends (with or without immediate data); UC adds
    /// RDMA WRITE, but nothing that needs an answer and no invalidation.
    /// FLUSH and ATOMIC WRITE are RC only (Memory Placement Extensions);
    /// memory window binds and local invalidates are for connected QPs.
    pub(crate) fn allowed_on(self, kind: QpKind) -> bool {
        match kind {
            QpKind::Rc => true,
            QpKind::Uc => matches!(
                self,
                Self::Send
                    | Self::SendImm
                    | Self::Write
                    | Self::WriteImm
                    | Self::Bind
                    | Self::LocalInv
                    | Self::MkeyConfigure
            ),
            QpKind::Ud => matches!(self, Self::Send | Self::SendImm),
        }
    }

    /// Whether the payload may be inline: only for data this side sends.
    fn inline_allowed(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendImm | Self::SendInv | Self::Write | Self::WriteImm
        )
    }
}

/// The remote end of an RDMA or atomic operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Remote {
    /// The remote virtual address.
    pub(crate) addr: u64,
    /// The remote key.
    pub(crate) rkey: u32,
    /// Atomic: the compare value or the addend.
    pub(crate) compare_add: u64,
    /// Atomic: the swap value.
    pub(crate) swap: u64,
}

/// A bind's window and MR, which `ibv_send_wr` names by object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BindObjects {
    /// The window's rkey before the bind.
    pub(crate) mw_rkey: u32,
    /// The MR's lkey (0 for a type 1 unbind, which names no MR).
    pub(crate) mr_lkey: u32,
}

/// Where a UD send goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UdDest {
    /// The address handle, as the kernel numbered it.
    pub(crate) ah_num: u32,
    /// The destination QP.
    pub(crate) remote_qpn: u32,
    /// The destination Q_Key.
    pub(crate) remote_qkey: u32,
}

/// One send work request, whichever API described it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendWr {
    /// Returned in the completion.
    pub(crate) wr_id: u64,
    /// The operation.
    pub(crate) op: SendOp,
    /// `IBV_SEND_*` flags.
    pub(crate) send_flags: u32,
    /// Immediate data as the application gave it (`__be32`, so already in
    /// wire order) or the rkey to invalidate, per [`SendOp::imm`].
    pub(crate) imm_data: u32,
    /// RDMA and atomics: the remote end.
    pub(crate) remote: Remote,
    /// UD: the destination; `None` on RC, and an error on UD.
    pub(crate) ud: Option<UdDest>,
    /// Bind: the window and the MR.
    pub(crate) bind: BindObjects,
}

impl SendWr {
    /// A request for `op` with everything else empty.
    pub(crate) fn new(wr_id: u64, op: SendOp, send_flags: u32) -> Self {
        Self {
            wr_id,
            op,
            send_flags,
            imm_data: 0,
            remote: Remote::default(),
            ud: None,
            bind: BindObjects::default(),
        }
    }

    /// Checks the request against the QP it is posted to. `inline` is
    /// whether its payload is inline data.
    pub(crate) fn check(&self, kind: QpKind, inline: bool) -> Result<(), c_int> {
        if !self.op.allowed_on(kind)
            || self.send_flags & !SEND_FLAGS != 0
            || (inline && !self.op.inline_allowed())
            || (kind == QpKind::Ud && self.ud.is_none())
        {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// The slot header. `num` is the SGE count, or with `inline` the
    /// payload length; the inline flag follows the payload actually
    /// written, whatever the request's own flags said.
    pub(crate) fn header(&self, num: u32, inline: bool) -> OxeSendWqe {
        let ud = self.ud.unwrap_or_default();
        let bind = self.op == SendOp::Bind;
        let mut send_flags = self.send_flags & !OXE_SEND_INLINE;
        if inline {
            send_flags |= OXE_SEND_INLINE;
        }
        OxeSendWqe {
            wr_id: self.wr_id,
            opcode: self.op.ibv(),
            send_flags,
            num_sge: num,
            imm_data: match self.op.imm() {
                ImmKind::None if bind => self.bind.mw_rkey,
                ImmKind::None => 0,
                ImmKind::Imm | ImmKind::Inv | ImmKind::Key => self.imm_data,
            },
            remote_addr: self.remote.addr,
            rkey: self.remote.rkey,
            remote_qpn: if bind {
                self.bind.mr_lkey
            } else {
                ud.remote_qpn
            },
            remote_qkey: ud.remote_qkey,
            ah_num: ud.ah_num,
            compare_add: self.remote.compare_add,
            swap: self.remote.swap,
        }
    }
}

/// What one slot of a queue can hold beyond its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotCapacity {
    /// Bytes of the header the entries start with.
    header: usize,
    /// SGEs after the header.
    max_sge: u32,
    /// Inline payload bytes after the header (0 for receive queues).
    max_inline: u32,
}

impl SlotCapacity {
    /// A send slot of `slot_size` bytes on a QP whose kernel allows
    /// `max_inline` bytes inline. The kernel's limit is trusted only as far
    /// as the slot goes: a larger one would have the copy run past it.
    pub(crate) fn send(slot_size: usize, max_inline: u32) -> Self {
        let room = slot_size.saturating_sub(OxeSendWqe::SIZE);
        Self {
            header: OxeSendWqe::SIZE,
            max_sge: sge_room(room),
            max_inline: max_inline.min(u32::try_from(room).unwrap_or(u32::MAX)),
        }
    }

    /// A receive slot (RQ or SRQ) of `slot_size` bytes.
    pub(crate) fn recv(slot_size: usize) -> Self {
        Self {
            header: OxeRecvWqe::SIZE,
            max_sge: sge_room(slot_size.saturating_sub(OxeRecvWqe::SIZE)),
            max_inline: 0,
        }
    }

    /// SGEs per slot.
    #[cfg(test)]
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Inline bytes per slot.
    #[cfg(test)]
    pub(crate) fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Checks an SGE count from an application (a C `int` or `size_t`)
    /// before the provider reads that many entries.
    pub(crate) fn check_sge_count(&self, count: impl TryInto<u32>) -> Result<usize, c_int> {
        match count.try_into() {
            Ok(n) if n <= self.max_sge => Ok(n as usize),
            _ => Err(EINVAL),
        }
    }

    /// Checks the total length of inline buffers before any is read.
    pub(crate) fn check_inline_len(
        &self,
        lengths: impl IntoIterator<Item = u64>,
    ) -> Result<u32, c_int> {
        let total = lengths
            .into_iter()
            .try_fold(0u64, |acc, len| acc.checked_add(len))
            .ok_or(EINVAL)?;
        match u32::try_from(total) {
            Ok(total) if total <= self.max_inline => Ok(total),
            _ => Err(EINVAL),
        }
    }

    /// Writes SGEs after the header; returns their count.
    pub(crate) fn write_sges(&self, slot: &mut [u8], sges: &[sys::ibv_sge]) -> Result<u32, c_int> {
        let count = self.check_sge_count(sges.len())?;
        let area = slot.get_mut(self.header..).ok_or(EINVAL)?;
        for (sge, out) in sges.iter().zip(area.chunks_exact_mut(OxeSge::SIZE)) {
            OxeSge {
                addr: sge.addr,
                length: sge.length,
                lkey: sge.lkey,
            }
            .write_to(out);
        }
        // `count` fits u32: it is at most `max_sge`.
        Ok(count as u32)
    }

    /// Copies inline payload after the header; returns its length.
    pub(crate) fn write_inline<'a>(
        &self,
        slot: &mut [u8],
        parts: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<u32, c_int> {
        let limit = self.max_inline as usize;
        let area = slot.get_mut(self.header..).ok_or(EINVAL)?;
        let mut at = 0usize;
        for part in parts {
            let end = at.checked_add(part.len()).filter(|&end| end <= limit);
            let dst = end.and_then(|end| area.get_mut(at..end)).ok_or(EINVAL)?;
            dst.copy_from_slice(part);
            at += part.len();
        }
        // `at` fits u32: it is at most `max_inline`.
        Ok(at as u32)
    }
}

/// How many SGEs fit in `room` bytes.
fn sge_room(room: usize) -> u32 {
    u32::try_from(room / OxeSge::SIZE).unwrap_or(u32::MAX)
}

/// Writes a whole receive entry: header and SGEs.
pub(crate) fn write_recv(
    cap: &SlotCapacity,
    slot: &mut [u8],
    wr_id: u64,
    sges: &[sys::ibv_sge],
) -> Result<(), c_int> {
    let num_sge = cap.write_sges(slot, sges)?;
    OxeRecvWqe {
        wr_id,
        num_sge,
        reserved: 0,
    }
    .write_to(slot);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(addr: u64, length: u32, lkey: u32) -> sys::ibv_sge {
        sys::ibv_sge { addr, length, lkey }
    }

    const ALL_OPS: [SendOp; 12] = [
        SendOp::Send,
        SendOp::SendImm,
        SendOp::SendInv,
        SendOp::Write,
        SendOp::WriteImm,
        SendOp::Read,
        SendOp::CmpSwap,
        SendOp::FetchAdd,
        SendOp::Flush,
        SendOp::AtomicWrite,
        SendOp::Bind,
        SendOp::LocalInv,
    ];

    #[test]
    fn only_rc_uc_and_ud_are_qp_kinds() {
        assert_eq!(QpKind::from_ibv(sys::IBV_QPT_RC), Some(QpKind::Rc));
        assert_eq!(QpKind::from_ibv(sys::IBV_QPT_UC), Some(QpKind::Uc));
        assert_eq!(QpKind::from_ibv(sys::IBV_QPT_UD), Some(QpKind::Ud));
        for other in [
            sys::IBV_QPT_RAW_PACKET,
            sys::IBV_QPT_XRC_SEND,
            sys::IBV_QPT_XRC_RECV,
            sys::IBV_QPT_DRIVER,
            0,
        ] {
            assert_eq!(QpKind::from_ibv(other), None);
        }
    }

    #[test]
    fn opcodes_round_trip_and_unsupported_ones_are_refused() {
        for op in ALL_OPS {
            let legacy = !matches!(op, SendOp::Flush | SendOp::AtomicWrite);
            let expect = legacy.then_some(op);
            assert_eq!(SendOp::from_ibv(op.ibv()), expect, "{op:?}");
        }
        for other in [
            sys::IBV_WR_TSO,
            sys::IBV_WR_DRIVER1,
            sys::IBV_WR_FLUSH,
            sys::IBV_WR_ATOMIC_WRITE,
            1000,
        ] {
            assert_eq!(SendOp::from_ibv(other), None);
        }
    }

    #[test]
    fn ud_only_sends() {
        let ud = Some(UdDest::default());
        for op in ALL_OPS {
            let wr = SendWr {
                ud,
                ..SendWr::new(1, op, 0)
            };
            assert!(wr.check(QpKind::Rc, false).is_ok(), "{op:?} on RC");
            let on_ud = wr.check(QpKind::Ud, false);
            if matches!(op, SendOp::Send | SendOp::SendImm) {
                assert!(on_ud.is_ok(), "{op:?} on UD");
            } else {
                assert_eq!(on_ud, Err(EINVAL), "{op:?} on UD");
            }
        }
    }

    #[test]
    fn uc_sends_and_writes_only() {
        for op in ALL_OPS {
            let on_uc = SendWr::new(1, op, 0).check(QpKind::Uc, false);
            let carried = matches!(
                op,
                SendOp::Send
                    | SendOp::SendImm
                    | SendOp::Write
                    | SendOp::WriteImm
                    | SendOp::Bind
                    | SendOp::LocalInv
            );
            assert_eq!(on_uc.is_ok(), carried, "{op:?} on UC");
        }
    }

    #[test]
    fn ud_send_needs_a_destination() {
        let wr = SendWr::new(1, SendOp::Send, 0);
        assert_eq!(wr.check(QpKind::Ud, false), Err(EINVAL));
        assert!(wr.check(QpKind::Rc, false).is_ok());
    }

    #[test]
    fn unknown_send_flags_are_refused() {
        let ok = SendWr::new(1, SendOp::Send, SEND_FLAGS);
        assert!(ok.check(QpKind::Rc, true).is_ok());
        let csum = SendWr::new(1, SendOp::Send, sys::IBV_SEND_IP_CSUM);
        assert_eq!(csum.check(QpKind::Rc, false), Err(EINVAL));
    }

    #[test]
    fn inline_only_for_outgoing_data() {
        for op in ALL_OPS {
            let wr = SendWr::new(1, op, sys::IBV_SEND_INLINE);
            let allowed = !matches!(
                op,
                SendOp::Read
                    | SendOp::CmpSwap
                    | SendOp::FetchAdd
                    | SendOp::Flush
                    | SendOp::AtomicWrite
                    | SendOp::Bind
                    | SendOp::LocalInv
            );
            assert_eq!(wr.check(QpKind::Rc, true).is_ok(), allowed, "{op:?}");
        }
    }

    #[test]
    fn header_carries_each_operation_s_fields() {
        let wr = SendWr {
            imm_data: u32::from_ne_bytes([1, 2, 3, 4]),
            remote: Remote {
                addr: 0x1000,
                rkey: 0x42,
                compare_add: 5,
                swap: 6,
            },
            ..SendWr::new(9, SendOp::WriteImm, sys::IBV_SEND_SIGNALED)
        };
        let h = wr.header(2, false);
        assert_eq!(h.wr_id, 9);
        assert_eq!(h.opcode, sys::IBV_WR_RDMA_WRITE_WITH_IMM);
        assert_eq!(h.send_flags, OXE_SEND_SIGNALED);
        assert_eq!(h.num_sge, 2);
        // __be32 immediate data is stored as is: same bytes in the slot.
        assert_eq!(h.imm_data.to_ne_bytes(), [1, 2, 3, 4]);
        assert_eq!((h.remote_addr, h.rkey), (0x1000, 0x42));

        // Immediate data only for the operations that carry it.
        let plain = SendWr {
            op: SendOp::Write,
            ..wr
        };
        assert_eq!(plain.header(0, false).imm_data, 0);
        let inv = SendWr {
            op: SendOp::SendInv,
            imm_data: 0x1234,
            ..wr
        };
        assert_eq!(inv.header(0, false).imm_data, 0x1234);

        let atomic = SendWr {
            op: SendOp::CmpSwap,
            ..wr
        }
        .header(1, false);
        assert_eq!(atomic.opcode, sys::IBV_WR_ATOMIC_CMP_AND_SWP);
        assert_eq!((atomic.compare_add, atomic.swap), (5, 6));

        let ud = SendWr {
            ud: Some(UdDest {
                ah_num: 3,
                remote_qpn: 0x99,
                remote_qkey: 0x8001_0000,
            }),
            ..SendWr::new(1, SendOp::Send, 0)
        }
        .header(1, false);
        assert_eq!(
            (ud.ah_num, ud.remote_qpn, ud.remote_qkey),
            (3, 0x99, 0x8001_0000)
        );
    }

    #[test]
    fn header_inline_flag_follows_the_payload() {
        let wr = SendWr::new(1, SendOp::Send, sys::IBV_SEND_INLINE | sys::IBV_SEND_FENCE);
        assert_eq!(wr.header(1, false).send_flags, OXE_SEND_FENCE);
        let wr = SendWr::new(1, SendOp::Send, sys::IBV_SEND_SOLICITED);
        assert_eq!(
            wr.header(8, true).send_flags,
            OXE_SEND_SOLICITED | OXE_SEND_INLINE
        );
    }

    #[test]
    fn slot_capacities() {
        let send = SlotCapacity::send(256, 1000);
        assert_eq!(send.max_sge(), (256 - 64) / 16);
        // The kernel's inline limit is cut to what the slot holds...
        assert_eq!(send.max_inline(), 256 - 64);
        // ...and otherwise kept.
        assert_eq!(SlotCapacity::send(256, 100).max_inline(), 100);
        let recv = SlotCapacity::recv(64);
        assert_eq!(recv.max_sge(), (64 - 16) / 16);
        assert_eq!(recv.max_inline(), 0);
        // A header-only slot holds no SGEs.
        assert_eq!(SlotCapacity::send(64, 0).max_sge(), 0);
    }

    #[test]
    fn sge_count_checks() {
        let cap = SlotCapacity::send(128, 0);
        assert_eq!(cap.check_sge_count(4i32), Ok(4));
        assert_eq!(cap.check_sge_count(0i32), Ok(0));
        assert_eq!(cap.check_sge_count(5i32), Err(EINVAL));
        assert_eq!(cap.check_sge_count(-1i32), Err(EINVAL));
        assert_eq!(cap.check_sge_count(usize::MAX), Err(EINVAL));
    }

    #[test]
    fn inline_length_checks() {
        let cap = SlotCapacity::send(256, 64);
        assert_eq!(cap.check_inline_len([10, 54]), Ok(64));
        assert_eq!(cap.check_inline_len([10, 55]), Err(EINVAL));
        assert_eq!(cap.check_inline_len([]), Ok(0));
        assert_eq!(cap.check_inline_len([u64::MAX, 2]), Err(EINVAL));
    }

    #[test]
    fn sges_land_after_the_send_header() {
        let cap = SlotCapacity::send(128, 0);
        let mut slot = [0u8; 128];
        let n = cap
            .write_sges(&mut slot, &[sge(0x1000, 16, 7), sge(0x2000, 32, 8)])
            .expect("fits");
        assert_eq!(n, 2);
        assert_eq!(
            OxeSge::from_bytes(&slot[64..]),
            Some(OxeSge {
                addr: 0x1000,
                length: 16,
                lkey: 7
            })
        );
        assert_eq!(
            OxeSge::from_bytes(&slot[80..]),
            Some(OxeSge {
                addr: 0x2000,
                length: 32,
                lkey: 8
            })
        );
        // One more than fits.
        let five = [sge(0, 0, 0); 5];
        assert_eq!(cap.write_sges(&mut slot, &five), Err(EINVAL));
    }

    #[test]
    fn inline_bytes_are_concatenated_after_the_header() {
        let cap = SlotCapacity::send(128, 64);
        let mut slot = [0u8; 128];
        let n = cap
            .write_inline(&mut slot, [&b"abc"[..], &b""[..], &b"defg"[..]])
            .expect("fits");
        assert_eq!(n, 7);
        assert_eq!(&slot[64..71], b"abcdefg");
        assert_eq!(slot[71], 0);
        // Exactly the limit fits; one more does not.
        assert_eq!(cap.write_inline(&mut slot, [&[1u8; 64][..]]), Ok(64));
        assert_eq!(
            cap.write_inline(&mut slot, [&[1u8; 60][..], &[2u8; 5][..]]),
            Err(EINVAL)
        );
    }

    #[test]
    fn recv_entry_layout() {
        let cap = SlotCapacity::recv(64);
        let mut slot = [0xffu8; 64];
        write_recv(&cap, &mut slot, 0xabcd, &[sge(0x3000, 100, 9)]).expect("fits");
        assert_eq!(
            OxeRecvWqe::from_bytes(&slot),
            Some(OxeRecvWqe {
                wr_id: 0xabcd,
                num_sge: 1,
                reserved: 0
            })
        );
        assert_eq!(
            OxeSge::from_bytes(&slot[16..]),
            Some(OxeSge {
                addr: 0x3000,
                length: 100,
                lkey: 9
            })
        );
        assert_eq!(
            write_recv(&cap, &mut slot, 1, &[sge(0, 0, 0); 4]),
            Err(EINVAL)
        );
    }
}
