# What a responder lets a peer's UC and UD messages do to its memory, over the
# wire (qemu-test/guest/test_wire_enforce.py): devA on veth0 sends, devB on
# veth1 in netns peer responds; each refused UC message judged by the
# responder's memory between guard pages.
suite_wire_enforce() { # devA devB
    pair_setup "$1" "$2" || return 1
    OXE_DEV_A=$1 OXE_DEV_B=$2 OXE_GID_A=$GID_A OXE_GID_B=$GID_B \
        unittest_suite wire-enforce "$1-$2" test_wire_enforce 600
}
