# Which Debian packages are missing. Sourced by deps.sh and by the host test
# (scripts/test-setup.sh), so the test exercises the very code a fresh machine runs.
#
# One dpkg-query per package, on purpose: dpkg-query exits 1 when any name it is
# given is unknown to dpkg (never installed, not even removed), and on a fresh
# machine most names are. Run over the whole list inside a pipeline under
# `set -o pipefail`, that exit status killed deps.sh before it installed anything.

# The package names in a list file: one per line, '#' comments and blanks ignored.
package_list() {
    sed -e 's/#.*//' -e 's/[[:space:]]//g' "$1" | { grep -v '^$' || true; }
}

# Prints each named package that is not fully installed ("ii"), one per line.
missing_packages() {
    local p status
    for p in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) || status=
        case "$status" in ii*) ;; *) echo "$p" ;; esac
    done
}
