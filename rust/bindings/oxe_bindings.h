/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C API oxe binds: bindgen turns everything reachable from here that the
 * kernel crate does not already bind into rust/bindings/generated.rs.
 */
#include <linux/crc32.h>
#include <linux/hmm.h>
#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/rdma_netlink.h>
#include <rdma/restrack.h>
#include <rdma/uverbs_ioctl.h>
#include "shim.h"
#include "oxe_trace.h"
