// SPDX-License-Identifier: GPL-2.0

//! Device counters, shown in /sys/class/infiniband/<dev>/hw_counters/ and by
//! `rdma statistic show`: what a kernel developer watches while poking at MRs.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};

/// Names as they appear in sysfs, in `Counters::snapshot` order.
pub(crate) const NAMES: [&core::ffi::CStr; 39] = [
    c"mr_reg",
    c"mr_dereg",
    c"mr_rereg",
    c"mr_active",
    c"pages_pinned",
    c"pin_failures",
    c"pd_active",
    c"ucontext_active",
    c"rx_packets",
    c"rx_dropped",
    c"mw_active",
    c"mw_bind",
    c"mw_invalidate",
    c"rcvd_seq_err",
    c"duplicate_request",
    c"ack_timeout",
    c"go_back",
    c"rx_wrong_path",
    c"ghost_ack",
    c"qp_active",
    c"cq_active",
    c"srq_active",
    c"odp_faults",
    c"odp_fault_pages",
    c"odp_invalidated_pages",
    c"odp_prefetch",
    c"mr_fastreg",
    c"mr_local_inv",
    c"mr_remote_inv",
    c"rx_inline_cqe",
    c"mkey_configure",
    c"mkey_access",
    c"rx_lock_busy",
    c"timeout_put_off",
    c"rx_batch_backlogged",
    c"rx_steered",
    c"resize_entries",
    c"resize_step_max",
    c"rx_backlog_full",
];

/// Monotonic event counts and current gauges for one device.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) mr_reg: AtomicU64,
    pub(crate) mr_dereg: AtomicU64,
    pub(crate) mr_rereg: AtomicU64,
    pub(crate) mr_active: AtomicU64,
    /// PAGE_SIZE pages currently pinned by this device's MRs.
    pub(crate) pages_pinned: AtomicU64,
    pub(crate) pin_failures: AtomicU64,
    pub(crate) pd_active: AtomicU64,
    pub(crate) ucontext_active: AtomicU64,
    /// RoCE packets delivered to a QP.
    pub(crate) rx_packets: AtomicU64,
    /// Packets dropped: bad ICRC, malformed, for no QP, or past their
    /// QP's backlog bound.
    pub(crate) rx_dropped: AtomicU64,
    /// Memory windows allocated and not deallocated.
    pub(crate) mw_active: AtomicU64,
    /// Binds (and type 1 unbinds) that took effect.
    pub(crate) mw_bind: AtomicU64,
    /// Type 2 windows freed by a local invalidate or a SEND with Invalidate.
    pub(crate) mw_invalidate: AtomicU64,
    /// RC requests the responder saw ahead of the PSN it expected (a lost
    /// or overtaken packet); it NAKs the first of a run.
    pub(crate) rcvd_seq_err: AtomicU64,
    /// RC requests the responder had already executed (a resend).
    pub(crate) duplicate_request: AtomicU64,
    /// Requester retransmit timer expiries.
    pub(crate) ack_timeout: AtomicU64,
    /// Times the requester went back to resend (timer, sequence NAK, RNR
    /// NAK, or a gap in read responses).
    pub(crate) go_back: AtomicU64,
    /// Packets to a connected QP from an address that is not its path's
    /// peer, or to one of this host's addresses that is not its source:
    /// dropped before anything in them is acted on.
    pub(crate) rx_wrong_path: AtomicU64,
    /// Acknowledgements, NAKs and responses for a PSN the QP has no
    /// request outstanding at (IBTA 9.7.5.1.x ghost responses): ignored.
    pub(crate) ghost_ack: AtomicU64,
    /// QPs, CQs and SRQs that exist (kernel consumers' included), against
    /// the limits `query_device` reports (`crate::limits`).
    pub(crate) qp_active: AtomicU64,
    pub(crate) cq_active: AtomicU64,
    pub(crate) srq_active: AtomicU64,
    /// On-demand paging: faults the data path asked for (each a range it
    /// found untranslated), the pages they and prefetches brought in, the
    /// pages the kernel's invalidations took away, and ibv_advise_mr calls.
    pub(crate) odp_faults: AtomicU64,
    pub(crate) odp_fault_pages: AtomicU64,
    pub(crate) odp_invalidated_pages: AtomicU64,
    pub(crate) odp_prefetch: AtomicU64,
    /// Fast registrations (IB_WR_REG_MR) that took effect.
    pub(crate) mr_fastreg: AtomicU64,
    /// Fast-registration MRs freed by a local invalidate.
    pub(crate) mr_local_inv: AtomicU64,
    /// Fast-registration MRs freed by a peer's SEND with Invalidate.
    pub(crate) mr_remote_inv: AtomicU64,
    /// Receives completed with their message in the completion entry, for
    /// the provider to copy (inline receive).
    pub(crate) rx_inline_cqe: AtomicU64,
    /// Indirect-key configurations that took effect.
    pub(crate) mkey_configure: AtomicU64,
    /// Accesses that went through an indirect key (each level counts).
    pub(crate) mkey_access: AtomicU64,
    /// Packets the receive softirq found their QP's lock held for, on
    /// another CPU, and left to the QP's backlog rather than spin: each
    /// one costs a trip through a work item.
    pub(crate) rx_lock_busy: AtomicU64,
    /// Retransmit timeouts put off because packets waited in the QP's own
    /// backlog: the peer had answered, this host had not got to it.
    pub(crate) timeout_put_off: AtomicU64,
    /// GSO packets (batches of packets sent on this host) queued whole in
    /// a QP's backlog, whose drain reads their packets in place; a batch
    /// taken apart on arrival counts nothing here.
    pub(crate) rx_batch_backlogged: AtomicU64,
    /// Packets left one by one to their QP's backlog for what they are
    /// (a stream's large packet, steered to another CPU; a READ request,
    /// left where the drain last ran: `Qp::defers`), not for packets
    /// already waiting there or a busy lock. A lone message's packets
    /// count nothing here.
    pub(crate) rx_steered: AtomicU64,
    /// Entries (completions, receive WQEs) CQ and SRQ resizes moved.
    pub(crate) resize_entries: AtomicU64,
    /// The most entries a resize copied in one step, with the queue's
    /// locks held (`ib::queue::RESIZE_STEP` bounds it).
    pub(crate) resize_step_max: AtomicU64,
    /// Packets dropped (and counted in `rx_dropped`) because their QP's
    /// backlog was at its bound (`crate::recv`, `BACKLOG_MAX`).
    pub(crate) rx_backlog_full: AtomicU64,
    /// The port's traffic, for its PerfMgmt counters (`crate::mad`), not
    /// listed in `NAMES`: every RoCE packet the port sends or receives
    /// intact (ICRC checked), counted from BTH through ICRC on both sides,
    /// so that a device talking to itself counts each byte once each way.
    pub(crate) port: PortCounters,
}

/// Traffic and link events of the device's one port.
#[derive(Default)]
pub(crate) struct PortCounters {
    pub(crate) xmit_bytes: AtomicU64,
    pub(crate) xmit_packets: AtomicU64,
    pub(crate) multicast_xmit_packets: AtomicU64,
    pub(crate) rcv_bytes: AtomicU64,
    pub(crate) rcv_packets: AtomicU64,
    pub(crate) multicast_rcv_packets: AtomicU64,
    /// Times the port went from active to down.
    pub(crate) link_downed: AtomicU64,
}

impl PortCounters {
    /// Counts one packet of `len` bytes sent.
    pub(crate) fn sent(&self, len: usize, multicast: bool) {
        add(&self.xmit_bytes, len);
        inc(&self.xmit_packets);
        if multicast {
            inc(&self.multicast_xmit_packets);
        }
    }

    /// Counts one packet of `len` bytes received intact.
    pub(crate) fn received(&self, len: usize, multicast: bool) {
        add(&self.rcv_bytes, len);
        inc(&self.rcv_packets);
        if multicast {
            inc(&self.multicast_rcv_packets);
        }
    }

    /// The counts as the PerfMgmt agent reports them.
    pub(crate) fn snapshot(&self) -> crate::oxe_core::pma::PortCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        crate::oxe_core::pma::PortCounts {
            xmit_bytes: get(&self.xmit_bytes),
            rcv_bytes: get(&self.rcv_bytes),
            xmit_packets: get(&self.xmit_packets),
            rcv_packets: get(&self.rcv_packets),
            multicast_xmit_packets: get(&self.multicast_xmit_packets),
            multicast_rcv_packets: get(&self.multicast_rcv_packets),
            link_downed: get(&self.link_downed),
        }
    }
}

/// `NAMES` as ib_core's hw counter table.
pub(crate) static STAT_DESCS: [crate::ib::stats::StatDesc; NAMES.len()] =
    crate::ib::stats::stat_descs(&NAMES);

impl Counters {
    /// All counters, in `NAMES` order.
    pub(crate) fn snapshot(&self) -> [u64; NAMES.len()] {
        [
            &self.mr_reg,
            &self.mr_dereg,
            &self.mr_rereg,
            &self.mr_active,
            &self.pages_pinned,
            &self.pin_failures,
            &self.pd_active,
            &self.ucontext_active,
            &self.rx_packets,
            &self.rx_dropped,
            &self.mw_active,
            &self.mw_bind,
            &self.mw_invalidate,
            &self.rcvd_seq_err,
            &self.duplicate_request,
            &self.ack_timeout,
            &self.go_back,
            &self.rx_wrong_path,
            &self.ghost_ack,
            &self.qp_active,
            &self.cq_active,
            &self.srq_active,
            &self.odp_faults,
            &self.odp_fault_pages,
            &self.odp_invalidated_pages,
            &self.odp_prefetch,
            &self.mr_fastreg,
            &self.mr_local_inv,
            &self.mr_remote_inv,
            &self.rx_inline_cqe,
            &self.mkey_configure,
            &self.mkey_access,
            &self.rx_lock_busy,
            &self.timeout_put_off,
            &self.rx_batch_backlogged,
            &self.rx_steered,
            &self.resize_entries,
            &self.resize_step_max,
            &self.rx_backlog_full,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }
}

/// Adds one to a counter.
impl Counters {
    /// A CQ or SRQ resize moved `entries`, at most `step` in one step.
    pub(crate) fn resized(&self, (entries, step): (u32, u32)) {
        self.resize_entries
            .fetch_add(entries.into(), Ordering::Relaxed);
        self.resize_step_max
            .fetch_max(step.into(), Ordering::Relaxed);
    }
}

pub(crate) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Adds `n` to a counter.
fn add(c: &AtomicU64, n: usize) {
    c.fetch_add(n as u64, Ordering::Relaxed);
}

/// Takes one off a gauge.
pub(crate) fn dec(c: &AtomicU64) {
    c.fetch_sub(1, Ordering::Relaxed);
}

impl crate::ib::odp::OdpEvents for Counters {
    fn invalidated(&self, pages: u64) {
        self.odp_invalidated_pages
            .fetch_add(pages, Ordering::Relaxed);
    }

    fn faulted(&self, pages: u64) {
        self.odp_fault_pages.fetch_add(pages, Ordering::Relaxed);
    }
}
