# `make run`: create the devices and show them working, MRs included.

suite_demo() {
    load_rxe rxe0 veth1 peer || return 1
    say "rdma link add oxe0 type oxe netdev veth0   (loads oxe.ko through its rdma-link alias)"
    rdma link add oxe0 type oxe netdev veth0 || return 1
    say "RDMA devices in this guest"
    rdma link show
    ibv_devices
    local d
    for d in oxe0 rxe0; do
        ibv_devinfo -d $d | grep -E 'hca_id|transport|fw_ver|vendor_id|state|active_mtu|link_layer'
        say "GID table of $d (index, GID, type)"
        gid_table $d
    done
    say "An MR on oxe0, held by a process"
    hold_mr oxe0 || return 1
    say "rdma -dd resource show mr dev oxe0"
    rdma -dd resource show mr dev oxe0
    say "debugfs: /sys/kernel/debug/oxe/oxe0/mr-* (first lines)"
    head -n 14 /sys/kernel/debug/oxe/oxe0/mr-*
    say "/sys/class/infiniband/oxe0/hw_counters"
    grep -H . /sys/class/infiniband/oxe0/hw_counters/*
    release_mr
    snooze 0.1
    say "after dereg"
    grep -H . /sys/class/infiniband/oxe0/hw_counters/{mr_active,pages_pinned}
    [ "$(cat /sys/class/infiniband/oxe0/hw_counters/pages_pinned)" = 0 ]
}
