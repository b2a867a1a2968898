// SPDX-License-Identifier: GPL-2.0

//! One oxe device: what it is made of, what it reports, and how it is created.

#![deny(unsafe_code)]

use crate::counters::{dec, inc, Counters};
use crate::ib::netdev::NetDev;
use crate::ib::udata::UData;
use crate::ib::udp::PortSockets;
use crate::keys::KeyTable;
use crate::limits::{self, Kind};
use crate::oxe_core::abi::{self, OxeAllocUcontextResp};
use crate::oxe_core::Key;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, SetOnce};

use crate::bindings as b;
use crate::ib::av::Ah;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::pkt::RxPacket;
use crate::ib::work::{self, Drain, DrainOn, RxQueue, Work, WorkFn};
use crate::mcast::Groups;
use crate::qp::Qp;
use crate::table::Table;

impl WorkFn for OxeDevice {
    fn run(&self) {
        self.run_faults(None);
    }
}

impl Drain for OxeDevice {
    fn drain(&self) -> bool {
        self.drain_rx()
    }
}

/// Vendor id reported by query_device: 0xffffff, "no OUI", as soft devices use.
const VENDOR_ID: u32 = 0x00ff_ffff;
/// Part id: "ox" in ASCII.
const VENDOR_PART_ID: u32 = 0x6f78;
/// Firmware version major<<32 | minor<<16 | sub: the provider displays it that way.
const FW_VERSION: u64 = 0x0001_0000;
/// GID table entries per port; RoCE fills them from the netdev's addresses.
const GID_TABLE_LEN: i32 = 1024;
/// RoCE v2 headers around a packet's payload in the worst case (IPv6 40, UDP 8,
/// BTH 12, RETH 16, ICRC 4), which the netdev MTU must also fit.
const ROCE_OVERHEAD: u32 = 80;

/// The state oxe keeps for one device. Field order is drop order: the sockets
/// go before the netdev reference that keeps their namespace alive.
pub(crate) struct OxeDevice {
    /// Packets sent to this device from its own host; the drain is
    /// cancelled before anything it uses goes (`owns_work!` below).
    rxq: SetOnce<RxQueue>,
    /// The device's own work: ODP faults (`crate::odp`), cancelled as the
    /// receive queue's drain is.
    fault_work: SetOnce<Work>,
    /// ODP faults the data path queued, and those running (`crate::odp`).
    pub(crate) faults: Pin<KBox<SpinLockBh<crate::odp::FaultQueue>>>,
    /// Live QPs by number.
    pub(crate) qps: Pin<KBox<Table<Qp>>>,
    /// Multicast groups and the UD QPs attached to them.
    pub(crate) mcast: Pin<KBox<Groups>>,
    /// User address handles by number.
    pub(crate) ahs: Pin<KBox<Table<Ah>>>,
    /// /sys/kernel/debug/oxe/<name>/, holding one file per MR.
    pub(crate) debugfs: Option<kernel::debugfs::Dir>,
    _sockets: PortSockets,
    pub(crate) keys: Pin<KBox<KeyTable<crate::mr::Mr>>>,
    pub(crate) mw_keys: Pin<KBox<KeyTable<crate::mw::Mw>>>,
    pub(crate) counters: Arc<Counters>,
    /// Node and system image GUID, taken once: a netdev without a MAC (tun)
    /// yields a random one, which must not change from one query to the next.
    pub(crate) guid: u64,
    /// Whether the port was active at the last link event (for LinkDowned).
    port_active: AtomicBool,
    pub(crate) netdev: NetDev,
    /// Pinned for good: the receive queue's work points back at it.
    _pin: core::marker::PhantomPinned,
}

work::owns_work!(OxeDevice {
    work: fault_work,
    rx: rxq
});

/// `rdma link add NAME type oxe netdev DEV`.
pub(crate) fn new_link(name: &CStr, ndev: NetDev) -> Result {
    if crate::ib::device::exists_on(&ndev) {
        return Err(EEXIST);
    }
    let drv = KBox::pin(
        OxeDevice {
            rxq: SetOnce::new(),
            fault_work: SetOnce::new(),
            faults: KBox::pin_init(
                new_spinlock_bh!(crate::odp::FaultQueue::default(), "oxe_odp_faults"),
                GFP_KERNEL,
            )?,
            qps: KBox::pin_init(Table::new(2, Key::MAX_INDEX), GFP_KERNEL)?,
            mcast: KBox::pin_init(Groups::new(), GFP_KERNEL)?,
            ahs: KBox::pin_init(Table::new(1, i32::MAX as u32), GFP_KERNEL)?,
            debugfs: crate::ib::debugfs::device_dir(name),
            _sockets: PortSockets::get::<OxeDevice>(&ndev)?,
            keys: KeyTable::new(crate::keys::MR_KEYS)?,
            mw_keys: KeyTable::new(crate::keys::MW_KEYS)?,
            counters: Arc::new(Counters::default(), GFP_KERNEL)?,
            guid: ndev.eui64(),
            port_active: AtomicBool::new(ndev.is_up()),
            netdev: ndev,
            _pin: core::marker::PhantomPinned,
        },
        GFP_KERNEL,
    )?;
    work::start_rx_queue(&drv.as_ref(), DrainOn::Softirq)?;
    work::start_work(&drv.as_ref())?;
    crate::ib::device::register(name, drv)
}

/// The largest IB MTU whose packets fit the netdev's MTU.
fn ib_mtu_for(netdev_mtu: u32) -> b::ib_mtu {
    let room = netdev_mtu.saturating_sub(ROCE_OVERHEAD);
    match room {
        4096.. => b::ib_mtu_IB_MTU_4096,
        2048.. => b::ib_mtu_IB_MTU_2048,
        1024.. => b::ib_mtu_IB_MTU_1024,
        512.. => b::ib_mtu_IB_MTU_512,
        _ => b::ib_mtu_IB_MTU_256,
    }
}

impl OxeDevice {
    /// Device attributes. Honest: only what is implemented is advertised.
    pub(crate) fn query_device(&self, attr: &mut b::ib_device_attr) {
        *attr = Default::default();
        attr.fw_ver = FW_VERSION;
        attr.sys_image_guid = self.guid;
        attr.max_mr_size = u64::MAX;
        attr.page_size_cap = !(kernel::page::PAGE_SIZE as u64 - 1);
        attr.vendor_id = VENDOR_ID;
        attr.vendor_part_id = VENDOR_PART_ID;
        attr.max_mr = Kind::Mr.max();
        attr.max_mw = Kind::Mw.max();
        attr.max_pd = Kind::Pd.max();
        attr.max_pkeys = 1;
        attr.atomic_cap = b::ib_atomic_cap_IB_ATOMIC_HCA;
        attr.masked_atomic_cap = b::ib_atomic_cap_IB_ATOMIC_NONE;
        attr.max_qp = Kind::Qp.max();
        attr.max_qp_wr = crate::qp::MAX_WR;
        attr.max_send_sge = crate::qp::MAX_SGE;
        attr.max_recv_sge = crate::qp::MAX_SGE;
        attr.max_sge_rd = crate::qp::MAX_SGE;
        attr.max_cq = Kind::Cq.max();
        attr.max_cqe = crate::cq::MAX_CQE;
        attr.max_qp_rd_atom = crate::qp::MAX_RD_ATOMIC;
        attr.max_qp_init_rd_atom = crate::qp::MAX_RD_ATOMIC;
        attr.max_res_rd_atom = crate::qp::MAX_RD_ATOMIC * 1024;
        attr.max_srq = Kind::Srq.max();
        attr.max_srq_wr = crate::qp::MAX_WR;
        attr.max_srq_sge = crate::qp::MAX_SGE;
        attr.max_ah = i32::MAX as u32;
        attr.max_mcast_grp = crate::mcast::MAX_GROUPS;
        attr.max_mcast_qp_attach = crate::mcast::MAX_QPS_PER_GROUP as u32;
        attr.max_total_mcast_qp_attach = crate::mcast::MAX_ATTACHMENTS;
        attr.max_pkeys = 1;
        attr.local_ca_ack_delay = 15;
        attr.device_cap_flags = b::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64
            | b::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64
            | b::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64
            // Memory windows of type 1 and 2B (mw.rs).
            | b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64
            | b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64
            // Memory Placement Extensions: FLUSH to global visibility and
            // ATOMIC WRITE. Not FLUSH_PERSISTENT (see mr::SUPPORTED_ACCESS).
            | b::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64
            | b::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64
            // Fast registration for kernel consumers (crate::mr::fastreg).
            | b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
        attr.max_fast_reg_page_list_len = crate::mr::fastreg::MAX_PAGES;
        // ODP on RC, UC and UD, explicit and implicit MRs (crate::odp).
        attr.odp_caps.general_caps = u64::from(
            b::ib_odp_general_cap_bits_IB_ODP_SUPPORT
                | b::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT,
        );
        attr.odp_caps.per_transport_caps.rc_odp_caps =
            b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE;
        attr.odp_caps.per_transport_caps.uc_odp_caps =
            b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
        attr.odp_caps.per_transport_caps.ud_odp_caps =
            b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
                | b::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
        // `rdma link delete` may remove the device. Kernel PDs use lkey 0
        // (the device's local_dma_lkey) for kernel virtual addresses, which
        // oxe, without a DMA device, can copy to directly: no DMA MR needed.
        attr.kernel_cap_flags = u64::from(b::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG)
            | u64::from(b::ib_kernel_cap_flags_IBK_LOCAL_DMA_LKEY)
            | u64::from(b::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING)
            // A fast-registration MR maps scatterlist entries of any
            // alignment (IB_MR_TYPE_SG_GAPS).
            | u64::from(b::ib_kernel_cap_flags_IBK_SG_GAPS_REG);
    }

    /// The device's name in its trace events: the node GUID as a number,
    /// as sysfs and `ibv_devinfo` print it (`guid` holds it in network
    /// order).
    pub(crate) fn trace_id(&self) -> u64 {
        u64::from_be(self.guid)
    }

    /// Port attributes; the state follows the netdev (up and with carrier = ACTIVE).
    pub(crate) fn query_port(&self, port: u32, attr: &mut b::ib_port_attr) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        let up = self.netdev.is_up();
        *attr = Default::default();
        attr.state = if up {
            b::ib_port_state_IB_PORT_ACTIVE
        } else {
            b::ib_port_state_IB_PORT_DOWN
        };
        attr.phys_state = if up {
            b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP
        } else {
            b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED
        } as u8;
        attr.max_mtu = b::ib_mtu_IB_MTU_4096;
        attr.active_mtu = ib_mtu_for(self.netdev.mtu());
        attr.phys_mtu = 4096;
        attr.gid_tbl_len = GID_TABLE_LEN;
        attr.port_cap_flags = b::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
        attr.max_msg_sz = crate::qp::MAX_MSG_SZ;
        attr.pkey_tbl_len = 1;
        attr.max_vl_num = 1;
        // The slowest link: the trampoline puts the netdev's speed in its
        // place whenever the netdev can say it.
        attr.active_width = b::ib_port_width_IB_WIDTH_1X as u8;
        attr.active_speed = b::ib_port_speed_IB_SPEED_SDR as u16;
        Ok(())
    }

    /// The netdev's link changed (up, down, carrier): returns whether the
    /// port is active now, and counts a fall from active to down.
    pub(crate) fn link_changed(&self) -> bool {
        let up = self.netdev.is_up();
        if self.port_active.swap(up, Ordering::Relaxed) && !up {
            inc(&self.counters.port.link_downed);
        }
        up
    }

    /// A packet sent from this host to an address of this device: queued
    /// rather than processed here, since the sender holds its QP's lock and
    /// the receiver may be that same QP; received in softirq once the
    /// sender lets softirqs run (`drain_rx`). A kworker's wake-up for each
    /// packet was most of a local round trip (NVMe-oF between two oxe
    /// devices of one host).
    pub(crate) fn loopback(&self, pkt: RxPacket) {
        if let Some(q) = self.rxq.as_ref() {
            q.push(pkt);
        }
    }

    pub(crate) fn rx(&self) -> Option<&RxQueue> {
        self.rxq.as_ref()
    }

    pub(crate) fn fault_work(&self) -> Option<&Work> {
        self.fault_work.as_ref()
    }

    pub(crate) fn alloc_ucontext(&self, udata: &UData) -> Result {
        let resp = OxeAllocUcontextResp {
            abi_version: abi::OXE_ABI_VERSION,
            caps: abi::OXE_UCTX_CAP_REREG_TRANS
                | abi::OXE_UCTX_CAP_REREG_PD
                | abi::OXE_UCTX_CAP_REREG_ACCESS,
            max_inline: crate::qp::MAX_INLINE,
            inline_recv_max: abi::OXE_INLINE_RECV_MAX,
        };
        udata.respond(&resp.to_bytes())?;
        inc(&self.counters.ucontext_active);
        Ok(())
    }

    pub(crate) fn dealloc_ucontext(&self) {
        dec(&self.counters.ucontext_active);
    }

    pub(crate) fn alloc_pd(&self) -> Result {
        limits::admit(&self.counters, Kind::Pd)
    }

    pub(crate) fn dealloc_pd(&self) {
        limits::release(&self.counters, Kind::Pd);
    }
}
