/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * oxe driver-private uverbs ABI.
 *
 * Generated from rust/core/src/abi.rs by
 * `cargo run --example gen_abi_header`; do not edit.
 */
#ifndef OXE_ABI_USER_H
#define OXE_ABI_USER_H

#include <linux/types.h>

#define OXE_ABI_VERSION 1

enum oxe_uctx_caps {
	OXE_UCTX_CAP_REREG_TRANS = 1 << 0,
	OXE_UCTX_CAP_REREG_PD = 1 << 1,
	OXE_UCTX_CAP_REREG_ACCESS = 1 << 2,
};

struct oxe_alloc_ucontext_resp {
	__u32 abi_version;
	__u32 caps;
	__u32 max_inline;
	__u32 reserved;
};

struct oxe_reg_mr_resp {
	__u32 page_shift;
	__u32 reserved;
};

#endif /* OXE_ABI_USER_H */
