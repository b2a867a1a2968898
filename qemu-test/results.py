#!/usr/bin/python3
"""Turns suite output into results and holds oxe to its expectations.

  results.py unittest LOG SUITE DEVICE SECONDS   per-test verdicts + counts (JSON) beside LOG,
                                                 from the runner's LOG.runner.json
  results.py ratchet EXPECTED VERDICTS_JSON      fails if a listed test did not pass
  results.py grow EXPECTED VERDICTS_JSON         adds newly passing tests to EXPECTED
  results.py stock-clean VERDICTS_JSON           fails on any FAIL or ERROR among rdma-core's own tests
  results.py stock-compare OXE_JSON RXE_JSON [--gate]
                                                 rdma-core's own tests: what passes on one device only;
                                                 --gate fails if any passes on rxe only
  results.py summary SUITE_DIR OUT               merges per-suite counts into summary.json
  results.py junit RESULTS OUT [SINCE]           a guest's suites (and each unittest test) as JUnit XML;
                                                 unittest runs only from files newer than SINCE

The expectations files only grow: `grow` never removes a line, and `ratchet` fails
the run for any listed test that is not "ok" (missing counts as not ok).
"""
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

def unittest_cmd(log, suite, device, seconds):
    """Counts and per-test verdicts of a unittest run, from what its runner
    recorded (guest/verdicts.py writes LOG's .runner.json as it ends)."""
    runner = Path(log).with_suffix(".runner.json")
    if not runner.exists():
        print(f"{suite}: the test runner left no verdicts ({runner.name}): it did not finish",
              file=sys.stderr)
        return 1
    got = json.loads(runner.read_text())
    verdicts = got["verdicts"]
    counts = {k: sum(1 for v in verdicts.values() if v == k) for k in ("ok", "FAIL", "ERROR", "skipped")}
    summary = {
        "suite": suite,
        "device": device,
        "ran": got["ran"],
        "ok": counts["ok"],
        "failures": counts["FAIL"],
        "errors": counts["ERROR"],
        "skipped": counts["skipped"],
        "seconds": int(seconds),
    }
    Path(log).with_suffix(".verdicts.json").write_text(json.dumps(verdicts, indent=1, sort_keys=True))
    print(json.dumps(summary))
    return 0


def expected(path):
    p = Path(path)
    if not p.exists():
        return []
    return [l.strip() for l in p.read_text().splitlines() if l.strip() and not l.startswith("#")]


def ratchet_cmd(exp_path, verdicts_path):
    if not Path(exp_path).exists():
        # A suite with nothing to hold it to would pass whatever it ran.
        print(f"RATCHET: {exp_path} does not exist")
        return 1
    verdicts = json.loads(Path(verdicts_path).read_text())
    want = expected(exp_path)
    if not want:
        print(f"RATCHET: {exp_path} lists no test")
        return 1
    lost = [t for t in want if verdicts.get(t) != "ok"]
    new = sorted(t for t, v in verdicts.items() if v == "ok" and t not in set(want))
    unlisted = sorted((t, v) for t, v in verdicts.items()
                      if t not in set(want) and v in ("FAIL", "ERROR", "unexpected success"))
    for t in lost:
        print(f"RATCHET: {t}: expected ok, got {verdicts.get(t, 'not run')}")
    for t, v in unlisted:
        print(f"unlisted: {t}: {v}")
    if new:
        print(f"ratchet: {len(new)} passing test(s) not yet in {exp_path} (run `make expectations`):")
        for t in new:
            print(f"  + {t}")
    print(f"ratchet {Path(exp_path).name}: {len(want) - len(lost)}/{len(want)} expected tests passed"
          f"{f', {len(unlisted)} unlisted failed' if unlisted else ''}")
    return 1 if lost else 0


def is_stock(test):
    """One of rdma-core's own tests, not oxe's test_oxe_* additions."""
    return ".test_oxe_" not in test


def stock_clean_cmd(verdicts_path):
    """rdma-core's own tests (not oxe's test_oxe_* additions) may pass or skip on
    oxe, never fail or error: a stock test that errors is a user-visible defect
    even before anyone lists it in the ratchet."""
    verdicts = json.loads(Path(verdicts_path).read_text())
    bad = sorted((t, v) for t, v in verdicts.items()
                 if is_stock(t) and v in ("FAIL", "ERROR", "unexpected success"))
    for t, v in bad:
        print(f"STOCK: {t}: {v}")
    stock = sum(1 for t in verdicts if is_stock(t))
    print(f"stock rdma-core tests: {stock - len(bad)}/{stock} without failure or error")
    return 1 if bad else 0


def stock_compare_cmd(oxe_path, rxe_path, gate=None):
    """rdma-core's own tests on oxe against the same tests on rxe in the same
    run (make test's yardstick guest): how many pass on each, and by name
    every test that passes on one and not on the other. A measure, not a
    gate, unless `--gate` is given: then a test that passes on rxe and not
    on oxe fails it."""
    try:
        oxe = json.loads(Path(oxe_path).read_text())
        rxe = json.loads(Path(rxe_path).read_text())
    except (OSError, ValueError) as e:
        print(f"stock rdma-core tests, oxe against rxe: missing ({e})")
        return 1

    def stock_ok(verdicts):
        return {t for t, v in verdicts.items() if is_stock(t) and v == "ok"}

    o, r = stock_ok(oxe), stock_ok(rxe)
    print(f"stock rdma-core tests, same run: oxe {len(o)} ok, rxe {len(r)} ok; "
          f"{len(o - r)} pass on oxe only, {len(r - o)} on rxe only")
    for t in sorted(r - o):
        print(f"  rxe only: {t} (oxe: {oxe.get(t, 'not run')})")
    for t in sorted(o - r):
        print(f"  oxe only: {t} (rxe: {rxe.get(t, 'not run')})")
    return 1 if gate == "--gate" and r - o else 0


def grow_cmd(exp_path, verdicts_path):
    verdicts = json.loads(Path(verdicts_path).read_text())
    p = Path(exp_path)
    lines = p.read_text().splitlines() if p.exists() else []
    have = set(expected(exp_path))
    new = sorted(t for t, v in verdicts.items() if v == "ok" and t not in have)
    if new:
        p.write_text("\n".join(lines + new) + "\n")
    print(f"{exp_path}: +{len(new)}")
    return 0


def summary_cmd(suite_dir, out):
    entries = [json.loads(p.read_text()) for p in sorted(Path(suite_dir).glob("*.json"))]
    Path(out).write_text(json.dumps(entries, indent=2) + "\n")
    for e in entries:
        print("{suite:>12} {device:>6}: ran {ran:4} ok {ok:4} fail {failures:3} err {errors:3} skip {skipped:4} {seconds:5}s".format(**e))
    return 0


def junit_cmd(results, out, since=None):
    """One <testsuite> for the guest's suites (guest-checks.txt, their
    seconds from guest-times.txt), a failed one carrying the end of its log;
    then one per unittest run (logs/*.verdicts.json), a <testcase> per test.
    What a CI server shows as test results, from the same files the run's
    own verdict comes from."""
    res = Path(results)
    checks = res / "guest-checks.txt"
    if not checks.exists():
        print(f"{checks}: no suites ran", file=sys.stderr)
        return 1
    times = {}
    tfile = res / "guest-times.txt"
    if tfile.exists():
        for line in tfile.read_text().splitlines():
            name, _, secs = line.rpartition(" ")
            times[name] = secs
    root = ET.Element("testsuites", name="oxe")
    guest = ET.SubElement(root, "testsuite", name="guest suites")
    failures = 0
    for line in checks.read_text().splitlines():
        name, _, verdict = line.rpartition(" ")
        if not name:
            continue
        case = ET.SubElement(guest, "testcase", classname="oxe.guest", name=name,
                             time=times.get(name, "0"))
        if verdict != "pass":
            failures += 1
            log = res / "logs" / f"suite-{name}.log"
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-60:]) if log.exists() else ""
            ET.SubElement(case, "failure", message=f"suite {name}: {verdict}").text = tail
    guest.set("tests", str(len(guest)))
    guest.set("failures", str(failures))
    start = Path(since).stat().st_mtime if since else 0
    for vpath in sorted((res / "logs").glob("*.verdicts.json")):
        if vpath.stat().st_mtime < start:
            continue
        verdicts = json.loads(vpath.read_text())
        run = vpath.name[: -len(".verdicts.json")]
        suite = ET.SubElement(root, "testsuite", name=run)
        nfail = nerr = nskip = 0
        for test, verdict in sorted(verdicts.items()):
            cls, _, meth = test.rpartition(".")
            case = ET.SubElement(suite, "testcase", classname=f"{run}.{cls}", name=meth)
            if verdict in ("FAIL", "unexpected success"):
                nfail += 1
                ET.SubElement(case, "failure", message=verdict)
            elif verdict == "ERROR":
                nerr += 1
                ET.SubElement(case, "error", message=verdict)
            elif verdict in ("skipped", "expected failure"):
                nskip += 1
                ET.SubElement(case, "skipped", message=verdict)
        suite.set("tests", str(len(verdicts)))
        suite.set("failures", str(nfail))
        suite.set("errors", str(nerr))
        suite.set("skipped", str(nskip))
    ET.indent(root)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return 0


def main(argv):
    cmds = {"unittest": unittest_cmd, "ratchet": ratchet_cmd, "grow": grow_cmd,
            "stock-clean": stock_clean_cmd, "stock-compare": stock_compare_cmd, "summary": summary_cmd,
            "junit": junit_cmd}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
