#!/usr/bin/python3
"""What an unprivileged local user can see of, or take from, device OXE_DEV.

Run as root by suite_security (suites/hostile.sh); each test acts as an
unprivileged user (uid and gid 65534, no capabilities, through setpriv) where
the threat is such a user, and judges by what that user got.

- Key material: ib_core shows an MR's lkey and rkey only to a caller with
  CAP_NET_ADMIN. oxe's driver attributes must not give them (or the key's
  index, 24 of its 32 bits) to anyone else.
- Port 4791: a user who binds the RoCE v2 port of a namespace before oxe
  does must make `rdma link add` fail, not leave oxe listening on one
  address family while the user's socket takes the other's packets.
"""
import json
import os
import socket
import subprocess
import time
import unittest

from pyverbs.device import Context
from pyverbs.libibverbs_enums import ibv_access_flags as acc
from pyverbs.mr import MR
from pyverbs.pd import PD

DEV = os.environ.get('OXE_DEV', 'oxe0')
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
        self.assertEqual(e.get('rkey'), self.mr.rkey)
        self.assertEqual(e.get('lkey'), self.mr.lkey)

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


if __name__ == '__main__':
    unittest.main()
