// SPDX-License-Identifier: GPL-2.0

//! RoCE v2 packets as socket buffers: built for transmit (IP and UDP headers
//! by the kernel's routing, everything from the BTH on by oxe), and received
//! from oxe's UDP sockets on port 4791 (`udp.rs`: plain kernel sockets, not
//! a tunnel's).

use super::av::Av;
use super::device::DevRef;
use super::netdev::NetDev;
use crate::bindings as b;
use crate::oxe_core::icrc;
use crate::oxe_core::ip::{self, IpHeader};
use crate::oxe_core::opcode::BTH_LEN;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::types::Opaque;

/// ICRC bytes at the end of every RoCE packet.
pub(crate) const ICRC_LEN: usize = 4;

/// UDP header and BTH: the last bytes with masked fields.
const UDP_BTH_LEN: usize = 8 + 12;

/// The ICRC of the headers `hdr` (IP header to BTH) followed by `rest`
/// (the payload and pad), wherever the two lie: oxe-core hashes the
/// headers with their variant fields masked, then the payload, which is
/// most bytes, goes to the CRC-32 that measured fastest at module load
/// (`crc.rs`).
fn icrc_over(hdr: &[u8], rest: &[u8]) -> Option<u32> {
    let crc = icrc::icrc_start(hdr).ok()?;
    Some(icrc::icrc_finish(super::crc::update(crc, rest)))
}

/// Most bytes of the headers a [`Frame`] keeps: an IPv4 header with every
/// option (60 bytes; IPv6's is 40), UDP's, and the BTH.
const FRAME_HEAD: usize = 60 + UDP_BTH_LEN;

/// A received packet as oxe reads it: a copy of its IP, UDP and BTH headers
/// (as this packet carries them), and its RoCE bytes, BTH to ICRC, in
/// place.
///
/// The headers are copied because a segment of a GSO packet taken whole
/// has none of its own: it shares the whole packet's, with the whole's
/// lengths and first IPv4 identification, and the copy is given the ones
/// UDP segmentation would have written, which its ICRC covers and which a
/// UD receive's GRH shows. For any other packet, the copy is the headers
/// as they are.
pub(crate) struct Frame<'a> {
    head: [u8; FRAME_HEAD],
    /// Where the UDP header starts in `head`.
    l4: usize,
    roce: &'a [u8],
}

impl<'a> Frame<'a> {
    /// The frame of a packet with IP and UDP headers `headers` (the UDP
    /// header `l4` bytes on) and RoCE bytes `roce`; for segment `index` of
    /// a GSO packet, its headers rewritten as segmentation writes them.
    /// `None` for headers longer than any RoCE packet's, or a segment's
    /// whose IP header has options or extensions (segmentation's never
    /// do, and oxe could not place their lengths).
    fn new(headers: &[u8], l4: usize, roce: &'a [u8], segment: Option<u16>) -> Option<Self> {
        let mut head = [0u8; FRAME_HEAD];
        head.get_mut(..headers.len())?.copy_from_slice(headers);
        // A packet too short for a BTH fails its parse, counted there.
        let bth = roce.get(..BTH_LEN).unwrap_or(&[]);
        let at = headers.len();
        head.get_mut(at..at + bth.len())?.copy_from_slice(bth);
        if let Some(index) = segment {
            let ipv6 = headers.first().is_some_and(|v| v >> 4 == 6);
            if l4 != if ipv6 { ip::IPV6_LEN } else { ip::IPV4_LEN } {
                return None;
            }
            let udp_len = u16::try_from(roce.len().checked_add(ip::UDP_LEN)?).ok()?;
            let id = ip::ipv4_id(&head).unwrap_or(0).wrapping_add(index);
            ip::set_segment(&mut head, ipv6, udp_len, id)?;
            if let Some(iph) = head.first_chunk_mut::<{ ip::IPV4_LEN }>().filter(|_| !ipv6) {
                ip::set_ipv4_checksum(iph);
            }
        }
        Some(Frame { head, l4, roce })
    }

    /// The IP header.
    pub(crate) fn ip(&self) -> &[u8] {
        self.head.get(..self.l4).unwrap_or(&[])
    }

    /// The RoCE packet, BTH to ICRC.
    pub(crate) fn roce(&self) -> &'a [u8] {
        self.roce
    }

    /// Whether the packet's ICRC (its last four bytes) is right.
    pub(crate) fn icrc_ok(&self) -> bool {
        let Some((body, crc)) = self.roce.split_last_chunk::<ICRC_LEN>() else {
            return false;
        };
        let (Some(head), Some(rest)) =
            (self.head.get(..self.l4 + UDP_BTH_LEN), body.get(BTH_LEN..))
        else {
            return false;
        };
        icrc_over(head, rest) == Some(icrc::from_wire(*crc))
    }
}

/// Most bytes of segments one packet carries: its buffer, with the headers
/// and `skb_shared_info`, then fits an order-3 allocation (32 KiB, the
/// largest the page allocator counts as cheap).
const BATCH_BYTES: usize = 28 * 1024;
/// Most segments one packet carries.
const BATCH_SEGS: u16 = 32;

/// A packet being built: one RoCE packet (BTH to ICRC), or several of one
/// size to one destination, back to back after one IP and UDP header, which
/// the network stack carries whole as far as it can and splits into
/// datagrams where it must (UDP segmentation, `SKB_GSO_UDP_L4`): at the
/// receiving socket of a peer on this host, or at a device that cannot
/// take it. Each packet is a segment, sealed with the ICRC of the headers
/// the split gives it (`seal`).
///
/// A batch exists because the packets cost the time, not the bytes: every
/// skb pays the transmit path, the veth and the receive path up to the
/// socket, whatever it carries.
///
/// # Invariants
///
/// `skb` is an skb we own, linear, with `hdr + used` bytes from `l3` (the
/// network header) to its tail, and `room` more bytes of tailroom. Its
/// segments are `segs` >= 1 runs of `seg` bytes, the last one `cur` bytes
/// (at most `seg`).
pub(crate) struct TxPacket {
    skb: NonNull<b::sk_buff>,
    l3: NonNull<u8>,
    /// The IP and UDP headers' length.
    hdr: usize,
    ipv6: bool,
    /// Every segment's length but the last's (the GSO size).
    seg: usize,
    /// The bytes of all segments.
    used: usize,
    /// The last segment's length: the one being built.
    cur: usize,
    room: usize,
    segs: u16,
    /// No segment may follow: the last was short, or there is no room.
    closed: bool,
    /// What a segment must share with the packet to join it.
    av: Av,
    sport: u16,
    local: bool,
    /// For a local packet, the device that owns its destination address.
    to: Option<DevRef>,
}

// SAFETY: an skb we own may move between contexts; `to` is a counted
// reference.
unsafe impl Send for TxPacket {}

/// The packet a QP's lock holder may add segments to, kept in the locked
/// state and queued when the lock is released (`QpLock`).
pub(crate) type OpenPacket = core::cell::Cell<Option<TxPacket>>;

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
    /// the UDP header (BTH, payload and ICRC), with the IP and UDP headers
    /// written in front of them, and room for up to `burst` - 1 more
    /// segments of that size if memory allows.
    pub(crate) fn new(
        ndev: &NetDev,
        av: &Av,
        route: &RouteCache,
        sport: u16,
        len: usize,
        burst: u32,
    ) -> Result<Self> {
        let ip = IpHeader {
            sgid: av.sgid,
            dgid: av.dgid,
            ipv6: av.ipv6,
            traffic_class: av.traffic_class,
            flow_label: av.flow_label,
            hop_limit: av.hop_limit,
        };
        let hdr = ip.len() + ip::UDP_LEN;
        let total = len.checked_add(hdr).ok_or(EINVAL)?;
        let total_c = u32::try_from(total).map_err(|_| EINVAL)?;
        let segs = usize::try_from(burst)
            .unwrap_or(1)
            .clamp(1, BATCH_SEGS.into())
            .min(BATCH_BYTES / len.max(1));
        let mut extra = u32::try_from(segs.saturating_sub(1) * len).map_err(|_| EINVAL)?;
        let c_av = c_av(av);
        let mut l3: *mut u8 = core::ptr::null_mut();
        let mut local = false;
        let mut to: *mut b::ib_device = core::ptr::null_mut();
        let mut err = 0;
        // SAFETY: the netdev is held (NetDev invariant); the route cache is
        // live (RouteCache invariant) and locks itself; the out pointers are
        // valid.
        let skb = unsafe {
            b::oxe_shim_tx_alloc(
                ndev.as_ptr(),
                &c_av,
                route.0.as_ptr(),
                total_c,
                &mut extra,
                &mut l3,
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
        let l3 = NonNull::new(l3).ok_or(ENOMEM)?;
        let room = extra as usize;
        // INVARIANT: tx_alloc put `total` bytes at `l3` in a linear skb,
        // the last `len` of them after the headers, with `extra` more room.
        // (Dropped on an error below, it frees the skb.)
        let pkt = TxPacket {
            skb,
            l3,
            hdr,
            ipv6: ip.ipv6,
            seg: len,
            used: len,
            cur: len,
            room,
            segs: 1,
            closed: room < len,
            av: *av,
            sport,
            local,
            to,
        };
        // SAFETY: `total` bytes at `l3` belong to our skb (as above).
        let bytes = unsafe { core::slice::from_raw_parts_mut(l3.as_ptr(), total) };
        ip::write_headers(bytes, &ip, sport).ok_or(EINVAL)?;
        if let Some(iph) = bytes
            .first_chunk_mut::<{ ip::IPV4_LEN }>()
            .filter(|_| !ip.ipv6)
        {
            // The identification stays 0 (`write_headers`), and a batch's
            // segments count up from it as UDP segmentation numbers them
            // (`seal`).
            // Every RoCE packet has DF set, which makes it an atomic
            // datagram, whose identification no one reassembles by (RFC
            // 6864): the kernel itself writes 0 in a DF datagram sent
            // without a connected socket (`ip_select_ident_segs`), which is
            // what rxe's packets carry. Drawing one from the kernel's
            // hashed generator cost each packet a few hundred ns under
            // emulation, on the path of every small message.
            ip::set_ipv4_checksum(iph);
        }
        Ok(pkt)
    }

    /// Adds a segment of `len` bytes for `av` from `sport`, which becomes
    /// the one `payload` and `seal` work on; false if it cannot join. A
    /// segment shorter than the others ends the packet, so it joins only
    /// as the `last` its caller means to build: one that many more follow
    /// starts a packet of their size instead.
    pub(crate) fn append(&mut self, av: &Av, sport: u16, len: usize, last: bool) -> bool {
        if self.closed
            || self.segs >= BATCH_SEGS
            || len == 0
            || len > self.seg
            || (len < self.seg && !last)
            || len > self.room
            || sport != self.sport
            || *av != self.av
        {
            return false;
        }
        let Ok(len_c) = u32::try_from(len) else {
            return false;
        };
        // SAFETY: our linear skb, with `room` >= `len` bytes of tailroom
        // (type invariant).
        unsafe { b::oxe_shim_skb_put(self.skb.as_ptr(), len_c) };
        // INVARIANT: the skb grew by `len`, the new last segment.
        self.used += len;
        self.room -= len;
        self.cur = len;
        self.segs += 1;
        self.closed = len < self.seg || self.room < self.seg;
        true
    }

    /// Takes the last segment back out (its filling failed). The packet
    /// must have another.
    pub(crate) fn unappend(&mut self) {
        if self.segs < 2 {
            return;
        }
        self.used -= self.cur;
        self.room += self.cur;
        // Only a last segment is ever short.
        self.cur = self.seg;
        self.segs -= 1;
        self.closed = self.room < self.seg;
        let len = u32::try_from(self.hdr + self.used).unwrap_or(u32::MAX);
        // SAFETY: our linear skb, shortened to its remaining segments
        // (restoring the type invariant).
        unsafe { b::oxe_shim_skb_trim(self.skb.as_ptr(), len) };
    }

    /// How many segments it carries.
    pub(crate) fn segments(&self) -> u16 {
        self.segs
    }

    /// Whether another segment could still join.
    pub(crate) fn is_open(&self) -> bool {
        !self.closed
    }

    /// The last segment's bytes, from the BTH to the ICRC.
    pub(crate) fn payload(&mut self) -> &mut [u8] {
        let at = self.hdr + self.used - self.cur;
        // SAFETY: `cur` bytes at `at` from the network header are the last
        // segment's, in our skb (type invariant).
        unsafe { core::slice::from_raw_parts_mut(self.l3.as_ptr().add(at), self.cur) }
    }

    /// Fills in the last segment's ICRC, over the headers it will carry
    /// once split off (its own lengths and IPv4 identification) and its
    /// bytes.
    pub(crate) fn seal(&mut self) -> Result {
        if self.segs == 1 {
            return self.seal_alone();
        }
        let (hdr, ipv6) = (self.hdr, self.ipv6);
        let udp_len = u16::try_from(ip::UDP_LEN + self.cur).map_err(|_| EINVAL)?;
        let id = self.segs - 1;
        let mut scratch = [0u8; ip::IPV6_LEN + UDP_BTH_LEN];
        let head = scratch.get_mut(..hdr + BTH_LEN).ok_or(EINVAL)?;
        // SAFETY: the headers, `hdr` bytes from the network header of our
        // skb (type invariant); not aliased by `payload` below, which
        // starts after them.
        let headers = unsafe { core::slice::from_raw_parts(self.l3.as_ptr(), hdr) };
        head.get_mut(..hdr).ok_or(EINVAL)?.copy_from_slice(headers);
        let seg = self.payload();
        if seg.len() < BTH_LEN + ICRC_LEN {
            return Err(EINVAL);
        }
        let (body, crc) = seg.split_at_mut(seg.len() - ICRC_LEN);
        let (bth, rest) = body.split_at(BTH_LEN);
        head.get_mut(hdr..).ok_or(EINVAL)?.copy_from_slice(bth);
        ip::set_segment(head, ipv6, udp_len, id).ok_or(EINVAL)?;
        let v = icrc_over(head, rest).ok_or(EINVAL)?;
        crc.copy_from_slice(&icrc::to_wire(v));
        Ok(())
    }

    /// `seal` for a packet of one segment, whose headers in the skb are
    /// already the ones it carries (`new` wrote them for its length, with
    /// identification 0): the ICRC is taken over them in place, with no
    /// copy of them rewritten.
    fn seal_alone(&mut self) -> Result {
        let total = self.hdr + self.cur;
        if self.cur < BTH_LEN + ICRC_LEN || self.used != self.cur {
            return Err(EINVAL);
        }
        // SAFETY: `hdr + used` bytes from the network header are ours (type
        // invariant), and `used` is `cur` (checked above).
        let bytes = unsafe { core::slice::from_raw_parts_mut(self.l3.as_ptr(), total) };
        let (body, crc) = bytes.split_at_mut(total - ICRC_LEN);
        let (head, rest) = body.split_at(self.hdr + BTH_LEN);
        let v = icrc_over(head, rest).ok_or(EINVAL)?;
        crc.copy_from_slice(&icrc::to_wire(v));
        Ok(())
    }

    /// Makes the IP and UDP headers the whole packet's and, with more than
    /// one segment, marks it for segmentation. Once, before it is sent.
    fn finish(&mut self) {
        if self.segs < 2 {
            return;
        }
        // SAFETY: the headers, `hdr` bytes from the network header of our
        // skb (type invariant).
        let headers = unsafe { core::slice::from_raw_parts_mut(self.l3.as_ptr(), self.hdr) };
        let udp_len = u16::try_from(ip::UDP_LEN + self.used).unwrap_or(u16::MAX);
        let _ = ip::set_segment(headers, self.ipv6, udp_len, 0);
        if let Some(iph) = headers
            .first_chunk_mut::<{ ip::IPV4_LEN }>()
            .filter(|_| !self.ipv6)
        {
            ip::set_ipv4_checksum(iph);
        }
        let seg = u32::try_from(self.seg).unwrap_or(u32::MAX);
        // SAFETY: our finished skb, headers set.
        unsafe { b::oxe_shim_tx_gso(self.skb.as_ptr(), seg, self.segs.into()) };
    }

    /// Whether the destination is this host.
    pub(crate) fn is_local(&self) -> bool {
        self.local
    }

    /// The packet as if it had been received (loopback delivery), with the
    /// device that owns its destination address, if any. A local packet
    /// has one segment.
    pub(crate) fn into_rx(mut self) -> (Option<DevRef>, RxPacket) {
        let to = self.to.take();
        let skb = self.skb;
        core::mem::forget(self);
        let rx = RxPacket(skb);
        rx.reset();
        (to, rx)
    }
}

impl Drop for TxPacket {
    fn drop(&mut self) {
        // SAFETY: an skb we own and did not hand on.
        unsafe {
            b::sk_skb_reason_drop(
                core::ptr::null_mut(),
                self.skb.as_ptr(),
                b::skb_drop_reason_SKB_DROP_REASON_NOT_SPECIFIED,
            )
        };
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

/// A GSO packet queued whole in a QP's backlog: how many packets it
/// holds (as counted into the backlog when it was queued), and the first
/// its drain has yet to process.
#[derive(Clone, Copy)]
pub(crate) struct Batch {
    pub(crate) next: u32,
    pub(crate) count: u32,
}

impl RxPacket {
    /// # Safety
    ///
    /// `skb` is null or an skb whose ownership passes to the result, with
    /// its network and transport headers set.
    pub(super) unsafe fn from_raw(skb: *mut b::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(RxPacket)
    }

    /// As [`RxPacket::from_raw`], for a packet just handed to oxe (by UDP,
    /// or from a device of this host): not checked yet, whatever its
    /// control buffer held.
    ///
    /// # Safety
    ///
    /// As for [`RxPacket::from_raw`].
    pub(super) unsafe fn arrived(skb: *mut b::sk_buff) -> Option<Self> {
        // SAFETY: the caller's contract.
        let pkt = unsafe { Self::from_raw(skb) }?;
        pkt.reset();
        Some(pkt)
    }

    /// Clears what oxe keeps in the control buffer of a packet handed over
    /// to it: not checked, not a segment.
    fn reset(&self) {
        // SAFETY: an skb we own (type invariant), whose control buffer is
        // ours since it was handed over.
        unsafe { b::oxe_shim_skb_arrived(self.0.as_ptr()) };
    }

    /// Whether the packet was addressed to this host alone (not a
    /// multicast or broadcast one, a copy of which every socket of a
    /// group is given).
    pub(super) fn to_host(&self) -> bool {
        // SAFETY: an skb we own (type invariant).
        unsafe { b::oxe_shim_skb_to_host(self.0.as_ptr()) }
    }

    /// How many segments the packet carries, if it is a GSO packet taken
    /// whole (0 if it is not one; an error for one oxe does not take).
    pub(crate) fn segments(&mut self) -> Result<u32> {
        // SAFETY: an skb we own (type invariant).
        let n = unsafe { b::oxe_shim_skb_gso_segments(self.0.as_ptr()) };
        u32::try_from(n).map_err(|_| Error::from_errno(n))
    }

    /// Segment `index` of a GSO packet taken whole ([`Self::segments`]),
    /// as a packet of its own (a clone sharing the bytes); `None` without
    /// memory for it.
    pub(crate) fn segment(&self, index: u32) -> Option<RxPacket> {
        // SAFETY: an skb we own (type invariant), made linear by
        // `segments`; the clone is a new skb, owned by the result, with the
        // headers set as ours are.
        unsafe { Self::from_raw(b::oxe_shim_skb_segment(self.0.as_ptr(), index)) }
    }

    /// Segment `index` of a GSO packet taken whole, as oxe reads it, read
    /// in place (no clone): `None` past the last segment.
    pub(crate) fn segment_frame(&mut self, index: u32) -> Option<Frame<'_>> {
        let mut f = b::oxe_frame::default();
        // SAFETY: an skb we own (type invariant); `f` is a valid out pointer.
        if unsafe { b::oxe_shim_skb_segment_frame(self.0.as_ptr(), index, &mut f) } != 0 {
            return None;
        }
        // SAFETY: the shim checked the runs as for `frame`: within the
        // linear bytes of our skb, ours to read for as long as `self`.
        unsafe { self.frame_of(&f) }
    }

    /// Whether every segment of a GSO packet of `segments` names one
    /// destination QP.
    pub(crate) fn segments_one_qp(&self, segments: u32) -> bool {
        // SAFETY: an skb we own (type invariant).
        unsafe { b::oxe_shim_skb_segments_one_qp(self.0.as_ptr(), segments) }
    }

    /// Marks a GSO packet queued whole in a backlog as `batch`.
    pub(crate) fn set_batch(&mut self, batch: Batch) {
        // (At most 128 segments: `segments`.)
        let next = u16::try_from(batch.next).unwrap_or(u16::MAX);
        let count = u16::try_from(batch.count).unwrap_or(u16::MAX);
        // SAFETY: an skb we own (type invariant), whose control buffer is
        // ours since it was handed over.
        unsafe { b::oxe_shim_skb_set_batch(self.0.as_ptr(), next, count) };
    }

    /// For a GSO packet queued whole ([`Self::set_batch`]), where its
    /// drain is in it.
    pub(crate) fn batch(&self) -> Option<Batch> {
        let mut count = 0u16;
        // SAFETY: an skb we own (type invariant); a valid out pointer.
        let next = unsafe { b::oxe_shim_skb_batch_next(self.0.as_ptr(), &mut count) };
        Some(Batch {
            next: u32::try_from(next).ok()?,
            count: count.into(),
        })
    }

    /// Whether the packet's ICRC was checked, and the packet counted
    /// received, before it was left to the backlog ([`Self::set_checked`]).
    pub(crate) fn checked(&self) -> bool {
        // SAFETY: an skb we own (type invariant).
        unsafe { b::oxe_shim_skb_checked(self.0.as_ptr()) }
    }

    /// Records that the packet was checked and counted: the backlog's drain
    /// processes it again (after an ODP fault) without doing either twice.
    pub(crate) fn set_checked(&mut self) {
        // SAFETY: an skb we own (type invariant), whose control buffer is
        // ours since it was handed over.
        unsafe { b::oxe_shim_skb_set_checked(self.0.as_ptr(), true) };
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

    /// The packet as oxe reads it ([`Frame`]); `None` if it cannot be made
    /// linear, or is a segment whose headers could not be UDP
    /// segmentation's.
    pub(crate) fn frame(&mut self) -> Option<Frame<'_>> {
        let mut f = b::oxe_frame::default();
        // SAFETY: an skb we own (type invariant); `f` is a valid out pointer.
        if unsafe { b::oxe_shim_skb_frame(self.0.as_ptr(), &mut f) } != 0 {
            return None;
        }
        // SAFETY: the shim checked that the UDP header ends at or before
        // `roce`, within the linear bytes of our skb (a segment's headers
        // are those of the packet it was cloned from, whose bytes it
        // shares): both runs are ours to read for as long as `self`.
        unsafe { self.frame_of(&f) }
    }

    /// The [`Frame`] the shim described in `f`.
    ///
    /// # Safety
    ///
    /// `f`'s headers (through the UDP header) and RoCE bytes are readable
    /// for as long as the borrow of `self` the result lives for.
    unsafe fn frame_of(&self, f: &b::oxe_frame) -> Option<Frame<'_>> {
        let hdr_len = f.l4.checked_add(ip::UDP_LEN)?;
        // SAFETY: the caller's contract.
        let (headers, roce) = unsafe {
            (
                core::slice::from_raw_parts(f.l3, hdr_len),
                core::slice::from_raw_parts(f.roce, f.roce_len),
            )
        };
        Frame::new(headers, f.l4, roce, f.segment.then_some(f.index))
    }
}

impl Drop for RxPacket {
    fn drop(&mut self) {
        // consume_skb(), which is inline in some configurations: a packet
        // processed, not dropped.
        // SAFETY: an skb we own.
        unsafe {
            b::sk_skb_reason_drop(
                core::ptr::null_mut(),
                self.0.as_ptr(),
                b::skb_drop_reason_SKB_CONSUMED,
            )
        };
    }
}

/// A list of skbs with its own lock (the kernel's `sk_buff_head`), on
/// the heap: the list's head is linked to by its members.
///
/// # Invariants
///
/// `self.0` is an initialized list holding only skbs it owns.
pub(crate) struct SkbList(Pin<KBox<Opaque<b::sk_buff_head>>>);

// SAFETY: the list has its own irq-safe lock.
unsafe impl Send for SkbList {}
// SAFETY: as above.
unsafe impl Sync for SkbList {}

impl SkbList {
    pub(crate) fn new() -> Result<Self> {
        let head = KBox::pin(Opaque::<b::sk_buff_head>::uninit(), GFP_KERNEL)?;
        let h = head.get();
        // SAFETY: pinned, not in use yet. This is skb_queue_head_init (an
        // inline function): an empty ring points at its head.
        unsafe {
            b::__spin_lock_init(
                core::ptr::addr_of_mut!((*h).lock),
                c"oxe_skb_list".as_char_ptr(),
                kernel::static_lock_class!().as_ptr(),
            );
            let ends = core::ptr::addr_of_mut!((*h).__bindgen_anon_1.__bindgen_anon_1);
            (*ends).next = h.cast();
            (*ends).prev = h.cast();
            (*h).qlen = 0;
        }
        Ok(SkbList(head))
    }

    /// Appends `skb`. Any context.
    ///
    /// # Safety
    ///
    /// `skb` is an skb the caller owns, whose ownership passes to the list.
    pub(super) unsafe fn push(&self, skb: *mut b::sk_buff) {
        // SAFETY: an initialized list (type invariant); the caller's skb.
        unsafe { b::skb_queue_tail(self.0.get(), skb) };
    }

    /// Puts `skb` first. Any context.
    ///
    /// # Safety
    ///
    /// As for [`SkbList::push`].
    pub(super) unsafe fn push_front(&self, skb: *mut b::sk_buff) {
        // SAFETY: an initialized list (type invariant); the caller's skb.
        unsafe { b::skb_queue_head(self.0.get(), skb) };
    }

    /// The first skb, now the caller's, or null.
    pub(super) fn pop(&self) -> *mut b::sk_buff {
        // SAFETY: an initialized list (type invariant).
        unsafe { b::skb_dequeue(self.0.get()) }
    }

    /// Whether the list is empty (a racy hint, as skb_queue_len_lockless).
    fn is_empty(&self) -> bool {
        let head = self.0.get();
        // SAFETY: an initialized list. A volatile read, as READ_ONCE:
        // others change the length under the list's lock.
        unsafe { core::ptr::addr_of!((*head).qlen).read_volatile() == 0 }
    }
}

impl Drop for SkbList {
    fn drop(&mut self) {
        // SAFETY: an initialized list whose skbs are ours (type invariant).
        unsafe {
            b::skb_queue_purge_reason(self.0.get(), b::skb_drop_reason_SKB_DROP_REASON_QUEUE_PURGE)
        };
    }
}

/// The route a queue's last packet took, kept for the next one: most of a
/// connected QP's packets would otherwise each walk the FIB for the same
/// answer. The shim keys it by the addresses and netdev, revalidates it
/// (`dst_check`) on every use, and keeps only IPv4 routes (see
/// `oxe_shim_tx_alloc`).
///
/// # Invariants
///
/// `self.0` came from `oxe_shim_route_cache_new` and is freed only by drop.
pub(crate) struct RouteCache(NonNull<b::oxe_route_cache>);

// SAFETY: the cache has its own lock; the dst it holds is refcounted.
unsafe impl Send for RouteCache {}
// SAFETY: as above.
unsafe impl Sync for RouteCache {}

impl RouteCache {
    fn new() -> Result<Self> {
        // SAFETY: allocates an empty cache (NULL without memory).
        NonNull::new(unsafe { b::oxe_shim_route_cache_new() })
            .map(RouteCache)
            .ok_or(ENOMEM)
    }
}

impl Drop for RouteCache {
    fn drop(&mut self) {
        // SAFETY: ours, from oxe_shim_route_cache_new (type invariant); no
        // sender can reach it any more.
        unsafe { b::oxe_shim_route_cache_free(self.0.as_ptr()) };
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
/// `self.q` holds only complete packets from [`TxPacket::seal`], with
/// their routes.
pub(crate) struct TxQueue {
    q: SkbList,
    /// The route of the last packet built for this queue.
    route: RouteCache,
    /// Someone is sending from the queue. One sender at a time keeps the
    /// QP's packets in order: two CPUs popping in turn would interleave
    /// them onto two receive backlogs, and the peer would see a PSN gap.
    sending: AtomicBool,
}

impl TxQueue {
    pub(crate) fn new() -> Result<Self> {
        Ok(TxQueue {
            q: SkbList::new()?,
            route: RouteCache::new()?,
            sending: AtomicBool::new(false),
        })
    }

    /// The route cache for packets built for this queue.
    pub(crate) fn route(&self) -> &RouteCache {
        &self.route
    }

    /// Queues a sealed packet.
    pub(crate) fn push(&self, mut pkt: TxPacket) {
        pkt.finish();
        // (Only packets for the wire are queued; a local one's device
        // reference must not be forgotten with it.)
        drop(pkt.to.take());
        let skb = pkt.skb.as_ptr();
        core::mem::forget(pkt);
        // SAFETY: our skb, forgotten above; INVARIANT: a sealed packet.
        unsafe { self.q.push(skb) };
    }

    /// Sends what is queued, in order, unless another caller is sending
    /// already (it sends these too). A packet the network refuses is loss,
    /// which RC recovers from and UD tolerates.
    ///
    /// Returns whether packets are left for another call: a sender whose
    /// queue another CPU keeps filling stops after [`TX_TAKEOVER_BURSTS`]
    /// bursts, and its caller must see that someone calls again (a QP kicks
    /// its work item). Unbounded, the sender is held for as long as the
    /// other CPU produces: a QP's work item that releases its lock while
    /// the drain answers a long READ on the other CPU would send every
    /// response of it, and the QP's retransmit timer, which only that work
    /// item arms, would wait until the READ ended.
    ///
    /// Each burst is sent with softirqs held off: the sender cannot be
    /// preempted while it owns the queue (a high-priority work item pushing
    /// behind a preempted owner would pile packets up unsent), and the burst
    /// lands on one CPU's receive backlog. In process context that backlog
    /// is processed when softirqs come back on, and the queue is owned
    /// until then, so the next burst, from whichever CPU, cannot overtake
    /// this one on its way to the peer.
    #[must_use]
    pub(crate) fn send_all(&self) -> bool {
        // Every release of a QP's lock comes here, and most have built
        // nothing: they skip the softirq hold and the list's irq-off lock.
        // A caller's own packets are in the list before it calls (its push
        // took the list's lock), so empty means another sender took them.
        if self.q.is_empty() {
            return false;
        }
        let mut bursts = 0;
        loop {
            {
                let _bh = super::lock::BhOff::new();
                if self.sending.swap(true, Ordering::SeqCst) {
                    return false;
                }
                for _ in 0..TX_BURST {
                    let skb = self.q.pop();
                    if skb.is_null() {
                        break;
                    }
                    // SAFETY: a complete, routed packet (type invariant); consumed.
                    let _ = unsafe { b::oxe_shim_tx_send(skb) };
                }
            }
            self.sending.store(false, Ordering::SeqCst);
            // Packets queued after the last pop, whose callers saw us
            // sending, are ours to send, or to hand on.
            if self.q.is_empty() {
                return false;
            }
            bursts += 1;
            if bursts >= TX_TAKEOVER_BURSTS {
                return true;
            }
        }
    }
}

/// Bursts one call of [`TxQueue::send_all`] sends before it hands the rest
/// on: its caller's own packets (a requester's chunk is one burst) and a
/// share of what others queued meanwhile.
const TX_TAKEOVER_BURSTS: u32 = 4;

/// Packets sent per softirq-off burst: well inside the per-CPU receive
/// backlog (1000), and the size of the requester's own burst.
const TX_BURST: u32 = 64;
