# Suite: a hostile peer (qemu-test/guest/test_hostile_peer.py). Crafted RoCE
# v2 frames from netns "peer" against QPs of DEV on veth0, held to its
# ratchet; every test must pass, none may skip. The veth pair runs with a
# 9000-byte MTU meanwhile, so that a frame can carry more payload than the
# largest path MTU allows (a raw socket refuses to send past the link MTU).
# Suite: oxe's trace events (qemu-test/guest/test_trace.py), each fired by
# a known operation and read back from tracefs with its fields; the peer's
# frames as the hostile peer's.
suite_trace() { # device
    # A kernel without tracepoints (the plain flavour, a developer's tree
    # built without them) has no events to enable: oxe defines none there.
    if ! grep -qx 'CONFIG_TRACEPOINTS=y' "$OXE_KDIR/.config"; then
        echo "trace: this kernel has no CONFIG_TRACEPOINTS, so oxe has no trace events"
        return 0
    fi
    OXE_GID=$(gid_index "$1" 10.11.0.1) || return 1
    OXE_GID=$OXE_GID unittest_suite trace "$1" test_trace 300
}

suite_hostile_peer() { # device
    local rc
    ip link set veth0 mtu 9000 && ip -n peer link set veth1 mtu 9000 || return 1
    OXE_GID=$(gid_index "$1" 10.11.0.1) || return 1
    OXE_GID=$OXE_GID unittest_suite hostile-peer "$1" test_hostile_peer 900
    rc=$?
    ip link set veth0 mtu 1500
    ip -n peer link set veth1 mtu 1500
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
    local dev=$1 ndev=$2 rc
    rdma link delete "$dev" 2>/dev/null
    modprobe -r oxe && modprobe oxe "${LIMITS[@]}" && rdma link add "$dev" type oxe netdev "$ndev" ||
        { echo "cannot reload oxe with ${LIMITS[*]}"; return 1; }
    echo "oxe loaded with ${LIMITS[*]}"
    unittest_suite limits "$dev" test_limits 600
    rc=$?
    rdma link delete "$dev"
    modprobe -r oxe && modprobe oxe && rdma link add "$dev" type oxe netdev "$ndev" || rc=1
    return $rc
}

# Suite: what an unprivileged local user can see of the device or take from
# it (qemu-test/guest/test_security.py): key material through netlink, the
# RoCE port of a namespace oxe has not opened yet, a resize's copy, an ODP
# fault that never resolves (qemu-test/guest/fuse_stall.py).
suite_security() { # device
    local gid
    gid=$(gid_index "$1" 10.11.0.1) || return 1
    OXE_GID=$gid unittest_suite security "$1" test_security 600
}
