// SPDX-License-Identifier: GPL-2.0

//! The ib_device_ops table: one trampoline per verb, each turning C arguments
//! into typed values and calling the safe implementation in the driver files.

use super::device::{self, IbDev};
use super::error::{err_ptr, to_c_int};
use super::objects::PdId;
use super::udata::UData;
use crate::bindings as b;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// The device's ops, copied into the ib_device by `ib_set_device_ops`.
pub(super) fn device_ops() -> b::ib_device_ops {
    let mut ops = b::ib_device_ops {
        owner: <crate::OxeModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        driver_id: b::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: crate::oxe_core::abi::OXE_ABI_VERSION,
        dealloc_driver: Some(device::dealloc_driver),
        query_device: Some(query_device),
        query_port: Some(query_port),
        get_port_immutable: Some(get_port_immutable),
        get_link_layer: Some(get_link_layer),
        query_pkey: Some(query_pkey),
        alloc_ucontext: Some(alloc_ucontext),
        dealloc_ucontext: Some(dealloc_ucontext),
        disassociate_ucontext: Some(disassociate_ucontext),
        mmap: Some(super::queue::mmap),
        mmap_free: Some(super::queue::mmap_free),
        create_cq: Some(super::cq::create_cq),
        destroy_cq: Some(super::cq::destroy_cq),
        poll_cq: Some(super::cq::poll_cq),
        req_notify_cq: Some(super::cq::req_notify_cq),
        resize_user_cq: Some(super::cq::resize_cq),
        create_qp: Some(super::qp::create_qp),
        modify_qp: Some(super::qp::modify_qp),
        query_qp: Some(super::qp::query_qp),
        destroy_qp: Some(super::qp::destroy_qp),
        post_send: Some(super::qp::post_send),
        post_recv: Some(super::qp::post_recv),
        attach_mcast: Some(super::qp::attach_mcast),
        detach_mcast: Some(super::qp::detach_mcast),
        create_srq: Some(super::srq::create_srq),
        modify_srq: Some(super::srq::modify_srq),
        query_srq: Some(super::srq::query_srq),
        destroy_srq: Some(super::srq::destroy_srq),
        post_srq_recv: Some(super::srq::post_srq_recv),
        create_ah: Some(super::ah::create_ah),
        create_user_ah: Some(super::ah::create_ah),
        destroy_ah: Some(super::ah::destroy_ah),
        alloc_pd: Some(alloc_pd),
        dealloc_pd: Some(dealloc_pd),
        get_dma_mr: Some(get_dma_mr),
        reg_user_mr: Some(reg_user_mr),
        rereg_user_mr: Some(rereg_user_mr),
        dereg_mr: Some(dereg_mr),
        alloc_mw: Some(super::mw::alloc_mw),
        dealloc_mw: Some(super::mw::dealloc_mw),
        fill_res_mr_entry: Some(fill_res_mr_entry),
        alloc_hw_device_stats: Some(super::stats::alloc_device_stats),
        get_hw_stats: Some(super::stats::get_stats),
        process_mad: Some(super::mad::process_mad),
        ..Default::default()
    };
    super::objects::set_sizes(&mut ops);
    ops
}

/// The device behind a callback's `ib_device`.
///
/// # Safety
///
/// `ib` is the device of the callback in progress.
pub(super) unsafe fn dev_of(
    ib: *mut b::ib_device,
) -> Result<(IbDev, &'static crate::device::OxeDevice)> {
    // SAFETY: caller contract; ib_core keeps the device for the callback.
    let dev = unsafe { IbDev::from_raw(ib) }.ok_or(ENODEV)?;
    // The 'static is confined to this file: every caller uses it only for
    // the duration of its callback.
    Ok((dev, dev.drv()?))
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn query_device(
    ib: *mut b::ib_device,
    attr: *mut b::ib_device_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: callback on a registered device.
        let (_, drv) = unsafe { dev_of(ib) }?;
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
unsafe extern "C" fn query_port(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> c_int {
    let r = (|| {
        // SAFETY: callback on a registered device.
        let (_, drv) = unsafe { dev_of(ib) }?;
        // SAFETY: ib_core passes a zeroed, writable attribute struct.
        drv.query_port(port, unsafe { &mut *attr })
    })();
    to_c_int(r)
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
unsafe extern "C" fn alloc_ucontext(uctx: *mut b::ib_ucontext, udata: *mut b::ib_udata) -> c_int {
    let r = (|| {
        // SAFETY: a core-allocated ucontext of this device.
        let (_, drv) = unsafe { dev_of((*uctx).device) }?;
        // SAFETY: the call's udata.
        drv.alloc_ucontext(&unsafe { UData::new(udata) })
    })();
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn dealloc_ucontext(uctx: *mut b::ib_ucontext) {
    // SAFETY: a core-allocated ucontext of this device.
    if let Ok((_, drv)) = unsafe { dev_of((*uctx).device) } {
        drv.dealloc_ucontext();
    }
}

/// ib_core zaps every mapping of the context (rdma_user_mmap entries) itself
/// when the device goes away under an open context; having this op is what
/// lets it unregister (and rmmod proceed) while contexts are still open.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn disassociate_ucontext(_uctx: *mut b::ib_ucontext) {}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn alloc_pd(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a core-allocated PD of this device.
    let r = unsafe { dev_of((*pd).device) }.and_then(|(_, drv)| drv.alloc_pd());
    to_c_int(r)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn dealloc_pd(pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
    // SAFETY: a core-allocated PD of this device.
    if let Ok((_, drv)) = unsafe { dev_of((*pd).device) } {
        drv.dealloc_pd();
    }
    0
}

/// A DMA MR would open all of kernel memory to whoever holds its rkey (it
/// exists for IB_PD_UNSAFE_GLOBAL_RKEY). oxe refuses it: kernel consumers use
/// the PD's local_dma_lkey (IBK_LOCAL_DMA_LKEY) and register what they expose.
/// The op itself must exist: ib_core counts it among the verbs a device needs
/// before kernel clients (MAD, CM, RDMA-CM) attach to it.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn get_dma_mr(_pd: *mut b::ib_pd, _access: c_int) -> *mut b::ib_mr {
    err_ptr(EOPNOTSUPP)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn reg_user_mr(
    pd: *mut b::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    dmah: *mut b::ib_dmah,
    udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    let r = (|| {
        // DMA handles (TPH steering hints) mean nothing to a software device.
        if !dmah.is_null() {
            return Err(EOPNOTSUPP);
        }
        // SAFETY: a PD of this device, held by ib_core for the call.
        let (dev, drv) = unsafe { dev_of((*pd).device) }?;
        // The reply first: it does not depend on the MR, and a reply that
        // cannot be written (an unwritable buffer) must fail the verb
        // before anything is pinned or published. Written after, it left
        // a registered MR that ib_core never learnt of: its keys resolved
        // and its pages stayed pinned until the device went.
        // SAFETY: the call's udata.
        unsafe { UData::new(udata) }.respond(&crate::mr::MrKeys::resp())?;
        let (mr, keys) =
            crate::mr::reg_user(drv, dev, PdId::of(pd), start, length, iova, access as u32)?;
        super::mr::alloc(mr.clone(), &keys, drv.debugfs.as_ref()).inspect_err(|_| {
            // Every verb undoes what it published when a later step fails.
            crate::mr::withdraw(drv, &mr);
        })
    })();
    r.unwrap_or_else(err_ptr)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rereg_user_mr(
    ibmr: *mut b::ib_mr,
    flags: c_int,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    pd: *mut b::ib_pd,
    udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    let r = (|| {
        // SAFETY: an MR oxe allocated, write-locked by uverbs for the call.
        let (dev, drv) = unsafe { dev_of((*ibmr).device) }?;
        // SAFETY: as above.
        let mr = unsafe { super::mr::get(ibmr) };
        let req = crate::mr::Rereg {
            flags: flags as u32,
            start,
            length,
            iova,
            access: access as u32,
            pd: PdId::of(pd),
        };
        // The reply first, as for reg_user_mr: once rereg_user returns, the
        // MR has its new PD, pages and rights, and a failed reply copy
        // would fail the verb with ib_core keeping the old PD, which could
        // then be freed while the MR still named it.
        // SAFETY: the call's udata.
        unsafe { UData::new(udata) }.respond(&crate::mr::MrKeys::resp())?;
        let keys = crate::mr::rereg_user(drv, dev, mr, &req)?;
        // SAFETY: as above.
        unsafe { super::mr::republish(ibmr, &keys) };
        // Null: the MR was changed in place; ib_core keeps the same object.
        Ok(core::ptr::null_mut())
    })();
    r.unwrap_or_else(err_ptr)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn dereg_mr(ibmr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
    let r = (|| {
        // SAFETY: an MR oxe allocated; ib_core calls dereg once.
        let (_, drv) = unsafe { dev_of((*ibmr).device) }?;
        // SAFETY: as above.
        crate::mr::dereg(drv, unsafe { super::mr::get(ibmr) })?;
        // SAFETY: dereg succeeded, so ib_core forgets `ibmr` after we return.
        unsafe { super::mr::free(ibmr) };
        Ok(())
    })();
    to_c_int(r)
}

/// `rdma resource show mr -dd`: oxe's view of the MR, as driver attributes.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn fill_res_mr_entry(msg: *mut b::sk_buff, ibmr: *mut b::ib_mr) -> c_int {
    // SAFETY: an MR oxe allocated, alive while restrack reports it.
    let info = unsafe { super::mr::get(ibmr) }.info();
    // SAFETY: `msg` is the netlink message under construction.
    let nest = unsafe { b::oxe_shim_nla_nest_start_driver(msg) };
    if nest.is_null() {
        return EMSGSIZE.to_errno();
    }
    let fields: [(&core::ffi::CStr, u32); 5] = [
        (c"pages", info.pages),
        (c"page_size", info.page_size),
        (c"pinned", info.pinned.into()),
        (c"pinned_writable", info.pinned_writable.into()),
        (c"key_index", info.key_index),
    ];
    for (name, value) in fields {
        // SAFETY: a live message and a static NUL-terminated name.
        if unsafe { b::rdma_nl_put_driver_u32(msg, name.as_char_ptr(), value) } != 0 {
            // SAFETY: `nest` was opened in `msg` above.
            unsafe { b::oxe_shim_nla_nest_cancel(msg, nest) };
            return EMSGSIZE.to_errno();
        }
    }
    // SAFETY: as above.
    if unsafe { b::rdma_nl_put_driver_u32_hex(msg, c"access".as_char_ptr(), info.access) } != 0 {
        // SAFETY: as above.
        unsafe { b::oxe_shim_nla_nest_cancel(msg, nest) };
        return EMSGSIZE.to_errno();
    }
    // SAFETY: as above.
    unsafe { b::oxe_shim_nla_nest_end(msg, nest) };
    0
}
