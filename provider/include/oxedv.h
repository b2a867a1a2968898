/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * oxe direct verbs: what oxe offers beyond the standard verbs, exported by the
 * oxe provider (liboxe-rdmav59.so) as mlx5's direct verbs are by libmlx5.
 * Link against the provider, or dlopen it and look the symbols up. Every
 * symbol here has symbol version OXEDV_1.0.
 */
#ifndef OXEDV_H
#define OXEDV_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether `device` is an oxe device, so that the calls below apply to it. */
bool oxedv_is_supported(struct ibv_device *device);

struct oxedv_device_attr {
	/* Must be 0: no optional fields yet. */
	uint64_t comp_mask;
	/*
	 * Inline receive: the largest message, in bytes, that a receive
	 * completion carries, the provider copying it to the receive buffer in
	 * poll_cq. 0 when this context does not use inline receive: the
	 * process set OXE_SCATTER_TO_CQE=0 before opening it, or the kernel
	 * module predates it.
	 */
	uint32_t inline_recv_max;
	uint32_t reserved;
};

/* Fills `attr` for the context's device. 0, or an errno value. */
int oxedv_query_device(struct ibv_context *context, struct oxedv_device_attr *attr);

enum oxedv_qp_create_flags {
	/*
	 * Never deliver this QP's receives through the completion entry: the
	 * kernel writes every message into the receive buffer itself.
	 */
	OXEDV_QP_CREATE_DISABLE_SCATTER_TO_CQE = 1 << 0,
};

enum oxedv_qp_init_attr_mask {
	OXEDV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS = 1 << 0,
};

struct oxedv_qp_init_attr {
	/* OXEDV_QP_INIT_ATTR_MASK_* bits: which fields below are set. */
	uint64_t comp_mask;
	/* OXEDV_QP_CREATE_* bits. */
	uint32_t create_flags;
	uint32_t reserved;
};

/*
 * ibv_create_qp_ex() with oxe's own attributes (NULL: none). NULL with errno
 * set on failure: EINVAL for an unknown mask bit or flag, or a context that is
 * not oxe's.
 */
struct ibv_qp *oxedv_create_qp(struct ibv_context *context,
			       struct ibv_qp_init_attr_ex *qp_attr,
			       struct oxedv_qp_init_attr *oxe_attr);

/*
 * Indirect keys (mlx5's indirect mkeys): a key whose bytes are other keys'
 * bytes, addressed from 0. It is created Free (its keys grant nothing), gets
 * a layout and rights from a configuration posted on an extended QP
 * (oxedv_wr_mr_list, oxedv_wr_mr_interleaved), and is Free again after
 * ibv_wr_local_inv() or, if created with REMOTE_INVALIDATE, a peer's SEND
 * with Invalidate naming it; then it can be configured anew. Its lkey and
 * rkey are one key, used like an MR's in local SGEs and remote requests;
 * every configuration gives it a new low byte, written into mkey->lkey and
 * mkey->rkey when the configuration is built.
 *
 * Entries name MRs or other Valid indirect keys of the same PD, up to
 * OXE_MKEY_MAX_DEPTH (oxe-abi.h) levels of indirect keys; each must grant
 * every right the key grants and hold the whole entry. An access through
 * the key is checked at the key (bounds, rights, PD), then again at each
 * entry's key, looked up anew: an entry whose MR was deregistered or
 * invalidated since fails the access with a protection error.
 */
enum oxedv_mkey_init_attr_flags {
	/* Required: the key is indirect. */
	OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT = 1 << 0,
	/* A peer's SEND with Invalidate may invalidate the key. */
	OXEDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE = 1 << 1,
};

struct oxedv_mkey_init_attr {
	struct ibv_pd *pd;
	/* OXEDV_MKEY_INIT_ATTR_FLAGS_* bits. */
	uint32_t create_flags;
	/* The most entries a configuration may give the key: 1 to 32. */
	uint16_t max_entries;
};

struct oxedv_mkey {
	uint32_t lkey;
	uint32_t rkey;
};

/* A Free indirect key on attr->pd. NULL with errno set on failure. */
struct oxedv_mkey *oxedv_create_mkey(struct oxedv_mkey_init_attr *attr);

/* Destroys the key; 0, or an errno value (the key then stays valid). */
int oxedv_destroy_mkey(struct oxedv_mkey *mkey);

struct oxedv_mr_interleaved {
	uint64_t addr;
	uint32_t bytes_count;
	uint32_t bytes_skip;
	uint32_t lkey;
};

/*
 * Work request builders, used between ibv_wr_start() and ibv_wr_complete() on
 * an extended RC or UC QP, with the QP's wr_id and wr_flags as any builder.
 * The configuration completes with opcode IBV_WC_DRIVER1; a bad entry, a key
 * that is not Free or rights an entry lacks complete it with
 * IBV_WC_MW_BIND_ERR (IBTA's memory management operation error). A request
 * the provider can see is bad (no entries, more than the QP's max_send_sge
 * slots, zero rounds) fails ibv_wr_complete() with EINVAL.
 */

/*
 * The key becomes the num_sges ranges (addr, length, lkey) one after another:
 * byte 0 of the key is sge[0].addr. Each entry takes one SGE slot.
 */
void oxedv_wr_mr_list(struct ibv_qp_ex *qp, struct oxedv_mkey *mkey,
		      uint32_t access_flags, uint16_t num_sges,
		      const struct ibv_sge *sge);

/*
 * The key becomes repeat_count rounds of the entries: in round r, entry i
 * contributes bytes_count bytes from data[i].addr + r * (bytes_count +
 * bytes_skip). Each entry takes two SGE slots.
 */
void oxedv_wr_mr_interleaved(struct ibv_qp_ex *qp, struct oxedv_mkey *mkey,
			     uint32_t access_flags, uint32_t repeat_count,
			     uint16_t num_interleaved,
			     const struct oxedv_mr_interleaved *data);

#ifdef __cplusplus
}
#endif

#endif /* OXEDV_H */
