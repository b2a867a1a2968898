// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB

//! The provider's context, and the way back to it from the `ibv_context`
//! libibverbs hands to every verb: a leaf, so that the verbs of any object
//! can read what the context learned when it was opened.

use core::mem::offset_of;

use crate::sys;
use crate::verbs::UcontextInfo;

/// The provider's context: libibverbs' `verbs_context` followed by what the
/// kernel told this context at creation.
#[repr(C)]
pub(super) struct OxeContext {
    /// Must stay first: the allocation below is addressed through it.
    pub(super) vctx: sys::verbs_context,
    /// From the kernel's `alloc_ucontext` reply. Zeroed (no capabilities)
    /// until the reply has been checked.
    pub(super) info: UcontextInfo,
}

// `_verbs_init_and_alloc_context` takes the offset of the `verbs_context`
// inside the driver's struct; it is 0 here, which lets us pass NULL.
const _: () = assert!(offset_of!(OxeContext, vctx) == 0);

/// The [`OxeContext`] around an `ibv_context` libibverbs hands back.
///
/// libibverbs gives verbs the `ibv_context` embedded at the end of
/// `verbs_context` (its C `verbs_get_ctx()` is a container_of); this steps
/// back to the start of the provider's struct.
///
/// # Safety
/// `ibctx` must be the `ibv_context` of a live context from
/// `oxe_alloc_context`.
pub(super) unsafe fn oxe_context(ibctx: *mut sys::ibv_context) -> *mut OxeContext {
    let offset = offset_of!(OxeContext, vctx) + offset_of!(sys::verbs_context, context);
    // SAFETY: `ibctx` lies `offset` bytes into an `OxeContext` allocation,
    // so stepping back stays inside it and reaches its start.
    unsafe { ibctx.byte_sub(offset) }.cast::<OxeContext>()
}

/// What the context learned from the kernel (and the environment) when it
/// was opened.
///
/// # Safety
/// `ibctx` must be the `ibv_context` of a live context from
/// `oxe_alloc_context`.
pub(super) unsafe fn context_info(ibctx: *mut sys::ibv_context) -> UcontextInfo {
    // SAFETY: a live context of ours, per the contract.
    let ctx = unsafe { oxe_context(ibctx) };
    // SAFETY: live; `info` is only written while the context is created.
    unsafe { (*ctx).info }
}
