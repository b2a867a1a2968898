# Suite: NVMe over Fabrics on oxe, the kernel's own RDMA storage protocol,
# which registers its memory with fast-registration work requests
# (crate::mr::fastreg). An nvmet-rdma target on TARGET exports a loop
# device (512-byte blocks) through configfs; nvme-rdma on HOST connects
# with nvme-cli; blk_roundtrip writes random data in every size from 512 B
# to 4 MiB with O_DIRECT and reads it back byte for byte. Topology and why
# both devices are oxe: kernel_ulp.sh.
#
# The host registers every data buffer (IB_WR_REG_MR) and asks the target
# to invalidate it with its response (SEND with Invalidate); the counters
# must show both. With ib_core.force_mr=1 on the kernel command line
# (`main.sh force-mr`) the target registers its buffers too, for its RDMA
# READs and WRITEs (rdma_rw: REG_MR, the transfer, LOCAL_INV).
NVMEOF_NQN=nqn.2026-11.dev.oxe:test
NVMEOF_HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-050403020100
NVMEOF_CFS=/sys/kernel/config/nvmet

nvmeof_target_up() { # backing_dev
    local s=$NVMEOF_CFS/subsystems/$NVMEOF_NQN p=$NVMEOF_CFS/ports/1
    mkdir "$s" && echo 1 >"$s/attr_allow_any_host" &&
        mkdir "$s/namespaces/1" && echo -n "$1" >"$s/namespaces/1/device_path" &&
        echo 1 >"$s/namespaces/1/enable" &&
        mkdir "$p" && echo rdma >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" &&
        echo $ULP_TARGET_IP >"$p/addr_traddr" && echo 4420 >"$p/addr_trsvcid" &&
        ln -s "$s" "$p/subsystems/$NVMEOF_NQN"
}

nvmeof_target_down() {
    local s=$NVMEOF_CFS/subsystems/$NVMEOF_NQN p=$NVMEOF_CFS/ports/1
    rm -f "$p/subsystems/$NVMEOF_NQN" 2>/dev/null
    rmdir "$p" 2>/dev/null
    [ -d "$s/namespaces/1" ] && echo 0 >"$s/namespaces/1/enable" && rmdir "$s/namespaces/1"
    rmdir "$s" 2>/dev/null
    true
}

# The block device of the connected controller, once it shows up.
nvmeof_wait_disk() {
    local i c
    for i in $(seq 1 60); do
        for c in /sys/class/nvme/nvme*; do
            [ -e "$c/subsysnqn" ] && [ "$(cat "$c/subsysnqn")" = $NVMEOF_NQN ] || continue
            ls "/dev/$(basename "$c")n1" 2>/dev/null && return 0
        done
        snooze 0.5
    done
    return 1
}

# Brings up TARGET (nvmet-rdma on vul0) and HOST (nvme-rdma on vul1) and
# connects; sets NVMEOF_DISK to the host's block device. Logs under TAG.
nvmeof_up() { # target host tag
    local log=$OXE_RESULTS/logs
    NVMEOF_DISK= NVMEOF_BACKING=
    mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
    modprobe nvmet && modprobe nvmet-rdma && modprobe nvme-rdma || {
        echo "cannot load the NVMe-oF modules"
        return 1
    }
    if ! ulp_pair_setup "$1" "$2"; then
        echo "cannot set up $1 on vul0 and $2 on vul1"
    elif ! NVMEOF_BACKING=$(ulp_backing 72); then
        echo "cannot make the backing loop device"
    elif ! nvmeof_target_up "$NVMEOF_BACKING"; then
        echo "cannot configure the nvmet target on $ULP_TARGET_IP"
    elif ! timeout 120 nvme connect -t rdma -a $ULP_TARGET_IP -s 4420 -w $ULP_HOST_IP \
        -n $NVMEOF_NQN --hostnqn=$NVMEOF_HOSTNQN >"$log/$3-connect.log" 2>&1 ||
        ! NVMEOF_DISK=$(nvmeof_wait_disk); then
        echo "nvme connect from $2 to $1 failed:"
        cat "$log/$3-connect.log"
    else
        echo "$2 (nvme-rdma) -> $1 (nvmet-rdma, $NVMEOF_BACKING): $NVMEOF_DISK"
        return 0
    fi
    return 1
}

# Undoes nvmeof_up (whatever part of it was done).
nvmeof_down() { # target
    local rc=0
    if [ -n "${NVMEOF_DISK:-}" ]; then
        timeout 60 nvme disconnect -n $NVMEOF_NQN >/dev/null || { echo "nvme disconnect failed"; rc=1; }
    fi
    # The target's device goes before its port: the listener then goes
    # with the device (DEVICE_REMOVAL), and removing the port from configfs
    # has no cm_id left to destroy. The other order has nvmet destroy the
    # listener with nvmet_config_sem held, while an I/O queue's connect,
    # run from a CM handler, takes that semaphore inside the cm_id's
    # handler mutex: lockdep reports the inversion (an upstream nvmet
    # issue, whatever the device).
    rdma link delete "$1" 2>/dev/null
    nvmeof_target_down
    [ -n "${NVMEOF_BACKING:-}" ] && ulp_backing_release "$NVMEOF_BACKING"
    ulp_pair_teardown
    modprobe -r nvme-rdma nvmet-rdma nvmet 2>/dev/null
    NVMEOF_DISK= NVMEOF_BACKING=
    return $rc
}

suite_nvmeof() { # target_dev host_dev [tag]
    local target=$1 host=$2 tag=${3:-nvmeof} rc=0 log=$OXE_RESULTS/logs t0=$SECONDS
    local verdicts=$log/$tag.verdicts.json name="$tag:$host->$target"
    : >"$verdicts.tmp"
    if nvmeof_up "$target" "$host" "$tag"; then
        blk_roundtrip "$NVMEOF_DISK" "$name" "$verdicts.tmp" || rc=1
        # What fast registration did, on each side.
        local side
        for side in "$host" "$target"; do
            fastreg_counters "$side"
        done
        nvmeof_check_counters "$host" "$target" "$tag" "$verdicts.tmp" || rc=1
        rdma -dd resource show mr dev "$host" >"$log/$tag-mr.txt" 2>&1
        grep -q 'drv_fastreg \(free\|valid\)' "$log/$tag-mr.txt" ||
            { echo "rdma -dd resource show mr lists no fast-registration MR of $host"; rc=1; }
    else
        rc=1
    fi
    nvmeof_down "$target" || rc=1
    # The devices went (rdma link delete) with their MRs, QPs and the
    # module: nothing may be left behind.
    lsmod | grep -q '^oxe ' && { echo "oxe still loaded after rdma_reset"; rc=1; }
    verdicts_close "$verdicts.tmp" "$verdicts"
    record "$tag" "$host-$target" "$(grep -c '"' "$verdicts")" "$(grep -c '"ok"' "$verdicts")" \
        "$(grep -c '"FAIL"' "$verdicts")" 0 0 $((SECONDS - t0))
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/$tag.txt" "$verdicts" || rc=1
    return $rc
}

# The host registered and the target invalidated remotely; with force_mr,
# the target registered and invalidated locally as well.
nvmeof_check_counters() { # host target tag verdicts_tmp
    local host=$1 target=$2 tag=$3 out=$4 rc=0 want v
    want=("$host:mr_fastreg" "$host:mr_remote_inv")
    [ "$tag" = nvmeof-force-mr ] && want+=("$target:mr_fastreg" "$target:mr_local_inv")
    for w in "${want[@]}"; do
        v=FAIL
        [ "$(hw_counter "${w%%:*}" "${w#*:}")" -gt 0 ] && v=ok
        [ $v = ok ] || { echo "  counter ${w#*:} of ${w%%:*} stayed 0"; rc=1; }
        printf '"%s:counter:%s": "%s",\n' "$tag" "${w#*:}@${w%%:*}" "$v" >>"$out"
    done
    return $rc
}
