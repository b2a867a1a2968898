// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! errno and the uverbs file descriptor: the helpers every entry point
//! shares (a leaf: it uses nothing else of `ffi`).

use core::ffi::c_int;

use crate::sys;

/// Sets the calling thread's `errno`, for verbs that report failure as NULL.
pub(crate) fn set_errno(err: c_int) {
    // SAFETY: a plain libc call with no arguments.
    let errno = unsafe { sys::__errno_location() };
    // SAFETY: glibc's `__errno_location` always returns a valid, aligned
    // pointer to the calling thread's errno.
    unsafe { *errno = err };
}

/// The calling thread's `errno`, after a libc call failed.
pub(crate) fn errno() -> c_int {
    // SAFETY: a plain libc call with no arguments.
    let errno = unsafe { sys::__errno_location() };
    // SAFETY: glibc's `__errno_location` always returns a valid, aligned
    // pointer to the calling thread's errno.
    unsafe { *errno }
}

/// The uverbs file descriptor of a context: what queues are mapped from
/// and the send doorbell is written to.
///
/// # Safety
/// `context` must be a live context.
pub(crate) unsafe fn cmd_fd(context: *mut sys::ibv_context) -> c_int {
    // SAFETY: a live context, per the contract; libibverbs sets the field
    // once, before any verb runs.
    unsafe { (*context).cmd_fd }
}

/// Returns `ret` (a positive errno from an `ibv_cmd_*` helper, or 0) after
/// making sure `errno` agrees with it.
pub(crate) fn errno_ret(ret: c_int) -> c_int {
    if ret != 0 {
        set_errno(ret);
    }
    ret
}
