# Suite: a kernel consumer of DEV (qemu-test/kmod/oxe_kconsumer.c, loaded as a
# module that runs its checks in its init and refuses to load if one fails):
# its completion handler polls the CQ at once, and a post refused by a full
# send queue leaves the queued requests' destinations alone. The dmesg check
# after the suite catches a handler called where polling is not allowed
# (lockdep reports softirqs re-enabled with interrupts off).
suite_kernel_consumer() { # device netdev
    local dev=$1 ndev=$2 ko=$OXE_TOP/build/kmod-$OXE_FLAVOUR/oxe_kconsumer.ko gid rc=0
    [ -f "$ko" ] || { echo "$ko missing: build it with 'make kmod'"; return 1; }
    gid=$(gid_index "$dev" 10.11.0.1) || return 1
    insmod "$ko" netdev="$ndev" gid_index="$gid" far_ip=10.11.0.2 || rc=1
    dmesg | grep oxe_kconsumer
    [ $rc = 0 ] && rmmod oxe_kconsumer
    return $rc
}
