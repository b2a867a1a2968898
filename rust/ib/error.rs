// SPDX-License-Identifier: GPL-2.0

//! Error conventions at the C boundary: negative errno for `int`, ERR_PTR for pointers.

use crate::bindings as b;
use crate::oxe_core::Errno;
use kernel::prelude::*;

/// An `int`-returning callback's value for a result.
pub(crate) fn to_c_int(r: Result) -> kernel::ffi::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// An ERR_PTR carrying `e`, for pointer-returning callbacks.
pub(crate) fn err_ptr<T>(e: Error) -> *mut T {
    // SAFETY: ERR_PTR only encodes the (negative) errno in a pointer value.
    unsafe { b::ERR_PTR(e.to_errno() as isize) }.cast()
}

/// Splits an ERR_PTR-or-pointer returned by C.
pub(super) fn from_err_ptr<T>(p: *mut T) -> Result<*mut T> {
    // SAFETY: IS_ERR/PTR_ERR only inspect the pointer value.
    if unsafe { b::IS_ERR(p.cast()) } {
        // SAFETY: as above.
        let e = unsafe { b::PTR_ERR(p.cast()) };
        return Err(Error::from_errno(e as i32));
    }
    Ok(p)
}

/// oxe-core's errno as a kernel error.
pub(crate) fn from_core(e: Errno) -> Error {
    Error::from_errno(e.to_neg_i32())
}
