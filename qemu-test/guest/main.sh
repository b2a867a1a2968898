#!/usr/bin/env bash
# Guest entry point: main.sh run|test|bench. Runs inside virtme-ng as root.
# Every suite is followed by a dmesg check; the verdict goes to $OXE_RESULTS/.guest-status.
source "$(dirname "$0")/lib.sh"
for f in "$GUEST"/suites/*.sh; do source "$f"; done
mode=${1:?mode}
rm -f "$OXE_RESULTS/guest-checks.txt"

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
run_suite boot true

case $mode in
run)
    net_setup
    # rxe0 lives in netns "peer" (veth1): both drivers bind UDP 4791, so they
    # cannot share a namespace. ib_core's shared mode shows both devices here.
    modprobe rdma_rxe && ip netns exec peer rdma link add rxe0 type rxe netdev veth1
    say "rdma link add oxe0 type oxe netdev veth0   (loads oxe.ko through its rdma-link alias)"
    rdma link add oxe0 type oxe netdev veth0
    say "RDMA devices in this guest"
    rdma link show
    ibv_devices
    for d in oxe0 rxe0; do
        ibv_devinfo -d $d | grep -E 'hca_id|transport|fw_ver|vendor_id|state|active_mtu|link_layer'
        say "RoCE v2 GIDs of $d"
        for g in /sys/class/infiniband/$d/ports/1/gids/*; do
            i=${g##*/}
            t=$(cat "/sys/class/infiniband/$d/ports/1/gid_attrs/types/$i" 2>/dev/null) || continue
            echo "  gid[$i] $(cat "$g") $t"
        done
    done
    say "An MR on oxe0, held by a process: rdma resource show mr, and the device counters"
    coproc HOLD { PYTHONPATH=$OXE_RDMA_CORE/build/python /usr/bin/python3 "$GUEST/hold_mr.py" oxe0 2>&1; }
    read -r -t 60 line <&"${HOLD[0]}" && echo "registered: $line"
    rdma resource show mr dev oxe0 -dd
    grep -H . /sys/class/infiniband/oxe0/hw_counters/*
    eval "exec ${HOLD[1]}>&-"
    wait
    say "after dereg"
    grep -H . /sys/class/infiniband/oxe0/hw_counters/{mr_active,pages_pinned}
    dmesg_check run || FAILED+=(run)
    ;;
test)
    run_suite module_load suite_module_load
    # The selftests build their own topology (veth0/veth1 included): run them first.
    run_suite kselftest_rxe suite_kselftest_rdma rxe
    run_suite kselftest_oxe suite_kselftest_rdma oxe
    net_setup
    # rxe and oxe both bind UDP 4791: in one namespace, one at a time.
    load_rxe rxe0 veth0
    run_suite rdma_core_rxe0 suite_rdma_core rxe0 veth0 1
    rdma link delete rxe0
    modprobe -r rdma_rxe
    run_suite oxe_lifecycle suite_oxe_lifecycle
    rdma link add oxe0 type oxe netdev veth0
    run_suite rdma_core_oxe0 suite_rdma_core oxe0 veth0 1
    ;;
bench)
    # Same guest, same run, for both devices: only the ratios mean anything.
    net_setup
    modprobe rdma_rxe && ip netns exec peer rdma link add rxe0 type rxe netdev veth1
    rdma link add oxe0 type oxe netdev veth0
    for d in oxe0 rxe0; do
        run_suite "bench_mr_$d" "$OXE_TOP/build/mr_bench" "$d" "$OXE_RESULTS/bench-mr-$d.json"
    done
    ;;
quick)
    # The oxe suites alone, for iterating on the driver (qemu-test/vm.sh quick).
    net_setup
    run_suite oxe_lifecycle suite_oxe_lifecycle
    rdma link add oxe0 type oxe netdev veth0
    run_suite rdma_core_oxe0 suite_rdma_core oxe0 veth0 1
    ;;
*)
    echo "unknown mode $mode"
    FAILED+=("mode:$mode")
    ;;
esac

"$OXE_TOP/qemu-test/results.py" summary "$SUITE_DIR" "$OXE_RESULTS/summary.json"
if [ ${#FAILED[@]} = 0 ]; then
    echo ok >"$OXE_RESULTS/.guest-status"
    say "guest $mode: all suites passed"
else
    echo "failed suites: ${FAILED[*]}" >"$OXE_RESULTS/.guest-status"
    say "guest $mode: failed suites: ${FAILED[*]}"
fi
