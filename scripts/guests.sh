#!/usr/bin/env bash
# The guest half of `make test`, in two lanes at once:
#   lane 1 (this shell, output as it comes): oxe's suites on the debug kernel
#          (test-core), then NVMe-oF with ib_core.force_mr=1 (force-mr);
#   lane 2 (its output after lane 1's): rxe's yardstick on the plain kernel,
#          then the client suites and RC under loss on the debug kernel
#          (clients-oxe), each guest with results of its own under RESULTS;
# then, alone, NVMe-oF against rxe on two guests over one virtual wire.
# A debug guest keeps only about 1.4 of the two cores busy (a suite's
# processes wait on each other and on the guest kernel): two at once got
# make test back within CI's 90 minutes, where one after the other did not.
# Each guest's checks and suite timings go into RESULTS/checks.txt and
# RESULTS/timings.txt; a guest that failed adds "guest MODE fail".
#   guests.sh RESULTS
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
results=${1:?usage: guests.sh RESULTS}
timed() { "$top/scripts/timed.sh" "$results/timings.txt" "$@"; }

# One guest whose results are RESULTS itself (lane 1, and the wire).
guest_here() { # mode flavour
    timed "guest: $1, $2 kernel (whole boot)" "$top/qemu-test/vm.sh" "$1" "$2"
    local rc=$?
    cat "$results/guest-checks.txt" >>"$results/checks.txt" 2>/dev/null
    [ $rc = 0 ] || echo "guest $1 fail" >>"$results/checks.txt"
}

# One guest of lane 2, into DIR: beside lane 1's guest, so without the vm
# lock that lane holds (vm.sh installs the module under a lock of its own).
guest_in() { # dir mode flavour
    local dir=$1
    rm -rf "$dir" && mkdir -p "$dir"
    OXE_RESULTS_DIR=$dir OXE_VM_LOCK=0 timed "guest: $2, $3 kernel (whole boot, lane 2)" \
        "$top/qemu-test/vm.sh" "$2" "$3" >"$dir/vm.log" 2>&1 ||
        echo "guest $2 fail" >>"$dir/guest-checks.txt"
}

lane2=("$results/yardstick yardstick plain" "$results/clients clients-oxe debug")
(
    for g in "${lane2[@]}"; do
        # shellcheck disable=SC2086 # three words
        guest_in $g
    done
) &
lane2_pid=$!
guest_here test-core debug
guest_here force-mr debug
wait $lane2_pid
for g in "${lane2[@]}"; do
    read -r dir mode _ <<<"$g"
    echo "=== lane 2: $mode ($dir)"
    cat "$dir/vm.log" 2>/dev/null
    cat "$dir/guest-checks.txt" >>"$results/checks.txt" 2>/dev/null ||
        echo "guest $mode fail" >>"$results/checks.txt"
    sed 's/^  suite /  lane 2: suite /' "$dir/timings.txt" >>"$results/timings.txt" 2>/dev/null
done
guest_here wire debug
"$top/qemu-test/results.py" stock-compare "$results/logs/rdma-core-oxe0.verdicts.json" \
    "$results/yardstick/logs/rdma-core-rxe0.verdicts.json" || true
