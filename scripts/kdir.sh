#!/usr/bin/env bash
# oxe against a kernel tree of your own (KDIR): the preflight, and make in
# that tree with the toolchain it was built with.
#   kdir.sh check KDIR           says what the tree lacks for oxe, all at once
#   kdir.sh make KDIR ARGS...    the preflight, then make -C KDIR ARGS
# KDIR is the tree's object directory: the source tree, or its O= directory.
# It must be configured and built (vmlinux, modules) with Rust on.
# RUSTC, BINDGEN and LLVM (or CC) override the toolchain the checks expect;
# by default, Debian's rustc, oxe's cached bindgen, and LLVM 19 for a tree
# built with clang.
source "$(dirname "$0")/lib.sh"
RUSTC=${RUSTC:-$KRUSTC}
BINDGEN=${BINDGEN:-$TOOLS/bin/bindgen}

# What oxe.ko needs from the kernel: =y, or =m where a module provides it.
REQUIRED=(RUST MODULES INFINIBAND INFINIBAND_USER_ACCESS INFINIBAND_ON_DEMAND_PAGING
    MMU_NOTIFIER HMM_MIRROR INET IPV6 NET_UDP_TUNNEL)
# What oxe's tests and tools use: without them oxe builds, but less of it runs.
#   INFINIBAND_ADDR_TRANS  rdma_cm (rping, NVMe-oF, the pingpong clients)
#   RDMA_RXE               the yardstick oxe is compared with
#   DEBUG_FS               oxe's MR internals (/sys/kernel/debug/oxe)
#   NET_NS, VETH           the two-host topology of the guest suites
RECOMMENDED=(INFINIBAND_ADDR_TRANS RDMA_RXE DEBUG_FS NET_NS VETH)

config_value() { # kdir symbol
    sed -n "s/^CONFIG_$2=//p" "$1/.config" | head -n1
}

# The toolchain make gets for this tree, as arguments.
toolchain_args() { # kdir
    local args=(RUSTC="$RUSTC" BINDGEN="$BINDGEN")
    if [ -n "${CC:-}" ]; then
        args+=(CC="$CC")
    elif [ "$(config_value "$1" CC_IS_CLANG)" = y ]; then
        args+=(LLVM="${LLVM:-$KLLVM}")
    fi
    printf '%s\n' "${args[@]}"
}

# The first line a tool prints for --version, or nothing.
version_of() {
    "$@" --version 2>/dev/null | head -n1 || true
}

check() { # kdir
    local kdir=$1 problems=() sym val want got
    if [ ! -f "$kdir/Makefile" ]; then
        die "KDIR=$kdir is not a kernel tree (no Makefile)"
    fi
    if [ ! -f "$kdir/.config" ] || [ ! -f "$kdir/include/config/auto.conf" ]; then
        die "KDIR=$kdir is not configured: run make olddefconfig (or your config step) there first"
    fi
    for sym in "${REQUIRED[@]}"; do
        val=$(config_value "$kdir" "$sym")
        case "$val" in
        y | m) ;;
        *) problems+=("CONFIG_$sym is ${val:-not set}; oxe needs it (y or m)") ;;
        esac
    done
    if [ ! -f "$kdir/Module.symvers" ] || [ ! -f "$kdir/rust/libkernel.rmeta" ]; then
        problems+=("the tree is not built (no Module.symvers or rust/libkernel.rmeta): run make (vmlinux and modules) there first")
    fi
    # The Rust compiler must be the one the tree was built with: its
    # crates' metadata is only readable by that exact rustc.
    want=$(config_value "$kdir" RUSTC_VERSION_TEXT | tr -d '"')
    got=$(version_of "$RUSTC")
    if [ -n "$want" ] && [ "$want" != "$got" ]; then
        problems+=("the tree was built with '$want', RUSTC=$RUSTC is '${got:-missing}': set RUSTC to the tree's")
    fi
    want=$(config_value "$kdir" BINDGEN_VERSION_TEXT | tr -d '"')
    got=$(version_of "$BINDGEN")
    if [ -n "$want" ] && [ "$want" != "$got" ]; then
        problems+=("the tree was built with '$want', BINDGEN=$BINDGEN is '${got:-missing}': set BINDGEN to the tree's (make deps builds bindgen $BINDGEN_VERSION)")
    fi
    want=$(config_value "$kdir" CC_VERSION_TEXT | tr -d '"')
    if [ -n "${CC:-}" ]; then
        got=$(version_of "$CC")
    elif [ "$(config_value "$kdir" CC_IS_CLANG)" = y ]; then
        got=$(version_of "${LLVM:-$KLLVM}clang")
    else
        got=$(version_of gcc)
    fi
    if [ -n "$want" ] && [ "$want" != "$got" ]; then
        problems+=("the tree was built with '$want', the C compiler here is '${got:-missing}': set LLVM= (or CC=) to the tree's")
    fi
    for sym in "${RECOMMENDED[@]}"; do
        val=$(config_value "$kdir" "$sym")
        [ "$val" = y ] || [ "$val" = m ] || log "note: CONFIG_$sym is ${val:-not set}: oxe builds, but its tests that use it cannot run"
    done
    if [ ${#problems[@]} != 0 ]; then
        log "KDIR=$kdir cannot build oxe:"
        printf '[oxe]   - %s\n' "${problems[@]}" >&2
        exit 1
    fi
}

cmd=${1:?usage: kdir.sh check|make KDIR [ARGS...]}
kdir=$(realpath "${2:?usage: kdir.sh check|make KDIR [ARGS...]}" 2>/dev/null) || die "KDIR=$2 does not exist"
shift 2
case "$cmd" in
check) check "$kdir" ;;
make)
    check "$kdir"
    mapfile -t tc < <(toolchain_args "$kdir")
    exec make -C "$kdir" "${tc[@]}" "$@"
    ;;
*) die "usage: kdir.sh check|make KDIR [ARGS...]" ;;
esac
