# Suite: a hostile peer (qemu-test/guest/test_hostile_peer.py). Crafted RoCE
# v2 frames from netns "peer" against QPs of DEV on veth0, held to its
# ratchet; every test must pass, none may skip. The veth pair runs with a
# 9000-byte MTU meanwhile, so that a frame can carry more payload than the
# largest path MTU allows (a raw socket refuses to send past the link MTU).
suite_hostile_peer() { # device
    local dev=$1 t0=$SECONDS log=$OXE_RESULTS/logs/hostile-peer-$1.log gid rc
    ip link set veth0 mtu 9000 && ip -n peer link set veth1 mtu 9000 || return 1
    gid=$(gid_index "$dev" 10.11.0.1) || return 1
    (cd "$GUEST" && OXE_DEV=$dev OXE_GID=$gid PYTHONPATH=$OXE_RDMA_CORE/build/python:$GUEST \
        timeout 900 /usr/bin/python3 -m unittest -v test_hostile_peer) >"$log" 2>&1
    rc=$?
    ip link set veth0 mtu 1500
    ip -n peer link set veth1 mtu 1500
    cat "$log"
    local counts verdicts=${log%.log}.verdicts.json
    counts=$("$OXE_TOP/qemu-test/results.py" unittest "$log" hostile-peer "$dev" $((SECONDS - t0))) || return 1
    echo "$counts" >"$SUITE_DIR/hostile-peer-$dev.json"
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/hostile-peer.txt" "$verdicts" || rc=1
    grep -q '"skipped": 0' <<<"$counts" || { echo "hostile-peer: no test may skip"; rc=1; }
    return $rc
}

# Suite: a hostile local process (qemu-test/clients/uverbs_abuse.c) against
# DEV: registrations and a rereg whose replies cannot be written, from
# processes that fork and exit, must leave nothing pinned or registered;
# a QP in the error state that one thread keeps posting receives to and
# another keeps ringing, while the kernel flushes it into a CQ nobody
# polls, must not stall a CPU (the dmesg check after the suite catches a
# soft lockup or an RCU stall) and must raise one CQ error, not one per
# lost completion.
suite_hostile_process() { # device
    local dev=$1 tool=$OXE_TOP/build/uverbs_abuse rc=0
    [ -x "$tool" ] || { echo "$tool missing: build it with 'make guest-tools'"; return 1; }
    "$tool" "$dev" reg-unwritable 50 || { echo "FAIL: reg-unwritable"; rc=1; }
    "$tool" "$dev" rereg-unwritable || { echo "FAIL: rereg-unwritable"; rc=1; }
    # Past the soft-lockup watchdog's 20 s.
    timeout 120 "$tool" "$dev" flush-race 25 || { echo "FAIL: flush-race"; rc=1; }
    return $rc
}

# Suite: the device's limits are enforced (qemu-test/guest/test_limits.py),
# with oxe reloaded with lowered limits so that a test can reach them; it
# is reloaded with the defaults afterwards.
LIMITS=(max_pd=6 max_mr=8 max_cq=6 max_qp=6 max_srq=3)
suite_limits() { # device netdev
    local dev=$1 ndev=$2 log=$OXE_RESULTS/logs/limits-$1.log rc t0=$SECONDS
    rdma link delete "$dev" 2>/dev/null
    modprobe -r oxe && modprobe oxe "${LIMITS[@]}" && rdma link add "$dev" type oxe netdev "$ndev" ||
        { echo "cannot reload oxe with ${LIMITS[*]}"; return 1; }
    echo "oxe loaded with ${LIMITS[*]}"
    (cd "$GUEST" && OXE_DEV=$dev PYTHONPATH=$OXE_RDMA_CORE/build/python:$GUEST \
        timeout 600 /usr/bin/python3 -m unittest -v test_limits) >"$log" 2>&1
    rc=$?
    cat "$log"
    rdma link delete "$dev"
    modprobe -r oxe && modprobe oxe && rdma link add "$dev" type oxe netdev "$ndev" || rc=1
    local counts
    counts=$("$OXE_TOP/qemu-test/results.py" unittest "$log" limits "$dev" $((SECONDS - t0))) || return 1
    echo "$counts" >"$SUITE_DIR/limits-$dev.json"
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/limits.txt" "${log%.log}.verdicts.json" || rc=1
    grep -q '"skipped": 0' <<<"$counts" || { echo "limits: no test may skip"; rc=1; }
    return $rc
}
