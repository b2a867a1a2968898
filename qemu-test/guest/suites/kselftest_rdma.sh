# Suite: the kernel's own Soft-RoCE selftests (tools/testing/selftests/rdma of the same
# 7.3 tree), each script's verdict recorded and held to its ratchet.
suite_kselftest_rdma() { # device-label
    local label=$1 dir=$OXE_KDIR/tools/testing/selftests/rdma t0=$SECONDS
    local verdicts=$OXE_RESULTS/logs/kselftest-$label.verdicts.json
    local ran=0 ok=0 fail=0 skip=0 rc s
    echo '{' >"$verdicts.tmp"
    for s in $(sed -n 's/^TEST_PROGS :=//; s/\\//; /\.sh/p' "$dir/Makefile" | xargs); do
        ran=$((ran + 1))
        (cd "$dir" && timeout 180 bash "./$s") >"$OXE_RESULTS/logs/kselftest-$label-$s.log" 2>&1
        rc=$?
        case $rc in
        0) v=ok ok=$((ok + 1)) ;;
        4) v=skipped skip=$((skip + 1)) ;;
        *) v=FAIL fail=$((fail + 1)) ;;
        esac
        printf '%s: %s (exit %d)\n' "$s" "$v" "$rc"
        [ $rc = 0 ] || sed 's/^/    /' "$OXE_RESULTS/logs/kselftest-$label-$s.log" | tail -n 5
        printf '"%s": "%s",\n' "$s" "$v" >>"$verdicts.tmp"
    done
    sed '$ s/,$//' "$verdicts.tmp" >"$verdicts" && echo '}' >>"$verdicts" && rm -f "$verdicts.tmp"
    record kselftest "$label" $ran $ok $fail 0 $skip $((SECONDS - t0))
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/kselftest-$label.txt" "$verdicts"
}
