// SPDX-License-Identifier: GPL-2.0

//! What a driver implements to sit on this layer: its device ([`Driver`])
//! and one type per object ib_core asks a driver to create ([`CqOps`],
//! [`QpOps`], [`SrqOps`], [`MrOps`], [`MwOps`]).
//!
//! `ib/` turns ib_core's C callbacks into calls of these traits, generic
//! over the driver type, and never names the driver: the driver names
//! itself once, when the module registers its link type
//! (`LinkOps::register::<D>()`). PDs and AHs need no type of the driver's:
//! a PD is only an identity ([`PdId`]), and an address handle is `ib/`'s
//! own [`Ah`], which the driver numbers for user space.
//!
//! Every method runs in process context unless it says otherwise; kernel
//! consumers' posting and polling may come from any context.

use super::av::{Ah, Av};
use super::cq::CqHandle;
use super::debugfs::Describe;
use super::device::IbDev;
use super::mr::{Advice, MrInfo, MrKeys, RegUser, Rereg};
use super::mw::MwType;
use super::netdev::NetDev;
use super::objects::PdId;
use super::pkt::RxPacket;
use super::qp::{QpAttr, QpCaps, QpHandle, QpInit};
use super::srq::{SrqAttr, SrqHandle, SrqInit};
use super::stats::StatDesc;
use super::udata::UData;
use crate::bindings as b;
use crate::oxe_core::abi::{OxeCqe, OxeRecvWqe, OxeSendWqe, OxeSge};
use crate::oxe_core::gid::Gid;
use crate::oxe_core::pma::{Answer, MAD_LEN};
use crate::oxe_core::qp_state::QpType;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

/// A device: the state behind one ib_device, from `rdma link add` to the
/// last callback (`dealloc_driver`), and the device-wide verbs.
pub(crate) trait Driver: Sized + Send + Sync + 'static {
    /// The module the driver is: it owns the devices (ib_core's `owner`),
    /// and one module has one driver.
    type Module: kernel::ModuleMetadata;
    type Cq: CqOps<Self>;
    type Qp: QpOps<Self>;
    type Srq: SrqOps<Self>;
    type Mr: MrOps<Self>;
    type Mw: MwOps<Self>;

    /// `rdma link add NAME type ... netdev DEV`: builds the device's state
    /// and hands it to [`super::device::register`].
    fn new_link(name: &CStr, ndev: NetDev) -> Result;
    /// The netdev the device's port sits on.
    fn netdev(&self) -> &NetDev;
    /// The node GUID (fixed for the device's life).
    fn node_guid(&self) -> u64;
    /// The device's debugfs directory, if debugfs is there.
    fn debugfs(&self) -> Option<&kernel::debugfs::Dir>;

    fn query_device(&self, attr: &mut b::ib_device_attr);
    /// `attr` comes zeroed.
    fn query_port(&self, port: u32, attr: &mut b::ib_port_attr) -> Result;
    /// The netdev went up or down, or its carrier changed: returns whether
    /// the port is active now (ib_core then raises the port event).
    fn link_changed(&self) -> bool;

    /// A packet for this device, from the UDP socket (softirq).
    fn receive(&self, pkt: RxPacket);
    /// A GSO packet of `segments` packets for this device, taken whole
    /// from the UDP socket (softirq).
    fn receive_batch(&self, pkt: RxPacket, segments: u32);
    /// A packet another device of this host sent to this one (any context:
    /// the sender may hold its own locks, so it is only queued here).
    fn loopback(&self, pkt: RxPacket);

    /// A process opens the device; the driver writes its reply.
    fn alloc_ucontext(&self, udata: &UData) -> Result;
    fn dealloc_ucontext(&self);
    fn alloc_pd(&self) -> Result;
    fn dealloc_pd(&self);
    /// A user AH: its number, which user space's work requests carry.
    fn add_user_ah(&self, ah: &Arc<Ah>) -> Result<u32>;
    fn remove_user_ah(&self, num: u32);

    /// A live QP by number (a kernel consumer's completion names its QP).
    fn qp(&self, qpn: u32) -> Option<Arc<Self::Qp>>;
    fn attach_mcast(&self, qp: &Arc<Self::Qp>, gid: &Gid) -> Result;
    fn detach_mcast(&self, qp: &Arc<Self::Qp>, gid: &Gid) -> Result;

    /// A MAD for the port's agents (PerfMgmt, for instance).
    fn process_mad(
        &self,
        port: u32,
        req: &[u8; MAD_LEN],
        resp: &mut [u8; MAD_LEN],
    ) -> Result<Answer>;

    /// The names of the device's hw counters (`static`: ib_core keeps them).
    fn stat_descs() -> &'static [StatDesc];
    /// Their values, in the same order.
    fn stats(&self, out: &mut [u64]);
    /// ibv_advise_mr on PD `pd`: prefetch the ODP ranges (lkey, address,
    /// length) as `advice` says.
    fn advise_mr(&self, pd: PdId, ranges: &[(u32, u64, u32)], advice: Advice) -> Result;
}

/// A completion queue.
pub(crate) trait CqOps<D: Driver>: Send + Sync + 'static {
    /// The create verb; writes user space's reply (what to map) itself.
    fn create(drv: &D, cqe: u32, handle: CqHandle, udata: &UData) -> Result<Arc<Self>>;
    /// The entries the CQ holds, as reported back to the consumer.
    fn capacity(&self) -> u32;
    /// A new size; returns the new capacity. A refusal changes nothing.
    fn resize(&self, cqe: u32, udata: &UData) -> Result<u32>;
    /// A kernel consumer's poll (any context).
    fn poll(&self, out: &mut [OxeCqe]) -> usize;
    /// Arms for the next (or next solicited) completion; returns whether
    /// completions are already waiting (any context).
    fn arm(&self, solicited: bool) -> bool;
    /// The destroy verb; no QP uses the CQ any more.
    fn destroy(&self);
}

/// A queue pair.
pub(crate) trait QpOps<D: Driver>: Send + Sync + 'static {
    /// The create verb; writes user space's reply itself.
    fn create(drv: &D, dev: IbDev<D>, init: QpInit<D>, udata: &UData) -> Result<Arc<Self>>;
    fn qpn(&self) -> u32;
    fn ty(&self) -> QpType;
    /// What was granted (reported back to the consumer).
    fn caps(&self) -> QpCaps;
    fn sq_sig_all(&self) -> bool;
    /// Whether a kernel consumer owns the QP (it posts through
    /// [`QpOps::post_send`]; user space writes its rings and rings the doorbell).
    fn is_kernel(&self) -> bool;
    fn has_srq(&self) -> bool;
    /// Whether short receives complete with their message in the CQE
    /// (inline receive), for `rdma resource show qp -dd`.
    fn inline_recv(&self) -> bool;
    /// `mask` is ib_core's `ib_qp_attr_mask`.
    fn modify(&self, mask: u32, attr: &QpAttr) -> Result;
    fn query(&self) -> QpAttr;
    fn destroy(&self, drv: &D);
    /// Runs `f` on the QP's handle while the QP still has one.
    fn with_handle<R>(&self, f: impl FnOnce(&QpHandle) -> R) -> Option<R>;

    /// User space posted sends to its mapped ring.
    fn doorbell(&self);
    /// The work-request hook: one kernel consumer's send (any context),
    /// as the WQE a user-space provider would write, its SGEs or inline
    /// bytes in `body`, and for UD its address. Sent once [`QpOps::kick`]
    /// runs.
    fn post_send(&self, wqe: &OxeSendWqe, body: &[u8], av: Option<Av>) -> Result;
    /// One kernel consumer's receive (any context).
    fn post_recv(&self, wqe: &OxeRecvWqe, sges: &[OxeSge]) -> Result;
    /// Processes what was posted.
    fn kick(&self);
    /// Flushes receives posted in the error state.
    fn kick_if_error(&self);
}

/// A shared receive queue.
pub(crate) trait SrqOps<D: Driver>: Send + Sync + 'static {
    /// The create verb; writes user space's reply itself.
    fn create(drv: &D, init: SrqInit, handle: SrqHandle, udata: &UData) -> Result<Arc<Self>>;
    /// Arms the limit and/or resizes; a refusal changes nothing.
    fn modify(&self, limit: Option<u32>, max_wr: Option<u32>, udata: &UData) -> Result;
    fn query(&self) -> SrqAttr;
    /// One kernel consumer's receive (any context).
    fn post_recv(&self, wqe: &OxeRecvWqe, sges: &[OxeSge]) -> Result;
    /// The destroy verb; no QP uses the SRQ any more.
    fn destroy(&self);
}

/// A memory region.
pub(crate) trait MrOps<D: Driver>: Describe + Sized {
    /// Where the MR's `ib_mr` is, for the binding to attach and detach.
    fn ib_link(&self) -> &super::mr::IbMrLink;

    /// ibv_reg_mr. Writes user space's reply first: a reply that cannot be
    /// written must fail the verb before anything is pinned or published.
    fn reg_user(
        drv: &D,
        dev: IbDev<D>,
        req: &RegUser,
        udata: &UData,
    ) -> Result<(Arc<Self>, MrKeys)>;
    /// ib_alloc_mr for fast registration: a Free MR for up to `max_sg`
    /// pages, or (`gaps`) scatterlist entries of any alignment.
    fn alloc_fast(drv: &D, pd: PdId, max_sg: u32, gaps: bool) -> Result<(Arc<Self>, MrKeys)>;
    /// Undoes [`MrOps::reg_user`] or [`MrOps::alloc_fast`] when the verb
    /// fails after it.
    fn withdraw(drv: &D, mr: &Arc<Self>);
    /// A fast-registration MR's memory (its page lists), for
    /// ib_map_mr_sg; `None` for any other MR.
    fn page_list(&self) -> Option<Arc<super::memory::Memory>>;
    /// The MR's key now: which MR an IB_WR_REG_MR names.
    fn key(&self) -> u32;
    /// ibv_rereg_mr in place: replies first, as reg does; a refusal leaves
    /// the MR as it was.
    fn rereg_user(
        drv: &D,
        dev: IbDev<D>,
        mr: &Arc<Self>,
        req: &Rereg,
        udata: &UData,
    ) -> Result<MrKeys>;
    /// ibv_dereg_mr; a refusal (EBUSY) keeps the MR.
    fn dereg(drv: &D, mr: &Arc<Self>) -> Result;
    /// Its internals, for `rdma resource show mr -dd`.
    fn info(&self) -> MrInfo;
    /// Its counters, for `rdma statistic mr`: each through `put`, which
    /// fails when the message is full.
    fn statistics(&self, put: &mut dyn FnMut(&core::ffi::CStr, u64) -> Result) -> Result;
}

/// A memory window.
pub(crate) trait MwOps<D: Driver>: Send + Sync + Sized + 'static {
    fn alloc(drv: &D, pd: PdId, ty: MwType) -> Result<Arc<Self>>;
    fn rkey(&self) -> u32;
    fn dealloc(drv: &D, mw: &Arc<Self>);
}
