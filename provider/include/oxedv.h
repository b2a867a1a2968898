/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * oxe direct verbs: what oxe offers beyond the standard verbs, exported by the
 * oxe provider (liboxe-rdmav59.so) as mlx5's direct verbs are by libmlx5.
 * Link against the provider, or dlopen it and look the symbols up.
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

#ifdef __cplusplus
}
#endif

#endif /* OXEDV_H */
