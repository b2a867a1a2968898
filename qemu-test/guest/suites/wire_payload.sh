# Payload over the wire, judged byte for byte (qemu-test/guest/test_wire_payload.py):
# devA on veth0 and devB on veth1 in netns peer, each direction: RC SEND, WRITE,
# multi-packet READ and atomics; UC SEND and WRITE; SRQ; UD. Every buffer lies
# between guard pages, every transfer carries its own pattern.
suite_wire_payload() { # devA devB
    pair_setup "$1" "$2" || return 1
    OXE_DEV_A=$1 OXE_DEV_B=$2 OXE_GID_A=$GID_A OXE_GID_B=$GID_B \
        unittest_suite wire-payload "$1-$2" test_wire_payload 600
}
