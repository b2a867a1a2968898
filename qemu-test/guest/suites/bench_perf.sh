# Benchmark: perftest between two devices of one type, TYPE0 on veth0 (here,
# client) and TYPE1 on veth1 (netns peer, server): ib_write_bw and ib_read_bw at
# 64 KiB (MB/s as perftest reports them, 2^20 bytes/s), ib_write_lat at 8 bytes
# (typical latency, µs), ib_write_bw and ib_read_bw at 64 KiB over 4 QPs (-q 4:
# both vCPUs at work), ib_send_bw at 64 KiB, and ib_write_bw and ib_read_bw at
# 64 KiB with ODP buffers (--odp) on both sides (their pages present after the
# first pass), ib_send_lat at 8 and 32 bytes and ib_send_bw at 64 bytes, where
# oxe's inline receive applies, and on oxe those three again with inline
# receive off (OXE_SCATTER_TO_CQE=0 in both processes: measures *_noinline),
# and ib_write_lat at 1 KiB, 4 KiB and 64 KiB: messages of one, four and 64
# packets, where a ping-pong meets the receive path's steering to the other
# CPU (recv.rs, Qp::defers).
#
# The guest shares two host cores with whatever else the host runs, so single runs
# are noisy (ib_write_lat at times 20x its usual), and the host's speed drifts by
# 2-3x over a run. Each type gets BENCH_PERF_ROUNDS short runs of every measure,
# and the types take turns measure by measure (one type at a time: both bind UDP
# 4791; the first type alternates by round), so that the two runs of a measure in
# a round are seconds apart and see the same host: report.py takes the ratio of
# each such pair. Taking turns by whole rounds, as before, put 45 s of drift
# between the two halves of a ratio. Writes $OXE_RESULTS/bench-perf-TYPE.json per
# type, its runs in round order (null for a failed run).
# A type given as TYPE:optional that cannot run (no data path yet) is recorded
# as missing, with the reason, without failing the suite.
# Uses run_perf_pair and perf_value from clients.sh.

BENCH_PERF_ROUNDS=${OXE_BENCH_ROUNDS:-5}
BENCH_BW_ITERS=1000
BENCH_LAT_ITERS=1000
BENCH_MEASURES=(write_bw read_bw write_lat write_bw_q4 read_bw_q4 send_bw odp_write_bw odp_read_bw
    send_lat_8 send_lat_32 send_bw_64 send_lat_8_noinline send_lat_32_noinline send_bw_64_noinline
    write_lat_1k write_lat_4k write_lat_64k)
# OXE_BENCH_MEASURES="m1 m2 ..." (qemu-test/vm.sh perf) runs only those, for
# iterating on one figure; `make bench` runs them all.
if [ -n "${OXE_BENCH_MEASURES:-}" ]; then
    read -ra BENCH_MEASURES <<<"$OXE_BENCH_MEASURES"
fi
# Measures whose failure leaves only themselves missing, not the type: ODP
# support differs between drivers (and kernels), and must not cost the rest;
# the later additions must not cost the figures recorded before them.
BENCH_SOFT=" write_bw_q4 read_bw_q4 send_bw odp_write_bw odp_read_bw send_lat_8 send_lat_32
    send_bw_64 send_lat_8_noinline send_lat_32_noinline send_bw_64_noinline write_lat_1k
    write_lat_4k write_lat_64k "

# One run of measure M between TYPE0 and TYPE1 (set up by pair_setup); prints the value.
bench_perf_run() { # type measure round
    local type=$1 m=$2 tool size iters col extra=() env=()
    # oxe's switch for inline receive, read by its provider as it opens a device.
    if [[ $m == *_noinline ]]; then
        env=(env OXE_SCATTER_TO_CQE=0)
        m=${m%_noinline}
    fi
    case $m in
    write_bw) tool=ib_write_bw size=65536 iters=$BENCH_BW_ITERS col=4 ;;
    read_bw) tool=ib_read_bw size=65536 iters=$BENCH_BW_ITERS col=4 ;;
    write_lat) tool=ib_write_lat size=8 iters=$BENCH_LAT_ITERS col=5 ;;
    # -n counts per QP: four QPs move what one moves in write_bw.
    write_bw_q4) tool=ib_write_bw size=65536 iters=$((BENCH_BW_ITERS / 4)) col=4 extra=(-q 4) ;;
    read_bw_q4) tool=ib_read_bw size=65536 iters=$((BENCH_BW_ITERS / 4)) col=4 extra=(-q 4) ;;
    send_bw) tool=ib_send_bw size=65536 iters=$BENCH_BW_ITERS col=4 ;;
    odp_write_bw) tool=ib_write_bw size=65536 iters=$BENCH_BW_ITERS col=4 extra=(--odp) ;;
    odp_read_bw) tool=ib_read_bw size=65536 iters=$BENCH_BW_ITERS col=4 extra=(--odp) ;;
    send_lat_8) tool=ib_send_lat size=8 iters=$BENCH_LAT_ITERS col=5 ;;
    send_lat_32) tool=ib_send_lat size=32 iters=$BENCH_LAT_ITERS col=5 ;;
    send_bw_64) tool=ib_send_bw size=64 iters=$BENCH_BW_ITERS col=4 ;;
    write_lat_1k) tool=ib_write_lat size=1024 iters=$BENCH_LAT_ITERS col=5 ;;
    write_lat_4k) tool=ib_write_lat size=4096 iters=$BENCH_LAT_ITERS col=5 ;;
    # 64 packets a round trip: fewer of them, for the same seconds.
    write_lat_64k) tool=ib_write_lat size=65536 iters=$((BENCH_LAT_ITERS / 4)) col=5 ;;
    esac
    local name=$2-$3
    SRV=("${env[@]}" "$tool" -d "${type}1" -i 1 -F -x "$GID_B" -s $size -n "$iters" "${extra[@]}")
    CLI=("${env[@]}" "$tool" -d "${type}0" -i 1 -F -x "$GID_A" -s $size -n "$iters" "${extra[@]}" 10.11.0.2)
    if run_perf_pair "$name" b tcp 18515 >&2 && perf_value "$CDIR/$name.client.log" $col; then
        return 0
    fi
    echo "$type $m run $3 failed:" >&2
    tail -n 4 "$CDIR/$name.client.log" "$CDIR/$name.server.log" 2>/dev/null | sed 's/^/    /' >&2
    return 1
}

suite_bench_perf() { # type[:optional]...
    local spec type t0=$SECONDS round m v i
    local -A missing=() optional=() vals=() secs=() line=()
    local types=() order=()
    for spec in "$@"; do
        type=${spec%%:*}
        types+=("$type")
        [ "$spec" = "$type:optional" ] && optional[$type]=1
        rm -rf "$OXE_RESULTS/logs/bench-perf-$type" "$OXE_RESULTS/bench-perf-$type.json"
        mkdir -p "$OXE_RESULTS/logs/bench-perf-$type"
        secs[$type]=0
    done
    for round in $(seq "$BENCH_PERF_ROUNDS"); do
        # Odd rounds in the order given, even rounds reversed: neither type
        # always runs in the other's wake.
        order=()
        for i in "${!types[@]}"; do
            if ((round % 2)); then order+=("${types[$i]}"); else order=("${types[$i]}" "${order[@]}"); fi
        done
        for type in "${types[@]}"; do line[$type]="round $round $type:"; done
        for m in "${BENCH_MEASURES[@]}"; do
            for type in "${order[@]}"; do
                [ -z "${missing[$type]:-}" ] || continue
                # The switch is oxe's: other types have nothing to turn off.
                [[ $m != *_noinline || $type == oxe ]] || continue
                local t1=$SECONDS
                CDIR=$OXE_RESULTS/logs/bench-perf-$type
                if ! pair_setup "${type}0" "${type}1"; then
                    missing[$type]="cannot set up ${type}0/${type}1"
                elif v=$(bench_perf_run "$type" "$m" "$round"); then
                    vals[$type.$m]+=" $v"
                    line[$type]+=" $m $v"
                else
                    vals[$type.$m]+=" null"
                    line[$type]+=" $m failed"
                    [[ $BENCH_SOFT == *" $m "* ]] || missing[$type]="$m failed"
                fi
                secs[$type]=$((${secs[$type]} + SECONDS - t1))
            done
        done
        rdma_reset
        for type in "${types[@]}"; do
            echo "${line[$type]}${missing[$type]:+ -- ${missing[$type]}}"
        done
    done
    local rc=0
    for type in "${types[@]}"; do
        local args=()
        for m in "${BENCH_MEASURES[@]}"; do args+=("$m=${vals[$type.$m]:-}"); done
        /usr/bin/python3 - "$OXE_RESULTS/bench-perf-$type.json" "$type" "${missing[$type]:-}" \
            "${secs[$type]}" "${args[@]}" <<'EOF'
import json, statistics, sys
out, typ, missing, seconds = sys.argv[1:5]
units = {"write_bw": "MB/s", "read_bw": "MB/s", "write_lat": "us", "write_bw_q4": "MB/s",
         "read_bw_q4": "MB/s", "send_bw": "MB/s", "odp_write_bw": "MB/s", "odp_read_bw": "MB/s",
         "send_lat_8": "us", "send_lat_32": "us", "send_bw_64": "MB/s", "send_lat_8_noinline": "us",
         "send_lat_32_noinline": "us", "send_bw_64_noinline": "MB/s", "write_lat_1k": "us",
         "write_lat_4k": "us", "write_lat_64k": "us"}
res = {"type": typ, "pair": f"{typ}0-{typ}1", "seconds": int(seconds), "missing": missing or None,
       "units": units, "stat": "median of runs; runs in round order, null where one failed", "runs": {}}
for arg in sys.argv[5:]:
    k, v = arg.split("=", 1)
    res["runs"][k] = [None if x == "null" else float(x) for x in v.split()]
for k in units:
    runs = [x for x in res["runs"].get(k, []) if x is not None]
    res[k] = round(statistics.median(runs), 3) if runs and not missing else None
open(out, "w").write(json.dumps(res, indent=2) + "\n")
print(json.dumps({k: res[k] for k in ("pair", *units, "missing", "seconds")}))
EOF
        if [ -n "${missing[$type]:-}" ] && [ -z "${optional[$type]:-}" ]; then
            echo "bench_perf: $type missing (${missing[$type]}), and it is required"
            rc=1
        fi
    done
    echo "bench_perf: $((SECONDS - t0)) s"
    return $rc
}
