# Suite: rdma-core v59's tests/ (run_tests.py) against one device, held to its ratchet.
suite_rdma_core() { # device netdev gid-index
    rdma_core_run "rdma-core-$1" "$1" "$3"
}

# Suite: rdma-core v65's tests (the stock65 guest), under their own names.
suite_rdma_core65() { # device netdev gid-index
    rdma_core_run "rdma-core65-$1" "$1" "$3"
}

# The tests that must pass with inline receive off as well as on: oxe's
# enforcement, window and inline-receive tests, and rdma-core's own tests of
# sends and receives (extended QPs and CQs, SRQs, CQs, ODP, rdma_cm).
NO_INLINE_TESTS=(-k test_oxe_mr_enforce -k test_oxe_mw -k test_oxe_inline_recv
    -k tests.test_qpex -k tests.test_srq -k tests.test_cqex -k tests.test_cq.
    -k tests.test_odp -k tests.test_rdmacm)

# Suite: those tests again in processes that turned inline receive off
# (OXE_SCATTER_TO_CQE=0), held to a ratchet of their own.
suite_rdma_core_no_inline() { # device netdev gid-index
    OXE_SCATTER_TO_CQE=0 rdma_core_run "rdma-core-$1-noinline" "$1" "$3" "${NO_INLINE_TESTS[@]}"
}

# Runs the tests (all, or those the unittest filters select) into logs/NAME.log
# and checks them against expected/NAME.txt (and NAME.min, if present).
rdma_core_run() { # name device gid-index [run_tests.py arguments...]
    local name=$1 dev=$2 gid=$3
    shift 3
    local log=$OXE_RESULTS/logs/$name.log t0=$SECONDS
    ibv_devinfo -d "$dev" -v | grep -E 'state|GID\[' || return 1
    # The tests hold huge-page MRs: reserve a few 2 MiB pages for them.
    echo 16 >/proc/sys/vm/nr_hugepages
    rm -f "${log%.log}.runner.json"
    (cd /tmp && OXE_TEST_TIMES=${log%.log}.times.txt OXE_VERDICTS=${log%.log}.runner.json timeout 1800 "$GUEST/rdma_core_tests.py" --dev "$dev" --gid "$gid" -v "$@") >"$log" 2>&1
    local rc=$?
    tail -n 5 "$log"
    echo "slowest tests (all in ${log%.log}.times.txt):"
    head -n 5 "${log%.log}.times.txt" 2>/dev/null
    local counts
    counts=$("$OXE_TOP/qemu-test/results.py" unittest "$log" rdma-core "$dev" $((SECONDS - t0))) || return 1
    echo "$counts" >"$SUITE_DIR/$name.json"
    echo "$counts"
    # Failures not on the expectations list are reported, not fatal: the ratchet decides.
    [ $rc = 0 ] || grep -E '^(FAIL|ERROR):' "$log" | head -n 40
    local floor=$OXE_TOP/qemu-test/expected/$name.min ok
    if [ -f "$floor" ]; then
        ok=$(sed -n 's/.*"ok": \([0-9]*\).*/\1/p' <<<"$counts")
        echo "floor: $ok ok, at least $(cat "$floor") required"
        [ "$ok" -ge "$(cat "$floor")" ] || return 1
    fi
    local verdict=0
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/$name.txt" \
        "${log%.log}.verdicts.json" || verdict=1
    # On oxe, rdma-core's own tests may skip but never fail or error.
    if [ "$(link_type "$dev")" = oxe ]; then
        "$OXE_TOP/qemu-test/results.py" stock-clean "${log%.log}.verdicts.json" || verdict=1
    fi
    return $verdict
}
