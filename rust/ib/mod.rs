// SPDX-License-Identifier: GPL-2.0

//! A Rust RDMA layer over ib_core's C interface, for a driver that never
//! sees a raw pointer.
//!
//! The driver implements the traits of `driver.rs`; `ops.rs` builds
//! ib_core's ops table from them, generic over the driver type, and each
//! object's file (`cq.rs`, `qp.rs`, ...) turns ib_core's callbacks into
//! calls of those traits with typed values. This layer never names a type
//! of the driver's. Every `unsafe` block of the module lives here (and in
//! `bindings/`); each file wraps one C concept in a typed handle whose
//! invariants are written down.

pub(crate) mod ah;
pub(crate) mod av;
pub(crate) mod callback;
pub(crate) mod chunked_odp;
pub(crate) mod cq;
pub(crate) mod crc;
pub(crate) mod debugfs;
pub(crate) mod device;
pub(crate) mod driver;
pub(crate) mod error;
pub(crate) mod kmem;
pub(crate) mod link;
pub(crate) mod lock;
pub(crate) mod mad;
pub(crate) mod memory;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod netdev;
pub(crate) mod nl;
pub(crate) mod objects;
pub(crate) mod odp;
pub(crate) mod ops;
pub(crate) mod page_list;
pub(crate) mod pkt;
pub(crate) mod qp;
pub(crate) mod queue;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod udata;
pub(crate) mod udp;
pub(crate) mod umem;
pub(crate) mod work;

/// A random 32-bit value from the kernel's CRNG (for unpredictable keys).
pub(crate) fn random_u32() -> u32 {
    // SAFETY: get_random_u32 has no preconditions.
    unsafe { crate::bindings::get_random_u32() }
}
