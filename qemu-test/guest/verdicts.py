#!/usr/bin/python3
"""unittest's verdicts as its runner decided them, for results.py.

A suite's verdicts come from the TestResult the runner filled in, not from
reading its output back: a test that prints "... ok" itself, or a runner
killed halfway, cannot pass for one that passed. The runner writes them to
$OXE_VERDICTS when it ends, as JSON: {"ran": N, "verdicts": {test id:
verdict}}, a verdict one of "ok", "FAIL", "ERROR", "skipped", "expected
failure", "unexpected success". No file means the runner did not finish.

  verdicts.py MODULE [unittest arguments]   runs MODULE's tests as `python3 -m unittest -v` does
"""
import json
import os
import sys
import unittest


class VerdictResult(unittest.TextTestResult):
    """A text result that also keeps each test's verdict."""

    verdicts = {}

    def _set(self, test, verdict):
        # A subtest's outcome (a skip or a failure inside `subTest`) is its
        # test's: record it under the test's id, not the subtest's.
        test = getattr(test, "test_case", test)
        tid = test.id()
        # A failed subtest fails its test, whatever the rest of it did.
        if VerdictResult.verdicts.get(tid) not in ("FAIL", "ERROR"):
            VerdictResult.verdicts[tid] = verdict

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "FAIL")

    def addError(self, test, err):
        super().addError(test, err)
        self._set(test, "ERROR")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, "skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, "unexpected success")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._set(test, "FAIL" if issubclass(err[0], test.failureException) else "ERROR")


def write(result):
    """Writes the verdicts to $OXE_VERDICTS, if it is set."""
    path = os.environ.get("OXE_VERDICTS")
    if path:
        with open(path, "w") as f:
            json.dump({"ran": result.testsRun, "verdicts": VerdictResult.verdicts}, f,
                      indent=1, sort_keys=True)


class VerdictRunner(unittest.TextTestRunner):
    resultclass = VerdictResult


def main(argv):
    # As `python3 -m unittest` does: test modules are found from where it runs.
    sys.path.insert(0, os.getcwd())
    prog = unittest.main(module=None, argv=["verdicts.py", "-v"] + argv[1:],
                         testRunner=VerdictRunner, exit=False)
    write(prog.result)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
