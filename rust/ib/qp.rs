// SPDX-License-Identifier: GPL-2.0

//! QP verbs: create, modify, query, destroy, and posting (kernel consumers
//! write the rings here; user space only rings the doorbell).

use super::av::Av;
use super::driver::{Driver, QpOps};
use super::error::to_c_int;
use super::kmem::KernelToken;
use super::nl::Nest;
use super::objects::{Obj, PdId};
use super::queue::Uctx;
use super::udata::UData;
use crate::bindings as b;
use crate::oxe_core::abi::{OxeRecvWqe, OxeSendWqe, OxeSge};
use crate::oxe_core::gid::Gid;
use crate::oxe_core::qp_state::QpType;
use core::ptr::NonNull;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The memory ib_core allocates for a QP.
pub(super) type QpObj<D> = Obj<b::ib_qp, <D as Driver>::Qp>;

/// `ib_qp_attr`, as far as a modify passes it and a query reports it.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpAttr {
    pub(crate) state: u32,
    pub(crate) cur_state: u32,
    pub(crate) access: u32,
    pub(crate) pkey_index: u16,
    pub(crate) port: u8,
    pub(crate) qkey: u32,
    pub(crate) av: Option<Av>,
    /// `enum ib_mtu` (1 = 256 ... 5 = 4096).
    pub(crate) path_mtu: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) dest_qpn: u32,
}

/// Requested capacities; on return, what was granted.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpCaps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
}

/// What a QP is created with.
pub(crate) struct QpInit<D: Driver> {
    pub(crate) ty: QpType,
    pub(crate) pd: PdId,
    pub(crate) send_cq: Arc<D::Cq>,
    pub(crate) recv_cq: Arc<D::Cq>,
    pub(crate) srq: Option<Arc<D::Srq>>,
    pub(crate) caps: QpCaps,
    pub(crate) sq_sig_all: bool,
    /// The process's context; `None` for a kernel consumer, which has
    /// `kernel` instead.
    pub(crate) uctx: Option<Uctx>,
    pub(crate) kernel: Option<KernelToken>,
    pub(crate) handle: QpHandle,
}

/// Async events oxe raises on a QP.
#[derive(Clone, Copy)]
pub(crate) enum QpEvent {
    /// IB_EVENT_QP_ACCESS_ERR: an incoming request violated access rights.
    AccessError,
    /// IB_EVENT_QP_REQ_ERR: an incoming request was malformed or out of
    /// sequence for its opcode (IBTA's Invalid Request error).
    InvalidRequest,
    /// IB_EVENT_QP_FATAL: the QP failed for a reason of its own, which no
    /// completion reports (a catastrophic work queue error).
    Fatal,
}

/// The ib_qp behind a QP.
///
/// # Invariants
///
/// Points to a live ib_qp until the destroy verb takes the handle away.
pub(crate) struct QpHandle(NonNull<b::ib_qp>);

// SAFETY: ib_core's event handlers may be called from any context.
unsafe impl Send for QpHandle {}
// SAFETY: as above.
unsafe impl Sync for QpHandle {}

impl QpHandle {
    pub(crate) fn event(&self, ev: QpEvent) {
        let t = match ev {
            QpEvent::AccessError => b::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            QpEvent::InvalidRequest => b::ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::Fatal => b::ib_event_type_IB_EVENT_QP_FATAL,
        };
        let qp = self.0.as_ptr();
        // SAFETY: live ib_qp (type invariant).
        unsafe {
            let mut ev = super::objects::event(t, (*qp).device);
            *ev.element.qp.as_mut() = qp;
            if let Some(f) = (*qp).event_handler {
                f(&mut ev, (*qp).qp_context);
            }
        }
    }

    pub(super) fn as_ptr(&self) -> *mut b::ib_qp {
        self.0.as_ptr()
    }
}

/// # Safety
///
/// `ibqp` is a QP of `D` that ib_core keeps alive for the call.
unsafe fn get<'a, D: Driver>(ibqp: *mut b::ib_qp) -> Option<&'a Arc<D::Qp>> {
    // SAFETY: caller contract.
    unsafe { QpObj::<D>::get(ibqp) }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn create_qp<D: Driver>(
    ibqp: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated QP of this device.
        let (dev, drv) = unsafe { super::ops::dev_of::<D>((*ibqp).device) }?;
        // SAFETY: ib_core's attributes for the call.
        let a = unsafe { &mut *init };
        if a.create_flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let ty = QpType::from_raw(a.qp_type).ok_or(EOPNOTSUPP)?;
        // SAFETY: CQs and SRQ of this device, held by ib_core for the QP's life.
        let send_cq = unsafe { super::cq::get::<D>(a.send_cq) }
            .ok_or(EINVAL)?
            .clone();
        // SAFETY: as above.
        let recv_cq = unsafe { super::cq::get::<D>(a.recv_cq) }
            .ok_or(EINVAL)?
            .clone();
        let srq = if a.srq.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(
                unsafe { super::srq::get::<D>(a.srq) }
                    .ok_or(EINVAL)?
                    .clone(),
            )
        };
        // SAFETY: the call's udata or null.
        let udata = unsafe { UData::new(udata) };
        let uctx = udata.uctx();
        let caps = QpCaps {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline: a.cap.max_inline_data,
        };
        let init = QpInit {
            ty,
            // SAFETY: the QP's PD, set by ib_core before the call, a PD of
            // this device that the QP holds.
            pd: unsafe { PdId::of((*ibqp).pd) },
            send_cq,
            recv_cq,
            srq,
            caps,
            sq_sig_all: a.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR,
            uctx,
            kernel: uctx.is_none().then(KernelToken::new),
            handle: QpHandle(NonNull::new(ibqp).ok_or(EINVAL)?),
        };
        let qp = D::Qp::create(drv, dev, init, &udata)?;
        let c = qp.caps();
        a.cap.max_send_wr = c.max_send_wr;
        a.cap.max_recv_wr = c.max_recv_wr;
        a.cap.max_send_sge = c.max_send_sge;
        a.cap.max_recv_sge = c.max_recv_sge;
        a.cap.max_inline_data = c.max_inline;
        // SAFETY: core-allocated; we own the driver part.
        unsafe {
            (*ibqp).qp_num = qp.qpn();
            QpObj::<D>::set(ibqp, qp, ());
        }
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn destroy_qp<D: Driver>(
    ibqp: *mut b::ib_qp,
    _udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: a QP of `D`; destroyed once.
    let qp = unsafe { QpObj::<D>::take(ibqp) };
    // SAFETY: as above.
    if let (Some(qp), Ok((_, drv))) = (qp, unsafe { super::ops::dev_of::<D>((*ibqp).device) }) {
        qp.destroy(drv);
    }
    0
}

/// ops.attach_mcast. ib_core has checked that the QP is UD and the GID
/// multicast; the MLID means nothing on RoCE (a group is its GID).
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn attach_mcast<D: Driver>(
    ibqp: *mut b::ib_qp,
    gid: *mut b::ib_gid,
    _mlid: u16,
) -> c_int {
    // SAFETY: the caller's contract is this callback's.
    unsafe { on_group::<D>(ibqp, gid, D::attach_mcast) }
}

/// ops.detach_mcast.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn detach_mcast<D: Driver>(
    ibqp: *mut b::ib_qp,
    gid: *mut b::ib_gid,
    _mlid: u16,
) -> c_int {
    // SAFETY: the caller's contract is this callback's.
    unsafe { on_group::<D>(ibqp, gid, D::detach_mcast) }
}

/// Runs a multicast group verb on the QP and group ib_core passes.
///
/// # Safety
///
/// `ibqp` is a live ib_qp of `D` and `gid` a valid GID, for the call.
unsafe fn on_group<D: Driver>(
    ibqp: *mut b::ib_qp,
    gid: *mut b::ib_gid,
    op: fn(&D, &Arc<D::Qp>, &Gid) -> Result,
) -> c_int {
    let r = (|| {
        // SAFETY: a QP of `D` alive for the call.
        let qp = unsafe { get::<D>(ibqp) }.ok_or(EINVAL)?;
        // SAFETY: as above.
        let (_, drv) = unsafe { super::ops::dev_of::<D>((*ibqp).device) }?;
        // SAFETY: ib_core passes a valid GID; every field is its 16 bytes.
        let mgid = unsafe { *(*gid).raw.as_ref() };
        op(drv, qp, &mgid)
    })();
    to_c_int(r)
}

/// The address vector of an ib_core AH attribute (RoCE: GRH required).
pub(super) fn av_of(attr: &b::rdma_ah_attr) -> Option<Av> {
    let grh = &attr.grh;
    if u32::from(attr.ah_flags) & b::ib_ah_flags_IB_AH_GRH == 0 || grh.sgid_attr.is_null() {
        return None;
    }
    // SAFETY: ib_core resolved the source GID: its attribute is held with
    // the AH attribute. GIDs are plain bytes in every view.
    let (sgid_attr, dgid) = unsafe { (&*grh.sgid_attr, *grh.dgid.raw.as_ref()) };
    // SAFETY: as above.
    let sgid = unsafe { *sgid_attr.gid.raw.as_ref() };
    // rdma_gid_attr_network_type(): RoCE v2 over IPv6 unless IPv4-mapped.
    let ipv6 = sgid_attr.gid_type != b::ib_gid_type_IB_GID_TYPE_IB
        && sgid_attr.gid_type != b::ib_gid_type_IB_GID_TYPE_ROCE
        && crate::oxe_core::gid::to_ipv4(&sgid).is_none();
    Some(Av {
        sgid,
        dgid,
        flow_label: grh.flow_label,
        ipv6,
        traffic_class: grh.traffic_class,
        hop_limit: grh.hop_limit,
        sgid_index: grh.sgid_index,
    })
}

/// The path a query reports for `av`.
fn av_to_attr(av: &Av, attr: &mut b::rdma_ah_attr) {
    // As rdma_ah_set_grh() on a zeroed RoCE attribute, of port 1, with no
    // reference to a GID attribute.
    *attr = Default::default();
    attr.type_ = b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    attr.port_num = 1;
    attr.ah_flags = b::ib_ah_flags_IB_AH_GRH as u8;
    // SAFETY: a GID is its 16 bytes in every view.
    unsafe { *attr.grh.dgid.raw.as_mut() = av.dgid };
    attr.grh.flow_label = av.flow_label;
    attr.grh.sgid_index = av.sgid_index;
    attr.grh.hop_limit = av.hop_limit;
    attr.grh.traffic_class = av.traffic_class;
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn modify_qp<D: Driver>(
    ibqp: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    mask: c_int,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: a QP of `D` alive for the call.
        let qp = unsafe { get::<D>(ibqp) }.ok_or(EINVAL)?;
        // SAFETY: the call's udata.
        if !udata.is_null() && unsafe { (*udata).inlen } != 0 {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: ib_core's attributes.
        let a = unsafe { &*attr };
        let mask = mask as u32;
        let av = if mask & b::ib_qp_attr_mask_IB_QP_AV != 0 {
            Some(av_of(&a.ah_attr).ok_or(EINVAL)?)
        } else {
            None
        };
        let q = QpAttr {
            state: a.qp_state,
            cur_state: a.cur_qp_state,
            access: a.qp_access_flags as u32,
            pkey_index: a.pkey_index,
            port: a.port_num as u8,
            qkey: a.qkey,
            av,
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            dest_qpn: a.dest_qp_num,
        };
        qp.modify(mask, &q)
    })();
    to_c_int(r)
}

/// `rdma resource show qp -dd`: the driver's view of the QP.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn fill_res_qp_entry<D: Driver>(
    msg: *mut b::sk_buff,
    ibqp: *mut b::ib_qp,
) -> c_int {
    // SAFETY: a QP of `D`, alive while restrack reports it.
    let Some(qp) = (unsafe { get::<D>(ibqp) }) else {
        return 0;
    };
    let inline = if qp.inline_recv() { c"on" } else { c"off" };
    // SAFETY: `msg` is the netlink message under construction.
    let Some(nest) = (unsafe { Nest::start(msg, b::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER) })
    else {
        return EMSGSIZE.to_errno();
    };
    // SAFETY: a live message; static NUL-terminated name and value.
    let r = unsafe {
        b::rdma_nl_put_driver_string(msg, c"inline_recv".as_char_ptr(), inline.as_char_ptr())
    };
    if r != 0 {
        return EMSGSIZE.to_errno();
    }
    nest.end();
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn query_qp<D: Driver>(
    ibqp: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    _mask: c_int,
    init: *mut b::ib_qp_init_attr,
) -> c_int {
    let r = (|| {
        // SAFETY: a QP of `D` alive for the call.
        let qp = unsafe { get::<D>(ibqp) }.ok_or(EINVAL)?;
        let q = qp.query();
        // SAFETY: ib_core's out structs.
        let (a, i) = unsafe { (&mut *attr, &mut *init) };
        *a = Default::default();
        a.qp_state = q.state;
        a.cur_qp_state = q.state;
        a.path_mtu = if q.path_mtu == 0 { 1 } else { q.path_mtu };
        a.path_mig_state = b::ib_mig_state_IB_MIG_MIGRATED;
        a.qkey = q.qkey;
        a.rq_psn = q.rq_psn;
        a.sq_psn = q.sq_psn;
        a.dest_qp_num = q.dest_qpn;
        a.qp_access_flags = q.access as c_int;
        a.port_num = 1;
        a.timeout = q.timeout;
        a.retry_cnt = q.retry_cnt;
        a.rnr_retry = q.rnr_retry;
        a.min_rnr_timer = q.min_rnr_timer;
        a.max_rd_atomic = q.max_rd_atomic;
        a.max_dest_rd_atomic = q.max_dest_rd_atomic;
        // The path, so that what a query returns can be given back to
        // modify (pyverbs' QP restart does exactly that).
        if let Some(av) = q.av.as_ref() {
            av_to_attr(av, &mut a.ah_attr);
        }
        let c = qp.caps();
        a.cap.max_send_wr = c.max_send_wr;
        a.cap.max_recv_wr = c.max_recv_wr;
        a.cap.max_send_sge = c.max_send_sge;
        a.cap.max_recv_sge = c.max_recv_sge;
        a.cap.max_inline_data = c.max_inline;
        i.cap = b::ib_qp_cap { ..a.cap };
        i.qp_type = qp.ty() as u32;
        i.sq_sig_type = if qp.sq_sig_all() {
            b::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            b::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        Ok(())
    })();
    to_c_int(r)
}

// The typed work requests embed the generic one as their first field.
const _: () = assert!(
    core::mem::offset_of!(b::ib_rdma_wr, wr) == 0
        && core::mem::offset_of!(b::ib_atomic_wr, wr) == 0
        && core::mem::offset_of!(b::ib_ud_wr, wr) == 0
        && core::mem::offset_of!(b::ib_reg_wr, wr) == 0
);

/// The typed work request around `wr` (ib_core's `rdma_wr()`, `ud_wr()`,
/// `atomic_wr()`).
///
/// # Safety
///
/// `wr` is the `wr` field of a `T` (its opcode, or its QP's type, says which).
unsafe fn outer<'a, T>(wr: *const b::ib_send_wr) -> &'a T {
    // SAFETY: caller contract; the field is at offset 0 (checked above).
    unsafe { &*wr.cast::<T>() }
}

/// A kernel consumer's send work request as oxe's WQE: header plus SGEs,
/// or plus the inline bytes copied from the consumer's buffers.
///
/// # Safety
///
/// `wr` is a kernel consumer's work request, valid for the call.
unsafe fn kernel_wqe<D: Driver>(
    qp: &D::Qp,
    ibdev: *mut b::ib_device,
    wrp: *const b::ib_send_wr,
    body: &mut [u8; super::queue::MAX_SLOT],
) -> Result<(OxeSendWqe, usize, Option<Av>)> {
    // (The typed request around it is read through `wrp`, which covers it.)
    // SAFETY: caller contract.
    let wr = unsafe { &*wrp };
    let mut w = OxeSendWqe {
        // SAFETY: kernel WRs carry wr_id (or wr_cqe, same bits).
        wr_id: unsafe { *wr.__bindgen_anon_1.wr_id.as_ref() },
        opcode: wr.opcode,
        send_flags: wr.send_flags as u32 & 0xf,
        num_sge: 0,
        // SAFETY: a union of two u32 views.
        imm_data: unsafe { *wr.ex.imm_data.as_ref() },
        ..Default::default()
    };
    let n = usize::try_from(wr.num_sge).map_err(|_| EINVAL)?;
    let sges: &[b::ib_sge] = if n == 0 {
        &[]
    } else {
        // SAFETY: the consumer's SGE array of num_sge entries.
        unsafe { core::slice::from_raw_parts(wr.sg_list, n) }
    };
    let caps = qp.caps();
    let mut used = 0usize;
    if w.send_flags & crate::oxe_core::abi::OXE_SEND_INLINE != 0 {
        for s in sges {
            let len = s.length as usize;
            if used + len > caps.max_inline as usize || used + len > body.len() {
                return Err(EINVAL);
            }
            crate::ib::kmem::KernelToken::new().read(s.addr, &mut body[used..used + len]);
            used += len;
        }
        w.num_sge = used as u32;
    } else {
        if n > caps.max_send_sge as usize {
            return Err(EINVAL);
        }
        for s in sges {
            let sge = OxeSge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
            sge.write_to(body.get_mut(used..).ok_or(EINVAL)?);
            used += OxeSge::SIZE;
        }
        w.num_sge = n as u32;
    }
    let mut av = None;
    match wr.opcode {
        b::ib_wr_opcode_IB_WR_RDMA_WRITE
        | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
        | b::ib_wr_opcode_IB_WR_RDMA_READ => {
            // SAFETY: an RDMA opcode's WR is embedded in an ib_rdma_wr.
            let r = unsafe { outer::<b::ib_rdma_wr>(wrp) };
            w.remote_addr = r.remote_addr;
            w.rkey = r.rkey;
        }
        b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
            // SAFETY: an atomic opcode's WR is embedded in an ib_atomic_wr.
            let a = unsafe { outer::<b::ib_atomic_wr>(wrp) };
            w.remote_addr = a.remote_addr;
            w.rkey = a.rkey;
            w.compare_add = a.compare_add;
            w.swap = a.swap;
        }
        b::ib_wr_opcode_IB_WR_REG_MR => {
            // SAFETY: a REG_MR's WR is embedded in an ib_reg_wr.
            let r = unsafe { outer::<b::ib_reg_wr>(wrp) };
            let ibmr = r.mr;
            // SAFETY: the consumer's MR, alive until the WR completes; it
            // must be one of this QP's device (ib_core does not check).
            if ibmr.is_null() || unsafe { (*ibmr).device } != ibdev {
                return Err(EINVAL);
            }
            // SAFETY: an MR of this device, so this driver's.
            let mr = unsafe { super::mr::get::<D::Mr>(ibmr) };
            // The operands ride as `oxe_core::abi` documents for REG_MR.
            w.imm_data = super::driver::MrOps::key(&**mr);
            w.rkey = r.key;
            // SAFETY: as above; ib_map_mr_sg set the translation.
            let (iova, length) = unsafe { ((*ibmr).iova, (*ibmr).length) };
            (w.remote_addr, w.compare_add) = (iova, length);
            w.swap = u64::from(r.access as u32);
        }
        // No kernel work request type carries their operands (user space
        // posts them through ibv_wr_flush and ibv_wr_atomic_write only).
        // Binds likewise (a kernel consumer has no ib_mw to bind).
        b::ib_wr_opcode_IB_WR_FLUSH
        | b::ib_wr_opcode_IB_WR_ATOMIC_WRITE
        | b::ib_wr_opcode_IB_WR_BIND_MW => return Err(EINVAL),
        _ => {}
    }
    if matches!(qp.ty(), QpType::Ud | QpType::Gsi) {
        // SAFETY: a UD QP's WRs are embedded in an ib_ud_wr.
        let u = unsafe { outer::<b::ib_ud_wr>(wrp) };
        w.remote_qpn = u.remote_qpn;
        w.remote_qkey = u.remote_qkey;
        // SAFETY: the consumer's AH, alive until the WR completes.
        av = unsafe { super::ah::get(u.ah) }.map(|a| a.av);
        if av.is_none() {
            return Err(EINVAL);
        }
    }
    Ok((w, used, av))
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn post_send<D: Driver>(
    ibqp: *mut b::ib_qp,
    mut wr: *const b::ib_send_wr,
    bad: *mut *const b::ib_send_wr,
) -> c_int {
    // SAFETY: a QP of `D` alive for the call.
    let Some(qp) = (unsafe { get::<D>(ibqp) }) else {
        return EINVAL.to_errno();
    };
    if !qp.is_kernel() {
        // User space's doorbell: the work requests are in the mapped SQ.
        qp.doorbell();
        return 0;
    }
    let mut body = [0u8; super::queue::MAX_SLOT];
    while !wr.is_null() {
        // SAFETY: ib_core's QP, alive for the call.
        let ibdev = unsafe { (*ibqp).device };
        // SAFETY: the consumer's chain of WRs, valid for the call.
        let r = unsafe { kernel_wqe::<D>(qp, ibdev, wr, &mut body) }
            .and_then(|(w, used, av)| qp.post_send(&w, &body[..used], av));
        if let Err(e) = r {
            if !bad.is_null() {
                // SAFETY: ib_core's out pointer.
                unsafe { *bad = wr };
            }
            qp.kick();
            return e.to_errno();
        }
        // SAFETY: as above.
        wr = unsafe { (*wr).next };
    }
    qp.kick();
    0
}

/// A kernel consumer's receive work request as oxe's WQE and SGEs.
///
/// # Safety
///
/// `wr` is a kernel consumer's receive work request, valid for the call.
pub(super) unsafe fn kernel_recv(
    wr: &b::ib_recv_wr,
    max_sge: u32,
) -> Result<(OxeRecvWqe, KVec<OxeSge>)> {
    let n = usize::try_from(wr.num_sge).map_err(|_| EINVAL)?;
    if n > max_sge as usize {
        return Err(EINVAL);
    }
    let sges: &[b::ib_sge] = if n == 0 {
        &[]
    } else {
        // SAFETY: the consumer's SGE array.
        unsafe { core::slice::from_raw_parts(wr.sg_list, n) }
    };
    let mut v = KVec::with_capacity(n, GFP_ATOMIC)?;
    for s in sges {
        v.push(
            OxeSge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            },
            GFP_ATOMIC,
        )?;
    }
    let w = OxeRecvWqe {
        // SAFETY: kernel WRs carry wr_id (or wr_cqe, same bits).
        wr_id: unsafe { *wr.__bindgen_anon_1.wr_id.as_ref() },
        num_sge: n as u32,
        reserved: 0,
    };
    Ok((w, v))
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn post_recv<D: Driver>(
    ibqp: *mut b::ib_qp,
    mut wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> c_int {
    // SAFETY: a QP of `D` alive for the call.
    let Some(qp) = (unsafe { get::<D>(ibqp) }) else {
        return EINVAL.to_errno();
    };
    if !qp.is_kernel() || qp.has_srq() {
        if !bad.is_null() {
            // SAFETY: ib_core's out pointer.
            unsafe { *bad = wr };
        }
        return EINVAL.to_errno();
    }
    while !wr.is_null() {
        // SAFETY: the consumer's chain of WRs.
        let r = unsafe { kernel_recv(&*wr, qp.caps().max_recv_sge) }
            .and_then(|(w, sges)| qp.post_recv(&w, &sges));
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
    // Receives posted in the error state complete with a flush error.
    qp.kick_if_error();
    0
}
