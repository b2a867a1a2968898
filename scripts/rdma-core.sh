#!/usr/bin/env bash
# Builds rdma-core v59 in place, with pyverbs for /usr/bin/python3, after applying
# the ordered patch series in rdma-core-patches/. The source is the pyverbs==59.0
# sdist from PyPI (verified by sha256); the build is keyed by sdist and series.
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
    key=$( (echo "$PYVERBS_SHA256"; series | xargs -r sha256sum | cut -d' ' -f1) | sha256sum | cut -c1-12)
    echo "$OXE_CACHE/rdma-core-v59-$key"
}

build() {
    local tarball dir
    tarball=$(fetch_sdist)
    dir=$(rdma_core_dir)
    if [ -f "$dir/.oxe-built" ]; then
        echo "$dir"
        return
    fi
    # Built where it stays: cmake bakes absolute paths into an in-place build.
    rm -rf "$dir"
    mkdir -p "$dir"
    tar -xzf "$tarball" -C "$dir" --strip-components=2 "pyverbs-$PYVERBS_VERSION/rdma-core"
    local patch n=0
    while IFS= read -r patch; do
        [ -n "$patch" ] || continue
        n=$((n + 1))
        [ -f "$patch" ] || die "series names $(basename "$patch"), which does not exist"
        if ! out=$(patch -d "$dir" -p1 --forward --batch --quiet <"$patch" 2>&1); then
            printf '%s\n' "$out" >&2
            die "rdma-core patch $n ($(basename "$patch")) does not apply to rdma-core v59"
        fi
    done < <(series)
    log "applied $n rdma-core patch(es); building rdma-core v59 in $dir"
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
    for old in $(ls -1td "$OXE_CACHE"/rdma-core-v59-*/.oxe-built 2>/dev/null | tail -n +4); do
        rm -rf "$(dirname "$old")"
    done
    echo "$dir"
}

case "${1:-build}" in
build) build ;;
dir) rdma_core_dir ;;
*) die "usage: $0 [build|dir]" ;;
esac
