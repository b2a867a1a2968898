# A/B of two builds of oxe in one guest (qemu-test/vm.sh ab OLD.ko): perftest
# between oxe0 (veth0) and oxe1 (netns peer) with the old module, then with the
# one this checkout built, round by round, and the medians of each side with
# their ratio. Under TCG one measure moves by a third between runs and by more
# between boots, so two `vm.sh perf` runs cannot tell a 15% change from noise;
# taking turns in one boot, each side sees the same host. Measures and rounds
# come from OXE_BENCH_MEASURES (default: write_bw read_bw write_bw_q4
# write_lat) and OXE_BENCH_ROUNDS (default 6); rxe runs them once, for scale.
# Writes $OXE_RESULTS/ab.json. Uses bench_perf_run (bench_perf.sh).

# Loads oxe from KO (the one modprobe finds when KO is empty) and makes the pair.
ab_setup() { # ko
    rdma_reset
    if [ -n "$1" ]; then
        # modprobe brings in ib_core and the rest; the module itself is
        # swapped. (An older build may need the UDP tunnel helpers, which
        # this one no longer does.)
        modprobe -a udp_tunnel ip6_udp_tunnel 2>/dev/null
        modprobe oxe && rmmod oxe && insmod "$1" || { echo "cannot load $1"; return 1; }
    fi
    pair_links oxe0 oxe1
}

suite_ab() { # old.ko
    local old=$1 rounds=${OXE_BENCH_ROUNDS:-6} side type m v r line
    local measures=(${OXE_BENCH_MEASURES:-write_bw read_bw write_bw_q4 write_lat})
    local -A vals=()
    [ -f "$old" ] || { echo "no module $old"; return 1; }
    CDIR=$OXE_RESULTS/logs/ab
    rm -rf "$CDIR" && mkdir -p "$CDIR"
    for r in $(seq "$rounds"); do
        for side in old new rxe; do
            [ "$side" != rxe ] || [ "$r" = 1 ] || continue
            case $side in
            old) ab_setup "$old" ;;
            new) ab_setup "" ;;
            rxe) pair_setup rxe0 rxe1 ;;
            esac || return 1
            line="round $r $side:"
            type=oxe
            [ "$side" != rxe ] || type=rxe
            for m in "${measures[@]}"; do
                v=$(bench_perf_run "$type" "$m" "$r-$side" 2>>"$CDIR/errors.log") || v=
                v=${v:-failed}
                [ "$v" = failed ] || vals[$side.$m]+=" $v"
                line+=" $m $v"
            done
            echo "$line"
        done
    done
    rdma_reset
    local args=()
    for m in "${measures[@]}"; do args+=("$m" "${vals[old.$m]:-}" "${vals[new.$m]:-}" "${vals[rxe.$m]:-}"); done
    /usr/bin/python3 - "$OXE_RESULTS/ab.json" "$old" "${args[@]}" <<'PY'
import json, statistics, sys
out, old, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
res = {"old": old, "stat": "median of rounds", "measures": {}}
print(f"{'measure':<14} {'old':>9} {'new':>9} {'new/old':>8} {'rxe':>9}")
for i in range(0, len(rest), 4):
    m, o, n, x = rest[i], *[[float(v) for v in s.split()] for s in rest[i + 1:i + 4]]
    med = lambda l: statistics.median(l) if l else None
    row = {"old": o, "new": n, "rxe": x, "old_median": med(o), "new_median": med(n)}
    row["new_over_old"] = round(row["new_median"] / row["old_median"], 3) if o and n else None
    res["measures"][m] = row
    f = lambda v: "-" if v is None else f"{v:.2f}"
    print(f"{m:<14} {f(med(o)):>9} {f(med(n)):>9} {f(row['new_over_old']):>8} {f(med(x)):>9}")
open(out, "w").write(json.dumps(res, indent=2) + "\n")
PY
}
