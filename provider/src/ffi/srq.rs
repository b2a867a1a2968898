// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Shared receive queues: create, modify, query, destroy and posting.
//!
//! An SRQ is a `Box<OxeSrq>` handed to C once the kernel created it and
//! its ring is mapped; its ring is filled exactly like a QP's RQ.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, size_of_val};
use core::ptr;

use oxe_core::abi::{OxeCreateSrqResp, OxeModifySrqCmd, OxeRecvWqe, OxeResizeSrqResp};
use oxe_core::Errno;

use super::errno::{cmd_fd, errno_ret, set_errno};
use super::lock::Locked;
use super::queue::MappedQueue;
use super::wr::post_recv_list;
use crate::recv_queue::RecvQueue;
use crate::sys;
use crate::verbs;

/// The provider's SRQ: libibverbs' `verbs_srq`, then the mapped ring.
#[repr(C)]
struct OxeSrq {
    /// Must stay first: libibverbs' `ibv_srq` pointers are `OxeSrq`
    /// pointers.
    vsrq: sys::verbs_srq,
    /// Set before the SRQ is handed out; `None` only during creation.
    rq: Option<Locked<RecvQueue<MappedQueue>>>,
}

const _: () = assert!(offset_of!(OxeSrq, vsrq) == 0);

/// The kernel's reply to `CREATE_SRQ`: uverbs' core part, then oxe's.
#[repr(C)]
#[derive(Default)]
struct CreateSrqResp {
    core: sys::ib_uverbs_create_srq_resp,
    drv: OxeCreateSrqResp,
}

const _: () =
    assert!(offset_of!(CreateSrqResp, drv) == size_of::<sys::ib_uverbs_create_srq_resp>());

/// `create_srq` (`ibv_create_srq()`).
///
/// # Safety
/// libibverbs' arguments: a live PD and the caller's attributes.
pub(crate) unsafe extern "C" fn create_srq(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_srq_init_attr,
) -> *mut sys::ibv_srq {
    let srq = Box::into_raw(Box::new(OxeSrq {
        vsrq: sys::verbs_srq::default(),
        rq: None,
    }));
    let mut cmd = sys::ibv_create_srq::default();
    let mut resp = CreateSrqResp::default();
    // SAFETY: `srq` is a fresh allocation starting with its `ibv_srq`,
    // which the helper fills in (its address is the kernel's user handle:
    // it is boxed, so it does not move); `cmd` carries no driver data; the
    // response pointer is derived from all of `resp` so the driver part
    // may be written. The helper copies the granted sizes into `attr`.
    let ret = unsafe {
        sys::ibv_cmd_create_srq(
            pd,
            srq.cast::<sys::ibv_srq>(),
            attr,
            &mut cmd,
            size_of_val(&cmd),
            (&raw mut resp).cast::<sys::ib_uverbs_create_srq_resp>(),
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: from `Box::into_raw` above, not handed out.
        drop(unsafe { Box::from_raw(srq) });
        set_errno(ret);
        return ptr::null_mut();
    }
    // SAFETY: a live PD.
    let context = unsafe { (*pd).context };
    // SAFETY: a live PD's context is live.
    let cmd_fd = unsafe { cmd_fd(context) };
    match MappedQueue::map(cmd_fd, &resp.drv.srq, OxeRecvWqe::SIZE) {
        Ok(mem) => {
            // SAFETY: `srq` is ours alone until returned.
            unsafe { (*srq).rq = Some(Locked::new(RecvQueue::new(mem))) };
            // SAFETY: as above.
            unsafe { (*srq).vsrq.srq_num = resp.drv.srq_num };
            srq.cast::<sys::ibv_srq>()
        }
        Err(err) => {
            // SAFETY: the kernel object exists and `srq` is its `ibv_srq`;
            // if the kernel refuses, it reclaims the SRQ with the context.
            unsafe { sys::ibv_cmd_destroy_srq(srq.cast::<sys::ibv_srq>()) };
            // SAFETY: from `Box::into_raw` above, not handed out.
            drop(unsafe { Box::from_raw(srq) });
            set_errno(err);
            ptr::null_mut()
        }
    }
}

/// `MODIFY_SRQ` with oxe's driver data: where a resize's reply goes.
#[repr(C)]
#[derive(Default)]
struct ModifySrqCmd {
    core: sys::ibv_modify_srq,
    drv: OxeModifySrqCmd,
}

const _: () = assert!(offset_of!(ModifySrqCmd, drv) == size_of::<sys::ibv_modify_srq>());
const _: () = assert!(size_of::<sys::oxe_modify_srq_cmd>() == size_of::<OxeModifySrqCmd>());
const _: () = assert!(size_of::<sys::oxe_resize_srq_resp>() == size_of::<OxeResizeSrqResp>());

/// `modify_srq` (`ibv_modify_srq()`): arming the limit, and resizing
/// (`IBV_SRQ_MAX_WR`), after which the kernel's new ring is mapped in
/// place of the old one.
///
/// uverbs' `MODIFY_SRQ` has no reply, so the command tells the kernel
/// where to write the new ring's description. A resize keeps the SRQ
/// locked from before the system call until the new ring is in place, so
/// no post lands in a ring the kernel has left. Should the new ring fail
/// to map (the kernel has moved to it by then), the error is returned and
/// the SRQ keeps the old ring, whose receives the kernel no longer sees,
/// as with rxe.
///
/// # Safety
/// libibverbs' arguments: a live SRQ of this provider and the caller's
/// attributes.
pub(crate) unsafe extern "C" fn modify_srq(
    srq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
    attr_mask: c_int,
) -> c_int {
    let resize = match verbs::check_srq_modify(attr_mask) {
        Ok(resize) => resize,
        Err(err) => return errno_ret(err),
    };
    let mut cmd = ModifySrqCmd::default();
    if !resize {
        // SAFETY: the caller's pointers; `cmd` is a live local of its size.
        return errno_ret(unsafe {
            sys::ibv_cmd_modify_srq(srq, attr, attr_mask, &mut cmd.core, size_of_val(&cmd))
        });
    }
    // SAFETY: a live `OxeSrq` (the `ibv_srq` is at offset 0); `rq` is only
    // written before the SRQ is handed out.
    let Some(rq) = (unsafe { (*srq.cast::<OxeSrq>()).rq.as_ref() }) else {
        return errno_ret(Errno::EINVAL.to_i32());
    };
    let mut rq = rq.lock();
    let mut resp = OxeResizeSrqResp::default();
    cmd.drv = OxeModifySrqCmd {
        resize_resp: (&raw mut resp) as u64,
        resize_resp_len: size_of_val(&resp) as u32,
        reserved: 0,
    };
    // SAFETY: the caller's pointers; `cmd` is a live local of its size,
    // and `resp`, which the kernel writes through the address in it, lives
    // past the call.
    let ret =
        unsafe { sys::ibv_cmd_modify_srq(srq, attr, attr_mask, &mut cmd.core, size_of_val(&cmd)) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: a live SRQ.
    let context = unsafe { (*srq).context };
    // SAFETY: a live SRQ's context is live.
    let cmd_fd = unsafe { cmd_fd(context) };
    match MappedQueue::map(cmd_fd, &resp.srq, OxeRecvWqe::SIZE) {
        Ok(mem) => {
            // The old mapping goes here, unmapped on drop.
            drop(rq.replace_mem(mem));
            0
        }
        Err(err) => errno_ret(err),
    }
}

/// `query_srq` (`ibv_query_srq()`).
///
/// # Safety
/// libibverbs' arguments: a live SRQ of this provider and the caller's
/// buffer.
pub(crate) unsafe extern "C" fn query_srq(
    srq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
) -> c_int {
    let mut cmd = sys::ibv_query_srq::default();
    // SAFETY: the caller's pointers; `cmd` is a live local of its size.
    errno_ret(unsafe { sys::ibv_cmd_query_srq(srq, attr, &mut cmd, size_of_val(&cmd)) })
}

/// `destroy_srq` (`ibv_destroy_srq()`).
///
/// # Safety
/// `srq` must come from [`create_srq`]; on success it must not be used
/// again.
pub(crate) unsafe extern "C" fn destroy_srq(srq: *mut sys::ibv_srq) -> c_int {
    // SAFETY: a live SRQ of this provider.
    let ret = unsafe { sys::ibv_cmd_destroy_srq(srq) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: the kernel object is gone and `srq` is the `OxeSrq` Box
    // `create_srq` leaked; dropping it unmaps the ring.
    drop(unsafe { Box::from_raw(srq.cast::<OxeSrq>()) });
    0
}

/// `post_srq_recv` (`ibv_post_srq_recv()`).
///
/// # Safety
/// libibverbs' arguments: a live SRQ of this provider, the application's
/// NULL-terminated list of valid requests, and NULL or a writable `bad_wr`.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut sys::ibv_srq,
    wr: *mut sys::ibv_recv_wr,
    bad_wr: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    // SAFETY: a live `OxeSrq` (the `ibv_srq` is at offset 0); `rq` is only
    // written before the SRQ is handed out.
    let Some(rq) = (unsafe { (*srq.cast::<OxeSrq>()).rq.as_ref() }) else {
        return errno_ret(Errno::EINVAL.to_i32());
    };
    // SAFETY: per this function's contract.
    errno_ret(unsafe { post_recv_list(rq, wr, bad_wr) })
}
