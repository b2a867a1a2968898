// SPDX-License-Identifier: GPL-2.0

//! SRQ verbs.

use super::device::IbDev;
use super::error::to_c_int;
use super::objects::{Obj, PdId};
use super::queue::Uctx;
use super::udata::{write_user, UData};
use crate::bindings as b;
use crate::oxe_core::abi::{OxeCreateSrqResp, OxeModifySrqCmd, OxeResizeSrqResp};
use crate::srq::Srq;
use core::ptr::NonNull;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The memory ib_core allocates for an SRQ.
pub(super) type SrqObj = Obj<b::ib_srq, Srq>;

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
        // SAFETY: live ib_srq (type invariant).
        unsafe {
            b::oxe_shim_srq_event(self.0.as_ptr(), b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED)
        };
    }
}

/// # Safety
///
/// `ibsrq` is an oxe SRQ ib_core keeps alive for the call.
pub(super) unsafe fn get<'a>(ibsrq: *mut b::ib_srq) -> Option<&'a Arc<Srq>> {
    // SAFETY: caller contract.
    unsafe { SrqObj::get(ibsrq) }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn create_srq(
    ibsrq: *mut b::ib_srq,
    init: *mut b::ib_srq_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated SRQ of this device.
        let dev = unsafe { IbDev::from_raw((*ibsrq).device) }.ok_or(ENODEV)?;
        let drv = dev.drv()?;
        // SAFETY: ib_core's attributes.
        let a = unsafe { &mut *init };
        if a.srq_type != b::ib_srq_type_IB_SRQT_BASIC {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: the call's udata or null.
        let uctx = NonNull::new(unsafe { b::oxe_shim_udata_uctx(udata) }).map(Uctx);
        let srq = Srq::new(
            &drv.counters,
            uctx,
            // SAFETY: the SRQ's PD, set by ib_core.
            PdId::of(unsafe { (*ibsrq).pd }),
            a.attr.max_wr,
            a.attr.max_sge,
            a.attr.srq_limit,
            SrqHandle(NonNull::new(ibsrq).ok_or(EINVAL)?),
        )?;
        a.attr.max_wr = srq.capacity();
        a.attr.max_sge = srq.max_sge;
        let resp = OxeCreateSrqResp {
            srq: srq.map(),
            srq_num: 0,
            reserved: 0,
        };
        // SAFETY: the call's udata.
        if let Err(e) = unsafe { UData::new(udata) }.respond(&resp.to_bytes()) {
            srq.destroy();
            return Err(e);
        }
        // SAFETY: core-allocated; we own the driver part.
        unsafe { SrqObj::set(ibsrq, srq, ()) };
        Ok(())
    })();
    to_c_int(r)
}

/// ib_core's modify_srq: arming the limit (IB_SRQ_LIMIT) and resizing
/// (IB_SRQ_MAX_WR), from user space or kernel consumers (null udata).
///
/// uverbs' MODIFY_SRQ has no reply, so a user resize names, in oxe's
/// driver data, the address where the new ring's description goes. The
/// new ring is allocated and described there before the SRQ moves to it:
/// the move is the last step, so a refusal changes nothing.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn modify_srq(
    ibsrq: *mut b::ib_srq,
    attr: *mut b::ib_srq_attr,
    mask: b::ib_srq_attr_mask,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: an oxe SRQ alive for the call.
        let srq = unsafe { get(ibsrq) }.ok_or(EINVAL)?;
        // SAFETY: ib_core's attributes.
        let a = unsafe { &*attr };
        let limit = (mask & b::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(a.srq_limit);
        if mask & b::ib_srq_attr_mask_IB_SRQ_MAX_WR == 0 {
            return limit.map_or(Ok(()), |l| srq.set_limit(l));
        }
        // SAFETY: the call's udata, or null.
        let udata = unsafe { UData::new(udata) };
        let mut cmd = [0u8; OxeModifySrqCmd::SIZE];
        let user = udata.uctx().is_some();
        let reply = if user {
            let sent = udata.request(&mut cmd)?;
            match OxeModifySrqCmd::from_bytes(&cmd) {
                Some(c)
                    if sent >= OxeModifySrqCmd::SIZE
                        && c.resize_resp != 0
                        && c.resize_resp_len as usize >= OxeResizeSrqResp::SIZE =>
                {
                    Some(c)
                }
                // No room for the reply: refused (see OxeModifySrqCmd).
                _ => return Err(EINVAL),
            }
        } else {
            None
        };
        let new = srq.new_ring(udata.uctx(), a.max_wr)?;
        if let Some(c) = reply {
            write_user(
                c.resize_resp,
                &OxeResizeSrqResp { srq: new.map() }.to_bytes(),
            )?;
        }
        let (r, unused) = srq.resize(new, limit);
        // Out of the SRQ's locks: dropping a ring may sleep.
        drop(unused);
        r
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn query_srq(
    ibsrq: *mut b::ib_srq,
    attr: *mut b::ib_srq_attr,
) -> c_int {
    // SAFETY: an oxe SRQ alive for the call.
    let Some(srq) = (unsafe { get(ibsrq) }) else {
        return EINVAL.to_errno();
    };
    // SAFETY: ib_core's out struct.
    let a = unsafe { &mut *attr };
    a.max_wr = srq.capacity();
    a.max_sge = srq.max_sge;
    a.srq_limit = srq.limit();
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn destroy_srq(
    ibsrq: *mut b::ib_srq,
    _udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: an oxe SRQ, destroyed once with no QP attached.
    if let Some(srq) = unsafe { SrqObj::take(ibsrq) } {
        srq.destroy();
    }
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut b::ib_srq,
    mut wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> c_int {
    // SAFETY: an oxe SRQ alive for the call.
    let Some(srq) = (unsafe { get(ibsrq) }) else {
        return EINVAL.to_errno();
    };
    while !wr.is_null() {
        // SAFETY: the consumer's chain of WRs.
        let r = unsafe { super::qp::kernel_recv(&*wr, srq.max_sge) }.and_then(|(w, sges)| {
            let mut one = KVec::with_capacity(1, GFP_ATOMIC)?;
            one.push((w, sges), GFP_ATOMIC)?;
            srq.post_kernel(&one)
        });
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
