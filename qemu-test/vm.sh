#!/usr/bin/env bash
# Host side of the guest runner: boots a cached 7.3 kernel under virtme-ng with the
# host's root fs, and runs qemu-test/guest/main.sh MODE inside it.
#   vm.sh MODE [plain|debug]     MODE: run test yardstick bench shell quick dp ...
# The kernel flavour defaults by mode: oxe's suites and the modes for iterating
# on the driver boot the debug kernel (KASAN, lockdep), the rest the plain one.
# Results land in build/results/ (the guest's only writable host directory).
source "$(dirname "$0")/../scripts/lib.sh"

mode=${1:?usage: vm.sh MODE [plain|debug] (vm.sh ab OLD.ko [plain|debug]) (vm.sh exec CMD [ARGS...])}
# The modes are guest/main.sh's (each a case of its own), plus `shell` and
# `wire` (two guests, whose main.sh modes are wire-oxe and wire-rxe). An
# unknown one is refused here, before a guest boots for nothing.
modes=$(grep -oE '^[a-z0-9-]+( \| [a-z0-9-]+)*\)$' "$OXE_TOP/qemu-test/guest/main.sh" | tr -d ')|' | xargs)
case " $modes shell wire " in
*" $mode "*) ;;
*) die "unknown mode '$mode'; the modes: $modes shell wire" ;;
esac
# `exec` takes a command: it runs in the guest with two oxe devices up, and
# its status is vm.sh's (docs/ci.md). The kernel is OXE_KERNEL's (plain).
exec_cmd=()
if [ "$mode" = exec ]; then
    shift
    [ $# -gt 0 ] || die "usage: vm.sh exec CMD [ARGS...]"
    exec_cmd=("$@")
    set -- exec
fi
# `ab` takes the other build of oxe.ko first: it and this checkout's take
# turns in one guest (guest/suites/ab.sh).
if [ "$mode" = ab ]; then
    OXE_AB_OLD=$(realpath "${2:?usage: vm.sh ab OLD.ko [plain|debug]}")
    shift
fi
case "$mode" in
test | quick | dp | clients-oxe | hostile | security | same-netns | script | ulp | force-mr | wire) default_flavour=debug ;;
*) default_flavour=plain ;;
esac
flavour=${2:-${OXE_KERNEL:-$default_flavour}}
# OXE_KDIR boots a kernel tree of your own instead (every mode; its oxe.ko
# from `make module KDIR=...`, in build/module-kdir). Mode `own` is the
# checks of such a tree alone.
[ "$mode" != own ] || [ -n "${OXE_KDIR:-}" ] || die "mode own boots the tree OXE_KDIR names: set it"
if [ -n "${OXE_KDIR:-}" ]; then
    flavour=kdir
    kdir=$(realpath "$OXE_KDIR")
    [ -f "$kdir/arch/x86/boot/bzImage" ] || die "OXE_KDIR=$kdir has no arch/x86/boot/bzImage: build the kernel there first"
else
    kdir=$("$OXE_TOP/scripts/kernel.sh" dir "$flavour")
    [ -f "$kdir/.oxe-built" ] || die "$flavour kernel not built: run 'make kernel-$flavour'"
fi
# OXE_MODULE boots another build of oxe.ko (an older commit's, to show a
# test fails there).
module=${OXE_MODULE:-$(module_dir "$flavour")/oxe.ko}
rdma=$("$OXE_TOP/scripts/rdma-core.sh" dir)
[ -f "$rdma/.oxe-built" ] || die "rdma-core not built: run 'make rdma-core'"
results=$OXE_TOP/build/results
mkdir -p "$results"
rm -f "$results/exec-cmd.sh" "$results/exec-status"
if [ "$mode" = exec ]; then
    # The command as given, quoted for the guest's shell, run where vm.sh was.
    printf 'cd %q && exec %s\n' "$PWD" "$(printf '%q ' "${exec_cmd[@]}")" >"$results/exec-cmd.sh"
fi

# TCG unless a probe proves KVM boots here (it hangs on these machines: QEMU trips
# over MSR 0x10a). The verdict is cached per host boot and kernel build.
accel() {
    local verdict=$OXE_CACHE/kvm-probe
    local key
    key="$(cat /proc/sys/kernel/random/boot_id) $kdir"
    if [ ! -r /dev/kvm ]; then
        echo --disable-kvm
        return
    fi
    if [ ! -f "$verdict" ] || [ "$(head -n1 "$verdict")" != "$key" ]; then
        local ok=no
        if timeout 60 "$VENV/bin/vng" --run "$kdir" --cpus 1 --memory 512M \
            --exec 'echo oxe-kvm-probe-ok' </dev/null 2>/dev/null | grep -q oxe-kvm-probe-ok; then
            ok=yes
        fi
        printf '%s\n%s\n' "$key" "$ok" >"$verdict"
    fi
    if [ "$(tail -n1 "$verdict")" = yes ]; then echo; else echo --disable-kvm; fi
}

# make test's modes, whose suite logs are kept, not shown (whole for a
# failed suite), with a summary.json of their counts.
is_record_mode() { case $mode in test | yardstick) true ;; *) false ;; esac; }

# oxe.ko goes where modprobe finds it, so that `rdma link add ... type oxe`
# loads it through its rdma-link-oxe alias like any in-tree link type.
install_module() { # kdir module
    local mods=$1/.virtme_mods
    (cd "$1" && "$VENV/bin/virtme-prep-kdir-mods" >/dev/null)
    install -D -m0644 "$2" "$mods/lib/modules/0.0.0/extra/oxe.ko"
    depmod -b "$mods" 0.0.0
}
[ -f "$module" ] || die "oxe.ko for the $flavour kernel not built: run 'make module-$flavour'$([ "$flavour" = kdir ] && echo " KDIR=$kdir")"
# One guest at a time per machine (but for `wire`'s two): the module
# directory is shared by every checkout, and two TCG guests on two cores
# only slow each other down (scripts/guests.sh says by how much).
exec 9>"$OXE_CACHE/vm.lock"
[ "${OXE_VM_LOCK:-1}" = 0 ] || flock 9
install_module "$kdir" "$module"

acc=$(accel)
log "booting the $flavour kernel $(basename "$kdir") under $([ -n "$acc" ] && echo TCG || echo KVM), mode $mode"
env_args="OXE_FLAVOUR=$flavour OXE_TOP=$OXE_TOP OXE_RDMA_CORE=$rdma OXE_KDIR=$kdir OXE_RESULTS=$results OXE_DP_TESTS='${OXE_DP_TESTS:-}' OXE_BENCH_ROUNDS='${OXE_BENCH_ROUNDS:-}' OXE_BENCH_MEASURES='${OXE_BENCH_MEASURES:-}' OXE_SCRIPT='${OXE_SCRIPT:-}' OXE_AB_OLD='${OXE_AB_OLD:-}' OXE_TEST_BOOT_REPORT='${OXE_TEST_BOOT_REPORT:-}'"
# tsc=reliable: under TCG the guest's TSC and HPET both follow the host's
# clock, but a loaded host stalls a vCPU thread long enough for the clocksource
# watchdog to call the TSC unstable (it did, 52 minutes into a debug guest);
# the kernel then falls back to the HPET, an emulated MMIO read per clock read,
# and every suite after it crawls (ib_write_lat 2 ms).
#
# The root is the host's, over 9p, which virtme-ng mounts uncached: every
# exec and every library or Python module a guest process loads is read from
# the host again, request by request. The suites run thousands of processes
# (each `ip netns exec`, each client), and a loop of ibv_devices, ip and
# python3 ran 2.2 times as fast with the page cache on (cache=loose; the
# same flags otherwise, the last rootflags= counts). Nothing under the root
# changes while a guest runs: the module and the provider are installed
# before it boots, and results go to their own, uncached, mount.
boot_args=(--append "tsc=reliable" --append "rootflags=version=9p2000.L,trans=virtio,access=any,msize=524288,cache=loose")
# OXE_CPUS and OXE_MEM size the guest; OXE_RWDIR names more host directories
# it may write (the root is read-only).
vng_args=(--run "$kdir" $acc --cpus "${OXE_CPUS:-2}" --memory "${OXE_MEM:-4G}" --rwdir "$results"
    --cwd "$OXE_TOP" "${boot_args[@]}")
for d in ${OXE_RWDIR:-}; do vng_args+=(--rwdir "$d"); done
# rdma_rw's force_mr is read-only once ib_core (built in) is up: the boot sets it.
# That guest also tracks leaks (kernel-debug.fragment says why only that one).
[ "$mode" = force-mr ] && vng_args+=(--append "ib_core.force_mr=1" --append "kmemleak=on")

# `wire`: two guests, each with a virtio NIC, joined by QEMU into one virtual
# Ethernet (UDP datagrams between the two QEMUs on the host's loopback, so
# neither waits for the other to start): this one (oxe, the debug kernel)
# and a second on the plain kernel, where rxe runs, with its own results
# directory. The kernel ULPs, which only use the initial network namespace,
# then meet rxe on another host (suites/nvmeof_wire.sh).
wire_nic() { # local_port remote_port mac
    echo "-netdev dgram,id=wire,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2 -device virtio-net-pci,netdev=wire,mac=$3"
}
peer_pid= peer_kdir=
junit_mode=$mode
# Every other guest gets a spare virtio NIC whose frames go to a host port
# nobody listens on: a real NIC for the suites to move between namespaces
# (namespace deletion hands it back to the initial one, a veth it would
# destroy). Not a QEMU hub with nothing else on it: its transmit queue
# stalls, and the guest's netdev watchdog reports a timeout.
spare_nic="-netdev dgram,id=spare,local.type=inet,local.host=127.0.0.1,local.port=47111,remote.type=inet,remote.host=127.0.0.1,remote.port=47112 -device virtio-net-pci,netdev=spare,mac=52:54:00:0f:00:09"
if [ "$mode" = wire ]; then
    peer_kdir=$("$OXE_TOP/scripts/kernel.sh" dir plain)
    peer_module=$(module_dir plain)/oxe.ko
    [ -f "$peer_kdir/.oxe-built" ] || die "plain kernel not built (the rxe guest's): run 'make kernel-plain'"
    [ -f "$peer_module" ] || die "oxe.ko for the plain kernel not built: run 'make module-plain'"
    install_module "$peer_kdir" "$peer_module"
    peer_results=$results/wire-rxe
    peer_env=${env_args/"OXE_FLAVOUR=$flavour"/OXE_FLAVOUR=plain}
    peer_env=${peer_env/"OXE_KDIR=$kdir"/OXE_KDIR=$peer_kdir}
    peer_env=${peer_env/"OXE_RESULTS=$results"/OXE_RESULTS=$peer_results}
    mode=wire-oxe
    vng_args+=(--qemu-opts="$(wire_nic 47101 47102 52:54:00:0f:00:01)")
else
    vng_args+=(--qemu-opts="$spare_nic")
fi
if [ "$mode" = shell ]; then
    exec "$VENV/bin/vng" "${vng_args[@]}" --exec "env $env_args OXE_MODE=shell bash --rcfile $OXE_TOP/qemu-test/guest/shellrc -i"
fi

start_peer() {
    rm -rf "$peer_results" && mkdir -p "$peer_results"
    log "booting the rxe guest (plain kernel) on the other end of the wire"
    # Under timeout(1), which runs it in a process group of its own and,
    # when it times out or is told to stop, signals that whole group, QEMU
    # included; the console through a pipe, as below.
    timeout -k 30 3600 "$VENV/bin/vng" --run "$peer_kdir" $acc --cpus 1 --memory 2G "${boot_args[@]}" \
        --rwdir "$peer_results" --cwd "$OXE_TOP" --qemu-opts="$(wire_nic 47102 47101 52:54:00:0f:00:02)" \
        --exec "env $peer_env bash $OXE_TOP/qemu-test/guest/main.sh wire-rxe" \
        </dev/null > >(cat >"$peer_results/console.log") 2>&1 &
    peer_pid=$!
}

boot_guest() { # attempt
    rm -f "$results/.guest-status" "$results/guest-checks.txt"
    # The unittest runs of this guest are the ones newer than this (junit).
    touch "$results/.guest-start"
    [ -z "$peer_kdir" ] || start_peer
    # The guest writes its verdict to a file: qemu's exit status does not carry the
    # command's through virtme-ng in every version.
    # Through a pipe: QEMU reopens its stdout and would truncate a redirected file.
    "$VENV/bin/vng" "${vng_args[@]}" --exec "env $env_args OXE_BOOT_ATTEMPT=$1 bash $OXE_TOP/qemu-test/guest/main.sh $mode" </dev/null 2>&1 | cat ||
        true # the verdict is the guest's status file, read below
}

# A kernel report while the guest boots, before oxe.ko is loaded, is the
# kernel's and the emulator's, not oxe's: the guest then stops at once
# (main.sh, "boot report") and boots a second time, once. The first boot's
# kernel log is kept, and the retry is said in make test's closing lines
# (RESULTS/boot-retries.txt). A second report fails the run as any other.
boot_guest 1
if [ "$(cat "$results/.guest-status" 2>/dev/null || true)" = "boot report" ]; then
    mv "$results/logs/dmesg-boot.log" "$results/logs/dmesg-boot-first.log"
    echo "guest $junit_mode ($flavour kernel): a kernel report during boot, before oxe loaded;" \
        "booted again (the first boot's kernel log: build/results/logs/dmesg-boot-first.log)" |
        tee -a "$results/boot-retries.txt"
    if [ -n "$peer_pid" ]; then
        kill "$peer_pid" 2>/dev/null || true
        wait "$peer_pid" 2>/dev/null || true
    fi
    boot_guest 2
fi
# virtme-ng does not pass the guest's console through without a terminal: show
# each suite's log here, whole for a failed suite.
while read -r name verdict; do
    if [ "$verdict" = fail ]; then
        echo "=== suite $name FAILED; its log:"
        cat "$results/logs/suite-$name.log" 2>/dev/null
    else
        echo "=== suite $name passed (log: build/results/logs/suite-$name.log)"
        is_record_mode || cat "$results/logs/suite-$name.log" 2>/dev/null
    fi
done <"$results/guest-checks.txt" 2>/dev/null
is_record_mode && "$OXE_TOP/qemu-test/results.py" summary "$results/suites" "$results/summary.json"
[ -f "$results/guest-checks.txt" ] &&
    "$OXE_TOP/qemu-test/results.py" junit "$results" "$results/junit-$junit_mode.xml" "$results/.guest-start"
status=$(cat "$results/.guest-status" 2>/dev/null || echo "no status: the guest did not finish")
if [ -n "$peer_pid" ]; then
    # The rxe guest ends on its own (its waits time out); bounded here too.
    for _ in $(seq 300); do kill -0 "$peer_pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$peer_pid" 2>/dev/null; then
        echo "=== the rxe guest did not end: stopped"
        kill "$peer_pid" 2>/dev/null || true
    fi
    wait "$peer_pid" 2>/dev/null || true
    [ -f "$peer_results/guest-checks.txt" ] &&
        sed 's/^/rxe-guest:/' "$peer_results/guest-checks.txt" >>"$results/guest-checks.txt"
    peer_status=$(cat "$peer_results/.guest-status" 2>/dev/null || echo "no status: the guest did not finish")
    if [ "$peer_status" != ok ]; then
        echo "=== the rxe guest failed ($peer_status); its logs:"
        cat "$peer_results"/logs/suite-*.log 2>/dev/null || true
        [ "$status" = ok ] && status="the rxe guest: $peer_status"
    fi
fi
if [ "$mode" = exec ]; then
    rc=$(cat "$results/exec-status" 2>/dev/null || echo 125)
    if [ "$status" != ok ]; then
        log "guest exec: $status (build/results/logs/ has the kernel log)"
        [ "$rc" != 0 ] || rc=1
    fi
    exit "$rc"
fi
[ "$status" = ok ] || die "guest $mode failed: $status"
