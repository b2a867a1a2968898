"""RoCE v2 frames built by hand, for tests that play a hostile peer.

Independent of oxe-core on purpose: the headers are packed here from the
IBTA layouts and the ICRC is zlib's CRC-32 over the masked headers (IBTA
Annex A17), so a test that oxe accepts a frame from this module checks
oxe's parser and ICRC against a second implementation.

Frames leave through a raw IPv4 socket opened in another network
namespace (the peer side of the guest's veth pair), with any source
address the test asks for; a UDP socket bound to port 4791 there receives
what oxe sends to that peer. Batches of packets in one GSO datagram leave
through a packet socket on that side's veth instead (`Peer.inject_batch`).
"""
import ctypes
import os
import random
import select
import socket
import struct
import time
import zlib

ROCE_PORT = 4791
CLONE_NEWNET = 0x40000000

# Opcodes (IBTA 9.2, table 38): transport in the top three bits.
RC_SEND_ONLY = 0x04
RC_RDMA_WRITE_FIRST = 0x06
RC_RDMA_WRITE_LAST = 0x08
RC_RDMA_WRITE_ONLY = 0x0A
RC_RDMA_READ_REQUEST = 0x0C
RC_READ_RESPONSE_FIRST = 0x0D
RC_READ_RESPONSE_ONLY = 0x10
RC_ACKNOWLEDGE = 0x11
RC_ATOMIC_ACKNOWLEDGE = 0x12
RC_FETCH_ADD = 0x14
UC_SEND_ONLY = 0x24
UD_SEND_ONLY = 0x64

# AETH syndromes (IBTA 9.7.5.2): ACK with invalid credits, and the NAKs.
ACK = 0x1F
NAK_PSN_SEQ = 0x60
NAK_INVALID_REQUEST = 0x61
NAK_REMOTE_ACCESS = 0x62
NAK_REMOTE_OP = 0x63
# An RNR NAK's syndrome: 001 and the 5-bit timer code (1: 0.01 ms).
RNR_NAK = 0x20

GSI_QKEY = 0x80010000

# Packet sockets with a virtio-net header (linux/if_packet.h,
# linux/virtio_net.h): how a local sender hands the stack a GSO packet
# whose every header it wrote.
SOL_PACKET = 263
PACKET_VNET_HDR = 15
VIRTIO_NET_HDR_F_NEEDS_CSUM = 1
VIRTIO_NET_HDR_GSO_UDP_L4 = 5


def bth(opcode, dest_qpn, psn, pad=0, ack_req=False, solicited=False):
    flags = (0x80 if solicited else 0) | (pad << 4)
    return struct.pack('>BBHII', opcode, flags, 0xFFFF, dest_qpn & 0xFFFFFF,
                       (0x80000000 if ack_req else 0) | (psn & 0xFFFFFF))


def deth(qkey, src_qpn):
    return struct.pack('>II', qkey, src_qpn & 0xFFFFFF)


def reth(va, rkey, length):
    return struct.pack('>QII', va, rkey, length)


def aeth(syndrome, msn=0):
    return struct.pack('>I', (syndrome << 24) | (msn & 0xFFFFFF))


def atomic_ack_eth(orig):
    return struct.pack('>Q', orig)


def atomic_eth(va, rkey, swap_add, compare=0):
    return struct.pack('>QIQQ', va, rkey, swap_add, compare)


def roce(opcode, dest_qpn, psn, ext=b'', payload=b'', ack_req=False):
    """BTH, extension headers and padded payload: a packet without ICRC."""
    pad = -len(payload) % 4
    return bth(opcode, dest_qpn, psn, pad, ack_req) + ext + payload + bytes(pad)


def ipv4_udp(src, dst, body_len, sport):
    """The IPv4 and UDP headers of a RoCE v2 packet of `body_len` bytes
    (BTH through ICRC); the UDP checksum is left zero, as IPv4 allows."""
    tot = 20 + 8 + body_len
    ip = struct.pack('>BBHHHBBH4s4s', 0x45, 0, tot, random.randrange(1, 0xFFFF),
                     0x4000, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack('>HHHH', sport, ROCE_PORT, 8 + body_len, 0)
    return ip, udp


def icrc(ip, udp, packet):
    """The ICRC of a RoCE v2 over IPv4 packet: CRC-32 over eight 0xff bytes,
    the IP header with TOS, TTL and checksum set to ones, the UDP header
    with its checksum set to ones, the BTH with byte 4 set to ones, and the
    rest as is; stored least significant byte first."""
    ip = bytearray(ip)
    ip[1] = 0xFF
    ip[8] = 0xFF
    ip[10:12] = b'\xff\xff'
    udp = bytearray(udp)
    udp[6:8] = b'\xff\xff'
    pkt = bytearray(packet)
    pkt[4] = 0xFF
    crc = zlib.crc32(b'\xff' * 8 + bytes(ip) + bytes(udp) + bytes(pkt))
    return struct.pack('<I', crc)


def frame(src, dst, packet, sport=0xC0DE, bad_icrc=False):
    """A whole IPv4 datagram carrying `packet` with its ICRC."""
    ip, udp = ipv4_udp(src, dst, len(packet) + 4, sport)
    crc = icrc(ip, udp, packet)
    if bad_icrc:
        crc = bytes(b ^ 0xFF for b in crc)
    return ip + udp + packet + crc


def ipv4_checksum(header):
    """The IPv4 header checksum of `header` (its checksum field zero)."""
    total = sum(struct.unpack(f'>{len(header) // 2}H', header))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def gso_batch(src, dst, packets, ident, sport=0xC0DE, bad_icrc=(), seg_size=None):
    """One IPv4 datagram carrying `packets` (BTH onwards, no ICRC) back to
    back, as UDP segmentation (GSO, SKB_GSO_UDP_L4) takes it: split every
    `seg_size` bytes (by default the first packet's length with its ICRC),
    each piece gets the whole's headers with its own lengths and the
    identification `ident` plus its index. Each packet's ICRC is over the
    headers it will so carry; those whose index is in `bad_icrc` get a
    wrong one. Returns the IP datagram, its checksum right, and `seg_size`."""
    body = b''
    for i, packet in enumerate(packets):
        ip, udp = ipv4_udp(src, dst, len(packet) + 4, sport)
        ip = ip[:4] + struct.pack('>H', (ident + i) & 0xFFFF) + ip[6:]
        crc = icrc(ip, udp, packet)
        if i in bad_icrc:
            crc = bytes(b ^ 0xFF for b in crc)
        body += packet + crc
    if seg_size is None:
        seg_size = len(packets[0]) + 4
    ip, udp = ipv4_udp(src, dst, len(body), sport)
    ip = ip[:4] + struct.pack('>H', ident & 0xFFFF) + ip[6:]
    ip = ip[:10] + struct.pack('>H', ipv4_checksum(ip)) + ip[12:]
    # The UDP checksum as a sender offloading it leaves it: the pseudo
    # header's sum, which segmentation completes for each piece.
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(
        '>BBH', 0, socket.IPPROTO_UDP, 8 + len(body))
    udp = udp[:6] + struct.pack('>H', ~ipv4_checksum(pseudo) & 0xFFFF)
    return ip + udp + body, seg_size


def in_netns(ns, make):
    """Calls `make()` inside network namespace `ns` (as `ip netns` names
    it) and returns what it made: a socket keeps its namespace for life."""
    libc = ctypes.CDLL(None, use_errno=True)
    here = os.open('/proc/self/ns/net', os.O_RDONLY)
    there = os.open(f'/run/netns/{ns}', os.O_RDONLY)
    try:
        if libc.setns(there, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f'setns into {ns}')
        try:
            return make()
        finally:
            if libc.setns(here, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), 'setns back')
    finally:
        os.close(here)
        os.close(there)


class Response:
    """A packet oxe sent to the fake peer, its headers decoded."""

    def __init__(self, data):
        self.raw = data
        self.opcode, _, _, qpn, psn = struct.unpack('>BBHII', data[:12])
        self.dest_qpn = qpn & 0xFFFFFF
        self.psn = psn & 0xFFFFFF
        self.rest = data[12:-4]

    @property
    def syndrome(self):
        """The AETH syndrome of an ACK, NAK or read response with one."""
        return self.rest[0]

    def __repr__(self):
        return f'<opcode {self.opcode:#04x} qpn {self.dest_qpn:#x} psn {self.psn}>'


class Peer:
    """A hostile peer in namespace `ns` at address `addr`: injects frames
    with any source address and hears what oxe sends to `addr`."""

    def __init__(self, ns, addr):
        self.ns = ns
        self.addr = addr
        self.link = None
        self.raw = in_netns(ns, lambda: socket.socket(
            socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW))
        self.udp = in_netns(ns, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        self.udp.bind((addr, ROCE_PORT))

    def close(self):
        self.raw.close()
        self.udp.close()
        if getattr(self, 'link', None):
            self.link.close()

    def inject_batch(self, dst, packets, ifname='veth1', peer_if='veth0', **kw):
        """Sends `packets` to `dst` as one GSO datagram (gso_batch), as a
        sender on this host that offloads UDP segmentation hands it to
        the stack: through a packet socket with a virtio-net header on
        the peer's end of the veth pair, which carries it whole to the
        other end. The first call opens that socket."""
        if getattr(self, 'link', None) is None:
            self.link = in_netns(self.ns, lambda: socket.socket(
                socket.AF_PACKET, socket.SOCK_RAW, 0))
            self.link.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            self.link.bind((ifname, 0))
            self.src_mac = self.link.getsockname()[4]
        with open(f'/sys/class/net/{peer_if}/address') as f:
            dst_mac = bytes.fromhex(f.read().strip().replace(':', ''))
        datagram, seg_size = gso_batch(self.addr, dst, packets, **kw)
        eth = dst_mac + self.src_mac + struct.pack('>H', 0x0800)
        ip_len = (datagram[0] & 0x0F) * 4
        # struct virtio_net_hdr: flags, gso_type, hdr_len, gso_size,
        # csum_start, csum_offset (host order, little-endian here).
        vnet = struct.pack('<BBHHHH', VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_UDP_L4,
                           len(eth) + ip_len + 8, seg_size, len(eth) + ip_len, 6)
        self.link.send(vnet + eth + datagram)

    def inject(self, dst, packet, src=None, **kw):
        """Sends `packet` (BTH onwards, no ICRC) to `dst` from `src`
        (default: the peer's own address)."""
        self.raw.sendto(frame(src or self.addr, dst, packet, **kw), (dst, 0))

    def drain(self):
        """Forgets everything received so far."""
        while self.receive(0) is not None:
            pass

    def receive(self, timeout=5.0):
        """The next packet oxe sent here, or None after `timeout` seconds."""
        r, _, _ = select.select([self.udp], [], [], timeout)
        if not r:
            return None
        return Response(self.udp.recv(65536))

    def expect(self, opcode, timeout=10.0):
        """The next packet of `opcode`, skipping others (retransmissions);
        None if none comes within `timeout` seconds."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r = self.receive(left)
            if r is None or r.opcode == opcode:
                return r
