// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#![cfg_attr(not(any(test, MODULE)), no_std)]
// Tests may panic and index freely: a failed assertion is the point there.
#![cfg_attr(
    test,
    allow(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::cast_lossless
    )
)]

//! Pure logic shared by the two halves of oxe, a software RoCE v2 device.
//!
//! The kernel module and the rdma-core userspace provider must agree on
//! many small facts: which access flags are legal, how keys are laid out,
//! the byte layout of the driver ABI, the wire format of RoCE v2 headers.
//! Writing each fact once, here, is what stops the two halves drifting.
//!
//! The same files are compiled two ways:
//!
//! * as an ordinary cargo library, unit tested with `cargo test` on the
//!   host and linked into the provider;
//! * inside the kernel module, whose root includes this file with
//!   `#[path = "core/src/lib.rs"] pub mod oxe_core;`.
//!
//! That second use shapes everything here:
//!
//! * There is no `std` and no `alloc`: the kernel offers neither in the
//!   form a plain crate expects, and allocation belongs to the caller, who
//!   knows which GFP context it is in. Everything is fixed-size and lives
//!   on the stack or in caller-provided buffers.
//! * The crate attribute at the top is wrapped in `cfg_attr` because in the
//!   kernel this file is a module, not a crate root, and crate attributes
//!   are rejected there. The kernel defines the `MODULE` cfg, which turns
//!   the attribute off; in a host `cargo test` build `test` does the same
//!   so the tests can use `std`.
//! * Sibling modules are named through `super::`, never `crate::`: inside
//!   the kernel `crate` is the module, not this library.
//! * Nothing panics outside tests and there is no `unsafe`. The kernel is
//!   built with overflow checks, so arithmetic is checked or wrapping by
//!   intent, and malformed input comes back as an error value.

pub mod abi;
pub mod access;
pub mod aeth;
pub mod bth;
pub mod errno;
pub mod ext_headers;
pub mod gid;
pub mod icrc;
pub mod ip;
pub mod key;
pub mod layout;
pub mod opcode;
pub mod packet;
pub mod pma;
pub mod psn;
pub mod qp_state;
pub mod queue;
pub mod range;
pub mod rereg;
#[cfg(test)]
mod test_rng;
pub mod wire;

pub use access::{Access, AccessOp};
pub use errno::Errno;
pub use key::{Key, KeySource};
pub use psn::Psn;
pub use range::Range;
