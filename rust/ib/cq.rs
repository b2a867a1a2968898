// SPDX-License-Identifier: GPL-2.0

//! CQ verbs: create (user rings mapped, kernel rings not), destroy, poll for
//! kernel consumers, and arming.

use super::device::IbDev;
use super::error::to_c_int;
use super::objects::Obj;
use super::queue::Uctx;
use super::udata::UData;
use crate::bindings as b;
use crate::cq::Cq;
use crate::oxe_core::abi::{
    OxeCqe, OxeCreateCqResp, OxeResizeCqResp, OXE_WC_GRH, OXE_WC_WITH_IMM, OXE_WC_WITH_INV,
};
use core::ptr::NonNull;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The memory ib_core allocates for a CQ.
pub(super) type CqObj = Obj<b::ib_cq, Cq>;

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
        // SAFETY: live ib_cq (type invariant).
        unsafe { b::oxe_shim_cq_comp(self.0.as_ptr()) };
    }

    pub(crate) fn error_event(&self) {
        // SAFETY: live ib_cq (type invariant).
        unsafe { b::oxe_shim_cq_event(self.0.as_ptr(), b::ib_event_type_IB_EVENT_CQ_ERR) };
    }
}

/// The CQ behind an ib_cq oxe created.
///
/// # Safety
///
/// `ibcq` is an oxe CQ ib_core keeps alive for the call.
pub(crate) unsafe fn get<'a>(ibcq: *mut b::ib_cq) -> Option<&'a Arc<Cq>> {
    // SAFETY: caller contract.
    unsafe { CqObj::get(ibcq) }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn create_cq(
    ibcq: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated CQ of this device.
        let dev = unsafe { IbDev::from_raw((*ibcq).device) }.ok_or(ENODEV)?;
        let drv = dev.drv()?;
        // SAFETY: ib_core's attributes for the call.
        let attr = unsafe { &*attr };
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: attrs is null for kernel consumers, else the call's bundle.
        let udata = unsafe { b::oxe_shim_attrs_udata(attrs) };
        // SAFETY: as above.
        let uctx = NonNull::new(unsafe { b::oxe_shim_udata_uctx(udata) }).map(Uctx);
        let handle = CqHandle(NonNull::new(ibcq).ok_or(EINVAL)?);
        let cq = Cq::new(&drv.counters, uctx, attr.cqe, handle)?;
        let resp = OxeCreateCqResp { cq: cq.map() };
        // SAFETY: the call's udata (or null).
        if let Err(e) = unsafe { UData::new(udata) }.respond(&resp.to_bytes()) {
            cq.destroy();
            return Err(e);
        }
        // SAFETY: core-allocated and zeroed; we own the driver part.
        unsafe {
            (*ibcq).cqe = cq.capacity() as c_int;
            CqObj::set(ibcq, cq, ());
        }
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn destroy_cq(ibcq: *mut b::ib_cq, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: an oxe CQ; ib_core calls destroy once, with no QP left on it.
    if let Some(cq) = unsafe { CqObj::take(ibcq) } {
        cq.destroy();
    }
    0
}

/// ib_core's `resize_user_cq` (uverbs' RESIZE_CQ; kernel consumers have no
/// resize verb, but a null udata is handled like theirs all the same). The
/// new ring is allocated and, for user space, described in the reply before
/// the CQ moves to it: the move is the last step, so a refusal changes
/// nothing. The provider maps the new ring once this returns.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn resize_cq(
    ibcq: *mut b::ib_cq,
    cqe: kernel::ffi::c_uint,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: an oxe CQ, held by uverbs for the call.
        let cq = unsafe { get(ibcq) }.ok_or(EINVAL)?;
        // SAFETY: the call's udata, or null.
        let udata = unsafe { UData::new(udata) };
        // Without room for the reply, user space would go on reading a
        // ring the kernel no longer writes.
        if !udata.has_room(OxeResizeCqResp::SIZE) {
            return Err(EINVAL);
        }
        // A size below what the CQ holds fails before anything is allocated
        // (and again under the locks, where it counts).
        if cqe < cq.outstanding() {
            return Err(EINVAL);
        }
        let new = Cq::new_ring(udata.uctx(), cqe)?;
        let capacity = new.num_slots();
        udata.respond(&OxeResizeCqResp { cq: new.map() }.to_bytes())?;
        let (r, unused) = cq.resize(new);
        // Out of the CQ's locks: dropping a ring may sleep.
        drop(unused);
        r?;
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
pub(super) unsafe extern "C" fn poll_cq(
    ibcq: *mut b::ib_cq,
    num: c_int,
    wc: *mut b::ib_wc,
) -> c_int {
    // SAFETY: an oxe CQ kept alive for the call.
    let Some(cq) = (unsafe { get(ibcq) }) else {
        return 0;
    };
    // SAFETY: as above.
    let Some(dev) = (unsafe { IbDev::from_raw((*ibcq).device) }) else {
        return 0;
    };
    let Ok(drv) = dev.drv() else { return 0 };
    let max = usize::try_from(num).unwrap_or(0);
    let mut i = 0usize;
    let mut batch = [OxeCqe::default(); 16];
    while i < max {
        let want = (max - i).min(batch.len());
        let got = cq.poll(&mut batch[..want]);
        for c in &batch[..got] {
            // A completion of a QP that is gone has no ib_qp to report.
            let Some(qp) = drv.qps.get(c.qp_num) else {
                continue;
            };
            let Some(ibqp) = qp.ib_ptr() else {
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
pub(super) unsafe extern "C" fn req_notify_cq(
    ibcq: *mut b::ib_cq,
    flags: b::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: an oxe CQ kept alive for the call.
    let Some(cq) = (unsafe { get(ibcq) }) else {
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
