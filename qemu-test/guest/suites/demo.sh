# `make run`: create the devices and show them working, MRs included.

suite_demo() {
    # rxe0 lives in netns "peer" (veth1): both drivers bind UDP 4791, so they
    # cannot share a namespace. ib_core's shared mode shows both devices here.
    modprobe rdma_rxe && ip netns exec peer rdma link add rxe0 type rxe netdev veth1 || return 1
    say "rdma link add oxe0 type oxe netdev veth0   (loads oxe.ko through its rdma-link alias)"
    rdma link add oxe0 type oxe netdev veth0 || return 1
    say "RDMA devices in this guest"
    rdma link show
    ibv_devices
    local d g i t
    for d in oxe0 rxe0; do
        ibv_devinfo -d $d | grep -E 'hca_id|transport|fw_ver|vendor_id|state|active_mtu|link_layer'
        say "RoCE v2 GIDs of $d"
        for i in $(seq 0 7); do
            g=/sys/class/infiniband/$d/ports/1
            t=$(cat "$g/gid_attrs/types/$i" 2>/dev/null) || continue
            echo "  gid[$i] $(cat "$g/gids/$i") $t"
        done
    done
    say "An MR on oxe0, held by a process"
    coproc HOLD { PYTHONPATH=$OXE_RDMA_CORE/build/python exec /usr/bin/python3 "$GUEST/hold_mr.py" oxe0 2>&1; }
    local line
    read -r -t 60 line <&"${HOLD[0]}" || return 1
    echo "registered 1 MiB: $line"
    say "rdma -dd resource show mr dev oxe0"
    rdma -dd resource show mr dev oxe0
    say "debugfs: /sys/kernel/debug/oxe/oxe0/mr-* (first lines)"
    head -n 14 /sys/kernel/debug/oxe/oxe0/mr-*
    say "/sys/class/infiniband/oxe0/hw_counters"
    grep -H . /sys/class/infiniband/oxe0/hw_counters/*
    eval "exec ${HOLD[1]}>&-"
    wait "$HOLD_PID" 2>/dev/null
    sleep 0.1
    say "after dereg"
    grep -H . /sys/class/infiniband/oxe0/hw_counters/{mr_active,pages_pinned}
    [ "$(cat /sys/class/infiniband/oxe0/hw_counters/pages_pinned)" = 0 ]
}
