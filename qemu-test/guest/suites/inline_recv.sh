# Inline receive (short messages in the completion entry): oxe's direct verbs
# and both switches, from a C program linked against the provider
# (qemu-test/clients/inline_recv_qp.c), with inline receive on by default and
# with OXE_SCATTER_TO_CQE=0.
suite_inline_recv() { # device gid-index
    local dev=$1 gid=$2 rc=0
    "$OXE_TOP/build/inline_recv_qp" "$dev" "$gid" || rc=1
    OXE_SCATTER_TO_CQE=0 "$OXE_TOP/build/inline_recv_qp" "$dev" "$gid" || rc=1
    return $rc
}
