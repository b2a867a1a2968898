#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# Host check of the installed provider through the real libibverbs, without
# the kernel module: a fake sysfs (libibverbs honours SYSFS_PATH and falls
# back to sysfs when RDMA netlink is absent, as on a host without ib_core)
# describes one device "oxe0", and /dev/infiniband/uverbs0 is a character
# device that is really /dev/null, in a private mount namespace.
#
# It shows that, with no provider environment variables:
#   * the tree's ibv_devices lists oxe0: build/etc/libibverbs.d/oxe.driver was
#     read, liboxe-rdmav<ABI>.so loaded, the name matched and the ABI accepted;
#   * a device with another uverbs ABI version is refused;
#   * opening oxe0 runs the provider's alloc_context; /dev/null swallows the
#     GET_CONTEXT command and answers nothing, so the provider must refuse
#     the empty (ABI version 0) reply with EPROTO and clean up.
#
# Needs root (unshare -m, mknod) and a tree with the oxe patch applied and
# the provider installed as build/lib/liboxe-rdmav<ABI>.so (the tree's
# IBVERBS_PABI_VERSION: 59 for v59, 65 for v65).
# Usage: OXE_RDMA_CORE=<rdma-core top> provider/tests/fake-device.sh
set -euo pipefail

top=${OXE_RDMA_CORE:?set OXE_RDMA_CORE to the rdma-core tree}
build=$top/build
[ -f "$build/etc/libibverbs.d/oxe.driver" ] || { echo "no oxe.driver: is the patch applied?" >&2; exit 1; }
pabi=$(sed -n 's/^#define IBVERBS_PABI_VERSION //p' "$build/include/config.h")
[ -f "$build/lib/liboxe-rdmav$pabi.so" ] || { echo "provider not installed in $build/lib" >&2; exit 1; }

if [ "${1:-}" != --inside ]; then
    sys=$(mktemp -d)
    trap 'rm -rf "$sys"' EXIT
    mkdir -p "$sys/class/infiniband_verbs/uverbs0" "$sys/class/infiniband/oxe0"
    echo 6 >"$sys/class/infiniband_verbs/abi_version"
    echo oxe0 >"$sys/class/infiniband_verbs/uverbs0/ibdev"
    echo 1:3 >"$sys/class/infiniband_verbs/uverbs0/dev" # /dev/null's numbers
    echo "1: CA" >"$sys/class/infiniband/oxe0/node_type"
    echo 0002:0304:0506:0708 >"$sys/class/infiniband/oxe0/node_guid"
    SYSFS_PATH=$sys unshare -m "$0" --inside
    exit
fi

# Inside the namespace: a private /dev with the few nodes the tools need.
orig=$SYSFS_PATH/.dev # removed with the fake sysfs
mkdir "$orig"
mount --bind /dev "$orig"
mount -t tmpfs tmpfs /dev
for n in null zero urandom random; do
    touch "/dev/$n"
    mount --bind "$orig/$n" "/dev/$n"
done
mkdir -p /dev/infiniband
mknod /dev/infiniband/uverbs0 c 1 3

pass=0 fail=0
check() { # name, then a command that must succeed
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}
abi=$SYSFS_PATH/class/infiniband_verbs/uverbs0/abi_version

echo 1 >"$abi"
check "ibv_devices lists oxe0" bash -c "'$build/bin/ibv_devices' | grep -Eq '^[[:space:]]*oxe0[[:space:]]+0002030405060708$'"
check "ibv_devinfo cannot open oxe0 without a kernel" \
    bash -c "'$build/bin/ibv_devinfo' -d oxe0 2>&1 | grep -q 'Failed to open device'"
check "the refusal is EPROTO from the provider" /usr/bin/python3 - "$build/lib/libibverbs.so.1" <<'EOF'
import ctypes, sys
v = ctypes.CDLL(sys.argv[1], use_errno=True)
v.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
v.ibv_open_device.restype = ctypes.c_void_p
v.ibv_open_device.argtypes = [ctypes.c_void_p]
n = ctypes.c_int()
devs = v.ibv_get_device_list(ctypes.byref(n))
assert n.value == 1, n.value
assert v.ibv_open_device(devs[0]) is None
sys.exit(0 if ctypes.get_errno() == 71 else 1)
EOF

echo 2 >"$abi"
check "a device with uverbs ABI 2 is not claimed" \
    bash -c "! '$build/bin/ibv_devices' 2>/dev/null | grep -q oxe0"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
