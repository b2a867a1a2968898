#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Runs bindgen for oxe the way the kernel runs it for its own `bindings` crate
# (same flags, same parameters file), but leaves out every name the kernel crate
# already binds: those come from `kernel::bindings`, so a `net_device` here is the
# kernel crate's `net_device`, not a second declaration of it.
#   bindgen.sh BINDGEN HEADER OUT OBJTREE SRCTREE -- CLANG_FLAGS...
set -eo pipefail
bindgen=$1 header=$2 out=$3 objtree=$4 srctree=$5
shift 5
[ "$1" = -- ] && shift

# The parameters file is written for a shell to unquote (make hands it to one).
eval "params=($(grep -Ev '^#|^$' "$srctree/rust/bindgen_parameters"))"
run_bindgen() { # output extra-bindgen-args...
    local o=$1
    shift
    "$bindgen" "$header" "${params[@]}" \
        --rust-target 1.85 --use-core --with-derive-default --ctypes-prefix ffi --no-layout-tests \
        --no-debug '.*' --enable-function-attribute-detection \
        --allowlist-file '.*/include/rdma/.*' --allowlist-file '.*/include/uapi/rdma/.*' \
        --allowlist-function 'oxe_shim_.*' \
        --allowlist-var '__tracepoint_oxe_.*' --allowlist-function 'rust_do_trace_oxe_.*' \
        --allowlist-function 'udp_tunnel_sock_release' \
        --allowlist-function 'register_netdevice_notifier|unregister_netdevice_notifier|__ip_select_ident|dev_mc_add|dev_mc_del' \
        --allowlist-function 'vfree|remap_vmalloc_range|crc32_le' \
        --allowlist-type 'netdev_cmd|hmm_pfn_flags' --allowlist-var 'MMU_NOTIFIER_RANGE_BLOCKABLE' \
        --opaque-type 'ib_mad_notice_attr.*' \
        "$@" -o "$o" -- "${clang_flags[@]}"
}
clang_flags=("$@" -w --target=x86_64-linux-gnu -fno-builtin -D__BINDGEN__ -DMODULE)

names() { sed -n -E 's/^ *pub (struct|union|type|fn|const|static|enum) ([A-Za-z_][A-Za-z0-9_]*).*/\2/p' "$@" | sort -u; }

# Pass 1 finds what our headers reach; pass 2 leaves out what the kernel crate has.
# (A blocklist of all ~40k kernel names is too large a regex for bindgen.)
run_bindgen "$out.all"
dups=$(comm -12 <(names "$out.all") \
    <(names "$objtree/rust/bindings/bindings_generated.rs" "$objtree/rust/bindings/bindings_helpers_generated.rs"))
rm -f "$out.all"
block=()
if [ -n "$dups" ]; then
    block=(--blocklist-item "^($(paste -sd'|' <<<"$dups"))\$")
fi
run_bindgen "$out" "${block[@]}"
# `#[cfi_encoding]` is an unstable attribute only the kernel's own bindings crate
# may use; oxe calls none of these enum-typed function pointers itself.
sed -i '/^#\[cfi_encoding = /d' "$out"
