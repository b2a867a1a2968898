# Races of the kind 2026's soft-RoCE security reports found
# (qemu-test/clients/verbs_races.c): the requester on veth0, the responder
# under test (an oxe device) on veth1 in netns peer. Each mode judges data by
# its bytes and completions by their statuses; the dmesg check after the suite
# catches what the kernel reports.
#   sqd-rd-atomic       max_dest_rd_atomic changed in SQD under a READ stream
#   err-while-arriving  the responder's QP moved to ERR while messages arrive
#   ring-scribble       the requester's rings rewritten by user space while the
#                       kernel reads them (run only with an oxe requester)
#   mw-pd               windows bound across PDs
#   rereg-ro            rereg of a read-only MR to a writable one
#   async-events        the QP and port events the responder's context gets
#                       (last: it takes the responder's netdev down and up)
suite_verbs_races() { # requester responder
    local a=$1 b=$2 rc=0 m modes=(sqd-rd-atomic err-while-arriving mw-pd rereg-ro)
    [ -x "$OXE_TOP/build/verbs_races" ] || { echo "build/verbs_races missing: 'make guest-tools'"; return 1; }
    [[ $a == oxe* ]] && modes+=(ring-scribble)
    modes+=(async-events)
    pair_setup "$a" "$b" || return 1
    for m in "${modes[@]}"; do
        timeout 300 "$OXE_TOP/build/verbs_races" "$a" "$GID_A" "$b" "$GID_B" "$m" || { echo "    $m failed"; rc=1; }
    done
    return $rc
}
