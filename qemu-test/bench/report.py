#!/usr/bin/python3
"""Merges the guest's benchmark output into build/results/bench.{json,md,png}.

  report.py RESULTS_DIR

Every figure is a ratio of oxe to rxe measured in the same guest in the same
run: absolute numbers under TCG mean little.
"""
import json
import sys
from pathlib import Path

SIZES = [("4 KiB", "4096"), ("64 KiB", "65536"), ("2 MiB", "2097152"), ("64 MiB", "67108864"), ("1 GiB", "1073741824")]


def main(results):
    results = Path(results)
    oxe = json.loads((results / "bench-mr-oxe0.json").read_text())
    rxe = json.loads((results / "bench-mr-rxe0.json").read_text())
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
    bench = {
        "mr": {"reg_dereg": rows, "rereg_access": rereg},
        "targets": {"reg_dereg_ratio_from_2MiB": 0.8, "rereg_over_dereg_reg": 0.1},
        "note": "THP is on in the guest: MAP_POPULATE'd buffers are huge-page backed, so pinning is cheap",
    }
    (results / "bench.json").write_text(json.dumps(bench, indent=2) + "\n")

    md = ["| reg+dereg (pre-touched) | oxe µs | rxe µs | oxe/rxe |", "|---|---:|---:|---:|"]
    md += [f"| {r['size']} | {r['oxe_us']:.1f} | {r['rxe_us']:.1f} | {r['ratio']:.2f} |" for r in rows]
    md += ["", "| access change (rereg vs dereg+reg) | oxe rereg µs | oxe dereg+reg µs | ratio | rxe rereg |",
           "|---|---:|---:|---:|---|"]
    md += [f"| {r['size']} | {r['oxe_rereg_us']:.1f} | {r['oxe_dereg_reg_us']:.1f} | {r['ratio']} | {r['rxe_rereg_us']} |"
           for r in rereg]
    (results / "bench.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return 0
    fig, ax = plt.subplots(figsize=(7, 4))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["oxe_us"] for r in rows], 0.4, label="oxe")
    ax.bar([i + 0.2 for i in x], [r["rxe_us"] for r in rows], 0.4, label="rxe")
    ax.set_yscale("log")
    ax.set_xticks(list(x), [r["size"] for r in rows])
    ax.set_ylabel("reg + dereg, µs (median, log)")
    ax.set_title("MR registration latency, same guest, same run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(results / "bench.png", dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
