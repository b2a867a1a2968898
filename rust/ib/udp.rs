// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 UDP port 4791: one socket pair per network namespace, shared by
//! every oxe device whose netdev lives there and closed with the last one,
//! or with the namespace. (A port can be bound once per namespace, so
//! per-device sockets would collide as soon as two devices share a
//! namespace.)
//!
//! A kernel socket holds no counted reference to its namespace, only one
//! that keeps its memory: a namespace goes while its sockets live, and a
//! socket released after the namespace's subsystems are dismantled writes
//! into their freed per-CPU statistics. An oxe device can outlive its
//! netdev's namespace: a NIC the namespace's deletion hands back to the
//! initial one leaves the device's unregistration queued, behind whatever
//! holds the device (a fault that waits on a slow file). So the namespace's
//! exit ([`NamespaceWatch`]) closes its sockets itself, before the
//! subsystems they use go; the devices that shared them receive nothing
//! more, and go when their unregistration runs.
//!
//! The sockets are plain UDP sockets that take GSO packets whole, not
//! tunnel sockets. UDP splits a GSO packet into one skb per datagram, with
//! a copy of each, before a tunnel socket's callback sees any (unless the
//! packet is marked as a tunnel's, which would mislead NICs that offload
//! tunnels); packets oxe sends to a peer on this host (another namespace,
//! a veth) are such batches, up to 27 to an skb (`pkt.rs`). Queued whole,
//! a batch reaches oxe as one skb, and each packet of it becomes a clone
//! viewing its own bytes ([`RxPacket::segment`]): no copy, and no skb
//! allocated for its data.
//!
//! UDP calls the socket's `data_ready` after queueing, on the CPU that
//! received the packet, which then takes the packet from the queue and
//! processes it, as a tunnel's callback would have. Packets of one QP must
//! be processed in the order they arrived, so no two CPUs may take from one
//! queue: with a single socket, each would find the other's packets there.
//! So port 4791 is a group of sockets, one per CPU (`SO_REUSEPORT`, each
//! socket claiming its CPU as `SO_INCOMING_CPU` does), and UDP queues a
//! packet on the socket of the CPU that received it. One socket with one
//! CPU draining it at a time, the others leaving their packets to that
//! drain, would put a small message's whole round trip on one CPU while
//! the other waits, which lengthens its latency by half. The drain still
//! admits one CPU at a time ([`SockRx::drain`]): a multicast packet reaches
//! every socket of the group, and the first one's takes it from any CPU.

use super::lock::BhOff;
use super::netdev::NetDev;
use super::pkt::RxPacket;
use super::work::{self, Work, WorkFn};
use crate::bindings as b;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::SetOnce;

/// A network namespace, by identity. Only compared, never dereferenced by
/// Rust, and passed to C only under a [`NetRef`] to it. The address of a
/// namespace that has gone may be a new namespace's: an entry of the
/// registry is removed at its namespace's exit, so none is ever found by a
/// namespace it did not open.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetNs(*mut b::net);

// SAFETY: an identity; C uses it only under a counted reference (`NetRef`).
unsafe impl Send for NetNs {}
// SAFETY: as above.
unsafe impl Sync for NetNs {}

/// A counted reference to a live namespace: its exit cannot begin while
/// this is held, so sockets opened in it are closed by that exit.
///
/// # Invariants
///
/// `self.0` names a namespace this holds a reference on (`maybe_get_net`).
struct NetRef(NetNs);

impl NetRef {
    /// The namespace `ndev` is in now; ENODEV if it is being dismantled.
    fn of(ndev: &NetDev) -> Result<Self> {
        // SAFETY: the held netdev is alive (NetDev invariant).
        let net = unsafe { b::oxe_shim_dev_net_get(ndev.as_ptr()) };
        if net.is_null() {
            return Err(ENODEV);
        }
        // INVARIANT: a reference taken just above.
        Ok(NetRef(NetNs(net)))
    }

    /// The namespace's inode number (`/proc/PID/ns/net`), for humans.
    fn inum(&self) -> u32 {
        // SAFETY: a live namespace (type invariant).
        unsafe { (*self.0 .0).ns.inum }
    }
}

impl Drop for NetRef {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `of` (type invariant), let go once.
        unsafe { b::oxe_shim_put_net(self.0 .0) };
    }
}

impl NetNs {
    /// The namespace `ndev` is in now (for ib_core, which takes its own
    /// reference where it keeps it).
    pub(crate) fn of(ndev: &NetDev) -> Self {
        // SAFETY: the held netdev is alive (NetDev invariant).
        NetNs(unsafe { b::oxe_shim_dev_net(ndev.as_ptr()) })
    }

    pub(super) fn as_ptr(self) -> *mut b::net {
        self.0
    }
}

/// A UDP socket bound to port 4791, and its receive.
///
/// # Invariants
///
/// `sock` is a kernel socket created by `udp_sock_create*` and not yet
/// released, whose receive is attached to `rx` (its `sk` is `sock`'s).
pub(crate) struct UdpSocket {
    sock: NonNull<b::socket>,
    rx: Pin<KBox<SockRx>>,
}

// SAFETY: kernel sockets are internally locked; we only release it.
unsafe impl Send for UdpSocket {}
// SAFETY: as above.
unsafe impl Sync for UdpSocket {}

/// Packets taken from the socket per turn of a drain, before it leaves the
/// rest to its work item: a CPU receiving for another keeps at it for a
/// bounded time.
const SOCKET_BUDGET: u32 = 64;

/// A RoCE socket's receive: which CPU drains it, and the work item that
/// takes over from a drain out of budget.
///
/// # Invariants
///
/// `sk` is the `struct sock` of a live socket whose receive is attached
/// to `self`, until [`UdpSocket`]'s drop detaches it and disables `work`.
pub(crate) struct SockRx {
    sk: NonNull<b::sock>,
    /// The group's first socket, the one that takes packets every socket
    /// of the group is given (multicast, broadcast); the others drop them.
    first: bool,
    draining: AtomicBool,
    /// The device's receive: a packet, or a GSO batch of that many.
    deliver: fn(RxPacket, u32),
    drain_work: SetOnce<Work>,
    /// Pinned for good: the socket and the work item point at it.
    _pin: core::marker::PhantomPinned,
}

// SAFETY: `sk` is only passed to the socket API, which locks internally;
// the rest is atomics, a plain function and a work handle.
unsafe impl Send for SockRx {}
// SAFETY: as above.
unsafe impl Sync for SockRx {}

work::owns_work!(SockRx { work: drain_work });

impl WorkFn for SockRx {
    /// The drain a turn out of budget left: process context, with
    /// softirqs held off as the receive path expects.
    fn run(&self) {
        let _bh = BhOff::new();
        self.drain();
    }
}

impl SockRx {
    /// Takes the queued packets, unless another CPU is already at it (that
    /// drain then takes this CPU's too). Softirqs off.
    fn drain(&self) {
        let sk = self.sk.as_ptr();
        loop {
            if self.draining.swap(true, Ordering::SeqCst) {
                return;
            }
            let mut taken = 0;
            // (Looked at without its locks first: most calls find one
            // packet, and a second try at the locked queue, to find it
            // empty, cost more than the look.)
            // SAFETY: a live socket (type invariant).
            while taken < SOCKET_BUDGET && unsafe { b::oxe_shim_udp_rx_pending(sk) } {
                let mut dropped = false;
                // SAFETY: a live socket (type invariant), softirqs off.
                let skb = unsafe { b::oxe_shim_udp_rx_next(sk, &mut dropped) };
                // A packet dropped for its checksum counts against the
                // budget too: a flood of them must not hold the CPU.
                taken += 1;
                // SAFETY: the queue hands over an skb of ours, headers set.
                match unsafe { RxPacket::arrived(skb) } {
                    Some(pkt) => self.take(pkt),
                    None if dropped => {}
                    None => break,
                }
            }
            self.draining.store(false, Ordering::SeqCst);
            // The look below must not pass the release above (a full
            // barrier, as the producer's swap is): only the look after the
            // release needs one, not each look in the loop.
            core::sync::atomic::fence(Ordering::SeqCst);
            if taken == SOCKET_BUDGET {
                if let Some(w) = self.drain_work.as_ref() {
                    w.queue();
                }
                return;
            }
            // A packet queued after the last look, whose CPU found the
            // drain still held, is this drain's to take.
            // SAFETY: a live socket (type invariant).
            if !unsafe { b::oxe_shim_udp_rx_pending(sk) } {
                return;
            }
        }
    }

    /// Hands one packet on, or a GSO batch (which the device takes apart,
    /// or queues whole for another CPU).
    fn take(&self, mut pkt: RxPacket) {
        if !self.first && !pkt.to_host() {
            return;
        }
        // (A batch oxe does not take apart is dropped: `segments` says.)
        if let Ok(n) = pkt.segments() {
            (self.deliver)(pkt, n);
        }
    }
}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C
/// contract (`sk_data_ready`).
unsafe extern "C" fn data_ready(sk: *mut b::sock) {
    // UDP receives with softirqs off (in the receive softirq, or in a
    // caller of netif_receive_skb that holds them off), as the drain needs.
    // SAFETY: a socket UDP calls back for, which is one of ours.
    let rx = unsafe { b::oxe_shim_udp_rx_state(sk) }.cast::<SockRx>();
    // SAFETY: the state attached to the socket, alive until the socket is
    // detached, which waits for every call that might see it (softirqs
    // off: an RCU reader) to return.
    if let Some(rx) = unsafe { rx.as_ref() } {
        rx.drain();
    }
}

impl UdpSocket {
    /// Opens port 4791 in `ns` (IPv4, or IPv6-only when `ipv6`) as CPU
    /// `cpu`'s socket of the group, for driver `D`'s devices.
    fn open<D: super::driver::Driver>(ns: &NetRef, ipv6: bool, cpu: u32) -> Result<Self> {
        let mut sock: *mut b::socket = core::ptr::null_mut();
        let cpu_c = i32::try_from(cpu).map_err(|_| EINVAL)?;
        // SAFETY: `ns` is alive (held: NetRef invariant); `sock` is a valid
        // out pointer.
        let ret = unsafe { b::oxe_shim_udp_rx_open(ns.0 .0, ipv6, cpu_c, &mut sock) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        let sock = NonNull::new(sock).ok_or(ENOMEM)?;
        // SAFETY: a socket created above, with its `struct sock`.
        let sk = NonNull::new(unsafe { (*sock.as_ptr()).sk }).ok_or(ENOMEM);
        let rx = sk.and_then(|sk| {
            KBox::pin(
                SockRx {
                    sk,
                    first: cpu == 0,
                    draining: AtomicBool::new(false),
                    deliver: super::device::deliver::<D>,
                    drain_work: SetOnce::new(),
                    _pin: core::marker::PhantomPinned,
                },
                GFP_KERNEL,
            )
            .map_err(Error::from)
        });
        let rx = match rx.and_then(|rx| work::start_work(&rx.as_ref()).map(|()| rx)) {
            Ok(rx) => {
                // A drain out of budget continues on the socket's own CPU.
                if let Some(w) = rx.drain_work.as_ref() {
                    w.home_on(cpu_c);
                }
                rx
            }
            Err(e) => {
                // SAFETY: created above, nothing attached, released once.
                unsafe { b::udp_tunnel_sock_release((*sock.as_ptr()).sk) };
                return Err(e);
            }
        };
        // SAFETY: a socket created above; the state is pinned and outlives
        // the attachment (the drop below detaches first), and the callback
        // is a function of this module, which outlives its sockets.
        unsafe {
            let state: *const SockRx = &*rx;
            b::oxe_shim_udp_rx_attach(
                (*sock.as_ptr()).sk,
                Some(data_ready),
                state.cast_mut().cast(),
            );
        }
        // Packets queued between the bind and the attachment found the
        // kernel's callback, which takes nothing: taken now.
        {
            let _bh = BhOff::new();
            rx.drain();
        }
        // INVARIANT: created and attached just above.
        Ok(UdpSocket { sock, rx })
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        // SAFETY: a live socket (type invariant). Detached first, so that no
        // receive still runs on `rx` or queues its work, then the work is
        // disabled (it takes from the socket), then the socket goes,
        // exactly once.
        unsafe {
            let sk = (*self.sock.as_ptr()).sk;
            b::oxe_shim_udp_rx_detach(sk);
            if let Some(w) = self.rx.drain_work.as_ref() {
                w.disable();
            }
            b::udp_tunnel_sock_release(sk);
        }
    }
}

struct NsEntry {
    ns: NetNs,
    /// Tells this entry from one of a later namespace at the same address
    /// (a device whose namespace went finds its entry gone).
    serial: u64,
    /// The namespace's inode number, for the debugfs view.
    inum: u32,
    users: usize,
    _v4: KVec<UdpSocket>,
    /// Empty when the kernel has no IPv6: RoCE then works over IPv4 only.
    _v6: KVec<UdpSocket>,
}

/// The group of sockets for port 4791 in `ns`, one per possible CPU (so
/// that a CPU coming online later finds its own).
fn open_group<D: super::driver::Driver>(ns: &NetRef, ipv6: bool) -> Result<KVec<UdpSocket>> {
    // SAFETY: a variable the kernel sets at boot.
    let cpus = unsafe { b::nr_cpu_ids };
    let mut group = KVec::with_capacity(cpus as usize, GFP_KERNEL)?;
    for cpu in 0..cpus {
        group.push(UdpSocket::open::<D>(ns, ipv6, cpu)?, GFP_KERNEL)?;
    }
    Ok(group)
}

/// The registry: the namespaces whose port 4791 oxe holds, and the next
/// entry's serial.
struct Registry {
    entries: KVec<NsEntry>,
    next_serial: u64,
}

kernel::sync::global_lock! {
    // SAFETY: initialized in `init`, from the module initializer, before any device exists.
    unsafe(uninit) static SOCKETS: Mutex<Registry> = Registry {
        entries: KVec::new(),
        next_serial: 0,
    };
}

kernel::sync::global_lock! {
    // SAFETY: initialized in `init`, from the module initializer, before any device exists.
    //
    // Serializes `PortSockets::get`, which opens sockets holding it but not
    // `SOCKETS`: opening an IPv6 socket may load the IPv6 module, whose
    // pernet registration waits for a namespace's teardown in progress,
    // which may be waiting for `SOCKETS` in `namespace_exit`.
    unsafe(uninit) static OPENING: Mutex<()> = ();
}

/// Sets up the registry; called once from module init.
pub(crate) fn init() {
    // SAFETY: called exactly once, before any other use.
    unsafe { SOCKETS.init() };
    // SAFETY: as above.
    unsafe { OPENING.init() };
}

/// Frees the registry's memory; called from module exit, once every device
/// (and so every socket) is gone. A static is never dropped: without this,
/// the list's buffer outlived the module (kmemleak found it).
pub(crate) fn exit() {
    let old = core::mem::take(&mut SOCKETS.lock().entries);
    drop(old);
}

/// The registry for debugfs: one line per namespace whose port 4791 oxe
/// holds.
pub(crate) fn describe(w: &mut impl core::fmt::Write) -> core::fmt::Result {
    for e in SOCKETS.lock().entries.iter() {
        writeln!(
            w,
            "net:[{}] devices {} ipv4 {} ipv6 {}",
            e.inum,
            e.users,
            e._v4.len(),
            e._v6.len()
        )?;
    }
    Ok(())
}

/// Closes the sockets of namespace `net`, which is being dismantled.
///
/// # Safety
///
/// Called only by the kernel, as a `pernet_operations` exit.
unsafe extern "C" fn namespace_exit(net: *mut b::net) {
    let ns = NetNs(net);
    let mut reg = SOCKETS.lock();
    let mut i = 0;
    while i < reg.entries.len() {
        if reg.entries.get(i).is_some_and(|e| e.ns == ns) {
            // Dropping an entry closes its sockets, waiting for their
            // drains, as the last device's drop does.
            drop(reg.entries.remove(i));
        } else {
            i += 1;
        }
    }
}

/// A registered `pernet_operations` whose exit closes a namespace's RoCE
/// sockets (module doc).
///
/// # Invariants
///
/// `ops` is registered as pernet device operations for as long as this exists.
pub(crate) struct NamespaceWatch {
    ops: Pin<KBox<PernetOps>>,
}

#[repr(transparent)]
struct PernetOps(core::cell::UnsafeCell<b::pernet_operations>);

// SAFETY: the kernel serializes use of the operations (pernet_ops_rwsem);
// Rust never touches them after registration.
unsafe impl Send for PernetOps {}
// SAFETY: as above.
unsafe impl Sync for PernetOps {}

impl NamespaceWatch {
    pub(crate) fn register() -> Result<Self> {
        let ops = b::pernet_operations {
            exit: Some(namespace_exit),
            ..Default::default()
        };
        let ops = KBox::pin(PernetOps(core::cell::UnsafeCell::new(ops)), GFP_KERNEL)?;
        // A device's operations: their exits all run before any
        // subsystem's (IPv6's, UDP's) in a namespace's teardown, whatever
        // order the modules were loaded in.
        // SAFETY: pinned in a heap allocation that outlives the
        // registration (unregistered in `drop`).
        let ret = unsafe { b::register_pernet_device(ops.0.get()) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: registered above.
        Ok(NamespaceWatch { ops })
    }
}

impl Drop for NamespaceWatch {
    fn drop(&mut self) {
        // SAFETY: registered for our lifetime (type invariant). Runs the
        // exit for every namespace, which by module exit has no sockets.
        unsafe { b::unregister_pernet_device(self.ops.0.get()) };
    }
}

/// One device's share of its namespace's RoCE sockets.
pub(crate) struct PortSockets {
    ns: NetNs,
    serial: u64,
}

impl PortSockets {
    /// Opens (or shares) port 4791 in the namespace of `ndev`, for driver
    /// `D`'s devices (a module has one driver).
    pub(crate) fn get<D: super::driver::Driver>(ndev: &NetDev) -> Result<Self> {
        // Held until the entry is in the registry: the namespace's exit,
        // which closes the entry, cannot run before.
        let held = NetRef::of(ndev)?;
        let ns = held.0;
        let _opening = OPENING.lock();
        {
            let mut reg = SOCKETS.lock();
            if let Some(e) = reg.entries.iter_mut().find(|e| e.ns == ns) {
                e.users += 1;
                return Ok(PortSockets {
                    ns,
                    serial: e.serial,
                });
            }
        }
        // Only `get` adds entries, and `_opening` keeps any other out:
        // none for `ns` appears meanwhile.
        let v4 = open_group::<D>(&held, false)?;
        let v6 = match open_group::<D>(&held, true) {
            Ok(group) => group,
            // No IPv6 in this kernel (built without it, or booted with
            // ipv6.disable=1): RoCE runs over IPv4 alone.
            Err(e) if e == EAFNOSUPPORT => KVec::new(),
            // Anything else, the port taken by another socket above all,
            // refuses the device: a user who bound [::]:4791 first would
            // otherwise receive every RoCE v2 packet sent to the host over
            // IPv6, payloads and rkeys included.
            Err(e) => return Err(e),
        };
        let inum = held.inum();
        let mut reg = SOCKETS.lock();
        let serial = reg.next_serial;
        reg.next_serial += 1;
        reg.entries.push(
            NsEntry {
                ns,
                serial,
                inum,
                users: 1,
                _v4: v4,
                _v6: v6,
            },
            GFP_KERNEL,
        )?;
        Ok(PortSockets { ns, serial })
    }
}

impl Drop for PortSockets {
    fn drop(&mut self) {
        let mut reg = SOCKETS.lock();
        // None once the namespace's exit has closed the sockets.
        let found = reg
            .entries
            .iter()
            .position(|e| e.ns == self.ns && e.serial == self.serial);
        if let Some(i) = found {
            let last = reg.entries.get_mut(i).map(|e| {
                e.users -= 1;
                e.users == 0
            });
            if last == Some(true) {
                // Dropping the entry closes every socket.
                drop(reg.entries.remove(i));
            }
        }
    }
}
