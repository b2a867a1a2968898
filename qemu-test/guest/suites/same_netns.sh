# Suite: two oxe devices in one network namespace, oxe8 on vsn0 (10.12.0.1,
# fd12::1) and oxe9 on vsn1 (10.12.0.2, fd12::2), both ends of a veth pair
# left here. rdma-core's RC and UD pingpongs run between them, checking
# every buffer, over each address family:
#  - IPv6: the route to an address of this host is local whatever the
#    sending device, so the packet never reaches the wire and must go to
#    the device that owns the destination address, not back into the sender;
#  - IPv4: a route bound to the sending device leads out of it, over the
#    veth to the other device. Linux drops a packet (and an ARP request)
#    whose source is one of its own addresses unless accept_local is set,
#    as for any loop between two interfaces of one host; ib_core's address
#    resolution needs it as much as oxe.
SAME_NETNS_SYSCTLS=(net.ipv4.conf.vsn0.accept_local=1 net.ipv4.conf.vsn1.accept_local=1
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.vsn0.rp_filter=0 net.ipv4.conf.vsn1.rp_filter=0)

suite_same_netns() {
    local rc=0 tool fam ga gb spid crc ok log=$OXE_RESULTS/logs/same-netns
    mkdir -p "$log"
    if ip link add vsn0 type veth peer name vsn1 &&
        ip addr add 10.12.0.1/24 dev vsn0 && ip addr add 10.12.0.2/24 dev vsn1 &&
        ip addr add fd12::1/64 dev vsn0 nodad && ip addr add fd12::2/64 dev vsn1 nodad &&
        ip link set vsn0 up && ip link set vsn1 up && sysctl -q -w "${SAME_NETNS_SYSCTLS[@]}" &&
        rdma link add oxe8 type oxe netdev vsn0 && rdma link add oxe9 type oxe netdev vsn1; then
        for fam in ipv6 ipv4; do
            if [ $fam = ipv6 ]; then
                ga=$(gid_index_of oxe8 fd12:0000:0000:0000:0000:0000:0000:0001) &&
                    gb=$(gid_index_of oxe9 fd12:0000:0000:0000:0000:0000:0000:0002) || { rc=1; continue; }
            else
                ga=$(gid_index oxe8 10.12.0.1) && gb=$(gid_index oxe9 10.12.0.2) || { rc=1; continue; }
            fi
            for tool in ibv_rc_pingpong ibv_ud_pingpong; do
                ok=1
                timeout 60 "$tool" -d oxe9 -g "$gb" -s 512 -n 50 -c >"$log/$tool-$fam.server.log" 2>&1 &
                spid=$!
                wait_listen a tcp 18515 "$spid" || { echo "  server did not listen"; ok=0; }
                # (the pingpongs' out-of-band exchange is TCP over IPv4 either way)
                timeout 60 "$tool" -d oxe8 -g "$ga" -s 512 -n 50 -c 10.12.0.2 >"$log/$tool-$fam.client.log" 2>&1
                crc=$?
                wait "$spid" || { echo "  server exit status $?"; ok=0; }
                [ $crc = 0 ] || { echo "  client exit status $crc"; ok=0; }
                check_pingpong "$log/$tool-$fam.client.log" $((512 * 50 * 2)) 50 &&
                    check_pingpong "$log/$tool-$fam.server.log" $((512 * 50 * 2)) 50 || ok=0
                echo "  $tool over $fam, oxe8 -> oxe9: $([ $ok = 1 ] && echo ok || echo FAILED)"
                [ $ok = 1 ] || { rc=1; tail -n 3 "$log/$tool-$fam".*.log; }
            done
        done
    else
        echo "cannot set up vsn0/vsn1 with oxe8 and oxe9"
        rc=1
    fi
    rdma link delete oxe8 2>/dev/null
    rdma link delete oxe9 2>/dev/null
    ip link del vsn0 2>/dev/null
    return $rc
}
