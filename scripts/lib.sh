# Shared settings for oxe's build scripts. Sourced, never run.
# Everything expensive lives in $OXE_CACHE, outside the clone, keyed by its inputs,
# so a fresh clone on the same machine reuses it and a changed input rebuilds it.
set -Eeuo pipefail
# No silent exits: whatever command stops a script under `set -e` is named, with
# where it ran. (A bare `exit 2` with no message is how a fresh machine failed.)
trap 'rc=$?; printf "[oxe] error: \"%s\" failed with exit status %d (%s line %d)\n" "$BASH_COMMAND" "$rc" "${BASH_SOURCE[0]##*/}" "$LINENO" >&2' ERR

OXE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OXE_CACHE=${OXE_CACHE:-$HOME/.cache/oxe}
mkdir -p "$OXE_CACHE"

# Toolchain for kernel Rust: Debian's rustc-web (with its library source), LLVM 19.
# rustup's rustc (first in PATH on these machines) has no rust-src and cannot build kernel Rust.
KRUSTC=/usr/bin/rustc
KLLVM=/usr/lib/llvm-19/bin/
export LIBCLANG_PATH=/usr/lib/llvm-19/lib
BINDGEN_VERSION=0.73.2
VIRTME_NG_VERSION=1.42
TOOLS=$OXE_CACHE/tools
VENV=$OXE_CACHE/venv
export PATH=$TOOLS/bin:$VENV/bin:$PATH
KMAKE=(make LLVM=$KLLVM RUSTC=$KRUSTC BINDGEN=$TOOLS/bin/bindgen)

# Kernel source: the 7.3 series from Debian trixie-backports.
KSRC_PKG=linux-source-7.3
# rdma-core: v59 by default, or v65 (OXE_RDMA_CORE_VERSION=65), the newest
# Debian ships. v59 ships complete inside the pyverbs sdist on PyPI; v65 is
# Debian's orig tarball (source package rdma-core 65.0-1.1, in sid and forky).
OXE_RDMA_CORE_VERSION=${OXE_RDMA_CORE_VERSION:-59}
PYVERBS_VERSION=59.0
PYVERBS_SHA256=b30d56bb620b3d3b4301876f9a04c964be1c76cc6553a451e1465f1c6ac9f20e
RDMA_CORE65_DEB_VERSION=65.0-1.1
RDMA_CORE65_SHA256=f6ba3d8b2c4aa334c5c883c1ad0772de339011123cff4fb1db32ae7a443fb7ca

log() { printf '[oxe] %s\n' "$*" >&2; }
die() { printf '[oxe] error: %s\n' "$*" >&2; exit 1; }

# The Debian mirror the machine's own apt sources use (deb.debian.org if
# none is found), for the private source lists that fetch what bookworm
# lacks without adding a suite to the system's sources.
debian_mirror() {
    local mirror
    # (grep exits 2 when /etc/apt/sources.list does not exist, as on deb822-only
    # machines; under pipefail that must not end the script.)
    mirror=$({ grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true; } |
        head -n1 | tr -d ' ')
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "${mirror%/}"
}

# apt-get's options for a private sources list in DIR (written by the caller
# to DIR/sources.list), with lists and archives kept there too.
private_apt_opts() { # dir
    mkdir -p "$1/lists/partial" "$1/archives/partial"
    printf '%s\n' -o "Dir::Etc::SourceList=$1/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o "Dir::State::Lists=$1/lists" -o "Dir::Cache=$1" -o Dir::State::Status=/dev/null \
        -o APT::Sandbox::User=root
}

# Hash of a set of files (content and names), for cache keys.
hash_files() { (cd "$OXE_TOP" && sha256sum "$@" | sha256sum | cut -c1-12); }

# The fetched kernel source package (newest), or nothing.
kernel_deb() {
    ls "$OXE_CACHE"/kernel-src/${KSRC_PKG}_*_all.deb 2>/dev/null | sort -V | tail -n1 || true
}

# The guest kernel comes in two flavours, each its own build tree:
#   plain  qemu-test/kernel.fragment: the yardstick (rxe suites, make bench)
#   debug  plus qemu-test/kernel-debug.fragment (KASAN, lockdep): oxe's suites
# and a third, `own`, the stand-in for a developer's own tree (KDIR): plus
# qemu-test/kernel-own.fragment, its source and its objects (O=) outside
# $OXE_CACHE, in $OXE_OWN_CACHE.
# The fragments a flavour is made of, in merge order.
kernel_fragments() {
    case "${1:-plain}" in
    plain) echo qemu-test/kernel.fragment ;;
    debug) echo qemu-test/kernel.fragment qemu-test/kernel-debug.fragment ;;
    own) echo qemu-test/kernel.fragment qemu-test/kernel-own.fragment ;;
    *) die "unknown kernel flavour '$1' (plain, debug or own)" ;;
    esac
}
OXE_OWN_CACHE=${OXE_OWN_CACHE:-$HOME/.cache/oxe-own-kernel}

# The kernel source version and a flavour's fragments: the key of its tree.
kernel_key() {
    local flavour=${1:-plain} deb ver
    deb=$(kernel_deb)
    [ -n "$deb" ] || die "kernel source not fetched yet: run 'make kernel'"
    ver=$(basename "$deb" | sed -e "s/^${KSRC_PKG}_//" -e 's/_all\.deb$//' -e 's/~/-/g')
    # shellcheck disable=SC2046 # one word per fragment
    echo "$ver-$flavour-$(hash_files $(kernel_fragments "$flavour"))"
}

# Where the kernel build tree (its objects: what KDIR names) for the current
# inputs lives (no side effects).
kernel_dir() {
    case "${1:-plain}" in
    own) echo "$OXE_OWN_CACHE/kernel-$(kernel_key own)/obj" ;;
    *) echo "$OXE_CACHE/kernel-$(kernel_key "$1")" ;;
    esac
}

# Where its source is: the same tree, but for `own`'s, built with O=.
kernel_src_dir() {
    case "${1:-plain}" in
    own) echo "$OXE_OWN_CACHE/kernel-$(kernel_key own)/src" ;;
    *) kernel_dir "$1" ;;
    esac
}

# Where oxe.ko is built for a flavour (MO=, the kernel's output directory for
# an external module): each flavour needs its own bindings and objects.
module_dir() {
    echo "$OXE_TOP/build/module-${1:-plain}"
}
