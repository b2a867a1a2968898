// SPDX-License-Identifier: GPL-2.0

//! The driver-private part of a uverbs command's response.

use super::queue::Uctx;
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::prelude::*;

/// Where a verb's udata sits in its uverbs call's attribute bundle (the
/// `driver_udata`; rdma_udata_to_uverbs_attr_bundle() is a macro).
const DRIVER_UDATA_AT: usize =
    core::mem::offset_of!(b::uverbs_attr_bundle, __bindgen_anon_1.hdr.driver_udata);

/// The response buffer of one uverbs call (may be absent for kernel callers).
pub(crate) struct UData(*mut b::ib_udata);

impl UData {
    /// # Safety
    ///
    /// `p` is null or the udata of the verb call in progress.
    pub(super) unsafe fn new(p: *mut b::ib_udata) -> Self {
        UData(p)
    }

    /// The udata of a verb that ib_core hands the whole attribute bundle
    /// (create_cq).
    ///
    /// # Safety
    ///
    /// `attrs` is null (a kernel consumer) or the bundle of the verb call
    /// in progress.
    pub(super) unsafe fn of_bundle(attrs: *mut b::uverbs_attr_bundle) -> Self {
        if attrs.is_null() {
            return UData(core::ptr::null_mut());
        }
        // SAFETY: inside the live bundle (the caller's contract).
        UData(unsafe { attrs.cast::<u8>().add(DRIVER_UDATA_AT) }.cast())
    }

    /// Whether the call comes from user space with room for a reply of
    /// `len` bytes, or from a kernel consumer (which takes no reply).
    pub(crate) fn has_room(&self, len: usize) -> bool {
        // SAFETY: null or the udata of the current call (constructor contract).
        self.0.is_null() || unsafe { (*self.0).outlen } >= len
    }

    /// The user context of the call; `None` for kernel consumers.
    pub(crate) fn uctx(&self) -> Option<Uctx> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: a non-null udata of the current call (constructor
        // contract), so inside a live bundle.
        let ctx = unsafe {
            let bundle = self
                .0
                .cast::<u8>()
                .sub(DRIVER_UDATA_AT)
                .cast::<b::uverbs_attr_bundle>();
            (*bundle).__bindgen_anon_1.hdr.context
        };
        NonNull::new(ctx).map(Uctx)
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
        // SAFETY: the udata is live (constructor contract).
        let inbuf = unsafe { (*self.0).inbuf } as u64;
        read_user(inbuf, &mut out[..len])?;
        let mut chunk = [0u8; 64];
        let mut at = len;
        while at < inlen {
            let n = (inlen - at).min(chunk.len());
            read_user(inbuf + at as u64, &mut chunk[..n])?;
            if chunk[..n].iter().any(|&byte| byte != 0) {
                return Err(EOPNOTSUPP);
            }
            at += n;
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
        // SAFETY: as above.
        let outbuf = unsafe { (*self.0).outbuf } as u64;
        write_user(outbuf, &bytes[..len])
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

/// Reads `out.len()` bytes of user memory at `addr`; `EFAULT` if it is not
/// readable user memory.
fn read_user(addr: u64, out: &mut [u8]) -> Result {
    // SAFETY: copy_from_user checks that the source is user memory and
    // handles faults; `out` is valid for its length.
    let left = unsafe { b::copy_from_user(out.as_mut_ptr().cast(), addr as *const _, out.len()) };
    if left != 0 {
        return Err(EFAULT);
    }
    Ok(())
}
