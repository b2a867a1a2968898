// SPDX-License-Identifier: GPL-2.0

//! Raw C API: the kernel crate's bindings plus oxe's own (RDMA, UDP, the C shim).
//!
//! The abstraction layer (`rust/ib/`) is what calls into it; the driver
//! files hold no `unsafe` (`scripts/check_layers.py`), so they can name its
//! types and constants (`device.rs`, `verbs.rs` do) but never follow a raw
//! pointer.

#[allow(
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    improper_ctypes,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    clippy::cast_lossless
)]
mod generated {
    use kernel::bindings::*;
    use kernel::ffi;
    use pin_init::MaybeZeroable;
    // The kernel maps these by hand rather than through bindgen; so does oxe.
    type __kernel_size_t = usize;
    type __kernel_ssize_t = isize;
    type __kernel_ptrdiff_t = isize;
    // Generated per kernel flavour into the module's output tree (Kbuild).
    include!(concat!(env!("OXE_OBJTREE"), "/rust/bindings/generated.rs"));
}

pub(crate) use generated::*;
pub(crate) use kernel::bindings::*;

pub(crate) mod trace;
