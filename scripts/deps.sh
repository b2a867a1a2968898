#!/usr/bin/env bash
# Idempotent: installs what oxe needs on Debian bookworm, from the registries only.
#   - Debian packages listed in scripts/deps-packages.txt (apt, as root)
#   - bindgen-cli, pinned, from the crate registry (into $OXE_CACHE/tools)
#   - virtme-ng, pinned, from PyPI (into a venv in $OXE_CACHE)
# Every step that fails says which step and why (see the ERR trap in lib.sh).
source "$(dirname "$0")/lib.sh"
source "$OXE_TOP/scripts/packages.sh"

# OXE_DEPS_LIST: another list, for scripts/test-setup.sh.
mapfile -t pkgs < <(package_list "${OXE_DEPS_LIST:-$OXE_TOP/scripts/deps-packages.txt}")
mapfile -t missing < <(missing_packages "${pkgs[@]}")
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "need root to install these Debian packages: ${missing[*]}"
    log "installing ${#missing[@]} Debian package(s): ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed: check the network and /etc/apt/sources.list"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$OXE_CACHE/apt-install.log" 2>&1 || {
        tail -n 30 "$OXE_CACHE/apt-install.log" >&2
        die "apt-get install failed for: ${missing[*]} (whole log: $OXE_CACHE/apt-install.log)"
    }
    mapfile -t still < <(missing_packages "${missing[@]}")
    [ ${#still[@]} = 0 ] || die "apt-get reported success but these are still not installed: ${still[*]}"
fi

for tool in cargo /usr/bin/rustc /usr/bin/python3; do
    command -v "$tool" >/dev/null || die "$tool not found after installing the packages"
done

if [ "$("$TOOLS/bin/bindgen" --version 2>/dev/null)" != "bindgen $BINDGEN_VERSION" ]; then
    log "installing bindgen-cli $BINDGEN_VERSION from crates.io"
    cargo install --quiet --locked --root "$TOOLS" "bindgen-cli@$BINDGEN_VERSION" ||
        die "cargo install bindgen-cli@$BINDGEN_VERSION failed"
fi

if [ "$("$VENV/bin/vng" --version 2>/dev/null)" != "virtme-ng $VIRTME_NG_VERSION" ]; then
    log "installing virtme-ng $VIRTME_NG_VERSION from PyPI"
    /usr/bin/python3 -m venv "$VENV" || die "python3 -m venv $VENV failed (python3-venv missing?)"
    "$VENV/bin/pip" install -q "virtme-ng==$VIRTME_NG_VERSION" scikit-build-core setuptools_scm ||
        die "pip install virtme-ng==$VIRTME_NG_VERSION failed"
fi
