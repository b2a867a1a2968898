#!/usr/bin/python3
"""The device's limits, as query_device reports them, are what creation
enforces: one object past the limit fails with ENOMEM, and destroying one
makes room again. The memory of the queues a process maps is charged to its
memory cgroup, so that the cgroup's limit bounds it too. Run by suite_limits
(suites/hostile.sh) with oxe loaded with lowered limits (modprobe oxe
max_pd=... ), on device OXE_DEV.

The kernel's own objects (ib_mad's QP1, its CQ and PD) count too: each test
reads the device's gauge first and expects exactly the rest.
"""
import errno
import os
import subprocess
import time
import unittest

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.libibverbs_enums import ibv_access_flags as acc
from pyverbs.libibverbs_enums import ibv_qp_type
from pyverbs.libibverbs_enums import ibv_mw_type
from pyverbs.mr import MR, MW
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr

DEV = os.environ.get('OXE_DEV', 'oxe0')


# ib_core caches a device's hw counters for their lifespan (10 ms by default,
# rounded up to whole jiffies, and still in force in the jiffy it ends): a
# read that soon after the previous one gets the values from before whatever
# happened in between. On a fast host four PDs closed in that time still
# showed as live.
COUNTER_SETTLE_SECONDS = 0.05


def gauge(name):
    time.sleep(COUNTER_SETTLE_SECONDS)
    for d in ('hw_counters', 'ports/1/hw_counters'):
        path = f'/sys/class/infiniband/{DEV}/{d}/{name}'
        if os.path.exists(path):
            with open(path) as f:
                return int(f.read())
    raise AssertionError(f'{DEV} has no counter {name}')


class Limits(unittest.TestCase):
    def setUp(self):
        self.ctx = Context(name=DEV)
        self.attr = self.ctx.query_device()
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 4)

    def tearDown(self):
        self.ctx.close()

    def fill(self, gauge_name, limit, make):
        """Makes objects until one is refused; checks the count and errno."""
        # The suite lowers every limit to a handful: a limit in the
        # thousands means the module did not take its parameters.
        self.assertLessEqual(limit, 64, f'{gauge_name}: limit {limit} was not lowered')
        room = limit - gauge(gauge_name)
        self.assertGreater(room, 0, f'{gauge_name} already at its limit {limit}')
        made = []
        with self.assertRaises(PyverbsRDMAError) as refused:
            for _ in range(room + 1):
                made.append(make())
        self.assertEqual(len(made), room)
        self.assertEqual(refused.exception.error_code, errno.ENOMEM)
        self.assertEqual(gauge(gauge_name), limit)
        made.pop().close()
        made.append(make())  # room again for one
        for o in made:
            o.close()
        self.assertEqual(gauge(gauge_name), limit - room)

    def test_max_pd(self):
        self.fill('pd_active', self.attr.max_pd, lambda: PD(self.ctx))

    def test_max_mr(self):
        self.fill('mr_active', self.attr.max_mr,
                  lambda: MR(self.pd, 4096, acc.IBV_ACCESS_LOCAL_WRITE))

    def test_max_cq(self):
        self.fill('cq_active', self.attr.max_cq, lambda: CQ(self.ctx, 4))

    def test_max_qp(self):
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap)
        self.fill('qp_active', self.attr.max_qp, lambda: QP(self.pd, init))

    def test_max_srq(self):
        self.fill('srq_active', self.attr.max_srq,
                  lambda: SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1))))

    def test_max_mw(self):
        self.fill('mw_active', self.attr.max_mw,
                  lambda: MW(self.pd, ibv_mw_type.IBV_MW_TYPE_2))


CGROUPS = '/sys/fs/cgroup'
# What memory.current may lag by: the memory cgroup's per-CPU charge stock.
STOCK = 64 * 4096


class QueueMemory(unittest.TestCase):
    """The test process runs in a cgroup of its own, whose memory.current
    shows what is charged to it."""

    ENTRIES = 65536  # the largest CQ
    RING = ENTRIES * 64  # bytes of its ring (OxeCqe::SIZE each)

    def setUp(self):
        if not os.path.exists(f'{CGROUPS}/cgroup.controllers'):
            subprocess.run(['mount', '-t', 'cgroup2', 'none', CGROUPS], check=True)
        with open(f'{CGROUPS}/cgroup.controllers') as f:
            self.assertIn('memory', f.read().split(), 'the kernel has no memory cgroups')
        with open(f'{CGROUPS}/cgroup.subtree_control', 'w') as f:
            f.write('+memory')
        self.cg = f'{CGROUPS}/oxe-queue-memory'
        os.makedirs(self.cg, exist_ok=True)
        self.join(self.cg)
        self.addCleanup(self.leave)
        self.ctx = Context(name=DEV)

    def tearDown(self):
        self.ctx.close()

    def leave(self):
        self.join(CGROUPS)
        os.rmdir(self.cg)

    @staticmethod
    def join(cg):
        with open(f'{cg}/cgroup.procs', 'w') as f:
            f.write(str(os.getpid()))

    def charged(self):
        with open(f'{self.cg}/memory.current') as f:
            return int(f.read())

    def test_cq_ring_is_charged_to_the_cgroup(self):
        ring = self.RING
        before = self.charged()
        cq = CQ(self.ctx, self.ENTRIES)
        grown = self.charged() - before
        # memory.current moves in batches through a per-CPU stock of up to
        # 64 pages (MEMCG_CHARGE_BATCH), both ways: pages an earlier test
        # gave back may still be charged, and some given back now may stay.
        self.assertGreaterEqual(grown, ring - STOCK, 'the CQ ring was not charged to the cgroup')
        cq.close()
        released = before + grown - self.charged()
        self.assertGreaterEqual(released, ring - STOCK, 'the charge outlived the CQ')

    def assert_charged(self, make, ring, what):
        """Making the object charges at least `ring` bytes to the cgroup,
        and closing it gives them back."""
        before = self.charged()
        obj = make()
        grown = self.charged() - before
        self.assertGreaterEqual(grown, ring - STOCK, f'the {what} was not charged to the cgroup')
        obj.close()
        released = before + grown - self.charged()
        self.assertGreaterEqual(released, ring - STOCK, f'the charge outlived the {what}')

    def test_qp_rings_are_charged_to_the_cgroup(self):
        entries, sge = 1 << 14, 4
        pd = PD(self.ctx)
        cq = CQ(self.ctx, 16)
        cap = QPCap(max_send_wr=entries, max_recv_wr=entries, max_send_sge=sge, max_recv_sge=sge)
        init = QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)
        # At least a 64-byte send WQE and a 16-byte receive WQE, with their
        # SGEs of 16 bytes each, per entry: 3.25 MiB here.
        ring = entries * (64 + 16 * sge) + entries * (16 + 16 * sge)
        self.assert_charged(lambda: QP(pd, init), ring, 'QP\'s rings')
        cq.close()
        pd.close()

    def test_srq_ring_is_charged_to_the_cgroup(self):
        entries, sge = 1 << 14, 4
        pd = PD(self.ctx)
        ring = entries * (16 + 16 * sge)
        self.assert_charged(lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=entries, max_sge=sge))),
                            ring, 'SRQ\'s ring')
        pd.close()

    def test_cq_past_the_cgroups_limit_is_refused(self):
        # Room for half the ring: the verb must fail with ENOMEM, not call
        # the OOM killer (which would pick this process).
        with open(f'{self.cg}/memory.max', 'w') as f:
            f.write(str(self.charged() + self.RING // 2))
        try:
            with self.assertRaises(PyverbsRDMAError) as refused:
                CQ(self.ctx, self.ENTRIES)
            self.assertEqual(refused.exception.error_code, errno.ENOMEM)
        finally:
            with open(f'{self.cg}/memory.max', 'w') as f:
                f.write('max')
        CQ(self.ctx, self.ENTRIES).close()


if __name__ == '__main__':
    unittest.main(verbosity=2)
