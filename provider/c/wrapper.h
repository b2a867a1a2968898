/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What bindgen reads: rdma-core's private provider interface (only present in
 * a configured rdma-core tree, under build/include), the libc items the
 * provider needs, oxe's driver ABI header (to check it against oxe-core), and
 * the direct verbs' header, whose types the exported oxedv_* functions take.
 * build.rs allowlists the few items actually used.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>

#include "oxe-abi.h"
#include "oxedv.h"
