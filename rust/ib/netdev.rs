// SPDX-License-Identifier: GPL-2.0

//! The net_device under an oxe device, and the netdev event notifier.

use crate::bindings as b;
use core::ptr::NonNull;
use kernel::prelude::*;

/// A counted reference to a net_device.
///
/// # Invariants
///
/// `self.0` points to a net_device on which this handle holds a `dev_hold`
/// reference, released on drop; the device cannot be freed while it exists.
pub(crate) struct NetDev(NonNull<b::net_device>);

// SAFETY: a held net_device may be used from any thread; its fields we read
// are read with the same (lack of) locking the rest of the stack uses.
unsafe impl Send for NetDev {}
// SAFETY: as above; `&NetDev` only gives read access.
unsafe impl Sync for NetDev {}

impl NetDev {
    /// Takes a reference on `ndev`.
    ///
    /// # Safety
    ///
    /// `ndev` must point to a live net_device for the duration of the call.
    pub(super) unsafe fn hold(ndev: *mut b::net_device) -> Option<Self> {
        let p = NonNull::new(ndev)?;
        // SAFETY: the caller guarantees `ndev` is live.
        unsafe { b::oxe_shim_dev_hold(p.as_ptr()) };
        // INVARIANT: we just took the reference.
        Some(NetDev(p))
    }

    pub(super) fn as_ptr(&self) -> *mut b::net_device {
        self.0.as_ptr()
    }

    /// Whether the netdev is administratively up and has carrier: the port's ACTIVE.
    pub(crate) fn is_up(&self) -> bool {
        // SAFETY: the reference keeps the device alive (type invariant).
        unsafe {
            b::oxe_shim_netif_running(self.as_ptr()) && b::oxe_shim_netif_carrier_ok(self.as_ptr())
        }
    }

    /// Whether its hardware addresses are Ethernet's (6 bytes); a tun
    /// device has none.
    pub(crate) fn is_ethernet(&self) -> bool {
        // SAFETY: the held netdev is alive (type invariant); its address
        // length is set when it registers and not changed after.
        unsafe { b::oxe_shim_netdev_addr_len(self.as_ptr()) == 6 }
    }

    /// The netdev's MTU in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: the reference keeps the device alive (type invariant).
        unsafe { b::oxe_shim_netdev_mtu(self.as_ptr()) }
    }

    /// An EUI-64 built from the MAC, for node/system GUIDs (in network
    /// byte order, as ib_core keeps GUIDs). A netdev without one (tun) gets
    /// a random locally administered MAC's.
    pub(crate) fn eui64(&self) -> u64 {
        let mut mac = [0u8; 6];
        if self.is_ethernet() {
            // SAFETY: the held netdev is alive (type invariant), and its
            // address is 6 bytes long.
            let addr = unsafe { b::oxe_shim_netdev_addr(self.as_ptr()) };
            // SAFETY: as above; `mac` is 6 writable bytes of our own.
            unsafe { core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), 6) };
        } else {
            // SAFETY: `mac` is 6 writable bytes.
            unsafe { b::get_random_bytes(mac.as_mut_ptr().cast(), 6) };
            mac[0] = (mac[0] & 0xfe) | 0x02;
        }
        u64::from_ne_bytes(crate::oxe_core::gid::eui64_from_mac(mac))
    }

    /// The netdev's name, for a developer's eyes; `"?"` if not UTF-8.
    pub(crate) fn name(&self) -> &str {
        // SAFETY: the held netdev is alive (type invariant) and its name is
        // a NUL-terminated array inside it. (A rename races with the read,
        // as `%s` of `dev->name` does in C.)
        let name =
            unsafe { kernel::str::CStr::from_char_ptr(b::oxe_shim_netdev_name(self.as_ptr())) };
        name.to_str().unwrap_or("?")
    }
}

impl Clone for NetDev {
    /// Another reference to the same net_device.
    fn clone(&self) -> Self {
        // SAFETY: our reference keeps the device alive (type invariant).
        unsafe { b::oxe_shim_dev_hold(self.as_ptr()) };
        // INVARIANT: we just took the reference.
        NetDev(self.0)
    }
}

impl Drop for NetDev {
    fn drop(&mut self) {
        // SAFETY: balances the dev_hold taken in `hold` or `clone` (type invariant).
        unsafe { b::oxe_shim_dev_put(self.as_ptr()) };
    }
}

/// A multicast group's link-layer address in a netdev's receive filter,
/// for as long as this lives: the IP multicast MAC of the group's GID, so
/// that a NIC which filters multicast passes the group's packets up. The
/// filter counts references, so entries shared with others (the IP stack's
/// own group memberships) stay until the last user goes.
///
/// # Invariants
///
/// `dev_mc_add` succeeded for `mac` on `ndev`; `drop` undoes it.
pub(crate) struct McFilter {
    ndev: NetDev,
    /// `None`: the netdev has no Ethernet addresses, and no filter to set.
    mac: Option<[u8; 6]>,
}

impl McFilter {
    /// Adds the address of multicast group `gid` to `ndev`'s filter.
    /// Process context (not under a spinlock: it changes the netdev's rx mode).
    pub(crate) fn add(ndev: &NetDev, gid: &[u8; 16]) -> Result<Self> {
        let mac = ndev
            .is_ethernet()
            .then(|| crate::oxe_core::gid::multicast_mac(gid));
        if let Some(mac) = &mac {
            // SAFETY: the held netdev is alive (NetDev invariant); `mac` is
            // the 6 bytes of an Ethernet address, as its addr_len says.
            let ret = unsafe { b::dev_mc_add(ndev.as_ptr(), mac.as_ptr()) };
            if ret != 0 {
                return Err(Error::from_errno(ret));
            }
        }
        // INVARIANT: added just above, if at all.
        Ok(McFilter {
            ndev: ndev.clone(),
            mac,
        })
    }
}

impl Drop for McFilter {
    fn drop(&mut self) {
        if let Some(mac) = &self.mac {
            // SAFETY: the held netdev is alive; balances the add (type invariant).
            unsafe { b::dev_mc_del(self.ndev.as_ptr(), mac.as_ptr()) };
        }
    }
}

/// What a netdev event means for an oxe device on it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NetEvent {
    /// The netdev is going away: the oxe device must go with it.
    Unregister,
    /// Up/down/carrier changed: the port state may have changed.
    LinkChange,
    /// The MTU changed.
    MtuChange,
}

/// A registered netdevice notifier that forwards events to the driver's
/// devices (`device::netdev_event`).
///
/// # Invariants
///
/// `nb` is registered with the netdev notifier chain for as long as this exists.
pub(crate) struct Notifier {
    nb: Pin<KBox<NotifierBlock>>,
}

#[repr(transparent)]
struct NotifierBlock(core::cell::UnsafeCell<b::notifier_block>);

// SAFETY: the notifier chain serializes use of the block; we never touch it after registration.
unsafe impl Send for NotifierBlock {}
// SAFETY: as above.
unsafe impl Sync for NotifierBlock {}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn notifier_call<D: super::driver::Driver>(
    _nb: *mut b::notifier_block,
    event: kernel::ffi::c_ulong,
    ptr: *mut kernel::ffi::c_void,
) -> kernel::ffi::c_int {
    let ev = match event as u32 {
        b::netdev_cmd_NETDEV_UNREGISTER => NetEvent::Unregister,
        b::netdev_cmd_NETDEV_UP | b::netdev_cmd_NETDEV_DOWN | b::netdev_cmd_NETDEV_CHANGE => {
            NetEvent::LinkChange
        }
        b::netdev_cmd_NETDEV_CHANGEMTU => NetEvent::MtuChange,
        _ => return b::NOTIFY_DONE as i32,
    };
    // SAFETY: for these events `ptr` is a netdev_notifier_info.
    let ndev = unsafe { b::oxe_shim_netdev_notifier_info_to_dev(ptr) };
    super::device::netdev_event::<D>(ndev, ev);
    b::NOTIFY_DONE as i32
}

impl Notifier {
    pub(crate) fn register<D: super::driver::Driver>() -> Result<Self> {
        let block = b::notifier_block {
            notifier_call: Some(notifier_call::<D>),
            ..Default::default()
        };
        let nb = KBox::pin(
            NotifierBlock(core::cell::UnsafeCell::new(block)),
            GFP_KERNEL,
        )?;
        // SAFETY: the block is pinned in a heap allocation that outlives the registration.
        let ret = unsafe { b::register_netdevice_notifier(nb.0.get()) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: registered above.
        Ok(Notifier { nb })
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        // SAFETY: registered for our lifetime (type invariant).
        unsafe { b::unregister_netdevice_notifier(self.nb.0.get()) };
    }
}
