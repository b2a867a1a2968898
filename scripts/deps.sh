#!/usr/bin/env bash
# Idempotent: installs what oxe needs on Debian bookworm, from the registries only.
#   - Debian packages listed in scripts/deps-packages.txt (apt, as root)
#   - bindgen-cli, pinned, from the crate registry (into $OXE_CACHE/tools)
#   - virtme-ng, pinned, from PyPI (into a venv in $OXE_CACHE)
source "$(dirname "$0")/lib.sh"

pkgs=$(grep -v '^#' "$OXE_TOP/scripts/deps-packages.txt" | xargs)
missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $pkgs 2>/dev/null |
    awk '$1 == "ii" { print $2 }' | sort | comm -13 - <(tr ' ' '\n' <<<"$pkgs" | sort))
if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || die "need root to install: $missing"
    log "installing Debian packages: $(echo $missing)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ "$("$TOOLS/bin/bindgen" --version 2>/dev/null)" != "bindgen $BINDGEN_VERSION" ]; then
    log "installing bindgen-cli $BINDGEN_VERSION"
    cargo install --quiet --locked --root "$TOOLS" "bindgen-cli@$BINDGEN_VERSION"
fi

if [ "$("$VENV/bin/vng" --version 2>/dev/null)" != "virtme-ng $VIRTME_NG_VERSION" ]; then
    log "installing virtme-ng $VIRTME_NG_VERSION"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "virtme-ng==$VIRTME_NG_VERSION" scikit-build-core setuptools_scm
fi
