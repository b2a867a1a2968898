// SPDX-License-Identifier: GPL-2.0

//! The ib_mw objects: ib_core allocates them (`size_ib_mw`) and oxe keeps its
//! window in them from `alloc_mw` to `dealloc_mw`.

use super::error::to_c_int;
use super::objects::{Obj, PdId};
use crate::bindings as b;
use crate::mw::{Mw, MwType};
use kernel::ffi::c_int;
use kernel::prelude::*;

/// The memory ib_core allocates for a memory window.
pub(super) type MwObj = Obj<b::ib_mw, Mw>;

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn alloc_mw(ibmw: *mut b::ib_mw, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a core-allocated (zeroed) MwObj of this device, ours for the call.
    let ib = unsafe { &mut *ibmw };
    let r = (|| {
        // SAFETY: ib_core filled in the device before calling.
        let (_, drv) = unsafe { super::verbs::dev_of(ib.device) }?;
        // ib_core refuses other types before calling; an unknown one is EINVAL.
        let ty = MwType::from_ib(ib.type_).ok_or(EINVAL)?;
        let mw = crate::mw::alloc(drv, PdId::of(ib.pd), ty)?;
        ib.rkey = mw.rkey();
        // SAFETY: its create verb, with no object yet.
        unsafe { MwObj::set(ibmw, mw, ()) };
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn dealloc_mw(ibmw: *mut b::ib_mw) -> c_int {
    // SAFETY: an MwObj `alloc_mw` filled, deallocated once.
    if let Some(mw) = unsafe { MwObj::take(ibmw) } {
        // SAFETY: as above.
        if let Ok((_, drv)) = unsafe { super::verbs::dev_of((*ibmw).device) } {
            crate::mw::dealloc(drv, &mw);
        }
    }
    0
}
