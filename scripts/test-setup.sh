#!/usr/bin/env bash
# Host test of the setup logic itself, which CI cannot exercise: CI machines
# already have every package, so a broken install path would pass unnoticed
# there (a fresh machine once stopped after 0.04 s with no message at all).
# Runs in `make host-test`; needs no network, no root and installs nothing.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { printf '  ok   %s\n' "$1"; }
bad() { printf '  FAIL %s\n' "$1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

unknown=oxe-no-such-package-$$
installed=$(dpkg-query -W -f='${Package}\n' bash coreutils 2>/dev/null | head -n1)

# 1. The missing-package computation, under the same shell options as deps.sh.
out=$(bash -c "set -Eeuo pipefail; source '$top/scripts/packages.sh'
    missing_packages $installed $unknown; echo done" 2>&1)
rc=$?
check "a package dpkg never heard of is reported missing, not fatal" \
    '[ $rc = 0 ] && grep -qx "$unknown" <<<"$out" && tail -n1 <<<"$out" | grep -qx done'
check "an installed package ($installed) is not reported" '! grep -qx "$installed" <<<"$out"'

printf '# comment\n\n  pkg-a  \npkg-b # trailing\n#pkg-c\n' >"$tmp/list"
out=$(bash -c "set -Eeuo pipefail; source '$top/scripts/packages.sh'; package_list '$tmp/list' | xargs")
check "package_list skips comments and blanks" '[ "$out" = "pkg-a pkg-b" ]'

# 2. deps.sh end to end with a list naming the unknown package and a stand-in
# apt-get on PATH: it must try to install exactly that package, and say so
# when the install fails or leaves it missing.
mkdir -p "$tmp/bin"
printf '%s\n' "$installed" "$unknown" >"$tmp/deps.txt"
cat >"$tmp/bin/apt-get" <<EOS
#!/bin/sh
echo "\$*" >>"$tmp/apt-calls"
[ "\$1" = install ] && [ "\${FAKE_APT_FAIL:-0}" = 1 ] && { echo "E: Unable to locate package $unknown" >&2; exit 100; }
exit 0
EOS
chmod +x "$tmp/bin/apt-get"
run_deps() {
    env PATH="$tmp/bin:$PATH" OXE_CACHE="$tmp/cache" OXE_DEPS_LIST="$tmp/deps.txt" "$@" \
        bash "$top/scripts/deps.sh" 2>&1
}
if [ "$(id -u)" = 0 ]; then
    out=$(run_deps FAKE_APT_FAIL=0)
    rc=$?
    check "deps.sh asks apt-get for exactly the missing package" \
        'grep -q "^install .* $unknown\$" "$tmp/apt-calls" && ! grep -q " $installed" "$tmp/apt-calls"'
    check "deps.sh fails loudly when apt-get leaves a package missing" \
        '[ $rc != 0 ] && grep -q "still not installed: $unknown" <<<"$out"'
    out=$(run_deps FAKE_APT_FAIL=1)
    rc=$?
    check "deps.sh fails loudly when apt-get install fails" \
        '[ $rc != 0 ] && grep -q "apt-get install failed for: $unknown" <<<"$out" && grep -q "Unable to locate" <<<"$out"'
else
    out=$(run_deps)
    rc=$?
    check "deps.sh without root names what it would install" \
        '[ $rc != 0 ] && grep -q "need root.*$unknown" <<<"$out"'
fi

# 3. No silent exits: any failing command in a script on lib.sh is named.
out=$(OXE_CACHE="$tmp/cache" bash -c "source '$top/scripts/lib.sh'; f() { false; }; f; echo unreachable" 2>&1)
rc=$?
check "lib.sh's ERR trap names the failing command" \
    '[ $rc != 0 ] && grep -q "error: \"false\" failed with exit status 1" <<<"$out" && ! grep -q unreachable <<<"$out"'

# 4. The guest's dmesg check: real reports match, the debug kernel's boot lines do not.
source "$top/qemu-test/guest/splats.sh"
for line in \
    "WARNING: possible circular locking dependency detected" \
    "WARNING: inconsistent lock state" \
    "BUG: KASAN: slab-out-of-bounds in oxe_copy+0x1c/0x40 [oxe]" \
    "BUG: sleeping function called from invalid context at mm/slub.c:4154" \
    "INFO: lockdep is turned off." \
    "INFO: task kworker/0:1:12 blocked for more than 60 seconds." \
    "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kworker/u8:2:57]" \
    "rcu: INFO: rcu_preempt self-detected stall on CPU"; do
    check "splat: $line" 'grep -Eq "$SPLAT_RE" <<<"$line"'
done
for line in \
    "RCU lockdep checking is enabled." \
    "kasan: KernelAddressSanitizer initialized (generic)" \
    "Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar" \
    "... MAX_LOCKDEP_SUBCLASSES:  8"; do
    check "not a splat: $line" '! grep -Eq "$SPLAT_RE" <<<"$line"'
done

# The layering check (make check) fails on a new upward reference, a new
# unsafe block in the driver, and a debt line that is paid off.
lt=$(mktemp -d)
mkdir -p "$lt/rust/ib"
printf 'use crate::ib::lock;\nuse crate::oxe_core::Psn;\n' >"$lt/rust/ib/a.rs"
printf 'fn f() {}\n' >"$lt/rust/drv.rs"
check "layering: a driver file without #![deny(unsafe_code)] fails" "! python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
printf '#![deny(unsafe_code)]\nfn f() {}\n' >"$lt/rust/drv.rs"
check "layering: a clean tree passes" "python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
printf 'use crate::{mr, ib::lock};\n' >>"$lt/rust/ib/a.rs"
check "layering: rust/ib using crate::{mr, ..} fails" "! python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
echo "rust/ib/a.rs: crate::mr" >"$lt/rust/layering-debt.txt"
check "layering: a listed exception passes" "python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
printf 'fn g() { unsafe { h() } } // unsafe in a comment is fine\n' >>"$lt/rust/drv.rs"
check "layering: unsafe in a driver file fails" "! python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
printf '#![deny(unsafe_code)]\nfn g() {}\n' >"$lt/rust/drv.rs"
printf 'use crate::ib::lock;\n' >"$lt/rust/ib/a.rs"
check "layering: a paid-off debt line fails until removed" "! python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
rm "$lt/rust/layering-debt.txt"
mkdir -p "$lt/provider/src/ffi"
printf 'mod ffi;\n' >"$lt/provider/src/lib.rs"
printf 'mod a;\nmod b;\n' >"$lt/provider/src/ffi/mod.rs"
printf 'use super::b::g;\n' >"$lt/provider/src/ffi/a.rs"
printf 'fn g() {}\n' >"$lt/provider/src/ffi/b.rs"
check "layering: a provider without import circles passes" "python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
printf 'use crate::ffi::a::f;\nfn g() {}\n' >"$lt/provider/src/ffi/b.rs"
check "layering: a provider import circle fails" "! python3 '$top/scripts/check_layers.py' '$lt' >/dev/null"
rm -rf "$lt"

# The prose check (make check): a measurement or a story in a comment under
# rust/ fails unless listed in rust/prose-debt.txt, and a listed line that
# is gone fails too.
pt=$(mktemp -d)
mkdir -p "$pt/rust"
printf '/// Faster this way.\nfn f() {}\n' >"$pt/rust/a.rs"
check "prose: a comment saying why passes" "python3 '$top/scripts/check_prose.py' '$pt' >/dev/null"
printf '/// 32 ran 775 MB/s, was tried in 4 rounds of vm.sh ab.\nfn f() {}\n' >"$pt/rust/a.rs"
check "prose: a measurement in a comment fails" "! python3 '$top/scripts/check_prose.py' '$pt' >/dev/null"
python3 "$top/scripts/check_prose.py" "$pt" --write-debt >/dev/null
check "prose: a listed one passes" "python3 '$top/scripts/check_prose.py' '$pt' >/dev/null"
printf '/// Faster this way.\nfn f() {}\n' >"$pt/rust/a.rs"
check "prose: a paid-off debt line fails until removed" "! python3 '$top/scripts/check_prose.py' '$pt' >/dev/null"
rm -rf "$pt"

# The ratchet (qemu-test/results.py): a suite is held to its list, and a
# missing or empty list fails rather than passing whatever ran.
rt=$(mktemp -d)
res=$top/qemu-test/results.py
# Verdicts come from the runner's result (guest/verdicts.py), not its output.
cat >"$rt/m.py" <<'EOF'
import unittest
class C(unittest.TestCase):
    def test_a(self):
        print("test_b (m.C.test_b) ... ok")
    def test_b(self):
        self.fail("no")
    def test_c(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(i, 0)
EOF
(cd "$rt" && OXE_VERDICTS=$rt/x.runner.json python3 "$top/qemu-test/guest/verdicts.py" m >"$rt/x.log" 2>&1)
check "verdicts: the runner's result, not its output" "'$res' unittest '$rt/x.log' x dev 1 | grep '\"ok\": 1, \"failures\": 2' >/dev/null"
check "verdicts: a failed subtest fails its test" "grep '\"m.C.test_c\": \"FAIL\"' '$rt/x.verdicts.json' >/dev/null"
printf 'ok\n' >"$rt/y.log"
check "verdicts: a runner that left none fails" "! '$res' unittest '$rt/y.log' y dev 1 2>/dev/null"
printf 'm.C.test_a\n' >"$rt/listed.txt"
check "ratchet: a listed test that passed passes" "'$res' ratchet '$rt/listed.txt' '$rt/x.verdicts.json' >/dev/null"
check "ratchet: an unlisted failure is reported" "'$res' ratchet '$rt/listed.txt' '$rt/x.verdicts.json' | grep 'unlisted: m.C.test_b: FAIL' >/dev/null"
printf 'm.C.test_a\nm.C.test_b\n' >"$rt/both.txt"
check "ratchet: a listed test that failed fails" "! '$res' ratchet '$rt/both.txt' '$rt/x.verdicts.json' >/dev/null"
check "ratchet: a missing expectations file fails" "! '$res' ratchet '$rt/none.txt' '$rt/x.verdicts.json' >/dev/null"
printf '# only a comment\n' >"$rt/empty.txt"
check "ratchet: an expectations file listing nothing fails" "! '$res' ratchet '$rt/empty.txt' '$rt/x.verdicts.json' >/dev/null"
# Every guest guests.sh boots has its list of expected suites.
for m in $(sed -n 's/^runs=(\(.*\))$/\1/p' "$top/scripts/guests.sh" | head -n1 | tr -d '"' | awk '{ for (i = 1; i <= NF; i += 2) print $i }'); do
    check "guest $m has a list of expected suites" "[ -s '$top/qemu-test/expected/suites/$m.txt' ]"
done
rm -rf "$rt"

# The KDIR preflight (scripts/kdir.sh), on stand-in trees and toolchains:
# a tree that has what oxe needs passes; one that lacks an option, its build
# and the rustc it was built with fails, naming all three at once.
kt=$(mktemp -d)
mkdir -p "$kt/tree/include/config" "$kt/tree/rust" "$kt/bin"
for t in rustc bindgen clang; do
    printf '#!/bin/sh\necho "%s 1.0 (stand-in)"\n' "$t" >"$kt/bin/$t"
    chmod +x "$kt/bin/$t"
done
{
    for o in RUST MODULES INFINIBAND INFINIBAND_USER_ACCESS INFINIBAND_ON_DEMAND_PAGING MMU_NOTIFIER \
        HMM_MIRROR INET IPV6 NET_UDP_TUNNEL INFINIBAND_ADDR_TRANS RDMA_RXE DEBUG_FS NET_NS VETH; do
        echo "CONFIG_$o=y"
    done
    echo 'CONFIG_CC_IS_CLANG=y'
    echo 'CONFIG_RUSTC_VERSION_TEXT="rustc 1.0 (stand-in)"'
    echo 'CONFIG_BINDGEN_VERSION_TEXT="bindgen 1.0 (stand-in)"'
    echo 'CONFIG_CC_VERSION_TEXT="clang 1.0 (stand-in)"'
} >"$kt/tree/.config"
touch "$kt/tree/Makefile" "$kt/tree/include/config/auto.conf" "$kt/tree/Module.symvers" "$kt/tree/rust/libkernel.rmeta"
kdir_check() {
    OXE_CACHE="$tmp/cache" RUSTC="$kt/bin/rustc" BINDGEN="$kt/bin/bindgen" LLVM="$kt/bin/" \
        bash "$top/scripts/kdir.sh" check "$kt/tree" 2>&1
}
out=$(kdir_check)
check "kdir preflight: a tree with what oxe needs passes" "[ $? = 0 ]"
sed -i 's/^CONFIG_INFINIBAND_ON_DEMAND_PAGING=y$/# CONFIG_INFINIBAND_ON_DEMAND_PAGING is not set/' "$kt/tree/.config"
sed -i 's/^CONFIG_RUSTC_VERSION_TEXT=.*/CONFIG_RUSTC_VERSION_TEXT="rustc 2.0"/' "$kt/tree/.config"
rm "$kt/tree/Module.symvers"
out=$(kdir_check)
rc=$?
check "kdir preflight: a tree lacking an option, its build and its rustc fails" "[ $rc != 0 ]"
check "kdir preflight: names the missing option" "grep -q 'CONFIG_INFINIBAND_ON_DEMAND_PAGING is not set' <<<\"\$out\""
check "kdir preflight: names the unbuilt tree" "grep -q 'the tree is not built' <<<\"\$out\""
check "kdir preflight: names the other rustc" "grep -q \"built with 'rustc 2.0'\" <<<\"\$out\""
rm -rf "$kt"

[ $fails = 0 ] && echo "setup tests: all passed" || echo "setup tests: $fails failed"
[ $fails = 0 ]
