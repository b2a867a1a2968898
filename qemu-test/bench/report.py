#!/usr/bin/python3
"""Merges the guest's benchmark output into build/results/bench.{json,md,png}.

  report.py RESULTS_DIR

Every figure is a ratio of oxe to rxe measured in the same guest in the same
run: absolute numbers under TCG mean little. Inputs: bench-mr-{oxe0,rxe0}.json
(mr_bench), bench-touch-{oxe0,rxe0}.json (mr_bench --touch: ODP faults on the
data path), bench-perf-{oxe,rxe}.json (suite_bench_perf) and bench-nvmeof.jsonl
(suite_bench_nvmeof: fio over NVMe-oF) and bench-mkey-oxe0.json (mkey_bench:
oxe's indirect keys against what they replace, oxe alone); a side that could
not run is reported as missing, never as a failure.

Each run is held against the previous one: the bench.json found in RESULTS_DIR
is kept as bench.prev.json, and every oxe/rxe ratio that moved the wrong way by
more than REGRESSION_MARGIN is listed under "regressions" and in bench.md. A
ratio, not an absolute figure: rxe in the same run carries the host's mood.
bench-rounds.png plots each perftest figure of both types over the rounds, so
that a median hiding one wild round shows.
"""
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SIZES = [("4 KiB", "4096"), ("64 KiB", "65536"), ("2 MiB", "2097152"), ("64 MiB", "67108864"), ("1 GiB", "1073741824")]
# perftest measures: key, label, unit, direction of "better", target oxe/rxe ratio.
# The targets are measured against rxe at its best: a guest kernel with the
# accelerated CRCs distributions ship (CONFIG_CRC_OPTIMIZATIONS).
PERF = [
    ("write_bw", "ib_write_bw 64 KiB", "MB/s", ">=", 2.0),
    ("read_bw", "ib_read_bw 64 KiB", "MB/s", ">=", 2.0),
    ("write_lat", "ib_write_lat 8 B, typical", "µs", "<=", 0.5),
    # Four QPs at once: both vCPUs at work, on each side.
    ("write_bw_q4", "ib_write_bw -q 4, 64 KiB", "MB/s", ">=", 2.0),
    ("read_bw_q4", "ib_read_bw -q 4, 64 KiB", "MB/s", ">=", 2.0),
    ("send_bw", "ib_send_bw 64 KiB", "MB/s", ">=", 2.0),
    # ODP buffers on both sides: what faulting costs against rxe's ODP.
    ("odp_write_bw", "ib_write_bw --odp 64 KiB", "MB/s", ">=", 1.0),
    ("odp_read_bw", "ib_read_bw --odp 64 KiB", "MB/s", ">=", 1.0),
    # Short sends, where oxe's inline receive (on by default) applies; no
    # target against rxe, whose receive path differs.
    ("send_lat_8", "ib_send_lat 8 B, typical", "µs", "<=", None),
    ("send_lat_32", "ib_send_lat 32 B, typical", "µs", "<=", None),
    ("send_bw_64", "ib_send_bw 64 B", "MB/s", ">=", None),
    # Ping-pong of messages of one, four and 64 packets: the receive path
    # steers a stream's packets to the other CPU, where a ping-pong's peer
    # process spins. Steering a lone message there once cost 760 µs a round
    # trip from 512 bytes up, 17 times rxe's: never behind rxe again.
    ("write_lat_1k", "ib_write_lat 1 KiB, typical", "µs", "<=", 1.0),
    ("write_lat_4k", "ib_write_lat 4 KiB, typical", "µs", "<=", 1.0),
    ("write_lat_64k", "ib_write_lat 64 KiB, typical", "µs", "<=", 1.0),
]

# Inline receive on oxe: each measure with it on (the default, as in PERF)
# against the same with it off (OXE_SCATTER_TO_CQE=0, measure `KEY_noinline`),
# and the target for the on/off ratio.
INLINE = [
    ("send_lat_8", "<=", 0.85),
    ("send_lat_32", "<=", None),
    ("send_bw_64", ">=", None),
]


def target_text(op, target):
    """How a target reads in bench.json: "<= 0.5", or the direction alone."""
    return op if target is None else f"{op} {target}"


def is_met(ratio, op, target):
    if ratio is None or target is None:
        return None
    return ratio >= target if op == ">=" else ratio <= target


# How far (relative) an oxe/rxe ratio may move the wrong way before it is
# called a regression: rounds under TCG on a shared host scatter by about 10%.
REGRESSION_MARGIN = 0.15


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def mr_section(results):
    oxe, rxe = load(results / "bench-mr-oxe0.json"), load(results / "bench-mr-rxe0.json")
    if not oxe or not rxe:
        return None
    rows = []
    for label, key in SIZES:
        o, r = oxe["reg_dereg_us"][key], rxe["reg_dereg_us"][key]
        rows.append({"size": label, "oxe_us": o, "rxe_us": r, "ratio": round(o / r, 3)})
    rereg = []
    for label, key in (("2 MiB", "2097152"), ("64 MiB", "67108864")):
        o, r = oxe["rereg_access"][key], rxe["rereg_access"][key]
        rereg.append({
            "size": label,
            "oxe_rereg_us": o["rereg_us"],
            "oxe_dereg_reg_us": o["dereg_reg_us"],
            "ratio": round(o["rereg_us"] / o["dereg_reg_us"], 4) if o["rereg_us"] > 0 else None,
            "rxe_rereg_us": r["rereg_us"] if r["rereg_us"] > 0 else "unsupported",
        })
    # ODP: reg+dereg of 1 GiB that pins nothing, against the pinned one
    # (target: at most 0.05x), and against rxe's ODP.
    gib = "1073741824"
    o_odp = oxe.get("odp_reg_dereg_us", {}).get(gib)
    r_odp = rxe.get("odp_reg_dereg_us", {}).get(gib)
    o_pin = oxe["reg_dereg_us"][gib]
    odp = {"size": "1 GiB", "oxe_odp_us": o_odp, "oxe_pinned_us": o_pin,
           "odp_over_pinned": round(o_odp / o_pin, 4) if o_odp and o_pin else None,
           "target": "<= 0.05", "rxe_odp_us": r_odp,
           "oxe_over_rxe": round(o_odp / r_odp, 3) if o_odp and r_odp else None}
    return {"reg_dereg": rows, "rereg_access": rereg, "odp_reg_dereg": odp}


def touch_section(results):
    """ODP on the data path: first-touch bandwidth against rxe's (target
    >= 1.5x), steady-state ODP against pinned on oxe (target >= 0.9x), and
    what a first-touch fault adds to a 4 KiB WRITE."""
    oxe, rxe = load(results / "bench-touch-oxe0.json"), load(results / "bench-touch-rxe0.json")
    if not oxe:
        return None
    rows = []
    for op in ("write", "read"):
        o, r = oxe[f"{op}_mbs"], (rxe or {}).get(f"{op}_mbs", {})
        first = o["odp_first_touch"] / r["odp_first_touch"] if r.get("odp_first_touch") else None
        steady = o["odp_present"] / o["pinned"]
        rows.append({"op": op, "oxe": o, "rxe": r or None,
                     "first_touch_over_rxe": first and round(first, 2), "first_touch_met": first and first >= 1.5,
                     "present_over_pinned": round(steady, 2), "present_met": steady >= 0.9})
    lat = {}
    for name, d in (("oxe", oxe), ("rxe", rxe)):
        if d:
            l = d["write_4k_lat_us"]
            lat[name] = {**l, "added_us": round(l["odp_first_touch"] - l["pinned"], 1)}
    wrong = {name: d.get("data_wrong", []) for name, d in (("oxe", oxe), ("rxe", rxe)) if d}
    return {"message_bytes": oxe["message_bytes"], "rows": rows, "write_4k_lat_us": lat, "data_wrong": wrong}


def perf_side(results, typ):
    """A device type's perftest medians, or (None, reason) if it did not run."""
    d = load(results / f"bench-perf-{typ}.json")
    if d is None:
        return None, "no results"
    if d.get("missing"):
        return None, d["missing"]
    return d, None


def paired_ratio(a, b):
    """The median over rounds of a[i] / b[i], taking only rounds where both
    ran, and how many did; (None, 0) if none did.

    suite_bench_perf runs the two sides of each pair seconds apart, so that
    each ratio sees one host. The ratio of two medians would hold figures
    from rounds minutes apart against each other: the host's speed drifts by
    2-3x over a run under TCG, and that moved a ratio by half between runs.
    """
    pairs = [x / y for x, y in zip(a or [], b or []) if x and y]
    if not pairs:
        return None, 0
    return round(statistics.median(pairs), 3), len(pairs)


def perf_section(results):
    oxe, oxe_missing = perf_side(results, "oxe")
    rxe, rxe_missing = perf_side(results, "rxe")
    rows = []
    for key, label, unit, op, target in PERF:
        o = oxe.get(key) if oxe else None
        r = rxe.get(key) if rxe else None
        ratio, rounds = paired_ratio(oxe and o and oxe["runs"].get(key), rxe and r and rxe["runs"].get(key))
        rows.append({"measure": key, "label": label, "unit": unit, "oxe": o, "rxe": r,
                     "ratio": ratio, "paired_rounds": rounds, "target": target_text(op, target),
                     "met": is_met(ratio, op, target)})
    return {"rows": rows, "oxe_missing": oxe_missing, "rxe_missing": rxe_missing,
            "pairs": {"oxe": oxe and oxe["pair"], "rxe": rxe and rxe["pair"]}}


def inline_section(results):
    """oxe with inline receive on against off, same guest, same run."""
    oxe, _ = perf_side(results, "oxe")
    labels = {key: (label, unit) for key, label, unit, *_ in PERF}
    rows = []
    for key, op, target in INLINE:
        on = oxe.get(key) if oxe else None
        off = oxe.get(f"{key}_noinline") if oxe else None
        ratio, _ = paired_ratio(on and oxe["runs"].get(key), off and oxe["runs"].get(f"{key}_noinline"))
        label, unit = labels[key]
        rows.append({"measure": key, "label": label, "unit": unit, "on": on, "off": off,
                     "ratio": ratio, "target": target_text(op, target),
                     "met": is_met(ratio, op, target)})
    return {"rows": rows}


def inline_markdown(inline):
    md = ["", "| oxe inline receive | on | off (OXE_SCATTER_TO_CQE=0) | on/off | target | met |",
          "|---|---:|---:|---:|---:|---|"]
    md += [ratio_row_md(r, "on", "off") for r in inline["rows"]]
    return md


def ratio_row_md(r, a, b):
    """A table row: label, the figures r[a] and r[b], their ratio, target, verdict."""
    met = "—" if r["met"] is None else ("yes" if r["met"] else "no")
    ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}"
    return (f"| {r['label']}, {r['unit']} | {fmt(r[a])} | {fmt(r[b])} | {ratio} | "
            f"{target_md(r['target'])} | {met} |")


def target_md(text):
    """A bench.json target for a markdown table ("—" for a direction alone)."""
    if text in (">=", "<="):
        return "—"
    return text.replace('>=', '≥').replace('<=', '≤')


# Indirect keys (mkey_bench, oxe alone): measure, label, what it is held
# against, and the target for measure/against.
MKEY = [
    ("mkey_write", "1 MiB into 256 regions: one WRITE through a key", "separate_writes", "<=", 1 / 3),
    ("bounce", "1 MiB into 256 regions: a WRITE into a bounce buffer, then a copy",
     "separate_writes", "<=", None),
    ("contiguous_key_write", "1 MiB contiguous: one WRITE through a key of one entry",
     "contiguous_write", "<=", None),
    ("configure_us", "configuring the key through the send queue, per key in a batch of 16",
     "reg_mr_us", "<=", 0.1),
    ("configure_alone_us", "configuring the key alone (post, doorbell, completion)",
     "reg_mr_us", "<=", None),
]


def mkey_section(results):
    """Each measure in µs, and its ratio to what it replaces."""
    m = load(results / "bench-mkey-oxe0.json")
    if not m:
        return None
    flat = {**m.get("scatter_us", {}), **{k: m.get(k) for k in
                                           ("configure_us", "configure_alone_us", "reg_mr_us")}}
    labels = {"separate_writes": "256 WRITEs", "reg_mr_us": "ibv_reg_mr of the 2 MiB",
              "contiguous_write": "the same WRITE to the MR"}
    rows = []
    for key, label, against, op, target in MKEY:
        a, b = flat.get(key), flat.get(against)
        ratio = round(a / b, 3) if a and b else None
        rows.append({"measure": key, "label": label, "unit": "µs", "value": a,
                     "against": labels[against], "against_value": b, "ratio": ratio,
                     "target": target_text(op, target and round(target, 3)),
                     "met": is_met(ratio, op, target)})
    return {"rows": rows, "runs": m.get("runs")}


def mkey_markdown(mk):
    if not mk:
        return ["", "Indirect keys: missing (bench-mkey-oxe0.json absent)"]
    md = ["", "| oxe indirect keys, median µs | this | against | that | ratio | target | met |",
          "|---|---:|---|---:|---:|---:|---|"]
    for r in mk["rows"]:
        met = "—" if r["met"] is None else ("yes" if r["met"] else "no")
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}"
        md.append(f"| {r['label']} | {fmt(r['value'])} | {r['against']} | {fmt(r['against_value'])} | "
                  f"{ratio} | {target_md(r['target'])} | {met} |")
    return md


# fio over NVMe-oF: measure, label, unit; oxe/rxe must reach the target.
NVMEOF = [("randread_4k_iops", "4 KiB random read, depth 16", "IOPS"),
          ("seqread_128k_mbps", "128 KiB sequential read, depth 4", "MB/s")]
NVMEOF_TARGET = 1.5


def nvmeof_section(results):
    """Median of the rounds per type and measure, and oxe over rxe."""
    path = results / "bench-nvmeof.jsonl"
    if not path.exists():
        return None
    runs = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    rows = []
    for key, label, unit in NVMEOF:
        med = {}
        for typ in ("oxe", "rxe"):
            vals = sorted(r["value"] for r in runs if r["type"] == typ and r["measure"] == key)
            med[typ] = vals[len(vals) // 2] if vals else None
            med[f"{typ}_rounds"] = vals
        ratio = med["oxe"] / med["rxe"] if med["oxe"] and med["rxe"] else None
        rows.append({"measure": key, "label": label, "unit": unit, **med,
                     "ratio": ratio and round(ratio, 2), "met": ratio and ratio >= NVMEOF_TARGET})
    return {"rows": rows, "target_over_rxe": f">= {NVMEOF_TARGET}"}


def nvmeof_markdown(nv):
    if not nv:
        return ["", "NVMe-oF (fio): missing (bench-nvmeof.jsonl absent)"]
    md = ["", "| fio over NVMe-oF, host -> target on one pair of each type | oxe | rxe | oxe/rxe | target | met |",
          "|---|---:|---:|---:|---:|---|"]
    for r in nv["rows"]:
        met = "—" if r["met"] is None else ("yes" if r["met"] else "no")
        md.append(f"| {r['label']}, {r['unit']} | {fmt(r['oxe'])} | {fmt(r['rxe'])} | "
                  f"{fmt(r['ratio'], 2)} | ≥ {NVMEOF_TARGET} | {met} |")
    return md


# Units the middleware tools print (qperf picks its own per figure), each as
# a factor to one unit per kind: MB/s for bandwidth, msg/s for rates, µs for
# times.
UNITS = {
    "bytes/sec": ("MB/s", 1e-6), "KB/sec": ("MB/s", 1e-3), "MB/sec": ("MB/s", 1.0),
    "GB/sec": ("MB/s", 1e3), "MB/s": ("MB/s", 1.0),
    "/sec": ("msg/s", 1.0), "K/sec": ("msg/s", 1e3), "M/sec": ("msg/s", 1e6), "msg/s": ("msg/s", 1.0),
    "ns": ("us", 1e-3), "us": ("us", 1.0), "ms": ("us", 1e3), "sec": ("us", 1e6), "s": ("us", 1e6),
}


def figure(text):
    """(value, unit) of a middleware figure such as "46.1 MB/sec" or "372 us",
    in the unit of its kind (UNITS); (None, None) for anything else, such as
    the bytes a check saw cross the wire, which is no measure of speed."""
    value, _, unit = text.partition(" ")
    if unit not in UNITS:
        return None, None
    try:
        to, factor = UNITS[unit]
        return float(value.replace(",", "")) * factor, to
    except ValueError:
        return None, None


def middleware_section(results):
    """The middleware suite's figures (suites/middleware-*.json, written by
    suites/middleware.sh), oxe0-oxe1 beside rxe0-rxe1. The speed-up is
    oxe over rxe for a rate, rxe over oxe for a time."""
    side = {}
    for typ in ("oxe", "rxe"):
        entry = load(results / "suites" / f"middleware-{typ}0-{typ}1.json")
        if not entry:
            return None
        suffix = f":{typ}0->{typ}1"
        side[typ] = {k.removesuffix(suffix): v for k, v in entry.get("figures", {}).items()}
    rows = []
    for check in sorted(side["oxe"].keys() & side["rxe"].keys()):
        (o, unit), (r, r_unit) = figure(side["oxe"][check]), figure(side["rxe"][check])
        if not o or not r or unit != r_unit:
            continue
        rows.append({"check": check, "unit": unit, "oxe": round(o, 3), "rxe": round(r, 3),
                     "speedup": round(r / o if unit == "us" else o / r, 2)})
    return {"rows": rows}


def middleware_markdown(mw):
    if not mw:
        return ["", "Middleware: missing (suites/middleware-{oxe0-oxe1,rxe0-rxe1}.json absent)"]
    md = ["", "| middleware (docs/middleware.md), one run each | unit | oxe | rxe | speed-up |",
          "|---|---|---:|---:|---:|"]
    md += [f"| {r['check']} | {r['unit']} | {r['oxe']:g} | {r['rxe']:g} | {r['speedup']:.2f} |"
           for r in mw["rows"]]
    return md


def fmt(v, nd=1):
    return "missing" if v is None else f"{v:.{nd}f}"


def touch_markdown(touch):
    if not touch:
        return ["", "ODP first touch: missing (bench-touch-oxe0.json absent)"]
    yes = {True: "yes", False: "no", None: "—"}
    md = ["", f"| ODP on the data path, {touch['message_bytes'] >> 10} KiB messages, MB/s | oxe pinned | "
          "oxe ODP present | present/pinned (≥ 0.9) | oxe ODP first touch | rxe ODP first touch | "
          "oxe/rxe (≥ 1.5) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in touch["rows"]:
        o, x = r["oxe"], r["rxe"] or {}
        md.append(f"| RDMA {r['op'].upper()} | {o['pinned']:.1f} | {o['odp_present']:.1f} | "
                  f"{r['present_over_pinned']:.2f} {yes[r['present_met']]} | {o['odp_first_touch']:.1f} | "
                  f"{fmt(x.get('odp_first_touch'))} | {fmt(r['first_touch_over_rxe'], 2)} "
                  f"{yes[r['first_touch_met']]} |")
    md += ["", "| 4 KiB WRITE latency, median µs | pinned | ODP first touch | added by the fault |",
           "|---|---:|---:|---:|"]
    for name, l in touch["write_4k_lat_us"].items():
        md.append(f"| {name} | {l['pinned']:.1f} | {l['odp_first_touch']:.1f} | {l['added_us']:.1f} |")
    for name, wrong in touch["data_wrong"].items():
        if wrong:
            md.append(f"\n{name}: the data arrived wrong in {', '.join(wrong)}")
    return md


def markdown(mr, perf, touch, nvmeof=None):
    md = []
    if mr:
        md += ["| reg+dereg (pre-touched) | oxe µs | rxe µs | oxe/rxe |", "|---|---:|---:|---:|"]
        md += [f"| {r['size']} | {r['oxe_us']:.1f} | {r['rxe_us']:.1f} | {r['ratio']:.2f} |" for r in mr["reg_dereg"]]
        md += ["", "| access change (rereg vs dereg+reg) | oxe rereg µs | oxe dereg+reg µs | ratio | rxe rereg |",
               "|---|---:|---:|---:|---|"]
        md += [f"| {r['size']} | {r['oxe_rereg_us']:.1f} | {r['oxe_dereg_reg_us']:.1f} | {r['ratio']} | {r['rxe_rereg_us']} |"
               for r in mr["rereg_access"]]
        o = mr["odp_reg_dereg"]
        md += ["", "| ODP reg+dereg | oxe ODP µs | oxe pinned µs | ODP/pinned | target | rxe ODP µs | oxe/rxe |",
               "|---|---:|---:|---:|---|---:|---:|",
               f"| {o['size']} | {fmt(o['oxe_odp_us'])} | {fmt(o['oxe_pinned_us'])} | "
               f"{o['odp_over_pinned'] if o['odp_over_pinned'] is not None else '—'} | ≤ 0.05 | "
               f"{fmt(o['rxe_odp_us'])} | {o['oxe_over_rxe'] if o['oxe_over_rxe'] is not None else '—'} |"]
    else:
        md += ["MR registration: missing (bench-mr-oxe0.json or bench-mr-rxe0.json absent)"]
    md += touch_markdown(touch)
    md += nvmeof_markdown(nvmeof)
    md += ["", "| perftest, A on veth0 -> B in netns peer | oxe | rxe | oxe/rxe | target | met |",
           "|---|---:|---:|---:|---:|---|"]
    md += [ratio_row_md(r, "oxe", "rxe") for r in perf["rows"]]
    md.append("\noxe and rxe: medians of the rounds. oxe/rxe: the median of each round's ratio, "
              "the two runs of a round taken back to back.")
    # ODP in steady state (pages present) against pinned memory, on oxe.
    by = {r["measure"]: r for r in perf["rows"]}
    steady = []
    for odp, pinned in (("odp_write_bw", "write_bw"), ("odp_read_bw", "read_bw")):
        o, p = by.get(odp, {}).get("oxe"), by.get(pinned, {}).get("oxe")
        steady.append(f"{pinned.split('_')[0]} {o / p:.2f}" if o and p else f"{pinned.split('_')[0]} missing")
    md.append(f"\noxe ODP against pinned, pages present: {', '.join(steady)} (target ≥ 0.9)")
    for typ in ("oxe", "rxe"):
        if perf[f"{typ}_missing"]:
            md.append(f"\n{typ} perftest: missing ({perf[f'{typ}_missing']})")
    return md


def pyplot():
    """matplotlib's pyplot, drawing to files; None (said once) without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return None
    return plt


def plot(results, mr, perf, plt):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [5, 3]})
    if mr:
        rows = mr["reg_dereg"]
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], [r["oxe_us"] for r in rows], 0.4, label="oxe")
        ax.bar([i + 0.2 for i in x], [r["rxe_us"] for r in rows], 0.4, label="rxe")
        ax.set_yscale("log")
        ax.set_xticks(list(x), [r["size"] for r in rows])
        ax.legend()
    else:
        ax.text(0.5, 0.5, "MR results missing", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("reg + dereg, µs (median, log)")
    ax.set_title("MR registration latency")

    rows = perf["rows"]
    x = list(range(len(rows)))
    labels = [f"{r['measure']}\nrxe {fmt(r['rxe'])} {r['unit']}" for r in rows]
    ratios = [r["ratio"] if r["ratio"] is not None else 0 for r in rows]
    colors = ["tab:gray" if r["met"] is None else ("tab:green" if r["met"] else "tab:red") for r in rows]
    bars = bx.bar(x, ratios, 0.5, color=colors)
    for b, r in zip(bars, rows):
        if r["ratio"] is not None:
            bx.annotate(f"{r['ratio']:.2f}", (b.get_x() + b.get_width() / 2, b.get_height() / 2), xytext=(0, 0),
                        textcoords="offset points", ha="center", fontsize=8, color="white")
    for i, (_, _, _, op, target) in enumerate(PERF):
        if target is None:
            continue
        bx.hlines(target, i - 0.35, i + 0.35, colors="black", linestyles="dashed")
        bx.annotate(f"target {op.replace('>=', '≥').replace('<=', '≤')} {target}", (i, target), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8)
    bx.axhline(1.0, color="gray", linewidth=0.8)
    bx.set_xticks(x, labels, fontsize=8)
    bx.set_xlim(-0.6, len(rows) - 0.4)
    bx.set_ylim(0, max([2.0] + [r * 1.15 for r in ratios]))
    bx.set_ylabel("oxe / rxe")
    bx.set_title("perftest, oxe relative to rxe")
    if perf["oxe_missing"]:
        bx.text(0.5, 0.6, f"oxe missing:\n{perf['oxe_missing']}", ha="center", va="center",
                transform=bx.transAxes, fontsize=9)
    fig.suptitle("oxe vs rxe, same guest, same run (TCG)")
    fig.tight_layout()
    fig.savefig(results / "bench.png", dpi=100)


def ratios(bench):
    """Every oxe/rxe ratio of a bench.json, by a stable name, with the
    direction that is better ("higher" or "lower")."""
    out = {}
    for r in ((bench or {}).get("perf") or {}).get("rows", []):
        if r.get("ratio") is not None:
            out[f"perf:{r['measure']}"] = (r["ratio"], "higher" if r["target"].startswith(">=") else "lower")
    for r in ((bench or {}).get("nvmeof") or {}).get("rows", []):
        if r.get("ratio") is not None:
            out[f"nvmeof:{r['measure']}"] = (r["ratio"], "higher")
    for r in ((bench or {}).get("mr") or {}).get("reg_dereg", []):
        if r.get("ratio") is not None:
            out[f"reg_dereg:{r['size']}"] = (r["ratio"], "lower")
    return out


def regressions(prev, cur, margin=REGRESSION_MARGIN):
    """The ratios of CUR worse than PREV's by more than MARGIN (relative)."""
    old, new = ratios(prev), ratios(cur)
    found = []
    for name, (now, better) in new.items():
        if name not in old or old[name][0] <= 0:
            continue
        was = old[name][0]
        change = now / was - 1
        worse = change < -margin if better == "higher" else change > margin
        if worse:
            found.append({"figure": name, "previous": was, "now": now, "change": round(change, 3)})
    return found


def regressions_markdown(found, prev_when):
    if prev_when is None:
        return ["", "No previous bench.json: nothing to hold this run against."]
    if not found:
        return ["", f"Against the previous run ({prev_when}): no ratio moved the wrong way by more than "
                f"{REGRESSION_MARGIN:.0%}."]
    md = ["", f"**Regressions** against the previous run ({prev_when}), oxe/rxe moved the wrong way by more "
          f"than {REGRESSION_MARGIN:.0%}:", "", "| figure | previous | now | change |", "|---|---:|---:|---:|"]
    md += [f"| {r['figure']} | {r['previous']} | {r['now']} | {r['change']:+.0%} |" for r in found]
    return md


def plot_rounds(results, plt):
    """Every round of every perftest measure, oxe and rxe side by side."""
    sides = {t: perf_side(results, t)[0] for t in ("oxe", "rxe")}
    measures = [m for m, *_ in PERF if any(s and s.get("runs", {}).get(m) for s in sides.values())]
    if not measures:
        return
    fig, axes = plt.subplots(1, len(measures), figsize=(2.2 * len(measures), 3.2), squeeze=False)
    for ax, m in zip(axes[0], measures):
        rounds = 0
        for typ, side in sides.items():
            # A failed run (null) is a gap in its line.
            runs = [float("nan") if v is None else v for v in (side or {}).get("runs", {}).get(m) or []]
            ax.plot(range(1, len(runs) + 1), runs, "o-", label=typ)
            rounds = max(rounds, len(runs))
        unit = (sides["oxe"] or sides["rxe"] or {}).get("units", {}).get(m, "")
        ax.set_xticks(range(1, rounds + 1))
        ax.set_xlabel("round", fontsize=7)
        ax.set_title(f"{m}\n{unit}", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("perftest, every round (TCG)")
    fig.tight_layout()
    fig.savefig(results / "bench-rounds.png", dpi=100)


def provenance():
    """What a run measured: the commit (and whether the tree had changes),
    the guest kernel's build tree, and the host."""
    top = Path(__file__).resolve().parents[2]

    def out(*cmd):
        try:
            return subprocess.run(cmd, cwd=top, capture_output=True, text=True,
                                  timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    cpu = next((l.split(":", 1)[1].strip() for l in
                Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), "")
    return {
        "commit": out("git", "rev-parse", "--short=12", "HEAD"),
        "tree_changed": bool(out("git", "status", "--porcelain", "--untracked-files=no")),
        "kernel": Path(out("scripts/kernel.sh", "dir", "plain")).name,
        "host": {"cpus": os.cpu_count(), "cpu": cpu, "kernel": os.uname().release},
    }


def docs_page(bench, md):
    """docs/benchmarks.md: the run's provenance, then its tables."""
    run = bench["run"]
    head = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`qemu-test/bench/report.py`); do not edit by hand.",
        "Each figure is oxe against rxe in the same guest and run (TCG, the plain",
        "kernel); only the ratios mean anything. docs/testing.md says how the run",
        "is made, docs/history.md what earlier runs measured.",
        "",
        f"- commit: `{run['commit']}`{' (with uncommitted changes)' if run['tree_changed'] else ''}",
        f"- guest kernel: `{run['kernel']}`",
        f"- host: {run['host']['cpus']} CPUs, {run['host']['cpu'] or 'unknown CPU'},"
        f" Linux {run['host']['kernel']}",
        f"- generated: {bench['generated']}",
        "",
    ]
    return "\n".join(head + md) + "\n"


def main(results, docs=None):
    results = Path(results)
    prev = load(results / "bench.json")
    mr, perf, touch = mr_section(results), perf_section(results), touch_section(results)
    nvmeof = nvmeof_section(results)
    inline = inline_section(results)
    mkey = mkey_section(results)
    middleware = middleware_section(results)
    bench = {
        "mr": mr,
        "odp_touch": touch,
        "nvmeof": nvmeof,
        "perf": perf,
        "inline_recv": inline,
        "mkey": mkey,
        "middleware": middleware,
        "targets": {"reg_dereg_ratio_from_2MiB": 0.8, "rereg_over_dereg_reg": 0.1,
                    "odp_first_touch_over_rxe": ">= 1.5", "odp_present_over_pinned": ">= 0.9",
                    "nvmeof_over_rxe": f">= {NVMEOF_TARGET}",
                    **{f"{k}_ratio": f"{op} {t}" for k, _, _, op, t in PERF if t is not None},
                    **{f"{k}_inline_over_noinline": f"{op} {t}" for k, op, t in INLINE
                       if t is not None},
                    **{f"mkey_{k}_over_{a}": target_text(op, round(t, 3)) for k, _, a, op, t in MKEY
                       if t is not None}},
        "note": "THP is on in the guest: MAP_POPULATE'd buffers are huge-page backed, so pinning is cheap; "
                "perftest MB/s are 2^20 bytes per second",
    }
    bench["generated"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    bench["run"] = provenance()
    prev_when = prev and prev.get("generated", "undated")
    bench["regressions"] = regressions(prev, bench) if prev else None
    if prev:
        (results / "bench.prev.json").write_text(json.dumps(prev, indent=2) + "\n")
    (results / "bench.json").write_text(json.dumps(bench, indent=2) + "\n")
    md = (markdown(mr, perf, touch, nvmeof) + inline_markdown(inline) + mkey_markdown(mkey)
          + middleware_markdown(middleware) + regressions_markdown(bench["regressions"] or [], prev_when))
    (results / "bench.md").write_text("\n".join(md) + "\n")
    if docs:
        Path(docs).write_text(docs_page(bench, md))
    print("\n".join(md))
    plt = pyplot()
    if plt:
        plot(results, mr, perf, plt)
        plot_rounds(results, plt)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
