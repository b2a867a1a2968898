// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! Memory windows: `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw`.
//!
//! Allocation is a plain uverbs command; the kernel picks the rkey. A type 1
//! window is bound by `ibv_bind_mw`, which this provider posts to the QP's
//! send queue as a bind request carrying the next rkey (`ibv_inc_rkey`), as
//! IBTA has the Bind Memory Window verb do; the kernel carries it out in
//! send queue order and completes it like any request. Type 2 windows are
//! bound by the application's own bind requests (`wr`, `qp_ex`).

use core::ffi::c_int;
use core::mem::size_of_val;
use core::ptr;

use oxe_core::Errno;

use super::errno::{errno_ret, set_errno};
use super::qp_object::{ring_doorbell, send_queue};
use crate::sys;
use crate::wqe::{BindObjects, Remote, SendOp, SendWr};

const EINVAL: c_int = Errno::EINVAL.to_i32();

/// `alloc_mw` (`ibv_alloc_mw()`).
///
/// # Safety
/// `pd` must be a live PD of this provider.
pub(crate) unsafe extern "C" fn alloc_mw(
    pd: *mut sys::ibv_pd,
    ty: sys::ibv_mw_type,
) -> *mut sys::ibv_mw {
    let mw = Box::into_raw(Box::<sys::ibv_mw>::default());
    let mut cmd = sys::ibv_alloc_mw::default();
    let mut resp = sys::ib_uverbs_alloc_mw_resp::default();
    // SAFETY: `mw` is a fresh allocation the helper fills in (context, pd,
    // rkey, handle, type); `cmd` and `resp` are live locals of the sizes given.
    let ret = unsafe {
        sys::ibv_cmd_alloc_mw(
            pd,
            ty,
            mw,
            &mut cmd,
            size_of_val(&cmd),
            &mut resp,
            size_of_val(&resp),
        )
    };
    if ret != 0 {
        // SAFETY: `mw` came from `Box::into_raw` above and was not handed out.
        drop(unsafe { Box::from_raw(mw) });
        set_errno(ret);
        return ptr::null_mut();
    }
    mw
}

/// `dealloc_mw` (`ibv_dealloc_mw()`).
///
/// # Safety
/// `mw` must come from [`alloc_mw`]; on success it must not be used again.
pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut sys::ibv_mw) -> c_int {
    // SAFETY: a live window of this provider.
    let ret = unsafe { sys::ibv_cmd_dealloc_mw(mw) };
    if ret != 0 {
        return errno_ret(ret);
    }
    // SAFETY: the kernel object is gone and `mw` is the Box `alloc_mw` leaked.
    drop(unsafe { Box::from_raw(mw) });
    0
}

/// The next key of a window or an indirect key: same index, low byte plus
/// one (`ibv_inc_rkey`).
pub(crate) fn next_rkey(rkey: u32) -> u32 {
    oxe_core::key::Key::from_raw(rkey).next().raw()
}

/// A bind's operands for `mw` with `info` and new rkey `rkey`, as a
/// [`SendWr`] of [`SendOp::Bind`] carries them (`remote` and `bind`).
///
/// # Safety
/// `mw` is a live window; `info.mr` is NULL or a live MR.
pub(crate) unsafe fn bind_operands(
    mw: *const sys::ibv_mw,
    rkey: u32,
    info: &sys::ibv_mw_bind_info,
) -> (Remote, BindObjects) {
    let mr_lkey = if info.mr.is_null() {
        0
    } else {
        // SAFETY: a live MR, per the contract.
        unsafe { (*info.mr).lkey }
    };
    let remote = Remote {
        addr: info.addr,
        rkey,
        compare_add: info.length,
        swap: u64::from(info.mw_access_flags),
    };
    let objects = BindObjects {
        // SAFETY: a live window, per the contract.
        mw_rkey: unsafe { (*mw).rkey },
        mr_lkey,
    };
    (remote, objects)
}

/// `bind_mw` (`ibv_bind_mw()`): type 1 windows only (IBTA: type 2 windows
/// are bound by a bind work request the application posts).
///
/// # Safety
/// `qp` and `mw` are live objects of this provider; `mw_bind` is readable.
pub(crate) unsafe extern "C" fn bind_mw(
    qp: *mut sys::ibv_qp,
    mw: *mut sys::ibv_mw,
    mw_bind: *mut sys::ibv_mw_bind,
) -> c_int {
    if qp.is_null() || mw.is_null() || mw_bind.is_null() {
        return errno_ret(EINVAL);
    }
    // SAFETY: a live window, per the contract.
    let ty = unsafe { (*mw).type_ };
    // SAFETY: a readable request, per the contract.
    let bind = unsafe { &*mw_bind };
    if ty != sys::IBV_MW_TYPE_1 {
        return errno_ret(EINVAL);
    }
    // SAFETY: a live QP; libibverbs keeps `state` current across modify_qp.
    if !crate::verbs::send_allowed(unsafe { (*qp).state }) {
        return errno_ret(EINVAL);
    }
    // SAFETY: as above.
    let Some(sq) = (unsafe { send_queue(qp) }) else {
        return errno_ret(EINVAL);
    };
    // SAFETY: a live window.
    let rkey = next_rkey(unsafe { (*mw).rkey });
    let mut wr = SendWr::new(bind.wr_id, SendOp::Bind, bind.send_flags);
    // SAFETY: a live window; the application's MR is NULL or live.
    (wr.remote, wr.bind) = unsafe { bind_operands(mw, rkey, &bind.bind_info) };
    {
        let mut sq = sq.lock();
        if let Err(e) = sq.post_sges(&wr, &[]) {
            return errno_ret(e);
        }
        sq.publish();
    }
    // IBTA: the window answers to the new rkey once the bind is posted; a
    // bind that fails completes in error and moves the QP to error, after
    // which the window's key no longer matters to this QP.
    // SAFETY: a live window, which the application does not use concurrently.
    unsafe { (*mw).rkey = rkey };
    // SAFETY: a live QP.
    errno_ret(unsafe { ring_doorbell(qp) }.err().unwrap_or(0))
}
