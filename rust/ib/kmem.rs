// SPDX-License-Identifier: GPL-2.0

//! Kernel consumers' memory: SGEs with the PD's local DMA lkey carry kernel
//! virtual addresses (oxe has no DMA device, so ib_dma_map_* is the identity).

use crate::bindings as b;

/// Proof that a QP was created by a kernel consumer, whose work requests
/// ib_core and the consumer vouch for. Only `ib/qp.rs` makes one, for a QP
/// created without user data; user QPs never hold it, so user-supplied
/// addresses can never be used as kernel addresses.
pub(crate) struct KernelToken(());

impl KernelToken {
    pub(super) fn new() -> Self {
        KernelToken(())
    }

    /// Copies `data` to kernel address `addr`.
    pub(crate) fn write(&self, addr: u64, data: &[u8]) {
        // SAFETY: a kernel consumer's buffer (type invariant: only kernel QPs
        // hold a token), which it keeps valid until the work request completes.
        unsafe { b::oxe_shim_kva_copy(addr, data.as_ptr().cast_mut().cast(), data.len(), true) };
    }

    /// Copies from kernel address `addr` into `out`.
    pub(crate) fn read(&self, addr: u64, out: &mut [u8]) {
        // SAFETY: as in `write`.
        unsafe { b::oxe_shim_kva_copy(addr, out.as_mut_ptr().cast(), out.len(), false) };
    }
}
