// SPDX-License-Identifier: GPL-2.0

//! The thin layer between ib_core's C interface and oxe's safe driver logic.
//!
//! Every `unsafe` block in oxe lives in this directory. Each file wraps one C
//! concept in a typed handle whose invariants are written down, and turns C
//! callbacks into calls of safe functions in the driver files (`device.rs`,
//! `mr.rs`, ...), which never see a raw pointer.

pub(crate) mod ah;
pub(crate) mod av;
pub(crate) mod callback;
pub(crate) mod cq;
pub(crate) mod crc;
pub(crate) mod debugfs;
pub(crate) mod device;
pub(crate) mod error;
pub(crate) mod kmem;
pub(crate) mod link;
pub(crate) mod lock;
pub(crate) mod mad;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod netdev;
pub(crate) mod objects;
pub(crate) mod pkt;
pub(crate) mod qp;
pub(crate) mod queue;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod udata;
pub(crate) mod udp;
pub(crate) mod umem;
pub(crate) mod verbs;
pub(crate) mod work;

/// A random 32-bit value from the kernel's CRNG (for unpredictable keys).
pub(crate) fn random_u32() -> u32 {
    // SAFETY: get_random_u32 has no preconditions.
    unsafe { crate::bindings::get_random_u32() }
}
