// SPDX-License-Identifier: GPL-2.0

//! The driver-private part of a uverbs command's response.

use crate::bindings as b;
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

    /// Writes `bytes` (truncated to what userspace made room for) to the response.
    pub(crate) fn respond(&self, bytes: &[u8]) -> Result {
        if self.0.is_null() {
            return Ok(());
        }
        // SAFETY: non-null udata of the current call (constructor contract).
        let room = unsafe { b::oxe_shim_udata_outlen(self.0) };
        let len = bytes.len().min(room);
        // SAFETY: `bytes` is valid for `len` bytes; the udata is live.
        let ret = unsafe { b::oxe_shim_copy_to_udata(self.0, bytes.as_ptr().cast(), len) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }
}
