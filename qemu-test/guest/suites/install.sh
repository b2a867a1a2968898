# shellcheck shell=bash
# Suite: `make install` into a staged root, then oxe used from there as a
# distribution would use it. The module: the installed file is the built one,
# depmod gave it the alias `rdma link add ... type oxe` asks for, and modprobe
# loads it from the staged root by that alias. The provider: a program built
# against the installed oxedv.h and liboxe.pc opens a device through the
# installed library, with libibverbs' own driver files out of sight, and the
# library mapped is the installed one.
suite_install() { # netdev
    local stage rel ko pdir out rc=0 multiarch
    stage=$(mktemp -d /tmp/oxe-stage.XXXXXX)
    rel=$(uname -r)
    multiarch=$(gcc -print-multiarch)
    make -s -C "$OXE_TOP" install KDIR="$OXE_KDIR" DESTDIR="$stage" INSTALL_MOD_PATH="$stage" \
        prefix=/usr || { echo "FAIL make install"; return 1; }
    find "$stage" -type f | sed "s|^$stage||" | sort
    ko=$stage/lib/modules/$rel/updates/oxe.ko
    [ -f "$ko" ] || { echo "FAIL no oxe.ko at ${ko#"$stage"}"; return 1; }
    cmp "$ko" "$OXE_TOP/build/module-kdir/oxe.ko" || { echo "FAIL the installed oxe.ko is not the built one"; rc=1; }
    grep -qx 'alias rdma-link-oxe oxe' "$stage/lib/modules/$rel/modules.alias" ||
        { echo "FAIL depmod gave the staged root no rdma-link-oxe alias"; rc=1; }
    rdma_reset || return 1
    grep -q '^oxe ' /proc/modules && { echo "FAIL oxe still loaded"; return 1; }
    # The staged root holds oxe alone: what it depends on comes from the
    # booted kernel's own modules, as on a system whose kernel is installed.
    local dep
    for dep in $(modinfo -F depends "$ko" | tr ',' ' '); do
        modprobe "$dep" || { echo "FAIL modprobe $dep (oxe depends on it)"; return 1; }
    done
    out=$(modprobe -v -d "$stage" rdma-link-oxe 2>&1) || { echo "FAIL modprobe: $out"; return 1; }
    echo "$out"
    [[ $out == *"insmod $ko"* ]] || { echo "FAIL modprobe did not load the staged oxe.ko"; rc=1; }
    rdma link add oxe0 type oxe netdev "$1" || return 1

    pdir=$stage/usr/lib/$multiarch/libibverbs
    [ "$(cat "$stage/etc/libibverbs.d/oxe.driver")" = "driver oxe" ] ||
        { echo "FAIL oxe.driver: $(cat "$stage/etc/libibverbs.d/oxe.driver")"; rc=1; }
    cmp "$pdir/liboxe-rdmav59.so" "$OXE_TOP/provider/target/release/liboxe_rdmav59.so" ||
        { echo "FAIL the installed provider is not the built one"; rc=1; }
    local flags probe=/tmp/oxe-staged-provider
    flags=$(PKG_CONFIG_PATH=$stage/usr/lib/$multiarch/pkgconfig:$OXE_RDMA_CORE/build/lib/pkgconfig \
        pkg-config --define-variable=prefix="$stage/usr" --cflags --libs liboxe) ||
        { echo "FAIL pkg-config liboxe"; return 1; }
    echo "pkg-config liboxe: $flags"
    # shellcheck disable=SC2086 # the flags are words
    gcc -O2 -Wall -Werror -o "$probe" "$OXE_TOP/qemu-test/clients/staged_provider.c" $flags ||
        { echo "FAIL the probe does not build against the install"; return 1; }
    # libibverbs' own driver files (the in-place build's, which name the
    # provider in its build tree) hidden: only the installed one is loaded.
    # Without the guest's LD_LIBRARY_PATH, which names that build tree and
    # would come before the probe's own run path.
    out=$(unshare -m env -u LD_LIBRARY_PATH sh -c 'mount -t tmpfs none "$1" && RDMAV_DRIVERS=$2 exec "$3" oxe0' sh \
        "$OXE_RDMA_CORE/build/etc/libibverbs.d" "$pdir/liboxe" "$probe" 2>&1) ||
        { echo "FAIL the probe: $out"; return 1; }
    echo "provider mapped from: $out"
    [ "$out" = "$pdir/liboxe-rdmav59.so" ] || { echo "FAIL not the installed provider"; rc=1; }
    rm -rf "$stage" "$probe"
    return $rc
}
