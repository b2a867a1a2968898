// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 UDP port 4791: one socket pair per network namespace, shared by
//! every oxe device whose netdev lives there and closed with the last one.
//! (A port can be bound once per namespace, so per-device sockets would
//! collide as soon as two devices share a namespace.)

use super::netdev::NetDev;
use crate::bindings as b;
use core::ptr::NonNull;
use kernel::prelude::*;

/// A network namespace, by identity. Only compared, never dereferenced by Rust.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetNs(*mut b::net);

// SAFETY: used only as an identity and passed back to C while a netdev of that
// namespace is held, which keeps the namespace alive.
unsafe impl Send for NetNs {}
// SAFETY: as above.
unsafe impl Sync for NetNs {}

impl NetNs {
    /// The namespace `ndev` lives in.
    pub(crate) fn of(ndev: &NetDev) -> Self {
        // SAFETY: the held netdev is alive (NetDev invariant).
        NetNs(unsafe { b::oxe_shim_dev_net(ndev.as_ptr()) })
    }

    pub(super) fn as_ptr(self) -> *mut b::net {
        self.0
    }
}

/// A UDP tunnel socket bound to port 4791.
///
/// # Invariants
///
/// `self.0` is a kernel socket created by `udp_sock_create*` and not yet released.
pub(crate) struct UdpSocket(NonNull<b::socket>);

// SAFETY: kernel sockets are internally locked; we only release it.
unsafe impl Send for UdpSocket {}
// SAFETY: as above.
unsafe impl Sync for UdpSocket {}

/// # Safety
///
/// Called only by the kernel, with the arguments of this callback's C contract.
unsafe extern "C" fn encap_rcv<D: super::driver::Driver>(
    _sk: *mut b::sock,
    skb: *mut b::sk_buff,
) -> kernel::ffi::c_int {
    // Returning 0 tells UDP the packet was consumed (queued, or dropped).
    // SAFETY: UDP hands us ownership of `skb`, headers set.
    if let Some(pkt) = unsafe { super::pkt::RxPacket::arrived(skb) } {
        super::device::deliver::<D>(pkt);
    }
    0
}

impl UdpSocket {
    /// Opens port 4791 in `ns` (IPv4, or IPv6-only when `ipv6`), for
    /// driver `D`'s devices.
    fn open<D: super::driver::Driver>(ns: NetNs, ipv6: bool) -> Result<Self> {
        let mut sock: *mut b::socket = core::ptr::null_mut();
        let mut cfg = b::udp_port_cfg {
            local_udp_port: crate::oxe_core::ip::ROCE_V2_PORT.to_be(),
            ..Default::default()
        };
        // SAFETY: `ns` is alive (NetNs invariant); `cfg` is a complete port
        // configuration and `sock` a valid out pointer.
        let ret = unsafe {
            if ipv6 {
                cfg.family = b::AF_INET6 as u8;
                cfg.set_ipv6_v6only(1);
                b::udp_sock_create6(ns.0, &mut cfg, &mut sock)
            } else {
                cfg.family = b::AF_INET as u8;
                b::udp_sock_create4(ns.0, &mut cfg, &mut sock)
            }
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: created just above.
        let sock = NonNull::new(sock).map(UdpSocket).ok_or(ENOMEM)?;
        let mut tunnel = b::udp_tunnel_sock_cfg {
            // UDP_ENCAP_ESPINUDP_NON_IKE: any value but 0 makes UDP hand
            // datagrams to `encap_rcv`.
            encap_type: 1,
            encap_rcv: Some(encap_rcv::<D>),
            ..Default::default()
        };
        // SAFETY: a socket created above; the callback stays valid while it
        // is open (the module outlives its sockets). The conversion setting
        // only tells UDP what to do with a packet's checksum.
        unsafe {
            let sk = (*sock.0.as_ptr()).sk;
            b::setup_udp_tunnel_sock(ns.0, sk, &mut tunnel);
            // The ICRC, not UDP's checksum, protects RoCE: keep UDP from
            // computing checksums for oxe's receive (`shim.h` says where).
            b::oxe_shim_udp_no_csum_convert(sk);
        }
        Ok(sock)
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        // SAFETY: created by udp_sock_create* and released exactly once (type invariant).
        unsafe { b::udp_tunnel_sock_release((*self.0.as_ptr()).sk) };
    }
}

struct NsEntry {
    ns: NetNs,
    users: usize,
    _v4: UdpSocket,
    /// IPv6 may be absent (disabled in that namespace); RoCE then works over IPv4 only.
    _v6: Option<UdpSocket>,
}

kernel::sync::global_lock! {
    // SAFETY: initialized in `init`, from the module initializer, before any device exists.
    unsafe(uninit) static SOCKETS: Mutex<KVec<NsEntry>> = KVec::new();
}

/// Sets up the registry; called once from module init.
pub(crate) fn init() {
    // SAFETY: called exactly once, before any other use.
    unsafe { SOCKETS.init() };
}

/// One device's share of its namespace's RoCE sockets.
pub(crate) struct PortSockets {
    ns: NetNs,
}

impl PortSockets {
    /// Opens (or shares) port 4791 in the namespace of `ndev`, for driver
    /// `D`'s devices (a module has one driver).
    pub(crate) fn get<D: super::driver::Driver>(ndev: &NetDev) -> Result<Self> {
        let ns = NetNs::of(ndev);
        let mut list = SOCKETS.lock();
        if let Some(e) = list.iter_mut().find(|e| e.ns == ns) {
            e.users += 1;
            return Ok(PortSockets { ns });
        }
        let v4 = UdpSocket::open::<D>(ns, false)?;
        let v6 = UdpSocket::open::<D>(ns, true).ok();
        list.push(
            NsEntry {
                ns,
                users: 1,
                _v4: v4,
                _v6: v6,
            },
            GFP_KERNEL,
        )?;
        Ok(PortSockets { ns })
    }
}

impl Drop for PortSockets {
    fn drop(&mut self) {
        let mut list = SOCKETS.lock();
        if let Some(i) = list.iter().position(|e| e.ns == self.ns) {
            let last = list.get_mut(i).map(|e| {
                e.users -= 1;
                e.users == 0
            });
            if last == Some(true) {
                // Dropping the entry closes both sockets.
                drop(list.remove(i));
            }
        }
    }
}
