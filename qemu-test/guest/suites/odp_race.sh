# ODP invalidation racing a peer's WRITEs and READs (qemu-test/clients/odp_race.c):
# the ODP responder on veth0 (an oxe device), the requester on veth1; the
# responder's mapping is dropped, replaced, moved and forked under the traffic
# in ways that keep its contents, so every byte read back has one right value.
suite_odp_race() { # oxe-dev peer-dev
    local a=$1 b=$2
    [ -x "$OXE_TOP/build/odp_race" ] || { echo "build/odp_race missing: 'make guest-tools'"; return 1; }
    pair_setup "$a" "$b" || return 1
    timeout 300 "$OXE_TOP/build/odp_race" "$b" "$GID_B" "$a" "$GID_A" -s 5
}
