// SPDX-License-Identifier: GPL-2.0

//! Objects ib_core allocates for oxe (sizes from the ops table): user contexts and PDs.

use crate::bindings as b;

/// A user context: one per open of the device by a process.
#[repr(C)]
pub(super) struct UctxObj {
    ib: b::ib_ucontext,
}

/// A protection domain. oxe needs no state of its own in it: an MR names its
/// PD by identity ([`PdId`]).
#[repr(C)]
pub(super) struct PdObj {
    ib: b::ib_pd,
}

/// A PD's identity, for checks like "same PD" on the data path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PdId(usize);

impl PdId {
    pub(super) fn of(pd: *const b::ib_pd) -> Self {
        PdId(pd as usize)
    }
}

/// What ib_core must allocate for each object type.
pub(super) fn set_sizes(ops: &mut b::ib_device_ops) {
    ops.size_ib_ucontext = core::mem::size_of::<UctxObj>();
    ops.size_ib_pd = core::mem::size_of::<PdObj>();
    ops.size_ib_cq = core::mem::size_of::<super::cq::CqObj>();
    ops.size_ib_qp = core::mem::size_of::<super::qp::QpObj>();
    ops.size_ib_srq = core::mem::size_of::<super::srq::SrqObj>();
    ops.size_ib_mw = core::mem::size_of::<super::mw::MwObj>();
    super::ah::sizes(ops);
}
