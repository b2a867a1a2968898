// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The provider's own decisions, in safe Rust.
//!
//! Nearly all of a control-path verb is a kernel round trip made by
//! rdma-core's `ibv_cmd_*` helpers. What the provider itself decides is
//! small, and lives here so it can be unit tested on a host that has no oxe
//! device: whether the kernel's reply to `alloc_context` is one this
//! provider understands, which arguments a rereg sends, how the firmware
//! version reads, and which creation attributes of queues it accepts.
//! (The data path's own logic has modules of its own: `ring`, `wqe`,
//! `send_queue`, `recv_queue`, `cqe`, `completion_queue`.)
//!
//! Errors are positive errno values (`c_int`), as libibverbs reports them;
//! the ones this module picks itself come from [`oxe_core::Errno`], so the
//! provider and the kernel module choose the same errno for the same
//! mistake.

use core::ffi::{c_char, c_int};

use oxe_core::abi::{
    OxeAllocUcontextResp, OXE_ABI_VERSION, OXE_CREATE_QP_NO_INLINE_RECV, OXE_UCTX_CAP_REREG_ACCESS,
    OXE_UCTX_CAP_REREG_PD, OXE_UCTX_CAP_REREG_TRANS,
};
use oxe_core::rereg::ReregFlags;
use oxe_core::Errno;

use crate::cqe::{cq_ex_readers, CqExReaders};
use crate::sys;
use crate::wqe::QpKind;

/// `EPROTO`: the kernel's reply is not in a form this provider speaks.
/// (Linux value; not among oxe-core's errnos, which are the ones the kernel
/// module itself returns.)
pub(crate) const EPROTO: c_int = 71;

/// What a context remembers from the kernel's `alloc_ucontext` reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UcontextInfo {
    /// `OXE_UCTX_CAP_*` bits: what this kernel implements.
    pub(crate) caps: u32,
    /// Largest inline send the kernel accepts, in bytes.
    pub(crate) max_inline: u32,
    /// The inline-receive threshold the context's CQs and QPs use: the
    /// kernel's, or 0 when it has none or the process turned it off.
    pub(crate) inline_recv_max: u32,
}

/// Whether the process leaves inline receive on, from the value of
/// `OXE_SCATTER_TO_CQE` (named after mlx5's `MLX5_SCATTER_TO_CQE`): on
/// unless it is `0`.
pub(crate) fn scatter_to_cqe(env: Option<&str>) -> bool {
    env.is_none_or(|v| v.trim() != "0")
}

/// Checks the oxe part of the kernel's reply to `GET_CONTEXT`.
///
/// The device matched on its uverbs ABI version already (the match table's
/// min and max are [`OXE_ABI_VERSION`]), but that number is per device in
/// sysfs; the reply's `abi_version` is what the module that answered was
/// built with, so a mismatch here means the two halves of oxe disagree on
/// the layout of every later reply. A kernel that sent no driver data at
/// all leaves the zeroed reply in place, which fails the same check.
/// `inline_recv` is whether the process wants inline receive
/// ([`scatter_to_cqe`]).
pub(crate) fn check_ucontext(
    resp: &OxeAllocUcontextResp,
    inline_recv: bool,
) -> Result<UcontextInfo, c_int> {
    if resp.abi_version != OXE_ABI_VERSION {
        return Err(EPROTO);
    }
    Ok(UcontextInfo {
        caps: resp.caps,
        max_inline: resp.max_inline,
        inline_recv_max: if inline_recv { resp.inline_recv_max } else { 0 },
    })
}

/// The `OXE_CREATE_QP_*` flags for the kernel from `oxedv_create_qp()`'s
/// attributes: `EINVAL` for a mask bit or a flag this provider does not
/// know, rather than a QP without what the application asked for.
pub(crate) fn oxedv_qp_flags(comp_mask: u64, create_flags: u32) -> Result<u32, c_int> {
    let known_mask = u64::from(sys::OXEDV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS);
    if comp_mask & !known_mask != 0 {
        return Err(Errno::EINVAL.to_i32());
    }
    if comp_mask & known_mask == 0 {
        return Ok(0);
    }
    if create_flags & !sys::OXEDV_QP_CREATE_DISABLE_SCATTER_TO_CQE != 0 {
        return Err(Errno::EINVAL.to_i32());
    }
    Ok(
        if create_flags & sys::OXEDV_QP_CREATE_DISABLE_SCATTER_TO_CQE != 0 {
            OXE_CREATE_QP_NO_INLINE_RECV
        } else {
            0
        },
    )
}

/// Length of `ibv_device_attr::fw_ver`, including its terminating NUL.
pub(crate) const FW_VER_LEN: usize = 64;

/// Renders the kernel's 64-bit firmware version for `ibv_device_attr`.
///
/// uverbs reports the version as a number (`ib_uverbs_query_device_resp::
/// fw_ver`) and leaves its text form to the provider. oxe packs it the way
/// rdma-core's tools expect from software devices: major in bits 47..32,
/// minor in 31..16, sub-minor in 15..0, shown as `major.minor.sub`.
pub(crate) fn fw_ver_string(raw: u64) -> [c_char; FW_VER_LEN] {
    let text = format!(
        "{}.{}.{}",
        (raw >> 32) & 0xffff,
        (raw >> 16) & 0xffff,
        raw & 0xffff
    );
    let mut out = [0; FW_VER_LEN];
    // At most 17 bytes ("65535.65535.65535"), so the last byte stays NUL;
    // `take` keeps that true whatever the format above ever becomes.
    for (dst, src) in out.iter_mut().zip(text.bytes().take(FW_VER_LEN - 1)) {
        *dst = src as c_char;
    }
    out
}

/// What `rereg_mr` should ask the kernel for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReregRequest {
    /// The validated `IBV_REREG_MR_*` bits.
    pub(crate) flags: ReregFlags,
    /// The I/O virtual address the region will have after a translation
    /// change.
    pub(crate) hca_va: u64,
}

// libibverbs' flag values (which `ibv_rereg_mr()` hands to the provider and
// `ibv_cmd_rereg_mr()` forwards) and oxe-core's (which the kernel module
// checks against) must be the same bits.
const _: () = {
    assert!(ReregFlags::TRANS == sys::IBV_REREG_MR_CHANGE_TRANSLATION);
    assert!(ReregFlags::PD == sys::IBV_REREG_MR_CHANGE_PD);
    assert!(ReregFlags::ACCESS == sys::IBV_REREG_MR_CHANGE_ACCESS);
};

/// Turns the arguments of the `rereg_mr` provider op into a kernel request.
///
/// libibverbs' `ibv_rereg_mr()` has already checked the flags against the
/// ones it knows, that a translation change brings an address and a length,
/// and that access flags come only with `IBV_REREG_MR_CHANGE_ACCESS`. Left
/// to the provider:
///
/// * The flags are checked with oxe-core's [`ReregFlags::from_raw`], the
///   check the kernel module makes, so a request refused here would have
///   been refused there with the same errno.
/// * `IBV_REREG_MR_CHANGE_PD` needs a PD to take the handle from, and
///   libibverbs does not check that one was given: without this check a
///   NULL `pd` would be dereferenced by `ibv_cmd_rereg_mr()`.
/// * Each requested change must be one the kernel announced in its context
///   capabilities (`caps`, `OXE_UCTX_CAP_REREG_*`); otherwise the answer is
///   `EOPNOTSUPP` without a system call.
/// * The new I/O virtual address. `ibv_rereg_mr()` has no iova argument, so,
///   as for `ibv_reg_mr()`, a region whose translation changes is addressed
///   by its new virtual address (`hca_va == addr`), even if it was first
///   registered at another iova. The kernel ignores `hca_va` when the
///   translation does not change.
pub(crate) fn rereg_request(
    flags: c_int,
    addr: usize,
    pd_given: bool,
    caps: u32,
) -> Result<ReregRequest, c_int> {
    // A negative int has its top bit set, which is an undefined flag.
    let raw = u32::try_from(flags).map_err(|_| Errno::EOPNOTSUPP.to_i32())?;
    let flags = ReregFlags::from_raw(raw).map_err(Errno::to_i32)?;
    if flags.pd() && !pd_given {
        return Err(Errno::EINVAL.to_i32());
    }
    let needed = [
        (flags.trans(), OXE_UCTX_CAP_REREG_TRANS),
        (flags.pd(), OXE_UCTX_CAP_REREG_PD),
        (flags.access(), OXE_UCTX_CAP_REREG_ACCESS),
    ];
    if needed
        .iter()
        .any(|&(requested, cap)| requested && caps & cap == 0)
    {
        return Err(Errno::EOPNOTSUPP.to_i32());
    }
    Ok(ReregRequest {
        flags,
        hca_va: addr as u64,
    })
}

/// Checks `ibv_create_cq_ex()`'s attributes and picks the readers the CQ
/// gets. Parent domains are not implemented, so neither is
/// `IBV_CQ_INIT_ATTR_MASK_PD`; of the creation flags only
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` is accepted, as a hint the
/// provider may ignore (it locks anyway). `IGNORE_OVERRUN` would change
/// what the kernel does on a full CQ, which oxe does not offer.
pub(crate) fn check_cq_init_attr(
    comp_mask: u32,
    flags: u32,
    wc_flags: u64,
) -> Result<CqExReaders, c_int> {
    let eopnotsupp = Errno::EOPNOTSUPP.to_i32();
    if comp_mask & !sys::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        return Err(eopnotsupp);
    }
    if comp_mask & sys::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
        && flags & !sys::IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return Err(eopnotsupp);
    }
    cq_ex_readers(wc_flags)
}

/// The QP kind for `ibv_create_qp()`'s `qp_type`: XRC, raw packet and
/// driver QPs are `EOPNOTSUPP`.
pub(crate) fn qp_kind(qp_type: u32) -> Result<QpKind, c_int> {
    QpKind::from_ibv(qp_type).ok_or(Errno::EOPNOTSUPP.to_i32())
}

/// The `IBV_QP_EX_WITH_*` builders an RC QP offers: every operation
/// `wqe::SendOp` knows.
pub(crate) const RC_SEND_OPS: u64 = (sys::IBV_QP_EX_WITH_SEND
    | sys::IBV_QP_EX_WITH_SEND_WITH_IMM
    | sys::IBV_QP_EX_WITH_SEND_WITH_INV
    | sys::IBV_QP_EX_WITH_RDMA_WRITE
    | sys::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | sys::IBV_QP_EX_WITH_RDMA_READ
    | sys::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | sys::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | sys::IBV_QP_EX_WITH_FLUSH
    | sys::IBV_QP_EX_WITH_ATOMIC_WRITE
    | sys::IBV_QP_EX_WITH_BIND_MW
    | sys::IBV_QP_EX_WITH_LOCAL_INV) as u64;

/// The builders a UC QP offers: sends and writes (IBTA table 38), and
/// memory window binds and local invalidates.
pub(crate) const UC_SEND_OPS: u64 = (sys::IBV_QP_EX_WITH_SEND
    | sys::IBV_QP_EX_WITH_SEND_WITH_IMM
    | sys::IBV_QP_EX_WITH_RDMA_WRITE
    | sys::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | sys::IBV_QP_EX_WITH_BIND_MW
    | sys::IBV_QP_EX_WITH_LOCAL_INV) as u64;

/// The builders a UD QP offers: sends only.
pub(crate) const UD_SEND_OPS: u64 =
    (sys::IBV_QP_EX_WITH_SEND | sys::IBV_QP_EX_WITH_SEND_WITH_IMM) as u64;

/// What `ibv_create_qp_ex()` asked for, once checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpCreate {
    /// The QP's kind.
    pub(crate) kind: QpKind,
    /// The `IBV_QP_EX_WITH_*` builders to install, `None` without
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` (the QP then has no `ibv_qp_ex`).
    pub(crate) send_ops: Option<u64>,
}

/// Checks `ibv_create_qp_ex()`'s attributes: a PD is required (as for
/// every QP type oxe has); creation flags, TSO, RSS, indirection tables and
/// XRC domains are not implemented; the builders asked for must be
/// operations the QP type can carry.
pub(crate) fn check_qp_init_attr_ex(
    qp_type: u32,
    comp_mask: u32,
    create_flags: u32,
    send_ops_flags: u64,
) -> Result<QpCreate, c_int> {
    let eopnotsupp = Errno::EOPNOTSUPP.to_i32();
    let kind = qp_kind(qp_type)?;
    if comp_mask & sys::IBV_QP_INIT_ATTR_PD == 0 {
        return Err(Errno::EINVAL.to_i32());
    }
    let known = sys::IBV_QP_INIT_ATTR_PD
        | sys::IBV_QP_INIT_ATTR_CREATE_FLAGS
        | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if comp_mask & !known != 0
        || (comp_mask & sys::IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && create_flags != 0)
    {
        return Err(eopnotsupp);
    }
    let send_ops = if comp_mask & sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        let offered = match kind {
            QpKind::Rc => RC_SEND_OPS,
            QpKind::Uc => UC_SEND_OPS,
            QpKind::Ud => UD_SEND_OPS,
        };
        if send_ops_flags & !offered != 0 {
            return Err(eopnotsupp);
        }
        Some(send_ops_flags)
    } else {
        None
    };
    Ok(QpCreate { kind, send_ops })
}

/// Checks `ibv_modify_srq()`'s mask: arming the limit and resizing
/// (`IBV_SRQ_MAX_WR`), which are the kernel's business, and nothing else.
/// Returns whether the SRQ is resized.
pub(crate) fn check_srq_modify(mask: c_int) -> Result<bool, c_int> {
    let mask = u32::try_from(mask).map_err(|_| Errno::EINVAL.to_i32())?;
    if mask & !(sys::IBV_SRQ_MAX_WR | sys::IBV_SRQ_LIMIT) != 0 {
        return Err(Errno::EINVAL.to_i32());
    }
    Ok(mask & sys::IBV_SRQ_MAX_WR != 0)
}

/// `ibv_qp_state` values the posting checks need.
const QPS_RESET: u32 = 0;
const QPS_INIT: u32 = 1;
const QPS_RTR: u32 = 2;

/// Whether send requests may be posted to a QP in `state` (IBTA 10.8.2:
/// not before RTS; in the error state they are accepted and flushed).
pub(crate) fn send_allowed(state: u32) -> bool {
    !matches!(state, QPS_RESET | QPS_INIT | QPS_RTR)
}

/// Whether receive requests may be posted to a QP in `state` (not in RESET).
pub(crate) fn recv_allowed(state: u32) -> bool {
    state != QPS_RESET
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(buf: &[c_char; FW_VER_LEN]) -> String {
        let end = buf.iter().position(|&c| c == 0).expect("NUL-terminated");
        buf[..end].iter().map(|&c| c as u8 as char).collect()
    }

    #[test]
    fn posting_follows_the_qp_state() {
        use super::{recv_allowed, send_allowed};
        assert!(!send_allowed(0) && !send_allowed(1) && !send_allowed(2));
        assert!(send_allowed(3) && send_allowed(4) && send_allowed(6));
        assert!(!recv_allowed(0));
        assert!(recv_allowed(1) && recv_allowed(2) && recv_allowed(3) && recv_allowed(6));
    }

    #[test]
    fn fw_ver_fields() {
        assert_eq!(text(&fw_ver_string(0)), "0.0.0");
        assert_eq!(text(&fw_ver_string(0x0001_0002_0003)), "1.2.3");
        assert_eq!(text(&fw_ver_string(u64::MAX)), "65535.65535.65535");
        // Bits above 47 are not part of the version.
        assert_eq!(text(&fw_ver_string(0xabcd_0000_0000_0000)), "0.0.0");
    }

    const TRANS: i32 = ReregFlags::TRANS as i32;
    const PD: i32 = ReregFlags::PD as i32;
    const ACCESS: i32 = ReregFlags::ACCESS as i32;
    const ALL_CAPS: u32 =
        OXE_UCTX_CAP_REREG_TRANS | OXE_UCTX_CAP_REREG_PD | OXE_UCTX_CAP_REREG_ACCESS;
    const EINVAL: c_int = Errno::EINVAL.to_i32();
    const EOPNOTSUPP: c_int = Errno::EOPNOTSUPP.to_i32();

    #[test]
    fn ucontext_reply_must_carry_our_abi_version() {
        let good = OxeAllocUcontextResp {
            abi_version: OXE_ABI_VERSION,
            caps: ALL_CAPS,
            max_inline: 128,
            inline_recv_max: 64,
        };
        assert_eq!(
            check_ucontext(&good, true),
            Ok(UcontextInfo {
                caps: ALL_CAPS,
                max_inline: 128,
                inline_recv_max: 64,
            })
        );
        // A kernel that wrote no driver data leaves the reply zeroed.
        assert_eq!(
            check_ucontext(&OxeAllocUcontextResp::default(), true),
            Err(EPROTO)
        );
        let newer = OxeAllocUcontextResp {
            abi_version: OXE_ABI_VERSION + 1,
            ..good
        };
        assert_eq!(check_ucontext(&newer, true), Err(EPROTO));
    }

    #[test]
    fn oxedv_qp_attrs_map_to_kernel_flags_and_refuse_the_unknown() {
        let mask = u64::from(sys::OXEDV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS);
        let off = sys::OXEDV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
        assert_eq!(oxedv_qp_flags(0, 0), Ok(0));
        // Flags without their mask bit are not read.
        assert_eq!(oxedv_qp_flags(0, off | 1 << 7), Ok(0));
        assert_eq!(oxedv_qp_flags(mask, 0), Ok(0));
        assert_eq!(oxedv_qp_flags(mask, off), Ok(OXE_CREATE_QP_NO_INLINE_RECV));
        assert_eq!(oxedv_qp_flags(mask, off | 1 << 7), Err(EINVAL));
        assert_eq!(oxedv_qp_flags(mask | 1 << 5, off), Err(EINVAL));
    }

    #[test]
    fn inline_receive_is_on_unless_the_process_says_0() {
        assert!(scatter_to_cqe(None));
        assert!(scatter_to_cqe(Some("1")));
        assert!(scatter_to_cqe(Some("")));
        assert!(!scatter_to_cqe(Some("0")));
        assert!(!scatter_to_cqe(Some(" 0\n")));
        let resp = OxeAllocUcontextResp {
            abi_version: OXE_ABI_VERSION,
            inline_recv_max: 64,
            ..Default::default()
        };
        assert_eq!(
            check_ucontext(&resp, false).map(|i| i.inline_recv_max),
            Ok(0)
        );
        // A kernel without it reports 0, whatever the process wants.
        let old = OxeAllocUcontextResp {
            inline_recv_max: 0,
            ..resp
        };
        assert_eq!(check_ucontext(&old, true).map(|i| i.inline_recv_max), Ok(0));
    }

    #[test]
    fn rereg_translation_uses_new_address_as_iova() {
        let req = rereg_request(TRANS, 0x7000, false, ALL_CAPS).expect("valid");
        assert!(req.flags.trans() && !req.flags.pd() && !req.flags.access());
        assert_eq!(req.hca_va, 0x7000);
    }

    #[test]
    fn rereg_all_three_flags() {
        let req = rereg_request(TRANS | PD | ACCESS, 0x1000, true, ALL_CAPS).expect("valid");
        assert_eq!(req.flags.bits(), ReregFlags::SUPPORTED);
        assert!(req.flags.trans() && req.flags.pd() && req.flags.access());
    }

    #[test]
    fn rereg_pd_change_needs_a_pd() {
        assert_eq!(rereg_request(PD, 0, false, ALL_CAPS), Err(EINVAL));
        assert!(rereg_request(PD, 0, true, ALL_CAPS).is_ok());
        // Without CHANGE_PD the PD argument is not used.
        assert!(rereg_request(ACCESS, 0, false, ALL_CAPS).is_ok());
    }

    #[test]
    fn rereg_needs_the_kernel_capability() {
        for (flag, cap) in [
            (TRANS, OXE_UCTX_CAP_REREG_TRANS),
            (PD, OXE_UCTX_CAP_REREG_PD),
            (ACCESS, OXE_UCTX_CAP_REREG_ACCESS),
        ] {
            assert!(rereg_request(flag, 0x1000, true, cap).is_ok());
            assert_eq!(
                rereg_request(flag, 0x1000, true, ALL_CAPS & !cap),
                Err(EOPNOTSUPP)
            );
        }
        // One missing capability fails the whole request.
        assert_eq!(
            rereg_request(TRANS | ACCESS, 0x1000, true, OXE_UCTX_CAP_REREG_TRANS),
            Err(EOPNOTSUPP)
        );
    }

    #[test]
    fn rereg_flags_checked_like_the_kernel() {
        assert_eq!(rereg_request(0, 0, true, ALL_CAPS), Err(EINVAL));
        assert_eq!(rereg_request(1 << 3, 0, true, ALL_CAPS), Err(EOPNOTSUPP));
        assert_eq!(rereg_request(-1, 0, true, ALL_CAPS), Err(EOPNOTSUPP));
    }

    #[test]
    fn cq_ex_attributes() {
        let single = sys::IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
        let flags_mask = sys::IBV_CQ_INIT_ATTR_MASK_FLAGS;
        assert!(check_cq_init_attr(0, 0, 0).is_ok());
        assert!(check_cq_init_attr(flags_mask, single, 0).is_ok());
        // Flags are only looked at with their mask bit.
        assert!(check_cq_init_attr(0, !0, 0).is_ok());
        assert_eq!(
            check_cq_init_attr(flags_mask, sys::IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, 0),
            Err(EOPNOTSUPP)
        );
        assert_eq!(
            check_cq_init_attr(sys::IBV_CQ_INIT_ATTR_MASK_PD, 0, 0),
            Err(EOPNOTSUPP)
        );
        let ts = u64::from(sys::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
        assert_eq!(check_cq_init_attr(0, 0, ts), Err(EOPNOTSUPP));
        let readers = check_cq_init_attr(0, 0, u64::from(sys::IBV_WC_EX_WITH_IMM)).unwrap();
        assert!(readers.imm_data && !readers.byte_len);
    }

    #[test]
    fn qp_types_other_than_rc_uc_and_ud_are_refused() {
        assert_eq!(qp_kind(sys::IBV_QPT_RC), Ok(QpKind::Rc));
        assert_eq!(qp_kind(sys::IBV_QPT_UC), Ok(QpKind::Uc));
        assert_eq!(qp_kind(sys::IBV_QPT_UD), Ok(QpKind::Ud));
        let pd = sys::IBV_QP_INIT_ATTR_PD | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        assert_eq!(
            check_qp_init_attr_ex(sys::IBV_QPT_UC, pd, 0, UC_SEND_OPS).map(|c| c.send_ops),
            Ok(Some(UC_SEND_OPS))
        );
        // Reads and atomics need an answer UC never gives.
        assert_eq!(
            check_qp_init_attr_ex(sys::IBV_QPT_UC, pd, 0, RC_SEND_OPS),
            Err(EOPNOTSUPP)
        );
        for t in [
            sys::IBV_QPT_XRC_SEND,
            sys::IBV_QPT_XRC_RECV,
            sys::IBV_QPT_RAW_PACKET,
            sys::IBV_QPT_DRIVER,
        ] {
            assert_eq!(qp_kind(t), Err(EOPNOTSUPP));
            let pd = sys::IBV_QP_INIT_ATTR_PD;
            assert_eq!(check_qp_init_attr_ex(t, pd, 0, 0), Err(EOPNOTSUPP));
        }
    }

    #[test]
    fn qp_ex_attributes() {
        let pd = sys::IBV_QP_INIT_ATTR_PD;
        let ops = sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        let cflags = sys::IBV_QP_INIT_ATTR_CREATE_FLAGS;
        let rc = sys::IBV_QPT_RC;
        let ud = sys::IBV_QPT_UD;
        assert_eq!(
            check_qp_init_attr_ex(rc, pd, 0, 0),
            Ok(QpCreate {
                kind: QpKind::Rc,
                send_ops: None
            })
        );
        assert_eq!(check_qp_init_attr_ex(rc, 0, 0, 0), Err(EINVAL));
        assert_eq!(
            check_qp_init_attr_ex(rc, pd | ops, 0, RC_SEND_OPS),
            Ok(QpCreate {
                kind: QpKind::Rc,
                send_ops: Some(RC_SEND_OPS)
            })
        );
        assert_eq!(
            check_qp_init_attr_ex(ud, pd | ops, 0, UD_SEND_OPS).map(|c| c.send_ops),
            Ok(Some(UD_SEND_OPS))
        );
        // RDMA on UD, and operations oxe lacks anywhere.
        let write = u64::from(sys::IBV_QP_EX_WITH_RDMA_WRITE);
        assert_eq!(
            check_qp_init_attr_ex(ud, pd | ops, 0, write),
            Err(EOPNOTSUPP)
        );
        let tso = u64::from(sys::IBV_QP_EX_WITH_TSO);
        assert_eq!(check_qp_init_attr_ex(rc, pd | ops, 0, tso), Err(EOPNOTSUPP));
        // Creation flags: the mask bit alone is fine, any flag is not.
        assert!(check_qp_init_attr_ex(rc, pd | cflags, 0, 0).is_ok());
        assert_eq!(
            check_qp_init_attr_ex(rc, pd | cflags, 1 << 1, 0),
            Err(EOPNOTSUPP)
        );
        for other in [
            sys::IBV_QP_INIT_ATTR_XRCD,
            sys::IBV_QP_INIT_ATTR_MAX_TSO_HEADER,
            sys::IBV_QP_INIT_ATTR_IND_TABLE,
            sys::IBV_QP_INIT_ATTR_RX_HASH,
        ] {
            assert_eq!(check_qp_init_attr_ex(rc, pd | other, 0, 0), Err(EOPNOTSUPP));
        }
    }

    #[test]
    fn srq_modify_masks() {
        assert_eq!(check_srq_modify(sys::IBV_SRQ_LIMIT as c_int), Ok(false));
        assert_eq!(check_srq_modify(0), Ok(false));
        assert_eq!(check_srq_modify(sys::IBV_SRQ_MAX_WR as c_int), Ok(true));
        assert_eq!(
            check_srq_modify((sys::IBV_SRQ_MAX_WR | sys::IBV_SRQ_LIMIT) as c_int),
            Ok(true)
        );
        assert_eq!(check_srq_modify(1 << 5), Err(EINVAL));
        assert_eq!(check_srq_modify(-1), Err(EINVAL));
    }
}
