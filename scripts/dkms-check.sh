#!/usr/bin/env bash
# DKMS's own run of dkms.conf, as a distribution would make it: `dkms add`,
# `build` and `install` of this checkout's tracked files for one kernel tree
# (the `own` stand-in by default), every DKMS tree staged in a temporary
# directory. Passes when DKMS installed an oxe.ko built for that kernel, with
# the alias that lets `rdma link add ... type oxe` load it.
#   dkms-check.sh [KDIR]
source "$(dirname "$0")/lib.sh"

command -v dkms >/dev/null || die "dkms not installed: run 'make deps'"
kdir=$(realpath "${1:-$("$OXE_TOP/scripts/kernel.sh" dir own)}")
[ -f "$kdir/Module.symvers" ] || die "$kdir is not a built kernel tree"
kver=$(make -s -C "$kdir" kernelrelease)
name=$(sed -n 's/^PACKAGE_NAME="\(.*\)"$/\1/p' "$OXE_TOP/dkms.conf")
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$OXE_TOP/dkms.conf")
[ -n "$name" ] && [ -n "$version" ] || die "dkms.conf names no PACKAGE_NAME or PACKAGE_VERSION"

stage=$(mktemp -d "${TMPDIR:-/tmp}/oxe-dkms.XXXXXX")
trap 'rm -rf "$stage"' EXIT
src=$stage/src/$name-$version
mkdir -p "$src" "$stage/dkms" "$stage/modules/$kver"
# What a source package would carry: the tracked files, not build output.
git -C "$OXE_TOP" ls-files -z | tar -C "$OXE_TOP" --null -T - -cf - | tar -C "$src" -xf -

# DKMS builds a clang kernel's modules with CC=clang LD=ld.lld, by those
# names; the LLVM oxe's kernels are built with is Debian's LLVM 19, whose
# tools live under lib.sh's KLLVM, so they go first on PATH.
if [ "$(sed -n 's/^CONFIG_CC_IS_CLANG=//p' "$kdir/.config")" = y ]; then
    mkdir -p "$stage/bin"
    for tool in clang ld.lld; do
        [ -x "$KLLVM$tool" ] || die "$KLLVM$tool not found (the tree was built with LLVM)"
        ln -s "$KLLVM$tool" "$stage/bin/$tool"
    done
    export PATH=$stage/bin:$PATH
fi

trees=(--dkmstree "$stage/dkms" --sourcetree "$stage/src" --installtree "$stage/modules")
step() { # action
    log "dkms $1 $name/$version for $kver"
    dkms "$1" -m "$name" -v "$version" -k "$kver" --kernelsourcedir "$kdir" "${trees[@]}" --no-depmod \
        >"$stage/dkms-$1.log" 2>&1 || {
        tail -n 40 "$stage/dkms-$1.log" "$stage/dkms/$name/$version/build/make.log" >&2 2>/dev/null
        die "dkms $1 failed"
    }
}
step add
step build
step install

ko=$(find "$stage/modules/$kver" -name 'oxe.ko*' | head -n 1)
[ -n "$ko" ] || die "dkms install left no oxe.ko under $stage/modules/$kver"
case $ko in
*/updates/dkms/*) ;;
*) die "oxe.ko went to $ko, not DEST_MODULE_LOCATION's updates/dkms" ;;
esac
vermagic=$(modinfo -F vermagic "$ko")
[ "${vermagic%% *}" = "$kver" ] || die "oxe.ko's vermagic is '$vermagic', not for $kver"
modinfo -F alias "$ko" | grep -qx 'rdma-link-oxe' || die "oxe.ko has no rdma-link-oxe alias"
log "dkms built and installed oxe.ko for $kver ($vermagic)"
