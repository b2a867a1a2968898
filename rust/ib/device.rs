// SPDX-License-Identifier: GPL-2.0

//! The ib_device that ib_core allocates for each device of the driver, and its lifecycle:
//! register on `rdma link add`, unregister on link delete, netdev removal or rmmod.

use super::driver::Driver;
use super::netdev::{NetDev, NetEvent};
use super::udp::NetNs;
use crate::bindings as b;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use kernel::prelude::*;
use kernel::str::CStr;

/// The memory ib_core allocates for a device: ib_device first (ib_core
/// requires it at offset 0), then oxe's own state.
#[repr(C)]
struct DevObj<D> {
    ib: b::ib_device,
    /// `None` (all zero bytes, as ib_core hands the memory over) until
    /// registration starts, and again once `dealloc_driver` has dropped it.
    /// Pinned: work items of the driver's point into it.
    drv: Option<Pin<KBox<D>>>,
    /// The device's debugfs `gids` file, from registration to dealloc_driver
    /// (zero bytes: `None`).
    gids: Option<super::debugfs::GidsFile>,
}

/// A handle to an ib_device of driver `D`, as passed to callbacks.
///
/// # Invariants
///
/// `self.0` points to the `ib` field of a live `DevObj<D>`. Handles exist
/// only inside ib_core callbacks and registration, and in objects of the
/// device (which ib_core destroys before it frees the device).
pub(crate) struct IbDev<D>(NonNull<b::ib_device>, PhantomData<fn() -> D>);

impl<D> Clone for IbDev<D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D> Copy for IbDev<D> {}

// SAFETY: ib_device is shared by design; ib_core serializes what needs it.
unsafe impl<D> Send for IbDev<D> {}
// SAFETY: as above.
unsafe impl<D> Sync for IbDev<D> {}

impl<D: Driver> IbDev<D> {
    /// # Safety
    ///
    /// `p` must be a device of driver `D` (allocated by `register::<D>`)
    /// that stays allocated while the handle is used.
    pub(super) unsafe fn from_raw(p: *mut b::ib_device) -> Option<Self> {
        NonNull::new(p).map(|p| IbDev(p, PhantomData))
    }

    pub(super) fn as_ptr(self) -> *mut b::ib_device {
        self.0.as_ptr()
    }

    /// The driver's state of this device; `ENODEV` outside registration..dealloc.
    pub(crate) fn drv<'a>(self) -> Result<&'a D> {
        let obj = self.0.as_ptr().cast::<DevObj<D>>();
        // SAFETY: a live DevObj<D> (type invariant); `drv` only changes during
        // registration and dealloc_driver, when no other callback runs.
        unsafe { (*obj).drv.as_deref() }.ok_or(ENODEV)
    }
}

/// A reference to a device found by its netdev as RDMA_DRIVER_UNKNOWN, which
/// may be oxe's or another driver's (ib_core matches any driver there).
///
/// # Invariants
///
/// `self.0` is an ib_device we hold a reference to (`ib_device_try_get`).
pub(crate) struct DevRef(NonNull<b::ib_device>);

// SAFETY: a device reference may be dropped from any context.
unsafe impl Send for DevRef {}

impl DevRef {
    /// # Safety
    ///
    /// `p` is null or an ib_device whose reference passes to the result.
    pub(super) unsafe fn from_raw(p: *mut b::ib_device) -> Option<Self> {
        NonNull::new(p).map(DevRef)
    }

    /// The device on `ndev` (or, for a VLAN, on its real device).
    fn on(ndev: *mut b::net_device) -> Option<Self> {
        // SAFETY: callers pass a netdev that is alive for the call.
        unsafe { Self::from_raw(b::oxe_shim_ib_device_get_by_netdev(ndev)) }
    }

    /// The device, if this module owns it: another driver might also
    /// register as RDMA_DRIVER_UNKNOWN. A module has one driver type, so
    /// every device it owns is a `D`'s.
    fn ours<D: Driver>(&self) -> Option<IbDev<D>> {
        // SAFETY: we hold a reference (type invariant).
        let owner = unsafe { (*self.0.as_ptr()).ops.owner };
        core::ptr::eq(
            owner,
            <D::Module as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        )
        .then_some(IbDev(self.0, PhantomData))
    }
}

impl Drop for DevRef {
    fn drop(&mut self) {
        // SAFETY: balances the reference we hold (type invariant).
        unsafe { b::ib_device_put(self.0.as_ptr()) };
    }
}

/// Whether an oxe (or any RDMA_DRIVER_UNKNOWN) device already sits on `ndev`.
pub(crate) fn exists_on(ndev: &NetDev) -> bool {
    // SAFETY: the netdev is held (NetDev invariant); a reference, or null.
    unsafe {
        DevRef::from_raw(b::ib_device_get_by_netdev(
            ndev.as_ptr(),
            b::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        ))
    }
    .is_some()
}

/// Allocates, initializes and registers an ib_device named `name` for `drv`,
/// on its netdev.
pub(crate) fn register<D: Driver>(name: &CStr, drv: Pin<KBox<D>>) -> Result {
    let ndev: *const NetDev = drv.netdev();
    // SAFETY: `drv` (a heap allocation that does not move) is handed to the
    // ib_device below and freed only by dealloc_driver; `ndev` is used only up
    // to ib_register_device, before any path that could run dealloc_driver.
    let ndev = unsafe { &*ndev };
    let node_guid = drv.node_guid();
    // SAFETY: the size covers DevObj, whose first field is the ib_device; the
    // device is created in the netdev's namespace, which the held netdev keeps alive.
    let raw =
        unsafe { b::_ib_alloc_device(core::mem::size_of::<DevObj<D>>(), NetNs::of(ndev).as_ptr()) };
    let ib = NonNull::new(raw).ok_or(ENOMEM)?;
    let obj = ib.as_ptr().cast::<DevObj<D>>();
    // SAFETY: fresh zeroed memory of DevObj's size; `write` does not drop the
    // all-zero `None` it replaces.
    unsafe { ptr::addr_of_mut!((*obj).drv).write(Some(drv)) };

    // SAFETY: nobody else sees the device before ib_register_device.
    let dev = unsafe { &mut *ib.as_ptr() };
    dev.node_type = b::RDMA_NODE_IB_CA as u8;
    dev.phys_port_cnt = 1;
    dev.num_comp_vectors = 1;
    dev.local_dma_lkey = 0;
    dev.node_guid = node_guid;
    for (d, s) in dev.node_desc.iter_mut().zip(b"oxe\0") {
        *d = *s;
    }
    // The default command mask leaves out the two data-path commands a
    // provider with mapped rings still needs: POST_SEND (the doorbell) and
    // REQ_NOTIFY_CQ (arming, for completion channels).
    dev.uverbs_cmd_mask |= (1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
        | (1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
    let ops = super::ops::device_ops::<D>();
    // SAFETY: `ib_set_device_ops` copies the table; `ops` may die afterwards.
    unsafe { b::ib_set_device_ops(ib.as_ptr(), &ops) };

    // SAFETY: the netdev is held; ib_core takes its own reference for port 1.
    let mut ret = unsafe { b::ib_device_set_netdev(ib.as_ptr(), ndev.as_ptr(), 1) };
    if ret == 0 {
        // SAFETY: a fully initialized device; a null DMA device marks it as
        // virtual, so ib_umem never DMA-maps user pages for it.
        ret = unsafe { b::ib_register_device(ib.as_ptr(), name.as_char_ptr(), ptr::null_mut()) };
    }
    if ret == 0 {
        let dev = IbDev::<D>(ib, PhantomData);
        if let Some(dir) = dev.drv().ok().and_then(|drv| drv.debugfs()) {
            // SAFETY: registered; the file goes in dealloc_driver, before
            // ib_core frees the device.
            let gids = unsafe { super::debugfs::gids_file(dir, ib) };
            // SAFETY: no callback touches `gids`; `write` does not drop the zeroed `None`.
            unsafe { ptr::addr_of_mut!((*obj).gids).write(gids) };
        }
    }
    if ret != 0 {
        // SAFETY: registration failed, so the device is still ours to free;
        // ib_dealloc_device calls dealloc_driver, which drops `drv`.
        unsafe { b::ib_dealloc_device(ib.as_ptr()) };
        return Err(Error::from_errno(ret));
    }
    Ok(())
}

/// ops.dealloc_driver: the last callback; oxe's state goes here.
///
/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
pub(super) unsafe extern "C" fn dealloc_driver<D: Driver>(ib: *mut b::ib_device) {
    let obj = ib.cast::<DevObj<D>>();
    // SAFETY: ib_core calls this once, after every other callback has finished.
    drop(unsafe { (*obj).gids.take() });
    // SAFETY: as above.
    drop(unsafe { (*obj).drv.take() });
}

/// Unregisters every oxe device; returns once all are gone (also those whose
/// unregistration was queued by a netdev event). For module unload.
pub(crate) fn unregister_all() {
    // oxe is out of tree and has no driver id of its own, so it registers as
    // RDMA_DRIVER_UNKNOWN, which no in-tree driver uses.
    // SAFETY: plain call; it fences all queued unregistrations.
    unsafe { b::ib_unregister_driver(b::rdma_driver_id_RDMA_DRIVER_UNKNOWN) };
}

/// Finds the device on `ndev`, if any is ours, and lets the driver react to `ev`.
pub(super) fn netdev_event<D: Driver>(ndev: *mut b::net_device, ev: NetEvent) {
    // SAFETY: the notifier runs with a live `ndev`.
    let ib = unsafe { b::ib_device_get_by_netdev(ndev, b::rdma_driver_id_RDMA_DRIVER_UNKNOWN) };
    // SAFETY: ib_device_get_by_netdev returned a reference, or null.
    let Some(held) = (unsafe { DevRef::from_raw(ib) }) else {
        return;
    };
    let Some(dev) = held.ours::<D>() else {
        return;
    };
    match ev {
        NetEvent::Unregister => {
            // Queued: the notifier holds RTNL, which unregistration may need.
            // SAFETY: we hold a reference for the call.
            unsafe { b::ib_unregister_device_queued(dev.as_ptr()) };
        }
        NetEvent::LinkChange => {
            if let Ok(drv) = dev.drv() {
                let event = if drv.link_changed() {
                    b::ib_event_type_IB_EVENT_PORT_ACTIVE
                } else {
                    b::ib_event_type_IB_EVENT_PORT_ERR
                };
                dispatch_port_event(dev, event);
            }
        }
        _ => {}
    }
}

fn dispatch_port_event<D: Driver>(dev: IbDev<D>, event: b::ib_event_type) {
    let mut ev = super::objects::event(event, dev.as_ptr());
    // SAFETY: writes the port, the element of a port event; a live device
    // (IbDev invariant), and ib_core copies the event.
    unsafe {
        *ev.element.port_num.as_mut() = 1;
        b::ib_dispatch_event(&ev);
    }
}

/// Hands a received packet to the device on its netdev, if it is ours,
/// which processes it right away (softirq): one packet (`segments` 0), or a
/// GSO packet of `segments` packets taken whole.
pub(super) fn deliver<D: Driver>(pkt: super::pkt::RxPacket, segments: u32) {
    // (The skb's device is alive while the skb is being received.)
    let Some(held) = DevRef::on(pkt.netdev()) else {
        return;
    };
    if let Some(drv) = held.ours::<D>().and_then(|dev| dev.drv().ok()) {
        if segments == 0 {
            drv.receive(pkt);
        } else {
            drv.receive_batch(pkt, segments);
        }
    }
}

/// Queues a packet the sender routed to an address of this host for the
/// device of ours that owns that address, which, with two such devices in
/// one network namespace, is not the sender. rdma_rxe hands every such
/// packet to the sending device. With no device of ours there, the packet
/// is dropped, as on a wire with nobody listening.
pub(crate) fn loop_back<D: Driver>(pkt: super::pkt::TxPacket) {
    let (to, rx) = pkt.into_rx();
    if let Some(drv) = to
        .as_ref()
        .and_then(DevRef::ours::<D>)
        .and_then(|dev| dev.drv().ok())
    {
        drv.loopback(rx);
    }
}
