# Suite: the kernel's own Soft-RoCE selftests (tools/testing/selftests/rdma of the same
# 7.3 tree), each script's verdict recorded and held to its ratchet.
# The scripts are written for rxe: for oxe, run a copy with module, link type and
# device names substituted (the kselftest helpers they source come along).
selftest_dir() { # label
    local src=$OXE_KDIR/tools/testing/selftests
    if [ "$1" = rxe ]; then
        echo "$src/rdma"
        return
    fi
    local dst=/tmp/kselftest-$1
    rm -rf "$dst" && mkdir -p "$dst/rdma" "$dst/kselftest"
    cp "$src"/kselftest/ktap_helpers.sh "$dst/kselftest/"
    cp "$src"/rdma/Makefile "$dst/rdma/"
    # rxe_sent_rcvd_bytes.sh checks that sent and received byte counts moved
    # alike, which holds just as well when rping failed and nothing moved:
    # in the copy, a failed rping client or an unmoved count fails the test.
    local f
    for f in "$src"/rdma/*.sh; do
        sed -e "s/rdma_rxe/$1/g" -e "s/type rxe/type $1/g" -e "s/\brxe\([0-9]\)/$1\1/g" \
            -e '/^rping -c -a 1\.1\.1\.1 /s/$/ || { echo "Error: rping client failed" >\&2; exit 1; }/' \
            -e '/^result0=/a [ "$result0" -gt 0 ] || { echo "Error: no bytes sent" >\&2; exit 1; }' \
            "$f" >"$dst/rdma/$(basename "$f")"
    done
    echo "$dst/rdma"
}

suite_kselftest_rdma() { # device-label
    local label=$1 dir t0=$SECONDS
    dir=$(selftest_dir "$label")
    local verdicts=$OXE_RESULTS/logs/kselftest-$label.verdicts.json
    local ran=0 ok=0 fail=0 skip=0 rc s t1
    echo '{' >"$verdicts.tmp"
    for s in $(sed -n 's/^TEST_PROGS :=//; s/\\//; /\.sh/p' "$dir/Makefile" | xargs); do
        ran=$((ran + 1))
        # rxe_netns_names spawns hundreds of `ip netns exec rdma ...`: on
        # a slow host's debug guest its first four tests alone took 300 s.
        t1=$SECONDS
        (cd "$dir" && timeout 900 bash "./$s") >"$OXE_RESULTS/logs/kselftest-$label-$s.log" 2>&1
        rc=$?
        case $rc in
        0) v=ok ok=$((ok + 1)) ;;
        4) v=skipped skip=$((skip + 1)) ;;
        *) v=FAIL fail=$((fail + 1)) ;;
        esac
        printf '%s: %s (exit %d, %d s)\n' "$s" "$v" "$rc" $((SECONDS - t1))
        [ $rc = 0 ] || sed 's/^/    /' "$OXE_RESULTS/logs/kselftest-$label-$s.log" | tail -n 5
        printf '"%s": "%s",\n' "$s" "$v" >>"$verdicts.tmp"
    done
    sed '$ s/,$//' "$verdicts.tmp" >"$verdicts" && echo '}' >>"$verdicts" && rm -f "$verdicts.tmp"
    record kselftest "$label" $ran $ok $fail 0 $skip $((SECONDS - t0))
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/kselftest-$label.txt" "$verdicts"
}
