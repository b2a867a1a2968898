#!/usr/bin/python3
"""A port's speed is its netdev's: ibv_query_port's active speed and width
and ibv_query_port_speed (rdma-core v64 and later) follow the link speed the
netdev reports, and a port that is down reads 0. Run as suite port_speed
(unittest_suite, main.sh stock65) in the guest that runs rdma-core v65, on an oxe device of its own over the guest's spare virtio NIC,
whose reported speed ethtool can set.
"""
import errno
import os
import re
import subprocess
import time
import unittest

from pyverbs.device import Context
from pyverbs.libibverbs_enums import ibv_port_state
from pyverbs.pyverbs_error import PyverbsRDMAError

DEV = 'oxe_speed'
# The guest's spare virtio NIC (qemu-test/vm.sh).
SPARE_MAC = '52:54:00:0f:00:09'
# ib_core maps a netdev's speed to the IB grid (ib_get_width_and_speed):
# Mb/s as the netdev reports it, the width and per-lane speed ibv_query_port
# then shows, and the rate ibv_query_port_speed returns (units of 100 Mb/s).
# pyverbs' enum values: width 1X = 1, 4X = 2; speed SDR = 1, FDR10 = 8,
# EDR = 32.
GRID = [
    (1000, 1, 1, 25),
    (10000, 1, 8, 100),
    (25000, 1, 32, 250),
    (100000, 2, 32, 1000),
]
WAIT_SECONDS = 10


def run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def spare_nic():
    for name in os.listdir('/sys/class/net'):
        with open(f'/sys/class/net/{name}/address') as f:
            if f.read().strip() == SPARE_MAC:
                return name
    raise AssertionError(f'no spare NIC {SPARE_MAC} in the guest')


def sysfs_rate():
    """The port's rate file, '10 Gb/sec (1X FDR10)', in units of 100 Mb/s."""
    with open(f'/sys/class/infiniband/{DEV}/ports/1/rate') as f:
        text = f.read()
    m = re.match(r'([0-9.]+) Gb/sec', text)
    assert m, f'rate file reads {text!r}'
    return round(float(m.group(1)) * 10)


class PortSpeed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.nic = spare_nic()
        run('ip', 'link', 'set', cls.nic, 'up')
        run('rdma', 'link', 'add', DEV, 'type', 'oxe', 'netdev', cls.nic)

    @classmethod
    def tearDownClass(cls):
        run('rdma', 'link', 'delete', DEV)
        run('ip', 'link', 'set', cls.nic, 'down')

    def set_link(self, mbps):
        run('ethtool', '-s', self.nic, 'speed', str(mbps), 'duplex', 'full')

    def wait_state(self, ctx, state):
        deadline = time.monotonic() + WAIT_SECONDS
        while ctx.query_port(1).state != state:
            self.assertLess(time.monotonic(), deadline, f'port never reached state {state}')
            time.sleep(0.05)

    def test_speed_follows_the_netdev(self):
        with Context(name=DEV) as ctx:
            self.wait_state(ctx, ibv_port_state.IBV_PORT_ACTIVE)
            for mbps, width, speed, rate in GRID:
                with self.subTest(mbps=mbps):
                    self.set_link(mbps)
                    port = ctx.query_port(1)
                    self.assertEqual((port.active_width, port.active_speed), (width, speed))
                    self.assertEqual(ctx.query_port_speed(1), rate)
                    self.assertEqual(sysfs_rate(), rate)

    def test_a_port_down_reads_zero(self):
        with Context(name=DEV) as ctx:
            self.set_link(25000)
            self.wait_state(ctx, ibv_port_state.IBV_PORT_ACTIVE)
            self.assertEqual(ctx.query_port_speed(1), 250)
            run('ip', 'link', 'set', self.nic, 'down')
            try:
                self.wait_state(ctx, ibv_port_state.IBV_PORT_DOWN)
                self.assertEqual(ctx.query_port_speed(1), 0)
            finally:
                run('ip', 'link', 'set', self.nic, 'up')
            self.wait_state(ctx, ibv_port_state.IBV_PORT_ACTIVE)
            self.assertEqual(ctx.query_port_speed(1), 250)

    def test_no_port_two(self):
        with Context(name=DEV) as ctx:
            with self.assertRaises(PyverbsRDMAError) as e:
                ctx.query_port_speed(2)
            self.assertEqual(e.exception.error_code, errno.EINVAL)


if __name__ == '__main__':
    unittest.main()
