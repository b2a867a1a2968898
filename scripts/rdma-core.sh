#!/usr/bin/env bash
# Builds rdma-core in place, with pyverbs for /usr/bin/python3, after applying
# the ordered patch series in rdma-core-patches/: v59 by default, v65 with
# OXE_RDMA_CORE_VERSION=65. v59's source is the pyverbs==59.0 sdist from PyPI,
# v65's Debian's orig tarball (each verified by sha256); a build is keyed by
# its source and the series.
#   rdma-core.sh build|dir|pabi
source "$(dirname "$0")/lib.sh"

fetch_sdist() {
    local dir=$OXE_CACHE/sdist tarball=$OXE_CACHE/sdist/pyverbs-$PYVERBS_VERSION.tar.gz
    if [ ! -f "$tarball" ]; then
        log "fetching pyverbs==$PYVERBS_VERSION sdist (rdma-core v59 source) from PyPI"
        mkdir -p "$dir"
        # --no-build-isolation: use the venv's scikit-build-core instead of compiling Cython.
        "$VENV/bin/pip" download -q --no-deps --no-binary :all: --no-build-isolation \
            -d "$dir" "pyverbs==$PYVERBS_VERSION"
    fi
    echo "$PYVERBS_SHA256  $tarball" | sha256sum -c --quiet - ||
        die "pyverbs-$PYVERBS_VERSION.tar.gz does not match its pinned sha256; delete it to refetch"
    echo "$tarball"
}

# Debian's rdma-core 65.0 source (the orig tarball: the registry serves
# it, not the .dsc), through a private sources list of sid and forky.
fetch_debian_orig() {
    local dir=$OXE_CACHE/rdma-core-src tarball=$OXE_CACHE/rdma-core-src/rdma-core_65.0.orig.tar.gz
    if [ ! -f "$tarball" ]; then
        local mirror apt_opts
        mirror=$(debian_mirror)
        mkdir -p "$dir/apt"
        printf 'deb-src %s %s main\n' "$mirror" sid "$mirror" forky >"$dir/apt/sources.list"
        mapfile -t apt_opts < <(private_apt_opts "$dir/apt")
        log "fetching rdma-core $RDMA_CORE65_DEB_VERSION's source from Debian sid/forky ($mirror)"
        apt-get "${apt_opts[@]}" update -qq
        (cd "$dir" && apt-get "${apt_opts[@]}" source --tar-only -qq "rdma-core=$RDMA_CORE65_DEB_VERSION") ||
            die "rdma-core $RDMA_CORE65_DEB_VERSION is no longer in Debian sid or forky: update RDMA_CORE65_* in scripts/lib.sh"
    fi
    echo "$RDMA_CORE65_SHA256  $tarball" | sha256sum -c --quiet - ||
        die "$(basename "$tarball") does not match its pinned sha256; delete it to refetch"
    echo "$tarball"
}

# The source of OXE_RDMA_CORE_VERSION: its tarball, and its pinned sha256.
source_tarball() {
    case "$OXE_RDMA_CORE_VERSION" in
    59) fetch_sdist ;;
    65) fetch_debian_orig ;;
    *) die "OXE_RDMA_CORE_VERSION=$OXE_RDMA_CORE_VERSION: oxe builds against rdma-core 59 or 65" ;;
    esac
}
source_sha256() {
    case "$OXE_RDMA_CORE_VERSION" in
    59) echo "$PYVERBS_SHA256" ;;
    65) echo "$RDMA_CORE65_SHA256" ;;
    *) die "OXE_RDMA_CORE_VERSION=$OXE_RDMA_CORE_VERSION: oxe builds against rdma-core 59 or 65" ;;
    esac
}

# The patch series, in order: rdma-core-patches/series if present, else *.patch sorted.
series() {
    local p=$OXE_TOP/rdma-core-patches
    if [ -f "$p/series" ]; then
        { grep -v -e '^#' -e '^$' "$p/series" || true; } | sed "s|^|$p/|"
    else
        ls "$p"/*.patch 2>/dev/null | sort
    fi
}

rdma_core_dir() {
    local key
    key=$( (source_sha256; series | xargs -r sha256sum | cut -d' ' -f1) | sha256sum | cut -c1-12)
    echo "$OXE_CACHE/rdma-core-v$OXE_RDMA_CORE_VERSION-$key"
}

# The built tree's private provider ABI (IBVERBS_PABI_VERSION): the N of
# the provider's file name, lib<name>-rdmav<N>.so.
pabi() {
    local config
    config=$(rdma_core_dir)/build/include/config.h
    [ -f "$config" ] || die "rdma-core $OXE_RDMA_CORE_VERSION is not built: run make rdma-core"
    sed -n 's/^#define IBVERBS_PABI_VERSION //p' "$config"
}

build() {
    local tarball dir
    tarball=$(source_tarball)
    dir=$(rdma_core_dir)
    if [ -f "$dir/.oxe-built" ]; then
        echo "$dir"
        return
    fi
    # Built where it stays: cmake bakes absolute paths into an in-place build.
    rm -rf "$dir"
    mkdir -p "$dir"
    if [ "$OXE_RDMA_CORE_VERSION" = 59 ]; then
        tar -xzf "$tarball" -C "$dir" --strip-components=2 "pyverbs-$PYVERBS_VERSION/rdma-core"
    else
        tar -xzf "$tarball" -C "$dir" --strip-components=1
    fi
    local patch n=0
    while IFS= read -r patch; do
        [ -n "$patch" ] || continue
        n=$((n + 1))
        [ -f "$patch" ] || die "series names $(basename "$patch"), which does not exist"
        if ! out=$(patch -d "$dir" -p1 --forward --batch --quiet <"$patch" 2>&1); then
            printf '%s\n' "$out" >&2
            die "rdma-core patch $n ($(basename "$patch")) does not apply to rdma-core v$OXE_RDMA_CORE_VERSION"
        fi
    done < <(series)
    log "applied $n rdma-core patch(es); building rdma-core v$OXE_RDMA_CORE_VERSION in $dir"
    mkdir -p "$dir/build"
    (cd "$dir/build" &&
        cmake -GNinja -DIN_PLACE=1 -DNO_MAN_PAGES=1 -DPYTHON_EXECUTABLE=/usr/bin/python3 .. >cmake.log 2>&1 ||
        { tail -30 cmake.log >&2; die "rdma-core cmake failed"; })
    (cd "$dir/build" && ninja >ninja.log 2>&1 || { tail -40 ninja.log >&2; die "rdma-core build failed"; })
    touch "$dir/.oxe-built"
    # Builds for older patch series are dead weight, but another checkout
    # (a branch with a different series) may still be using one: keep the
    # three built most recently, this one included (135 MB each).
    local old
    for old in $(ls -1td "$OXE_CACHE/rdma-core-v$OXE_RDMA_CORE_VERSION"-*/.oxe-built 2>/dev/null | tail -n +4); do
        rm -rf "$(dirname "$old")"
    done
    echo "$dir"
}

case "${1:-build}" in
build) build ;;
dir) rdma_core_dir ;;
pabi) pabi ;;
*) die "usage: $0 [build|dir|pabi]" ;;
esac
