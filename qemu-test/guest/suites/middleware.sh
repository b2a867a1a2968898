# Suite: the middleware RDMA users run, between two devices, A on veth0 (this
# namespace, 10.11.0.1) and B on veth1 (netns peer, 10.11.0.2), with Debian's
# own packages: qperf (every rc_ test), UCX's ucx_perftest (tag, stream, put,
# get and atomics over rc_verbs with ud_verbs for wire-up, and over ud_verbs
# alone), Open MPI over UCX running mpi_check (qemu-test/clients/mpi_check.c,
# which checks every byte it moves), and libfabric's fi_pingpong over verbs,
# msg and rdm endpoints, with its data checks on.
#
# Clients run on A, servers on B. Each check is one verdict, "TOOL:TEST:A->B",
# recorded in logs/middleware-A-B.verdicts.json and held to
# qemu-test/expected/middleware-A-B.txt; each figure goes beside it in the
# suite's entry of summary.json. The outputs are kept in logs/middleware-A-B/.
#
# Two settings are the user's to make, for rxe as for oxe; docs/middleware.md
# explains them, and the checks "needs:..." show each is still needed.
#  - UCX 1.13's UD transport drops every datagram of a soft RoCE device unless
#    UCX_UD_VERBS_ETH_DGID_CHECK=n: it reads the packet's IP version from the
#    work completion's sl field, where mlx5 puts it and no other device does.
#  - libfabric's verbs provider finds a RDM endpoint's address on interfaces
#    named by FI_VERBS_IFACE ("ib" unless set), and ofi_rxm sizes its verbs CQ
#    by FI_UNIVERSE_SIZE (1024 peers unless set) beyond any soft device's
#    max_cqe.
MW_UCX_ENV=(UCX_UD_VERBS_ETH_DGID_CHECK=n)
MW_FI_ENV=(FI_VERBS_IFACE=veth FI_UNIVERSE_SIZE=32)
# ver_rc_*: qperf's atomics that check each result they get back.
MW_QPERF_TESTS=(rc_bi_bw rc_bw rc_compare_swap_mr rc_fetch_add_mr rc_lat rc_rdma_read_bw
    rc_rdma_read_lat rc_rdma_write_bw rc_rdma_write_lat rc_rdma_write_poll_lat
    ver_rc_compare_swap ver_rc_fetch_add)
# Test, message size: ucx_perftest's atomics take 8 bytes.
MW_UCX_TESTS=("tag_bw 4096" "tag_lat 4096" "stream_bw 4096" "stream_lat 4096" "ucp_put_bw 4096"
    "ucp_put_lat 4096" "ucp_get 4096" "ucp_add 8" "ucp_fadd 8" "ucp_swap 8" "ucp_cswap 8")
# The largest message of mpi_check's pingpong (its argument): 256 KiB in
# quick mode, where the debug kernel moves the 4 MiB run's 150 MB in minutes.
MW_MPI_MAX=$((4 << 20))

# Records one verdict NAME (status of the command run), with the figure PERF.
# Verdicts and figures go to tab-separated files first, made into JSON at the
# end (mw_json). Returns STATUS.
mw_verdict() { # name status
    local v=ok
    [ "$2" = 0 ] || v=FAIL
    printf '%-4s %-46s %4ds  %s\n' "$v" "$1" $((SECONDS - MW_T)) "${PERF:-}"
    MW_T=$SECONDS
    printf '%s\t%s\n' "$1" "$v" >>"$MW_VERDICTS.tsv"
    [ "$v" = ok ] && [ -n "${PERF:-}" ] && printf '%s\t%s\n' "$1" "$PERF" >>"$MW_FIGURES"
    MW_RAN=$((MW_RAN + 1))
    [ "$v" = ok ] && MW_OK=$((MW_OK + 1))
    PERF=
    return "$2"
}

# Field COL of ucx_perftest's one "Final:" line, which must be positive.
ucx_final() { # log col
    awk -v c="$2" '$1 == "Final:" && $c > 0 { v = $c; n++ } END { if (n != 1) exit 1; print v }' "$1" ||
        { echo "    $(basename "$1"): not one positive figure in a Final line" >&2; return 1; }
}

# qperf: one server, one client running every rc_ test in turn; a test passes
# when its section gives a positive figure.
mw_qperf() {
    local so=$CDIR/qperf.server.log co=$CDIR/qperf.client.log spid t val rc
    ip netns exec peer timeout 300 qperf >"$so" 2>&1 &
    spid=$!
    if wait_listen b tcp 19765 "$spid"; then
        # -cm1: through rdma_cm, so the route picks each end's device.
        timeout 240 qperf -cm1 -t 1 10.11.0.2 "${MW_QPERF_TESTS[@]}" >"$co" 2>&1
        rc=$?
        [ $rc = 0 ] || echo "    qperf client exit $rc"
    else
        echo "    qperf server did not listen"
        rc=1
    fi
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    for t in "${MW_QPERF_TESTS[@]}"; do
        val=$(awk -v t="$t:" '$1 == t { getline; if ($3 + 0 > 0) print $3, $4 }' "$co")
        PERF=$val
        [ -n "$val" ] && [ $rc = 0 ]
        mw_verdict "qperf:$t:$MW_PAIR" $?
    done
}

# ucx_perftest over TLS (rc_verbs,ud_verbs or ud_verbs), each test a pair.
# Over RC, UCX's atomics are the device's (UCX_ATOMIC_MODE=device fails a
# run that would emulate them); UD has none, and UCX emulates them there.
mw_ucx() { # tls [test...]
    local tls=$1 spec t size col unit atomics=()
    shift
    [[ $tls == rc_verbs* ]] && atomics=(UCX_ATOMIC_MODE=device)
    for spec in "${MW_UCX_TESTS[@]}"; do
        read -r t size <<<"$spec"
        [ $# = 0 ] || [[ " $* " == *" $t "* ]] || continue
        SRV=(env "${MW_UCX_ENV[@]}" "${atomics[@]}" UCX_TLS="$tls" UCX_NET_DEVICES="$DEV_B:1"
            ucx_perftest)
        CLI=(env "${MW_UCX_ENV[@]}" "${atomics[@]}" UCX_TLS="$tls" UCX_NET_DEVICES="$DEV_A:1"
            ucx_perftest 10.11.0.2 -t "$t" -n 200 -s "$size")
        case $t in
        *_lat) col=5 unit=us ;;
        *_bw | ucp_get) col=7 unit=MB/s ;;
        *) col=9 unit=msg/s ;;
        esac
        run_pair "ucx-$t-$tls" b tcp 13337 &&
            PERF="$(ucx_final "$CDIR/ucx-$t-$tls.client.log" $col) $unit"
        mw_verdict "ucx:$t:$tls:$MW_PAIR" $? || pair_tails "ucx-$t-$tls"
    done
}

# Open MPI over UCX: rank 0 on A here, rank 1 on B in netns peer, as on two
# hosts, each told its device by UCX_NET_DEVICES, with no shared-memory
# transport; every check mpi_check prints is a verdict. The pingpong's bytes
# must have crossed veth0.
#
# mpirun serves its ranks' PMIx connections on loopback TCP unless told an
# interface, and loopback is not reachable from netns peer: it listens on
# veth0. Every -x is per rank: given before the first rank, it reaches that
# rank only.
mw_mpi() { # [largest pingpong message]
    local log=$CDIR/mpi_check.log tx0 tx1 rc line t1=$SECONDS max=${1:-$MW_MPI_MAX}
    # What the pingpong alone sends each way: three rounds of 3p bytes for
    # every power of two p up to max.
    local bytes=$((9 * (2 * max - 1)))
    # Open MPI 4.1's UCX components take only mlx* devices and a list of
    # transports unless told otherwise.
    local mca=(--allow-run-as-root --oversubscribe --mca pml ucx --mca osc ucx --mca btl self
        --mca pml_ucx_devices any --mca pml_ucx_tls any --mca plm_rsh_agent false)
    local ucx=(-x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_ATOMIC_MODE=device) e
    for e in "${MW_UCX_ENV[@]}"; do ucx+=(-x "$e"); done
    tx0=$(cat /sys/class/net/veth0/statistics/tx_bytes)
    PMIX_MCA_ptl_tcp_if_include=veth0 PMIX_MCA_ptl_tcp_remote_connections=1 \
        timeout 400 mpirun "${mca[@]}" \
        -np 1 "${ucx[@]}" -x UCX_NET_DEVICES="$DEV_A:1" "$OXE_TOP/build/mpi_check" "$max" : \
        -np 1 "${ucx[@]}" -x UCX_NET_DEVICES="$DEV_B:1" ip netns exec peer \
        "$OXE_TOP/build/mpi_check" "$max" \
        >"$log" 2>&1
    rc=$?
    tx1=$(cat /sys/class/net/veth0/statistics/tx_bytes)
    [ $rc = 0 ] || { echo "    mpirun exit $rc; last lines:"; tail -n 8 "$log" | sed 's/^/    /'; }
    while read -r line; do
        PERF=
        [[ $line == "ok pingpong"* ]] && PERF="$(((tx1 - tx0) / 1000000)) MB over veth0"
        if [[ $line == "ok pingpong"* && $((tx1 - tx0)) -lt $bytes ]]; then
            echo "    veth0 sent $((tx1 - tx0)) bytes, less than the pingpong's $bytes"
            mw_verdict "mpi:${line#ok }:$MW_PAIR" 1
        elif [[ $line == ok* ]]; then
            mw_verdict "mpi:${line#ok }:$MW_PAIR" 0
        else
            mw_verdict "mpi:${line#FAIL }:$MW_PAIR" 1
        fi
    done < <(grep -E '^(ok|FAIL) [a-z]' "$log")
    PERF="$((SECONDS - t1)) s"
    grep -q '^ok: 0 check(s) failed' "$log" && [ $rc = 0 ]
    mw_verdict "mpi:all checks:$MW_PAIR" $?
}

# fi_pingpong with -c (every message's data checked) at its six default sizes,
# 64 B to 1 MiB; a run passes when the client printed the 1 MiB line, all of
# its messages acknowledged.
# A msg endpoint is given each end's device (-d): libfabric otherwise takes the
# first device it lists, whatever namespace its netdev is in.
mw_fabric() { # name endpoint-args...
    local name=$1 log dom_a=() dom_b=()
    shift
    [ "$name" = msg ] && dom_a=(-d "$DEV_A") dom_b=(-d "$DEV_B")
    SRV=(env "${MW_FI_ENV[@]}" fi_pingpong "$@" "${dom_b[@]}" -c -I 10)
    CLI=(env "${MW_FI_ENV[@]}" fi_pingpong "$@" "${dom_a[@]}" -c -I 10 10.11.0.2)
    log=$CDIR/fi-$name.client.log
    if run_pair "fi-$name" b tcp 47592; then
        PERF=$(awk '$1 == "1m" && $3 == "=10" { print $6, "MB/s" }' "$log")
        [ -n "$PERF" ] || echo "    $(basename "$log"): no acknowledged 1 MiB line"
        [ -n "$PERF" ]
    else
        false
    fi
    mw_verdict "libfabric:$name:$MW_PAIR" $? || pair_tails "fi-$name"
}

# The settings above are still needed: without UCX_UD_VERBS_ETH_DGID_CHECK=n,
# UCX's UD wire-up never completes. The same run with it is the control:
# the check passes when that one succeeds and the one without it times out.
mw_needs_dgid_check() {
    local CLIENT_TIMEOUT=40 CLIENT_GRACE=2 with=("${MW_UCX_ENV[@]}") run
    for run in with without; do
        [ $run = without ] && with=()
        SRV=(env "${with[@]}" UCX_UD_TIMEOUT=5s UCX_TLS=ud_verbs UCX_NET_DEVICES="$DEV_B:1" ucx_perftest)
        CLI=(env "${with[@]}" UCX_UD_TIMEOUT=5s UCX_TLS=ud_verbs UCX_NET_DEVICES="$DEV_A:1"
            ucx_perftest 10.11.0.2 -t tag_lat -n 10 -s 8)
        # In a subshell whose output is kept apart: the shell's notices of
        # the two processes UCX aborts are expected there.
        (run_pair "needs-dgid-check-$run" b tcp 13337) >"$CDIR/needs-dgid-check-$run.log" 2>&1
        echo $? >"$CDIR/needs-dgid-check-$run.status"
    done
    [ "$(cat "$CDIR/needs-dgid-check-with.status")" = 0 ] ||
        echo "    the control, with the setting, failed"
    [ "$(cat "$CDIR/needs-dgid-check-with.status")" = 0 ] &&
        [ "$(cat "$CDIR/needs-dgid-check-without.status")" != 0 ] &&
        grep -q "unhandled timeout error" "$CDIR/needs-dgid-check-without.client.log"
    mw_verdict "needs:UCX_UD_VERBS_ETH_DGID_CHECK=n:$MW_PAIR" $?
}

# The verdicts and figures as JSON: the verdicts for the ratchet, the
# figures into the suite's entry of summary.json.
mw_json() { # verdicts.tsv verdicts.json figures.tsv suite.json
    /usr/bin/python3 - "$@" <<'EOF'
import json, sys
def pairs(path):
    return dict(l.rstrip("\n").split("\t", 1) for l in open(path) if "\t" in l)
json.dump(pairs(sys.argv[1]), open(sys.argv[2], "w"), indent=1)
entry = json.load(open(sys.argv[4]))
entry["figures"] = pairs(sys.argv[3])
json.dump(entry, open(sys.argv[4], "w"))
EOF
}

# With "quick" (the debug kernel, where each run takes several times as
# long), UCX runs over rc_verbs only, its wire-up over ud_verbs all the same,
# one test of each kind: tag, put, get, and two atomics; mpi_check's
# pingpong to 256 KiB; no tagged rdm run and no needs: check (what they show
# does not depend on the kernel, and the plain guest runs them).
suite_middleware() { # devA devB [quick]
    DEV_A=$1 DEV_B=$2
    local t0=$SECONDS rc=0
    MW_PAIR=$1-\>$2
    CDIR=$OXE_RESULTS/logs/middleware-$1-$2
    rm -rf "$CDIR" && mkdir -p "$CDIR"
    MW_VERDICTS=$OXE_RESULTS/logs/middleware-$1-$2.verdicts.json
    MW_FIGURES=$CDIR/figures.tsv
    MW_RAN=0 MW_OK=0 MW_T=$SECONDS PERF=
    : >"$MW_VERDICTS.tsv"
    : >"$MW_FIGURES"
    if pair_setup "$DEV_A" "$DEV_B"; then
        echo "$DEV_A on veth0, $DEV_B on veth1 in netns peer"
        mw_qperf
        if [ "${3:-}" = quick ]; then
            mw_ucx rc_verbs,ud_verbs tag_bw tag_lat ucp_put_bw ucp_get ucp_fadd ucp_cswap
        else
            mw_ucx rc_verbs,ud_verbs
            mw_ucx ud_verbs
        fi
        if [ "${3:-}" = quick ]; then mw_mpi $((256 << 10)); else mw_mpi; fi
        mw_fabric msg -p verbs -e msg
        mw_fabric rdm -p "verbs;ofi_rxm" -e rdm
        if [ "${3:-}" != quick ]; then
            mw_fabric rdm-tagged -p "verbs;ofi_rxm" -e rdm -m tagged
            mw_needs_dgid_check
        fi
    else
        echo "cannot set up $DEV_A <-> $DEV_B: no check ran"
    fi
    # Every process the tools started must be gone: a device one still held
    # would fail the reset, and this suite with it.
    rdma_reset || { echo "the devices could not be reset after the middleware"; rc=1; }
    echo "middleware $1-$2: $MW_OK of $MW_RAN passed in $((SECONDS - t0)) s"
    record middleware "$1-$2" $MW_RAN $MW_OK $((MW_RAN - MW_OK)) 0 0 $((SECONDS - t0))
    mw_json "$MW_VERDICTS.tsv" "$MW_VERDICTS" "$MW_FIGURES" "$SUITE_DIR/middleware-$1-$2.json" ||
        { echo "the verdicts and figures could not be written as JSON"; rc=1; }
    rm -f "$MW_VERDICTS.tsv"
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/middleware-$1-$2.txt" \
        "$MW_VERDICTS" || rc=1
    return $rc
}
