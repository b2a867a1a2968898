#!/usr/bin/python3
"""Payload over the wire, judged byte for byte: device OXE_DEV_A (veth0) and
device OXE_DEV_B (veth1, netns peer), both opened from this one process
(ib_core's shared mode). Each case runs both ways: in its test_..._a_to_b A
requests and B responds, in its test_..._b_to_a B requests and A responds.
Either device may be Soft-RoCE, so only standard verbs are used.

A completion with status success says little about the bytes: a packet
placed at another packet's offset, a message cut short or one byte written
past a buffer's end all complete. So every buffer a transfer lands in lies
between two guard pages, and after each transfer the whole of it, guards
included, is compared byte for byte with what it should hold: the message
where it belongs, the guard pattern everywhere else. Each transfer carries a
pseudo-random pattern of its own, seeded by the test and the transfer, with
no period, so that stale data, another transfer's data or a packet at
another packet's offset cannot pass for the right bytes. Each completion is
checked too: its status, opcode, wr_id, QP and, where the verbs define it,
byte_len and immediate data.

The path MTU is 1024: anything above 1 KiB travels in several packets. The
QPs start eight PSNs before the 24-bit PSN wraps, so that the longer
messages cross the wrap.

RC:
- SENDs of 1 byte, one MTU, one byte more and 9000 bytes, some with
  immediate data, into receive buffers at odd offsets;
- RDMA WRITEs of 64 KiB, of 12345 bytes at offset 7, of the MR's last byte,
  each followed by a WRITE with immediate, which consumes a receive: its
  completion says the responder has placed everything before it; and
  multi-packet WRITEs with immediate that carry the data themselves;
- eight RDMA READs posted at once, four outstanding at most
  (max_rd_atomic), each into a region of its own;
- FETCH_ADD and CMP_SWP on 64-bit words in host order (the verbs'
  semantics), with the carries and the compares that a 32-bit or
  byte-swapped implementation gets wrong, judged by the original values
  returned and by the responder's memory after.
RC over a link that loses packets (netem on both veths, so that requests,
responses and acknowledgements are all lost): 24 READs of 16 KiB posted at
once, four outstanding, each into a slot of its own between guard bytes,
all complete and each slot holds its source's bytes; 150 FETCH_ADDs of 1,
one at a time, each return the word's value before it and leave it 150
higher, then 50 CMP_SWPs, one at a time, each move it on by one (a lost
atomic acknowledgement makes the requester ask again, and the responder
answers the duplicate from the result it saved, without adding or swapping
again). netem must have dropped something, or the round runs again, a few
times at most.
UC: the same SENDs and WRITEs; the WRITE with immediate fences them as for
RC, which matters more here: a UC requester's completion says nothing of
the responder. And SENDs over a link that loses packets (netem on the
sender's veth): a message that lost a packet is never completed, its
receive takes the next message, and every message completed is whole.
SRQ: an RC responder takes its receives from a shared receive queue;
messages of distinct lengths, and each completion's wr_id names the buffer
its message must be in. Two receives stay posted for a second round, and
their buffers stay untouched until then.
UD: datagrams up to the MTU, after the 40 bytes the receive buffer keeps for
the GRH; for RoCE v2 over IPv4 its last 20 are the packet's IPv4 header,
whose addresses must be the two GIDs' (ibv_init_ah_from_wc() reads them to
address a reply).
"""
import ctypes
import itertools
import mmap
import random
import re
import socket
import struct
import subprocess
import time
import unittest

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.libibverbs_enums import ibv_access_flags as acc
from pyverbs.libibverbs_enums import (ibv_atomic_cap, ibv_mtu, ibv_qp_type, ibv_wc_flags,
                                      ibv_wc_opcode, ibv_wc_status, ibv_wr_opcode)
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

from test_wire_enforce import DEV_A, DEV_B, GID_A, GID_B, GUARD, MTU, PAGE, QKEY, libc

RC, UC, UD = ibv_qp_type.IBV_QPT_RC, ibv_qp_type.IBV_QPT_UC, ibv_qp_type.IBV_QPT_UD
LOCAL = acc.IBV_ACCESS_LOCAL_WRITE
GRH = 40
FIRST_PSN = 0x1000000 - 8
RD_ATOMIC = 4
POLL_SECONDS = 10
KIB64 = 64 * 1024

# (length, immediate or None): RC and UC SENDs.
SENDS = ((1, None), (MTU, None), (MTU + 1, 0x0a1b2c3d), (9000, None), (9000, 0xd4c3b2a1))
# (offset in the target, length, immediate or None): RC and UC WRITEs into
# a target of WRITE_TARGET bytes.
WRITE_TARGET = KIB64 + PAGE
WRITES = ((0, KIB64, None), (7, 12345, None), (PAGE, MTU, None), (WRITE_TARGET - 1, 1, None),
          (5, 3 * MTU + 1, 0x5eed0001), (PAGE - 9, KIB64, 0x5eed0002))
# (offset in the source, length, offset in the READ's own region): RC
# READs from a source of READ_SOURCE bytes.
READ_SOURCE = 33 * PAGE
READS = ((0, KIB64, 0), (7, 12345, 3), (KIB64 + 1, KIB64, 1), (PAGE - 3, 1, 0), (2 * MTU, MTU, 0),
         (12345, MTU + 1, 5), (99999, 30001, 2), (READ_SOURCE - PAGE - 1, PAGE + 1, 7))
# Messages into an SRQ's receives, each of SRQ_CAP bytes in a slot of its own.
SRQ_SENDS = (1, MTU, MTU + 1, 2 * MTU, 4999, 5000, 3 * MTU, 777)
SRQ_FIRST_ROUND = 6
SRQ_SLOT = 2 * PAGE
SRQ_CAP = 5000
UD_SIZES = (1, 777, MTU)
# UC under loss: messages of 40 packets, so that an oxe sender's GSO
# batches (at most 27 packets) cut each in two and a loss can take part of
# a message; rounds of UC_ROUND_MESSAGES until a message was lost and one
# got through.
UC_LOSS_MESSAGE = 40 * MTU
UC_LOSS_PERCENT = 3
UC_ROUND_MESSAGES = 12
UC_ROUNDS = 10
# RC under loss, on both veths. A round runs again while netem dropped
# nothing (netem drops skbs, and an oxe sender's GSO batch of packets is
# one), RC_LOSS_ROUNDS rounds at most. Each test has
# RC_LOSS_SECONDS in all and RC_LOSS_POLL_SECONDS for a completion: a lost
# packet costs a retransmit timeout (67 ms for timeout 14) or more, and the
# guest may be slow.
RC_LOSS_PERCENT = 5
RC_LOSS_ROUNDS = 4
RC_LOSS_SECONDS = 120
RC_LOSS_POLL_SECONDS = 30
# READs of RC_LOSS_READ bytes: the i-th from RC_LOSS_READ_STEP * i + 5 of
# the source, into RC_LOSS_GAP + RC_LOSS_SLOT * i of the destination, with
# RC_LOSS_GAP guard bytes before, between and after the slots.
RC_LOSS_READS = 24
RC_LOSS_READ = 16 * 1024
RC_LOSS_READ_STEP = RC_LOSS_READ + 13
RC_LOSS_GAP = 61
RC_LOSS_SLOT = RC_LOSS_READ + RC_LOSS_GAP
# Atomics on the word at RC_LOSS_WORD, which starts where the FETCH_ADDs
# carry into its high 32 bits.
RC_LOSS_FADDS = 150
RC_LOSS_CSWPS = 50
RC_LOSS_WORD = 8 * 37
RC_LOSS_WORD_START = 2**32 - 100
# Each device's veth: the command prefix that reaches it.
VETHS = (('veth0', []), ('veth1', ['ip', 'netns', 'exec', 'peer']))


def name(enum, value):
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def ipv4(gid):
    """The IPv4 address of a v4-mapped GID."""
    return bytes.fromhex(str(gid).replace(':', ''))[12:]


def poll(cq, what, seconds=POLL_SECONDS):
    """The next completion on `cq`; none within `seconds` fails the test."""
    deadline = time.monotonic() + seconds
    while True:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
        if time.monotonic() > deadline:
            raise AssertionError(f'{what}: no completion in {seconds:.3g} s')
        time.sleep(0.0001)


class Region:
    """`size` bytes, in whole pages, between two guard pages, the middle
    registered with `access`. It keeps what every byte, guards included,
    should hold; offsets are from the MR's start."""

    def __init__(self, test, pd, size, access):
        self.size = -(-size // PAGE) * PAGE
        self.total = self.size + 2 * PAGE
        base = libc.mmap(None, self.total, mmap.PROT_READ | mmap.PROT_WRITE,
                          mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if base in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), 'mmap failed')
        test.addCleanup(libc.munmap, base, self.total)
        self.base, self.start = base, base + PAGE
        self.clear()
        self.mr = MR(pd, self.size, access, address=self.start)
        test.addCleanup(self.mr.close)
        self.lkey, self.rkey = self.mr.lkey, self.mr.rkey

    def clear(self):
        """The guard pattern everywhere, and nothing placed."""
        ctypes.memset(self.base, GUARD, self.total)
        self.want = bytearray([GUARD]) * self.total
        self.placed = []
        self.loose = []

    def addr(self, off):
        return self.start + off

    def sge(self, off, length):
        return SGE(self.start + off, length, self.lkey)

    def read(self, off, length):
        return ctypes.string_at(self.start + off, length)

    def put(self, off, data):
        """Writes `data` from this process (a source the device reads)."""
        ctypes.memmove(self.start + off, data, len(data))
        self.want[PAGE + off:PAGE + off + len(data)] = data

    def expect(self, off, data):
        """The device should have written `data` at `off`."""
        self.want[PAGE + off:PAGE + off + len(data)] = data
        self.placed.append((off, len(data)))

    def ignore(self, off, length):
        """Bytes the device fills as it likes."""
        self.loose.append((off, length))

    def where(self, off):
        if off < 0:
            return 'in the guard page before the MR'
        if off >= self.size:
            return 'in the guard page after the MR'
        for start, n in reversed(self.placed):
            if start <= off < start + n:
                return f'byte {off - start} of the {n}-byte message, in its packet {(off - start) // MTU}'
        return 'outside the message'

    def check(self, test, what):
        got = bytearray(ctypes.string_at(self.base, self.total))
        for off, n in self.loose:
            got[PAGE + off:PAGE + off + n] = self.want[PAGE + off:PAGE + off + n]
        if got == self.want:
            return
        diff = [i for i in range(self.total) if got[i] != self.want[i]]
        first, last = diff[0] - PAGE, diff[-1] - PAGE
        test.fail(f'{what}: {len(diff)} wrong byte(s), from offset {first} to {last} of the MR; '
                  f'the first, {self.where(first)}, is {got[diff[0]]:#04x} where '
                  f'{self.want[diff[0]]:#04x} belongs')


class Device:
    """One device, opened from this process: a context, a PD, its RoCE v2 GID."""

    def __init__(self, test, dev, gid_index):
        self.name, self.gid_index = dev, gid_index
        self.ctx = Context(name=dev)
        test.addCleanup(self.ctx.close)
        self.pd = PD(self.ctx)
        test.addCleanup(self.pd.close)
        self.gid = self.ctx.query_gid(1, gid_index)
        self.atomic_caps = self.ctx.query_device().atomic_caps


class End:
    """A QP on one device, with a CQ of its own for both its queues."""

    def __init__(self, test, dev, qp_type, srq=None):
        self.dev, self.qp_type = dev, qp_type
        self.cq = CQ(dev.ctx, 128)
        test.addCleanup(self.cq.close)
        rq = 0 if srq else 32
        cap = QPCap(max_send_wr=32, max_recv_wr=rq, max_send_sge=1, max_recv_sge=min(rq, 1))
        self.qp = QP(dev.pd, QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, srq=srq, cap=cap))
        test.addCleanup(self.qp.close)
        self.num = self.qp.qp_num


def connect(req, resp):
    """Both QPs of an RC or UC pair to RTS, each addressed to the other; RC
    with retries and RDMA READ / atomic depth both ways."""
    rc = req.qp_type == RC
    for me, other in ((req, resp), (resp, req)):
        attr = QPAttr(port_num=1, path_mtu=ibv_mtu.IBV_MTU_1024)
        flags = LOCAL | acc.IBV_ACCESS_REMOTE_WRITE
        if rc:
            flags |= acc.IBV_ACCESS_REMOTE_READ | acc.IBV_ACCESS_REMOTE_ATOMIC
        attr.qp_access_flags = flags
        attr.dest_qp_num = other.num
        attr.rq_psn = attr.sq_psn = FIRST_PSN
        attr.ah_attr = AHAttr(port_num=1, is_global=1,
                              gr=GlobalRoute(dgid=other.dev.gid, sgid_index=me.dev.gid_index))
        if rc:
            attr.max_rd_atomic = attr.max_dest_rd_atomic = RD_ATOMIC
            attr.timeout, attr.retry_cnt, attr.rnr_retry, attr.min_rnr_timer = 14, 7, 7, 12
        me.qp.to_rts(attr)


class Wire(unittest.TestCase):
    def setUp(self):
        self.a = Device(self, DEV_A, GID_A)
        self.b = Device(self, DEV_B, GID_B)
        self.seeds = itertools.count()
        self.way = ''

    def pattern(self, n):
        """`n` bytes that no other transfer of the run carries."""
        return random.Random(f'{self.id()}/{next(self.seeds)}').randbytes(n)

    def region(self, dev, size, access=LOCAL):
        return Region(self, dev.pd, size, access)

    def pair(self, req, resp, qp_type, srq=None):
        """A requester QP on `req` and a responder QP on `resp`, ready."""
        self.way = f'{req.name} to {resp.name}'
        r, s = End(self, req, qp_type), End(self, resp, qp_type, srq)
        if qp_type == UD:
            for e in (r, s):
                attr = QPAttr(port_num=1)
                attr.qkey = QKEY
                e.qp.to_rts(attr)
        else:
            connect(r, s)
        return r, s

    def done(self, end, what, opcode, wr_id, byte_len=None):
        """The next completion on `end`: a success of `opcode` for `wr_id`."""
        wc = poll(end.cq, f'{self.way}: {what}, at {end.dev.name}')
        self.judge(end, wc, what, opcode, wr_id, byte_len)
        return wc

    def judge(self, end, wc, what, opcode, wr_id=None, byte_len=None):
        what = f'{self.way}: {what}, at {end.dev.name}'
        self.assertEqual(name(ibv_wc_status, wc.status), 'IBV_WC_SUCCESS', f'{what}: status')
        self.assertEqual(name(ibv_wc_opcode, wc.opcode), name(ibv_wc_opcode, opcode), f'{what}: opcode')
        if wr_id is not None:
            self.assertEqual(wc.wr_id, wr_id, f'{what}: wr_id')
        self.assertEqual(wc.qp_num, end.num, f'{what}: the completion of another QP')
        if byte_len is not None:
            self.assertEqual(wc.byte_len, byte_len, f'{what}: byte_len')

    def imm(self, wc, imm, what):
        has = bool(wc.wc_flags & ibv_wc_flags.IBV_WC_WITH_IMM)
        self.assertEqual(has, imm is not None, f'{self.way}: {what}: IBV_WC_WITH_IMM')
        if imm is not None:
            self.assertEqual(f'{socket.ntohl(wc.imm_data):#010x}', f'{imm:#010x}',
                             f'{self.way}: {what}: the immediate data')

    def quiet(self, *ends):
        for e in ends:
            n, wcs = e.cq.poll()
            if n:
                self.fail(f'{self.way}: a completion too many at {e.dev.name}: wr_id {wcs[0].wr_id}, '
                          f'{name(ibv_wc_opcode, wcs[0].opcode)}, {name(ibv_wc_status, wcs[0].status)}')


class Connected:
    """SENDs and WRITEs over an RC or a UC pair (QPT)."""

    QPT = None

    def sends(self, req_dev, resp_dev):
        req, resp = self.pair(req_dev, resp_dev, self.QPT)
        src = self.region(req_dev, 9000 + PAGE)
        dst = self.region(resp_dev, 9000 + PAGE)
        for i, (n, imm) in enumerate(SENDS):
            what = f'SEND {i}, {n} bytes' + (' with immediate' if imm is not None else '')
            soff, roff = 2 * i + 1, 4 * i + 3
            data = self.pattern(n)
            src.clear()
            dst.clear()
            src.put(soff, data)
            resp.qp.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[dst.sge(roff, dst.size - roff)]))
            op = ibv_wr_opcode.IBV_WR_SEND if imm is None else ibv_wr_opcode.IBV_WR_SEND_WITH_IMM
            req.qp.post_send(SendWR(wr_id=i, opcode=op, num_sge=1, sg=[src.sge(soff, n)],
                                    imm_data=0 if imm is None else socket.htonl(imm)))
            self.done(req, what, ibv_wc_opcode.IBV_WC_SEND, i)
            wc = self.done(resp, what, ibv_wc_opcode.IBV_WC_RECV, 100 + i, n)
            self.imm(wc, imm, what)
            dst.expect(roff, data)
            dst.check(self, f'{self.way}: {what}: the receive buffer')
            src.check(self, f'{self.way}: {what}: the source')
        self.quiet(req, resp)

    def writes(self, req_dev, resp_dev):
        req, resp = self.pair(req_dev, resp_dev, self.QPT)
        remote = LOCAL | acc.IBV_ACCESS_REMOTE_WRITE
        src = self.region(req_dev, WRITE_TARGET)
        dst = self.region(resp_dev, WRITE_TARGET, remote)
        fence_src = self.region(req_dev, PAGE)
        fence_dst = self.region(resp_dev, PAGE, remote)
        for i, (off, n, imm) in enumerate(WRITES):
            what = f'WRITE {i}, {n} bytes at {off}' + (' with immediate' if imm is not None else '')
            soff = 2 * i + 1
            data = self.pattern(n)
            src.clear()
            dst.clear()
            src.put(soff, data)
            if imm is None:
                op = ibv_wr_opcode.IBV_WR_RDMA_WRITE
            else:
                op = ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM
                resp.qp.post_recv(RecvWR(wr_id=100 + i, num_sge=0))
            wr = SendWR(wr_id=i, opcode=op, num_sge=1, sg=[src.sge(soff, n)],
                        imm_data=0 if imm is None else socket.htonl(imm))
            wr.set_wr_rdma(dst.rkey, dst.addr(off))
            req.qp.post_send(wr)
            self.done(req, what, ibv_wc_opcode.IBV_WC_RDMA_WRITE, i)
            if imm is None:
                self.fence(req, resp, fence_src, fence_dst, 1000 + i, f'the fence after {what}')
            else:
                # For a WRITE with immediate, byte_len is the WRITE's length.
                wc = self.done(resp, what, ibv_wc_opcode.IBV_WC_RECV_RDMA_WITH_IMM, 100 + i, n)
                self.imm(wc, imm, what)
            dst.expect(off, data)
            dst.check(self, f'{self.way}: {what}: the target')
            src.check(self, f'{self.way}: {what}: the source')
        self.quiet(req, resp)

    def fence(self, req, resp, src, dst, k, what):
        """A WRITE with immediate: once its receive completes, the responder
        has placed all that came before it on the QP."""
        marker = self.pattern(8)
        src.clear()
        dst.clear()
        src.put(0, marker)
        resp.qp.post_recv(RecvWR(wr_id=k, num_sge=0))
        wr = SendWR(wr_id=k, opcode=ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                    sg=[src.sge(0, 8)], imm_data=socket.htonl(k))
        wr.set_wr_rdma(dst.rkey, dst.addr(0))
        req.qp.post_send(wr)
        self.done(req, what, ibv_wc_opcode.IBV_WC_RDMA_WRITE, k)
        wc = self.done(resp, what, ibv_wc_opcode.IBV_WC_RECV_RDMA_WITH_IMM, k, 8)
        self.imm(wc, k, what)
        dst.expect(0, marker)
        dst.check(self, f'{self.way}: {what}')

    def test_send_a_to_b(self):
        self.sends(self.a, self.b)

    def test_send_b_to_a(self):
        self.sends(self.b, self.a)

    def test_write_a_to_b(self):
        self.writes(self.a, self.b)

    def test_write_b_to_a(self):
        self.writes(self.b, self.a)


class Rc(Connected, Wire):
    QPT = RC

    def reads(self, req_dev, resp_dev):
        req, resp = self.pair(req_dev, resp_dev, RC)
        source = self.region(resp_dev, READ_SOURCE, LOCAL | acc.IBV_ACCESS_REMOTE_READ)
        image = self.pattern(READ_SOURCE)
        source.put(0, image)
        dsts = [self.region(req_dev, loff + n) for _, n, loff in READS]
        # All posted at once: the device keeps RD_ATOMIC outstanding and
        # queues the rest.
        for i, ((roff, n, loff), dst) in enumerate(zip(READS, dsts)):
            wr = SendWR(wr_id=i, opcode=ibv_wr_opcode.IBV_WR_RDMA_READ, num_sge=1, sg=[dst.sge(loff, n)])
            wr.set_wr_rdma(source.rkey, source.addr(roff))
            req.qp.post_send(wr)
        # In the order posted, each with byte_len the READ's length.
        for i, (roff, n, loff) in enumerate(READS):
            self.done(req, f'READ {i}, {n} bytes from {roff}', ibv_wc_opcode.IBV_WC_RDMA_READ, i, n)
        for i, ((roff, n, loff), dst) in enumerate(zip(READS, dsts)):
            dst.expect(loff, image[roff:roff + n])
            dst.check(self, f'{self.way}: READ {i}, {n} bytes from {roff} to {loff}')
        source.check(self, f'{self.way}: the READs\' source')
        self.quiet(req, resp)

    def atomics(self, req_dev, resp_dev):
        for d in (req_dev, resp_dev):
            if d.atomic_caps == ibv_atomic_cap.IBV_ATOMIC_NONE:
                self.skipTest(f'{d.name}: atomic_caps IBV_ATOMIC_NONE')
        req, resp = self.pair(req_dev, resp_dev, RC)
        words = self.region(resp_dev, PAGE, LOCAL | acc.IBV_ACCESS_REMOTE_ATOMIC)
        results = self.region(req_dev, PAGE)

        def value():
            return int.from_bytes(self.pattern(8), 'little')

        start = {0: value(), 8: 2**64 - 16, 16: 2**32 - 1, 24: value(), 32: value(), 40: value(),
                 PAGE - 8: value()}
        for off, v in start.items():
            words.put(off, struct.pack('=Q', v))
        fadd, cswp = ibv_wr_opcode.IBV_WR_ATOMIC_FETCH_AND_ADD, ibv_wr_opcode.IBV_WR_ATOMIC_CMP_AND_SWP
        swap = [value() for _ in range(5)]
        # (opcode, word, compare or add, swap, what)
        ops = ((fadd, 0, value(), 0, 'FETCH_ADD'),
               (fadd, 0, value(), 0, 'a second FETCH_ADD on the same word'),
               (fadd, 8, 0x20, 0, 'FETCH_ADD past 2^64'),
               (fadd, 16, 1, 0, 'FETCH_ADD carrying into the high 32 bits'),
               (cswp, 24, start[24], swap[0], 'CMP_SWP that matches'),
               (cswp, 24, swap[0], swap[1], 'CMP_SWP that matches what the previous one swapped in'),
               (cswp, 32, start[32] ^ (1 << 40), swap[2], 'CMP_SWP that differs in the high 32 bits only'),
               (cswp, 40, start[40] ^ 1, swap[3], 'CMP_SWP that differs in the low 32 bits only'),
               (cswp, PAGE - 8, start[PAGE - 8], swap[4], 'CMP_SWP on the MR\'s last word'))
        for i, (op, off, arg, new, _) in enumerate(ops):
            wr = SendWR(wr_id=i, opcode=op, num_sge=1, sg=[results.sge(8 * i, 8)])
            wr.set_wr_atomic(words.rkey, words.addr(off), arg, new)
            req.qp.post_send(wr)
        mem = dict(start)
        for i, (op, off, arg, new, what) in enumerate(ops):
            what = f'{what} at {off}'
            old = mem[off]
            if op == fadd:
                mem[off] = (old + arg) % 2**64
                opcode = ibv_wc_opcode.IBV_WC_FETCH_ADD
            else:
                mem[off] = new if old == arg else old
                opcode = ibv_wc_opcode.IBV_WC_COMP_SWAP
            self.done(req, what, opcode, i, 8)
            got = struct.unpack('=Q', results.read(8 * i, 8))[0]
            self.assertEqual(f'{got:#018x}', f'{old:#018x}', f'{self.way}: {what}: the original value')
            results.expect(8 * i, struct.pack('=Q', old))
        for off, v in mem.items():
            got = struct.unpack('=Q', words.read(off, 8))[0]
            self.assertEqual(f'{got:#018x}', f'{v:#018x}', f'{self.way}: the word at {off} after')
            words.expect(off, struct.pack('=Q', v))
        words.check(self, f'{self.way}: the atomics\' target')
        results.check(self, f'{self.way}: the original values')
        self.quiet(req, resp)

    def test_read_a_to_b(self):
        self.reads(self.a, self.b)

    def test_read_b_to_a(self):
        self.reads(self.b, self.a)

    def test_atomics_a_to_b(self):
        self.atomics(self.a, self.b)

    def test_atomics_b_to_a(self):
        self.atomics(self.b, self.a)


class Uc(Connected, Wire):
    QPT = UC


class UcLoss(Wire):
    """UC over a lossy link: a message that loses a packet is dropped whole,
    never completed short or with a hole, and its receive takes the next
    message (IBTA 9.8.3: UC has no retransmission; the responder discards
    what it has of a message whose packets it missed)."""

    def netem(self, dev, on):
        """Packet loss on the sending device's veth (its egress)."""
        cmd = ['tc', 'qdisc', 'add' if on else 'del', 'dev']
        cmd += ['veth0'] if dev is self.a else ['veth1']
        cmd += ['root', 'netem', 'loss', f'{UC_LOSS_PERCENT}%'] if on else ['root']
        if dev is not self.a:
            cmd = ['ip', 'netns', 'exec', 'peer'] + cmd
        subprocess.run(cmd, check=True)

    def lossy_sends(self, req_dev, resp_dev):
        req, resp = self.pair(req_dev, resp_dev, UC)
        slots = 2 * UC_ROUND_MESSAGES
        src = self.region(req_dev, UC_ROUND_MESSAGES * UC_LOSS_MESSAGE)
        dst = self.region(resp_dev, slots * UC_LOSS_MESSAGE)
        posted = []                  # receive serials, in posting order
        serial = itertools.count()
        seq = itertools.count()
        sent = {}                    # message number: its bytes
        got = []                     # message numbers received, in order
        lost = False
        for rnd in range(UC_ROUNDS):
            while len(posted) < UC_ROUND_MESSAGES + 1:
                k = next(serial)
                resp.qp.post_recv(RecvWR(wr_id=k, num_sge=1,
                                         sg=[dst.sge((k % slots) * UC_LOSS_MESSAGE, UC_LOSS_MESSAGE)]))
                posted.append(k)
            self.netem(req_dev, True)
            try:
                first = None
                for i in range(UC_ROUND_MESSAGES):
                    m = next(seq)
                    first = m if first is None else first
                    data = struct.pack('>I', m) + self.pattern(UC_LOSS_MESSAGE - 4)
                    sent[m] = data
                    src.put(i * UC_LOSS_MESSAGE, data)
                    req.qp.post_send(SendWR(wr_id=m, opcode=ibv_wr_opcode.IBV_WR_SEND, num_sge=1,
                                            sg=[src.sge(i * UC_LOSS_MESSAGE, UC_LOSS_MESSAGE)]))
                # A UC send completes once sent: all of the round is on the
                # wire (or lost) before the link is made whole again.
                for i in range(UC_ROUND_MESSAGES):
                    self.done(req, f'lossy SEND {first + i}', ibv_wc_opcode.IBV_WC_SEND, first + i)
            finally:
                self.netem(req_dev, False)
            # The marker: one packet on a clean link; once it is received,
            # so is everything of the round that will ever be.
            m = next(seq)
            marker = struct.pack('>I', m) + b'mark'
            sent[m] = marker
            src.put(0, marker)
            req.qp.post_send(SendWR(wr_id=m, opcode=ibv_wr_opcode.IBV_WR_SEND, num_sge=1,
                                    sg=[src.sge(0, len(marker))]))
            self.done(req, f'marker SEND {m}', ibv_wc_opcode.IBV_WC_SEND, m)
            while True:
                what = f'round {rnd}: receive {posted[0]}'
                wc = poll(resp.cq, f'{self.way}: {what}, at {resp_dev.name}')
                self.judge(resp, wc, what, ibv_wc_opcode.IBV_WC_RECV)
                # Receives are taken in order: a dropped message leaves its
                # receive to the next one.
                self.assertEqual(wc.wr_id, posted[0], f'{self.way}: {what}: a receive taken out of order')
                k = posted.pop(0)
                off = (k % slots) * UC_LOSS_MESSAGE
                head = dst.read(off, 4)
                n = struct.unpack('>I', head)[0]
                self.assertIn(n, sent, f'{self.way}: {what}: holds no message that was sent')
                self.assertGreater(n, got[-1] if got else -1,
                                   f'{self.way}: {what}: message {n} after message {got[-1] if got else None}')
                self.assertEqual(wc.byte_len, len(sent[n]), f'{self.way}: {what}: message {n}: byte_len')
                self.assertEqual(dst.read(off, len(sent[n])), sent[n],
                                 f'{self.way}: {what}: message {n} received with wrong bytes')
                lost = lost or n != (got[-1] + 1 if got else 0)
                got.append(n)
                if n == m:
                    break
            self.quiet(req, resp)
            if lost and len(got) > rnd + 1:
                break
        self.assertTrue(lost, f'{self.way}: {UC_ROUNDS} rounds at {UC_LOSS_PERCENT}% loss lost no message: '
                        'the test tested nothing')
        self.assertGreater(len(got), rnd + 1, f'{self.way}: no message but the markers got through')

    def test_lost_packet_drops_its_message_a_to_b(self):
        self.lossy_sends(self.a, self.b)

    def test_lost_packet_drops_its_message_b_to_a(self):
        self.lossy_sends(self.b, self.a)


class RcLoss(Wire):
    """RC over a link that loses packets both ways: every request completes,
    with the right bytes and values, once the retries have filled the gaps.
    Each round runs with netem loss on both veths and ends with both
    removed; a round in which netem dropped nothing runs again."""

    def setUp(self):
        super().setUp()
        self.deadline = time.monotonic() + RC_LOSS_SECONDS

    def done(self, end, what, opcode, wr_id, byte_len=None):
        """As Wire.done, with RC_LOSS_POLL_SECONDS for the completion,
        within the test's RC_LOSS_SECONDS."""
        what_at = f'{self.way}: {what}, at {end.dev.name}'
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.fail(f'{what_at}: not reached within the test\'s {RC_LOSS_SECONDS} s')
        wc = poll(end.cq, what_at, min(RC_LOSS_POLL_SECONDS, left))
        self.judge(end, wc, what, opcode, wr_id, byte_len)
        return wc

    @staticmethod
    def dropped(veth, prefix):
        """What netem on `veth` has dropped, from `tc -s qdisc show`'s
        "Sent ... (dropped N, overlimits ...)"."""
        out = subprocess.run(prefix + ['tc', '-s', 'qdisc', 'show', 'dev', veth],
                             check=True, capture_output=True, text=True).stdout
        if 'netem' not in out or not re.search(r'\(dropped \d+', out):
            raise AssertionError(f'{veth}: no netem statistics in `tc -s qdisc show`: {out!r}')
        return sum(int(n) for n in re.findall(r'\(dropped (\d+)', out))

    def lossy(self, traffic):
        """Runs `traffic` with netem loss on both veths, removed after
        (also after a failure); returns how many packets netem dropped."""
        added = []
        try:
            for veth, prefix in VETHS:
                subprocess.run(prefix + ['tc', 'qdisc', 'add', 'dev', veth, 'root', 'netem', 'loss',
                                         f'{RC_LOSS_PERCENT}%'], check=True)
                added.append((veth, prefix))
            traffic()
            return sum(self.dropped(veth, prefix) for veth, prefix in added)
        finally:
            stuck = [veth for veth, prefix in added
                     if subprocess.run(prefix + ['tc', 'qdisc', 'del', 'dev', veth, 'root']).returncode]
            if stuck:
                raise RuntimeError(f'cannot remove netem from {", ".join(stuck)}')

    def must_have_dropped(self, dropped, what):
        self.assertGreater(dropped, 0, f'{self.way}: {RC_LOSS_ROUNDS} rounds of {what} at '
                           f'{RC_LOSS_PERCENT}% loss on both veths, and netem dropped nothing: '
                           'the test tested nothing')

    def lossy_reads(self, req_dev, resp_dev):
        req, resp = self.pair(req_dev, resp_dev, RC)
        source = self.region(resp_dev, RC_LOSS_READ_STEP * RC_LOSS_READS + 5,
                             LOCAL | acc.IBV_ACCESS_REMOTE_READ)
        dst = self.region(req_dev, RC_LOSS_GAP + RC_LOSS_SLOT * RC_LOSS_READS)
        reads = [(RC_LOSS_READ_STEP * i + 5, RC_LOSS_GAP + RC_LOSS_SLOT * i) for i in range(RC_LOSS_READS)]
        for rnd in range(RC_LOSS_ROUNDS):
            # A pattern of the round's own: bytes of an earlier round, or
            # of another READ, cannot pass for the right ones.
            image = self.pattern(source.size)
            source.clear()
            source.put(0, image)
            dst.clear()

            def traffic():
                # All posted at once: RD_ATOMIC outstanding, the rest queued.
                for i, (roff, loff) in enumerate(reads):
                    wr = SendWR(wr_id=i, opcode=ibv_wr_opcode.IBV_WR_RDMA_READ, num_sge=1,
                                sg=[dst.sge(loff, RC_LOSS_READ)])
                    wr.set_wr_rdma(source.rkey, source.addr(roff))
                    req.qp.post_send(wr)
                for i, (roff, loff) in enumerate(reads):
                    self.done(req, f'round {rnd}: READ {i}, {RC_LOSS_READ} bytes from {roff}',
                              ibv_wc_opcode.IBV_WC_RDMA_READ, i, RC_LOSS_READ)

            dropped = self.lossy(traffic)
            for roff, loff in reads:
                dst.expect(loff, image[roff:roff + RC_LOSS_READ])
            dst.check(self, f'{self.way}: round {rnd}: the READs\' destination (READ i in '
                      f'{RC_LOSS_READ} bytes at {RC_LOSS_GAP} + {RC_LOSS_SLOT} * i)')
            source.check(self, f'{self.way}: round {rnd}: the READs\' source')
            self.quiet(req, resp)
            if dropped:
                break
        self.must_have_dropped(dropped, 'READs')

    def lossy_atomics(self, req_dev, resp_dev):
        for d in (req_dev, resp_dev):
            if d.atomic_caps == ibv_atomic_cap.IBV_ATOMIC_NONE:
                self.skipTest(f'{d.name}: atomic_caps IBV_ATOMIC_NONE')
        req, resp = self.pair(req_dev, resp_dev, RC)
        words = self.region(resp_dev, PAGE, LOCAL | acc.IBV_ACCESS_REMOTE_ATOMIC)
        results = self.region(req_dev, 8 * (RC_LOSS_FADDS + RC_LOSS_CSWPS))
        fadd, cswp = ibv_wr_opcode.IBV_WR_ATOMIC_FETCH_AND_ADD, ibv_wr_opcode.IBV_WR_ATOMIC_CMP_AND_SWP
        cur = RC_LOSS_WORD_START
        words.put(RC_LOSS_WORD, struct.pack('=Q', cur))

        def word():
            return struct.unpack('=Q', words.read(RC_LOSS_WORD, 8))[0]

        for rnd in range(RC_LOSS_ROUNDS):
            results.clear()
            start = cur

            def one(k, op, opcode, arg, new, what):
                """Atomic k, alone on the wire; it must return `cur`."""
                what = f'round {rnd}: {what}'
                wr = SendWR(wr_id=k, opcode=op, num_sge=1, sg=[results.sge(8 * k, 8)])
                wr.set_wr_atomic(words.rkey, words.addr(RC_LOSS_WORD), arg, new)
                req.qp.post_send(wr)
                self.done(req, what, opcode, k, 8)
                got = struct.unpack('=Q', results.read(8 * k, 8))[0]
                self.assertEqual(f'{got:#018x}', f'{cur:#018x}',
                                 f'{self.way}: {what}: the original value (the round started at {start:#x})')
                results.expect(8 * k, struct.pack('=Q', cur))

            def traffic():
                nonlocal cur
                for k in range(RC_LOSS_FADDS):
                    one(k, fadd, ibv_wc_opcode.IBV_WC_FETCH_ADD, 1, 0, f'FETCH_ADD {k} of 1')
                    cur = (cur + 1) % 2**64
                self.assertEqual(f'{word():#018x}', f'{cur:#018x}',
                                 f'{self.way}: round {rnd}: the word after {RC_LOSS_FADDS} FETCH_ADDs of 1 '
                                 f'from {start:#x}')
                for j in range(RC_LOSS_CSWPS):
                    new = (cur + 1) % 2**64
                    one(RC_LOSS_FADDS + j, cswp, ibv_wc_opcode.IBV_WC_COMP_SWAP, cur, new,
                        f'CMP_SWP {j} of {cur:#x} to {new:#x}')
                    cur = new

            dropped = self.lossy(traffic)
            self.assertEqual(f'{word():#018x}', f'{cur:#018x}',
                             f'{self.way}: round {rnd}: the word after {RC_LOSS_FADDS} FETCH_ADDs and '
                             f'{RC_LOSS_CSWPS} CMP_SWPs from {start:#x}')
            words.expect(RC_LOSS_WORD, struct.pack('=Q', cur))
            words.check(self, f'{self.way}: round {rnd}: the atomics\' target')
            results.check(self, f'{self.way}: round {rnd}: the original values')
            self.quiet(req, resp)
            if dropped:
                break
        self.must_have_dropped(dropped, 'atomics')

    def test_read_a_to_b(self):
        self.lossy_reads(self.a, self.b)

    def test_read_b_to_a(self):
        self.lossy_reads(self.b, self.a)

    def test_atomics_a_to_b(self):
        self.lossy_atomics(self.a, self.b)

    def test_atomics_b_to_a(self):
        self.lossy_atomics(self.b, self.a)


class Srq(Wire):
    def sends(self, req_dev, resp_dev):
        srq = SRQ(resp_dev.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
        self.addCleanup(srq.close)
        req, resp = self.pair(req_dev, resp_dev, RC, srq)
        count = len(SRQ_SENDS)
        src = self.region(req_dev, count * SRQ_SLOT)
        bufs = self.region(resp_dev, count * SRQ_SLOT)

        def at(k):
            return k * SRQ_SLOT + 2 * k + 1

        for k in range(count):
            srq.post_recv(RecvWR(wr_id=200 + k, num_sge=1, sg=[bufs.sge(at(k), SRQ_CAP)]))
        free = set(range(count))
        for batch in (range(SRQ_FIRST_ROUND), range(SRQ_FIRST_ROUND, count)):
            sent = []
            for j in batch:
                n = SRQ_SENDS[j]
                imm = 0x5a000000 + j if j % 2 else None
                data = self.pattern(n)
                src.put(at(j), data)
                op = ibv_wr_opcode.IBV_WR_SEND if imm is None else ibv_wr_opcode.IBV_WR_SEND_WITH_IMM
                req.qp.post_send(SendWR(wr_id=j, opcode=op, num_sge=1, sg=[src.sge(at(j), n)],
                                        imm_data=0 if imm is None else socket.htonl(imm)))
                sent.append((j, n, imm, data))
            for j, n, _, _ in sent:
                self.done(req, f'SEND {j}, {n} bytes', ibv_wc_opcode.IBV_WC_SEND, j)
            # A QP's receives complete in the order of its messages; which of
            # the SRQ's receives each one took, its wr_id says.
            for j, n, imm, data in sent:
                what = f'SEND {j}, {n} bytes'
                wc = poll(resp.cq, f'{self.way}: {what}, at {resp_dev.name}')
                self.judge(resp, wc, what, ibv_wc_opcode.IBV_WC_RECV, byte_len=n)
                k = wc.wr_id - 200
                self.assertIn(k, free, f'{self.way}: {what}: wr_id {wc.wr_id}, not a receive still posted')
                self.imm(wc, imm, what)
                free.remove(k)
                bufs.expect(at(k), data)
            self.quiet(req, resp)
            bufs.check(self, f'{self.way}: the receive buffers after SENDs {batch.start} to {batch.stop - 1}')
        self.assertEqual(free, set(), f'{self.way}: receives left')
        src.check(self, f'{self.way}: the sources')

    def test_send_a_to_b(self):
        self.sends(self.a, self.b)

    def test_send_b_to_a(self):
        self.sends(self.b, self.a)


class Ud(Wire):
    def sends(self, req_dev, resp_dev):
        req, resp = self.pair(req_dev, resp_dev, UD)
        ah = AH(req_dev.pd, attr=AHAttr(port_num=1, is_global=1,
                                        gr=GlobalRoute(dgid=resp_dev.gid, sgid_index=req_dev.gid_index)))
        self.addCleanup(ah.close)
        src = self.region(req_dev, MTU + PAGE)
        dst = self.region(resp_dev, GRH + MTU + PAGE)
        for i, n in enumerate(UD_SIZES):
            what = f'datagram {i}, {n} bytes'
            soff, roff = 2 * i + 1, 4 * i + 3
            data = self.pattern(n)
            src.clear()
            dst.clear()
            src.put(soff, data)
            resp.qp.post_recv(RecvWR(wr_id=300 + i, num_sge=1, sg=[dst.sge(roff, dst.size - roff)]))
            wr = SendWR(wr_id=i, opcode=ibv_wr_opcode.IBV_WR_SEND, num_sge=1, sg=[src.sge(soff, n)])
            wr.set_wr_ud(ah, resp.num, QKEY)
            req.qp.post_send(wr)
            self.done(req, what, ibv_wc_opcode.IBV_WC_SEND, i)
            wc = self.done(resp, what, ibv_wc_opcode.IBV_WC_RECV, 300 + i, GRH + n)
            self.assertEqual(wc.src_qp, req.num, f'{self.way}: {what}: src_qp')
            self.assertTrue(wc.wc_flags & ibv_wc_flags.IBV_WC_GRH, f'{self.way}: {what}: no IBV_WC_GRH')
            self.imm(wc, None, what)
            ip = dst.read(roff + 20, 20)
            self.assertEqual((ip[0] >> 4, ip[9], ip[12:16], ip[16:20]),
                             (4, socket.IPPROTO_UDP, ipv4(req_dev.gid), ipv4(resp_dev.gid)),
                             f'{self.way}: {what}: the IPv4 header in the GRH area '
                             '(version, protocol, source, destination)')
            # The rest of the GRH area is the device's to fill.
            dst.ignore(roff, GRH)
            dst.expect(roff + GRH, data)
            dst.check(self, f'{self.way}: {what}: the receive buffer')
            src.check(self, f'{self.way}: {what}: the source')
        self.quiet(req, resp)

    def test_send_a_to_b(self):
        self.sends(self.a, self.b)

    def test_send_b_to_a(self):
        self.sends(self.b, self.a)


if __name__ == '__main__':
    unittest.main()
