// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 packets as socket buffers: built for transmit (IP and UDP headers
//! by the kernel's routing, everything from the BTH on by oxe), and received
//! from the UDP tunnel socket.

use super::av::Av;
use super::device::DevRef;
use super::netdev::NetDev;
use crate::bindings as b;
use crate::oxe_core::icrc;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;

/// ICRC bytes at the end of every RoCE packet.
pub(crate) const ICRC_LEN: usize = 4;

/// UDP header and BTH: the last bytes with masked fields.
const UDP_BTH_LEN: usize = 8 + 12;

/// The ICRC of a packet (from its IP header, ICRC excluded) whose UDP header
/// starts at `l4`: oxe-core hashes the headers with their variant fields
/// masked, then the payload, which is most bytes, goes to the CRC-32 that
/// measured fastest at module load (`crc.rs`).
pub(crate) fn icrc_of(packet: &[u8], l4: usize) -> Option<u32> {
    let (hdr, rest) = packet.split_at_checked(l4.checked_add(UDP_BTH_LEN)?)?;
    let crc = icrc::icrc_start(hdr).ok()?;
    Some(icrc::icrc_finish(super::crc::update(crc, rest)))
}

/// A packet being built, from the BTH to the ICRC.
///
/// # Invariants
///
/// `skb` is an skb we own, linear, whose last `len` bytes start at `payload`
/// and whose network header is set.
pub(crate) struct TxPacket {
    skb: NonNull<b::sk_buff>,
    payload: NonNull<u8>,
    len: usize,
    local: bool,
    /// For a local packet, the device that owns its destination address.
    to: Option<DevRef>,
}

/// An address vector as the C side takes it.
pub(crate) fn c_av(av: &Av) -> b::oxe_av {
    b::oxe_av {
        sgid: av.sgid,
        dgid: av.dgid,
        flow_label: av.flow_label,
        ipv6: av.ipv6.into(),
        traffic_class: av.traffic_class,
        hop_limit: av.hop_limit,
        valid: 1,
        sgid_index: av.sgid_index,
    }
}

impl TxPacket {
    /// Routes to `av` from `ndev` and allocates room for `len` bytes after
    /// the UDP header (BTH, payload and ICRC).
    pub(crate) fn new(ndev: &NetDev, av: &Av, sport: u16, len: usize) -> Result<Self> {
        let c_av = c_av(av);
        let mut payload: *mut u8 = core::ptr::null_mut();
        let mut local = false;
        let mut to: *mut b::ib_device = core::ptr::null_mut();
        let mut err = 0;
        let len_c = u32::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: the netdev is held (NetDev invariant); the out pointers are valid.
        let skb = unsafe {
            b::oxe_shim_tx_alloc(
                ndev.as_ptr(),
                &c_av,
                sport,
                len_c,
                &mut payload,
                &mut local,
                &mut to,
                &mut err,
            )
        };
        // SAFETY: tx_alloc gave us a reference to `to`, if not null.
        let to = unsafe { DevRef::from_raw(to) };
        let Some(skb) = NonNull::new(skb) else {
            return Err(Error::from_errno(if err != 0 { err } else { -12 }));
        };
        // INVARIANT: tx_alloc put `len` bytes at `payload` in a linear skb.
        Ok(TxPacket {
            skb,
            payload: NonNull::new(payload).ok_or(ENOMEM)?,
            len,
            local,
            to,
        })
    }

    /// The bytes from the BTH to the ICRC.
    pub(crate) fn payload(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes at `payload` belong to our skb (type invariant).
        unsafe { core::slice::from_raw_parts_mut(self.payload.as_ptr(), self.len) }
    }

    /// Fills in the ICRC over the finished headers and payload.
    pub(crate) fn seal(&mut self) -> Result {
        let mut len = 0usize;
        let mut l4 = 0usize;
        // SAFETY: our linear skb (type invariant).
        let l3 = unsafe { b::oxe_shim_skb_l3(self.skb.as_ptr(), &mut len, &mut l4) };
        if l3.is_null() || len < ICRC_LEN {
            return Err(EINVAL);
        }
        // SAFETY: `len` bytes from the network header to the tail are ours.
        let bytes = unsafe { core::slice::from_raw_parts_mut(l3, len) };
        let (body, crc) = bytes.split_at_mut(len - ICRC_LEN);
        let v = icrc_of(body, l4).ok_or(EINVAL)?;
        crc.copy_from_slice(&icrc::to_wire(v));
        Ok(())
    }

    /// Whether the destination is this host.
    pub(crate) fn is_local(&self) -> bool {
        self.local
    }

    /// The packet as if it had been received (loopback delivery), with the
    /// device that owns its destination address, if any.
    pub(crate) fn into_rx(mut self) -> (Option<DevRef>, RxPacket) {
        let to = self.to.take();
        let skb = self.skb;
        core::mem::forget(self);
        (to, RxPacket(skb))
    }
}

impl Drop for TxPacket {
    fn drop(&mut self) {
        // SAFETY: an skb we own and did not hand on.
        unsafe { b::oxe_shim_kfree_skb(self.skb.as_ptr()) };
    }
}

/// A received RoCE v2 packet.
///
/// # Invariants
///
/// `self.0` is an skb we own with network and transport headers set.
pub(crate) struct RxPacket(NonNull<b::sk_buff>);

// SAFETY: an owned skb may move between contexts.
unsafe impl Send for RxPacket {}

impl RxPacket {
    /// # Safety
    ///
    /// `skb` is null or an skb whose ownership passes to the result, with
    /// its network and transport headers set.
    pub(super) unsafe fn from_raw(skb: *mut b::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(RxPacket)
    }

    pub(super) fn into_raw(self) -> *mut b::sk_buff {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        p
    }

    pub(super) fn netdev(&self) -> *mut b::net_device {
        // SAFETY: an skb we own.
        unsafe { b::oxe_shim_skb_dev(self.0.as_ptr()) }
    }

    /// The packet from its IP header to its end, and where the UDP header
    /// starts in it; `None` if it cannot be made linear.
    pub(crate) fn bytes(&mut self) -> Option<(&[u8], usize)> {
        let mut len = 0usize;
        let mut l4 = 0usize;
        // SAFETY: an skb we own (type invariant).
        let p = unsafe { b::oxe_shim_skb_l3(self.0.as_ptr(), &mut len, &mut l4) };
        if p.is_null() || l4 > len {
            return None;
        }
        // SAFETY: linear bytes of our skb, borrowed for as long as `self`.
        Some((unsafe { core::slice::from_raw_parts(p, len) }, l4))
    }
}

impl Drop for RxPacket {
    fn drop(&mut self) {
        // SAFETY: an skb we own.
        unsafe { b::oxe_shim_consume_skb(self.0.as_ptr()) };
    }
}

/// Packets built under a QP's lock, sent once it is released.
///
/// Sending from process context with softirqs enabled lets the network
/// process each packet as it goes; a burst sent with softirqs held off
/// (under the lock) piles up in the per-CPU receive backlog instead, where
/// a large RDMA READ response overflows it.
///
/// # Invariants
///
/// `self.q` is a live `oxe_skbq` holding only complete packets from
/// [`TxPacket::seal`], with their routes.
pub(crate) struct TxQueue {
    q: NonNull<b::oxe_skbq>,
    /// Someone is sending from the queue. One sender at a time keeps the
    /// QP's packets in order: two CPUs popping in turn would interleave
    /// them onto two receive backlogs, and the peer would see a PSN gap.
    sending: AtomicBool,
}

// SAFETY: the skb queue has its own irq-safe lock.
unsafe impl Send for TxQueue {}
// SAFETY: as above.
unsafe impl Sync for TxQueue {}

impl TxQueue {
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: plain allocation.
        let q = unsafe { b::oxe_shim_skbq_new() };
        Ok(TxQueue {
            q: NonNull::new(q).ok_or(ENOMEM)?,
            sending: AtomicBool::new(false),
        })
    }

    /// Queues a sealed packet.
    pub(crate) fn push(&self, mut pkt: TxPacket) {
        // (Only packets for the wire are queued; a local one's device
        // reference must not be forgotten with it.)
        drop(pkt.to.take());
        let skb = pkt.skb.as_ptr();
        core::mem::forget(pkt);
        // SAFETY: live queue; it takes the packet (type invariant kept: sealed).
        unsafe { b::oxe_shim_skbq_push(self.q.as_ptr(), skb) };
    }

    /// Sends everything queued, in order, unless another caller is sending
    /// already (it sends these too). A packet the network refuses is loss,
    /// which RC recovers from and UD tolerates.
    ///
    /// Each burst is sent with softirqs held off: the sender cannot be
    /// preempted while it owns the queue (a high-priority work item pushing
    /// behind a preempted owner would pile packets up unsent), and the burst
    /// lands on one CPU's receive backlog. In process context that backlog
    /// is processed when softirqs come back on, and the queue is owned
    /// until then, so the next burst, from whichever CPU, cannot overtake
    /// this one on its way to the peer.
    pub(crate) fn send_all(&self) {
        loop {
            {
                let _bh = super::lock::BhOff::new();
                if self.sending.swap(true, Ordering::SeqCst) {
                    return;
                }
                for _ in 0..TX_BURST {
                    // SAFETY: live queue; a dequeued skb is ours.
                    let skb = unsafe { b::oxe_shim_skbq_pop(self.q.as_ptr()) };
                    if skb.is_null() {
                        break;
                    }
                    // SAFETY: a complete, routed packet (type invariant); consumed.
                    let _ = unsafe { b::oxe_shim_tx_send(skb) };
                }
            }
            self.sending.store(false, Ordering::SeqCst);
            // Packets queued after the last pop, whose callers saw us
            // sending, are ours to send.
            // SAFETY: live queue.
            if unsafe { b::oxe_shim_skbq_empty(self.q.as_ptr()) } {
                return;
            }
        }
    }
}

/// Packets sent per softirq-off burst: well inside the per-CPU receive
/// backlog (1000), and the size of the requester's own burst.
const TX_BURST: u32 = 64;

impl Drop for TxQueue {
    fn drop(&mut self) {
        // SAFETY: live queue (type invariant); frees what is queued.
        unsafe { b::oxe_shim_skbq_free(self.q.as_ptr()) };
    }
}
