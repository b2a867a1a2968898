// SPDX-License-Identifier: GPL-2.0
/* One-line forwarders for macros and static inlines; see shim.h. */
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/sched/mm.h>
#include <net/addrconf.h>
#include <rdma/uverbs_ioctl.h>
#include <net/udp_tunnel.h>
#include <rdma/rdma_netlink.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include "shim.h"

/* Implemented in Rust (rust/ib/debugfs.rs): prints one MR's translation. */
int oxe_rs_mr_show(struct seq_file *m, void *mr);

struct net *oxe_shim_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

bool oxe_shim_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool oxe_shim_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

void oxe_shim_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void oxe_shim_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

void oxe_shim_node_guid_from_mac(const struct net_device *ndev, __be64 *guid)
{
	u8 mac[ETH_ALEN];

	if (ndev->addr_len >= ETH_ALEN)
		memcpy(mac, ndev->dev_addr, ETH_ALEN);
	else
		eth_random_addr(mac);
	addrconf_addr_eui48((u8 *)guid, mac);
}

struct ib_umem *oxe_shim_ib_umem_get(struct ib_device *dev, u64 addr, size_t size, int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}

size_t oxe_shim_umem_pfns(struct ib_umem *umem, unsigned long skip, unsigned long *pfns, size_t max)
{
	struct sg_page_iter it;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, skip) {
		if (n == max)
			break;
		pfns[n++] = page_to_pfn(sg_page_iter_page(&it));
	}
	return n;
}

bool oxe_shim_is_err(const void *ptr)
{
	return IS_ERR(ptr);
}

long oxe_shim_ptr_err(const void *ptr)
{
	return PTR_ERR(ptr);
}

void *oxe_shim_err_ptr(long err)
{
	return ERR_PTR(err);
}

struct net_device *oxe_shim_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

void oxe_shim_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

int oxe_shim_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

size_t oxe_shim_udata_outlen(const struct ib_udata *udata)
{
	return udata ? udata->outlen : 0;
}

struct nlattr *oxe_shim_nla_nest_start_driver(struct sk_buff *msg)
{
	return nla_nest_start_noflag(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void oxe_shim_nla_nest_end(struct sk_buff *msg, struct nlattr *start)
{
	nla_nest_end(msg, start);
}

void oxe_shim_nla_nest_cancel(struct sk_buff *msg, struct nlattr *start)
{
	nla_nest_cancel(msg, start);
}

/*
 * The RoCE v2 port (4791) in @net, as a UDP tunnel socket whose datagrams go
 * to @rcv. The port configuration structs are unions and bitfields, simplest
 * to fill here.
 */
int oxe_shim_udp_tunnel_open(struct net *net, bool ipv6, struct socket **sockp,
			     int (*rcv)(struct sock *sk, struct sk_buff *skb))
{
	struct udp_tunnel_sock_cfg tnl_cfg = {};
	struct udp_port_cfg udp_cfg = {};
	int err;

	udp_cfg.local_udp_port = htons(4791);
	if (ipv6) {
		udp_cfg.family = AF_INET6;
		udp_cfg.ipv6_v6only = 1;
		err = udp_sock_create6(net, &udp_cfg, sockp);
	} else {
		udp_cfg.family = AF_INET;
		err = udp_sock_create4(net, &udp_cfg, sockp);
	}
	if (err)
		return err;
	tnl_cfg.encap_type = 1;
	tnl_cfg.encap_rcv = rcv;
	setup_udp_tunnel_sock(net, (*sockp)->sk, &tnl_cfg);
	return 0;
}

void oxe_shim_dispatch_port_event(struct ib_device *dev, u32 port, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = dev,
		.element.port_num = port,
		.event = type,
	};

	ib_dispatch_event(&ev);
}

unsigned int oxe_shim_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

void oxe_shim_udp_tunnel_close(struct socket *sock)
{
	udp_tunnel_sock_release(sock->sk);
}

static int oxe_mr_show(struct seq_file *m, void *v)
{
	return oxe_rs_mr_show(m, m->private);
}

static int oxe_mr_open(struct inode *inode, struct file *file)
{
	return single_open(file, oxe_mr_show, inode->i_private);
}

static const struct file_operations oxe_mr_fops = {
	.owner = THIS_MODULE,
	.open = oxe_mr_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

/*
 * A read-only file showing @mr. debugfs_remove() waits for readers, so @mr
 * only has to outlive the file.
 */
struct dentry *oxe_shim_debugfs_mr_file(const char *name, struct dentry *parent, void *mr)
{
	return debugfs_create_file(name, 0400, parent, mr, &oxe_mr_fops);
}
