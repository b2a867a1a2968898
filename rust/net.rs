// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 UDP port 4791, one socket pair per network namespace, shared by
//! every oxe device whose netdev lives there and closed with the last one.
//! (A port can be bound once per namespace, so per-device sockets would
//! collide as soon as two devices share a namespace.)

use crate::ib::netdev::NetDev;
use crate::ib::udp::{NetNs, UdpSocket};
use kernel::prelude::*;

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
    /// Opens (or shares) port 4791 in the namespace of `ndev`.
    pub(crate) fn get(ndev: &NetDev) -> Result<Self> {
        let ns = NetNs::of(ndev);
        let mut list = SOCKETS.lock();
        if let Some(e) = list.iter_mut().find(|e| e.ns == ns) {
            e.users += 1;
            return Ok(PortSockets { ns });
        }
        let v4 = UdpSocket::open(ns, false)?;
        let v6 = UdpSocket::open(ns, true).ok();
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
