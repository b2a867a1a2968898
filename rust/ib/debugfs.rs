// SPDX-License-Identifier: GPL-2.0

//! debugfs: /sys/kernel/debug/oxe/<dev>/mr-<key index>, one file per MR,
//! showing its keys, rights and page-by-page translation; and
//! /sys/kernel/debug/oxe/icrc, the CRC routine chosen at load.

use crate::bindings as b;
use crate::mr::Mr;
use core::fmt::Write;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;

/// A debugfs directory or file, removed (recursively) on drop.
///
/// # Invariants
///
/// `self.0` is a dentry returned by debugfs and not yet removed.
pub(crate) struct Entry(NonNull<b::dentry>);

// SAFETY: debugfs entries may be removed from any thread.
unsafe impl Send for Entry {}
// SAFETY: shared references give no access.
unsafe impl Sync for Entry {}

impl Entry {
    fn new(d: *mut b::dentry) -> Option<Self> {
        // debugfs reports failure as an ERR_PTR; oxe runs fine without it.
        super::error::from_err_ptr(d)
            .ok()
            .and_then(NonNull::new)
            .map(Entry)
    }

    /// A directory named `name` under `parent` (the debugfs root if None).
    fn dir(name: &CStr, parent: Option<&Entry>) -> Option<Self> {
        let parent = parent.map_or(core::ptr::null_mut(), |p| p.0.as_ptr());
        // SAFETY: a NUL-terminated name and a live (or null) parent.
        Self::new(unsafe { b::debugfs_create_dir(name.as_char_ptr(), parent) })
    }

    /// The file showing `mr` under `dir`. The MR must outlive the returned entry.
    /// `gids`: the port's GID table as the connection manager looks it up.
    pub(super) fn gids_file(dir: &Entry, ib: *mut b::ib_device) -> Option<Self> {
        // SAFETY: a live directory; the device outlives its debugfs directory
        // (removed in dealloc_driver, with the rest of the driver state).
        Self::new(unsafe { b::oxe_shim_debugfs_gids_file(dir.0.as_ptr(), ib) })
    }

    pub(super) fn mr_file(dir: &Entry, index: u32, mr: &Mr) -> Option<Self> {
        let mut name = [0u8; 24];
        // The last byte stays 0: the terminating NUL.
        write!(
            NameBuf {
                buf: &mut name[..23],
                len: 0
            },
            "mr-{index}"
        )
        .ok()?;
        let mr_ptr = core::ptr::from_ref(mr).cast_mut().cast();
        // SAFETY: `name` is NUL-terminated (its last byte stays 0); the dir is
        // live; the caller keeps `mr` alive until this entry is dropped, and
        // debugfs_remove waits for readers.
        Self::new(unsafe {
            b::oxe_shim_debugfs_mr_file(name.as_ptr().cast(), dir.0.as_ptr(), mr_ptr)
        })
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: not yet removed (type invariant); waits for open readers.
        unsafe { b::debugfs_remove(self.0.as_ptr()) };
    }
}

/// /sys/kernel/debug/oxe, created at module load.
static ROOT: AtomicPtr<b::dentry> = AtomicPtr::new(core::ptr::null_mut());

/// Creates the oxe root directory (module init). Without debugfs oxe still works.
pub(crate) fn init_root() {
    if let Some(root) = Entry::dir(c"oxe", None) {
        // SAFETY: a live directory; the file goes with it at module exit.
        let icrc = Entry::new(unsafe { b::oxe_shim_debugfs_icrc_file(root.0.as_ptr()) });
        // Removed with its directory (debugfs_remove is recursive).
        core::mem::forget(icrc);
        ROOT.store(root.0.as_ptr(), Ordering::Release);
        core::mem::forget(root);
    }
}

/// Removes the root directory (module exit, after every device is gone).
pub(crate) fn remove_root() {
    let root = ROOT.swap(core::ptr::null_mut(), Ordering::AcqRel);
    // INVARIANT: the pointer came from a live Entry that was forgotten above.
    drop(NonNull::new(root).map(Entry));
}

/// A device's directory under the root.
pub(crate) fn device_dir(name: &CStr) -> Option<Entry> {
    let root = NonNull::new(ROOT.load(Ordering::Acquire))?;
    // SAFETY: the root lives until module exit, after all devices are gone.
    Entry::new(unsafe { b::debugfs_create_dir(name.as_char_ptr(), root.as_ptr()) })
}

/// Formats into a fixed buffer, failing rather than truncating.
struct NameBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Write for NameBuf<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(core::fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(core::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Writes formatted text into a seq_file.
struct Seq(*mut b::seq_file);

impl Write for Seq {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // SAFETY: the seq_file of the read in progress.
        unsafe { b::seq_write(self.0, s.as_ptr().cast(), s.len()) };
        Ok(())
    }
}

/// Called by the C fops (rust/bindings/shim.c) for each read of an MR file.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
#[no_mangle]
unsafe extern "C" fn oxe_rs_mr_show(
    m: *mut b::seq_file,
    mr: *mut kernel::ffi::c_void,
) -> kernel::ffi::c_int {
    // SAFETY: the pointer registered in `mr_file`, alive while the file exists.
    let mr = unsafe { &*mr.cast::<Mr>() };
    let _ = mr.describe(&mut Seq(m));
    0
}

/// Called by the C fops for each read of the icrc file.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
#[no_mangle]
unsafe extern "C" fn oxe_rs_icrc_show(m: *mut b::seq_file) -> kernel::ffi::c_int {
    let _ = super::crc::describe(&mut Seq(m));
    0
}
