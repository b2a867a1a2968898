// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (ib_umem) behind an MR.

use super::device::IbDev;
use super::error::from_err_ptr;
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::prelude::*;

/// User pages pinned by `ib_umem_get` (FOLL_LONGTERM), released on drop.
///
/// # Invariants
///
/// `self.umem` is a live umem returned by `ib_umem_get*` and not yet released.
pub(crate) struct Umem {
    umem: NonNull<b::ib_umem>,
}

// SAFETY: an ib_umem is plain data owned by this handle; release may happen on any thread.
unsafe impl Send for Umem {}
// SAFETY: shared access only reads immutable fields.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `[addr, addr + len)` of the calling process, writable when `access`
    /// (IB access flags) needs it.
    pub(crate) fn pin(dev: IbDev, addr: u64, len: u64, access: u32) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: `dev` is a registered oxe device (IbDev invariant); ib_umem_get
        // validates the user range itself and returns an ERR_PTR on failure.
        let p = unsafe { b::oxe_shim_ib_umem_get(dev.as_ptr(), addr, len, access as i32) };
        let p = from_err_ptr(p)?;
        // INVARIANT: a successful ib_umem_get.
        NonNull::new(p).map(|umem| Umem { umem }).ok_or(ENOMEM)
    }

    fn get(&self) -> &b::ib_umem {
        // SAFETY: live until drop (type invariant).
        unsafe { self.umem.as_ref() }
    }

    /// Whether the pages were pinned writable (FOLL_WRITE).
    pub(crate) fn writable(&self) -> bool {
        self.get().writable() != 0
    }

    /// Number of PAGE_SIZE pages pinned.
    pub(crate) fn page_count(&self) -> usize {
        let u = self.get();
        // ib_umem_get refused any range that overflows, so this cannot be None.
        crate::oxe_core::range::pages_spanned(
            u.address as u64,
            u.length as u64,
            kernel::page::PAGE_SHIFT as u32,
        )
        .map_or(0, |n| n as usize)
    }

    /// Page frame numbers of the pinned pages from page `skip` on, in address
    /// order, into `out`; returns how many were written.
    pub(crate) fn pfns(&self, skip: usize, out: &mut [usize]) -> usize {
        // SAFETY: the umem is live; `out` is valid for `out.len()` entries.
        unsafe {
            b::oxe_shim_umem_pfns(self.umem.as_ptr(), skip, out.as_mut_ptr().cast(), out.len())
        }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: releases the pin taken in `pin`, exactly once (type invariant).
        unsafe { b::ib_umem_release(self.umem.as_ptr()) };
    }
}
