# shellcheck shell=bash
# Suite: the command `vm.sh exec` was given (written to exec-cmd.sh by the
# host), with the two devices pair_links set up; its exit status goes to
# exec-status, which vm.sh exits with.
suite_exec() {
    local rc
    OXE_DEV_A=oxe0 OXE_DEV_B=oxe1 OXE_GID_A=${GID_A:-} OXE_GID_B=${GID_B:-} \
        bash "$OXE_RESULTS/exec-cmd.sh"
    rc=$?
    echo "$rc" >"$OXE_RESULTS/exec-status"
    echo "exec: the command exited with status $rc"
    return $rc
}
