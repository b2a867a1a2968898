# Suite: NVMe over Fabrics between oxe and rxe, in both roles, byte for
# byte. The kernel's RDMA ULPs open their connections in the initial network
# namespace only, and oxe and rxe each bind UDP port 4791 in a namespace, so
# the two cannot share one kernel here (kernel_ulp.sh): this suite runs in
# two guests on one virtual wire (`qemu-test/vm.sh wire`), the oxe guest on
# the debug kernel and the rxe guest on the plain one, each with a virtio NIC
# joined to the other's by QEMU (UDP datagrams between the two QEMUs on the
# host). Two hosts on one Ethernet: the topology the ULPs are deployed in.
#
# Phase 1: nvmet-rdma on oxe6 (oxe guest), nvme-rdma on rxe7 (rxe guest).
# Phase 2: nvmet-rdma on rxe6 (rxe guest), nvme-rdma on oxe7 (oxe guest).
# The guests take turns through wire_sync.py (TCP over the same wire); the
# host end of each phase sends its verdicts to the target end with its
# "done" word, and the oxe guest holds the whole list to the ratchet
# (expected/nvmeof-wire.txt). Each guest's own dmesg is checked after it.
WIRE_IP_oxe=10.15.0.1
WIRE_IP_rxe=10.15.0.2
WIRE_PORT_oxe=7001
WIRE_PORT_rxe=7002
# Seconds either guest waits for the other's next step: the debug guest
# boots and moves about three times slower than the plain one.
WIRE_WAIT=900

wire_sync() { /usr/bin/python3 "$GUEST/wire_sync.py" "$@"; }

# The guest's NIC on the wire: the one netdev backed by a (virtio) device.
wire_netdev() {
    local d
    for d in /sys/class/net/*; do
        [ -e "$d/device" ] && { basename "$d"; return 0; }
    done
    return 1
}

# Brings this guest's end of the wire up as ME and waits until the other end
# answers (its guest may still be booting); sets WIRE_DEV.
wire_up() { # me peer
    local i
    WIRE_DEV=$(wire_netdev) || { echo "no NIC on the wire (vm.sh wire gives each guest one)"; return 1; }
    ip link set lo up && ip addr add "$(wire_ip "$1")/24" dev "$WIRE_DEV" &&
        ip link set "$WIRE_DEV" up || return 1
    for i in $(seq "$WIRE_WAIT"); do
        ping -c 1 -W 1 "$(wire_ip "$2")" >/dev/null 2>&1 && return 0
    done
    echo "the $2 guest never answered on $WIRE_DEV"
    return 1
}

wire_ip() { local v=WIRE_IP_$1; echo "${!v}"; }
wire_port() { local v=WIRE_PORT_$1; echo "${!v}"; }

# Tells the other guest LINE (a word, then what it reports).
wire_tell() { # peer line [timeout]
    wire_sync tell "$(wire_ip "$1")" "$(wire_port "$1")" "$2" "${3:-$WIRE_WAIT}"
}

# Waits for the other guest's WORD; prints what came with it.
wire_wait() { # me word
    wire_sync wait "$(wire_port "$1")" "$2" "$WIRE_WAIT"
}

# nvmet-rdma on DEV (created on the wire's NIC) exporting a loop device.
wire_target_up() { # dev ip
    local ULP_TARGET_IP=$2
    NVMEOF_BACKING=
    mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
    modprobe nvmet && modprobe nvmet-rdma || { echo "cannot load nvmet-rdma"; return 1; }
    add_link "$1" "$(link_type "$1")" "$WIRE_DEV" && gid_index "$1" "$2" >/dev/null ||
        { echo "cannot create $1 on $WIRE_DEV"; return 1; }
    NVMEOF_BACKING=$(ulp_backing 72) || { echo "cannot make the backing loop device"; return 1; }
    nvmeof_target_up "$NVMEOF_BACKING" || { echo "cannot configure the nvmet target on $2"; return 1; }
    echo "nvmet-rdma on $1 ($2) exports $NVMEOF_BACKING"
}

# The device goes before the port, as in nvmeof_down (an nvmet lock order).
wire_target_down() { # dev
    rdma link delete "$1" 2>/dev/null
    nvmeof_target_down
    [ -n "${NVMEOF_BACKING:-}" ] && ulp_backing_release "$NVMEOF_BACKING"
    modprobe -r nvmet-rdma nvmet 2>/dev/null
    rdma_reset
}

# nvme-rdma on DEV connects to TARGET_IP from MY_IP, moves every size of
# ULP_SIZES byte for byte, and disconnects; verdicts to VERDICTS.
wire_host_run() { # dev my_ip target_ip name verdicts
    local log=$OXE_RESULTS/logs rc=0 disk
    modprobe nvme-rdma || { echo "cannot load nvme-rdma"; return 1; }
    add_link "$1" "$(link_type "$1")" "$WIRE_DEV" && gid_index "$1" "$2" >/dev/null ||
        { echo "cannot create $1 on $WIRE_DEV"; return 1; }
    if timeout 120 nvme connect -t rdma -a "$3" -s 4420 -w "$2" -n $NVMEOF_NQN \
        --hostnqn=$NVMEOF_HOSTNQN >"$log/$4-connect.log" 2>&1 && disk=$(nvmeof_wait_disk); then
        echo "$1 (nvme-rdma, $2) -> $3 (nvmet-rdma): $disk"
        blk_roundtrip "$disk" "$4" "$5" || rc=1
        # oxe as the host: it registered every buffer, and rxe's target
        # invalidated each with its response (rxe has no such counters).
        if [ "$(link_type "$1")" = oxe ]; then
            fastreg_counters "$1"
            nvmeof_check_counters "$1" "$3" nvmeof-wire "$5" || rc=1
        fi
        timeout 60 nvme disconnect -n $NVMEOF_NQN >/dev/null || { echo "nvme disconnect failed"; rc=1; }
    else
        echo "nvme connect from $1 to $3 failed:"
        cat "$log/$4-connect.log"
        rc=1
    fi
    rdma link delete "$1" 2>/dev/null
    modprobe -r nvme-rdma 2>/dev/null
    rdma_reset
    return $rc
}

# One phase on this guest: the target end (waits for the host's verdicts
# and adds them to VERDICTS) or the host end (sends its verdicts). Returns 0,
# 1 for a phase that failed with the two guests still in step, or 2 when
# they are not (a setup failed, a word did not come): the guest that fails
# a step tells the other `abort`, and neither goes on to the next phase.
wire_phase() { # me peer role(target|host) phase verdicts
    local me=$1 peer=$2 role=$3 n=$4 out=$5 rc=0 got tmp
    if [ "$role" = target ]; then
        if ! wire_target_up "${me}6" "$(wire_ip "$me")"; then
            wire_tell "$peer" abort 120
            wire_target_down "${me}6"
            return 2
        fi
        if ! wire_tell "$peer" "target$n"; then
            wire_target_down "${me}6"
            return 2
        fi
        # The host's verdicts come with its word, one line of them joined
        # by '|': 'host1 "name": "ok",|"name": "FAIL",'.
        if ! got=$(wire_wait "$me" "host$n"); then
            wire_target_down "${me}6"
            return 2
        fi
        [ -n "$got" ] || { echo "  the host sent no verdicts"; rc=1; }
        [[ $got == *'"FAIL"'* ]] && { echo "  the host's transfers failed: $got"; rc=1; }
        printf '%s\n' "$got" | tr '|' '\n' | grep . >>"$out"
        wire_target_down "${me}6"
    else
        wire_wait "$me" "target$n" >/dev/null || return 2
        tmp=$(mktemp)
        wire_host_run "${me}7" "$(wire_ip "$me")" "$(wire_ip "$peer")" \
            "nvmeof-wire:${me}7->${peer}6" "$tmp" || rc=1
        # Sent even when the transfers failed: the target waits for it.
        wire_tell "$peer" "host$n $(paste -sd'|' "$tmp")" || rc=2
        cat "$tmp" >>"$out"
        rm -f "$tmp"
    fi
    return $rc
}

suite_nvmeof_wire() { # me(oxe|rxe)
    local me=$1 peer rc=0 r t0=$SECONDS log=$OXE_RESULTS/logs role1 role2
    local verdicts=$log/nvmeof-wire.verdicts.json
    [ "$me" = oxe ] && peer=rxe || peer=oxe
    # Phase 1: oxe is the target; phase 2: oxe is the host.
    [ "$me" = oxe ] && role1=target role2=host || role1=host role2=target
    : >"$verdicts.tmp"
    rdma_reset
    if ! wire_up "$me" "$peer"; then
        wire_tell "$peer" abort 120
        rc=1
    else
        echo "$me guest on $WIRE_DEV ($(wire_ip "$me")), the $peer guest answers"
        wire_phase "$me" "$peer" $role1 1 "$verdicts.tmp"
        r=$?
        [ $r = 0 ] || rc=1
        if [ $r != 2 ]; then
            wire_phase "$me" "$peer" $role2 2 "$verdicts.tmp" || rc=1
        fi
        ip addr flush dev "$WIRE_DEV"
    fi
    lsmod | grep -q '^oxe ' && { echo "oxe still loaded after rdma_reset"; rc=1; }
    verdicts_close "$verdicts.tmp" "$verdicts"
    record nvmeof-wire "$me" "$(grep -c '"' "$verdicts")" "$(grep -c '"ok"' "$verdicts")" \
        "$(grep -c '"FAIL"' "$verdicts")" 0 0 $((SECONDS - t0))
    # Each guest holds both phases' verdicts (its own as host, the other's
    # as target); the oxe guest's run holds them to the ratchet.
    if [ "$me" = oxe ]; then
        "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/nvmeof-wire.txt" "$verdicts" || rc=1
    fi
    return $rc
}
