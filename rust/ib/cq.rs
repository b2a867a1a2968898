// SPDX-License-Identifier: GPL-2.0

//! CQ verbs: create (user rings mapped, kernel rings not), destroy, poll for
//! kernel consumers, and arming.

use super::driver::{CqOps, Driver, QpOps};
use super::error::to_c_int;
use super::objects::Obj;
use super::ops::dev_of;
use super::udata::UData;
use crate::bindings as b;
use crate::oxe_core::abi::{OxeCqe, OXE_WC_GRH, OXE_WC_WITH_IMM, OXE_WC_WITH_INV};
use core::ptr::NonNull;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The memory ib_core allocates for a CQ.
pub(super) type CqObj<D> = Obj<b::ib_cq, <D as Driver>::Cq>;

/// The ib_cq behind a CQ, for completion and async events.
///
/// # Invariants
///
/// Points to a live ib_cq; `Cq` drops its handle in the destroy verb,
/// before ib_core frees the ib_cq.
pub(crate) struct CqHandle(NonNull<b::ib_cq>);

// SAFETY: ib_core's event and completion handlers may be called from any context.
unsafe impl Send for CqHandle {}
// SAFETY: as above.
unsafe impl Sync for CqHandle {}

impl CqHandle {
    pub(crate) fn completion(&self) {
        let cq = self.0.as_ptr();
        // SAFETY: live ib_cq (type invariant); the consumer set its handler
        // and context before it could get completions.
        unsafe {
            if let Some(f) = (*cq).comp_handler {
                f(cq, (*cq).cq_context);
            }
        }
    }

    pub(crate) fn error_event(&self) {
        let cq = self.0.as_ptr();
        // SAFETY: live ib_cq (type invariant).
        unsafe {
            let mut ev = super::objects::event(b::ib_event_type_IB_EVENT_CQ_ERR, (*cq).device);
            *ev.element.cq.as_mut() = cq;
            if let Some(f) = (*cq).event_handler {
                f(&mut ev, (*cq).cq_context);
            }
        }
    }
}

/// The CQ behind an ib_cq of driver `D`.
///
/// # Safety
///
/// `ibcq` is a CQ of `D` that ib_core keeps alive for the call.
pub(super) unsafe fn get<'a, D: Driver>(ibcq: *mut b::ib_cq) -> Option<&'a Arc<D::Cq>> {
    // SAFETY: caller contract.
    unsafe { CqObj::<D>::get(ibcq) }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn create_cq<D: Driver>(
    ibcq: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated CQ of this device.
        let (_, drv) = unsafe { dev_of::<D>((*ibcq).device) }?;
        // SAFETY: ib_core's attributes for the call.
        let attr = unsafe { &*attr };
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: attrs is null for kernel consumers, else the call's bundle.
        let udata = unsafe { UData::of_bundle(attrs) };
        let handle = CqHandle(NonNull::new(ibcq).ok_or(EINVAL)?);
        let cq = D::Cq::create(drv, attr.cqe, handle, &udata)?;
        // SAFETY: core-allocated and zeroed; we own the driver part.
        unsafe {
            (*ibcq).cqe = cq.capacity() as c_int;
            CqObj::<D>::set(ibcq, cq, ());
        }
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn destroy_cq<D: Driver>(
    ibcq: *mut b::ib_cq,
    _udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: a CQ of `D`; ib_core calls destroy once, with no QP left on it.
    if let Some(cq) = unsafe { CqObj::<D>::take(ibcq) } {
        cq.destroy();
    }
    0
}

/// ib_core's `resize_user_cq`.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn resize_cq<D: Driver>(
    ibcq: *mut b::ib_cq,
    cqe: kernel::ffi::c_uint,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: a CQ of `D`, held by uverbs for the call.
        let cq = unsafe { get::<D>(ibcq) }.ok_or(EINVAL)?;
        // SAFETY: the call's udata, or null.
        let capacity = cq.resize(cqe, &unsafe { UData::new(udata) })?;
        // SAFETY: the CQ's ib_cq, which uverbs reads back for its reply.
        unsafe { (*ibcq).cqe = capacity as c_int };
        Ok(())
    })();
    to_c_int(r)
}

fn wc_flags(f: u32) -> c_int {
    let mut out = 0;
    if f & OXE_WC_GRH != 0 {
        out |= b::ib_wc_flags_IB_WC_GRH;
    }
    if f & OXE_WC_WITH_IMM != 0 {
        out |= b::ib_wc_flags_IB_WC_WITH_IMM;
    }
    if f & OXE_WC_WITH_INV != 0 {
        out |= b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    }
    out as c_int
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn poll_cq<D: Driver>(
    ibcq: *mut b::ib_cq,
    num: c_int,
    wc: *mut b::ib_wc,
) -> c_int {
    // SAFETY: a CQ of `D` kept alive for the call.
    let Some(cq) = (unsafe { get::<D>(ibcq) }) else {
        return 0;
    };
    // SAFETY: as above.
    let Ok((_, drv)) = (unsafe { dev_of::<D>((*ibcq).device) }) else {
        return 0;
    };
    let max = usize::try_from(num).unwrap_or(0);
    let mut i = 0usize;
    let mut batch = [OxeCqe::default(); 16];
    while i < max {
        let want = (max - i).min(batch.len());
        let got = cq.poll(&mut batch[..want]);
        for c in &batch[..got] {
            // A completion of a QP that is gone has no ib_qp to report.
            let Some(qp) = drv.qp(c.qp_num) else {
                continue;
            };
            let Some(ibqp) = qp.with_handle(|h| h.as_ptr()) else {
                continue;
            };
            // SAFETY: ib_core passes room for `num` entries; i < num.
            let w = unsafe { &mut *wc.add(i) };
            *w = Default::default();
            // SAFETY: writing one member of a plain-data union.
            unsafe { *w.__bindgen_anon_1.wr_id.as_mut() = c.wr_id };
            w.status = c.status;
            w.opcode = c.opcode;
            w.vendor_err = c.vendor_err;
            w.byte_len = c.byte_len;
            w.qp = ibqp;
            // SAFETY: as above.
            unsafe { *w.ex.imm_data.as_mut() = c.imm_data };
            w.src_qp = c.src_qp;
            w.wc_flags = wc_flags(c.wc_flags);
            if c.wc_flags & OXE_WC_GRH != 0 {
                w.wc_flags |= b::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as c_int;
                w.network_hdr_type = c.network_hdr_type as u8;
            }
            w.pkey_index = 0;
            w.port_num = 1;
            i += 1;
        }
        if got < want {
            break;
        }
    }
    i as c_int
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn req_notify_cq<D: Driver>(
    ibcq: *mut b::ib_cq,
    flags: b::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: a CQ of `D` kept alive for the call.
    let Some(cq) = (unsafe { get::<D>(ibcq) }) else {
        return 0;
    };
    let solicited =
        flags & b::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK == b::ib_cq_notify_flags_IB_CQ_SOLICITED;
    let pending = cq.arm(solicited);
    if pending && flags & b::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 {
        1
    } else {
        0
    }
}
