// SPDX-License-Identifier: GPL-2.0

//! The ib_device_ops table, each verb's trampoline generic over the driver
//! (the object verbs are in the object's file: `cq.rs`, `qp.rs`, ...), and
//! the device-wide verbs: queries, user contexts, PDs.

use super::device::{self, IbDev};
use super::driver::Driver;
use super::error::to_c_int;
use super::udata::UData;
use crate::bindings as b;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// The ops of driver `D`'s devices, copied into each ib_device by
/// `ib_set_device_ops`.
pub(super) fn device_ops<D: Driver>() -> b::ib_device_ops {
    use super::{ah, cq, mad, mr, mw, qp, queue, srq, stats};
    let mut ops = b::ib_device_ops {
        owner: <D::Module as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        driver_id: b::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: crate::oxe_core::abi::OXE_ABI_VERSION,
        dealloc_driver: Some(device::dealloc_driver::<D>),
        query_device: Some(query_device::<D>),
        query_port: Some(query_port::<D>),
        query_port_speed: Some(query_port_speed),
        get_port_immutable: Some(get_port_immutable),
        get_link_layer: Some(get_link_layer),
        query_pkey: Some(query_pkey),
        alloc_ucontext: Some(alloc_ucontext::<D>),
        dealloc_ucontext: Some(dealloc_ucontext::<D>),
        disassociate_ucontext: Some(disassociate_ucontext),
        mmap: Some(queue::mmap),
        mmap_free: Some(queue::mmap_free),
        create_cq: Some(cq::create_cq::<D>),
        destroy_cq: Some(cq::destroy_cq::<D>),
        poll_cq: Some(cq::poll_cq::<D>),
        req_notify_cq: Some(cq::req_notify_cq::<D>),
        resize_user_cq: Some(cq::resize_cq::<D>),
        create_qp: Some(qp::create_qp::<D>),
        modify_qp: Some(qp::modify_qp::<D>),
        query_qp: Some(qp::query_qp::<D>),
        destroy_qp: Some(qp::destroy_qp::<D>),
        post_send: Some(qp::post_send::<D>),
        post_recv: Some(qp::post_recv::<D>),
        attach_mcast: Some(qp::attach_mcast::<D>),
        detach_mcast: Some(qp::detach_mcast::<D>),
        create_srq: Some(srq::create_srq::<D>),
        modify_srq: Some(srq::modify_srq::<D>),
        query_srq: Some(srq::query_srq::<D>),
        destroy_srq: Some(srq::destroy_srq::<D>),
        post_srq_recv: Some(srq::post_srq_recv::<D>),
        create_ah: Some(ah::create_ah::<D>),
        create_user_ah: Some(ah::create_ah::<D>),
        destroy_ah: Some(ah::destroy_ah::<D>),
        alloc_pd: Some(alloc_pd::<D>),
        dealloc_pd: Some(dealloc_pd::<D>),
        get_dma_mr: Some(mr::get_dma_mr),
        alloc_mr: Some(mr::alloc_mr::<D>),
        map_mr_sg: Some(mr::map_mr_sg::<D>),
        reg_user_mr: Some(mr::reg_user_mr::<D>),
        rereg_user_mr: Some(mr::rereg_user_mr::<D>),
        dereg_mr: Some(mr::dereg_mr::<D>),
        advise_mr: Some(mr::advise_mr::<D>),
        alloc_mw: Some(mw::alloc_mw::<D>),
        dealloc_mw: Some(mw::dealloc_mw::<D>),
        fill_res_mr_entry: Some(mr::fill_res_mr_entry::<D>),
        fill_res_qp_entry: Some(qp::fill_res_qp_entry::<D>),
        fill_stat_mr_entry: Some(mr::fill_stat_mr_entry::<D>),
        alloc_hw_device_stats: Some(stats::alloc_device_stats::<D>),
        alloc_hw_port_stats: Some(stats::alloc_port_stats::<D>),
        get_hw_stats: Some(stats::get_stats::<D>),
        process_mad: Some(mad::process_mad::<D>),
        ..Default::default()
    };
    super::objects::set_sizes::<D>(&mut ops);
    ops
}

/// The device behind a callback's `ib_device`.
///
/// # Safety
///
/// `ib` is the device of the callback in progress.
pub(super) unsafe fn dev_of<D: Driver>(ib: *mut b::ib_device) -> Result<(IbDev<D>, &'static D)> {
    // SAFETY: caller contract; ib_core keeps the device for the callback.
    let dev = unsafe { IbDev::from_raw(ib) }.ok_or(ENODEV)?;
    // The 'static is confined to `ib/` (dev_of is not the driver's): every
    // caller uses it only for the duration of its callback.
    Ok((dev, dev.drv()?))
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn query_device<D: Driver>(
    ib: *mut b::ib_device,
    attr: *mut b::ib_device_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: callback on a registered device.
        let (_, drv) = unsafe { dev_of::<D>(ib) }?;
        // oxe has no extended driver data for query_device: any is refused, as IBTA
        // leaves vendor data to the vendor.
        // SAFETY: `udata` is the call's udata or null.
        let udata = unsafe { udata.as_ref() };
        if udata.is_some_and(|u| u.inlen != 0 || u.outlen != 0) {
            return Err(EINVAL);
        }
        // SAFETY: ib_core passes a writable attribute struct.
        drv.query_device(unsafe { &mut *attr });
        Ok(())
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn query_port<D: Driver>(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> c_int {
    let r = (|| {
        // SAFETY: callback on a registered device.
        let (_, drv) = unsafe { dev_of::<D>(ib) }?;
        // SAFETY: ib_core passes a zeroed, writable attribute struct.
        let attr = unsafe { &mut *attr };
        drv.query_port(port, attr)?;
        // The port is the netdev's: its speed and width are the netdev's
        // link speed on the IB grid, as ib_core maps it for every RoCE
        // device. Without an answer (the netdev is going away), the
        // driver's own figures stand.
        let (mut speed, mut width) = (0, 0);
        // SAFETY: a registered device (as above) and two live locals.
        if unsafe { b::ib_get_eth_speed(ib, port, &mut speed, &mut width) } == 0 {
            attr.active_speed = speed;
            attr.active_width = width;
        }
        Ok(())
    })();
    to_c_int(r)
}

/// `ibv_query_port_speed`: the port's effective rate in units of 100 Mb/s,
/// from the same attributes `ibv_query_port` reports (the sysfs `rate`
/// file's figure), 0 while the port is not active.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn query_port_speed(ib: *mut b::ib_device, port: u32, speed: *mut u64) -> c_int {
    let mut attr: b::ib_port_attr = Default::default();
    // SAFETY: ib_query_port calls back into query_port on this registered device.
    let ret = unsafe { b::ib_query_port(ib, port, &mut attr) };
    if ret != 0 {
        return ret;
    }
    let mut rate = 0;
    if attr.state == b::ib_port_state_IB_PORT_ACTIVE {
        let mut info: b::ib_port_speed_info = Default::default();
        // SAFETY: two live locals; the function only reads `attr`.
        let ret = unsafe { b::ib_port_attr_to_speed_info(&mut attr, &mut info) };
        if ret != 0 {
            return ret;
        }
        rate = u64::try_from(info.rate).unwrap_or(0);
    }
    // SAFETY: ib_core passes a writable u64.
    unsafe { *speed = rate };
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn get_port_immutable(
    ib: *mut b::ib_device,
    port: u32,
    imm: *mut b::ib_port_immutable,
) -> c_int {
    let mut attr: b::ib_port_attr = Default::default();
    // SAFETY: ib_query_port calls back into query_port on this registered device.
    let ret = unsafe { b::ib_query_port(ib, port, &mut attr) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: ib_core passes a writable struct.
    let imm = unsafe { &mut *imm };
    imm.pkey_tbl_len = attr.pkey_tbl_len.into();
    imm.gid_tbl_len = attr.gid_tbl_len;
    imm.core_cap_flags = b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    imm.max_mad_size = b::IB_MGMT_MAD_SIZE;
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn get_link_layer(_ib: *mut b::ib_device, _port: u32) -> b::rdma_link_layer {
    b::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn query_pkey(
    _ib: *mut b::ib_device,
    _port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    // RoCE has one partition, the default one (IBTA A17.9.2: P_Key table of one entry).
    if index != 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: ib_core passes a writable u16.
    unsafe { *pkey = crate::oxe_core::bth::Bth::DEFAULT_PKEY };
    0
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn alloc_ucontext<D: Driver>(
    uctx: *mut b::ib_ucontext,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated ucontext of this device.
        let (_, drv) = unsafe { dev_of::<D>((*uctx).device) }?;
        // SAFETY: the call's udata.
        drv.alloc_ucontext(&unsafe { UData::new(udata) })
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn dealloc_ucontext<D: Driver>(uctx: *mut b::ib_ucontext) {
    // SAFETY: a core-allocated ucontext of this device.
    if let Ok((_, drv)) = unsafe { dev_of::<D>((*uctx).device) } {
        drv.dealloc_ucontext();
    }
}

/// Having this op is what lets ib_core unregister the device (and rmmod
/// proceed) while user contexts are still open. Nothing is left to do here
/// for the rings a process has mapped: ib_core zaps only mappings made
/// through `rdma_user_mmap_io`, not these, but `remap_vmalloc_range` takes a
/// reference on every page it maps and leaves no oxe callback in the vma,
/// so a mapping outlives the device and the module and keeps its pages
/// until the process unmaps it. Neither the device nor the process then
/// writes anything the other reads.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn disassociate_ucontext(_uctx: *mut b::ib_ucontext) {}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn alloc_pd<D: Driver>(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a core-allocated PD of this device.
    let r = unsafe { dev_of::<D>((*pd).device) }.and_then(|(_, drv)| drv.alloc_pd());
    if r.is_ok() {
        // SAFETY: the PD ib_core allocated for this call, not yet published.
        unsafe { super::objects::PdObj::number(pd) };
    }
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn dealloc_pd<D: Driver>(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a core-allocated PD of this device.
    if let Ok((_, drv)) = unsafe { dev_of::<D>((*pd).device) } {
        drv.dealloc_pd();
    }
    0
}
