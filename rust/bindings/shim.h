/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for what bindgen cannot reach: macros and static inline functions
 * of the RDMA, net and mm headers. Each is a one-line forwarder; the logic stays
 * in Rust.
 */
#ifndef OXE_SHIM_H
#define OXE_SHIM_H

#include <linux/netdevice.h>
#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>

struct net *oxe_shim_dev_net(const struct net_device *ndev);
bool oxe_shim_netif_running(const struct net_device *ndev);
bool oxe_shim_netif_carrier_ok(const struct net_device *ndev);
void oxe_shim_dev_hold(struct net_device *ndev);
void oxe_shim_dev_put(struct net_device *ndev);
void oxe_shim_node_guid_from_mac(const struct net_device *ndev, __be64 *guid);
struct ib_umem *oxe_shim_ib_umem_get(struct ib_device *dev, u64 addr, size_t size, int access);
/* Page frame numbers of a umem's pages, in order; returns how many were written. */
size_t oxe_shim_umem_pfns(struct ib_umem *umem, unsigned long skip, unsigned long *pfns, size_t max);
bool oxe_shim_is_err(const void *ptr);
long oxe_shim_ptr_err(const void *ptr);
void *oxe_shim_err_ptr(long err);
struct net_device *oxe_shim_netdev_notifier_info_to_dev(void *info);

void oxe_shim_consume_skb(struct sk_buff *skb);
int oxe_shim_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
size_t oxe_shim_udata_outlen(const struct ib_udata *udata);
struct nlattr *oxe_shim_nla_nest_start_driver(struct sk_buff *msg);
void oxe_shim_nla_nest_end(struct sk_buff *msg, struct nlattr *start);
void oxe_shim_nla_nest_cancel(struct sk_buff *msg, struct nlattr *start);
int oxe_shim_udp_tunnel_open(struct net *net, bool ipv6, struct socket **sockp,
			     int (*rcv)(struct sock *sk, struct sk_buff *skb));
void oxe_shim_dispatch_port_event(struct ib_device *dev, u32 port, enum ib_event_type type);
unsigned int oxe_shim_netdev_mtu(const struct net_device *ndev);
void oxe_shim_udp_tunnel_close(struct socket *sock);
struct dentry *oxe_shim_debugfs_mr_file(const char *name, struct dentry *parent, void *mr);

#endif
