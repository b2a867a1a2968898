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
//! The data path needs no system call except the send doorbell: every
//! queue (CQ, SQ, RQ, SRQ) is a ring the kernel maps into the process, and
//! the provider writes work requests into it and reads completions out of
//! it directly.
//!
//! Layout:
//! * [`sys`]: bindgen's declarations of rdma-core's private provider headers.
//! * [`ffi`] and the modules under it: the C-facing functions, one module
//!   per kind of object, plus the mapped queues and the queue lock; the
//!   only modules with `unsafe`. The ops table is in `ffi`'s root.
//! * Safe Rust, unit tested on in-memory queues: [`verbs`] (decisions of
//!   the control-path verbs), [`ring`] (the index discipline of mapped
//!   queues), [`wqe`] (work queue entries), [`send_queue`] and
//!   [`recv_queue`] (posting), [`cqe`] and [`completion_queue`] (polling).

#![deny(unsafe_op_in_unsafe_fn)]

mod completion_queue;
mod cqe;
mod ffi;
mod recv_queue;
mod ring;
mod send_queue;
mod sys;
mod verbs;
mod wqe;
