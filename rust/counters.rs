// SPDX-License-Identifier: GPL-2.0

//! Device counters, shown in /sys/class/infiniband/<dev>/hw_counters/ and by
//! `rdma statistic show`: what a kernel developer watches while poking at MRs.

use core::sync::atomic::{AtomicU64, Ordering};

/// Names as they appear in sysfs, in `Counters::snapshot` order.
pub(crate) const NAMES: [&core::ffi::CStr; 13] = [
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
    /// Packets dropped: bad ICRC, malformed, or for no QP.
    pub(crate) rx_dropped: AtomicU64,
    /// Memory windows allocated and not deallocated.
    pub(crate) mw_active: AtomicU64,
    /// Binds (and type 1 unbinds) that took effect.
    pub(crate) mw_bind: AtomicU64,
    /// Type 2 windows freed by a local invalidate or a SEND with Invalidate.
    pub(crate) mw_invalidate: AtomicU64,
}

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
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }
}

/// Adds one to a counter.
pub(crate) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Takes one off a gauge.
pub(crate) fn dec(c: &AtomicU64) {
    c.fetch_sub(1, Ordering::Relaxed);
}
