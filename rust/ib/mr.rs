// SPDX-License-Identifier: GPL-2.0

//! MR verbs, and the ib_mr objects behind them (ib_core leaves MR
//! allocation to drivers): registration, rereg, dereg, and what
//! `rdma resource show mr -dd` reports.

use super::debugfs::{object_file, ObjectFile};
use super::driver::{Driver, MrOps};
use super::error::{err_ptr, to_c_int};
use super::lock::{new_spinlock_bh, SpinLockBh};
use super::memory::Memory;
use super::nl::Nest;
use super::objects::PdId;
use super::ops::dev_of;
use super::udata::UData;
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

/// What ib_core and user space learn about an MR after reg or rereg.
pub(crate) struct MrKeys {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) page_size: u32,
}

/// A registration request as uverbs passes it (`access` is IB_ACCESS_*).
pub(crate) struct RegUser {
    pub(crate) pd: PdId,
    pub(crate) start: u64,
    pub(crate) length: u64,
    pub(crate) iova: u64,
    pub(crate) access: u32,
}

/// A rereg request as uverbs passes it (`flags` is IB_MR_REREG_*).
pub(crate) struct Rereg {
    pub(crate) flags: u32,
    pub(crate) start: u64,
    pub(crate) length: u64,
    pub(crate) iova: u64,
    pub(crate) access: u32,
    pub(crate) pd: PdId,
}

/// What `ibv_advise_mr` asks of ODP ranges.
pub(crate) struct Advice {
    /// Translate for writing (PREFETCH_WRITE).
    pub(crate) write: bool,
    /// Fault pages in; false takes only what is mapped (PREFETCH_NO_FAULT).
    pub(crate) fault: bool,
    /// Before the verb returns (IBV_ADVISE_MR_FLAG_FLUSH); else in the
    /// background.
    pub(crate) sync: bool,
}

/// An MR's internals, for `rdma resource show mr -dd`.
pub(crate) struct MrInfo {
    pub(crate) pages: u32,
    pub(crate) page_size: u32,
    pub(crate) pinned: bool,
    pub(crate) pinned_writable: bool,
    pub(crate) access: u32,
    /// On-demand paging: pages translated now, and the pages faults
    /// brought in and invalidations took away since registration (all 0
    /// for a pinned MR).
    pub(crate) odp_present: u32,
    pub(crate) odp_faulted: u32,
    pub(crate) odp_invalidated: u32,
    /// "no", "explicit" (a range) or "implicit" (the address space).
    pub(crate) odp: &'static core::ffi::CStr,
    /// "no" for a user MR; a fast-registration MR's state, "free" or
    /// "valid".
    pub(crate) fastreg: &'static core::ffi::CStr,
    /// "no", or an indirect key's layout: "none" (Free), "list" or
    /// "interleaved"; with its entry count, rounds and depth (0 when none).
    pub(crate) indirect: &'static core::ffi::CStr,
    pub(crate) indirect_entries: u32,
    pub(crate) indirect_rounds: u32,
    pub(crate) indirect_depth: u32,
    /// The first entries of an indirect key's layout, as (length, skip);
    /// `indirect_entries` says how many there are in all. Never their keys
    /// or addresses: see [`fill_res_mr_entry`].
    pub(crate) indirect_first: [(u32, u32); SHOWN_ENTRIES],
}

/// How many of an indirect key's entries `rdma resource show mr` lists
/// (debugfs lists them all).
pub(crate) const SHOWN_ENTRIES: usize = 8;

/// The `ib_mr` behind a driver MR, for a key the driver changes on its own
/// (an indirect key's configuration): ib_core reports the keys the `ib_mr`
/// holds (`rdma resource show mr`), so they must follow. Attached when the
/// `ib_mr` is made and detached before it is freed, both under the link's
/// lock, under which alone the pointer is followed.
#[pin_data]
pub(crate) struct IbMrLink {
    #[pin]
    ib: SpinLockBh<Option<IbMrPtr>>,
}

struct IbMrPtr(NonNull<b::ib_mr>);

// SAFETY: the pointer is followed only under the link's lock, while the
// `ib_mr` is attached and so not freed (`IbMrLink`), from any thread.
unsafe impl Send for IbMrPtr {}

impl IbMrLink {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(IbMrLink {
            ib <- new_spinlock_bh!(None, "oxe_ib_mr_link"),
        })
    }

    /// Makes the `ib_mr`'s lkey and rkey `key`, if it still exists.
    pub(crate) fn publish_key(&self, key: u32) {
        let ib = self.ib.lock();
        if let Some(IbMrPtr(p)) = &*ib {
            let p = p.as_ptr();
            // SAFETY: attached, so alive until `detach`, which waits for
            // the lock held here. ib_core reads the keys without a lock
            // (netlink dumps): volatile word-sized stores, never torn.
            unsafe {
                core::ptr::write_volatile(&raw mut (*p).lkey, key);
                core::ptr::write_volatile(&raw mut (*p).rkey, key);
            }
        }
    }

    fn attach(&self, ib: NonNull<b::ib_mr>) {
        *self.ib.lock() = Some(IbMrPtr(ib));
    }

    fn detach(&self) {
        *self.ib.lock() = None;
    }
}

/// An MR as ib_core sees it (the `ib_mr`) plus the driver's MR.
/// Field order is drop order: the debugfs file (which points at the MR) goes first.
#[repr(C)]
struct MrObj<M: 'static + super::debugfs::Describe> {
    ib: b::ib_mr,
    debugfs: Option<ObjectFile<M>>,
    mr: Arc<M>,
}

/// Allocates the ib_mr for a new MR; ownership passes to ib_core until `free`.
fn alloc<D: Driver>(
    mr: Arc<D::Mr>,
    keys: &MrKeys,
    dir: Option<&kernel::debugfs::Dir>,
) -> Result<*mut b::ib_mr> {
    let mut obj = KBox::new(
        MrObj {
            ib: Default::default(),
            debugfs: None,
            mr,
        },
        GFP_KERNEL,
    )?;
    publish(&mut obj.ib, keys);
    let index = crate::oxe_core::Key::from_raw(keys.lkey).index();
    // The file holds a reference to the MR, and goes first when `obj` is freed.
    obj.debugfs = dir.and_then(|d| object_file(d, "mr", index, obj.mr.clone()));
    let mr = obj.mr.clone();
    let ib = KBox::into_raw(obj).cast::<b::ib_mr>();
    if let Some(ib) = NonNull::new(ib) {
        mr.ib_link().attach(ib);
    }
    Ok(ib)
}

/// Copies the keys and translation ib_core reports back to the caller.
fn publish(ib: &mut b::ib_mr, keys: &MrKeys) {
    ib.lkey = keys.lkey;
    ib.rkey = keys.rkey;
    ib.iova = keys.iova;
    ib.length = keys.length;
    ib.page_size = keys.page_size;
}

/// The driver's MR behind an ib_mr that `alloc` made.
///
/// # Safety
///
/// `ib` must come from `alloc::<M>` and not have been freed.
pub(super) unsafe fn get<'a, M: super::debugfs::Describe>(ib: *mut b::ib_mr) -> &'a Arc<M> {
    // SAFETY: `ib` is the first field of a live MrObj (caller contract).
    unsafe { &(*ib.cast::<MrObj<M>>()).mr }
}

/// A DMA MR would open all of kernel memory to whoever holds its rkey (it
/// exists for IB_PD_UNSAFE_GLOBAL_RKEY). It is refused: kernel consumers use
/// the PD's local_dma_lkey (IBK_LOCAL_DMA_LKEY) and register what they expose.
/// The op itself must exist: ib_core counts it among the verbs a device needs
/// before kernel clients (MAD, CM, RDMA-CM) attach to it.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn get_dma_mr(_pd: *mut b::ib_pd, _access: c_int) -> *mut b::ib_mr {
    err_ptr(EOPNOTSUPP)
}

/// ib_alloc_mr, for kernel consumers' fast registration: a Free MR of type
/// MEM_REG (whole pages) or SG_GAPS (scatterlist entries as they are).
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn alloc_mr<D: Driver>(
    pd: *mut b::ib_pd,
    mr_type: b::ib_mr_type,
    max_num_sg: u32,
) -> *mut b::ib_mr {
    let r = (|| {
        let gaps = match mr_type {
            b::ib_mr_type_IB_MR_TYPE_MEM_REG => false,
            b::ib_mr_type_IB_MR_TYPE_SG_GAPS => true,
            _ => return Err(EOPNOTSUPP),
        };
        // SAFETY: a PD of this device, held by ib_core for the call.
        let (_, drv) = unsafe { dev_of::<D>((*pd).device) }?;
        // SAFETY: as above.
        let pd = unsafe { PdId::of(pd) };
        let (mr, keys) = D::Mr::alloc_fast(drv, pd, max_num_sg, gaps)?;
        alloc::<D>(mr.clone(), &keys, drv.debugfs()).inspect_err(|_| {
            D::Mr::withdraw(drv, &mr);
        })
    })();
    r.unwrap_or_else(err_ptr)
}

/// `ib_sg_to_pages`' callback: one page of a MEM_REG MR's mapping.
///
/// # Safety
///
/// Called by ib_sg_to_pages, from `map_mr_sg::<D>`, with that call's MR.
unsafe extern "C" fn set_page<D: Driver>(ibmr: *mut b::ib_mr, addr: u64) -> c_int {
    // SAFETY: an MR this driver allocated (caller contract).
    let mr = unsafe { get::<D::Mr>(ibmr) };
    // SAFETY: as above; ib_map_mr_sg set the page size before the call.
    let page_size = unsafe { (*ibmr).page_size };
    let r = match mr.page_list().as_deref() {
        Some(Memory::Kernel(list)) => list.stage(addr, page_size.into()),
        _ => Err(EINVAL),
    };
    to_c_int(r)
}

/// ib_map_mr_sg: stages the scatterlist's kernel memory in the MR's page
/// list (in force only at the next IB_WR_REG_MR). Returns how many entries
/// were mapped; the consumer treats fewer than `sg_nents` as a failure.
/// MEM_REG goes through ib_core's ib_sg_to_pages, which also sets the
/// MR's iova and length; SG_GAPS takes each entry as a segment.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn map_mr_sg<D: Driver>(
    ibmr: *mut b::ib_mr,
    sg: *mut b::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut u32,
) -> c_int {
    // SAFETY: an MR this driver allocated, alive for the call.
    let mr = unsafe { get::<D::Mr>(ibmr) };
    let Some(mem) = mr.page_list() else {
        return EINVAL.to_errno();
    };
    let Memory::Kernel(list) = &*mem else {
        return EINVAL.to_errno();
    };
    // The consumer's MR, which it does not use concurrently with the
    // mapping (ib_map_mr_sg's contract); its fields are read and written
    // through the pointer, as ib_sg_to_pages does too.
    // SAFETY: as above.
    let (page_size, gaps) = unsafe {
        (
            (*ibmr).page_size,
            (*ibmr).type_ == b::ib_mr_type_IB_MR_TYPE_SG_GAPS,
        )
    };
    // Any power of two from a sector up: a page of the consumer's size is
    // contiguous memory, whatever the kernel's page size.
    if page_size < 512 || !page_size.is_power_of_two() {
        return EINVAL.to_errno();
    }
    list.stage_begin(page_size);
    let r = if gaps {
        // SAFETY: the consumer's DMA-mapped scatterlist of `sg_nents`
        // entries and its offset, valid for the call.
        let (n, iova, len) = unsafe { stage_entries(list, sg, sg_nents, sg_offset) };
        // SAFETY: as above.
        unsafe {
            (*ibmr).iova = iova;
            (*ibmr).length = len;
        }
        list.stage_end(0, len).map(|()| n)
    } else {
        // SAFETY: as above; `set_page::<D>` is this MR's callback.
        let n = unsafe { b::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(set_page::<D>)) };
        // SAFETY: as above; ib_sg_to_pages set them.
        let (iova, len) = unsafe { ((*ibmr).iova, (*ibmr).length) };
        // The pages are whole; the data starts at the iova's offset in the
        // first (ib_sg_to_pages aligned it down to the page size).
        match n {
            ..=0 => Err(EINVAL),
            _ => list
                .stage_end(iova & (u64::from(page_size) - 1), len)
                .map(|()| n),
        }
    };
    r.unwrap_or_else(|e| {
        list.stage_abort();
        e.to_errno()
    })
}

/// Stages scatterlist entries as segments, the first from `*sg_offset`
/// bytes in (empty entries count as mapped, and add nothing); stops at
/// the first that does not fit, leaving in `*sg_offset` how far into it
/// the mapping got (0), as ib_sg_to_pages does. (entries mapped, address
/// of the first byte, bytes).
///
/// # Safety
///
/// `sg` is a DMA-mapped scatterlist of at least `nents` entries and
/// `sg_offset` null or valid, both for the call.
unsafe fn stage_entries(
    list: &super::page_list::PageList,
    mut sg: *mut b::scatterlist,
    nents: c_int,
    sg_offset: *mut u32,
) -> (c_int, u64, u64) {
    let (mut n, mut iova, mut total) = (0, 0, 0u64);
    let mut skip = if sg_offset.is_null() {
        0
    } else {
        // SAFETY: caller contract.
        unsafe { *sg_offset }
    };
    while n < nents && !sg.is_null() {
        let (mut addr, mut len) = (0u64, 0u32);
        // SAFETY: an entry of the caller's list.
        let next = unsafe { b::oxe_shim_sg_dma(sg, &mut addr, &mut len) };
        let Some(len) = len.checked_sub(skip) else {
            break;
        };
        addr += u64::from(skip);
        skip = 0;
        if len > 0 {
            if list.stage(addr, len.into()).is_err() {
                break;
            }
            if total == 0 {
                iova = addr;
            }
            total += u64::from(len);
        }
        n += 1;
        sg = next;
    }
    if !sg_offset.is_null() {
        // SAFETY: caller contract.
        unsafe { *sg_offset = 0 };
    }
    (n, iova, total)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn reg_user_mr<D: Driver>(
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
        let (dev, drv) = unsafe { dev_of::<D>((*pd).device) }?;
        let req = RegUser {
            // SAFETY: as above.
            pd: unsafe { PdId::of(pd) },
            start,
            length,
            iova,
            access: access as u32,
        };
        // SAFETY: the call's udata.
        let udata = unsafe { UData::new(udata) };
        let (mr, keys) = D::Mr::reg_user(drv, dev, &req, &udata)?;
        alloc::<D>(mr.clone(), &keys, drv.debugfs()).inspect_err(|_| {
            // Every verb undoes what it published when a later step fails.
            D::Mr::withdraw(drv, &mr);
        })
    })();
    r.unwrap_or_else(err_ptr)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn rereg_user_mr<D: Driver>(
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
        // SAFETY: an MR this driver allocated, write-locked by uverbs for the call.
        let (dev, drv) = unsafe { dev_of::<D>((*ibmr).device) }?;
        // SAFETY: as above.
        let mr = unsafe { get::<D::Mr>(ibmr) };
        let req = Rereg {
            flags: flags as u32,
            start,
            length,
            iova,
            access: access as u32,
            // SAFETY: the new PD (IB_MR_REREG_PD), held by uverbs for the
            // call, or null.
            pd: unsafe { PdId::of(pd) },
        };
        // SAFETY: the call's udata.
        let udata = unsafe { UData::new(udata) };
        let keys = D::Mr::rereg_user(drv, dev, mr, &req, &udata)?;
        // SAFETY: uverbs holds the MR's write lock for the call.
        publish(unsafe { &mut *ibmr }, &keys);
        // Null: the MR was changed in place; ib_core keeps the same object.
        Ok(core::ptr::null_mut())
    })();
    r.unwrap_or_else(err_ptr)
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn dereg_mr<D: Driver>(
    ibmr: *mut b::ib_mr,
    _udata: *mut b::ib_udata,
) -> c_int {
    let r = (|| {
        // SAFETY: an MR this driver allocated; ib_core calls dereg once.
        let (_, drv) = unsafe { dev_of::<D>((*ibmr).device) }?;
        // SAFETY: as above.
        let mr = unsafe { get::<D::Mr>(ibmr) };
        D::Mr::dereg(drv, mr)?;
        mr.ib_link().detach();
        // SAFETY: dereg succeeded, so ib_core forgets `ibmr` after we
        // return; allocated by KBox in `alloc`, and detached from its MR.
        drop(unsafe { KBox::from_raw(ibmr.cast::<MrObj<D::Mr>>()) });
        Ok(())
    })();
    to_c_int(r)
}

/// ibv_advise_mr.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn advise_mr<D: Driver>(
    pd: *mut b::ib_pd,
    advice: b::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut b::ib_sge,
    num_sge: u32,
    _attrs: *mut b::uverbs_attr_bundle,
) -> c_int {
    let r = (|| {
        // SAFETY: a PD of this driver's device, alive for the call.
        let (_, drv) = unsafe { dev_of::<D>((*pd).device) }?;
        let (write, fault) = match advice {
            b::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => (false, true),
            b::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => (true, true),
            b::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => {
                (false, false)
            }
            _ => return Err(EOPNOTSUPP),
        };
        let flush = b::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH;
        if flags & !flush != 0 {
            return Err(EOPNOTSUPP);
        }
        let sges = if sg_list.is_null() || num_sge == 0 {
            &[][..]
        } else {
            // SAFETY: uverbs copied `num_sge` SGEs in for the call.
            unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) }
        };
        let mut ranges = KVec::with_capacity(sges.len(), GFP_KERNEL)?;
        for s in sges {
            ranges.push((s.lkey, s.addr, s.length), GFP_KERNEL)?;
        }
        let advice = Advice {
            write,
            fault,
            sync: flags & flush != 0,
        };
        // SAFETY: the call's PD, a PD of this device held by uverbs.
        drv.advise_mr(unsafe { PdId::of(pd) }, &ranges, advice)
    })();
    to_c_int(r)
}

/// `rdma resource show mr -dd`: the driver's view of the MR, as driver attributes.
///
/// Nothing here names a key or an address: ib_core shows an MR's keys and
/// iova only to a caller with CAP_NET_ADMIN, and a driver's attributes go to
/// every caller (this callback is not told who asks). An rkey is the lkey,
/// so even the key's index, 24 of its 32 bits, would be most of a remote
/// peer's credential. The keys an indirect key's entries name are other
/// MRs' keys. The root-only debugfs view (`mr-<index>`) has them all.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn fill_res_mr_entry<D: Driver>(
    msg: *mut b::sk_buff,
    ibmr: *mut b::ib_mr,
) -> c_int {
    // SAFETY: an MR this driver allocated, alive while restrack reports it.
    let info = unsafe { get::<D::Mr>(ibmr) }.info();
    // SAFETY: `msg` is the netlink message under construction.
    let Some(nest) = (unsafe { Nest::start(msg, b::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER) })
    else {
        return EMSGSIZE.to_errno();
    };
    let fields: [(&core::ffi::CStr, u32); 10] = [
        (c"pages", info.pages),
        (c"page_size", info.page_size),
        (c"pinned", info.pinned.into()),
        (c"pinned_writable", info.pinned_writable.into()),
        (c"odp_present", info.odp_present),
        (c"odp_faulted", info.odp_faulted),
        (c"odp_invalidated", info.odp_invalidated),
        (c"indirect_entries", info.indirect_entries),
        (c"indirect_rounds", info.indirect_rounds),
        (c"indirect_depth", info.indirect_depth),
    ];
    for (name, value) in fields {
        // SAFETY: a live message and a static NUL-terminated name.
        if unsafe { b::rdma_nl_put_driver_u32(msg, name.as_char_ptr(), value) } != 0 {
            return EMSGSIZE.to_errno();
        }
    }
    // SAFETY: as above.
    if unsafe { b::rdma_nl_put_driver_u32_hex(msg, c"access".as_char_ptr(), info.access) } != 0 {
        return EMSGSIZE.to_errno();
    }
    let strings = [
        (c"odp", info.odp),
        (c"fastreg", info.fastreg),
        (c"indirect", info.indirect),
    ];
    for (name, value) in strings {
        // SAFETY: as above; the value is a static NUL-terminated string too.
        if unsafe { b::rdma_nl_put_driver_string(msg, name.as_char_ptr(), value.as_char_ptr()) }
            != 0
        {
            return EMSGSIZE.to_errno();
        }
    }
    const NAMES: [&core::ffi::CStr; SHOWN_ENTRIES] = [
        c"entry0", c"entry1", c"entry2", c"entry3", c"entry4", c"entry5", c"entry6", c"entry7",
    ];
    let shown = (info.indirect_entries as usize).min(SHOWN_ENTRIES);
    for (name, &(len, skip)) in NAMES.iter().zip(&info.indirect_first).take(shown) {
        let Ok(text) = kernel::str::CString::try_from_fmt(fmt!("len {len} skip {skip}")) else {
            return ENOMEM.to_errno();
        };
        // SAFETY: as above; `text` is NUL-terminated and outlives the call,
        // which copies it into the message.
        if unsafe { b::rdma_nl_put_driver_string(msg, name.as_char_ptr(), text.as_char_ptr()) } != 0
        {
            return EMSGSIZE.to_errno();
        }
    }
    nest.end();
    0
}

/// `rdma statistic mr`: the MR's counters, as hw counter entries.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn fill_stat_mr_entry<D: Driver>(
    msg: *mut b::sk_buff,
    ibmr: *mut b::ib_mr,
) -> c_int {
    // SAFETY: an MR this driver allocated, alive while restrack reports it.
    let mr = unsafe { get::<D::Mr>(ibmr) };
    // SAFETY: `msg` is the netlink message under construction.
    let Some(nest) =
        (unsafe { Nest::start(msg, b::rdma_nldev_attr_RDMA_NLDEV_ATTR_STAT_HWCOUNTERS) })
    else {
        return EMSGSIZE.to_errno();
    };
    let mut any = false;
    let r = mr.statistics(&mut |name, value| {
        any = true;
        // SAFETY: a live message and a NUL-terminated name.
        match unsafe { b::rdma_nl_stat_hwcounter_entry(msg, name.as_char_ptr(), value) } {
            0 => Ok(()),
            _ => Err(EMSGSIZE),
        }
    });
    match r {
        // An MR with no counters (pinned) gets no table, not an empty
        // one: the nest is cancelled as it drops.
        Ok(()) if !any => 0,
        Ok(()) => {
            nest.end();
            0
        }
        Err(e) => e.to_errno(),
    }
}
