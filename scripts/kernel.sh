#!/usr/bin/env bash
# Fetches Linux 7.3 from Debian trixie-backports and builds a guest kernel in
# $OXE_CACHE (`own`: in $OXE_OWN_CACHE, see lib.sh).
#   kernel.sh build|dir [plain|debug|own]
# Each flavour's build tree is keyed by source version and its fragments (see
# kernel_fragments in lib.sh); the out-of-tree module builds against it.
source "$(dirname "$0")/lib.sh"

fetch_source() {
    local dir=$OXE_CACHE/kernel-src mirror
    mkdir -p "$dir/apt"
    # A private sources list: trixie is never added to the system's apt sources.
    # Same mirror as the machine's own bookworm entries.
    mirror=$(debian_mirror)
    echo "deb $mirror trixie-backports main" >"$dir/apt/sources.list"
    local apt_opts
    mapfile -t apt_opts < <(private_apt_opts "$dir/apt")
    if [ -n "$(kernel_deb)" ]; then
        return
    fi
    log "fetching $KSRC_PKG from trixie-backports ($mirror)"
    apt-get "${apt_opts[@]}" update -qq
    if ! apt-cache "${apt_opts[@]}" show "$KSRC_PKG" >/dev/null 2>&1; then
        local offered
        offered=$(apt-cache "${apt_opts[@]}" search '^linux-source-[0-9]' | cut -d' ' -f1 | xargs)
        die "$KSRC_PKG has left trixie-backports; on offer now: ${offered:-nothing}. Update KSRC_PKG in scripts/lib.sh and the fragment."
    fi
    (cd "$dir" && apt-get "${apt_opts[@]}" download -qq "$KSRC_PKG")
}

build() {
    local flavour=${1:-plain} kdir src frag
    kdir=$(kernel_dir "$flavour")
    src=$(kernel_src_dir "$flavour")
    local frags=()
    for frag in $(kernel_fragments "$flavour"); do frags+=("$OXE_TOP/$frag"); done
    if [ -f "$kdir/.oxe-built" ]; then
        echo "$kdir"
        return
    fi
    local deb
    deb=$(kernel_deb)
    if [ ! -f "$src/Makefile" ]; then
        log "unpacking $(basename "$deb") into $src"
        rm -rf "$src.tmp" && mkdir -p "$src.tmp"
        dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
            tar -xJ -C "$src.tmp" --strip-components=1
        mv "$src.tmp" "$src"
    fi
    # The cached flavours build in their source tree; `own` as a developer
    # often does, with its objects apart (O=), which KDIR then names.
    local mk=("${KMAKE[@]}" -C "$src")
    [ "$src" = "$kdir" ] || mk+=(O="$kdir")
    mkdir -p "$kdir"
    log "configuring the $flavour kernel: tinyconfig + $(kernel_fragments "$flavour")"
    "${mk[@]}" -s tinyconfig
    "$src/scripts/kconfig/merge_config.sh" -m -Q -O "$kdir" "$kdir/.config" "${frags[@]}" >/dev/null
    "${mk[@]}" -s olddefconfig
    # Every line of the fragment must have survived olddefconfig: a silently
    # dropped option (a missing dependency) would otherwise surface as a baffling test failure.
    local bad=0 line sym val
    while IFS= read -r line; do
        case "$line" in CONFIG_*=*) ;; *) continue ;; esac
        sym=${line%%=*} val=${line#*=}
        if [ "$val" = n ]; then
            grep -q "^$sym=" "$kdir/.config" && { log "fragment: $sym should be off"; bad=1; }
        elif ! grep -qx "$line" "$kdir/.config"; then
            log "fragment: $line did not survive olddefconfig (got: $(grep "^$sym=" "$kdir/.config" || echo unset))"
            bad=1
        fi
    done < <(cat "${frags[@]}")
    [ $bad = 0 ] || die "kernel config does not match $(kernel_fragments "$flavour")"
    "${mk[@]}" -s rustavailable >/dev/null || die "Rust is not available to the kernel build"
    # The build's own output goes to a log; a line every minute says how
    # far it has come, so that a first build is not half an hour of silence.
    local blog=$OXE_CACHE/logs/kernel-$flavour.log
    mkdir -p "$OXE_CACHE/logs"
    log "building the $flavour kernel in $kdir (15 to 25 minutes on 2 cores; log: $blog)"
    local t0=$SECONDS stamp pid rc=0
    stamp=$(mktemp)
    "${mk[@]}" -j"$(($(nproc) + 1))" bzImage modules >"$blog" 2>&1 &
    pid=$!
    while ! wait_secs "$pid" 60; do
        log "  $flavour kernel: $(find "$kdir" -name '*.o' -newer "$stamp" | wc -l) objects built, $(((SECONDS - t0) / 60)) min"
    done
    wait "$pid" || rc=$?
    rm -f "$stamp"
    if [ $rc != 0 ]; then
        tail -n 40 "$blog" >&2
        die "the $flavour kernel did not build (exit $rc): $blog has the whole log"
    fi
    log "$flavour kernel built in $((SECONDS - t0)) s"
    touch "$kdir/.oxe-built"
    # Trees of this flavour for older fragments or source versions (2+ GiB
    # each) are dead weight now, as are trees from before the flavours.
    if [ "$flavour" = own ]; then
        find "$OXE_OWN_CACHE" -mindepth 1 -maxdepth 1 -name 'kernel-*' ! -path "${kdir%/obj}" -exec rm -rf {} +
    else
        find "$OXE_CACHE" -maxdepth 1 -name 'kernel-[0-9]*' ! -path "$kdir" \
            \( -name "*-$flavour-*" -o ! -name '*-plain-*' ! -name '*-debug-*' \) -exec rm -rf {} +
    fi
    echo "$kdir"
}

# Waits up to SECS for process PID to end: 0 once it has, 1 if it still runs.
wait_secs() { # pid secs
    local i
    for ((i = 0; i < $2; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 1
    done
    ! kill -0 "$1" 2>/dev/null
}

case "${1:-build}" in
fetch) fetch_source ;;
build) fetch_source && build "${2:-plain}" ;;
dir) kernel_dir "${2:-plain}" ;;
*) die "usage: $0 [fetch|build|dir] [plain|debug|own]" ;;
esac
