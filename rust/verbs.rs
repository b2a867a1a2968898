// SPDX-License-Identifier: GPL-2.0

//! Every verb oxe offers, in one place: the `ib/` layer's traits
//! (`ib/driver.rs`) implemented for oxe's types. Each verb checks and
//! translates here, then calls the logic in the object's own file
//! (`mr.rs`, `qp.rs`, ...).

#![deny(unsafe_code)]

use crate::cq::Cq;
use crate::device::OxeDevice;
use crate::ib::av::{Ah, Av};
use crate::ib::cq::CqHandle;
use crate::ib::debugfs::Describe;
use crate::ib::device::IbDev;
use crate::ib::driver::{CqOps, Driver, MrOps, MwOps, QpOps, SrqOps};
use crate::ib::mr::{Advice, MrInfo, MrKeys, RegUser, Rereg};
use crate::ib::mw::MwType;
use crate::ib::netdev::NetDev;
use crate::ib::objects::PdId;
use crate::ib::pkt::RxPacket;
use crate::ib::qp::{QpAttr, QpCaps, QpHandle, QpInit};
use crate::ib::srq::{SrqAttr, SrqHandle, SrqInit};
use crate::ib::stats::StatDesc;
use crate::ib::udata::{write_user, UData};
use crate::mr::Mr;
use crate::mw::Mw;
use crate::oxe_core::abi::{
    OxeCqe, OxeCreateCqCmd, OxeCreateCqResp, OxeCreateQpCmd, OxeCreateQpResp, OxeCreateSrqResp,
    OxeModifySrqCmd, OxeRecvWqe, OxeRegMrCmd, OxeResizeCqResp, OxeResizeSrqResp, OxeSendWqe,
    OxeSge, OXE_CREATE_CQ_INLINE_RECV, OXE_CREATE_QP_NO_INLINE_RECV, OXE_REG_MR_INDIRECT,
    OXE_REG_MR_REMOTE_INVALIDATE,
};
use crate::oxe_core::gid::Gid;
use crate::oxe_core::pma::{Answer, MAD_LEN};
use crate::oxe_core::qp_state::QpType;
use crate::qp::Qp;
use crate::srq::Srq;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

impl Driver for OxeDevice {
    type Module = crate::OxeModule;
    type Cq = Cq;
    type Qp = Qp;
    type Srq = Srq;
    type Mr = Mr;
    type Mw = Mw;

    fn new_link(name: &CStr, ndev: NetDev) -> Result {
        crate::device::new_link(name, ndev)
    }

    fn netdev(&self) -> &NetDev {
        &self.netdev
    }

    fn node_guid(&self) -> u64 {
        self.guid
    }

    fn debugfs(&self) -> Option<&kernel::debugfs::Dir> {
        self.debugfs.as_ref()
    }

    fn query_device(&self, attr: &mut crate::bindings::ib_device_attr) {
        OxeDevice::query_device(self, attr)
    }

    fn query_port(&self, port: u32, attr: &mut crate::bindings::ib_port_attr) -> Result {
        OxeDevice::query_port(self, port, attr)
    }

    fn link_changed(&self) -> bool {
        OxeDevice::link_changed(self)
    }

    fn receive(&self, pkt: RxPacket) {
        OxeDevice::receive(self, pkt)
    }

    fn receive_batch(&self, pkt: RxPacket, segments: u32) {
        OxeDevice::receive_batch(self, pkt, segments)
    }

    fn loopback(&self, pkt: RxPacket) {
        OxeDevice::loopback(self, pkt)
    }

    fn alloc_ucontext(&self, udata: &UData) -> Result {
        OxeDevice::alloc_ucontext(self, udata)
    }

    fn dealloc_ucontext(&self) {
        OxeDevice::dealloc_ucontext(self)
    }

    fn alloc_pd(&self) -> Result {
        OxeDevice::alloc_pd(self)
    }

    fn dealloc_pd(&self) {
        OxeDevice::dealloc_pd(self)
    }

    /// Numbered from a random start, so that a process cannot guess
    /// another's AH numbers (they are per device, not per process).
    fn add_user_ah(&self, ah: &Arc<Ah>) -> Result<u32> {
        self.ahs.insert(ah, crate::ib::random_u32())
    }

    fn remove_user_ah(&self, num: u32) {
        self.ahs.remove(num);
    }

    fn qp(&self, qpn: u32) -> Option<Arc<Qp>> {
        self.qps.get(qpn)
    }

    fn attach_mcast(&self, qp: &Arc<Qp>, gid: &Gid) -> Result {
        OxeDevice::attach_mcast(self, qp, gid)
    }

    fn detach_mcast(&self, qp: &Arc<Qp>, gid: &Gid) -> Result {
        OxeDevice::detach_mcast(self, qp, gid)
    }

    fn process_mad(
        &self,
        port: u32,
        req: &[u8; MAD_LEN],
        resp: &mut [u8; MAD_LEN],
    ) -> Result<Answer> {
        OxeDevice::process_mad(self, port, req, resp)
    }

    fn stat_descs() -> &'static [StatDesc] {
        &crate::counters::STAT_DESCS
    }

    fn stats(&self, out: &mut [u64]) {
        for (o, v) in out.iter_mut().zip(self.counters.snapshot()) {
            *o = v;
        }
    }

    fn advise_mr(&self, pd: PdId, ranges: &[(u32, u64, u32)], advice: Advice) -> Result {
        OxeDevice::advise_mr(self, pd, ranges, advice)
    }
}

impl CqOps<OxeDevice> for Cq {
    fn create(drv: &OxeDevice, cqe: u32, handle: CqHandle, udata: &UData) -> Result<Arc<Self>> {
        let mut cmd = [0u8; OxeCreateCqCmd::SIZE];
        udata.request(&mut cmd)?;
        let flags = OxeCreateCqCmd::from_bytes(&cmd).map_or(0, |c| c.flags);
        if flags & !OXE_CREATE_CQ_INLINE_RECV != 0 {
            return Err(EOPNOTSUPP);
        }
        let inline_recv = flags & OXE_CREATE_CQ_INLINE_RECV != 0;
        let cq = Cq::new(&drv.counters, udata.uctx(), cqe, inline_recv, handle)?;
        let resp = OxeCreateCqResp { cq: cq.map() };
        if let Err(e) = udata.respond(&resp.to_bytes()) {
            cq.destroy();
            return Err(e);
        }
        Ok(cq)
    }

    fn capacity(&self) -> u32 {
        Cq::capacity(self)
    }

    /// uverbs' RESIZE_CQ (kernel consumers have no resize verb, but a null
    /// udata is handled like theirs all the same). The new ring is
    /// allocated and, for user space, described in the reply before the CQ
    /// moves to it: the move is the last step, so a refusal changes
    /// nothing. The provider maps the new ring once this returns.
    fn resize(&self, cqe: u32, udata: &UData) -> Result<u32> {
        // Without room for the reply, user space would go on reading a
        // ring the kernel no longer writes.
        if !udata.has_room(OxeResizeCqResp::SIZE) {
            return Err(EINVAL);
        }
        // A size below what the CQ holds fails before anything is allocated
        // (and again under the locks, where it counts).
        if cqe < self.outstanding() {
            return Err(EINVAL);
        }
        let new = Cq::new_ring(udata.uctx(), cqe, self.inline_recv())?;
        let capacity = new.num_slots();
        udata.respond(&OxeResizeCqResp { cq: new.map() }.to_bytes())?;
        let (r, unused) = Cq::resize(self, new);
        // Out of the CQ's locks: dropping a ring may sleep.
        drop(unused);
        r.map(|()| capacity)
    }

    fn poll(&self, out: &mut [OxeCqe]) -> usize {
        Cq::poll(self, out)
    }

    fn arm(&self, solicited: bool) -> bool {
        Cq::arm(self, solicited)
    }

    fn destroy(&self) {
        Cq::destroy(self)
    }
}

impl SrqOps<OxeDevice> for Srq {
    fn create(
        drv: &OxeDevice,
        init: SrqInit,
        handle: SrqHandle,
        udata: &UData,
    ) -> Result<Arc<Self>> {
        let srq = Srq::new(
            &drv.counters,
            udata.uctx(),
            init.pd,
            init.max_wr,
            init.max_sge,
            init.limit,
            handle,
        )?;
        let resp = OxeCreateSrqResp {
            srq: srq.map(),
            srq_num: 0,
            reserved: 0,
        };
        if let Err(e) = udata.respond(&resp.to_bytes()) {
            srq.destroy();
            return Err(e);
        }
        Ok(srq)
    }

    /// uverbs' MODIFY_SRQ has no reply, so a user resize names, in oxe's
    /// driver data, the address where the new ring's description goes. The
    /// new ring is allocated and described there before the SRQ moves to
    /// it: the move is the last step, so a refusal changes nothing.
    fn modify(&self, limit: Option<u32>, max_wr: Option<u32>, udata: &UData) -> Result {
        let Some(max_wr) = max_wr else {
            return limit.map_or(Ok(()), |l| self.set_limit(l));
        };
        let mut cmd = [0u8; OxeModifySrqCmd::SIZE];
        let reply = if udata.uctx().is_some() {
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
        let new = self.new_ring(udata.uctx(), max_wr)?;
        if let Some(c) = reply {
            write_user(
                c.resize_resp,
                &OxeResizeSrqResp { srq: new.map() }.to_bytes(),
            )?;
        }
        let (r, unused) = self.resize(new, limit);
        // Out of the SRQ's locks: dropping a ring may sleep.
        drop(unused);
        r
    }

    fn query(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.capacity(),
            max_sge: self.max_sge,
            limit: Srq::limit(self),
        }
    }

    fn post_recv(&self, wqe: &OxeRecvWqe, sges: &[OxeSge]) -> Result {
        self.post_kernel(wqe, sges)
    }

    fn destroy(&self) {
        Srq::destroy(self)
    }
}

impl QpOps<OxeDevice> for Qp {
    fn create(
        drv: &OxeDevice,
        dev: IbDev<OxeDevice>,
        init: QpInit<OxeDevice>,
        udata: &UData,
    ) -> Result<Arc<Self>> {
        let mut cmd = [0u8; OxeCreateQpCmd::SIZE];
        udata.request(&mut cmd)?;
        let flags = OxeCreateQpCmd::from_bytes(&cmd).map_or(0, |c| c.flags);
        if flags & !OXE_CREATE_QP_NO_INLINE_RECV != 0 {
            return Err(EOPNOTSUPP);
        }
        let inline_recv = flags & OXE_CREATE_QP_NO_INLINE_RECV == 0;
        let qp = Qp::create(drv, dev, init, inline_recv)?;
        let resp = OxeCreateQpResp {
            sq: qp.sq.map(),
            rq: qp.rq.as_ref().map(|r| r.map()).unwrap_or_default(),
            max_inline: qp.caps.max_inline,
            reserved: 0,
        };
        if let Err(e) = udata.respond(&resp.to_bytes()) {
            qp.destroy(drv);
            return Err(e);
        }
        Ok(qp)
    }

    fn qpn(&self) -> u32 {
        Qp::qpn(self)
    }

    fn ty(&self) -> QpType {
        self.ty
    }

    fn inline_recv(&self) -> bool {
        self.inline_recv
    }

    fn caps(&self) -> QpCaps {
        self.caps
    }

    fn sq_sig_all(&self) -> bool {
        self.sq_sig_all
    }

    fn is_kernel(&self) -> bool {
        self.kernel.is_some()
    }

    fn has_srq(&self) -> bool {
        self.srq.is_some()
    }

    fn modify(&self, mask: u32, attr: &QpAttr) -> Result {
        Qp::modify(self, mask, attr)
    }

    fn query(&self) -> QpAttr {
        Qp::query(self)
    }

    fn destroy(&self, drv: &OxeDevice) {
        Qp::destroy(self, drv)
    }

    fn with_handle<R>(&self, f: impl FnOnce(&QpHandle) -> R) -> Option<R> {
        Qp::with_handle(self, f)
    }

    fn doorbell(&self) {
        Qp::doorbell(self)
    }

    fn post_send(&self, wqe: &OxeSendWqe, body: &[u8], av: Option<Av>) -> Result {
        self.post_send_kernel(wqe, body, av)
    }

    fn post_recv(&self, wqe: &OxeRecvWqe, sges: &[OxeSge]) -> Result {
        self.post_recv_kernel(wqe, sges)
    }

    fn kick(&self) {
        Qp::kick(self)
    }

    fn kick_if_error(&self) {
        Qp::kick_if_error(self)
    }
}

impl MrOps<OxeDevice> for Mr {
    fn ib_link(&self) -> &crate::ib::mr::IbMrLink {
        &self.ib
    }

    fn reg_user(
        drv: &OxeDevice,
        dev: IbDev<OxeDevice>,
        req: &RegUser,
        udata: &UData,
    ) -> Result<(Arc<Self>, MrKeys)> {
        // The reply first: it does not depend on the MR, and a reply that
        // cannot be written (an unwritable buffer) must fail the verb
        // before anything is pinned or published. Written after, it left
        // a registered MR that ib_core never learnt of: its keys resolved
        // and its pages stayed pinned until the device went.
        let mut cmd = [0u8; OxeRegMrCmd::SIZE];
        udata.request(&mut cmd)?;
        let cmd = OxeRegMrCmd::from_bytes(&cmd).unwrap_or_default();
        udata.respond(&crate::mr::reply())?;
        if cmd.flags == 0 && cmd.max_entries == 0 {
            return crate::mr::reg_user(
                drv, dev, req.pd, req.start, req.length, req.iova, req.access,
            );
        }
        // oxedv_create_mkey: a key and no memory; the range and rights
        // come with its configuration.
        let known = OXE_REG_MR_INDIRECT | OXE_REG_MR_REMOTE_INVALIDATE;
        if cmd.flags & !known != 0 {
            return Err(EOPNOTSUPP);
        }
        if cmd.flags & OXE_REG_MR_INDIRECT == 0
            || req.start != 0
            || req.length != 0
            || req.iova != 0
            || req.access != 0
        {
            return Err(EINVAL);
        }
        let kind = crate::mr::indirect::Kind {
            max_entries: cmd.max_entries,
            remote_invalidate: cmd.flags & OXE_REG_MR_REMOTE_INVALIDATE != 0,
        };
        crate::mr::indirect::create(drv, req.pd, kind)
    }

    fn alloc_fast(
        drv: &OxeDevice,
        pd: PdId,
        max_sg: u32,
        gaps: bool,
    ) -> Result<(Arc<Self>, MrKeys)> {
        crate::mr::fastreg::alloc(drv, pd, crate::mr::fastreg::FastKind { gaps, max_sg })
    }

    fn withdraw(drv: &OxeDevice, mr: &Arc<Self>) {
        crate::mr::withdraw(drv, mr)
    }

    fn page_list(&self) -> Option<Arc<crate::ib::memory::Memory>> {
        Mr::page_list(self)
    }

    fn key(&self) -> u32 {
        self.lkey()
    }

    fn rereg_user(
        drv: &OxeDevice,
        dev: IbDev<OxeDevice>,
        mr: &Arc<Self>,
        req: &Rereg,
        udata: &UData,
    ) -> Result<MrKeys> {
        // The reply first, as for reg: once rereg_user returns, the MR has
        // its new PD, pages and rights, and a failed reply copy would fail
        // the verb with ib_core keeping the old PD, which could then be
        // freed while the MR still named it.
        udata.respond(&crate::mr::reply())?;
        crate::mr::rereg_user(drv, dev, mr, req)
    }

    fn dereg(drv: &OxeDevice, mr: &Arc<Self>) -> Result {
        crate::mr::dereg(drv, mr)
    }

    fn info(&self) -> MrInfo {
        Mr::info(self)
    }

    fn statistics(&self, put: &mut dyn FnMut(&core::ffi::CStr, u64) -> Result) -> Result {
        Mr::statistics(self, put)
    }
}

impl Describe for Mr {
    fn describe(&self, mut w: &mut dyn core::fmt::Write) -> core::fmt::Result {
        Mr::describe(self, &mut w)
    }
}

impl MwOps<OxeDevice> for Mw {
    fn alloc(drv: &OxeDevice, pd: PdId, ty: MwType) -> Result<Arc<Self>> {
        crate::mw::alloc(drv, pd, ty)
    }

    fn rkey(&self) -> u32 {
        Mw::rkey(self)
    }

    fn dealloc(drv: &OxeDevice, mw: &Arc<Self>) {
        crate::mw::dealloc(drv, mw)
    }
}
