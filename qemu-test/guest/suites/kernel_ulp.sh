# Helpers for the suites of kernel storage protocols over RDMA (nvmeof.sh,
# rnbd.sh): the topology they need, and the byte-for-byte check of a block
# device they export.
#
# Topology: the kernel's RDMA ULPs open their connections in the initial
# network namespace (nvme-rdma, nvmet-rdma and rtrs all pass &init_net to
# rdma_create_id), so both ends live here, each RDMA device on one end of a
# veth pair, vul0 (10.14.0.1, target) and vul1 (10.14.0.2, host). The host
# connects from its own address: rdma_cm then binds the host's device, and
# the route to the target's address, an address of this host, stays on this
# host. oxe hands such a packet to the device that owns the address
# (crate::ib::device::loop_back); rxe sends it over the veth. rxe and oxe
# cannot be the two ends: both need UDP port 4791 in this one namespace,
# and a port is bound once per namespace.
ULP_SYSCTLS=(net.ipv4.conf.vul0.accept_local=1 net.ipv4.conf.vul1.accept_local=1
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.vul0.rp_filter=0 net.ipv4.conf.vul1.rp_filter=0)
ULP_TARGET_IP=10.14.0.1
ULP_HOST_IP=10.14.0.2

# Target device on vul0, host device on vul1 (types from their names).
ulp_pair_setup() { # target_dev host_dev
    rdma_reset
    ip link add vul0 type veth peer name vul1 &&
        ip addr add $ULP_TARGET_IP/24 dev vul0 && ip addr add $ULP_HOST_IP/24 dev vul1 &&
        ip link set vul0 up && ip link set vul1 up && sysctl -q -w "${ULP_SYSCTLS[@]}" &&
        add_link "$1" "$(link_type "$1")" vul0 && add_link "$2" "$(link_type "$2")" vul1 &&
        gid_index "$1" $ULP_TARGET_IP >/dev/null && gid_index "$2" $ULP_HOST_IP >/dev/null &&
        ulp_neighbours
}

# Each end's neighbour entry for the other, as a network that has carried any
# traffic has them. Without, rtrs's first connection sat in ib_core's address
# resolution (ADDR_QUERY) until it timed out, neighbour resolution never
# completing for it over this pair; a ping resolves the same entries at once.
ulp_neighbours() {
    ping -c 1 -W 5 -I vul1 $ULP_TARGET_IP >/dev/null && ping -c 1 -W 5 -I vul0 $ULP_HOST_IP >/dev/null
}

ulp_pair_teardown() {
    rdma_reset
    ip link del vul0 2>/dev/null
    true
}

# A tmpfs-backed loop device of SIZE MiB (512-byte logical blocks, so that
# 512-byte I/O is possible); prints its path.
ulp_backing() { # size_mib
    local d
    d=$(mktemp -d) && mount -t tmpfs -o size=$(($1 + 8))M none "$d" &&
        truncate -s "$1"M "$d/disk.img" && losetup -f --show "$d/disk.img"
}

ulp_backing_release() { # loopdev
    local f
    f=$(losetup -n -O BACK-FILE "$1" 2>/dev/null)
    losetup -d "$1" 2>/dev/null
    [ -n "$f" ] && umount "$(dirname "$f")" 2>/dev/null
    true
}

# The sizes every ULP suite moves, from one sector to 4 MiB (larger than one
# fast registration maps: the ULP splits it).
ULP_SIZES=(512 4096 12288 65536 131072 1048576 4194304)

# Writes random data to DEV with O_DIRECT in each of ULP_SIZES (each size in
# its own region of the device, several I/Os per size: BLK_BYTES, 256 KiB
# unless set, and at least 4), reads it back with O_DIRECT and compares.
# 256 KiB is 512 one-sector I/Os: enough to cycle the ULP's MR pools and
# queues many times over, while the debug guest's `make test` stays bounded.
# Appends "NAME:SIZE": "ok"|"FAIL" to the verdicts file; prints a line per
# size. Returns non-zero if any size failed.
blk_roundtrip() { # dev name verdicts_tmp
    local dev=$1 name=$2 out=$3 rc=0 size n total off=0 v pat back t0
    pat=$(mktemp) back=$(mktemp)
    for size in "${ULP_SIZES[@]}"; do
        n=$(((${BLK_BYTES:-262144} + size - 1) / size))
        [ $n -ge 4 ] || n=4
        total=$((n * size))
        t0=$SECONDS
        v=FAIL
        if head -c "$total" /dev/urandom >"$pat" &&
            dd if="$pat" of="$dev" bs="$size" count="$n" seek=$off oflag=direct,seek_bytes conv=notrunc status=none &&
            dd if="$dev" of="$back" bs="$size" count="$n" skip=$off iflag=direct,skip_bytes status=none &&
            cmp -s "$pat" "$back"; then
            v=ok
        else
            rc=1
            cmp "$pat" "$back" 2>&1 | head -n 1 | sed 's/^/    /'
        fi
        printf '%-4s %-28s %4d x %7d B  %3ds\n' "$v" "$name:$size" "$n" "$size" $((SECONDS - t0))
        printf '"%s:%s": "%s",\n' "$name" "$size" "$v" >>"$out"
        off=$((off + 8 * 1048576))
    done
    rm -f "$pat" "$back"
    return $rc
}

# Closes a verdicts file begun with '{' and checked entries (trailing comma).
verdicts_close() { # tmp final
    { echo '{'; sed '$ s/,$//' "$1"; echo '}'; } >"$2"
    rm -f "$1"
}

# The device counter NAME of DEV.
hw_counter() { # dev name
    cat "/sys/class/infiniband/$1/hw_counters/$2" 2>/dev/null || echo 0
}

# Prints what fast registration did on DEV: '  oxe7: mr_fastreg N ...'.
fastreg_counters() { # dev
    local c
    printf '  %s:' "$1"
    for c in mr_fastreg mr_local_inv mr_remote_inv; do printf ' %s %s' $c "$(hw_counter "$1" $c)"; done
    echo
}
