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

enum oxe_create_cq_flags {
	OXE_CREATE_CQ_INLINE_RECV = 1 << 0,
};

enum oxe_create_qp_flags {
	OXE_CREATE_QP_NO_INLINE_RECV = 1 << 0,
};

enum oxe_indirect_keys {
	OXE_REG_MR_INDIRECT = 1 << 0,
	OXE_REG_MR_REMOTE_INVALIDATE = 1 << 1,
	OXE_MKEY_MAX_ENTRIES = 1 << 5,
	OXE_MKEY_MAX_DEPTH = 1 << 2,
	OXE_WR_MKEY_CONFIGURE = 1 << 4,
	OXE_WC_MKEY_CONFIGURE = 1 << 0,
};

enum oxe_inline_recv_layout {
	OXE_CQE_INLINE_SLOT = 256,
	OXE_CQE_INLINE_DATA = 64,
	OXE_INLINE_RECV_MAX = 64,
	OXE_CQE_INLINE_PIECES = 128,
	OXE_INLINE_RECV_PIECES = 8,
};

enum oxe_queue_layout {
	OXE_QUEUE_PRODUCER = 0,
	OXE_QUEUE_CONSUMER = 64,
	OXE_QUEUE_SLOTS = 128,
};

enum oxe_send_flags {
	OXE_SEND_FENCE = 1 << 0,
	OXE_SEND_SIGNALED = 1 << 1,
	OXE_SEND_SOLICITED = 1 << 2,
	OXE_SEND_INLINE = 1 << 3,
};

enum oxe_wc_flags {
	OXE_WC_GRH = 1 << 0,
	OXE_WC_WITH_IMM = 1 << 1,
	OXE_WC_WITH_INV = 1 << 2,
	OXE_WC_INLINE = 1 << 3,
};

struct oxe_alloc_ucontext_resp {
	__u32 abi_version;
	__u32 caps;
	__u32 max_inline;
	__u32 inline_recv_max;
};

struct oxe_reg_mr_resp {
	__u32 page_shift;
	__u32 reserved;
};

struct oxe_queue_map {
	__aligned_u64 mmap_offset;
	__aligned_u64 mmap_len;
	__u32 num_slots;
	__u32 slot_size;
};

struct oxe_create_cq_cmd {
	__u32 flags;
	__u32 reserved;
};

struct oxe_reg_mr_cmd {
	__u32 flags;
	__u32 max_entries;
};

struct oxe_create_qp_cmd {
	__u32 flags;
	__u32 reserved;
};

struct oxe_inline_piece {
	__aligned_u64 va;
	__u32 length;
	__u32 reserved;
};

struct oxe_create_cq_resp {
	struct oxe_queue_map cq;
};

struct oxe_resize_cq_resp {
	struct oxe_queue_map cq;
};

struct oxe_create_qp_resp {
	struct oxe_queue_map sq;
	struct oxe_queue_map rq;
	__u32 max_inline;
	__u32 reserved;
};

struct oxe_create_srq_resp {
	struct oxe_queue_map srq;
	__u32 srq_num;
	__u32 reserved;
};

struct oxe_modify_srq_cmd {
	__aligned_u64 resize_resp;
	__u32 resize_resp_len;
	__u32 reserved;
};

struct oxe_resize_srq_resp {
	struct oxe_queue_map srq;
};

struct oxe_create_ah_resp {
	__u32 ah_num;
	__u32 reserved;
};

struct oxe_send_wqe {
	__aligned_u64 wr_id;
	__u32 opcode;
	__u32 send_flags;
	__u32 num_sge;
	__u32 imm_data;
	__aligned_u64 remote_addr;
	__u32 rkey;
	__u32 remote_qpn;
	__u32 remote_qkey;
	__u32 ah_num;
	__aligned_u64 compare_add;
	__aligned_u64 swap;
};

struct oxe_recv_wqe {
	__aligned_u64 wr_id;
	__u32 num_sge;
	__u32 reserved;
};

struct oxe_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

struct oxe_cqe {
	__aligned_u64 wr_id;
	__u32 status;
	__u32 opcode;
	__u32 vendor_err;
	__u32 byte_len;
	__u32 imm_data;
	__u32 qp_num;
	__u32 src_qp;
	__u32 wc_flags;
	__u32 pkey_index;
	__u32 network_hdr_type;
	__aligned_u64 reserved0;
	__aligned_u64 reserved1;
};

#endif /* OXE_ABI_USER_H */
