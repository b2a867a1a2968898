# Indirect keys (oxedv_create_mkey, configured through the send queue), from a C
# program linked against the provider (qemu-test/clients/mkey_qp.c): layouts,
# bounds, rights, nesting, invalidation and atomics, over two RC QPs of one
# device; and the layout as debugfs and `rdma -dd resource show mr` show it.
suite_mkey() { # device gid-index
    local dev=$1 gid=$2
    "$OXE_TOP/build/mkey_qp" "$dev" "$gid"
}
