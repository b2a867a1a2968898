// SPDX-License-Identifier: GPL-2.0

//! The driver-private part of a uverbs command's response.

use super::queue::Uctx;
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::prelude::*;

/// The response buffer of one uverbs call (may be absent for kernel callers).
pub(crate) struct UData(*mut b::ib_udata);

impl UData {
    /// # Safety
    ///
    /// `p` is null or the udata of the verb call in progress.
    pub(super) unsafe fn new(p: *mut b::ib_udata) -> Self {
        UData(p)
    }

    /// Whether the call comes from user space with room for a reply of
    /// `len` bytes, or from a kernel consumer (which takes no reply).
    pub(crate) fn has_room(&self, len: usize) -> bool {
        // SAFETY: null or the udata of the current call (constructor contract).
        self.0.is_null() || unsafe { (*self.0).outlen } >= len
    }

    /// The user context of the call; `None` for kernel consumers.
    pub(crate) fn uctx(&self) -> Option<Uctx> {
        // SAFETY: null or the udata of the current call (constructor contract).
        NonNull::new(unsafe { b::oxe_shim_udata_uctx(self.0) }).map(Uctx)
    }

    /// Reads the driver part of the request into `out`; returns how many
    /// bytes user space sent (0 for kernel consumers, whose `out` is left
    /// alone). A request longer than `out` is accepted only if the rest is
    /// zero (what a newer provider sends for fields it leaves unused), else
    /// `EOPNOTSUPP`, as uverbs drivers do.
    pub(crate) fn request(&self, out: &mut [u8]) -> Result<usize> {
        if self.0.is_null() {
            return Ok(0);
        }
        // SAFETY: non-null udata of the current call (constructor contract).
        let inlen = unsafe { (*self.0).inlen };
        let len = inlen.min(out.len());
        // SAFETY: `out` is valid for `len` bytes; the udata is live.
        let ret = unsafe { b::oxe_shim_copy_from_udata(out.as_mut_ptr().cast(), self.0, len) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        // SAFETY: as above; the range lies within the request.
        if inlen > len && !unsafe { b::oxe_shim_udata_cleared(self.0, len, inlen - len) } {
            return Err(EOPNOTSUPP);
        }
        Ok(inlen)
    }

    /// Writes `bytes` (truncated to what userspace made room for) to the response.
    pub(crate) fn respond(&self, bytes: &[u8]) -> Result {
        if self.0.is_null() {
            return Ok(());
        }
        // SAFETY: non-null udata of the current call (constructor contract).
        let room = unsafe { (*self.0).outlen };
        let len = bytes.len().min(room);
        // SAFETY: `bytes` is valid for `len` bytes; the udata is live.
        let ret = unsafe { b::oxe_shim_copy_to_udata(self.0, bytes.as_ptr().cast(), len) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }
}

/// Writes `bytes` to user memory at `addr`, an address user space put in a
/// command for a reply the command itself has no room for (modify_srq).
/// `EFAULT` if it is not writable user memory.
pub(crate) fn write_user(addr: u64, bytes: &[u8]) -> Result {
    // SAFETY: copy_to_user checks that the destination is user memory and
    // handles faults; `bytes` is valid for its length.
    let left = unsafe { b::copy_to_user(addr as *mut _, bytes.as_ptr().cast(), bytes.len()) };
    if left != 0 {
        return Err(EFAULT);
    }
    Ok(())
}
