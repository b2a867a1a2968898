#!/usr/bin/python3
"""Host test of report.py's regression flagging (make host-test): two runs
into one results directory, the second with one ratio worse beyond the margin,
one worse within it and one better; only the first may be flagged."""
import contextlib
import io
import json
import tempfile
import unittest
from pathlib import Path

import report

try:
    import matplotlib  # noqa: F401  (the Debian package deps.sh installs)

    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False


def perf(typ, **figures):
    return {"type": typ, "pair": f"{typ}0-{typ}1", "missing": None,
            "units": {k: "MB/s" for k in figures}, "runs": {k: [v, v] for k, v in figures.items()}, **figures}


def run(results, oxe, rxe):
    (results / "bench-perf-oxe.json").write_text(json.dumps(perf("oxe", **oxe)))
    (results / "bench-perf-rxe.json").write_text(json.dumps(perf("rxe", **rxe)))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        report.main(results)
    return json.loads((results / "bench.json").read_text()), out.getvalue()


class PairedRatios(unittest.TestCase):
    def test_each_round_is_held_against_its_own_round(self):
        # The host halves its speed after round 2: both sides slow down
        # together. oxe is twice rxe in every round, which the paired ratio
        # says; the ratio of the medians (40/15) would not. A failed run
        # (None) leaves its round out of the pairs, on both sides.
        with tempfile.TemporaryDirectory() as d:
            results = Path(d)
            oxe = perf("oxe", write_bw=40)
            oxe["runs"]["write_bw"] = [80, 80, 40, 40, None]
            rxe = perf("rxe", write_bw=15)
            rxe["runs"]["write_bw"] = [40, 40, 20, 20, 15]
            (results / "bench-perf-oxe.json").write_text(json.dumps(oxe))
            (results / "bench-perf-rxe.json").write_text(json.dumps(rxe))
            with contextlib.redirect_stdout(io.StringIO()):
                report.main(results)
            row = json.loads((results / "bench.json").read_text())["perf"]["rows"][0]
            self.assertEqual(row["measure"], "write_bw")
            self.assertEqual(row["ratio"], 2.0)
            self.assertEqual(row["paired_rounds"], 4)
            self.assertTrue(row["met"])


class DocsPage(unittest.TestCase):
    def test_docs_page_names_the_run_and_holds_the_tables(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d)
            (results / "bench-perf-oxe.json").write_text(json.dumps(perf("oxe", write_bw=40)))
            (results / "bench-perf-rxe.json").write_text(json.dumps(perf("rxe", write_bw=20)))
            page = results / "benchmarks.md"
            with contextlib.redirect_stdout(io.StringIO()):
                report.main(results, page)
            bench = json.loads((results / "bench.json").read_text())
            text = page.read_text()
            self.assertRegex(bench["run"]["commit"], r"^[0-9a-f]{12}$")
            self.assertIn(f"- commit: `{bench['run']['commit']}`", text)
            self.assertIn("- guest kernel: `", text)
            self.assertIn((results / "bench.md").read_text().splitlines()[0], text)


class Regressions(unittest.TestCase):
    def test_first_run_has_nothing_to_compare(self):
        with tempfile.TemporaryDirectory() as d:
            bench, md = run(Path(d), {"write_bw": 40}, {"write_bw": 20})
            self.assertIsNone(bench["regressions"])
            self.assertIn("No previous bench.json", md)
            self.assertFalse((Path(d) / "bench.prev.json").exists())

    def test_only_a_move_beyond_the_margin_the_wrong_way_is_flagged(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d)
            before = {"write_bw": 40, "read_bw": 40, "send_bw": 40, "write_lat": 50}
            rxe = {"write_bw": 20, "read_bw": 20, "send_bw": 20, "write_lat": 100}
            run(results, before, rxe)
            # write_bw 2.0 -> 1.5 (-25%): flagged; read_bw 2.0 -> 1.8 (-10%):
            # noise; send_bw up; write_lat 0.5 -> 0.7 (lower is better): flagged.
            after = {"write_bw": 30, "read_bw": 36, "send_bw": 60, "write_lat": 70}
            bench, md = run(results, after, rxe)
            flagged = {r["figure"]: r for r in bench["regressions"]}
            self.assertEqual(set(flagged), {"perf:write_bw", "perf:write_lat"})
            self.assertEqual(flagged["perf:write_bw"]["previous"], 2.0)
            self.assertEqual(flagged["perf:write_bw"]["now"], 1.5)
            self.assertIn("**Regressions**", md)
            prev = json.loads((results / "bench.prev.json").read_text())
            self.assertEqual(prev["perf"]["rows"][0]["ratio"], 2.0)
            if HAVE_MATPLOTLIB:
                self.assertTrue((results / "bench-rounds.png").stat().st_size > 0)

    def test_a_figure_missing_from_either_run_is_not_flagged(self):
        with tempfile.TemporaryDirectory() as d:
            results = Path(d)
            run(results, {"write_bw": 40}, {"write_bw": 20})
            bench, md = run(results, {"write_bw": 40, "read_bw": 1}, {"write_bw": 20, "read_bw": 20})
            self.assertEqual(bench["regressions"], [])
            self.assertIn("no ratio moved the wrong way", md)



class InlineReceive(unittest.TestCase):
    def test_on_against_off_on_oxe_alone(self):
        with tempfile.TemporaryDirectory() as d:
            bench, md = run(Path(d),
                            {"send_lat_8": 20.0, "send_lat_8_noinline": 25.0,
                             "send_lat_32": 30.0, "send_lat_32_noinline": 30.0,
                             "send_bw_64": 4.0},
                            {"send_lat_8": 40.0})
            rows = {r["measure"]: r for r in bench["inline_recv"]["rows"]}
            self.assertEqual(rows["send_lat_8"]["ratio"], 0.8)
            self.assertIs(rows["send_lat_8"]["met"], True)
            # No target: a figure, never a verdict.
            self.assertIsNone(rows["send_lat_32"]["met"])
            # A side missing: no ratio.
            self.assertIsNone(rows["send_bw_64"]["ratio"])
            perf_rows = {r["measure"]: r for r in bench["perf"]["rows"]}
            self.assertEqual(perf_rows["send_lat_8"]["ratio"], 0.5)
            self.assertIsNone(perf_rows["send_lat_8"]["met"])
            self.assertIn("| ib_send_lat 8 B, typical, µs | 20.0 | 25.0 | 0.80 | ≤ 0.85 | yes |", md)
            self.assertEqual(bench["targets"]["send_lat_8_inline_over_noinline"], "<= 0.85")
            # A direction alone is still a direction for the regression check.
            self.assertEqual(report.ratios(bench)["perf:send_lat_8"], (0.5, "lower"))

class IndirectKeys(unittest.TestCase):
    def test_each_measure_against_what_it_replaces(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "bench-mkey-oxe0.json").write_text(json.dumps({
                "device": "oxe0", "runs": 3, "payload_bytes": 1 << 20, "regions": 256,
                "scatter_us": {"mkey_write": 100.0, "separate_writes": 400.0, "bounce": 300.0},
                "configure_us": 50.0, "configure_alone_us": 200.0, "batch": 16,
                "reg_mr_us": 400.0}))
            bench, md = run(Path(d), {"write_bw": 1.0}, {"write_bw": 1.0})
            rows = {r["measure"]: r for r in bench["mkey"]["rows"]}
            self.assertEqual(rows["mkey_write"]["ratio"], 0.25)
            self.assertIs(rows["mkey_write"]["met"], True)
            self.assertEqual(rows["configure_us"]["ratio"], 0.125)
            self.assertIs(rows["configure_us"]["met"], False)
            self.assertIsNone(rows["bounce"]["met"])
            self.assertIn("| configuring the key through the send queue, per key in a batch of 16 | "
                          "50.0 | ibv_reg_mr of the 2 MiB | 400.0 | 0.12 | ≤ 0.1 | no |", md)
            self.assertEqual(rows["configure_alone_us"]["ratio"], 0.5)
            self.assertIsNone(rows["configure_alone_us"]["met"])
            self.assertEqual(bench["targets"]["mkey_configure_us_over_reg_mr_us"], "<= 0.1")

    def test_missing_is_said(self):
        with tempfile.TemporaryDirectory() as d:
            bench, md = run(Path(d), {"write_bw": 1.0}, {"write_bw": 1.0})
            self.assertIsNone(bench["mkey"])
            self.assertIn("Indirect keys: missing", md)


class Middleware(unittest.TestCase):
    def test_figures_side_by_side_with_the_speedup_the_right_way_up(self):
        # A rate: oxe over rxe. A time: rxe over oxe. A check with no
        # figure on one side is left out.
        with tempfile.TemporaryDirectory() as d:
            results = Path(d)
            (results / "suites").mkdir()
            # qperf chose other units for rxe's figures; the pingpong's
            # bytes on the wire are no speed.
            for typ, figures in (("oxe", {"qperf:rc_bw": "40 MB/sec", "qperf:rc_lat": "200 us",
                                          "mpi:all checks": "9 s", "mpi:pingpong": "79 MB over veth0",
                                          "qperf:rc_fetch_add_mr": "7.1 K/sec"}),
                                 ("rxe", {"qperf:rc_bw": "20000 KB/sec", "qperf:rc_lat": "0.4 ms",
                                          "mpi:pingpong": "80 MB over veth0",
                                          "qperf:rc_fetch_add_mr": "710 /sec"})):
                pair = f"{typ}0->{typ}1"
                (results / "suites" / f"middleware-{typ}0-{typ}1.json").write_text(json.dumps(
                    {"suite": "middleware", "figures": {f"{k}:{pair}": v for k, v in figures.items()}}))
            with contextlib.redirect_stdout(io.StringIO()) as out:
                report.main(results)
            rows = json.loads((results / "bench.json").read_text())["middleware"]["rows"]
            self.assertEqual([(r["check"], r["speedup"]) for r in rows],
                             [("qperf:rc_bw", 2.0), ("qperf:rc_fetch_add_mr", 10.0),
                              ("qperf:rc_lat", 2.0)])
            self.assertIn("| qperf:rc_lat | us | 200 | 400 | 2.00 |", out.getvalue())


if __name__ == "__main__":
    unittest.main()
