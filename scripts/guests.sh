#!/usr/bin/env bash
# The guest half of `make test`, one guest after the other: oxe's suites on
# the debug kernel (test), NVMe-oF again with ib_core.force_mr=1 (force-mr),
# NVMe-oF against rxe on two guests over one virtual wire (wire), and rxe's
# yardstick on the plain kernel. Each guest's checks go into
# RESULTS/checks.txt ("guest MODE fail" for a guest that failed), its suite
# timings into RESULTS/timings.txt. Ends with rdma-core's own tests on oxe
# against rxe in this run.
#
# Two guests at once (a debug guest keeps only about 1.4 of the two cores
# busy) gained nothing: four vCPUs on two cores, the debug kernels' spinning
# on locks whose holder's vCPU is not running ate the idle time.
#   guests.sh RESULTS
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
results=${1:?usage: guests.sh RESULTS}

for run in "test debug" "force-mr debug" "wire debug" "yardstick plain"; do
    # shellcheck disable=SC2086 # mode and flavour
    "$top/scripts/timed.sh" "$results/timings.txt" "guest: $run kernel (whole boot)" "$top/qemu-test/vm.sh" $run
    rc=$?
    cat "$results/guest-checks.txt" >>"$results/checks.txt" 2>/dev/null
    [ $rc = 0 ] || echo "guest ${run% *} fail" >>"$results/checks.txt"
done
"$top/qemu-test/results.py" stock-compare "$results/logs/rdma-core-oxe0.verdicts.json" \
    "$results/logs/rdma-core-rxe0.verdicts.json" || true
