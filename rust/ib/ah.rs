// SPDX-License-Identifier: GPL-2.0

//! Address handle verbs. User AHs get a number (from the driver) that
//! send WQEs carry; kernel AHs are found through the ib_ah itself, since
//! they may be created in atomic context.

use super::av::Ah;
use super::driver::Driver;
use super::error::to_c_int;
use super::objects::{Obj, PdId};
use super::ops::dev_of;
use super::udata::UData;
use crate::bindings as b;
use crate::oxe_core::abi::OxeCreateAhResp;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The memory ib_core allocates for an address handle, with the number a
/// user AH has in the device's table (0 for a kernel AH).
pub(super) type AhObj = Obj<b::ib_ah, Ah, u32>;

/// # Safety
///
/// `ibah` is an oxe AH that stays alive while the result is used.
pub(super) unsafe fn get<'a>(ibah: *mut b::ib_ah) -> Option<&'a Arc<Ah>> {
    if ibah.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    unsafe { AhObj::get(ibah) }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn create_ah<D: Driver>(
    ibah: *mut b::ib_ah,
    init: *mut b::rdma_ah_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated AH of this device.
        let (_, drv) = unsafe { dev_of::<D>((*ibah).device) }?;
        // SAFETY: ib_core's attributes for the call.
        let av = super::qp::av_of(unsafe { &*(*init).ah_attr }).ok_or(EINVAL)?;
        // Kernel AHs may be created in atomic context.
        let flags = if udata.is_null() {
            GFP_ATOMIC
        } else {
            GFP_KERNEL
        };
        // SAFETY: the AH's PD, set by ib_core, a PD of this device.
        let pd = unsafe { PdId::of((*ibah).pd) };
        let ah = Arc::new(Ah { av, pd }, flags)?;
        let mut num = 0;
        if !udata.is_null() {
            num = drv.add_user_ah(&ah)?;
            let resp = OxeCreateAhResp {
                ah_num: num,
                reserved: 0,
            };
            // SAFETY: the call's udata.
            if let Err(e) = unsafe { UData::new(udata) }.respond(&resp.to_bytes()) {
                drv.remove_user_ah(num);
                return Err(e);
            }
        }
        // SAFETY: its create verb, with no object yet.
        unsafe { AhObj::set(ibah, ah, num) };
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn destroy_ah<D: Driver>(ibah: *mut b::ib_ah, _flags: u32) -> c_int {
    // SAFETY: an AH of this driver, destroyed once.
    let num = unsafe { AhObj::extra(ibah) };
    // SAFETY: as above.
    if let (Ok((_, drv)), true) = (unsafe { dev_of::<D>((*ibah).device) }, num != 0) {
        drv.remove_user_ah(num);
    }
    // SAFETY: as above.
    drop(unsafe { AhObj::take(ibah) });
    0
}

// ib_query_ah: oxe keeps ib_core's copy of the attributes, which is what it
// reports.
