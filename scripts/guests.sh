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

# The end of each failed suite's log, kept before the next guest's logs can
# replace it, for `make test` to print after its verdicts: what CI shows of a
# run is its tail, and a bare "fail" there cannot be looked into afterwards.
# A suite also fails on a kernel report in dmesg: the report's first lines too.
source "$top/qemu-test/guest/splats.sh"
keep_failures() { # run
    local name verdict log dir
    while read -r name verdict; do
        [ "$verdict" = fail ] || continue
        dir=$results/logs
        [[ $name == rxe-guest:* ]] && dir=$results/wire-rxe/logs
        log=$dir/suite-${name#rxe-guest:}.log
        {
            echo "--- $name ($1 guest), the last 30 lines of $log:"
            tail -n 30 "$log" 2>/dev/null || echo "(no log)"
            grep -E -m 1 -A 25 "$SPLAT_RE" "$dir/dmesg-${name#rxe-guest:}.log" 2>/dev/null |
                sed "1i --- $name: dmesg" || true
        } >>"$results/failures.txt"
    done <"$results/guest-checks.txt"
}

# Every suite qemu-test/expected/suites/MODE.txt lists must have run in that
# guest: a suite dropped from main.sh, or skipped by a switch, fails here.
missing_suites() { # mode
    local want=$top/qemu-test/expected/suites/$1.txt suite
    [ -f "$want" ] || { echo "guest $1: no list of expected suites ($want)"; return 1; }
    local rc=0
    while read -r suite; do
        [[ -z $suite || $suite == \#* ]] && continue
        if ! grep -q "^$suite \(pass\|fail\)$" "$results/guest-checks.txt" 2>/dev/null; then
            echo "guest $1: suite $suite did not run"
            echo "$suite fail" >>"$results/checks.txt"
            echo "--- $suite ($1 guest) did not run" >>"$results/failures.txt"
            rc=1
        fi
    done <"$want"
    return $rc
}

rm -f "$results/failures.txt"
# The `own` guest boots the tree oxe was built against through KDIR: the
# developer's (OXE_KDIR), or else the stand-in make test built. With the
# developer's, every guest boots it, but the wire's, whose rxe end is the
# cached plain kernel.
# The stock65 guest runs rdma-core v65's tests with that tree and the
# provider built against it (OXE_RDMA_CORE_VERSION=65).
runs=("test debug" "force-mr debug" "wire debug" "own kdir" "yardstick plain" "stock65 plain")
own_kdir=${OXE_KDIR:-$("$top/scripts/kernel.sh" dir own)}
[ -n "${OXE_KDIR:-}" ] && runs=("test kdir" "force-mr kdir" "own kdir" "yardstick kdir" "stock65 kdir")
for run in "${runs[@]}"; do
    mode=${run% *} flavour=${run#* }
    kdir= args=("$mode" "$flavour") label="$run kernel" rdma_core=59
    if [ "$flavour" = kdir ]; then
        kdir=$own_kdir args=("$mode") label="$mode on $own_kdir"
    fi
    [ "$mode" = stock65 ] && rdma_core=65
    OXE_KDIR=$kdir OXE_RDMA_CORE_VERSION=$rdma_core "$top/scripts/timed.sh" "$results/timings.txt" \
        "guest: $label (whole boot)" "$top/qemu-test/vm.sh" "${args[@]}"
    rc=$?
    cat "$results/guest-checks.txt" >>"$results/checks.txt" 2>/dev/null
    [ -f "$results/guest-checks.txt" ] && keep_failures "${run% *}"
    missing_suites "${run% *}" || rc=1
    [ $rc = 0 ] || echo "guest ${run% *} fail" >>"$results/checks.txt"
done
# vm.sh exec as a CI job runs it (docs/ci.md): a command that moves checked
# data between the two devices and then exits 7 must make vm.sh exit 7, and
# its JUnit file must show the suite failed.
# It also proves vm.sh's second boot (a kernel report before oxe loads):
# the guest makes one up in its first boot's log.
sed -i '/^guest exec /d' "$results/boot-retries.txt" 2>/dev/null
rm -f "$results/logs/dmesg-boot-first.log"
OXE_TEST_BOOT_REPORT=1 "$top/scripts/timed.sh" "$results/timings.txt" "guest: exec plain kernel (two boots)" \
    "$top/qemu-test/vm.sh" exec "$top/qemu-test/guest/exec_probe.sh" 7
rc=$?
if grep -q '^guest exec (.*): a kernel report during boot' "$results/boot-retries.txt" 2>/dev/null &&
    grep -q 'BUG: oxe-test: a made-up boot report' "$results/logs/dmesg-boot-first.log" &&
    [ -s "$results/logs/dmesg-boot.log" ] && ! grep -q 'oxe-test' "$results/logs/dmesg-boot.log"; then
    echo "vm_boot_again pass" >>"$results/checks.txt"
    sed -i '/^guest exec /d' "$results/boot-retries.txt"
else
    echo "vm_boot_again fail" >>"$results/checks.txt"
    echo "--- vm_boot_again: a made-up boot report did not make vm.sh exec boot a second time" >>"$results/failures.txt"
fi
if [ $rc = 7 ] && grep -q 'exec_probe: 50 checked ping-pongs' "$results/logs/suite-exec.log" &&
    grep -q '<failure message="suite exec: fail"' "$results/junit-exec.xml"; then
    echo "vm_exec pass" >>"$results/checks.txt"
else
    echo "vm_exec fail" >>"$results/checks.txt"
    echo "--- vm_exec: vm.sh exec exited $rc, not 7, or its log or junit-exec.xml is wrong" >>"$results/failures.txt"
fi
"$top/qemu-test/results.py" stock-compare "$results/logs/rdma-core-oxe0.verdicts.json" \
    "$results/logs/rdma-core-rxe0.verdicts.json" || true
# On rdma-core v65, every stock test that passes on rxe must pass on oxe.
echo "rdma-core v65:"
if "$top/qemu-test/results.py" stock-compare "$results/logs/rdma-core65-oxe0.verdicts.json" \
    "$results/logs/rdma-core65-rxe0.verdicts.json" --gate; then
    echo "stock65_oxe_covers_rxe pass" >>"$results/checks.txt"
else
    echo "stock65_oxe_covers_rxe fail" >>"$results/checks.txt"
    echo "--- stock65_oxe_covers_rxe: a v65 stock test passes on rxe and not on oxe" >>"$results/failures.txt"
fi
