// SPDX-License-Identifier: GPL-2.0
/*
 * What Rust cannot reach: macros, static inline functions and fields of
 * structs the kernel crate leaves opaque (net_device), one forwarder each.
 * A few functions still do more than forward, and are what is left to
 * move to Rust: the route lookup and skb of a packet to send
 * (oxe_shim_tx_alloc; the headers themselves are written in Rust), the
 * UDP tunnel socket's configuration (unions and bitfields), the accounted
 * ring memory, a umem release deferred out of atomic context, and the
 * debugfs line of a GID table entry.
 */
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/sched/mm.h>
#include <net/addrconf.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ib_cache.h>
#include <net/udp_tunnel.h>
#include <rdma/rdma_netlink.h>
#include <linux/uaccess.h>
#include <linux/if_vlan.h>
#include <linux/inetdevice.h>
#include <linux/highmem.h>
#include <linux/crc32.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/route.h>
#include <net/ipv6.h>
#include <net/if_inet6.h>
#include <net/udp.h>
#include "shim.h"


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

struct net_device *oxe_shim_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

int oxe_shim_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

int oxe_shim_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

bool oxe_shim_udata_cleared(struct ib_udata *udata, size_t offset, size_t len)
{
	return ib_is_udata_cleared(udata, offset, len);
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

unsigned int oxe_shim_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

unsigned int oxe_shim_netdev_addr_len(const struct net_device *ndev)
{
	return ndev->addr_len;
}

/* ---- Data path ---- */

void *oxe_shim_vmalloc_user(size_t len, bool account)
{
	/*
	 * vmalloc_user() charges no cgroup, so a process could hold queue memory
	 * past its memory limit. The same mapping built by hand, from pages
	 * allocated with __GFP_ACCOUNT; vfree() frees them (VM_MAP_PUT_PAGES),
	 * and remap_vmalloc_range() accepts the area (VM_USERMAP). At the
	 * cgroup's limit the verb fails with ENOMEM (__GFP_RETRY_MAYFAIL) instead
	 * of the OOM killer picking a process for it.
	 */
	gfp_t gfp = account ? GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL : GFP_KERNEL;
	unsigned int n = DIV_ROUND_UP(len, PAGE_SIZE), i;
	struct page **pages;
	void *addr;

	pages = kvcalloc(n, sizeof(*pages), gfp);
	if (!pages)
		return NULL;
	for (i = 0; i < n; i++) {
		pages[i] = alloc_page(gfp | __GFP_ZERO);
		if (!pages[i])
			goto fail;
	}
	addr = vmap(pages, n, VM_MAP | VM_USERMAP | VM_MAP_PUT_PAGES, PAGE_KERNEL);
	if (addr)
		return addr;
fail:
	while (i--)
		__free_page(pages[i]);
	kvfree(pages);
	return NULL;
}

void *oxe_shim_kmap_local_pfn(unsigned long pfn)
{
	return kmap_local_pfn(pfn);
}

void oxe_shim_kunmap_local(void *va)
{
	kunmap_local(va);
}

/*
 * The RDMA_DRIVER_UNKNOWN device on *@ndev (a reference), or, for a VLAN,
 * on its real netdev, which *@ndev then becomes: the netdev the device holds.
 */
static struct ib_device *oxe_device_on(struct net_device **ndev)
{
	struct ib_device *ib = ib_device_get_by_netdev(*ndev, RDMA_DRIVER_UNKNOWN);

	if (!ib && is_vlan_dev(*ndev)) {
		*ndev = vlan_dev_real_dev(*ndev);
		ib = ib_device_get_by_netdev(*ndev, RDMA_DRIVER_UNKNOWN);
	}
	return ib;
}

/*
 * The RDMA device (a reference; of any driver that registers as
 * RDMA_DRIVER_UNKNOWN, the caller checks) on the netdev that owns @av's
 * destination address, and that netdev: a packet to an address of this host
 * belongs to that device, which need not be the sender's.
 */
static struct ib_device *oxe_local_owner(struct net *net, const struct oxe_av *av,
					 struct net_device **owner)
{
	struct ib_device *ib = NULL;
	struct net_device *dev;
	__be32 addr;

	rcu_read_lock();
	if (av->ipv6) {
		dev = ipv6_dev_find(net, (const struct in6_addr *)av->dgid, NULL);
	} else {
		memcpy(&addr, av->dgid + 12, 4);
		dev = __ip_dev_find(net, addr, false);
	}
	/* The device holds the netdev it is on: @dev outlives our reference. */
	if (dev)
		ib = oxe_device_on(&dev);
	rcu_read_unlock();
	*owner = dev;
	return ib;
}

/*
 * Routes a packet of @len bytes from the IP header on (headers included)
 * and allocates its skb, with the IP and UDP headers' room pushed and marked;
 * returns the skb, and in *@l3 where its IP header goes, which the caller
 * writes. *@local says the route stays on this host, and *@to is then the
 * device that owns the destination (a reference), if any.
 */
struct sk_buff *oxe_shim_tx_alloc(struct net_device *ndev, const struct oxe_av *av,
				  unsigned int len, u8 **l3, bool *local,
				  struct ib_device **to, int *err)
{
	struct net_device *owner = NULL;
	struct net *net = dev_net(ndev);
	struct dst_entry *dst;
	struct sk_buff *skb;
	unsigned int hdr = av->ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);

	if (len < hdr + sizeof(struct udphdr)) {
		*err = -EINVAL;
		return NULL;
	}
	if (av->ipv6) {
		struct flowi6 fl6 = {};

		fl6.flowi6_oif = ndev->ifindex;
		memcpy(&fl6.saddr, av->sgid, 16);
		memcpy(&fl6.daddr, av->dgid, 16);
		fl6.flowi6_proto = IPPROTO_UDP;
		dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
		if (IS_ERR(dst)) {
			*err = PTR_ERR(dst);
			return NULL;
		}
		if (dst->error) {
			*err = dst->error;
			dst_release(dst);
			return NULL;
		}
		*local = dst->dev->flags & IFF_LOOPBACK;
	} else {
		struct flowi4 fl = {};
		struct rtable *rt;

		fl.flowi4_oif = ndev->ifindex;
		memcpy(&fl.saddr, av->sgid + 12, 4);
		memcpy(&fl.daddr, av->dgid + 12, 4);
		fl.flowi4_proto = IPPROTO_UDP;
		rt = ip_route_output_key(net, &fl);
		if (IS_ERR(rt)) {
			*err = PTR_ERR(rt);
			return NULL;
		}
		dst = &rt->dst;
		*local = rt->rt_type == RTN_LOCAL;
	}

	*to = NULL;
	if (*local)
		*to = oxe_local_owner(net, av, &owner);

	/* The requester runs under its QP's softirq-safe lock. */
	skb = alloc_skb(LL_RESERVED_SPACE(ndev) + len + ndev->needed_tailroom, GFP_ATOMIC);
	if (!skb) {
		dst_release(dst);
		if (*to)
			ib_device_put(*to);
		*to = NULL;
		*err = -ENOMEM;
		return NULL;
	}
	skb_reserve(skb, LL_RESERVED_SPACE(ndev));
	*l3 = skb_put(skb, len);
	skb->dev = *to ? owner : ndev;
	skb->protocol = av->ipv6 ? htons(ETH_P_IPV6) : htons(ETH_P_IP);
	skb->ip_summed = CHECKSUM_NONE;
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, hdr);
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	skb_dst_set(skb, dst);
	*err = 0;
	return skb;
}

int oxe_shim_tx_send(struct sk_buff *skb)
{
	struct net *net = dev_net(skb_dst(skb)->dev);
	int err;

	/* ip_local_out recomputes the IPv4 checksum itself; the ICRC already covers the final header. */
	if (skb->protocol == htons(ETH_P_IP))
		err = ip_local_out(net, NULL, skb);
	else
		err = ip6_local_out(net, NULL, skb);
	return net_xmit_eval(err);
}

u8 *oxe_shim_skb_l3(struct sk_buff *skb, size_t *len, size_t *l4_off)
{
	if (skb_linearize(skb))
		return NULL;
	*len = skb_tail_pointer(skb) - skb_network_header(skb);
	*l4_off = skb_transport_header(skb) - skb_network_header(skb);
	return skb_network_header(skb);
}

struct net_device *oxe_shim_skb_dev(struct sk_buff *skb)
{
	return skb->dev;
}

struct ib_device *oxe_shim_ib_device_get_by_netdev(struct net_device *ndev)
{
	return oxe_device_on(&ndev);
}

struct workqueue_struct *oxe_shim_alloc_workqueue(const char *name, unsigned int flags)
{
	return alloc_workqueue("%s", flags, 0, name);
}

void oxe_shim_init_delayed_work(struct delayed_work *dw, work_func_t fn)
{
	INIT_DELAYED_WORK(dw, fn);
}

void oxe_shim_init_work(struct work_struct *work, work_func_t fn)
{
	INIT_WORK(work, fn);
}

/* The first online CPU after @cpu (-1: the first of all), or -1. */
int oxe_shim_next_online_cpu(int cpu)
{
	unsigned int next = cpumask_next(cpu, cpu_online_mask);

	return next < nr_cpu_ids ? next : -1;
}

void oxe_shim_skb_queue_head_init(struct sk_buff_head *list)
{
	skb_queue_head_init(list);
}

void oxe_shim_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void oxe_shim_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

int oxe_shim_spin_trylock_bh(spinlock_t *lock)
{
	return spin_trylock_bh(lock);
}

void oxe_shim_local_bh_disable(void)
{
	local_bh_disable();
}

void oxe_shim_local_bh_enable(void)
{
	local_bh_enable();
}

struct oxe_umem_release {
	struct work_struct work;
	struct ib_umem *umem;
};

static void oxe_umem_release_run(struct work_struct *work)
{
	struct oxe_umem_release *r = container_of(work, struct oxe_umem_release, work);
	struct ib_device *ibdev = r->umem->ibdev;

	ib_umem_release(r->umem);
	/* Taken when the release was deferred: the device outlives its umem. */
	put_device(&ibdev->dev);
	kfree(r);
}

struct oxe_umem_release *oxe_shim_umem_release_new(void)
{
	return kzalloc(sizeof(struct oxe_umem_release), GFP_KERNEL);
}

void oxe_shim_umem_release(struct ib_umem *umem, struct oxe_umem_release *r,
			   struct workqueue_struct *wq)
{
	/* Unpinning dirty pages takes the page lock: not with softirqs held off. */
	if (!in_interrupt() && !irqs_disabled()) {
		ib_umem_release(umem);
		kfree(r);
		return;
	}
	get_device(&umem->ibdev->dev);
	r->umem = umem;
	INIT_WORK(&r->work, oxe_umem_release_run);
	queue_work(wq, &r->work);
}

u32 oxe_shim_crc32_le(u32 crc, const void *p, size_t len)
{
	return crc32_le(crc, p, len);
}

u64 oxe_shim_jiffies64(void)
{
	return get_jiffies_64();
}

struct ib_udata *oxe_shim_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

struct ib_ucontext *oxe_shim_udata_uctx(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

/*
 * One line of debugfs "gids" (rust/ib/debugfs.rs) into @buf: the port's GID
 * table as the connection manager looks it up (by GID, type and netdev), for
 * a kernel developer checking why an address does or does not resolve to
 * this device. Line -1 is the header. Returns the length, 0 for an empty
 * entry.
 */
int oxe_shim_gid_line(struct ib_device *ib, int i, char *buf, size_t len)
{
	const struct ib_gid_attr *a, *f;
	struct net_device *nd;
	u32 port = 1;
	int n;

	if (i < 0)
		return scnprintf(buf, len, "core_cap_flags %#x ib_cm %d roce %d netns_ok %d\n",
				 ib->port_data[port].immutable.core_cap_flags,
				 rdma_cap_ib_cm(ib, port), rdma_protocol_roce(ib, port),
				 rdma_dev_access_netns(ib, &init_net));
	a = rdma_get_gid_attr(ib, port, i);
	if (IS_ERR(a))
		return 0;
	rcu_read_lock();
	nd = rcu_dereference(a->ndev);
	if (nd)
		dev_hold(nd);
	rcu_read_unlock();
	f = rdma_find_gid_by_port(ib, &a->gid, a->gid_type, port, nd);
	n = scnprintf(buf, len, "%2d %pI6 type %d ndev %s lookup %s\n", i, a->gid.raw, a->gid_type,
		      nd ? nd->name : "-", IS_ERR(f) ? "missing" : "found");
	if (!IS_ERR(f))
		rdma_put_gid_attr(f);
	if (nd)
		dev_put(nd);
	rdma_put_gid_attr(a);
	return n;
}
