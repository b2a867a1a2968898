// SPDX-License-Identifier: GPL-2.0

//! The device's object limits: what `query_device` reports is what creation
//! enforces. Before, the limits were only advertised, and a process could
//! create QPs, each with up to 32 MiB of ring memory, until the kernel ran
//! out. Module parameters can lower a limit (never raise it), so that a test
//! can reach it: `modprobe oxe max_qp=8`.

#![deny(unsafe_code)]

use crate::counters::Counters;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// The largest limits oxe supports.
const MAX_MR: u32 = crate::oxe_core::Key::MAX_INDEX;
const MAX_PD: u32 = 1 << 20;
const MAX_QP: u32 = 1 << 16;
const MAX_CQ: u32 = 1 << 16;
const MAX_SRQ: u32 = 1 << 14;

/// A kind of object the device counts against a limit.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Pd,
    /// MRs; memory windows share the key space and the same limit.
    Mr,
    Mw,
    Cq,
    Qp,
    Srq,
}

impl Kind {
    /// The limit, as reported and enforced.
    pub(crate) fn max(self) -> u32 {
        use crate::module_parameters as p;
        match self {
            Kind::Pd => p::max_pd.value().min(MAX_PD),
            Kind::Mr | Kind::Mw => p::max_mr.value().min(MAX_MR),
            Kind::Cq => p::max_cq.value().min(MAX_CQ),
            Kind::Qp => p::max_qp.value().min(MAX_QP),
            Kind::Srq => p::max_srq.value().min(MAX_SRQ),
        }
    }

    /// The gauge of live objects of this kind (in `hw_counters`).
    fn gauge(self, c: &Counters) -> &AtomicU64 {
        match self {
            Kind::Pd => &c.pd_active,
            Kind::Mr => &c.mr_active,
            Kind::Mw => &c.mw_active,
            Kind::Cq => &c.cq_active,
            Kind::Qp => &c.qp_active,
            Kind::Srq => &c.srq_active,
        }
    }
}

/// Counts one object of `kind`, or refuses with ENOMEM (as hardware out of
/// resources does) when the device has its limit of them. The caller gives
/// it back with [`release`], on a later failure too.
pub(crate) fn admit(c: &Counters, kind: Kind) -> Result {
    let max = u64::from(kind.max());
    kind.gauge(c)
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .map(|_| ())
        .map_err(|_| ENOMEM)
}

/// Gives back what [`admit`] counted.
pub(crate) fn release(c: &Counters, kind: Kind) {
    crate::counters::dec(kind.gauge(c));
}

/// An admitted object that gives its count back when dropped: held by the
/// object itself, so that every failure path and the last reference going
/// return it without a line of their own.
pub(crate) struct Quota {
    counters: Arc<Counters>,
    kind: Kind,
}

impl Quota {
    pub(crate) fn take(c: &Arc<Counters>, kind: Kind) -> Result<Quota> {
        admit(c, kind)?;
        Ok(Quota {
            counters: c.clone(),
            kind,
        })
    }
}

impl Quota {
    /// The device's counters, which the object counts in.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }
}

impl Drop for Quota {
    fn drop(&mut self) {
        release(&self.counters, self.kind);
    }
}
