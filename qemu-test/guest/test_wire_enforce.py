#!/usr/bin/python3
"""What a responder lets a peer's UC and UD messages do to its memory, over
the wire: device OXE_DEV_A (veth0) sends, device OXE_DEV_B (veth1, netns
peer) responds, both opened from this one process (ib_core's shared mode).

UC has no NAK: a responder that skipped a check would let the peer write
anywhere, and the requester would still complete with success. So every
case is judged by the responder's memory: a 4 KiB page registered between
two guard pages, all three compared byte for byte with their contents
before the message. After each refused message, a WRITE with immediate on
the same QP (it consumes a receive, so its completion says the responder
has processed everything before it) fences the check, and shows that the
QP still works.

UD: a datagram with the wrong Q_Key is dropped and its receive stays for
the next one.
"""
import ctypes
import mmap
import os
import unittest

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.libibverbs_enums import (ibv_access_flags as acc, ibv_mtu, ibv_qp_type,
                                      ibv_wc_status, ibv_wr_opcode)
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

DEV_A = os.environ.get('OXE_DEV_A', 'oxe0')
DEV_B = os.environ.get('OXE_DEV_B', 'oxe1')
GID_A = int(os.environ.get('OXE_GID_A', '1'))
GID_B = int(os.environ.get('OXE_GID_B', '1'))
PAGE = 4096
MTU = 1024
GUARD = 0xee
QKEY = 0x11111111

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Guarded:
    """Three pages, the middle one the target, the others guards."""

    def __init__(self):
        self.base = libc.mmap(None, 3 * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                               mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        ctypes.memset(self.base, GUARD, 3 * PAGE)
        self.start = self.base + PAGE
        self.end = self.start + PAGE

    def image(self):
        return ctypes.string_at(self.base, 3 * PAGE)

    def at(self, addr, n):
        return ctypes.string_at(addr, n)

    def close(self):
        libc.munmap(self.base, 3 * PAGE)


def pattern(n, seed):
    return bytes((i * 31 + seed) & 0xff for i in range(n))


class Side:
    def __init__(self, dev, gid_index, qp_type):
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64)
        cap = QPCap(max_send_wr=32, max_recv_wr=32, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, cap=cap))
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)

    def poll(self, what):
        for _ in range(200000):
            n, wcs = self.cq.poll()
            if n:
                return wcs[0]
        raise AssertionError(f'no completion for {what}')

    def close(self):
        self.qp.close()
        self.cq.close()
        self.pd.close()
        self.ctx.close()


def connect(a, b):
    for me, other in ((a, b), (b, a)):
        attr = QPAttr(port_num=1, path_mtu=ibv_mtu.IBV_MTU_1024)
        attr.qp_access_flags = acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE
        attr.dest_qp_num = other.qp.qp_num
        attr.rq_psn = attr.sq_psn = 0
        attr.ah_attr = AHAttr(port_num=1, is_global=1,
                              gr=GlobalRoute(dgid=other.gid, sgid_index=me.gid_index))
        me.qp.to_rts(attr)


class UcWriteEnforcement(unittest.TestCase):
    def setUp(self):
        self.a = Side(DEV_A, GID_A, ibv_qp_type.IBV_QPT_UC)
        self.b = Side(DEV_B, GID_B, ibv_qp_type.IBV_QPT_UC)
        connect(self.a, self.b)
        self.mem = Guarded()
        rw = acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE
        self.mr = MR(self.b.pd, PAGE, rw, address=self.mem.start)
        self.src = MR(self.a.pd, 4 * PAGE, acc.IBV_ACCESS_LOCAL_WRITE)
        self.fence_mr = MR(self.b.pd, PAGE, rw)
        self.fences = 0
        self.others = []

    def tearDown(self):
        for o in self.others:
            o.close()
        self.fence_mr.close()
        self.mr.close()
        self.src.close()
        self.a.close()
        self.b.close()
        self.mem.close()

    def write(self, rkey, addr, length, seed=1):
        """A UC WRITE of `length` pattern bytes from A to B's `addr`."""
        data = pattern(length, seed)
        self.src.write(data, length)
        wr = SendWR(wr_id=1, opcode=ibv_wr_opcode.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(self.src.buf, length, self.src.lkey)])
        wr.set_wr_rdma(rkey, addr)
        self.a.qp.post_send(wr)
        wc = self.a.poll('the WRITE')
        # UC: the requester never hears of the responder's refusal.
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_SUCCESS, f'requester status {wc.status}')
        return data

    def fence(self):
        """A WRITE with immediate after it: once B completes its receive, B
        has processed everything A sent before."""
        self.fences += 1
        self.b.qp.post_recv(RecvWR(wr_id=100 + self.fences, num_sge=0))
        marker = self.fences.to_bytes(8, 'little')
        self.src.write(marker, 8)
        wr = SendWR(wr_id=2, opcode=ibv_wr_opcode.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                    sg=[SGE(self.src.buf, 8, self.src.lkey)], imm_data=self.fences)
        wr.set_wr_rdma(self.fence_mr.rkey, self.fence_mr.buf)
        self.a.qp.post_send(wr)
        self.assertEqual(self.a.poll('the fence').status, ibv_wc_status.IBV_WC_SUCCESS)
        wc = self.b.poll('the fence at the responder')
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_SUCCESS,
                         f'the QP no longer works after a refused message: {wc.status}')
        self.assertEqual(self.fence_mr.read(8, 0), marker, 'the fence landed elsewhere')

    def refused(self, rkey, addr, length, what):
        before = self.mem.image()
        self.write(rkey, addr, length)
        self.fence()
        after = self.mem.image()
        if after != before:
            diff = [i for i in range(len(after)) if after[i] != before[i]]
            self.fail(f'{what}: {len(diff)} bytes written, first at page offset '
                      f'{diff[0] - PAGE:+d} from the MR\'s start')

    def landed(self, rkey, addr, length, what):
        before = self.mem.image()
        data = self.write(rkey, addr, length, seed=7)
        self.fence()
        after = self.mem.image()
        off = addr - self.mem.base
        self.assertEqual(after[off:off + length], data, f'{what}: the data did not land')
        self.assertEqual(after[:off] + after[off + length:], before[:off] + before[off + length:],
                         f'{what}: bytes outside the message changed')

    def test_good_writes_land(self):
        """The positive cases: one byte at each edge, the whole page in
        four packets."""
        self.landed(self.mr.rkey, self.mem.start, 1, 'the first byte')
        self.landed(self.mr.rkey, self.mem.end - 1, 1, 'the last byte')
        self.landed(self.mr.rkey, self.mem.start, PAGE, 'the whole page, 4 packets')

    def test_bad_rkey(self):
        self.refused(self.mr.rkey ^ 0x80, self.mem.start, 16, 'an rkey of another variant')
        self.refused((self.mr.rkey + 0x100) & 0xffffffff, self.mem.start, 16, 'an rkey of another index')
        self.refused(0, self.mem.start, 16, 'rkey 0')

    def test_other_pd(self):
        pd = PD(self.b.ctx)
        mr = MR(pd, PAGE, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE,
                address=self.mem.start)
        self.others += [mr, pd]
        self.refused(mr.rkey, self.mem.start, 16, 'an MR of another PD')

    def test_no_remote_write(self):
        mr = MR(self.b.pd, PAGE, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_READ,
                address=self.mem.start)
        self.others.append(mr)
        self.refused(mr.rkey, self.mem.start, 16, 'an MR without REMOTE_WRITE')

    def test_deregistered(self):
        mr = MR(self.b.pd, PAGE, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE,
                address=self.mem.start)
        rkey = mr.rkey
        mr.close()
        self.refused(rkey, self.mem.start, 16, 'a deregistered MR')

    def test_bounds(self):
        k, s, e = self.mr.rkey, self.mem.start, self.mem.end
        self.refused(k, s - 1, 4, 'one byte before the start')
        self.refused(k, e - 3, 4, 'one byte past the end')
        self.refused(k, s, PAGE + 1, 'the page and one byte')
        self.refused(k, e, 1, 'the first byte past the end')

    def test_wrap(self):
        self.refused(self.mr.rkey, 2**64 - 2, 4, 'a range that wraps past 2^64')
        self.refused(self.mr.rkey, 2**64 - 1, 2, 'the last byte of the address space and one more')

    def test_multi_packet_past_the_end(self):
        """Three packets whose first two fit and whose last does not: the
        RETH's length is checked at the first packet, so nothing lands."""
        self.refused(self.mr.rkey, self.mem.end - 2 * MTU - 1, 3 * MTU,
                     'a 3-packet WRITE one byte too long')
        self.refused(self.mr.rkey, self.mem.start - 1, 3 * MTU,
                     'a 3-packet WRITE starting one byte early')


class UdQkey(unittest.TestCase):
    def setUp(self):
        self.a = Side(DEV_A, GID_A, ibv_qp_type.IBV_QPT_UD)
        self.b = Side(DEV_B, GID_B, ibv_qp_type.IBV_QPT_UD)
        for s in (self.a, self.b):
            attr = QPAttr(port_num=1)
            attr.qkey = QKEY
            s.qp.to_rts(attr)
        self.ah = AH(self.a.pd, attr=AHAttr(port_num=1, is_global=1,
                                            gr=GlobalRoute(dgid=self.b.gid,
                                                           sgid_index=GID_A)))
        self.src = MR(self.a.pd, PAGE, acc.IBV_ACCESS_LOCAL_WRITE)
        self.dst = MR(self.b.pd, PAGE, acc.IBV_ACCESS_LOCAL_WRITE)

    def tearDown(self):
        self.ah.close()
        self.src.close()
        self.dst.close()
        self.a.close()
        self.b.close()

    def send(self, qkey, seed):
        data = pattern(256, seed)
        self.src.write(data, 256)
        wr = SendWR(wr_id=1, opcode=ibv_wr_opcode.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(self.src.buf, 256, self.src.lkey)])
        wr.set_wr_ud(self.ah, self.b.qp.qp_num, qkey)
        self.a.qp.post_send(wr)
        self.assertEqual(self.a.poll('the SEND').status, ibv_wc_status.IBV_WC_SUCCESS)
        return data

    def test_wrong_qkey_is_dropped_and_its_receive_stays(self):
        self.dst.write(bytes([GUARD]) * PAGE, PAGE)
        self.b.qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(self.dst.buf, PAGE, self.dst.lkey)]))
        self.send(QKEY ^ 1, 3)
        good = self.send(QKEY, 4)
        wc = self.b.poll('the datagram with the right Q_Key')
        self.assertEqual((wc.status, wc.wr_id, wc.byte_len), (ibv_wc_status.IBV_WC_SUCCESS, 9, 40 + 256))
        # The receive the wrong one would have taken holds the right one.
        self.assertEqual(self.dst.read(256, 40), good)
        self.assertEqual(self.dst.read(PAGE - 296, 296), bytes([GUARD]) * (PAGE - 296))
        self.assertEqual(self.b.cq.poll()[0], 0, 'a second completion')


if __name__ == '__main__':
    unittest.main()
