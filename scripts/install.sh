#!/usr/bin/env bash
# `make install`'s two halves; they install what is built and build nothing.
#   install.sh module KDIR INSTALL_MOD_PATH
#   install.sh provider LIBRARY DESTDIR PROVIDER_DIR CONFIG_DIR INCLUDEDIR LIBDIR VERSION PREFIX
source "$(dirname "$0")/lib.sh"

module() { # kdir root
    local kdir mo=$OXE_TOP/build/module-kdir root=$2 built release
    kdir=$(realpath "$1" 2>/dev/null) || die "KDIR=$1 does not exist: give the tree oxe was built against"
    built=$(cat "$mo/.kdir" 2>/dev/null || true)
    [ -f "$mo/oxe.ko" ] && [ "$built" = "$kdir" ] ||
        die "no oxe.ko built for KDIR=$kdir${built:+ (build/module-kdir is for $built)}: run make module KDIR=$kdir first"
    release=$(cat "$kdir/include/config/kernel.release")
    # The tree's own modules_install puts it where its modprobe looks
    # (lib/modules/RELEASE/updates, ahead of the tree's own modules).
    "$OXE_TOP/scripts/kdir.sh" make "$kdir" -s M="$OXE_TOP" MO="$mo" \
        INSTALL_MOD_PATH="$root" INSTALL_MOD_DIR=updates modules_install
    # kbuild skips depmod for a tree without System.map (a distribution's
    # headers): the alias `rdma link add ... type oxe` asks modprobe for is
    # only found once depmod has run.
    depmod -b "${root:-/}" "$release"
    log "installed $(find "${root:-/}/lib/modules/$release/updates" -name 'oxe.ko*' | head -n1) for $release"
}

provider() { # library destdir provider_dir config_dir includedir libdir version prefix
    local so=$1 dest=$2 pdir=$3 cdir=$4 incdir=$5 libdir=$6 version=$7 prefix=$8 name
    [ -f "$so" ] || die "the provider is not built: run make provider first"
    # Installed under its soname, liboxe-rdmav<ABI>.so: the ABI of the
    # rdma-core it was built against, which libibverbs asks for by name.
    name=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
    [ -n "$name" ] || die "$so has no soname"
    install -D -m0755 "$so" "$dest$pdir/$name"
    # A bare name: libibverbs opens lib<name>-rdmav<ABI>.so in its provider
    # directory, which is where it went.
    install -d "$dest$cdir"
    echo "driver oxe" >"$dest$cdir/oxe.driver"
    chmod 0644 "$dest$cdir/oxe.driver"
    install -D -m0644 "$OXE_TOP/provider/include/oxedv.h" "$dest$incdir/infiniband/oxedv.h"
    # Direct verbs (oxedv.h) link against the provider itself, as mlx5dv's
    # users link against libmlx5.
    install -d "$dest$libdir/pkgconfig"
    # Paths under the prefix are written relative to it, as pkg-config
    # files are, so that --define-variable=prefix= relocates them.
    local rel_inc=${incdir/#"$prefix"/\$\{prefix\}} rel_pdir=${pdir/#"$prefix"/\$\{prefix\}}
    cat >"$dest$libdir/pkgconfig/liboxe.pc" <<EOF
prefix=$prefix
includedir=$rel_inc
providerdir=$rel_pdir

Name: liboxe
Description: oxe's direct verbs (oxedv.h): indirect keys and inline receive on the oxe soft RoCE device
Version: $version
Requires: libibverbs
Cflags: -I\${includedir}
Libs: -L\${providerdir} -l:$name -Wl,-rpath,\${providerdir}
EOF
    log "installed the provider into $dest$pdir, oxe.driver into $dest$cdir"
}

case "${1:-}" in
module) module "${2:?KDIR}" "${3:-}" ;;
provider) provider "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" ;;
*) die "usage: install.sh module KDIR ROOT | provider LIBRARY DESTDIR PROVIDER_DIR CONFIG_DIR INCLUDEDIR LIBDIR VERSION PREFIX" ;;
esac
