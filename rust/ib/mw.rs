// SPDX-License-Identifier: GPL-2.0

//! The ib_mw objects: ib_core allocates them (`size_ib_mw`) and oxe keeps its
//! window in them from `alloc_mw` to `dealloc_mw`.

use super::error::to_c_int;
use super::objects::PdId;
use crate::bindings as b;
use crate::mw::{Mw, MwType};
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

#[repr(C)]
pub(super) struct MwObj {
    ib: b::ib_mw,
    /// None (zeroed by ib_core) until `alloc_mw` fills it.
    mw: Option<Arc<Mw>>,
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn alloc_mw(ibmw: *mut b::ib_mw, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a core-allocated (zeroed) MwObj of this device, ours for the call.
    let obj = unsafe { &mut *ibmw.cast::<MwObj>() };
    let r = (|| {
        // SAFETY: ib_core filled in the device before calling.
        let (_, drv) = unsafe { super::verbs::dev_of(obj.ib.device) }?;
        // ib_core refuses other types before calling; an unknown one is EINVAL.
        let ty = MwType::from_ib(obj.ib.type_).ok_or(EINVAL)?;
        let mw = crate::mw::alloc(drv, PdId::of(obj.ib.pd), ty)?;
        obj.ib.rkey = mw.rkey();
        obj.mw = Some(mw);
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn dealloc_mw(ibmw: *mut b::ib_mw) -> c_int {
    // SAFETY: an MwObj `alloc_mw` filled, deallocated once.
    let obj = unsafe { &mut *ibmw.cast::<MwObj>() };
    if let Some(mw) = obj.mw.take() {
        // SAFETY: as above.
        if let Ok((_, drv)) = unsafe { super::verbs::dev_of(obj.ib.device) } {
            crate::mw::dealloc(drv, &mw);
        }
    }
    0
}
