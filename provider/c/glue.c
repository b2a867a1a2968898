// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * The C side of the oxe provider: only what rdma-core expresses with C macros.
 * Everything else, including the three callbacks below, is Rust (src/ffi/).
 */
#include <infiniband/driver.h>

#include "oxe-abi.h"

/*
 * Implemented in Rust. Declaring them hidden makes the linker give the
 * definitions hidden visibility too, so that they stay out of the
 * provider's dynamic symbol table: libibverbs reaches a provider only
 * through the constructor. The table holds the direct verbs alone
 * (oxedv.h, versioned by liboxe.map).
 */
#define OXE_RUST_FN __attribute__((visibility("hidden")))
OXE_RUST_FN struct verbs_device *oxe_alloc_device(struct verbs_sysfs_dev *sysfs_dev);
OXE_RUST_FN void oxe_uninit_device(struct verbs_device *vdev);
OXE_RUST_FN struct verbs_context *oxe_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						    void *private_data);

/*
 * oxe is out of tree, so the kernel reports driver_id RDMA_DRIVER_UNKNOWN and
 * there is no id to match: match on the device name (oxe0, oxe1, ...) as
 * libibverbs' name matching does ("rdma_device:N<ibdev name>" against a glob).
 */
static const struct verbs_match_ent oxe_match_table[] = {
	VERBS_NAME_MATCH("oxe", NULL),
	{},
};

/* OXE_ABI_VERSION (oxe-abi.h, generated from oxe-core) is the kernel's uverbs_abi_ver. */
static const struct verbs_device_ops oxe_dev_ops = {
	.name = "oxe",
	.match_min_abi_version = OXE_ABI_VERSION,
	.match_max_abi_version = OXE_ABI_VERSION,
	.match_table = oxe_match_table,
	.alloc_device = oxe_alloc_device,
	.uninit_device = oxe_uninit_device,
	.alloc_context = oxe_alloc_context,
};

/* Registers oxe_dev_ops with libibverbs when the .so is dlopen()ed. */
PROVIDER_DRIVER(oxe, oxe_dev_ops);
