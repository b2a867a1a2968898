#!/usr/bin/python3
"""oxe's trace events (trace system `oxe`, rust/bindings/oxe_trace.h): each
fires with the fields of what happened. Known operations on DEV, then the
records tracefs holds for them: an MR registered, reregistered and
deregistered; an ODP range faulted in by a prefetch and taken away by
MADV_DONTNEED; a peer's RDMA WRITE refused for rights, for bounds and for
a key that names nothing. Then the same counters through `rdma statistic
show link`, which reads the port's. Run by suite_trace (suites/hostile.sh) on the
debug kernel (the plain one has no tracepoints), with netns "peer" and its
crafted frames as test_hostile_peer.py has them.
"""
import ctypes
import json
import mmap
import os
import re
import subprocess
import unittest

from pyverbs.libibverbs_enums import ibv_access_flags as acc
from pyverbs.libibverbs_enums import ibv_rereg_mr_flags as rereg
from pyverbs.mr import MR
from pyverbs.wr import SGE

import roce_frames as rf
# As a module: a TestCase class among this module's names would run here too.
import test_hostile_peer as hp
from test_hostile_peer import DEV, OXE_IP, RQ_PSN

TRACING = '/sys/kernel/tracing'
PAGE = mmap.PAGESIZE
# IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, and IBV_ADVISE_MR_FLAG_FLUSH: the
# prefetch is done when the verb returns.
PREFETCH_WRITE = 1
ADVISE_FLUSH = 1
MADV_DONTNEED = 4
RECORD = re.compile(r'\s(oxe_[a-z_]+): (.*)$')


def tracefs(path, value):
    with open(f'{TRACING}/{path}', 'w') as f:
        f.write(value)


def records(event):
    """The fields of every `event` record in the trace buffer, in order."""
    out = []
    with open(f'{TRACING}/trace') as f:
        for line in f:
            m = RECORD.search(line)
            if m and m.group(1) == event:
                out.append(dict(kv.split('=', 1) for kv in m.group(2).split()))
    return out


def guid(dev):
    """The node GUID the events name a device by, as they print it."""
    with open(f'/sys/class/infiniband/{dev}/node_guid') as f:
        return f.read().strip().replace(':', '')


class Trace(unittest.TestCase):
    # The hostile peer's fixture (a context, a PD, a CQ, an MR, and QPs
    # connected to netns "peer"), without its tests.
    connected_qp = hp.HostilePeer.connected_qp
    post_send = hp.HostilePeer.post_send
    poll = hp.HostilePeer.poll

    @classmethod
    def setUpClass(cls):
        hp.HostilePeer.setUpClass.__func__(cls)
        if not os.path.exists(f'{TRACING}/trace'):
            subprocess.run(['mount', '-t', 'tracefs', 'nodev', TRACING], check=True)
        cls.guid = guid(DEV)

    @classmethod
    def tearDownClass(cls):
        hp.HostilePeer.tearDownClass.__func__(cls)

    def setUp(self):
        hp.HostilePeer.setUp(self)
        tracefs('events/oxe/enable', '1')
        tracefs('trace', '')

    def tearDown(self):
        tracefs('events/oxe/enable', '0')
        hp.HostilePeer.tearDown(self)

    def one(self, event, **want):
        """The one `event` record whose fields include `want`."""
        found = [r for r in records(event) if all(r.get(k) == v for k, v in want.items())]
        self.assertEqual(len(found), 1, f'{event} with {want}: {records(event)}')
        return found[0]

    def test_mr_registered_reregistered_deregistered(self):
        flags = acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_READ
        mr = MR(self.pd, 4 * PAGE, flags)
        key = f'0x{mr.lkey:08x}'
        r = self.one('oxe_mr_reg', key=key)
        self.assertEqual(r, {'guid': self.guid, 'key': key, 'kind': 'user',
                             'iova': f'0x{mr.buf:x}', 'length': str(4 * PAGE),
                             'start': f'0x{mr.buf:x}', 'access': f'0x{int(flags):x}',
                             'odp': '0'})
        wider = flags | acc.IBV_ACCESS_REMOTE_WRITE
        mr.rereg(flags=rereg.IBV_REREG_MR_CHANGE_ACCESS, pd=self.pd, addr=0, length=0,
                 access=wider)
        r = self.one('oxe_mr_rereg', key=key)
        self.assertEqual((r['flags'], r['access']),
                         (f'0x{int(rereg.IBV_REREG_MR_CHANGE_ACCESS):x}',
                          f'0x{int(flags):x}->0x{int(wider):x}'))
        self.assertEqual(r['iova'], f'0x{mr.buf:x}->0x{mr.buf:x}')
        mr.close()
        self.assertEqual(self.one('oxe_mr_dereg', key=key), {'guid': self.guid, 'key': key})

    def test_odp_prefetch_faults_and_dontneed_invalidates(self):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        pages = 8
        size = pages * PAGE
        addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                         mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        self.assertNotEqual(addr, ctypes.c_void_p(-1).value, 'mmap failed')
        odp = MR(self.pd, size, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_ON_DEMAND,
                 address=addr)
        try:
            self.assertEqual(self.one('oxe_mr_reg', key=f'0x{odp.lkey:08x}')['odp'], '1')
            self.pd.advise_mr(PREFETCH_WRITE, ADVISE_FLUSH,
                              [SGE(addr, size, odp.lkey)])
            span = {'start': f'0x{addr:x}', 'end': f'0x{addr + size:x}'}
            self.assertEqual(self.one('oxe_odp_fault', **span)['pages'], str(pages))
            self.assertEqual(libc.madvise(addr, size, MADV_DONTNEED), 0)
            self.assertEqual(self.one('oxe_odp_invalidate', **span)['pages'], str(pages))
        finally:
            odp.close()
            libc.munmap(addr, size)

    def write(self, qp, rkey, va, length, psn):
        data = b'w' * length
        self.peer.inject(OXE_IP, rf.roce(rf.RC_RDMA_WRITE_ONLY, qp.qp_num, psn,
                                         rf.reth(va, rkey, length), data, ack_req=True))
        nak = self.peer.expect(rf.RC_ACKNOWLEDGE)
        self.assertEqual((nak.psn, nak.syndrome) if nak else None, (psn, rf.NAK_REMOTE_ACCESS))

    def test_refused_rkeys_say_why(self):
        qp = self.connected_qp()
        reader = MR(self.pd, PAGE, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_READ)
        try:
            key = f'0x{reader.rkey:08x}'
            self.write(qp, reader.rkey, reader.buf, 64, RQ_PSN)
            r = self.one('oxe_key_refused', key=key)
            self.assertEqual(r, {'guid': self.guid, 'qpn': str(qp.qp_num), 'key': key,
                                 'va': f'0x{reader.buf:x}', 'length': '64',
                                 'op': 'remote_write', 'reason': 'rights'})
        finally:
            reader.close()
        # A NAK moves the QP to the error state: a fresh one for the next.
        qp = self.connected_qp()
        key = f'0x{self.buf.rkey:08x}'
        past = self.buf.buf + 4096 - 32
        self.write(qp, self.buf.rkey, past, 64, RQ_PSN)
        r = self.one('oxe_key_refused', key=key, va=f'0x{past:x}')
        self.assertEqual((r['op'], r['reason'], r['length']), ('remote_write', 'bounds', '64'))
        qp = self.connected_qp()
        nothing = self.buf.rkey ^ 0x00ffff00
        self.write(qp, nothing, self.buf.buf, 16, RQ_PSN)
        r = self.one('oxe_key_refused', key=f'0x{nothing:08x}')
        self.assertEqual((r['op'], r['reason']), ('remote_write', 'rights'))

    def test_qp_walks_its_states_and_goes_back_after_timeouts(self):
        qp = self.connected_qp(timeout=12, retry_cnt=2)  # oxe's 100 ms floor
        states = [(r['state']) for r in records('oxe_qp_state') if r['qpn'] == str(qp.qp_num)]
        self.assertEqual(states, ['RESET->INIT', 'INIT->RTR', 'RTR->RTS'])
        self.post_send(qp)
        for _ in range(3):  # the request, then its two resends
            self.assertIsNotNone(self.peer.expect(rf.RC_SEND_ONLY, timeout=5.0))
        wc = self.poll()
        self.assertIsNotNone(wc, 'no completion after the last retry')
        backs = [r for r in records('oxe_qp_go_back') if r['qpn'] == str(qp.qp_num)]
        self.assertEqual([(r['psn'], r['why'], r['retries_left']) for r in backs],
                         [(str(hp.SQ_PSN), 'timeout', '1'), (str(hp.SQ_PSN), 'timeout', '0')])
        self.assertEqual(self.one('oxe_qp_state', qpn=str(qp.qp_num), state='RTS->ERR')['guid'],
                         self.guid)

    def link_stats(self):
        """`rdma statistic show link DEV/1`, as rdma prints it in JSON."""
        out = subprocess.run(['rdma', '-j', 'statistic', 'show', 'link', f'{DEV}/1'],
                             check=True, capture_output=True, text=True).stdout
        (port,) = json.loads(out)
        return port

    def test_rdma_statistic_show_link_reports_oxes_counters(self):
        port_dir = f'/sys/class/infiniband/{DEV}/ports/1/hw_counters'

        def counters(path):
            # Beside the counters, ib_core's `lifespan` (how long it caches).
            return sorted(n for n in os.listdir(path) if n != 'lifespan')
        names = counters(port_dir)
        self.assertEqual(names, counters(f'/sys/class/infiniband/{DEV}/hw_counters'))
        self.assertIn('mr_reg', names)
        before = self.link_stats()
        self.assertEqual(sorted(set(names) - set(before)), [], 'counters rdma does not show')
        mrs = [MR(self.pd, PAGE, acc.IBV_ACCESS_LOCAL_WRITE) for _ in range(3)]
        during = self.link_stats()
        for mr in mrs:
            mr.close()
        after = self.link_stats()
        self.assertEqual((during['mr_reg'] - before['mr_reg'],
                          during['mr_active'] - before['mr_active']), (3, 3))
        self.assertEqual((after['mr_dereg'] - during['mr_dereg'],
                          after['mr_active'] - before['mr_active']), (3, 0))
        with open(f'{port_dir}/mr_reg') as f:
            self.assertEqual(int(f.read()), after['mr_reg'])


if __name__ == '__main__':
    unittest.main()
