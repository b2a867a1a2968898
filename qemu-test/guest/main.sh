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
    load_rxe rxe0 veth0
    say "RDMA devices in this guest"
    rdma link show
    ibv_devices
    ibv_devinfo -d rxe0 | grep -E 'hca_id|transport|state|active_mtu|link_layer'
    say "RoCE v2 GIDs of rxe0"
    for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
        i=${g##*/}
        t=$(cat "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i" 2>/dev/null) || continue
        echo "  gid[$i] $(cat "$g") $t"
    done
    dmesg_check run || FAILED+=(run)
    ;;
test)
    run_suite module_load suite_module_load
    net_setup
    load_rxe rxe0 veth0
    run_suite rdma_core_rxe0 suite_rdma_core rxe0 veth0 1
    rdma link delete rxe0
    run_suite kselftest_rxe suite_kselftest_rdma rxe
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
