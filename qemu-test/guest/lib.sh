# Guest-side helpers for the suites. Sourced by main.sh inside the virtme-ng guest,
# which sees the host's root fs read-only; only $OXE_RESULTS is written back.
set -uo pipefail

export PATH=$OXE_RDMA_CORE/build/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# oxe's rdma-core (v59, or v65 in the stock65 guest; in-place build) serves every
# verbs client here, Debian's perftest and rdmacm-utils included: Debian's own
# libibverbs is 44 and knows neither oxe nor ODP.
export LD_LIBRARY_PATH=$OXE_RDMA_CORE/build/lib
export PYTHONDONTWRITEBYTECODE=1
# The provider this checkout built serves this guest: `make provider` installs
# into the rdma-core tree, which every checkout on the machine shares and may
# reinstall at any time, mid-run included. A bind mount (guest-only) pins ours.
# Its name carries the tree's provider ABI; the build for v65 has a cargo
# target directory of its own (Makefile, provider-65).
pabi=$(sed -n 's/^#define IBVERBS_PABI_VERSION //p' "$OXE_RDMA_CORE/build/include/config.h")
own_provider=$OXE_TOP/provider/target/release/liboxe_rdmav59.so
[ "$pabi" = 59 ] || own_provider=$OXE_TOP/provider/target/rdma-core-$pabi/release/liboxe_rdmav59.so
if [ -f "$own_provider" ] && ! mountpoint -q "$OXE_RDMA_CORE/build/lib/liboxe-rdmav$pabi.so"; then
    mount --bind "$own_provider" "$OXE_RDMA_CORE/build/lib/liboxe-rdmav$pabi.so"
fi
# Only the providers of the devices a guest has (oxe, rxe): libibverbs dlopens
# every provider its config directory names (18 in v59) in every verbs process,
# and on a debug guest that was half a second of each ibv_devinfo, perftest or
# pingpong start (1.16 s against 0.6 s, measured). Guest-only, like the above.
ibv_conf=$OXE_RDMA_CORE/build/etc/libibverbs.d
if [ -d "$ibv_conf" ] && ! mountpoint -q "$ibv_conf"; then
    mkdir -p /tmp/oxe-libibverbs.d &&
        cp "$ibv_conf"/oxe.driver "$ibv_conf"/rxe.driver /tmp/oxe-libibverbs.d/ &&
        mount --bind /tmp/oxe-libibverbs.d "$ibv_conf"
fi
GUEST=$OXE_TOP/qemu-test/guest
SUITE_DIR=$OXE_RESULTS/suites
mkdir -p "$SUITE_DIR" "$OXE_RESULTS/logs"
FAILED=()

say() { printf '\n=== %s\n' "$*"; }

# sleep without a process: a wait on a pipe nobody writes to. An exec costs a
# debug guest a quarter of a second, and the suites' polling loops (for a
# listener, a GID, a process's end) slept hundreds of times a suite.
exec {SNOOZE_FD}<> <(:)
snooze() { # seconds
    read -rt "$1" -u "$SNOOZE_FD" || true
}

source "$GUEST/splats.sh"

# Saves and clears the kernel log; fails SUITE if it holds a splat.
dmesg_check() {
    local suite=$1 log=$OXE_RESULTS/logs/dmesg-$1.log
    dmesg >"$log"
    dmesg -C
    if grep -Eq "$SPLAT_RE" "$log"; then
        say "dmesg after $suite has kernel splats:"
        grep -E -A25 "$SPLAT_RE" "$log" | head -n 80
        return 1
    fi
}

# Records one suite's counts for summary.json.
record() { # suite device ran ok failures errors skipped seconds
    printf '{"suite":"%s","device":"%s","ran":%d,"ok":%d,"failures":%d,"errors":%d,"skipped":%d,"seconds":%d}\n' \
        "$@" >"$SUITE_DIR/$1-$2.json"
}

# Runs one suite function; a suite fails on a non-zero status or on a dirty dmesg.
run_suite() { # name function args...
    local name=$1
    shift
    say "suite $name"
    local rc t0=$SECONDS
    # Also into a log file: the host sees those while the guest still runs.
    "$@" 2>&1 | tee "$OXE_RESULTS/logs/suite-$name.log"
    rc=${PIPESTATUS[0]}
    dmesg_check "$name" || rc=1
    # For make test's closing table of where the time went.
    printf '  suite %s (%s kernel)\t%d\n' "$name" "${OXE_FLAVOUR:-?}" $((SECONDS - t0)) >>"$OXE_RESULTS/timings.txt"
    echo "$name $((SECONDS - t0))" >>"$OXE_RESULTS/guest-times.txt"
    if [ $rc != 0 ]; then
        FAILED+=("$name")
        echo "$name fail" >>"$OXE_RESULTS/guest-checks.txt"
        say "suite $name FAILED"
    else
        echo "$name pass" >>"$OXE_RESULTS/guest-checks.txt"
        say "suite $name passed"
    fi
}

# Runs one of oxe's own unittest modules (qemu-test/guest/MODULE.py) on DEV
# and holds it to qemu-test/expected/NAME.txt: the runner's own status, every
# listed test passing, and no test skipped all count.
unittest_suite() { # name device module timeout
    local name=$1 dev=$2 module=$3 secs=$4 rc t0=$SECONDS
    local log=$OXE_RESULTS/logs/$1-$2.log counts
    rm -f "${log%.log}.runner.json"
    (cd "$GUEST" && OXE_DEV=$dev PYTHONPATH=$OXE_RDMA_CORE/build/python:$GUEST \
        OXE_VERDICTS=${log%.log}.runner.json \
        timeout "$secs" /usr/bin/python3 "$GUEST/verdicts.py" "$module") >"$log" 2>&1
    rc=$?
    cat "$log"
    [ $rc = 0 ] || echo "$name: the unittest runner exited with status $rc"
    counts=$("$OXE_TOP/qemu-test/results.py" unittest "$log" "$name" "$dev" $((SECONDS - t0))) || return 1
    echo "$counts" >"$SUITE_DIR/$name-$dev.json"
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/$name.txt" "${log%.log}.verdicts.json" || rc=1
    grep -q '"skipped": 0' <<<"$counts" || { echo "$name: no test may skip"; rc=1; }
    return $rc
}

# Two hosts: veth0 stays here, veth1 lives in netns "peer". IPv4 and IPv6 on both,
# so each RoCE v2 device gets v4-mapped and v6 GIDs.
net_setup() {
    ip link set lo up
    ip link add veth0 type veth peer name veth1
    ip netns add peer
    ip link set veth1 netns peer
    ip addr add 10.11.0.1/24 dev veth0
    ip addr add fd11::1/64 dev veth0 nodad
    ip link set veth0 up
    ip -n peer link set lo up
    ip -n peer addr add 10.11.0.2/24 dev veth1
    ip -n peer addr add fd11::2/64 dev veth1 nodad
    ip -n peer link set veth1 up
}

# The link type of a device name: rxe0 -> rxe, oxe1 -> oxe.
link_type() { echo "${1%%[0-9]*}"; }

# Creates RDMA device NAME of TYPE on NETDEV, in netns NS when given: a device
# binds UDP 4791 in its netdev's namespace, and rxe and oxe cannot share one.
# ib_core's shared mode still shows every device in every namespace.
# The ib_core modules come from the kernel build (virtme-ng exposes its modules);
# oxe loads through its rdma-link-oxe alias, rxe is loaded here.
add_link() { # name type netdev [netns]
    local name=$1 type=$2 dev=$3 ns=${4:-}
    [ "$type" != rxe ] || modprobe rdma_rxe || return 1
    if [ -n "$ns" ]; then
        ip netns exec "$ns" rdma link add "$name" type "$type" netdev "$dev"
    else
        rdma link add "$name" type "$type" netdev "$dev"
    fi
}

load_rxe() { # device netdev [netns]
    add_link "$1" rxe "$2" "${3:-}"
}

# Deletes every RDMA link (whatever its namespace) and unloads rxe and oxe, so the
# next suite can bind UDP 4791 with either type anywhere. Fails if oxe stays
# loaded: a module that cannot be removed holds something it should not.
rdma_reset() {
    local l
    for l in $(rdma link show 2>/dev/null | awk '$1 == "link" { sub("/.*", "", $2); print $2 }'); do
        rdma link delete "$l" || ip netns exec peer rdma link delete "$l" || true
    done
    modprobe -r rdma_rxe 2>/dev/null
    if grep -q '^oxe ' /proc/modules && ! modprobe -r oxe; then
        echo "rdma_reset: oxe does not unload: $(grep '^oxe ' /proc/modules)"
        return 1
    fi
}

# Whatever the kernel holds that nothing references any more: one kmemleak
# scan after the suites (the boot's own objects were set aside by
# kmemleak_forget_boot). Fails on any reported object. A guest not booted
# with kmemleak=on (vm.sh: all but force-mr) tracks nothing and passes.
KMEMLEAK=/sys/kernel/debug/kmemleak
kmemleak_forget_boot() {
    [ -e $KMEMLEAK ] && grep -qw 'kmemleak=on' /proc/cmdline || return 0
    echo scan >$KMEMLEAK && echo clear >$KMEMLEAK
}
kmemleak_check() {
    # (Present but off when the kernel was not booted with kmemleak=on:
    # then writing to it fails.)
    if [ ! -e $KMEMLEAK ] || ! grep -qw 'kmemleak=on' /proc/cmdline; then
        echo "kmemleak: not tracking in this guest"
        return 0
    fi
    # An object is reported once it has gone unreferenced through a scan
    # and is older than kmemleak's minimum age (5 s): scan, wait, scan.
    echo scan >$KMEMLEAK || return 1
    snooze 6
    echo scan >$KMEMLEAK || return 1
    local leaks
    leaks=$(cat $KMEMLEAK)
    if [ -n "$leaks" ]; then
        echo "kmemleak: $(grep -c '^unreferenced object' <<<"$leaks") unreferenced object(s):"
        head -n 200 <<<"$leaks"
        return 1
    fi
    echo "kmemleak: no unreferenced objects"
}

# Creates the two ends of a pair: A on veth0 here (10.11.0.1), B on veth1 in
# netns peer (10.11.0.2); each one's type comes from its name. Waits for their
# RoCE v2 IPv4 GIDs (rdma_cm binds through them) and sets GID_A and GID_B to
# their indices.
pair_setup() { # devA devB
    rdma_reset || return 1
    pair_links "$@"
}

# pair_setup without the reset: for a caller that loaded the module itself.
pair_links() { # devA devB
    add_link "$1" "$(link_type "$1")" veth0 || { echo "cannot create $1 on veth0"; return 1; }
    add_link "$2" "$(link_type "$2")" veth1 peer || { echo "cannot create $2 on veth1 (netns peer)"; return 1; }
    GID_A=$(gid_index "$1" 10.11.0.1) && GID_B=$(gid_index "$2" 10.11.0.2)
}

# Index of DEV's RoCE v2 GID for IPv4 address IP, waiting for it to appear
# (the GID table follows the netdev's addresses asynchronously).
gid_index() { # dev ip
    # 0000:0000:0000:0000:0000:ffff:0a0b:0001 for 10.11.0.1
    gid_index_of "$1" "0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${2//./ })"
}

# Index of DEV's RoCE v2 GID equal to GID (as sysfs writes it), waiting for it.
gid_index_of() { # dev gid
    local i
    for i in $(seq 50); do
        awk -v g="$2" '$2 == g && $3 == "RoCE" && $4 == "v2" { print $1; f = 1; exit } END { exit !f }' \
            < <(gid_table "$1") && return 0
        snooze 0.2
    done
    echo "no RoCE v2 GID $2 on $1" >&2
    return 1
}

# Runs CMD on side a (this namespace) or b (netns peer).
on_side() { # a|b cmd...
    local side=$1
    shift
    if [ "$side" = b ]; then ip netns exec peer "$@"; else "$@"; fi
}

# The populated GIDs of DEV port 1 as "INDEX GID TYPE" (addresses fill the
# table from the start: the first 16 entries are plenty here, and reading all
# 1024 sysfs files is slow under TCG).
gid_table() {
    local p=/sys/class/infiniband/$1/ports/1 i t
    for i in $(seq 0 15); do
        t=$(cat "$p/gid_attrs/types/$i" 2>/dev/null) || continue
        echo "$i $(cat "$p/gids/$i") $t"
    done
}

# Starts hold_mr.py on DEV in the background (it registers 1 MiB and waits for
# stdin to close); sets HOLD (the coproc fds) and HOLD_PID (python itself).
hold_mr() { # dev
    coproc HOLD { PYTHONPATH=$OXE_RDMA_CORE/build/python exec /usr/bin/python3 "$GUEST/hold_mr.py" "$1" 2>&1; }
    local line
    read -r -t 60 line <&"${HOLD[0]}" || { echo "hold_mr.py did not start"; return 1; }
    echo "holder: $line"
    [[ $line == ready* ]]
}

# Lets the holder deregister and exit.
release_mr() {
    eval "exec ${HOLD[1]}>&-"
    wait "$HOLD_PID" 2>/dev/null
    true
}

