#!/usr/bin/python3
"""A hostile peer against oxe: crafted RoCE v2 frames (roce_frames.py),
sent from netns "peer" to QPs of an oxe device on veth0 (10.11.0.1).

Each QP here is connected to a peer that does not exist as a device: the
test plays it, at 10.11.0.2 (the QP's path), hears what oxe sends there,
and forges what a stranger (10.11.0.77) or a confused peer would send.
Every test that expects oxe to ignore something then shows that the QP
still works with a genuine packet, so a QP that ignores everything (or a
frame oxe cannot parse) fails the test instead of passing it.

Environment: OXE_DEV (oxe0), OXE_GID (its RoCE v2 GID index for
10.11.0.1). Run by suite_hostile_peer (suites/hostile.sh).
"""
import ctypes
import json
import mmap
import os
import socket
import struct
import subprocess
import time
import unittest

from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.libibverbs_enums import ibv_access_flags as acc
from pyverbs.libibverbs_enums import ibv_mtu, ibv_qp_state, ibv_qp_type, ibv_wc_status, ibv_wr_opcode
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

import roce_frames as rf

DEV = os.environ.get('OXE_DEV', 'oxe0')
GID_INDEX = int(os.environ.get('OXE_GID', '1'))
OXE_IP = '10.11.0.1'
PEER_IP = '10.11.0.2'
STRANGER_IP = '10.11.0.77'
PEER_QPN = 0x123
SQ_PSN = 1000
RQ_PSN = 5000
QUIET = 0.5  # seconds to wait for something that must not happen
# Packets of 1 KiB in one GSO datagram from which oxe counts them a stream
# (16 KiB: recv.rs, STEER_MIN_STREAM) and may queue the datagram whole for
# another CPU.
STREAM_BATCH = 16


def v4_gid(ip):
    a, b, c, d = (int(x) for x in ip.split('.'))
    return GID(f'0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}')


def counter(name, missing=None):
    """A hardware counter of DEV; `missing` if it has none (a `before`
    reading, so that a test run on a build without the counter fails on
    the behaviour it checks, not on the count)."""
    for d in (f'/sys/class/infiniband/{DEV}/ports/1/hw_counters',
              f'/sys/class/infiniband/{DEV}/hw_counters'):
        try:
            with open(f'{d}/{name}') as f:
                return int(f.read())
        except FileNotFoundError:
            continue
    if missing is not None:
        return missing
    raise AssertionError(f'{DEV} has no counter {name}')


def qp1_state():
    out = subprocess.run(['rdma', '-j', 'resource', 'show', 'qp', 'link', f'{DEV}/1', 'lqpn', '1'],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]['state']


class HostilePeer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.peer = rf.Peer('peer', PEER_IP)
        cls.ctx = Context(name=DEV)
        cls.pd = PD(cls.ctx)

    @classmethod
    def tearDownClass(cls):
        cls.peer.close()

    def setUp(self):
        self.peer.drain()
        self.qps = []
        self.cq = CQ(self.ctx, 32)
        self.buf = MR(self.pd, 4096, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_READ |
                      acc.IBV_ACCESS_REMOTE_WRITE | acc.IBV_ACCESS_REMOTE_ATOMIC)

    def tearDown(self):
        # Closed here, not left to the collector: a QP left in RTS resends
        # its request, and the next test would hear it.
        for qp in self.qps:
            qp.close()
        self.cq.close()
        self.buf.close()

    def connected_qp(self, qp_type=ibv_qp_type.IBV_QPT_RC, mtu=ibv_mtu.IBV_MTU_1024,
                     max_dest_rd_atomic=4, timeout=20, retry_cnt=7):
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        qp = QP(self.pd, QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, cap=cap, sq_sig_all=1))
        a = QPAttr(port_num=1, path_mtu=mtu)
        a.qp_access_flags = (acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE |
                             acc.IBV_ACCESS_REMOTE_READ | acc.IBV_ACCESS_REMOTE_ATOMIC)
        a.dest_qp_num = PEER_QPN
        a.rq_psn = RQ_PSN
        a.sq_psn = SQ_PSN
        a.max_dest_rd_atomic = max_dest_rd_atomic
        a.max_rd_atomic = 4
        a.min_rnr_timer = 1
        a.timeout = timeout  # 20: 4 s, no retransmission while a test runs
        a.retry_cnt = retry_cnt
        a.rnr_retry = 7
        a.ah_attr = AHAttr(port_num=1, is_global=1,
                           gr=GlobalRoute(dgid=v4_gid(PEER_IP), sgid_index=GID_INDEX))
        qp.to_rts(a)
        self.qps.append(qp)
        return qp

    def state(self, qp):
        attr, _ = qp.query(0x1)  # IBV_QP_STATE
        return attr.qp_state

    def poll(self, timeout=10.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            n, wcs = self.cq.poll()
            if n:
                return wcs[0]
            time.sleep(0.01)
        return None

    def assert_no_completion(self):
        time.sleep(QUIET)
        n, wcs = self.cq.poll()
        self.assertEqual(n, 0, f'unexpected completion, status {wcs[0].status if n else None}')

    def post_send(self, qp, opcode=ibv_wr_opcode.IBV_WR_SEND, length=16, **kw):
        wr = SendWR(wr_id=7, opcode=opcode, num_sge=1, sg=[SGE(self.buf.buf, length, self.buf.lkey)])
        if opcode == ibv_wr_opcode.IBV_WR_RDMA_READ:
            wr.set_wr_rdma(0x5555, 0x10000)
        if opcode == ibv_wr_opcode.IBV_WR_ATOMIC_FETCH_AND_ADD:
            wr.set_wr_atomic(0x5555, 0x10000, 1)
        qp.post_send(wr)

    def post_recv(self, qp, length=1024):
        qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(self.buf.buf, length, self.buf.lkey)]))

    def sent_request(self, qp, opcode):
        """The request packet oxe sent to the peer for the WR just posted."""
        r = self.peer.expect(opcode)
        self.assertIsNotNone(r, f'no request of opcode {opcode:#x} reached the peer')
        self.assertEqual((r.dest_qpn, r.psn), (PEER_QPN, SQ_PSN))
        return r

    def ack(self, qp, psn, syndrome=rf.ACK, src=None):
        self.peer.inject(OXE_IP, rf.roce(rf.RC_ACKNOWLEDGE, qp.qp_num, psn, rf.aeth(syndrome)), src=src)

    # Item 1: acknowledgements from off the path, or for nothing outstanding.

    def test_genuine_ack_completes_send(self):
        """The control: the frames built here are right, and oxe takes them."""
        qp = self.connected_qp()
        self.post_send(qp)
        self.sent_request(qp, rf.RC_SEND_ONLY)
        self.ack(qp, SQ_PSN)
        wc = self.poll()
        self.assertIsNotNone(wc)
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_SUCCESS)

    def test_genuine_nak_fails_request(self):
        qp = self.connected_qp()
        self.post_send(qp)
        self.sent_request(qp, rf.RC_SEND_ONLY)
        self.ack(qp, SQ_PSN, rf.NAK_REMOTE_ACCESS)
        wc = self.poll()
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(self.state(qp), ibv_qp_state.IBV_QPS_ERR)

    def assert_ignored(self, forge, counted, times=1):
        """Posts a SEND and lets `forge(qp)` answer it: the QP must stay
        in RTS with nothing completed and `counted` up by `times`, and then
        a genuine ACK must still complete the SEND."""
        qp = self.connected_qp()
        self.post_send(qp)
        self.sent_request(qp, rf.RC_SEND_ONLY)
        before = counter(counted, 0)
        forge(qp)
        self.assert_no_completion()
        self.assertEqual(self.state(qp), ibv_qp_state.IBV_QPS_RTS)
        self.assertGreaterEqual(counter(counted), before + times)
        self.ack(qp, SQ_PSN)
        self.assertEqual(self.poll().status, ibv_wc_status.IBV_WC_SUCCESS)

    def test_nak_from_stranger_is_dropped(self):
        self.assert_ignored(lambda qp: self.ack(qp, SQ_PSN, rf.NAK_REMOTE_ACCESS, src=STRANGER_IP),
                            'rx_wrong_path')

    def test_nak_for_psn_not_outstanding_is_ignored(self):
        def forge(qp):
            for psn in (SQ_PSN + 1000, SQ_PSN - 1):
                self.ack(qp, psn, rf.NAK_REMOTE_ACCESS)
        self.assert_ignored(forge, 'ghost_ack', 2)

    def test_ack_ahead_of_requests_completes_nothing(self):
        self.assert_ignored(lambda qp: self.ack(qp, SQ_PSN + 50), 'ghost_ack')

    # An RNR NAK: the request goes again once the NAK's own timer has run,
    # not when the transport timer fires (4 s here), and also when there is
    # no transport timer (timeout 0 means infinite; the RNR retry does not
    # depend on it).

    def assert_resent_after_rnr_nak(self, qp):
        self.post_send(qp)
        self.sent_request(qp, rf.RC_SEND_ONLY)
        self.ack(qp, SQ_PSN, rf.RNR_NAK | 1)  # 0.01 ms
        r = self.peer.expect(rf.RC_SEND_ONLY, timeout=2.0)
        self.assertIsNotNone(r, 'no resend within 2 s of an RNR NAK of 0.01 ms')
        self.assertEqual(r.psn, SQ_PSN)
        self.assertEqual(self.state(qp), ibv_qp_state.IBV_QPS_RTS)
        self.ack(qp, SQ_PSN)
        self.assertEqual(self.poll().status, ibv_wc_status.IBV_WC_SUCCESS)

    def test_rnr_nak_resend_waits_for_its_own_timer(self):
        self.assert_resent_after_rnr_nak(self.connected_qp())

    def test_rnr_nak_resend_without_transport_timer(self):
        self.assert_resent_after_rnr_nak(self.connected_qp(timeout=0))

    def assert_only_genuine_received(self, qp, pkt, length, **forged):
        """Sends `pkt` as `forged` says (another source, a bad ICRC): no
        receive completes. Then as it is: it is received, `length` bytes."""
        self.post_recv(qp)
        self.peer.inject(OXE_IP, pkt, **forged)
        self.assert_no_completion()
        self.peer.inject(OXE_IP, pkt)
        wc = self.poll()
        self.assertEqual((wc.status, wc.byte_len), (ibv_wc_status.IBV_WC_SUCCESS, length))

    def test_uc_send_from_stranger_is_dropped(self):
        qp = self.connected_qp(ibv_qp_type.IBV_QPT_UC)
        pkt = rf.roce(rf.UC_SEND_ONLY, qp.qp_num, RQ_PSN, payload=b'x' * 40)
        self.assert_only_genuine_received(qp, pkt, 40, src=STRANGER_IP)

    # Item 5: a response of the wrong class for its request.

    def test_atomic_ack_cannot_answer_read(self):
        qp = self.connected_qp()
        self.buf.write(b'\xab' * 32, 32)
        self.post_send(qp, ibv_wr_opcode.IBV_WR_RDMA_READ, 32)
        self.sent_request(qp, rf.RC_RDMA_READ_REQUEST)
        self.peer.inject(OXE_IP, rf.roce(rf.RC_ATOMIC_ACKNOWLEDGE, qp.qp_num, SQ_PSN,
                                         rf.aeth(rf.ACK) + rf.atomic_ack_eth(0x1122334455667788)))
        wc = self.poll()
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_BAD_RESP_ERR)
        self.assertEqual(self.buf.read(32, 0), b'\xab' * 32)

    def test_read_response_cannot_answer_atomic(self):
        qp = self.connected_qp()
        self.post_send(qp, ibv_wr_opcode.IBV_WR_ATOMIC_FETCH_AND_ADD, 8)
        self.sent_request(qp, rf.RC_FETCH_ADD)
        self.peer.inject(OXE_IP, rf.roce(rf.RC_READ_RESPONSE_ONLY, qp.qp_num, SQ_PSN,
                                         rf.aeth(rf.ACK), payload=b'\0' * 8))
        wc = self.poll()
        self.assertIsNotNone(wc, 'a read response to an atomic went unanswered')
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_BAD_RESP_ERR)

    # Items 2 and 4: datagrams and payloads longer than they may be.

    def test_payload_longer_than_path_mtu_is_invalid(self):
        qp = self.connected_qp(mtu=ibv_mtu.IBV_MTU_256)
        self.post_recv(qp)
        self.peer.inject(OXE_IP, rf.roce(rf.RC_SEND_ONLY, qp.qp_num, RQ_PSN, payload=b'y' * 300))
        nak = self.peer.expect(rf.RC_ACKNOWLEDGE)
        self.assertIsNotNone(nak)
        self.assertEqual((nak.psn, nak.syndrome), (RQ_PSN, rf.NAK_INVALID_REQUEST))
        wc = self.poll()
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_WR_FLUSH_ERR)

    def test_payload_past_largest_mtu_is_dropped_unread(self):
        """A 64 KiB UDP datagram used to be queued whole for a later ICRC
        check: anything past 4096 bytes of payload is dropped on arrival."""
        qp = self.connected_qp(mtu=ibv_mtu.IBV_MTU_4096)
        self.post_recv(qp, 4096)
        before = counter('rx_dropped')
        self.peer.inject(OXE_IP, rf.roce(rf.RC_SEND_ONLY, qp.qp_num, RQ_PSN, payload=b'z' * 6000))
        self.assert_no_completion()
        self.assertIsNone(self.peer.receive(0), 'oxe answered a packet it should have dropped')
        self.assertGreater(counter('rx_dropped'), before)
        self.peer.inject(OXE_IP, rf.roce(rf.RC_SEND_ONLY, qp.qp_num, RQ_PSN, payload=b'z' * 4000))
        wc = self.poll()
        self.assertEqual((wc.status, wc.byte_len), (ibv_wc_status.IBV_WC_SUCCESS, 4000))

    def test_oversized_mad_keeps_qp1(self):
        self.assertEqual(qp1_state(), 'RTS')
        before = counter('rx_dropped')
        self.peer.inject(OXE_IP, rf.roce(rf.UD_SEND_ONLY, 1, 0, rf.deth(rf.GSI_QKEY, 1), b'm' * 300))
        time.sleep(QUIET)
        self.assertGreater(counter('rx_dropped'), before)
        self.assertEqual(qp1_state(), 'RTS')

    def test_oversized_datagram_keeps_ud_qp(self):
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        qp = QP(self.pd, QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_UD, scq=self.cq, rcq=self.cq, cap=cap))
        self.qps.append(qp)
        a = QPAttr(port_num=1)
        a.qkey = 0x1234
        qp.to_rts(a)
        self.post_recv(qp, 40 + 64)
        dgram = lambda n: rf.roce(rf.UD_SEND_ONLY, qp.qp_num, 0, rf.deth(0x1234, 77), b'd' * n)
        self.peer.inject(OXE_IP, dgram(200))
        self.assert_no_completion()
        self.assertEqual(self.state(qp), ibv_qp_state.IBV_QPS_RTS)
        self.peer.inject(OXE_IP, dgram(32))
        wc = self.poll()
        self.assertEqual((wc.status, wc.byte_len, wc.src_qp), (ibv_wc_status.IBV_WC_SUCCESS, 40 + 32, 77))

    # Item 3: READ work bounded by max_msg_sz and the responder resources.

    def read_request(self, qp, psn, length, va=None):
        va = self.buf.buf if va is None else va
        self.peer.inject(OXE_IP, rf.roce(rf.RC_RDMA_READ_REQUEST, qp.qp_num, psn,
                                         rf.reth(va, self.buf.rkey, length)))

    def test_read_longer_than_max_msg_sz_is_invalid(self):
        qp = self.connected_qp()
        self.read_request(qp, RQ_PSN, (1 << 31) + 1)
        nak = self.peer.expect(rf.RC_ACKNOWLEDGE)
        self.assertIsNotNone(nak)
        self.assertEqual((nak.psn, nak.syndrome), (RQ_PSN, rf.NAK_INVALID_REQUEST))

    def test_duplicate_read_needs_a_responder_resource(self):
        qp = self.connected_qp(max_dest_rd_atomic=1)
        for psn in (RQ_PSN, RQ_PSN + 1):
            self.read_request(qp, psn, 64)
            r = self.peer.expect(rf.RC_READ_RESPONSE_ONLY)
            self.assertEqual(r.psn if r else None, psn)
        # One resource: the second read took the first one's.
        self.read_request(qp, RQ_PSN, 64)
        self.assertIsNone(self.peer.expect(rf.RC_READ_RESPONSE_ONLY, QUIET))
        self.read_request(qp, RQ_PSN + 1, 64)
        r = self.peer.expect(rf.RC_READ_RESPONSE_ONLY)
        self.assertEqual(r.psn if r else None, RQ_PSN + 1)
        self.assertEqual(self.state(qp), ibv_qp_state.IBV_QPS_RTS)

    @staticmethod
    def packets_sent():
        with open(f'/sys/class/infiniband/{DEV}/ports/1/counters/port_xmit_packets') as f:
            return int(f.read())

    def start_long_read(self, size):
        """A QP the peer sends one READ of `size` bytes of a new MR, once
        its first response is here: (qp, mr, packets sent before it)."""
        qp = self.connected_qp()
        big = MR(self.pd, size, acc.IBV_ACCESS_REMOTE_READ)
        before = self.packets_sent()
        self.peer.inject(OXE_IP, rf.roce(rf.RC_RDMA_READ_REQUEST, qp.qp_num, RQ_PSN,
                                         rf.reth(big.buf, big.rkey, size)))
        first = self.peer.expect(rf.RC_READ_RESPONSE_FIRST)
        self.assertEqual(first.psn if first else None, RQ_PSN)
        return qp, big, before

    def test_long_read_is_answered_in_bursts(self):
        """One READ of 256 MiB (262,144 responses) used to be built whole
        under the QP's lock before anything was sent. Answered in bursts,
        the QP can be destroyed while it is under way, and then nothing
        more is sent."""
        size = 256 << 20
        qp, big, before = self.start_long_read(size)
        self.qps.remove(qp)
        qp.close()
        stopped = self.packets_sent()
        time.sleep(QUIET)
        self.assertEqual(self.packets_sent(), stopped, 'responses went on after the QP was destroyed')
        self.assertLess(stopped - before, size // 1024, 'the whole READ went out before the destroy')
        big.close()

    def test_read_revoked_midstream_naks_the_first_unsent(self):
        """A READ whose MR is deregistered after some of its responses went
        out ends with a NAK (remote access error) at the first response not
        sent. A NAK at the READ's own first PSN, which the requester has
        already had an answer to, would be ignored there, and the requester
        would time out and retry into the same error instead of completing
        with REM_ACCESS_ERR."""
        size = 256 << 20
        # Room for the responses that come before the NAK (SO_RCVBUFFORCE).
        self.peer.udp.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)
        qp, big, before = self.start_long_read(size)
        big.close()
        nak = self.peer.expect(rf.RC_ACKNOWLEDGE, timeout=60.0)
        self.assertIsNotNone(nak, 'no NAK after the READ\'s MR went')
        self.assertEqual(nak.syndrome, rf.NAK_REMOTE_ACCESS)
        responses = self.packets_sent() - before - 1
        self.assertGreater(responses, 0)
        self.assertLess(responses, size // 1024, 'the whole READ went out before the dereg')
        self.assertEqual((nak.psn - RQ_PSN) & 0xFFFFFF, responses,
                         'the NAK does not name the first response not sent')

    # The retransmit timer: a peer that never answers gets the request
    # retry_cnt more times, and then the request fails; a backlog that
    # stays busy only puts the timeouts off a bounded number of times.

    def test_silent_peer_exhausts_retries(self):
        qp = self.connected_qp(timeout=12, retry_cnt=2)  # 16.8 ms: oxe's 100 ms floor
        timeouts = counter('ack_timeout', 0)
        self.post_send(qp)
        self.sent_request(qp, rf.RC_SEND_ONLY)
        for i in range(2):
            r = self.peer.expect(rf.RC_SEND_ONLY, timeout=5.0)
            self.assertIsNotNone(r, f'resend {i + 1} of 2 never came')
            self.assertEqual(r.psn, SQ_PSN)
        wc = self.poll()
        self.assertIsNotNone(wc, 'no completion after the last retry')
        self.assertEqual(wc.status, ibv_wc_status.IBV_WC_RETRY_EXC_ERR)
        self.assertEqual(self.state(qp), ibv_qp_state.IBV_QPS_ERR)
        self.assertEqual(counter('ack_timeout'), timeouts + 3)
        self.assertIsNone(self.peer.expect(rf.RC_SEND_ONLY, QUIET), 'a resend past retry_cnt')

    def test_busy_backlog_puts_a_timeout_off_boundedly(self):
        """A 256 MiB READ from the peer holds every later packet of the QP
        in its backlog until its last response is out, seconds here; a
        ghost ACK waits there. The QP's own SEND, which the peer never
        answers, must still fail after its retries: each timeout that
        finds the backlog busy is put off, but at most 8 times without
        progress (with the bound at 250, one run put off 18)."""
        size = 256 << 20
        qp = self.connected_qp(timeout=12, retry_cnt=1)
        big = MR(self.pd, size, acc.IBV_ACCESS_REMOTE_READ)
        try:
            put_off, timeouts = counter('timeout_put_off', 0), counter('ack_timeout', 0)
            self.post_send(qp)
            self.sent_request(qp, rf.RC_SEND_ONLY)
            self.peer.inject(OXE_IP, rf.roce(rf.RC_RDMA_READ_REQUEST, qp.qp_num, RQ_PSN,
                                             rf.reth(big.buf, big.rkey, size)))
            self.ack(qp, SQ_PSN - 1)
            wc = self.poll(timeout=30.0)
            self.assertIsNotNone(wc, 'the SEND never failed')
            self.assertEqual(wc.status, ibv_wc_status.IBV_WC_RETRY_EXC_ERR)
            self.assertEqual(counter('ack_timeout'), timeouts + 2)
            self.assertGreaterEqual(counter('timeout_put_off'), put_off + 1,
                                    'no timeout found the backlog busy: the READ ended too soon')
            self.assertLessEqual(counter('timeout_put_off'), put_off + 8)
        finally:
            self.qps.remove(qp)
            qp.close()
            big.close()

    # Item 6: the later packets of a WRITE after its key was revoked.

    def test_write_after_dereg_lands_nowhere(self):
        qp = self.connected_qp(mtu=ibv_mtu.IBV_MTU_256)
        target = MR(self.pd, 4096, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE)
        first = rf.roce(rf.RC_RDMA_WRITE_FIRST, qp.qp_num, RQ_PSN,
                        rf.reth(target.buf, target.rkey, 512), b'a' * 256, ack_req=True)
        self.peer.inject(OXE_IP, first)
        ack = self.peer.expect(rf.RC_ACKNOWLEDGE)
        self.assertEqual((ack.psn, ack.syndrome) if ack else None, (RQ_PSN, rf.ACK))
        target.close()
        last = rf.roce(rf.RC_RDMA_WRITE_LAST, qp.qp_num, RQ_PSN + 1, payload=b'b' * 256, ack_req=True)
        self.peer.inject(OXE_IP, last)
        nak = self.peer.expect(rf.RC_ACKNOWLEDGE)
        self.assertIsNotNone(nak)
        self.assertEqual((nak.psn, nak.syndrome), (RQ_PSN + 1, rf.NAK_REMOTE_ACCESS))

    def test_write_into_missing_odp_page_counts_once(self):
        """A one-packet WRITE into an ODP page nothing faulted in: the
        receive softirq checks its ICRC and counts it, finds the page
        missing and leaves the packet to the QP's backlog, whose drain
        takes the fault and processes it again, without checking or
        counting it a second time."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        size = 4096
        addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                         mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        self.assertNotEqual(addr, ctypes.c_void_p(-1).value, 'mmap failed')
        qp = self.connected_qp()
        odp = MR(self.pd, size, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE |
                 acc.IBV_ACCESS_ON_DEMAND, address=addr)
        try:
            time.sleep(0.1)  # ib_core caches hw counters for a few ms
            received, faults = counter('rx_packets'), counter('odp_faults')
            data = b'odp!' * 16
            self.peer.inject(OXE_IP, rf.roce(rf.RC_RDMA_WRITE_ONLY, qp.qp_num, RQ_PSN,
                                             rf.reth(addr + 128, odp.rkey, len(data)), data,
                                             ack_req=True))
            ack = self.peer.expect(rf.RC_ACKNOWLEDGE)
            self.assertEqual((ack.psn, ack.syndrome) if ack else None, (RQ_PSN, rf.ACK))
            self.assertEqual(ctypes.string_at(addr + 128, len(data)), data)
            time.sleep(0.1)
            self.assertGreater(counter('odp_faults'), faults, 'the page was there: no fault taken')
            self.assertEqual(counter('rx_packets'), received + 1)
        finally:
            odp.close()
            libc.munmap(addr, size)

    def test_bad_icrc_is_dropped(self):
        qp = self.connected_qp()
        pkt = rf.roce(rf.RC_SEND_ONLY, qp.qp_num, RQ_PSN, payload=b'c' * 24)
        self.assert_only_genuine_received(qp, pkt, 24, bad_icrc=True)

    # Batches: a sender on this host (oxe itself, or any process offloading
    # UDP segmentation) hands the stack one GSO datagram of many packets;
    # oxe's socket takes it whole and each packet apart, with the headers
    # segmentation would have given it.

    def send_batch(self, qp, n, length=64, psn=RQ_PSN, **kw):
        """SENDs of `length` bytes ('A', 'B', ...) at PSNs from `psn`, in
        one GSO datagram whose first IPv4 identification is 0x1234."""
        packets = [rf.roce(rf.RC_SEND_ONLY, qp.qp_num, psn + i, payload=bytes([0x41 + i]) * length,
                           ack_req=i == n - 1) for i in range(n)]
        self.peer.inject_batch(OXE_IP, packets, ident=0x1234, **kw)

    def received(self, n, length=64):
        for i in range(n):
            wc = self.poll()
            self.assertIsNotNone(wc, f'receive {i} did not complete')
            self.assertEqual((wc.status, wc.byte_len), (ibv_wc_status.IBV_WC_SUCCESS, length))

    def test_gso_batch_is_taken_apart(self):
        """Three SENDs in one datagram: each is received, its ICRC right
        only over its own lengths and identification (0x1234 plus its
        index), and counted once."""
        qp = self.connected_qp()
        for _ in range(3):
            self.post_recv(qp)
        time.sleep(0.1)  # ib_core caches hw counters for a few ms
        before = counter('rx_packets')
        self.send_batch(qp, 3)
        self.received(3)
        self.assertEqual(self.buf.read(64, 0), b'C' * 64)
        time.sleep(0.1)
        self.assertEqual(counter('rx_packets'), before + 3)

    def test_gso_batch_drops_only_its_bad_packet(self):
        """A batch whose last packet's ICRC is wrong: the others are
        received, that one dropped and counted; sent again alone, it is
        received."""
        qp = self.connected_qp()
        for _ in range(3):
            self.post_recv(qp)
        time.sleep(0.1)
        dropped = counter('rx_dropped')
        self.send_batch(qp, 3, bad_icrc=(2,))
        self.received(2)
        self.assert_no_completion()
        self.assertEqual(counter('rx_dropped'), dropped + 1)
        self.peer.inject(OXE_IP, rf.roce(rf.RC_SEND_ONLY, qp.qp_num, RQ_PSN + 2, payload=b'C' * 64,
                                         ack_req=True))
        self.received(1)
        self.assertEqual(self.buf.read(64, 0), b'C' * 64)

    def write_batch(self, qp, n, length=1024, psn=RQ_PSN, **kw):
        """`n` WRITEs of `length` bytes (the i-th all 0x41 + i) at PSNs from
        `psn`, each into the buffer's slot i modulo its slots and each
        asking for an ACK, in one GSO datagram."""
        slots = 4096 // length
        packets = [rf.roce(rf.RC_RDMA_WRITE_ONLY, qp.qp_num, psn + i,
                           rf.reth(self.buf.buf + length * (i % slots), self.buf.rkey, length),
                           payload=bytes([0x41 + i]) * length, ack_req=True) for i in range(n)]
        self.peer.inject_batch(OXE_IP, packets, ident=0x1234, **kw)

    def acked_through(self, last):
        """Takes ACKs until one names PSN `last`; fails on a NAK, or if none
        comes."""
        while True:
            r = self.peer.expect(rf.RC_ACKNOWLEDGE)
            self.assertIsNotNone(r, f'PSN {last:#x} was not acknowledged')
            self.assertEqual(r.syndrome >> 5, 0, f'NAK {r.syndrome:#x} at PSN {r.psn:#x}')
            if r.psn == last:
                return

    def test_gso_batch_of_large_packets_is_queued_whole(self):
        """A stream: STREAM_BATCH WRITEs of 1 KiB in one datagram, large
        enough to be left to another CPU. The datagram is queued whole in
        the QP's backlog, and its drain receives each packet in order,
        checked and counted once: every WRITE lands (each slot holds the
        last WRITE to it) and the ACK names the last PSN."""
        qp = self.connected_qp()
        time.sleep(0.1)  # ib_core caches hw counters for a few ms
        before, batches = counter('rx_packets'), counter('rx_batch_backlogged')
        self.write_batch(qp, STREAM_BATCH)
        self.acked_through(RQ_PSN + STREAM_BATCH - 1)
        for slot in range(4):
            last = max(i for i in range(STREAM_BATCH) if i % 4 == slot)
            self.assertEqual(self.buf.read(1024, 1024 * slot), bytes([0x41 + last]) * 1024)
        time.sleep(0.1)
        self.assertEqual(counter('rx_packets'), before + STREAM_BATCH)
        self.assertEqual(counter('rx_batch_backlogged'), batches + 1)
        # The backlog is empty again, every packet counted out: a batch of
        # small packets is then taken apart on arrival, not queued whole
        # behind a backlog that only looks busy.
        self.write_batch(qp, STREAM_BATCH, length=64, psn=RQ_PSN + STREAM_BATCH)
        self.acked_through(RQ_PSN + 2 * STREAM_BATCH - 1)
        time.sleep(0.1)
        self.assertEqual(counter('rx_batch_backlogged'), batches + 1)

    def test_short_gso_batch_of_large_packets_is_received_on_arrival(self):
        """Three SENDs of 1 KiB in one datagram, short of a stream: a lone
        message's batch, taken apart and received where it lands, neither
        queued whole nor packet by packet for another CPU, whose process a
        ping-pong's work item would wait on. Each is received in order and
        counted once."""
        qp = self.connected_qp()
        for _ in range(3):
            self.post_recv(qp)
        time.sleep(0.1)
        before, batches = counter('rx_packets'), counter('rx_batch_backlogged')
        steered = counter('rx_steered')
        self.send_batch(qp, 3, length=1024)
        self.received(3, length=1024)
        self.assertEqual(self.buf.read(1024, 0), b'C' * 1024)
        time.sleep(0.1)
        self.assertEqual(counter('rx_packets'), before + 3)
        self.assertEqual(counter('rx_batch_backlogged'), batches)
        self.assertEqual(counter('rx_steered'), steered)

    def test_gso_batch_longer_than_a_drain_turn_lands_in_order(self):
        """70 WRITEs of 512 bytes in one datagram, more than the backlog's
        drain takes in one turn (64 packets): the drain stops inside the
        batch and goes on from there. Every WRITE lands, in order (each
        slot of the buffer holds the last WRITE to it), the ACK names the
        last PSN, and no NAK comes."""
        qp = self.connected_qp()
        n, slots = 70, 8
        batches = counter('rx_batch_backlogged')
        packets = [rf.roce(rf.RC_RDMA_WRITE_ONLY, qp.qp_num, RQ_PSN + i,
                           rf.reth(self.buf.buf + 512 * (i % slots), self.buf.rkey, 512),
                           payload=bytes([i]) * 512, ack_req=i == n - 1) for i in range(n)]
        self.peer.inject_batch(OXE_IP, packets, ident=0x1234)
        while True:
            r = self.peer.expect(rf.RC_ACKNOWLEDGE)
            self.assertIsNotNone(r, 'the last WRITE was not acknowledged')
            self.assertEqual(r.syndrome >> 5, 0, f'NAK {r.syndrome:#x} at PSN {r.psn:#x}')
            if r.psn == RQ_PSN + n - 1:
                break
        for slot in range(slots):
            last = max(i for i in range(n) if i % slots == slot)
            self.assertEqual(self.buf.read(512, 512 * slot), bytes([last]) * 512, f'slot {slot}')
        self.assertEqual(counter('rx_batch_backlogged'), batches + 1)

    def test_gso_batch_counts_a_stream_in_bytes(self):
        """At a 4 KiB MTU a batch holds at most 6 packets (28 KiB), so a
        stream is told by its bytes, not its packets: 3 WRITEs of 4 KiB in
        one datagram (12 KiB) are received on arrival, 6 (24 KiB) are
        queued whole. Every WRITE lands and is acknowledged."""
        qp = self.connected_qp(mtu=ibv_mtu.IBV_MTU_4096)
        time.sleep(0.1)
        batches, steered = counter('rx_batch_backlogged'), counter('rx_steered')
        self.write_batch(qp, 3, length=4096)
        self.acked_through(RQ_PSN + 2)
        self.assertEqual(self.buf.read(4096, 0), b'C' * 4096)
        time.sleep(0.1)
        self.assertEqual((counter('rx_batch_backlogged'), counter('rx_steered')),
                         (batches, steered))
        self.write_batch(qp, 6, length=4096, psn=RQ_PSN + 3)
        self.acked_through(RQ_PSN + 8)
        self.assertEqual(self.buf.read(4096, 0), b'F' * 4096)
        time.sleep(0.1)
        self.assertEqual(counter('rx_batch_backlogged'), batches + 1)

    def test_gso_batch_queued_whole_drops_only_its_bad_packet(self):
        """A stream queued whole, its last packet's ICRC wrong: the drain
        receives the others and drops that one, which draws no NAK; sent
        again alone, it is received."""
        qp = self.connected_qp()
        time.sleep(0.1)
        last = RQ_PSN + STREAM_BATCH - 1
        dropped, batches = counter('rx_dropped'), counter('rx_batch_backlogged')
        self.write_batch(qp, STREAM_BATCH, bad_icrc=(STREAM_BATCH - 1,))
        self.acked_through(last - 1)
        self.assertIsNone(self.peer.receive(QUIET), 'a reply to the dropped packet')
        time.sleep(0.1)
        self.assertEqual(counter('rx_dropped'), dropped + 1)
        self.assertEqual(counter('rx_batch_backlogged'), batches + 1)
        # The bad packet's slot holds the last good WRITE to it.
        slot = (STREAM_BATCH - 1) % 4
        self.assertEqual(self.buf.read(1024, 1024 * slot), bytes([0x41 + STREAM_BATCH - 5]) * 1024)
        self.peer.inject(OXE_IP, rf.roce(rf.RC_RDMA_WRITE_ONLY, qp.qp_num, last,
                                         rf.reth(self.buf.buf + 1024 * slot, self.buf.rkey, 1024),
                                         payload=b'Z' * 1024, ack_req=True))
        self.acked_through(last)
        self.assertEqual(self.buf.read(1024, 1024 * slot), b'Z' * 1024)

    def test_gso_batch_for_two_qps_reaches_both(self):
        """A stream's worth of 1 KiB SENDs in one datagram, alternating
        between two QPs, is not queued whole for the first one's backlog:
        each QP receives its own, in order."""
        a, b = self.connected_qp(), self.connected_qp()
        each = STREAM_BATCH // 2
        for qp in (a, b):
            for _ in range(each):
                self.post_recv(qp)
        time.sleep(0.1)
        batches, steered = counter('rx_batch_backlogged'), counter('rx_steered')
        packets = [rf.roce(rf.RC_SEND_ONLY, (a, b)[i % 2].qp_num, RQ_PSN + i // 2,
                           payload=bytes([0x41 + i]) * 1024, ack_req=True)
                   for i in range(STREAM_BATCH)]
        self.peer.inject_batch(OXE_IP, packets, ident=0x1234)
        got = []
        for i in range(STREAM_BATCH):
            wc = self.poll()
            self.assertIsNotNone(wc, f'receive {i} did not complete')
            self.assertEqual((wc.status, wc.byte_len), (ibv_wc_status.IBV_WC_SUCCESS, 1024))
            got.append(wc.qp_num)
        self.assertEqual(sorted(got), sorted([a.qp_num, b.qp_num] * each))
        time.sleep(0.1)
        self.assertEqual(counter('rx_batch_backlogged'), batches)
        # Each is a stream's packet, left to its own QP's backlog.
        self.assertEqual(counter('rx_steered'), steered + STREAM_BATCH)

    def test_gso_batch_of_runt_segments_is_dropped(self):
        """A batch cut every 8 bytes, shorter than a BTH: nothing of it is
        received, and the QP then receives a genuine packet."""
        qp = self.connected_qp()
        self.post_recv(qp)
        self.send_batch(qp, 2, seg_size=8)
        self.assert_no_completion()
        self.peer.inject(OXE_IP, rf.roce(rf.RC_SEND_ONLY, qp.qp_num, RQ_PSN, payload=b'A' * 64,
                                         ack_req=True))
        self.received(1)


if __name__ == '__main__':
    unittest.main(verbosity=2)
