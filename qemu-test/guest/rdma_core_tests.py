#!/usr/bin/env python3
"""rdma-core's tests, run as its tests/run_tests.py runs them (same options,
same output), that also write each test's wall time to the file named by
$OXE_TEST_TIMES, slowest first, and the verdicts to $OXE_VERDICTS
(verdicts.py). A debug guest spends most of `make test` in
these tests: the times say which ones, and whether a change made one slower.

Vendor tests (mlx5, EFA) are left out: each skips itself unless the device
is that vendor's, on oxe and rxe alike, but only after its setUp has opened
the device, about a second a test on a debug guest (142 tests, 120 s).

The pyverbs and tests of the rdma-core build in $OXE_RDMA_CORE (v59, or v65
in the stock65 guest).
"""
import os
import sys
import time
import unittest
from importlib.machinery import SourceFileLoader

from verdicts import VerdictResult, write as write_verdicts  # noqa: E402  (beside this file)

RDMA_CORE = os.environ["OXE_RDMA_CORE"]
TESTS = os.path.join(RDMA_CORE, "tests")
sys.path[:0] = [TESTS, os.path.join(RDMA_CORE, "build", "python")]
from args_parser import parser  # noqa: E402  (rdma-core's, found through TESTS)

tests = SourceFileLoader("tests", os.path.join(TESTS, "__init__.py")).load_module()
parser.parse_args()


# Test modules that only ever run on one vendor's hardware, and any the
# caller leaves out ($OXE_SKIP_TESTS, test id prefixes separated by spaces).
VENDOR = ("tests.test_mlx5_", "tests.test_efa")
LEFT_OUT = VENDOR + tuple(os.environ.get("OXE_SKIP_TESTS", "").split())


def without_vendor(suite):
    """`suite` without the tests of LEFT_OUT (kept nested as it was)."""
    kept = unittest.TestSuite()
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            kept.addTest(without_vendor(t))
        elif not t.id().startswith(LEFT_OUT):
            kept.addTest(t)
    return kept


class TimedResult(VerdictResult):
    times = {}

    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        TimedResult.times[test.id()] = time.monotonic() - self._t0


class TimedRunner(unittest.TextTestRunner):
    resultclass = TimedResult

    def run(self, test):
        return super().run(without_vendor(test))


prog = unittest.main(module=tests, testRunner=TimedRunner, exit=False)
write_verdicts(prog.result)
out = os.environ.get("OXE_TEST_TIMES")
if out:
    with open(out, "w") as f:
        for name, secs in sorted(TimedResult.times.items(), key=lambda kv: -kv[1]):
            f.write(f"{secs:8.2f}\t{name}\n")
sys.exit(not prog.result.wasSuccessful())
