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

/// The `sockets` file's contents: the namespaces whose port 4791 oxe holds.
struct Sockets;

impl Writer for Sockets {
    fn write(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        super::udp::describe(f)
    }
}

/// The root directory and its `icrc` and `sockets` files, for the module's life.
struct Root {
    dir: Dir,
    _icrc: Option<Pin<KBox<File<Icrc>>>>,
    _sockets: Option<Pin<KBox<File<Sockets>>>>,
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
    let sockets = KBox::pin_init(dir.read_only_file(c"sockets", Sockets), GFP_KERNEL).ok();
    *ROOT.lock() = Some(Root {
        dir,
        _icrc: icrc,
        _sockets: sockets,
    });
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
        const PORT: u32 = 1;
        let ib = self.0.as_ptr();
        // SAFETY: a live, registered device (type invariant), whose port
        // data ib_core allocated for ports 0..=1.
        let caps = unsafe {
            (*(*ib).port_data.add(PORT as usize))
                .immutable
                .core_cap_flags
        };
        // SAFETY: as above; `init_net` is static.
        let netns_ok = unsafe { b::rdma_dev_access_netns(ib, core::ptr::addr_of!(b::init_net)) };
        let roce = b::RDMA_CORE_CAP_PROT_ROCE | b::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP;
        writeln!(
            f,
            "core_cap_flags {caps:#x} ib_cm {} roce {} netns_ok {}",
            u32::from(caps & b::RDMA_CORE_CAP_IB_CM != 0),
            u32::from(caps & roce != 0),
            u32::from(netns_ok),
        )?;
        // The first 16 entries, where the addresses a test network uses are.
        for i in 0..16 {
            // SAFETY: as above; an ERR_PTR for an empty entry.
            let attr = unsafe { b::rdma_get_gid_attr(ib, PORT, i) }.cast_mut();
            let Ok(attr) = super::error::from_err_ptr(attr) else {
                continue;
            };
            // SAFETY: a GID attribute we hold a reference to, until the put.
            let (gid, gid_type) = unsafe {
                (
                    core::ptr::addr_of!((*attr).gid).cast::<[u8; 16]>().read(),
                    (*attr).gid_type,
                )
            };
            let ndev = {
                let _rcu = kernel::sync::rcu::read_lock();
                // SAFETY: the entry's netdev, an RCU pointer read under
                // `_rcu`, and held before leaving it.
                unsafe {
                    let nd = core::ptr::addr_of!((*attr).ndev).read_volatile();
                    super::netdev::NetDev::hold(nd)
                }
            };
            let nd = ndev.as_ref().map_or(core::ptr::null_mut(), |n| n.as_ptr());
            // How the connection manager finds an address: by GID, type and
            // netdev. A missing lookup is why an address does not resolve.
            // SAFETY: as above; `gid` is ours; an ERR_PTR when not found.
            let found = unsafe {
                let g = core::ptr::addr_of!((*attr).gid);
                b::rdma_find_gid_by_port(ib, g, gid_type, PORT, nd)
            };
            let found = super::error::from_err_ptr(found.cast_mut())
                .ok()
                .filter(|p| !p.is_null());
            write!(f, "{i:2} ")?;
            for (k, pair) in gid.chunks(2).enumerate() {
                let sep = if k == 0 { "" } else { ":" };
                write!(f, "{sep}{:02x}{:02x}", pair[0], pair[1])?;
            }
            writeln!(
                f,
                " type {gid_type} ndev {} lookup {}",
                ndev.as_ref().map_or("-", |n| n.name()),
                if found.is_some() { "found" } else { "missing" }
            )?;
            // SAFETY: references taken above, each put once.
            unsafe {
                if let Some(found) = found {
                    b::rdma_put_gid_attr(found);
                }
                b::rdma_put_gid_attr(attr);
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
