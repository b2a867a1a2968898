# Suite: an oxe device's life: created by `rdma link add` (module autoloaded),
# port and GIDs following the netdev, removed by link delete, by netdev
# unregistration and by rmmod, also while userspace holds an MR.

port_state() { cat "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null; }
# (No `cmd | grep -q` here: under pipefail, grep's early exit can fail the pipe.)
udp_listening() { [[ $(ss -Huln sport = :4791) == *:4791* ]]; }
fail() { echo "FAIL: $*"; return 1; }
vm_pin_kb() { awk '/^VmPin:/ { print $2 }' "/proc/$1/status"; }

suite_oxe_lifecycle() {
    modprobe -r oxe 2>/dev/null
    rdma link add oxe0 type oxe netdev veth0 || fail "rdma link add" || return 1
    grep -q '^oxe ' /proc/modules || fail "oxe was not autoloaded" || return 1
    rdma link show oxe0/1
    ibv_devinfo -d oxe0 | grep -E 'hca_id|state|link_layer|active_mtu'
    [[ $(ibv_devinfo -d oxe0) == *PORT_ACTIVE* ]] || fail "port not ACTIVE" || return 1
    udp_listening || fail "UDP 4791 not listening" || return 1

    # RoCE v2 GIDs from both address families...
    local table
    table=$(gid_table oxe0)
    echo "$table"
    [[ $table == *"0000:0000:0000:0000:0000:ffff:0a0b:0001 RoCE v2"* ]] || fail "no IPv4 GID" || return 1
    [[ $table == *"fd11:0000:0000:0000:0000:0000:0000:0001 RoCE v2"* ]] || fail "no IPv6 GID" || return 1
    # ... following address changes.
    ip addr add 10.11.0.9/24 dev veth0
    sleep 1
    table=$(gid_table oxe0)
    [[ $table == *":0a0b:0009 "* ]] || fail "new address gave no GID" || return 1
    ip addr del 10.11.0.9/24 dev veth0
    sleep 1
    table=$(gid_table oxe0)
    [[ $table != *":0a0b:0009 "* ]] || fail "GID outlived its address" || return 1

    # Port state follows the netdev; the PerfMgmt LinkDowned counter counts the fall.
    local counters=/sys/class/infiniband/oxe0/ports/1/counters downed
    downed=$(cat $counters/link_downed) || fail "no PerfMgmt port counters" || return 1
    ip link set veth0 down
    sleep 1
    [[ $(port_state oxe0) == *DOWN* ]] || fail "port $(port_state oxe0) with veth0 down" || return 1
    [ "$(cat $counters/link_downed)" = $((downed + 1)) ] ||
        fail "link_downed $(cat $counters/link_downed) after one fall from $downed" || return 1
    ip link set veth0 up
    # IPv6 drops a link's addresses when it goes down (keep_addr_on_down is
    # off): put this one back for the suites after this one (rping6).
    ip addr replace fd11::1/64 dev veth0 nodad
    sleep 2
    [[ $(port_state oxe0) == *ACTIVE* ]] || fail "port $(port_state oxe0) with veth0 up" || return 1

    # `rdma link delete` while a process holds an MR.
    hold_mr oxe0 || return 1
    local pin
    pin=$(vm_pin_kb "$HOLD_PID")
    [ "$pin" -ge 1024 ] || fail "holder has VmPin $pin kB, expected >= 1024" || return 1
    # The MR's internals: restrack driver attributes and the debugfs translation.
    local res dbg
    res=$(rdma -dd resource show mr dev oxe0)
    echo "$res"
    [[ $res == *pages*access* ]] || fail "no oxe driver attributes in rdma resource show mr" || return 1
    dbg=$(cat /sys/kernel/debug/oxe/oxe0/mr-*)
    head -n 10 <<<"$dbg"
    [ "$(grep -cE '^[0-9]+ +0x[0-9a-f]+ +0x[0-9a-f]+$' <<<"$dbg")" = 256 ] ||
        fail "debugfs does not list the 256 pages of the 1 MiB MR" || return 1
    rdma link delete oxe0 || fail "link delete with a live MR" || return 1
    [ ! -e /sys/class/infiniband/oxe0 ] || fail "oxe0 still there" || return 1
    udp_listening && { fail "UDP 4791 still listening after delete"; return 1; }
    pin=$(vm_pin_kb "$HOLD_PID")
    [ "$pin" = 0 ] || fail "pages still pinned after link delete: $pin kB" || return 1
    release_mr

    # rmmod while a process holds an MR: ib_core disassociates the context.
    rdma link add oxe0 type oxe netdev veth0 || return 1
    hold_mr oxe0 || return 1
    modprobe -r oxe || fail "rmmod with a live MR" || return 1
    pin=$(vm_pin_kb "$HOLD_PID")
    [ "$pin" = 0 ] || fail "pages still pinned after rmmod: $pin kB" || return 1
    release_mr
    grep -q '^oxe ' /proc/modules && { fail "oxe still loaded"; return 1; }

    # A tun netdev (no link-layer address, ARPHRD_NONE): GIDs from its
    # address and RC traffic to itself through them, which the port counts
    # once each way. (RDMA-CM does not bind to such a netdev for any device
    # but rxe, see qemu-test/expected/kselftest-oxe.txt: verbs only.)
    modprobe tun
    ip tuntap add mode tun oxetun0
    ip addr add 10.12.0.1/24 dev oxetun0
    ip link set oxetun0 up
    rdma link add oxe7 type oxe netdev oxetun0 || fail "rdma link add on tun" || return 1
    local g before
    g=$(gid_index oxe7 10.12.0.1) || fail "no GID for the tun address" || return 1
    before=$(port_traffic oxe7) || fail "no port counters on oxe7" || return 1
    pair rc_pingpong_tun 120 "ibv_rc_pingpong -d oxe7 -g $g -n 20" \
        "ibv_rc_pingpong -d oxe7 -g $g -n 20 127.0.0.1" 18515 || return 1
    check_loopback_traffic oxe7 "$before" || return 1
    ip link del oxetun0
    sleep 1
    [ ! -e /sys/class/infiniband/oxe7 ] || fail "oxe7 survived its tun netdev" || return 1

    # Unregistering the netdev removes the device.
    ip link add oxedummy0 type dummy
    ip link set oxedummy0 up
    rdma link add oxe9 type oxe netdev oxedummy0 || return 1
    # A second device on the same netdev is refused.
    rdma link add oxe8 type oxe netdev oxedummy0 2>/dev/null && { fail "two devices on one netdev"; return 1; }
    ip link del oxedummy0
    sleep 1
    [ ! -e /sys/class/infiniband/oxe9 ] || fail "oxe9 survived its netdev" || return 1
    modprobe -r oxe
    echo "lifecycle ok"
}

# Suite: the end of a guest's run. Every RDMA link goes and oxe unloads
# (which must succeed), then kmemleak scans: anything oxe, ib_core or a
# suite's kernel consumer allocated and nothing references any more fails.
suite_teardown() {
    rdma_reset || return 1
    kmemleak_check
}
