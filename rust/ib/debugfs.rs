// SPDX-License-Identifier: GPL-2.0

//! debugfs: /sys/kernel/debug/oxe/icrc (the CRC routine chosen at load), and
//! per device /sys/kernel/debug/oxe/<dev>/gids (the port's GID table as the
//! connection manager looks it up) and <dev>/mr-<key index>, one file per MR,
//! showing its keys, rights and page-by-page translation.
//!
//! Built on the kernel crate's debugfs: a file owns what it shows (an MR
//! file holds a reference to its MR), a directory lives while it has files,
//! and removing a file waits for its readers. Without debugfs oxe works the
//! same, with nothing to show.

use crate::bindings as b;
use core::fmt::Write;
use core::ptr::NonNull;
use kernel::debugfs::{Dir, File, Writer};
use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::Arc;

/// What an object shows in its debugfs file.
pub(crate) trait Describe: Send + Sync + 'static {
    fn describe(&self, w: &mut dyn Write) -> core::fmt::Result;
}

/// The contents of an object's file: the object, kept alive by the file.
pub(crate) struct Shown<T: Describe>(Arc<T>);

impl<T: Describe> Writer for Shown<T> {
    fn write(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.describe(f)
    }
}

/// A file showing an object of type `T`, removed when dropped.
pub(crate) type ObjectFile<T> = Pin<KBox<File<Shown<T>>>>;

/// The `icrc` file's contents.
struct Icrc;

impl Writer for Icrc {
    fn write(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        super::crc::describe(f)
    }
}

/// The root directory and its `icrc` file, for the module's life.
struct Root {
    dir: Dir,
    _icrc: Option<Pin<KBox<File<Icrc>>>>,
}

kernel::sync::global_lock! {
    // SAFETY: initialized in `init_root`, from the module initializer, before
    // any device exists.
    unsafe(uninit) static ROOT: Mutex<Option<Root>> = None;
}

/// Creates /sys/kernel/debug/oxe (module init).
pub(crate) fn init_root() {
    // SAFETY: called once, from module init, before any other use.
    unsafe { ROOT.init() };
    let dir = Dir::new(c"oxe");
    let icrc = KBox::pin_init(dir.read_only_file(c"icrc", Icrc), GFP_KERNEL).ok();
    *ROOT.lock() = Some(Root { dir, _icrc: icrc });
}

/// Removes the root (module exit): the directory goes once every device's
/// directory has gone, which by then it has.
pub(crate) fn remove_root() {
    drop(ROOT.lock().take());
}

/// A device's directory under the root.
pub(crate) fn device_dir(name: &CStr) -> Option<Dir> {
    ROOT.lock().as_ref().map(|root| root.dir.subdir(name))
}

/// The file `<kind>-<index>` in `dir` (`mr-3`), showing `obj`.
pub(crate) fn object_file<T: Describe>(
    dir: &Dir,
    kind: &str,
    index: u32,
    obj: Arc<T>,
) -> Option<ObjectFile<T>> {
    let name = CString::try_from_fmt(fmt!("{kind}-{index}")).ok()?;
    KBox::pin_init(dir.read_only_file(&name, Shown(obj)), GFP_KERNEL).ok()
}

/// The `gids` file's contents: the device's port 1.
///
/// # Invariants
///
/// `self.0` is a registered ib_device that outlives the file (the file is
/// removed, waiting for readers, before the device is freed).
pub(crate) struct Gids(NonNull<b::ib_device>);

// SAFETY: only passed to ib_core's GID table accessors, which lock for themselves.
unsafe impl Send for Gids {}
// SAFETY: as above.
unsafe impl Sync for Gids {}

impl Writer for Gids {
    fn write(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut line = [0u8; 160];
        // Index -1 is the header line; then the first 16 entries, where the
        // addresses a test network uses are.
        for i in -1..16 {
            // SAFETY: a live device (type invariant); `line` is writable for its length.
            let n = unsafe {
                b::oxe_shim_gid_line(self.0.as_ptr(), i, line.as_mut_ptr().cast(), line.len())
            };
            let text = usize::try_from(n).ok().and_then(|n| line.get(..n));
            if let Some(s) = text.and_then(|t| core::str::from_utf8(t).ok()) {
                f.write_str(s)?;
            }
        }
        Ok(())
    }
}

/// The device's `gids` file.
pub(crate) type GidsFile = Pin<KBox<File<Gids>>>;

/// The `gids` file in `dir` for `ib`.
///
/// # Safety
///
/// `ib` is a registered device that outlives the returned file.
pub(super) unsafe fn gids_file(dir: &Dir, ib: NonNull<b::ib_device>) -> Option<GidsFile> {
    // INVARIANT: caller contract.
    KBox::pin_init(dir.read_only_file(c"gids", Gids(ib)), GFP_KERNEL).ok()
}
