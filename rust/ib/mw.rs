// SPDX-License-Identifier: GPL-2.0

//! The ib_mw objects: ib_core allocates them (`size_ib_mw`) and the driver
//! keeps its window in them from `alloc_mw` to `dealloc_mw`.

use super::driver::{Driver, MwOps};
use super::error::to_c_int;
use super::objects::{Obj, PdId};
use super::ops::dev_of;
use crate::bindings as b;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// The memory ib_core allocates for a memory window.
pub(super) type MwObj<D> = Obj<b::ib_mw, <D as Driver>::Mw>;

/// A window's type (IBTA 10.6.7.2): type 1 is bound by a verb and names no
/// QP; type 2 is bound by a work request on one QP.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MwType {
    One,
    Two,
}

impl MwType {
    fn from_ib(ty: b::ib_mw_type) -> Option<Self> {
        match ty {
            b::ib_mw_type_IB_MW_TYPE_1 => Some(MwType::One),
            b::ib_mw_type_IB_MW_TYPE_2 => Some(MwType::Two),
            _ => None,
        }
    }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn alloc_mw<D: Driver>(
    ibmw: *mut b::ib_mw,
    _udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: a core-allocated (zeroed) MwObj of this device, ours for the call.
    let ib = unsafe { &mut *ibmw };
    let r = (|| {
        // SAFETY: ib_core filled in the device before calling.
        let (_, drv) = unsafe { dev_of::<D>(ib.device) }?;
        // ib_core refuses other types before calling; an unknown one is EINVAL.
        let ty = MwType::from_ib(ib.type_).ok_or(EINVAL)?;
        // SAFETY: the window's PD, set by ib_core, a PD of this device.
        let pd = unsafe { PdId::of(ib.pd) };
        let mw = D::Mw::alloc(drv, pd, ty)?;
        ib.rkey = mw.rkey();
        // SAFETY: its create verb, with no object yet.
        unsafe { MwObj::<D>::set(ibmw, mw, ()) };
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn dealloc_mw<D: Driver>(ibmw: *mut b::ib_mw) -> c_int {
    // SAFETY: an MwObj `alloc_mw` filled, deallocated once.
    if let Some(mw) = unsafe { MwObj::<D>::take(ibmw) } {
        // SAFETY: as above.
        if let Ok((_, drv)) = unsafe { dev_of::<D>((*ibmw).device) } {
            D::Mw::dealloc(drv, &mw);
        }
    }
    0
}
