# Indirect keys (oxedv_create_mkey, configured through the send queue), from a C
# program linked against the provider (qemu-test/clients/mkey_qp.c): layouts,
# bounds, rights, nesting, invalidation and atomics, over two RC QPs of one
# device; and the layout as debugfs and `rdma -dd resource show mr` show it.
suite_mkey() { # device gid-index
    local dev=$1 gid=$2
    "$OXE_TOP/build/mkey_qp" "$dev" "$gid"
}

# RDMA WRITEs from rxe, the wire peer, through an oxe indirect key: the server
# (build/rc_xfer_mkey, oxe on veth0) lays a key over its buffer with the 32
# chunks reversed and gives the peer (rxe in netns peer) only the key's rkey
# and address 0; the peer writes 8 MiB of a pseudo-random pattern in 256 KiB
# WRITEs and both sides compare FNV-1a 64 hashes of the data as the key orders it.
suite_mkey_wire() { # oxe-dev peer-dev
    local a=$1 b=$2 xfer=$OXE_TOP/build/rc_xfer_mkey rc=1 crc src i spid
    local log=$OXE_RESULTS/logs/mkey-wire-$a-$b
    [ -x "$xfer" ] || { echo "$xfer missing: build it with 'make guest-tools'"; return 1; }
    pair_setup "$a" "$b" || return 1
    timeout 300 "$xfer" server 10.11.0.1 -s 8M -k "$GID_A" -w 200 >"$log.server.log" 2>&1 &
    spid=$!
    for i in $(seq 150); do
        [[ $(cat "$log.server.log") == *listening* ]] && break
        kill -0 "$spid" 2>/dev/null || break
        snooze 0.2
    done
    ip netns exec peer timeout 300 "$OXE_TOP/build/rc_xfer" client 10.11.0.1 -s 8M -c 256K -d 4 \
        -r 11 -w 200 >"$log.client.log" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    echo "--- server ($a, exit $src)"
    cat "$log.server.log"
    echo "--- client ($b, exit $crc)"
    cat "$log.client.log"
    [ $crc = 0 ] && [ $src = 0 ] && grep -q "indirect key" "$log.server.log" && rc=0
    rdma_reset
    return $rc
}

# An invalidation stops a WRITE in flight through an indirect key, even when
# the key is configured again, under the same key, before the WRITE's next
# packet (qemu-test/clients/mkey_inflight.c). The peer is rxe, which sends
# each packet on its own, on a link shaped to 4 kbit/s: its two packets of
# 1 KiB arrive about two seconds apart.
suite_mkey_inflight() { # oxe-dev peer-dev
    local a=$1 b=$2 rc
    [ -x "$OXE_TOP/build/mkey_inflight" ] || { echo "build/mkey_inflight missing: 'make guest-tools'"; return 1; }
    pair_setup "$a" "$b" || return 1
    ip netns exec peer tc qdisc add dev veth1 root netem rate 4kbit || return 1
    timeout 120 "$OXE_TOP/build/mkey_inflight" "$a" "$GID_A" "$b" "$GID_B"
    rc=$?
    ip netns exec peer tc qdisc del dev veth1 root
    rdma_reset || rc=1
    return $rc
}
