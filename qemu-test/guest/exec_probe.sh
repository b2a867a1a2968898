#!/usr/bin/env bash
# What `make test` runs through `vm.sh exec`, as a CI job would run its own
# tests: a payload-checked RC ping-pong between the two devices it was given
# (oxe0 here, oxe1 in netns peer), then exit STATUS, so that the caller can
# check vm.sh passes the command's status on.
#   exec_probe.sh STATUS
set -u
status=${1:?usage: exec_probe.sh STATUS}
for v in OXE_DEV_A OXE_DEV_B OXE_GID_A OXE_GID_B; do
    [ -n "${!v:-}" ] || { echo "exec_probe: $v is not set"; exit 100; }
done
ip netns exec peer timeout 60 ibv_rc_pingpong -d "$OXE_DEV_B" -g "$OXE_GID_B" -n 50 -s 8192 -c &
server=$!
sleep 1
timeout 60 ibv_rc_pingpong -d "$OXE_DEV_A" -g "$OXE_GID_A" -n 50 -s 8192 -c 10.11.0.2 || exit 101
wait "$server" || exit 102
echo "exec_probe: 50 checked ping-pongs of 8 KiB, $OXE_DEV_A -> $OXE_DEV_B"
exit "$status"
