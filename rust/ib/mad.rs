// SPDX-License-Identifier: GPL-2.0

//! ops.process_mad: ib_core's MAD layer and sysfs hand the driver a MAD
//! to answer ([`Driver::process_mad`]).

use super::driver::Driver;
use crate::bindings as b;
use crate::oxe_core::pma::{Answer, MAD_LEN};
use kernel::ffi::c_int;

// A MAD is the 256 bytes the answering code works on.
const _: () = assert!(core::mem::size_of::<b::ib_mad>() == MAD_LEN);

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn process_mad<D: Driver>(
    ib: *mut b::ib_device,
    _flags: c_int,
    port: u32,
    _in_wc: *const b::ib_wc,
    _in_grh: *const b::ib_grh,
    in_mad: *const b::ib_mad,
    out_mad: *mut b::ib_mad,
    _out_mad_size: *mut usize,
    _out_mad_pkey_index: *mut u16,
) -> c_int {
    let failure = b::ib_mad_result_IB_MAD_RESULT_FAILURE as c_int;
    let success = b::ib_mad_result_IB_MAD_RESULT_SUCCESS as c_int;
    let reply = b::ib_mad_result_IB_MAD_RESULT_REPLY as c_int;
    // SAFETY: callback on a registered device.
    let Ok((_, drv)) = (unsafe { super::ops::dev_of::<D>(ib) }) else {
        return failure;
    };
    if in_mad.is_null() || out_mad.is_null() {
        return failure;
    }
    // SAFETY: ib_core passes a whole MAD to read and another, distinct one
    // to write (at least `MAD_LEN` bytes each, checked above), both plain bytes.
    let (req, resp) = unsafe {
        (
            &*in_mad.cast::<[u8; MAD_LEN]>(),
            &mut *out_mad.cast::<[u8; MAD_LEN]>(),
        )
    };
    match drv.process_mad(port, req, resp) {
        Ok(Answer::Reply) => success | reply,
        // Not ours: ib_core's MAD layer passes it to its agents.
        Ok(Answer::NotMine) => success,
        Err(_) => failure,
    }
}
