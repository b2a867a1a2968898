// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! oxe's direct verbs (`include/oxedv.h`): the functions the provider
//! exports for applications, as libmlx5 exports `mlx5dv_*`. They are the
//! provider's only dynamic symbols; libibverbs itself still reaches the
//! provider only through its constructor.

use core::ffi::{c_int, CStr};
use core::ptr;

use oxe_core::Errno;

use super::context::context_info;
use super::errno::{errno_ret, set_errno};
use super::qp::create_qp_with;
use crate::sys;
use crate::verbs;

const EINVAL: c_int = Errno::EINVAL.to_i32();

// Every direct verb is versioned, as libmlx5's are: `OXEDV_1.0` is defined
// by `liboxe.map` (passed to the linker by build.rs), and these directives
// bind each symbol to it as its default version. rustc hands the linker a
// version script of its own, which leaves exported symbols unversioned, so
// the map alone does not do it. A later incompatible change gets a new
// node, and programs linked against this one keep finding theirs.
core::arch::global_asm!(
    ".symver oxedv_is_supported, oxedv_is_supported@@@OXEDV_1.0",
    ".symver oxedv_query_device, oxedv_query_device@@@OXEDV_1.0",
    ".symver oxedv_create_qp, oxedv_create_qp@@@OXEDV_1.0",
    ".symver oxedv_create_mkey, oxedv_create_mkey@@@OXEDV_1.0",
    ".symver oxedv_destroy_mkey, oxedv_destroy_mkey@@@OXEDV_1.0",
    ".symver oxedv_wr_mr_list, oxedv_wr_mr_list@@@OXEDV_1.0",
    ".symver oxedv_wr_mr_interleaved, oxedv_wr_mr_interleaved@@@OXEDV_1.0",
);

/// Whether `context` is open on an oxe device.
///
/// # Safety
/// `context` is NULL or a live context.
pub(super) unsafe fn is_oxe_context(context: *mut sys::ibv_context) -> bool {
    if context.is_null() {
        return false;
    }
    // SAFETY: a live context, per the contract.
    let device = unsafe { (*context).device };
    // SAFETY: a live context's device is live.
    unsafe { is_oxe(device) }
}

/// Whether `device` is driven by this provider: its `verbs_device_ops`
/// carry oxe's name (libibverbs gives every provider's devices the ops
/// that provider registered).
///
/// # Safety
/// `device` is NULL or a device from `ibv_get_device_list()` whose list
/// has not been freed.
unsafe fn is_oxe(device: *mut sys::ibv_device) -> bool {
    if device.is_null() {
        return false;
    }
    // SAFETY: every `ibv_device` libibverbs hands out is the first member
    // of a `verbs_device`, live per the contract.
    let ops = unsafe { (*device.cast::<sys::verbs_device>()).ops };
    if ops.is_null() {
        return false;
    }
    // SAFETY: a registered provider's ops are static.
    let name = unsafe { (*ops).name };
    // SAFETY: with a NUL-terminated name.
    !name.is_null() && unsafe { CStr::from_ptr(name) } == c"oxe"
}

/// `oxedv_is_supported()`.
///
/// # Safety
/// As for [`is_oxe`].
#[no_mangle]
unsafe extern "C" fn oxedv_is_supported(device: *mut sys::ibv_device) -> bool {
    // SAFETY: the caller's contract.
    unsafe { is_oxe(device) }
}

/// `oxedv_query_device()`.
///
/// # Safety
/// `context` is a live context and `attr` points to writable memory for
/// one `oxedv_device_attr`.
#[no_mangle]
unsafe extern "C" fn oxedv_query_device(
    context: *mut sys::ibv_context,
    attr: *mut sys::oxedv_device_attr,
) -> c_int {
    // SAFETY: NULL or live, per the contract.
    if attr.is_null() || !unsafe { is_oxe_context(context) } {
        return errno_ret(EINVAL);
    }
    // SAFETY: the caller's attributes.
    if unsafe { (*attr).comp_mask } != 0 {
        return errno_ret(EINVAL);
    }
    // SAFETY: an oxe device's context is one of ours.
    let info = unsafe { context_info(context) };
    // SAFETY: as above; every field is written.
    unsafe {
        attr.write(sys::oxedv_device_attr {
            comp_mask: 0,
            inline_recv_max: info.inline_recv_max,
            reserved: 0,
        })
    };
    0
}

/// `oxedv_create_qp()`: `ibv_create_qp_ex()` with oxe's attributes.
///
/// # Safety
/// `context` is a live context, `qp_attr` the caller's attributes as for
/// `ibv_create_qp_ex()`, and `oxe_attr` NULL or the caller's attributes.
#[no_mangle]
unsafe extern "C" fn oxedv_create_qp(
    context: *mut sys::ibv_context,
    qp_attr: *mut sys::ibv_qp_init_attr_ex,
    oxe_attr: *mut sys::oxedv_qp_init_attr,
) -> *mut sys::ibv_qp {
    // SAFETY: NULL or live, per the contract.
    if qp_attr.is_null() || !unsafe { is_oxe_context(context) } {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let flags = if oxe_attr.is_null() {
        Ok(0)
    } else {
        // SAFETY: the caller's attributes, valid for the call.
        let a = unsafe { &*oxe_attr };
        verbs::oxedv_qp_flags(a.comp_mask, a.create_flags)
    };
    match flags {
        // SAFETY: the caller's contract is `ibv_create_qp_ex()`'s, which is
        // `create_qp_with`'s, with an oxe context.
        Ok(flags) => unsafe { create_qp_with(context, qp_attr, flags) },
        Err(err) => {
            set_errno(err);
            ptr::null_mut()
        }
    }
}
