# Suite: the data path in its simplest forms, on one device (loopback):
# rdma-core's pingpong examples, rping and mckey, and the port counters they move.
# Each check names its tool and direction; the suite fails on the first miss.

# The GID index of DEV's IPv4 (v4-mapped) RoCE v2 entry.
ipv4_gid() { # dev
    gid_table "$1" | awk '$2 ~ /^0000:0000:0000:0000:0000:ffff:/ { print $1; exit }'
}

# Runs SERVER_CMD (in the background) and CLIENT_CMD; both must exit 0.
pair() { # name timeout "server cmd" "client cmd" [tcp port the server listens on]
    local name=$1 t=$2 s=$3 c=$4 port=${5:-} spid rc
    timeout "$t" bash -c "$s" >"/tmp/$name.server" 2>&1 &
    spid=$!
    # The pingpongs exchange addresses over TCP: wait for the port. rping
    # listens through RDMA-CM, which ss cannot see: give it a moment.
    local i
    if [ -n "$port" ]; then
        for i in $(seq 60); do
            [[ $(ss -ltn 2>/dev/null) == *:$port* ]] && break
            snooze 0.5
        done
    else
        sleep 3
    fi
    timeout "$t" bash -c "$c" >"/tmp/$name.client" 2>&1
    rc=$?
    wait $spid
    local src=$?
    if [ $rc = 0 ] && [ $src = 0 ]; then
        echo "ok   $name: $(grep -m1 -E 'bytes in|Mbit' "/tmp/$name.client")"
        return 0
    fi
    echo "FAIL $name (client $rc, server $src)"
    sed 's/^/  client| /' "/tmp/$name.client" | head -n 30
    sed 's/^/  server| /' "/tmp/$name.server" | head -n 30
    dmesg | tail -n 15 | sed 's/^/  dmesg| /'
    return 1
}

# The port's PerfMgmt counters (sysfs ports/1/counters, from the driver's
# process_mad): data in 4-byte words, sent and received, then packets.
port_traffic() { # dev
    local c=/sys/class/infiniband/$1/ports/1/counters
    echo "$(cat $c/port_xmit_data) $(cat $c/port_rcv_data) $(cat $c/port_xmit_packets) $(cat $c/port_rcv_packets)"
}

# After traffic between two ends of one device, what the port sent it also
# received: the counters moved, and by the same amount each way.
check_loopback_traffic() { # dev "counters before"
    local xd rd xp rp xd0 rd0 xp0 rp0
    sleep 1 # the last acknowledgements may still be on their way
    read -r xd0 rd0 xp0 rp0 <<<"$2"
    read -r xd rd xp rp <<<"$(port_traffic "$1")"
    xd=$((xd - xd0)) rd=$((rd - rd0)) xp=$((xp - xp0)) rp=$((rp - rp0))
    if [ "$xd" -gt 0 ] && [ "$xd" = "$rd" ] && [ "$xp" -gt 0 ] && [ "$xp" = "$rp" ]; then
        echo "ok   port_counters_loopback: sent = received = $xd words, $xp packets"
        return 0
    fi
    echo "FAIL port_counters_loopback: sent $xd words $xp packets, received $rd words $rp packets"
    return 1
}

suite_datapath_smoke() { # dev
    local dev=$1 g fails=0
    g=$(ipv4_gid "$dev")
    [ -n "$g" ] || { echo "no IPv4 GID on $dev"; gid_table "$dev"; return 1; }
    pair rc_pingpong_loopback 120 "ibv_rc_pingpong -d $dev -g $g -n 20" \
        "ibv_rc_pingpong -d $dev -g $g -n 20 127.0.0.1" 18515 || fails=$((fails + 1))
    pair ud_pingpong_loopback 120 "ibv_ud_pingpong -d $dev -g $g -n 20" \
        "ibv_ud_pingpong -d $dev -g $g -n 20 127.0.0.1" 18515 || fails=$((fails + 1))
    pair srq_pingpong_loopback 120 "ibv_srq_pingpong -d $dev -g $g -n 20" \
        "ibv_srq_pingpong -d $dev -g $g -n 20 127.0.0.1" 18515 || fails=$((fails + 1))
    # -o: the buffers are ODP MRs, faulted in as the messages touch them.
    pair rc_pingpong_odp_loopback 120 "ibv_rc_pingpong -d $dev -g $g -n 20 -s 65536 -o" \
        "ibv_rc_pingpong -d $dev -g $g -n 20 -s 65536 -o 127.0.0.1" 18515 || fails=$((fails + 1))
    pair rc_pingpong_big_loopback 120 "ibv_rc_pingpong -d $dev -g $g -n 10 -s 65536" \
        "ibv_rc_pingpong -d $dev -g $g -n 10 -s 65536 127.0.0.1" 18515 || fails=$((fails + 1))
    local before
    before=$(port_traffic "$dev") || { echo "FAIL $dev has no PerfMgmt port counters"; return 1; }
    pair rping_loopback 120 "rping -s -a 10.11.0.1 -C 5 -v" \
        "rping -c -a 10.11.0.1 -C 5 -v" || fails=$((fails + 1))
    check_loopback_traffic "$dev" "$before" || fails=$((fails + 1))
    # UD multicast through RDMA-CM: three receiving QPs in one group, each
    # must get all 20 datagrams of a sender whose own QP is in the group too.
    pair mckey_loopback 120 "mckey -m 230.11.0.7 -b 10.11.0.1 -c 3 -C 20" \
        "mckey -m 230.11.0.7 -b 10.11.0.1 -s -C 20" || fails=$((fails + 1))
    rdma -d statistic show link "$dev/1" 2>/dev/null | tr ' ' '\n' | grep -A1 -E '^rx_' | paste - - || true
    [ $fails = 0 ]
}

