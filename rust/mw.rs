// SPDX-License-Identifier: GPL-2.0

//! Memory windows (IBTA 10.6.7): a window lends a range of an MR to remote
//! peers through an rkey of its own, with rights of its own, and can be
//! moved or revoked without touching the MR.
//!
//! * Type 1 is bound by `ibv_bind_mw`, which the provider turns into a bind
//!   work request; every bind gives it a new rkey, and a bind of length 0
//!   unbinds it. Any QP of its PD may use it.
//! * Type 2B is bound by a bind work request naming the new rkey (only its
//!   low byte is the consumer's), must be free to be bound, and is then
//!   usable only through the QP that bound it. It is freed by a local
//!   invalidate or a peer's SEND with Invalidate.
//!
//! While a window is bound its MR cannot be deregistered or reregistered
//! (the MR counts its windows). Binds and invalidates run in the send queue's
//! order, from the requester, and their failures are work completion errors.

#![deny(unsafe_code)]

use crate::device::OxeDevice;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::mw::MwType;
use crate::ib::objects::PdId;
use crate::limits::{self, Kind};
use crate::mr::{Denied, Mr, SUPPORTED_ACCESS};
use crate::oxe_core::key::Key;
use crate::oxe_core::{Access, AccessOp, Range};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// A QP as a type 2 window remembers it: its number and the incarnation
/// that number belonged to, so a later QP reusing the number is not it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpTag {
    pub(crate) qpn: u32,
    pub(crate) uid: u64,
}

/// What a bound window grants.
struct Binding {
    mr: Arc<Mr>,
    /// The addresses peers use: the MR range it lends, or `[0, len)` for a
    /// zero-based window.
    range: Range,
    /// The MR iova that `range.iova()` stands for.
    mr_base: u64,
    access: Access,
    /// Type 2: the only QP through which the window may be used.
    qp: Option<QpTag>,
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.mr.unbind_window();
    }
}

/// One memory window.
#[pin_data]
pub(crate) struct Mw {
    key: AtomicU32,
    pub(crate) ty: MwType,
    pd: PdId,
    #[pin]
    bound: SpinLockBh<Option<Binding>>,
}

impl crate::keys::Keyed for Mw {
    fn current_key(&self) -> u32 {
        self.rkey()
    }
}

/// A bind work request's operands.
pub(crate) struct BindReq {
    /// The window, by an rkey it has had (only the index counts).
    pub(crate) mw_rkey: u32,
    /// The rkey it takes; its index must be the window's.
    pub(crate) new_rkey: u32,
    pub(crate) mr_lkey: u32,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    /// `IB_ACCESS_*` for the window, ZERO_BASED included.
    pub(crate) access: u32,
}

/// Why a bind or an invalidate failed; the work request completes in error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refused;

/// Rights a window may carry. LOCAL_WRITE and MW_BIND mean nothing for a
/// window but are accepted, as rdma_rxe accepts them and pyverbs passes
/// them; ZERO_BASED selects the addressing.
const WINDOW_ACCESS: u32 = (SUPPORTED_ACCESS & !Access::HUGETLB.bits()) | Access::ZERO_BASED.bits();

impl Mw {
    pub(crate) fn rkey(&self) -> u32 {
        self.key.load(Ordering::Acquire)
    }

    /// Binds (or, for type 1 with length 0, unbinds) the window for a QP
    /// of PD `pd`; `qp` is that QP, which a type 2 window is tied to.
    fn bind(&self, drv: &OxeDevice, pd: PdId, qp: QpTag, req: &BindReq) -> Result<(), Refused> {
        // C10-72: the QP and the window share a PD.
        if self.pd != pd || req.access & !WINDOW_ACCESS != 0 {
            return Err(Refused);
        }
        let new_key = Key::from_raw(req.new_rkey);
        if new_key.index() != Key::from_raw(self.rkey()).index() {
            return Err(Refused);
        }
        let access = Access::from_bits_unchecked(req.access);
        let zero_based = access.contains(Access::ZERO_BASED);
        let mut bound = self.bound.lock();
        match self.ty {
            // o10-36.2.2: type 1 windows are never zero based.
            MwType::One if zero_based => return Err(Refused),
            MwType::One => {}
            // o10-37.2.30, o10-37.2.40: a type 2 window is bound only from
            // the free state, and never to nothing.
            MwType::Two if bound.is_some() || req.len == 0 => return Err(Refused),
            MwType::Two => {}
        }
        let binding = if req.len == 0 {
            None
        } else {
            let start = if zero_based { 0 } else { req.addr };
            let range = Range::new(start, req.len).map_err(|_| Refused)?;
            let mr = drv.keys.lookup(req.mr_lkey).ok_or(Refused)?;
            let mr_base = mr
                .bind_window(pd, req.addr, req.len, zero_based, access)
                .map_err(|_| Refused)?;
            Some(Binding {
                mr,
                range,
                mr_base,
                access,
                qp: (self.ty == MwType::Two).then_some(qp),
            })
        };
        // The old binding (type 1) lets its MR go when dropped, after the
        // lock: it may hold the MR's last reference.
        let old = core::mem::replace(&mut *bound, binding);
        self.key.store(req.new_rkey, Ordering::Release);
        drop(bound);
        drop(old);
        Ok(())
    }

    /// Frees a bound type 2 window: a local invalidate posted on QP `qp`,
    /// or a peer's SEND with Invalidate arriving on it. A type 1 window
    /// cannot be invalidated (o10-37.2.26), nor one that is free already;
    /// and a type 2B window belongs to the QP that bound it, for this as
    /// for every access.
    fn invalidate(&self, pd: PdId, qp: QpTag) -> Result<(), Refused> {
        if self.ty != MwType::Two || self.pd != pd {
            return Err(Refused);
        }
        let mut bound = self.bound.lock();
        let Some(b) = bound.as_ref() else {
            return Err(Refused);
        };
        if b.qp != Some(qp) {
            return Err(Refused);
        }
        let old = bound.take();
        drop(bound);
        drop(old);
        Ok(())
    }

    /// Checks a remote access of `len` bytes at window address `va` for
    /// `op`, arriving on QP `qp` of PD `pd`; returns the MR and the MR
    /// iova the access maps to.
    pub(crate) fn resolve(
        &self,
        pd: PdId,
        qp: QpTag,
        va: u64,
        len: u64,
        op: AccessOp,
    ) -> Result<(Arc<Mr>, u64), Denied> {
        if self.pd != pd {
            return Err(Denied::Pd);
        }
        let bound = self.bound.lock();
        let b = bound.as_ref().ok_or(Denied::Rights)?;
        if b.qp.is_some_and(|t| t != qp) {
            return Err(Denied::Rights);
        }
        if !b.access.permits(op) {
            return Err(Denied::Rights);
        }
        if !b.range.contains(va, len) {
            return Err(Denied::Bounds);
        }
        Ok((b.mr.clone(), b.mr_base + (va - b.range.iova())))
    }
}

/// ibv_alloc_mw: a window of `ty` in PD `pd`, unbound. Its rkey is valid
/// from the start (a type 1 window's first bind replaces it, as every bind
/// does; a type 2 window's bind names the replacement).
pub(crate) fn alloc(drv: &OxeDevice, pd: PdId, ty: MwType) -> Result<Arc<Mw>> {
    limits::admit(&drv.counters, Kind::Mw)?;
    alloc_admitted(drv, pd, ty).inspect_err(|_| limits::release(&drv.counters, Kind::Mw))
}

/// [`alloc`] once the window is counted against the device's limit.
fn alloc_admitted(drv: &OxeDevice, pd: PdId, ty: MwType) -> Result<Arc<Mw>> {
    let mw = Arc::pin_init(
        pin_init!(Mw {
            key: AtomicU32::new(0),
            ty,
            pd,
            bound <- new_spinlock_bh!(None),
        }),
        GFP_KERNEL,
    )?;
    let key = drv.mw_keys.insert(&mw)?;
    mw.key.store(key.raw(), Ordering::Release);
    Ok(mw)
}

/// ibv_dealloc_mw: the rkey stops resolving, and the MR is let go.
pub(crate) fn dealloc(drv: &OxeDevice, mw: &Arc<Mw>) {
    drv.mw_keys.remove(Key::from_raw(mw.rkey()).index());
    let old = mw.bound.lock().take();
    drop(old);
    limits::release(&drv.counters, Kind::Mw);
}

/// A bind work request, from the send queue of a QP of PD `pd`.
pub(crate) fn bind(drv: &OxeDevice, pd: PdId, qp: QpTag, req: &BindReq) -> Result<(), Refused> {
    let mw = drv.mw_keys.lookup_index(req.mw_rkey).ok_or(Refused)?;
    mw.bind(drv, pd, qp, req)?;
    crate::counters::inc(&drv.counters.mw_bind);
    Ok(())
}

/// Invalidates the window `rkey` names, for QP `qp` of PD `pd` (a local
/// invalidate posted on it, or a SEND with Invalidate that arrived on it).
pub(crate) fn invalidate(drv: &OxeDevice, pd: PdId, qp: QpTag, rkey: u32) -> Result<(), Refused> {
    let mw = drv.mw_keys.lookup(rkey).ok_or(Refused)?;
    mw.invalidate(pd, qp)?;
    crate::counters::inc(&drv.counters.mw_invalidate);
    Ok(())
}
