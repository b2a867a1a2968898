// SPDX-License-Identifier: GPL-2.0

//! Kernel consumers' memory: SGEs with the PD's local DMA lkey carry kernel
//! virtual addresses (oxe has no DMA device, so ib_dma_map_* is the identity).

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
        // (A zero-length SGE may carry any address, even 0.)
        if data.is_empty() {
            return;
        }
        // SAFETY: a kernel consumer's buffer (type invariant: only kernel QPs
        // hold a token), which it keeps valid until the work request completes.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
    }

    /// Copies from kernel address `addr` into `out`.
    pub(crate) fn read(&self, addr: u64, out: &mut [u8]) {
        if out.is_empty() {
            return;
        }
        // SAFETY: as in `write`.
        unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) };
    }
}
