// SPDX-License-Identifier: GPL-2.0

//! Fast registration, for kernel consumers (IBTA 10.6.3.6 and the Base
//! Memory Management Extensions): how NVMe-oF, iSER, SRP, rtrs and
//! NFS/RDMA register memory.
//!
//! * `ib_alloc_mr` makes an MR with a key and no memory, in the Free state:
//!   its keys resolve to nothing.
//! * `ib_map_mr_sg` stages a page list (`ib::page_list`); nothing changes
//!   for the data path yet.
//! * An `IB_WR_REG_MR` work request, executed in send-queue order like a
//!   window bind, puts the staged list in force with the rights and the
//!   key's low byte the request names, and makes the MR Valid; work
//!   requests posted after it see the registration.
//! * `IB_WR_LOCAL_INV`, or a peer's SEND with Invalidate naming the rkey,
//!   makes it Free again. A local invalidate waits for every earlier work
//!   request of its queue to finish first (the fence hardware applies to
//!   it), so no READ response or queued WRITE of the QP's own lands in or
//!   leaves memory the consumer has taken back.
//!
//! Failures are IBTA's Memory Management Operation Error (IB_WC_MW_BIND_ERR
//! in Linux's names), which rdma_rxe reports as a local QP operation error
//! for REG_MR; oxe follows the spec.

#![deny(unsafe_code)]

use super::{Mr, MrKind, MrState, Pages};
use crate::counters::inc;
use crate::device::OxeDevice;
use crate::ib::memory::Memory;
use crate::ib::mr::MrKeys;
use crate::ib::objects::PdId;
use crate::ib::page_list::PageList;
use crate::limits::{self, Kind};
use crate::mw::{QpTag, Refused};
use crate::oxe_core::key::Key;
use crate::oxe_core::{Access, Range};
use core::sync::atomic::Ordering;
use kernel::prelude::*;
use kernel::sync::Arc;

/// `max_fast_reg_page_list_len`: the most pages (or scatterlist entries)
/// one MR maps. Each costs 16 bytes twice (staged and in force), allocated
/// with the MR. NVMe-oF asks for 257, for 1 MiB I/Os.
pub(crate) const MAX_PAGES: u32 = 512;

/// Rights a fast registration may grant: an MR's, but for what only user
/// memory can have (on-demand paging, huge pages) and the flush rights
/// (no kernel work request can ask for a flush).
const FAST_ACCESS: u32 = Access::LOCAL_WRITE.bits()
    | Access::REMOTE_WRITE.bits()
    | Access::REMOTE_READ.bits()
    | Access::REMOTE_ATOMIC.bits()
    | Access::MW_BIND.bits()
    | Access::RELAXED_ORDERING.bits();

/// What kind of fast-registration MR, fixed at allocation.
#[derive(Clone, Copy)]
pub(crate) struct FastKind {
    /// IB_MR_TYPE_SG_GAPS: mapped from scatterlist entries of any
    /// alignment, not whole pages.
    pub(crate) gaps: bool,
    /// Its `max_num_sg`.
    pub(crate) max_sg: u32,
}

/// ib_alloc_mr: a Free MR of PD `pd` for up to `kind.max_sg` pages.
pub(crate) fn alloc(drv: &OxeDevice, pd: PdId, kind: FastKind) -> Result<(Arc<Mr>, MrKeys)> {
    if kind.max_sg == 0 || kind.max_sg > MAX_PAGES {
        return Err(EINVAL);
    }
    limits::admit(&drv.counters, Kind::Mr)?;
    alloc_admitted(drv, pd, kind).inspect_err(|_| limits::release(&drv.counters, Kind::Mr))
}

fn alloc_admitted(drv: &OxeDevice, pd: PdId, kind: FastKind) -> Result<(Arc<Mr>, MrKeys)> {
    let list = PageList::new(kind.max_sg)?;
    let pages = Pages {
        mem: Arc::new(Memory::Kernel(list), GFP_KERNEL)?,
        npages: 0,
        counters: drv.counters.clone(),
    };
    Mr::install(drv, MrKind::Fast(kind), MrState::free(pd, pages)?)
}

impl Mr {
    /// The staged page list of a fast-registration MR (`None` for any
    /// other MR), for `ib_map_mr_sg`.
    pub(crate) fn page_list(&self) -> Option<Arc<Memory>> {
        self.fast?;
        Some(self.state.lock().pages.mem.clone())
    }

    /// Whether the MR was allocated with IB_MR_TYPE_SG_GAPS.
    pub(crate) fn maps_gaps(&self) -> bool {
        self.fast.is_some_and(|k| k.gaps)
    }

    /// "no" for a user MR, else the fast-registration state.
    pub(super) fn fast_state(&self, st: &MrState) -> &'static core::ffi::CStr {
        match (self.fast.is_some() || self.indirect.is_some(), st.free) {
            (false, _) => c"no",
            (true, true) => c"free",
            (true, false) => c"valid",
        }
    }
}

/// An IB_WR_REG_MR's operands, as the kernel post_send put them in the WQE.
pub(crate) struct RegReq {
    /// The MR's key when the request was posted: which MR.
    pub(crate) mr_key: u32,
    /// The key it takes: the MR's index, with the consumer's low byte.
    pub(crate) key: u32,
    pub(crate) iova: u64,
    pub(crate) len: u64,
    /// IB_ACCESS_* for the registration.
    pub(crate) access: u32,
}

/// Executes an IB_WR_REG_MR from the send queue of a QP of PD `pd`.
/// IBTA's checks: the MR is a fast-registration one of the QP's PD, in the
/// Free state; the key keeps the MR's index (only the low byte is the
/// consumer's); the rights are valid for an MR; the length fits what was
/// mapped.
pub(crate) fn register(drv: &OxeDevice, pd: PdId, req: &RegReq) -> Result<(), Refused> {
    let mr = drv.keys.lookup_index(req.mr_key).ok_or(Refused)?;
    let list = match mr.fast {
        Some(_) => mr.page_list().ok_or(Refused)?,
        None => return Err(Refused),
    };
    let Memory::Kernel(list) = &*list else {
        return Err(Refused);
    };
    let current = Key::from_raw(mr.lkey());
    if Key::from_raw(req.key).index() != current.index() {
        return Err(Refused);
    }
    let access = Access::validate_for_mr(req.access, FAST_ACCESS).map_err(|_| Refused)?;
    let range = Range::new(req.iova, req.len).map_err(|_| Refused)?;
    let mut st = mr.state.lock();
    if st.revoked || !st.free || st.pd != pd {
        return Err(Refused);
    }
    list.commit(req.len).map_err(|_| Refused)?;
    st.access = access;
    st.range = range;
    st.free = false;
    mr.key.store(req.key, Ordering::Release);
    drop(st);
    inc(&drv.counters.mr_fastreg);
    Ok(())
}

/// Who asked for an invalidation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Invalidator {
    /// IB_WR_LOCAL_INV, from the QP's own send queue.
    Local,
    /// A SEND with Invalidate that arrived on the QP.
    Remote,
}

/// Invalidates what `rkey` names for QP `qp` of PD `pd`: a type 2 window
/// (`crate::mw`), a fast-registration MR, or an indirect key (remotely
/// only one created for it). An MR must be one allocated for fast
/// registration (IBTA: a region registered by the Register verbs cannot
/// be invalidated), of the QP's PD, with no window bound to it, and
/// `rkey` must be its key now (locally, an indirect key's may also be
/// the next one); invalidating a Free MR again is harmless.
pub(crate) fn invalidate(
    drv: &OxeDevice,
    pd: PdId,
    qp: QpTag,
    rkey: u32,
    by: Invalidator,
) -> Result<(), Refused> {
    if Key::from_raw(rkey).index() >= crate::keys::MW_FIRST_INDEX {
        return crate::mw::invalidate(drv, pd, qp, rkey);
    }
    // An indirect key's owner may name it locally by the key after its
    // current one: its provider takes the next key when a configuration is
    // built, so a batch aborted before posting leaves the application one
    // ahead of the device.
    let next = |current: u32| Key::from_raw(current).next().raw();
    let mr = match by {
        Invalidator::Local => drv
            .keys
            .lookup_index(rkey)
            .filter(|mr| mr.lkey() == rkey || (mr.indirect.is_some() && next(mr.lkey()) == rkey)),
        Invalidator::Remote => drv.keys.lookup(rkey),
    }
    .ok_or(Refused)?;
    let allowed = match by {
        Invalidator::Local => mr.fast.is_some() || mr.indirect.is_some(),
        Invalidator::Remote => mr.remotely_invalidable(),
    };
    if !allowed {
        return Err(Refused);
    }
    // Under the lock every access holds while it copies: a copy in
    // progress finishes first, and none starts after.
    let mut st = mr.state.lock();
    if st.revoked || st.pd != pd || mr.mw_binds.load(Ordering::Acquire) != 0 {
        return Err(Refused);
    }
    st.free = true;
    // Before the lock goes: a packet that takes it next sees Free, and
    // one after a new registration sees another era.
    mr.era.fetch_add(1, Ordering::AcqRel);
    let layout = st.layout.take();
    drop(st);
    drop(layout);
    // An indirect key: accesses already following its layout finish
    // first, as copies under an MR's lock do (`indirect::Walking`).
    mr.wait_for_walkers();
    inc(match by {
        Invalidator::Local => &drv.counters.mr_local_inv,
        Invalidator::Remote => &drv.counters.mr_remote_inv,
    });
    Ok(())
}
