// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! `liboxe-rdmav59.so`: the rdma-core (provider ABI 59) userspace half of
//! oxe, a software RoCE v2 device.
//!
//! libibverbs `dlopen()`s this library because rdma-core's
//! `build/etc/libibverbs.d/oxe.driver` names it. Its only entry point is the
//! constructor in `c/glue.c`, which registers a `verbs_device_ops` whose
//! table matches kernel devices named `oxe*` with uverbs ABI version
//! [`oxe_core::abi::OXE_ABI_VERSION`]. From there, libibverbs calls the
//! functions in [`ffi`] through the device ops and the per-context
//! `verbs_context_ops`.
//!
//! Every control-path verb is a system call into the kernel module made by
//! one of rdma-core's `ibv_cmd_*` helpers; this library only owns the
//! memory of the objects it hands out and the few decisions in [`verbs`].
//! Verbs not implemented yet are left out of the ops table, so libibverbs'
//! defaults answer them with `EOPNOTSUPP`.
//!
//! Layout:
//! * [`sys`]: bindgen's declarations of rdma-core's private provider headers.
//! * [`ffi`]: the C-facing functions; the only module with `unsafe`.
//! * [`verbs`]: the provider's decisions, in safe Rust, unit tested.

#![deny(unsafe_op_in_unsafe_fn)]

mod ffi;
mod sys;
mod verbs;
