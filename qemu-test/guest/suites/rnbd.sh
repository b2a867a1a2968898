# Suite: RNBD over RTRS on oxe, the second kernel storage protocol: the
# rnbd-server on TARGET exports a loop device, the rnbd-client on HOST maps
# it as /dev/rnbd*, and blk_roundtrip checks every size from 512 B to 4 MiB
# byte for byte. RTRS registers memory with fast registration on both
# sides: the client per I/O, the server once per buffer chunk, registered
# again after every local invalidate without a new mapping
# (always_invalidate). Topology: kernel_ulp.sh.
RNBD_CTL=/sys/devices/virtual/rnbd-client/ctl

# The rnbd block device the session maps, once it shows up.
rnbd_wait_disk() {
    local i d
    for i in $(seq 1 60); do
        for d in /sys/block/rnbd*; do
            [ -e "$d/rnbd/session" ] && [ "$(cat "$d/rnbd/session")" = oxe ] && echo "/dev/$(basename "$d")" && return 0
        done
        snooze 0.5
    done
    return 1
}

suite_rnbd() { # target_dev host_dev
    local target=$1 host=$2 tag=rnbd rc=0 backing= disk= log=$OXE_RESULTS/logs t0=$SECONDS
    local verdicts=$log/$tag.verdicts.json name="$tag:$host->$target" c side
    : >"$verdicts.tmp"
    # A server session's buffers are sess_queue_depth chunks of
    # max_chunk_size, all allocated and registered at connect: 64 MiB by
    # default, more than a small guest wants to spend on one test.
    if ! modprobe rtrs-server sess_queue_depth=64 || ! modprobe rnbd-server || ! modprobe rnbd-client; then
        echo "cannot load the RNBD modules"
        rc=1
    elif ! ulp_pair_setup "$target" "$host"; then
        echo "cannot set up $target on vul0 and $host on vul1"
        rc=1
    elif ! backing=$(ulp_backing 72); then
        echo "cannot make the backing loop device"
        rc=1
    elif ! echo "sessname=oxe path=ip:$ULP_HOST_IP@ip:$ULP_TARGET_IP device_path=$backing" \
        >$RNBD_CTL/map_device || ! disk=$(rnbd_wait_disk); then
        echo "rnbd-client on $host could not map $backing from $target:"
        dmesg | grep -E 'rtrs|rnbd' | tail -n 8
        rc=1
    else
        echo "$host (rnbd-client) -> $target (rnbd-server, $backing): $disk"
        blk_roundtrip "$disk" "$name" "$verdicts.tmp" || rc=1
        for side in "$host" "$target"; do
            fastreg_counters "$side"
            local v=FAIL
            [ "$(hw_counter "$side" mr_fastreg)" -gt 0 ] && v=ok
            [ $v = ok ] || { echo "  counter mr_fastreg of $side stayed 0"; rc=1; }
            printf '"%s:counter:mr_fastreg@%s": "%s",\n' "$tag" "$side" "$v" >>"$verdicts.tmp"
        done
        echo normal >"/sys/block/$(basename "$disk")/rnbd/unmap_device" || { echo "unmap failed"; rc=1; }
    fi
    ulp_pair_teardown
    [ -n "$backing" ] && ulp_backing_release "$backing"
    modprobe -r rnbd-client rnbd-server rtrs-server 2>/dev/null
    lsmod | grep -q '^oxe ' && { echo "oxe still loaded after rdma_reset"; rc=1; }
    verdicts_close "$verdicts.tmp" "$verdicts"
    record "$tag" "$host-$target" "$(grep -c '"' "$verdicts")" "$(grep -c '"ok"' "$verdicts")" \
        "$(grep -c '"FAIL"' "$verdicts")" 0 0 $((SECONDS - t0))
    "$OXE_TOP/qemu-test/results.py" ratchet "$OXE_TOP/qemu-test/expected/$tag.txt" "$verdicts" || rc=1
    return $rc
}
