// SPDX-License-Identifier: GPL-2.0

//! SRQ verbs.

use super::driver::{Driver, SrqOps};
use super::error::to_c_int;
use super::objects::{Obj, PdId};
use super::ops::dev_of;
use super::udata::UData;
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The memory ib_core allocates for an SRQ.
pub(super) type SrqObj<D> = Obj<b::ib_srq, <D as Driver>::Srq>;

/// What an SRQ is created with (`max_wr` and `max_sge` asked for).
pub(crate) struct SrqInit {
    pub(crate) pd: PdId,
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) limit: u32,
}

/// What an SRQ reports: its capacity and SGEs per receive, and the armed
/// limit (0: not armed).
pub(crate) struct SrqAttr {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) limit: u32,
}

/// The ib_srq behind an SRQ, for the limit event.
///
/// # Invariants
///
/// Live until the destroy verb takes it away.
pub(crate) struct SrqHandle(NonNull<b::ib_srq>);

// SAFETY: ib_core's event handlers may be called from any context.
unsafe impl Send for SrqHandle {}
// SAFETY: as above.
unsafe impl Sync for SrqHandle {}

impl SrqHandle {
    pub(crate) fn limit_reached(&self) {
        let srq = self.0.as_ptr();
        // SAFETY: live ib_srq (type invariant).
        unsafe {
            let mut ev =
                super::objects::event(b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED, (*srq).device);
            *ev.element.srq.as_mut() = srq;
            if let Some(f) = (*srq).event_handler {
                f(&mut ev, (*srq).srq_context);
            }
        }
    }
}

/// # Safety
///
/// `ibsrq` is an SRQ of `D` that ib_core keeps alive for the call.
pub(super) unsafe fn get<'a, D: Driver>(ibsrq: *mut b::ib_srq) -> Option<&'a Arc<D::Srq>> {
    // SAFETY: caller contract.
    unsafe { SrqObj::<D>::get(ibsrq) }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn create_srq<D: Driver>(
    ibsrq: *mut b::ib_srq,
    init: *mut b::ib_srq_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated SRQ of this device.
        let (_, drv) = unsafe { dev_of::<D>((*ibsrq).device) }?;
        // SAFETY: ib_core's attributes.
        let a = unsafe { &mut *init };
        if a.srq_type != b::ib_srq_type_IB_SRQT_BASIC {
            return Err(EOPNOTSUPP);
        }
        let init = SrqInit {
            // SAFETY: the SRQ's PD, set by ib_core, a PD of this device
            // that the SRQ holds.
            pd: unsafe { PdId::of((*ibsrq).pd) },
            max_wr: a.attr.max_wr,
            max_sge: a.attr.max_sge,
            limit: a.attr.srq_limit,
        };
        let handle = SrqHandle(NonNull::new(ibsrq).ok_or(EINVAL)?);
        // SAFETY: the call's udata, or null.
        let srq = D::Srq::create(drv, init, handle, &unsafe { UData::new(udata) })?;
        let q = srq.query();
        a.attr.max_wr = q.max_wr;
        a.attr.max_sge = q.max_sge;
        // SAFETY: core-allocated; we own the driver part.
        unsafe { SrqObj::<D>::set(ibsrq, srq, ()) };
        Ok(())
    })();
    to_c_int(r)
}

/// ib_core's modify_srq: arming the limit (IB_SRQ_LIMIT) and resizing
/// (IB_SRQ_MAX_WR), from user space or kernel consumers (null udata).
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn modify_srq<D: Driver>(
    ibsrq: *mut b::ib_srq,
    attr: *mut b::ib_srq_attr,
    mask: b::ib_srq_attr_mask,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: an SRQ of `D` alive for the call.
        let srq = unsafe { get::<D>(ibsrq) }.ok_or(EINVAL)?;
        // SAFETY: ib_core's attributes.
        let a = unsafe { &*attr };
        let limit = (mask & b::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(a.srq_limit);
        let max_wr = (mask & b::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0).then_some(a.max_wr);
        // SAFETY: the call's udata, or null.
        srq.modify(limit, max_wr, &unsafe { UData::new(udata) })
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn query_srq<D: Driver>(
    ibsrq: *mut b::ib_srq,
    attr: *mut b::ib_srq_attr,
) -> c_int {
    // SAFETY: an SRQ of `D` alive for the call.
    let Some(srq) = (unsafe { get::<D>(ibsrq) }) else {
        return EINVAL.to_errno();
    };
    let q = srq.query();
    // SAFETY: ib_core's out struct.
    let a = unsafe { &mut *attr };
    a.max_wr = q.max_wr;
    a.max_sge = q.max_sge;
    a.srq_limit = q.limit;
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn destroy_srq<D: Driver>(
    ibsrq: *mut b::ib_srq,
    _udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: an SRQ of `D`, destroyed once with no QP attached.
    if let Some(srq) = unsafe { SrqObj::<D>::take(ibsrq) } {
        srq.destroy();
    }
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn post_srq_recv<D: Driver>(
    ibsrq: *mut b::ib_srq,
    mut wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> c_int {
    // SAFETY: an SRQ of `D` alive for the call.
    let Some(srq) = (unsafe { get::<D>(ibsrq) }) else {
        return EINVAL.to_errno();
    };
    let max_sge = srq.query().max_sge;
    while !wr.is_null() {
        // SAFETY: the consumer's chain of WRs.
        let r = unsafe { super::qp::kernel_recv(&*wr, max_sge) }
            .and_then(|(w, sges)| srq.post_recv(&w, &sges));
        if let Err(e) = r {
            if !bad.is_null() {
                // SAFETY: ib_core's out pointer.
                unsafe { *bad = wr };
            }
            return e.to_errno();
        }
        // SAFETY: as above.
        wr = unsafe { (*wr).next };
    }
    0
}
