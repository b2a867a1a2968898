// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Queue pairs: creation (legacy and extended), modify, query, destroy, and
//! the classic posting verbs.
//!
//! A QP is a `Box<OxeQp>` handed to C once the kernel created it and its
//! rings are mapped. The send queue and the receive queue each have their
//! own lock, so posting sends and posting receives never wait on each
//! other. A QP on an SRQ has no receive queue of its own.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr;

use oxe_core::abi::{OxeCreateQpCmd, OxeCreateQpResp, OxeRecvWqe, OxeSendWqe};
use oxe_core::Errno;

use super::cq;
use super::errno::{cmd_fd, errno_ret, set_errno};
use super::lock::Locked;
use super::qp_ex;
use super::qp_object::{recv_queue, ring_doorbell, send_queue, OxeQp};
use super::queue::MappedQueue;
use super::wr::{post_recv_list, post_send_one};
use crate::recv_queue::RecvQueue;
use crate::send_queue::SendQueue;
use crate::sys;
use crate::verbs;
use crate::wqe::QpKind;

const EINVAL: c_int = Errno::EINVAL.to_i32();

/// The kernel's reply to `CREATE_QP`: uverbs' core part, then oxe's.
#[repr(C)]
#[derive(Default)]
struct CreateQpResp {
    core: sys::ib_uverbs_create_qp_resp,
    drv: OxeCreateQpResp,
}

const _: () = assert!(offset_of!(CreateQpResp, drv) == size_of::<sys::ib_uverbs_create_qp_resp>());

/// The extended `CREATE_QP` with oxe's driver data after uverbs' command.
#[repr(C)]
#[derive(Default)]
struct CreateQpExCmd {
    core: sys::ibv_create_qp_ex,
    drv: OxeCreateQpCmd,
}

const _: () = assert!(offset_of!(CreateQpExCmd, drv) == size_of::<sys::ibv_create_qp_ex>());
const _: () = assert!(size_of::<sys::oxe_create_qp_cmd>() == size_of::<OxeCreateQpCmd>());

/// The kernel's reply to the extended `CREATE_QP`.
#[repr(C)]
#[derive(Default)]
struct CreateQpExResp {
    core: sys::ib_uverbs_ex_create_qp_resp,
    drv: OxeCreateQpResp,
}

const _: () =
    assert!(offset_of!(CreateQpExResp, drv) == size_of::<sys::ib_uverbs_ex_create_qp_resp>());

/// A zeroed QP for the `ibv_cmd_*` helper to fill in.
fn new_qp() -> *mut OxeQp {
    Box::into_raw(Box::new(OxeQp {
        vqp: sys::verbs_qp::default(),
        sq: None,
        rq: None,
    }))
}

/// Maps the rings the kernel created for `qp`.
///
/// # Safety
/// `qp` is from [`new_qp`], created in the kernel and not handed out.
unsafe fn attach_queues(
    cmd_fd: c_int,
    qp: *mut OxeQp,
    kind: QpKind,
    on_srq: bool,
    drv: &OxeCreateQpResp,
) -> Result<(), c_int> {
    let sq = MappedQueue::map(cmd_fd, &drv.sq, OxeSendWqe::SIZE)?;
    let rq = if on_srq {
        None
    } else {
        Some(MappedQueue::map(cmd_fd, &drv.rq, OxeRecvWqe::SIZE)?)
    };
    // SAFETY: `qp` is ours alone until it is returned.
    unsafe { (*qp).sq = Some(Locked::new(SendQueue::new(sq, kind, drv.max_inline))) };
    // SAFETY: as above.
    unsafe { (*qp).rq = rq.map(|mem| Locked::new(RecvQueue::new(mem))) };
    Ok(())
}

/// Undoes a creation that failed after the kernel said yes.
///
/// # Safety
/// `qp` is from [`new_qp`], created in the kernel, and not handed out.
unsafe fn abandon(qp: *mut OxeQp) {
    // SAFETY: the kernel object exists and `qp` is its `ibv_qp` (offset
    // 0). If the kernel refuses, it reclaims the QP with the context.
    unsafe { sys::ibv_cmd_destroy_qp(qp.cast::<sys::ibv_qp>()) };
    // SAFETY: from `Box::into_raw` in `new_qp`, never handed out; dropping
    // it unmaps whatever was mapped.
    drop(unsafe { Box::from_raw(qp) });
}

/// Frees a QP the kernel refused to create.
///
/// # Safety
/// `qp` is from [`new_qp`] and not handed out.
unsafe fn discard(qp: *mut OxeQp, err: c_int) -> *mut sys::ibv_qp {
    // SAFETY: from `Box::into_raw` in `new_qp`, never handed out.
    drop(unsafe { Box::from_raw(qp) });
    set_errno(err);
    ptr::null_mut()
}

/// `create_qp` (`ibv_create_qp()`, and `ibv_create_qp_ex()` with only a
/// PD).
///
/// # Safety
/// libibverbs' arguments: a live PD and the caller's attributes, whose
/// CQs and SRQ are live objects of this provider.
pub(crate) unsafe extern "C" fn create_qp(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
) -> *mut sys::ibv_qp {
    // SAFETY: the caller's attributes, valid for the call; the reference
    // ends before `attr` is passed on.
    let a = unsafe { &*attr };
    let (qp_type, on_srq) = (a.qp_type, !a.srq.is_null());
    let kind = match verbs::qp_kind(qp_type) {
        Ok(kind) => kind,
        Err(err) => {
            set_errno(err);
            return ptr::null_mut();
        }
    };
    let qp = new_qp();
    let mut cmd = sys::ibv_create_qp::default();
    let mut resp = CreateQpResp::default();
    // SAFETY: `qp` is a fresh allocation starting with its `ibv_qp`, which
    // the helper fills in (its address is the kernel's user handle: it is
    // boxed, so it does not move); `cmd` carries no driver data; the
    // response pointer is derived from all of `resp` so the driver part
    // may be written. The helper copies the granted capacities into
    // `attr->cap`.
    let ret = unsafe {
        sys::ibv_cmd_create_qp(
            pd,
            qp.cast::<sys::ibv_qp>(),
            attr,
            &mut cmd,
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_create_qp_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: not handed out.
        return unsafe { discard(qp, ret) };
    }
    // SAFETY: a live PD.
    let context = unsafe { (*pd).context };
    // SAFETY: a live PD's context is live.
    let cmd_fd = unsafe { cmd_fd(context) };
    // SAFETY: created in the kernel above and not handed out.
    if let Err(err) = unsafe { attach_queues(cmd_fd, qp, kind, on_srq, &resp.drv) } {
        // SAFETY: as above.
        unsafe { abandon(qp) };
        set_errno(err);
        return ptr::null_mut();
    }
    qp.cast::<sys::ibv_qp>()
}

/// `create_qp_ex` (`ibv_create_qp_ex()` with more than a PD): the same QPs,
/// optionally with the `ibv_wr_*` posting API
/// (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`).
///
/// # Safety
/// libibverbs' arguments: a live context and the caller's attributes, whose
/// PD, CQs and SRQ are live objects of this provider.
pub(crate) unsafe extern "C" fn create_qp_ex(
    context: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    // SAFETY: the same contract.
    unsafe { create_qp_with(context, attr, 0) }
}

/// [`create_qp_ex`] with `OXE_CREATE_QP_*` flags for the kernel (from
/// `oxedv_create_qp()`).
///
/// # Safety
/// As for [`create_qp_ex`].
pub(crate) unsafe fn create_qp_with(
    context: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
    oxe_flags: u32,
) -> *mut sys::ibv_qp {
    // SAFETY: the caller's attributes, valid for the call; the reference
    // ends before `attr` is passed on.
    let a = unsafe { &*attr };
    let on_srq = !a.srq.is_null();
    let checked =
        verbs::check_qp_init_attr_ex(a.qp_type, a.comp_mask, a.create_flags, a.send_ops_flags);
    let create = match checked {
        Ok(create) => create,
        Err(err) => {
            set_errno(err);
            return ptr::null_mut();
        }
    };
    let qp = new_qp();
    let mut cmd = CreateQpExCmd {
        drv: OxeCreateQpCmd {
            flags: oxe_flags,
            reserved: 0,
        },
        ..Default::default()
    };
    let mut resp = CreateQpExResp::default();
    // SAFETY: as in `create_qp`, with the `verbs_qp` at offset 0; the
    // command pointer and size cover uverbs' part and oxe's driver data.
    let ret = unsafe {
        super::pabi::cmd_create_qp_ex2(
            context,
            qp.cast::<sys::verbs_qp>(),
            attr,
            (&raw mut cmd).cast::<sys::ibv_create_qp_ex>(),
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_ex_create_qp_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: not handed out.
        return unsafe { discard(qp, ret) };
    }
    // SAFETY: a live context.
    let cmd_fd = unsafe { cmd_fd(context) };
    // SAFETY: created in the kernel above and not handed out.
    if let Err(err) = unsafe { attach_queues(cmd_fd, qp, create.kind, on_srq, &resp.drv) } {
        // SAFETY: as above.
        unsafe { abandon(qp) };
        set_errno(err);
        return ptr::null_mut();
    }
    if let Some(ops) = create.send_ops {
        // SAFETY: the `ibv_qp_ex` view of the `verbs_qp` at offset 0,
        // ours alone until returned.
        qp_ex::install(unsafe { &mut *qp.cast::<sys::ibv_qp_ex>() }, ops);
        // `ibv_qp_to_qp_ex()` hands out the `ibv_qp_ex` only with this bit,
        // which the helper cleared.
        // SAFETY: as above.
        unsafe { (*qp).vqp.comp_mask |= sys::VERBS_QP_EX };
    }
    qp.cast::<sys::ibv_qp>()
}

/// `modify_qp` (`ibv_modify_qp()`).
///
/// # Safety
/// libibverbs' arguments: a live QP of this provider and the caller's
/// attributes.
pub(crate) unsafe extern "C" fn modify_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    let mut cmd = sys::ibv_modify_qp::default();
    // SAFETY: the caller's pointers; `cmd` is a live local of its size.
    let ret = unsafe { sys::ibv_cmd_modify_qp(qp, attr, attr_mask, &mut cmd, size_of_val(&cmd)) };
    // SAFETY: the caller's attributes, read only when the mask names them.
    let reset = ret == 0
        && attr_mask & sys::IBV_QP_STATE as c_int != 0
        && unsafe { (*attr).qp_state } == sys::IBV_QPS_RESET;
    if reset {
        // The completions of the QP's life before the reset go with it.
        // SAFETY: a live QP, per the contract; its CQs outlive it.
        unsafe { purge_completions(qp) };
    }
    errno_ret(ret)
}

/// `query_qp` (`ibv_query_qp()`).
///
/// # Safety
/// libibverbs' arguments: a live QP of this provider and the caller's
/// buffers.
pub(crate) unsafe extern "C" fn query_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut sys::ibv_qp_init_attr,
) -> c_int {
    let mut cmd = sys::ibv_query_qp::default();
    // SAFETY: the caller's pointers; `cmd` is a live local of its size.
    errno_ret(unsafe {
        sys::ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &mut cmd, size_of_val(&cmd))
    })
}

/// Drops the unread completions of `qp` from its CQs.
///
/// # Safety
/// `qp` points to a QP of this provider whose CQs are live.
unsafe fn purge_completions(qp: *const sys::ibv_qp) {
    // SAFETY: per the contract.
    let qp = unsafe { &*qp };
    let recv_cq = Some(qp.recv_cq).filter(|&cq| cq != qp.send_cq);
    for cq in [Some(qp.send_cq), recv_cq].into_iter().flatten() {
        if !cq.is_null() {
            // SAFETY: a live CQ of this provider (libibverbs created the QP
            // with it).
            unsafe { cq::purge_qp(cq, qp.qp_num) };
        }
    }
}

/// `destroy_qp` (`ibv_destroy_qp()`). The QP's completions not yet polled
/// go with it, as mlx4's and mlx5's: the application may free its buffers
/// once the QP is gone, and a receive that came inline would otherwise be
/// copied into them by the next poll of a CQ the QP shared.
///
/// # Safety
/// `qp` must come from this provider; on success it must not be used again.
pub(crate) unsafe extern "C" fn destroy_qp(qp: *mut sys::ibv_qp) -> c_int {
    // SAFETY: a live QP of this provider.
    let ret = unsafe { sys::ibv_cmd_destroy_qp(qp) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // The kernel makes no more completions for it. Its CQs outlive it
    // (libibverbs refuses to destroy a CQ a QP still uses).
    // SAFETY: `qp` is still allocated (freed below) and names its CQs.
    unsafe { purge_completions(qp) };
    // SAFETY: the kernel object is gone and `qp` is the `OxeQp` Box a
    // create verb leaked; dropping it unmaps the rings.
    drop(unsafe { Box::from_raw(qp.cast::<OxeQp>()) });
    0
}

/// `post_send` (`ibv_post_send()`): writes every request up to the first
/// bad one (which `bad_wr` then names), publishes them, and rings the
/// doorbell once.
///
/// # Safety
/// libibverbs' arguments: a live QP of this provider, the application's
/// NULL-terminated list of valid requests, and NULL or a writable `bad_wr`.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad_wr: *mut *mut sys::ibv_send_wr,
) -> c_int {
    // SAFETY: a live QP.
    let Some(sq) = (unsafe { send_queue(qp) }) else {
        return errno_ret(EINVAL);
    };
    // SAFETY: a live QP; libibverbs keeps `state` current across modify_qp.
    if !crate::verbs::send_allowed(unsafe { (*qp).state }) {
        if !bad_wr.is_null() {
            // SAFETY: writable, per the contract.
            unsafe { *bad_wr = wr };
        }
        return errno_ret(EINVAL);
    }
    let mut err = 0;
    let mut posted = false;
    {
        let mut sq = sq.lock();
        let mut next = wr;
        while !next.is_null() {
            // SAFETY: a non-NULL entry of the application's list.
            let w = unsafe { &*next };
            // SAFETY: per this function's contract.
            if let Err(e) = unsafe { post_send_one(&mut sq, w) } {
                err = e;
                if !bad_wr.is_null() {
                    // SAFETY: writable, per the contract.
                    unsafe { *bad_wr = next };
                }
                break;
            }
            posted = true;
            next = w.next;
        }
        if posted {
            sq.publish();
        }
    }
    if posted {
        // SAFETY: a live QP.
        if let Err(e) = unsafe { ring_doorbell(qp) } {
            if err == 0 {
                err = e;
            }
        }
    }
    errno_ret(err)
}

/// `post_recv` (`ibv_post_recv()`). A QP on an SRQ has no receive queue:
/// its receives go to the SRQ, so posting here is `EINVAL`.
///
/// # Safety
/// As for [`post_send`], with receive requests.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    // SAFETY: a live QP.
    let Some(rq) = (unsafe { recv_queue(qp) }) else {
        if !bad_wr.is_null() {
            // SAFETY: writable, per the contract.
            unsafe { *bad_wr = wr };
        }
        return errno_ret(EINVAL);
    };
    // SAFETY: a live QP; libibverbs keeps `state` current across modify_qp.
    if !crate::verbs::recv_allowed(unsafe { (*qp).state }) {
        if !bad_wr.is_null() {
            // SAFETY: writable, per the contract.
            unsafe { *bad_wr = wr };
        }
        return errno_ret(EINVAL);
    }
    // SAFETY: per this function's contract.
    errno_ret(unsafe { post_recv_list(rq, wr, bad_wr) })
}
