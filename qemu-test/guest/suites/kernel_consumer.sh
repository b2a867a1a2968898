# Suite: kernel consumers of DEV, each a module that runs its checks in its init
# and refuses to load if one fails. qemu-test/kmod/oxe_kconsumer.c: its
# completion handler polls the CQ at once, and a post refused by a full send
# queue leaves the queued requests' destinations alone.
# qemu-test/kmod/oxe_fastreg.c: fast registration judged by the pages it maps
# (scattered, unaligned, 64 KiB and 2 MiB pages), its refusals, local and
# remote invalidation, and its order on the send queue. The dmesg check
# after the suite catches a handler called where polling is not allowed
# (lockdep reports softirqs re-enabled with interrupts off).
suite_kernel_consumer() { # device netdev
    local dev=$1 ndev=$2 dir=$OXE_TOP/build/kmod-$OXE_FLAVOUR gid rc=0 m
    for m in oxe_kconsumer oxe_fastreg; do
        [ -f "$dir/$m.ko" ] || { echo "$dir/$m.ko missing: build it with 'make kmod'"; return 1; }
    done
    gid=$(gid_index "$dev" 10.11.0.1) || return 1
    if insmod "$dir/oxe_kconsumer.ko" netdev="$ndev" gid_index="$gid" far_ip=10.11.0.2; then
        rmmod oxe_kconsumer || rc=1
    else
        rc=1
    fi
    if insmod "$dir/oxe_fastreg.ko" netdev="$ndev" gid_index="$gid"; then
        rmmod oxe_fastreg || rc=1
    else
        rc=1
    fi
    dmesg | grep -E 'oxe_(kconsumer|fastreg)'
    return $rc
}
