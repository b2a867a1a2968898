#!/usr/bin/python3
"""What an unprivileged local user can see of, or take from, device OXE_DEV.

Run as root by suite_security (suites/hostile.sh); each test acts as an
unprivileged user (uid and gid 65534, no capabilities, through setpriv) where
the threat is such a user, and judges by what that user got.

- Key material: ib_core shows an MR's lkey and rkey only to a caller with
  CAP_NET_ADMIN. oxe's driver attributes must not give them (or the key's
  index, 24 of its 32 bits) to anyone else.
- Resizing a CQ or an SRQ moves what it holds a bounded step at a time,
  never a copy sized by the queue (up to 16 MiB) with interrupts off.
- One process's ODP fault that never resolves (a mapping of a file whose
  FUSE daemon never answers) holds up that process alone: another process
  on the device goes on faulting, moving data and destroying its QPs.
- Port 4791: a user who binds the RoCE v2 port of a namespace before oxe
  does must make `rdma link add` fail, not leave oxe listening on one
  address family while the user's socket takes the other's packets.
- A network namespace deleted under a running oxe device takes the
  device's RoCE sockets with it, whether its netdev is destroyed or handed
  back to the initial namespace.
"""
import errno
import json
import os
import select
import subprocess
import sys
import time
import unittest

from pyverbs.device import Context
from pyverbs.libibverbs_enums import ibv_access_flags as acc
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SGE
from pyverbs.libibverbs_enums import ibv_qp_type, ibv_qp_state, ibv_wc_status, ibv_qp_attr_mask

DEV = os.environ.get('OXE_DEV', 'oxe0')
GID_INDEX = int(os.environ.get('OXE_GID', '1'))
GUEST = os.path.dirname(os.path.abspath(__file__))
NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
          '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs']
ROCE_PORT = 4791
NS = 'sec'


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def mr_entries(as_nobody):
    """`rdma -j -dd resource show mr dev DEV`, as root or as nobody."""
    cmd = ['rdma', '-j', '-dd', 'resource', 'show', 'mr', 'dev', DEV]
    r = run((NOBODY if as_nobody else []) + cmd)
    if r.returncode != 0:
        raise AssertionError(f'{cmd} failed ({r.returncode}): {r.stderr}')
    return json.loads(r.stdout or '[]')


def key_forms(key):
    """Every way a key or its index could be written in a netlink value."""
    forms = set()
    for v in (key, key >> 8):
        forms |= {str(v), f'{v:x}', f'{v:#x}', f'{v:#010x}', f'{v:08x}'}
    return forms


class KeyMaterial(unittest.TestCase):
    def setUp(self):
        self.ctx = Context(name=DEV)
        self.pd = PD(self.ctx)
        # A length no other MR of the run has, to find this one in the dump.
        self.len = 3 * 4096 + 4096 * 7
        self.mr = MR(self.pd, self.len,
                     acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE |
                     acc.IBV_ACCESS_REMOTE_READ)

    def tearDown(self):
        self.mr.close()
        self.pd.close()
        self.ctx.close()

    def find(self, entries):
        mine = [e for e in entries if e.get('mrlen') == self.len]
        self.assertEqual(len(mine), 1, f'MR of {self.len} bytes not listed once: {entries}')
        return mine[0]

    def test_root_sees_keys(self):
        """The test's own check: with CAP_NET_ADMIN the keys are there, so
        the dump does list this MR and the unprivileged test below looks
        at the right entry."""
        e = self.find(mr_entries(as_nobody=False))
        # (rdma prints the keys as hex strings.)
        self.assertEqual(int(str(e.get('rkey')), 16), self.mr.rkey)
        self.assertEqual(int(str(e.get('lkey')), 16), self.mr.lkey)

    def test_unprivileged_sees_no_key_material(self):
        e = self.find(mr_entries(as_nobody=True))
        self.assertNotIn('rkey', e)
        self.assertNotIn('lkey', e)
        forbidden = key_forms(self.mr.lkey) | key_forms(self.mr.rkey)
        # Every value the entry holds, the driver's attributes included,
        # as text: a key or its index must be in none of them.
        for name, value in e.items():
            if name in ('mrn', 'pdn', 'mrlen', 'pid', 'ifindex', 'dev', 'comm'):
                continue
            words = set(json.dumps(value).replace('"', ' ').replace(',', ' ').split())
            leaked = words & forbidden
            self.assertFalse(leaked, f'{name} = {value!r} gives key material {leaked}'
                             f' (lkey {self.mr.lkey:#x}, rkey {self.mr.rkey:#x})')
        # Still the driver's view, without its keys.
        self.assertIn('pages', json.dumps(e), f'no oxe driver attributes: {e}')


def counter(name):
    """One of the device's counters; its absence fails the test."""
    path = f'/sys/class/infiniband/{DEV}/hw_counters/{name}'
    if not os.path.exists(path):
        raise AssertionError(f'{DEV} has no counter {name}')
    # ib_core caches hw counters for 10 ms: read past that.
    time.sleep(0.05)
    with open(path) as f:
        return int(f.read())


# The most entries a resize may copy in one step with the queue's locks
# held (rust/ib/queue.rs, RESIZE_STEP).
RESIZE_STEP = 64
HELD = 1500


class ResizeSteps(unittest.TestCase):
    def setUp(self):
        self.ctx = Context(name=DEV)
        self.pd = PD(self.ctx)
        self.buf = MR(self.pd, 4096, acc.IBV_ACCESS_LOCAL_WRITE)

    def tearDown(self):
        self.ctx.close()

    def post_recvs(self, target, n):
        for i in range(n):
            sge = SGE(self.buf.buf, 64, self.buf.lkey)
            target.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[sge]))

    def test_cq_resize_moves_in_steps(self):
        """HELD flushed receives wait in a CQ; a resize keeps them all, in
        order, and copies no more than RESIZE_STEP of them at once."""
        cq = CQ(self.ctx, 2048)
        cap = QPCap(max_send_wr=1, max_recv_wr=2048, max_send_sge=1, max_recv_sge=1)
        qp = QP(self.pd, QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        # Receives may be posted from INIT on (IBTA 10.8.2.1).
        qp.to_init(QPAttr(port_num=1))
        self.post_recvs(qp, HELD)
        attr = QPAttr(qp_state=ibv_qp_state.IBV_QPS_ERR)
        qp.modify(attr, ibv_qp_attr_mask.IBV_QP_STATE)
        # The flush runs in the QP's work, one pass over the receive queue
        # (milliseconds); nothing tells user space it is over without
        # taking completions, so wait. Were it not over, fewer than HELD
        # would move below and the test would fail, not pass.
        time.sleep(3)
        moved0 = counter('resize_entries')
        cq.resize(8192)
        got = []
        while len(got) < HELD:
            n, wcs = cq.poll(64)
            if n == 0:
                break
            got += wcs[:n]
        self.assertEqual([wc.wr_id for wc in got], list(range(HELD)))
        self.assertTrue(all(wc.status == ibv_wc_status.IBV_WC_WR_FLUSH_ERR for wc in got))
        self.assertEqual(counter('resize_entries') - moved0, HELD)
        self.assertLessEqual(counter('resize_step_max'), RESIZE_STEP)
        self.assertGreater(counter('resize_step_max'), 0)
        qp.close()
        cq.close()

    def test_srq_resize_moves_in_steps(self):
        srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=2048, max_sge=1)))
        self.post_recvs(srq, HELD)
        moved0 = counter('resize_entries')
        srq.modify(SrqAttr(max_wr=4096), 1)  # IBV_SRQ_MAX_WR
        self.assertEqual(counter('resize_entries') - moved0, HELD)
        self.assertLessEqual(counter('resize_step_max'), RESIZE_STEP)
        self.assertGreaterEqual(srq.query().max_wr, 4096)
        srq.close()


def readline(proc, secs):
    """A line of `proc`'s output within `secs`, or None."""
    r, _, _ = select.select([proc.stdout], [], [], secs)
    return proc.stdout.readline().strip() if r else None


# Process A: an ODP MR over a private mapping of the stalled file, and an
# asynchronous prefetch for writing, which the device's fault then waits
# on (the file system holds its READ).
STUCK = """
import ctypes, mmap, os, sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.wr import SGE
from pyverbs.libibverbs_enums import ibv_access_flags as acc, _IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE
dev, path = sys.argv[1:3]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(path, os.O_RDWR)
size = 1 << 20
addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd, 0)
ctx = Context(name=dev)
pd = PD(ctx)
mr = MR(pd, size, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE | acc.IBV_ACCESS_ON_DEMAND,
        address=addr)
pd.advise_mr(_IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, [SGE(addr, 4096, mr.lkey)])
print('advised', flush=True)
sys.stdin.read()
"""

# Process B: two RC QPs of the device connected to each other, an RDMA
# WRITE of 8 KiB into an ODP MR whose pages nothing has touched (the
# responder takes its faults), then both QPs destroyed. Prints what it saw.
OTHER = """
import ctypes, json, mmap, sys, time
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
from pyverbs.libibverbs_enums import (ibv_access_flags as acc, ibv_qp_type, ibv_mtu,
                                      ibv_wr_opcode, ibv_wc_status)
dev, gid_index = sys.argv[1], int(sys.argv[2])
size = 8192
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 16)
pattern = bytes((i * 7 + 3) & 0xff for i in range(size))
src = MR(pd, size, acc.IBV_ACCESS_LOCAL_WRITE)
src.write(pattern, size)
dst = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
odp = MR(pd, size, acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE | acc.IBV_ACCESS_ON_DEMAND,
         address=dst)
cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
qa = QP(pd, QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
qb = QP(pd, QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
gid = ctx.query_gid(1, gid_index)
for me, other in ((qa, qb), (qb, qa)):
    a = QPAttr(port_num=1, path_mtu=ibv_mtu.IBV_MTU_1024)
    a.qp_access_flags = acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_REMOTE_WRITE
    a.dest_qp_num = other.qp_num
    a.timeout, a.retry_cnt, a.rnr_retry, a.min_rnr_timer = 14, 7, 7, 1
    a.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
    me.to_rts(a)
wr = SendWR(wr_id=1, opcode=ibv_wr_opcode.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, size, src.lkey)])
wr.set_wr_rdma(odp.rkey, dst)
t0 = time.monotonic()
qa.post_send(wr)
status = None
while time.monotonic() - t0 < 20:
    n, wcs = cq.poll()
    if n:
        status = wcs[0].status
        break
    time.sleep(0.01)
write_s = time.monotonic() - t0
data_ok = status == ibv_wc_status.IBV_WC_SUCCESS and ctypes.string_at(dst, size) == pattern
t1 = time.monotonic()
qa.close()
qb.close()
print(json.dumps({'status': status, 'data_ok': data_ok, 'write_s': write_s,
                  'destroy_s': time.monotonic() - t1}), flush=True)
"""


class StalledFault:
    """A process's ODP fault that waits on a READ the FUSE file system of
    fuse_stall.py holds: STUCK maps the file system's file and prefetches
    it on `dev`, asynchronously. `release` answers the READ; until then the
    fault, and what waits for it, stays."""

    def __init__(self, test, mnt, dev):
        os.makedirs(mnt, exist_ok=True)
        self.mnt = mnt
        py = '/usr/bin/python3'
        self.stall = subprocess.Popen([py, os.path.join(GUEST, 'fuse_stall.py'), mnt],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.stuck = None
        # Before any check that may fail: a fault left waiting would hold
        # the device's work item, and so the module's unload, for good.
        test.addCleanup(self.release)
        test.assertEqual(readline(self.stall, 30), 'ready', 'the FUSE file system did not come up')
        self.stuck = subprocess.Popen([py, '-c', STUCK, dev, os.path.join(mnt, 'data')],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        test.assertEqual(readline(self.stuck, 30), 'advised', 'the stuck process could not advise')
        # The device's fault now waits on a READ the file system holds.
        test.assertEqual(readline(self.stall, 30), 'held', 'no fault reached the file system')

    def waiting(self):
        """Whether the file system still holds the READ."""
        return self.stall.poll() is None and not self.stall.stdin.closed

    def release(self):
        """The file system answers the READ, the fault ends and its process
        exits; then the file system goes. Safe to call twice."""
        if self.waiting():
            self.stall.stdin.close()
            if readline(self.stall, 30) != 'answered':
                raise AssertionError('the FUSE file system did not answer the held READ')
        if self.stuck and self.stuck.poll() is None:
            self.stuck.stdin.close()
            self.stuck.wait(timeout=60)
        subprocess.run(['umount', '-l', self.mnt], capture_output=True)
        if self.stall.poll() is None:
            self.stall.terminate()
            self.stall.wait(timeout=30)
        for p in (self.stall, self.stuck):
            if p and p.poll() is not None and not p.stdout.closed:
                p.stdout.close()


class OdpIsolation(unittest.TestCase):
    MNT = '/tmp/oxe-stall'

    def setUp(self):
        # Process A.
        self.fault = StalledFault(self, self.MNT, DEV)

    def test_stuck_fault_holds_up_its_process_alone(self):
        """While A's fault waits for good, B faults, moves its data and
        destroys its QPs as if A were not there."""
        other = subprocess.Popen(['/usr/bin/python3', '-c', OTHER, DEV, str(GID_INDEX)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = other.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            # B is stuck behind A's fault (in D state: it cannot be killed
            # until the fault ends). Let the file system go, then B.
            self.fault.release()
            other.kill()
            out, err = other.communicate(timeout=120)
            self.fail(f'process B did not finish in 60 s while A\'s fault hung; after A was '
                      f'let go it said: {out.strip()} {err.strip()[-400:]}')
        self.assertEqual(other.returncode, 0, err[-800:])
        got = json.loads(out)
        print(f'process B: {got}')
        self.assertEqual(got['status'], 0, f'B\'s WRITE did not complete: {got}')
        self.assertTrue(got['data_ok'], f'B\'s bytes did not land: {got}')
        self.assertLess(got['destroy_s'], 1.0, f'B\'s QPs took long to destroy: {got}')
        # A's fault still waits: the file system still holds its READ.
        self.assertTrue(self.fault.waiting())


def ns_exec(*cmd):
    return ['ip', 'netns', 'exec', NS, *cmd]


HOLD_PORT = """
import socket, sys
fam = socket.AF_INET6 if sys.argv[1] == '6' else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
if fam == socket.AF_INET6:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.bind(('::' if fam == socket.AF_INET6 else '0.0.0.0', %d))
print('bound', flush=True)
sys.stdin.read()
""" % ROCE_PORT


class PortTakeover(unittest.TestCase):
    """A namespace of its own with a dummy netdev, where no oxe device has
    opened port 4791 yet."""

    def setUp(self):
        run(['ip', 'netns', 'del', NS])
        subprocess.run(['ip', 'netns', 'add', NS], check=True)
        subprocess.run(ns_exec('ip', 'link', 'add', 'sec0', 'type', 'dummy'), check=True)
        subprocess.run(ns_exec('ip', 'link', 'set', 'lo', 'up'), check=True)
        subprocess.run(ns_exec('ip', 'link', 'set', 'sec0', 'up'), check=True)
        subprocess.run(ns_exec('ip', 'addr', 'add', '10.77.0.1/24', 'dev', 'sec0'), check=True)
        self.holder = None

    def tearDown(self):
        self.release()
        run(ns_exec('rdma', 'link', 'delete', 'oxe9'))
        run(['ip', 'netns', 'del', NS])

    def hold(self, family):
        """An unprivileged process in the namespace bound to 4791."""
        self.holder = subprocess.Popen(ns_exec(*NOBODY, '/usr/bin/python3', '-c', HOLD_PORT, family),
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.holder.stdout.readline()
        self.assertEqual(line.strip(), 'bound', f'the user could not bind IPv{family} port {ROCE_PORT}')

    def release(self):
        if self.holder:
            self.holder.stdin.close()
            self.holder.wait(timeout=30)
            self.holder = None

    def link_add(self):
        return run(ns_exec('rdma', 'link', 'add', 'oxe9', 'type', 'oxe', 'netdev', 'sec0'))

    def device_exists(self):
        return os.path.exists('/sys/class/infiniband/oxe9')

    def assert_refused_then_works(self):
        r = self.link_add()
        self.assertNotEqual(r.returncode, 0, 'rdma link add succeeded with a user holding the port')
        self.assertFalse(self.device_exists(), 'oxe9 exists though link add failed')
        self.assertIn('Address already in use', r.stderr, f'unclear refusal: {r.stderr!r}')
        # Once the user lets go, the device comes up, and then holds the
        # port against the same user.
        self.release()
        r = self.link_add()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(self.device_exists())
        for family in ('4', '6'):
            p = subprocess.run(ns_exec(*NOBODY, '/usr/bin/python3', '-c', HOLD_PORT, family),
                               input='', capture_output=True, text=True, timeout=30)
            self.assertNotEqual(p.returncode, 0, f'the user bound IPv{family} {ROCE_PORT} beside oxe')
            self.assertIn('Address already in use', p.stderr)

    def test_prebound_ipv6_port_refuses_link_add(self):
        self.hold('6')
        self.assert_refused_then_works()

    def test_prebound_ipv4_port_refuses_link_add(self):
        self.hold('4')
        self.assert_refused_then_works()


# The guest's spare virtio NIC (qemu-test/vm.sh), which namespace deletion
# hands back to the initial namespace.
SPARE_MAC = '52:54:00:0f:00:09'
EXIT_NS = 'secexit'


def links(ns=None):
    cmd = ['ip', '-j', 'link', 'show']
    r = run(['ip', 'netns', 'exec', ns, *cmd] if ns else cmd)
    return json.loads(r.stdout or '[]') if r.returncode == 0 else []


def kernel_log():
    return run(['dmesg']).stdout.splitlines()


DEBUGFS = '/sys/kernel/debug/oxe'


def sockets_view():
    """oxe's list of the namespaces whose port 4791 it holds."""
    with open(f'{DEBUGFS}/sockets') as f:
        return f.read()


class NamespaceExit(unittest.TestCase):
    """A network namespace deleted while an oxe device runs on a netdev
    inside it, and the device cannot go yet: a process's ODP fault on it
    waits on a FUSE READ (as in OdpIsolation), which holds its MR, and so
    the device's unregistration. The namespace's RoCE sockets must be
    closed with the namespace, not when the device finally goes: they hold
    no counted reference to it, so the netns refcount tracker reports one
    left behind, and releasing them later writes into freed memory."""

    DEV = 'oxe7'
    MNT = '/tmp/oxe-stall-exit'

    def setUp(self):
        run(['ip', 'netns', 'del', EXIT_NS])
        subprocess.run(['ip', 'netns', 'add', EXIT_NS], check=True)
        self.fault = None
        self.addCleanup(self.cleanup)
        self.log_start = len(kernel_log())

    def cleanup(self):
        run(['ip', 'netns', 'exec', EXIT_NS, 'rdma', 'link', 'delete', self.DEV])
        run(['rdma', 'link', 'delete', self.DEV])
        run(['ip', 'netns', 'del', EXIT_NS])

    def ns(self, *cmd):
        subprocess.run(['ip', 'netns', 'exec', EXIT_NS, *cmd], check=True, timeout=60)

    def bring_up(self, ifname):
        """oxe7 on `ifname` in the namespace, held by a stuck fault."""
        self.ns('ip', 'link', 'set', 'lo', 'up')
        self.ns('ip', 'link', 'set', ifname, 'up')
        self.ns('ip', 'addr', 'add', '10.78.0.1/24', 'dev', ifname)
        self.ns('rdma', 'link', 'add', self.DEV, 'type', 'oxe', 'netdev', ifname)
        # From the initial namespace (devices are shared between
        # namespaces): a process inside would keep the namespace alive.
        self.fault = StalledFault(self, self.MNT, self.DEV)

    def delete_namespace_and_settle(self, netdev_destroyed):
        """Deletes the namespace, checks that its port 4791 is closed
        while the device still lives, lets the device go, and checks what
        the kernel said."""
        inum = os.stat(f'/run/netns/{EXIT_NS}').st_ino
        entry = f'net:[{inum}] devices 1 '
        self.assertIn(entry, sockets_view(), 'the namespace\'s sockets are not listed')
        subprocess.run(['ip', 'netns', 'del', EXIT_NS], check=True)
        time.sleep(5)
        # The device's state (and its debugfs directory) goes only once the
        # fault ends: it outlives the namespace.
        alive = os.path.isdir(f'{DEBUGFS}/{self.DEV}')
        view = sockets_view()
        self.fault.release()
        if not netdev_destroyed:
            # (A destroyed netdev's namespace waits for the netdev to be
            # let go, and so for the device, before it goes on.)
            self.assertTrue(alive, f'{self.DEV} went while a fault held it: the test proves nothing')
            self.assertNotIn(entry, view, 'the sockets of the deleted namespace were still '
                             f'open while {self.DEV} lived on:\n{view}')
        deadline = time.time() + 30
        while os.path.isdir(f'{DEBUGFS}/{self.DEV}') and time.time() < deadline:
            time.sleep(0.2)
        self.assertFalse(os.path.isdir(f'{DEBUGFS}/{self.DEV}'),
                         f'{self.DEV} outlived its netdev and its holder by 30 s')
        self.assertNotIn(entry, sockets_view())
        time.sleep(2)
        new = kernel_log()[self.log_start:]
        bad = [line for line in new
               if any(w in line for w in ('ref_tracker', 'leaked', 'KASAN', 'WARNING', 'BUG'))]
        self.assertEqual(bad, [], 'the kernel reported:\n' + '\n'.join(new[-80:]))

    def test_virtual_netdev_deleted_with_namespace(self):
        """A netdev the namespace destroys: its teardown waits for oxe to
        let go of the netdev, so the device goes (and its sockets with
        it) before the namespace's exit; checked for what the kernel says
        and for nothing left in the registry. The NIC case is the one the
        exit itself must close."""
        self.ns('ip', 'link', 'add', 'sec1', 'type', 'dummy')
        self.bring_up('sec1')
        self.delete_namespace_and_settle(netdev_destroyed=True)

    def test_nic_returned_to_initial_namespace(self):
        spare = [l['ifname'] for l in links() if l.get('address') == SPARE_MAC]
        self.assertEqual(len(spare), 1, f'no spare NIC {SPARE_MAC} in the guest')
        subprocess.run(['ip', 'link', 'set', spare[0], 'netns', EXIT_NS], check=True)
        self.bring_up(spare[0])
        self.delete_namespace_and_settle(netdev_destroyed=False)
        back = [l['ifname'] for l in links() if l.get('address') == SPARE_MAC]
        self.assertEqual(len(back), 1, 'the NIC did not come back to the initial namespace')
        # A new device on it, in the initial namespace, opens its port.
        subprocess.run(['ip', 'link', 'set', back[0], 'up'], check=True)
        r = run(['rdma', 'link', 'add', self.DEV, 'type', 'oxe', 'netdev', back[0]])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run(['rdma', 'link', 'delete', self.DEV]).returncode, 0)


CHILD = 2 << 20
MAX_CHILDREN = 8192
# Process C: two implicit ODP MRs, prefetches that never fault over a large
# mapping nothing has touched (each 2 MiB makes a child, empty), and how
# many children each MR has after each step. Prints one JSON line.
CHILDREN = """
import ctypes, errno, json, mmap, re, sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.wr import SGE
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.libibverbs_enums import (ibv_access_flags as acc, _IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
                                      _IBV_ADVISE_MR_FLAG_FLUSH)
dev = sys.argv[1]
CHILD = 2 << 20
STEP = 1 << 31
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
span = 24 << 30
base = libc.mmap(None, span + CHILD, mmap.PROT_READ | mmap.PROT_WRITE,
                 mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000, -1, 0)  # MAP_NORESERVE
base = (base + CHILD - 1) & ~(CHILD - 1)
ctx = Context(name=dev)
pd = PD(ctx)
access = acc.IBV_ACCESS_LOCAL_WRITE | acc.IBV_ACCESS_ON_DEMAND
def children(mr):
    with open(f'/sys/kernel/debug/oxe/{dev}/mr-{mr.lkey >> 8}') as f:
        return int(re.search(r'in (\\d+) children', f.read()).group(1))
def prefetch(mr, start, length):
    try:
        for at in range(start, start + length, STEP):
            pd.advise_mr(_IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, _IBV_ADVISE_MR_FLAG_FLUSH,
                         [SGE(base + at, min(STEP, start + length - at), mr.lkey)])
        return 0
    except PyverbsRDMAError as e:
        return e.error_code
out = {}
a = MR(pd, 0, access, implicit=True)
b = MR(pd, 0, access, implicit=True)
out['a_16g'] = prefetch(a, 0, 16 << 30)
out['a_children'] = children(a)
# A holds every child the process may have, and B has none of its own to give up.
out['b_none'] = prefetch(b, 16 << 30, CHILD)
# A, at the cap, makes room among its own (all empty).
out['a_more'] = prefetch(a, 16 << 30, 2 << 30)
out['after_a_more'] = [children(a), children(b)]
out['b_8g'] = prefetch(b, 16 << 30, 8 << 30)
out['after_b'] = [children(a), children(b)]
a.close()
b.close()
# Every child went back with its MR: a new one fills the whole cap again.
c = MR(pd, 0, access, implicit=True)
out['c_16g'] = prefetch(c, 0, 16 << 30)
out['c_children'] = children(c)
print(json.dumps(out), flush=True)
"""


class OdpChildren(unittest.TestCase):
    """ib_core allocates an ODP child's page lists (about 9 KiB for 2 MiB)
    without charging the process's memory cgroup, and a prefetch that does
    not fault makes children without touching memory: a process's ODP MRs
    together hold at most 8192 children, each MR making room among its own
    and failing with ENOMEM when it has none."""

    def test_children_are_bounded_per_process(self):
        p = subprocess.run(['/usr/bin/python3', '-c', CHILDREN, DEV],
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr[-1500:])
        got = json.loads(p.stdout)
        print(f'children: {got}')
        self.assertEqual((got['a_16g'], got['a_children']), (0, MAX_CHILDREN), got)
        self.assertEqual(got['b_none'], errno.ENOMEM, got)
        self.assertEqual(got['a_more'], 0, got)
        self.assertLessEqual(sum(got['after_a_more']), MAX_CHILDREN, got)
        self.assertEqual(got['b_8g'], 0, got)
        self.assertLessEqual(sum(got['after_b']), MAX_CHILDREN, got)
        self.assertGreater(got['after_b'][1], 0, got)
        self.assertEqual((got['c_16g'], got['c_children']), (0, MAX_CHILDREN), got)


if __name__ == '__main__':
    unittest.main()
