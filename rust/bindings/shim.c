// SPDX-License-Identifier: GPL-2.0
/*
 * What Rust cannot reach: macros, static inline functions and fields of
 * structs the kernel crate leaves opaque (net_device), one forwarder each.
 * One function does more than forward: oxe_shim_tx_alloc, the route lookup
 * and skb of a packet to send (flow keys are unions, LL_RESERVED_SPACE,
 * IPCB and skb_dst_set are macros and inline functions), with the lookup
 * of a local destination's device; the headers are written in Rust.
 */
#include <linux/etherdevice.h>
#include <linux/if_vlan.h>
#include <linux/inetdevice.h>
#include <linux/highmem.h>
#include <linux/vmalloc.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/route.h>
#include <net/udp.h>
#include <net/ip6_checksum.h>
#include <net/if_inet6.h>
#include <rdma/ib_umem.h>
#include "shim.h"

struct net *oxe_shim_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

struct net *oxe_shim_dev_net_get(const struct net_device *ndev)
{
	struct net *net;

	/* A netdev changes namespace under RTNL; its old one is freed after RCU. */
	rcu_read_lock();
	net = maybe_get_net(dev_net_rcu(ndev));
	rcu_read_unlock();
	return net;
}

void oxe_shim_put_net(struct net *net)
{
	put_net(net);
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

struct ib_umem *oxe_shim_ib_umem_get(struct ib_device *dev, u64 addr, size_t size, int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}

void *oxe_shim_mmgrab_current(void)
{
	struct mm_struct *mm = current->mm;

	if (mm)
		mmgrab(mm);
	return mm;
}

void oxe_shim_mmdrop(void *mm)
{
	mmdrop(mm);
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

unsigned int oxe_shim_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

unsigned int oxe_shim_netdev_addr_len(const struct net_device *ndev)
{
	return ndev->addr_len;
}

const u8 *oxe_shim_netdev_addr(const struct net_device *ndev)
{
	return ndev->dev_addr;
}

const char *oxe_shim_netdev_name(const struct net_device *ndev)
{
	return ndev->name;
}

/* Whether sleeping is forbidden here (irq or softirq context, irqs off). */
bool oxe_shim_in_atomic(void)
{
	return in_interrupt() || irqs_disabled();
}

/*
 * @n pages as one kernel mapping, mappable to user space; on success the
 * mapping owns the pages and their kvmalloc'd array. PAGE_KERNEL is a macro.
 */
void *oxe_shim_vmap_user(struct page **pages, unsigned int n)
{
	return vmap(pages, n, VM_MAP | VM_USERMAP | VM_MAP_PUT_PAGES, PAGE_KERNEL);
}

/* An ODP page the device will write, dirty (pfn_to_page is a macro). */
void oxe_shim_set_pfn_dirty(unsigned long pfn)
{
	set_page_dirty(pfn_to_page(pfn));
}

void *oxe_shim_kmap_local_pfn(unsigned long pfn)
{
	return kmap_local_pfn(pfn);
}

void oxe_shim_kunmap_local(void *va)
{
	kunmap_local(va);
}

bool oxe_shim_kva_valid(unsigned long addr)
{
	return virt_addr_valid((void *)addr);
}

unsigned long oxe_shim_kva_pfn(unsigned long addr)
{
	return PHYS_PFN(__pa(addr));
}

struct scatterlist *oxe_shim_sg_dma(struct scatterlist *sg, u64 *addr, unsigned int *len)
{
	*addr = sg_dma_address(sg);
	*len = sg_dma_len(sg);
	return sg_next(sg);
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
 * A QP's route between packets. A connected QP sends all its packets to one
 * address, and looking the route up again for each (the FIB walk and the
 * dst reference) costs a few percent of a packet. The entry is keyed by what
 * the lookup reads (netdev, both addresses), so a datagram QP's
 * changing destinations simply replace it, and it is checked with dst_check
 * on every use, so a changed route, a netdev going down or away, is seen by
 * the next packet (the FIB gives the dst up; the check then fails). Only
 * IPv4 routes to the wire are kept (oxe_shim_tx_alloc says why): a local
 * destination needs its owner looked up each time. All senders of a QP hold
 * its lock; this lock only makes the entry safe on its own.
 */
struct oxe_route_cache {
	spinlock_t lock;
	struct dst_entry *dst;
	int ifindex;
	u8 sgid[16];
	u8 dgid[16];
};

struct oxe_route_cache *oxe_shim_route_cache_new(void)
{
	struct oxe_route_cache *rc = kzalloc(sizeof(*rc), GFP_KERNEL);

	if (rc)
		spin_lock_init(&rc->lock);
	return rc;
}

void oxe_shim_route_cache_free(struct oxe_route_cache *rc)
{
	if (!rc)
		return;
	dst_release(rc->dst);
	kfree(rc);
}

/* The kept route to @av from @ndev, with a reference, or NULL. */
static struct dst_entry *oxe_route_get(struct oxe_route_cache *rc, struct net_device *ndev,
				       const struct oxe_av *av)
{
	struct dst_entry *dst = NULL, *stale = NULL;

	if (!rc)
		return NULL;
	spin_lock_bh(&rc->lock);
	if (rc->dst && rc->ifindex == ndev->ifindex && !memcmp(rc->sgid, av->sgid, 16) &&
	    !memcmp(rc->dgid, av->dgid, 16)) {
		/* An IPv4 route ignores the cookie (it checks its generation). */
		if (dst_check(rc->dst, 0)) {
			dst = rc->dst;
			dst_hold(dst);
		} else {
			stale = rc->dst;
			rc->dst = NULL;
		}
	}
	spin_unlock_bh(&rc->lock);
	dst_release(stale);
	return dst;
}

/* Keeps @dst (the caller's reference stays the caller's) as the route to @av. */
static void oxe_route_keep(struct oxe_route_cache *rc, struct net_device *ndev,
			   const struct oxe_av *av, struct dst_entry *dst)
{
	struct dst_entry *old;

	if (!rc)
		return;
	dst_hold(dst);
	spin_lock_bh(&rc->lock);
	old = rc->dst;
	rc->dst = dst;
	rc->ifindex = ndev->ifindex;
	memcpy(rc->sgid, av->sgid, 16);
	memcpy(rc->dgid, av->dgid, 16);
	spin_unlock_bh(&rc->lock);
	dst_release(old);
}

/*
 * Routes a packet of @len bytes from the IP header on (headers included)
 * and allocates its skb, with the IP and UDP headers' room pushed and marked;
 * returns the skb, and in *@l3 where its IP header goes, which the caller
 * writes. *@local says the route stays on this host, and *@to is then the
 * device that owns the destination (a reference), if any.
 */
struct sk_buff *oxe_shim_tx_alloc(struct net_device *ndev, const struct oxe_av *av,
				  struct oxe_route_cache *rc, unsigned int len,
				  unsigned int *extra, u8 **l3, bool *local,
				  struct ib_device **to, int *err)
{
	/*
	 * Read once: the netdev's headroom may grow meanwhile, and reserving
	 * more than was allocated for would eat the room promised in *extra.
	 */
	unsigned int reserve = LL_RESERVED_SPACE(ndev);
	unsigned int room = reserve + len + READ_ONCE(ndev->needed_tailroom);
	struct net_device *owner = NULL;
	struct net *net = dev_net(ndev);
	struct dst_entry *dst;
	struct sk_buff *skb;
	bool cached;
	unsigned int hdr = av->ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);

	if (len < hdr + sizeof(struct udphdr)) {
		*err = -EINVAL;
		return NULL;
	}
	/*
	 * Only a plain IPv4 route is kept: its dst_ops are global. An IPv6
	 * route's, or an IPsec bundle's, belong to its network namespace, which
	 * a kept route does not hold: a netdev moved to another namespace, or
	 * one whose namespace is dismantled, unregisters this device only
	 * later (ib_unregister_device_queued), and the namespace may be freed
	 * before the QP lets its route go.
	 */
	if (av->ipv6)
		rc = NULL;
	dst = oxe_route_get(rc, ndev, av);
	cached = dst != NULL;
	if (cached) {
		*local = false;
	} else if (av->ipv6) {
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
	if (!cached && !*local && !dst_xfrm(dst))
		oxe_route_keep(rc, ndev, av, dst);

	*to = NULL;
	if (*local)
		*to = oxe_local_owner(net, av, &owner);

	/*
	 * The requester runs under its QP's softirq-safe lock. Room for more
	 * segments is a wish: without it the packet goes alone.
	 */
	skb = NULL;
	if (*local)
		*extra = 0;
	if (*extra)
		skb = alloc_skb(room + *extra, GFP_ATOMIC | __GFP_NOWARN);
	if (!skb) {
		*extra = 0;
		skb = alloc_skb(room, GFP_ATOMIC);
	}
	if (!skb) {
		dst_release(dst);
		if (*to)
			ib_device_put(*to);
		*to = NULL;
		*err = -ENOMEM;
		return NULL;
	}
	skb_reserve(skb, reserve);
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

u8 *oxe_shim_skb_put(struct sk_buff *skb, unsigned int len)
{
	return skb_put(skb, len);
}

void oxe_shim_skb_trim(struct sk_buff *skb, unsigned int len)
{
	skb_trim(skb, len);
}

void oxe_shim_tx_gso(struct sk_buff *skb, unsigned int gso_size, unsigned int segs)
{
	unsigned int len = skb->len - skb_transport_offset(skb);
	struct udphdr *uh = udp_hdr(skb);

	skb_shinfo(skb)->gso_size = gso_size;
	skb_shinfo(skb)->gso_segs = segs;
	skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4;
	/* What __udp_gso_segment asks of a packet it splits. */
	skb->ip_summed = CHECKSUM_PARTIAL;
	skb->csum_start = skb_transport_header(skb) - skb->head;
	skb->csum_offset = offsetof(struct udphdr, check);
	if (skb->protocol == htons(ETH_P_IP))
		uh->check = ~udp_v4_check(len, ip_hdr(skb)->saddr, ip_hdr(skb)->daddr, 0);
	else
		uh->check = ~udp_v6_check(len, &ipv6_hdr(skb)->saddr, &ipv6_hdr(skb)->daddr, 0);
}

int oxe_shim_tx_send(struct sk_buff *skb)
{
	/*
	 * The netdev's namespace, not the route's device's: a route gone stale
	 * since it was checked has blackhole_netdev, of init_net.
	 */
	struct net *net = dev_net(skb->dev);
	int err;

	/* ip_local_out recomputes the IPv4 checksum itself; the ICRC already covers the final header. */
	if (skb->protocol == htons(ETH_P_IP))
		err = ip_local_out(net, NULL, skb);
	else
		err = ip6_local_out(net, NULL, skb);
	return net_xmit_eval(err);
}

struct net_device *oxe_shim_skb_dev(struct sk_buff *skb)
{
	return skb->dev;
}

struct oxe_rx_cb {
	bool checked;
	/* One segment of a GSO packet taken whole, and which. */
	bool segment;
	/*
	 * A GSO packet queued whole in a QP's backlog: @index is then the
	 * first segment its drain has not processed yet, of @count.
	 */
	bool batch;
	u16 index;
	u16 count;
};

static void oxe_rx_cb_init(struct sk_buff *skb, bool segment, u16 index)
{
	struct oxe_rx_cb *cb = (struct oxe_rx_cb *)skb->cb;

	BUILD_BUG_ON(sizeof(struct oxe_rx_cb) > sizeof(skb->cb));
	cb->checked = false;
	cb->segment = segment;
	cb->batch = false;
	cb->index = index;
	cb->count = 0;
}

void oxe_shim_skb_set_batch(struct sk_buff *skb, u16 next, u16 count)
{
	struct oxe_rx_cb *cb = (struct oxe_rx_cb *)skb->cb;

	cb->batch = true;
	cb->index = next;
	cb->count = count;
}

int oxe_shim_skb_batch_next(struct sk_buff *skb, u16 *count)
{
	struct oxe_rx_cb *cb = (struct oxe_rx_cb *)skb->cb;

	*count = cb->count;
	return cb->batch ? cb->index : -1;
}

void oxe_shim_skb_arrived(struct sk_buff *skb)
{
	oxe_rx_cb_init(skb, false, 0);
}

int oxe_shim_skb_frame(struct sk_buff *skb, struct oxe_frame *f)
{
	struct oxe_rx_cb *cb = (struct oxe_rx_cb *)skb->cb;
	u8 *udp_end;

	/* A clone of a linear packet (a segment) is linear: nothing to do. */
	if (skb_linearize(skb))
		return -ENOMEM;
	udp_end = skb_transport_header(skb) + sizeof(struct udphdr);
	f->l3 = skb_network_header(skb);
	f->l4 = skb_transport_header(skb) - skb_network_header(skb);
	f->segment = cb->segment;
	f->index = cb->index;
	/*
	 * A segment's bytes are its clone's data; any other packet's run from
	 * its UDP header's end (where UDP left its data, or where the loopback
	 * wrote it) to its tail.
	 */
	f->roce = cb->segment ? skb->data : udp_end;
	if (f->roce < udp_end || f->roce > skb_tail_pointer(skb))
		return -EINVAL;
	f->roce_len = skb_tail_pointer(skb) - f->roce;
	return 0;
}

/*
 * Most segments a GSO packet may carry to oxe. oxe sends at most 32 per
 * packet, and UDP_SEGMENT allows 128 (UDP_MAX_SEGMENTS); a packet claiming
 * more is dropped whole rather than cloned that many times in softirq.
 */
#define OXE_MAX_SEGMENTS 128
/* The shortest RoCE packet: a BTH and an ICRC. */
#define OXE_MIN_SEGMENT 16

int oxe_shim_skb_gso_segments(struct sk_buff *skb)
{
	unsigned int size, segs;

	if (!skb_is_gso(skb))
		return 0;
	size = skb_shinfo(skb)->gso_size;
	/* UDP segmentation alone (DODGY: from a local sender that is not the stack). */
	if ((skb_shinfo(skb)->gso_type & ~SKB_GSO_DODGY) != SKB_GSO_UDP_L4 ||
	    size < OXE_MIN_SEGMENT)
		return -EINVAL;
	segs = DIV_ROUND_UP(skb->len, size);
	if (segs > OXE_MAX_SEGMENTS)
		return -EINVAL;
	/* One copy of the whole here, if any, rather than one per segment. */
	if (skb_linearize(skb))
		return -ENOMEM;
	return segs;
}

int oxe_shim_skb_segment_frame(struct sk_buff *skb, unsigned int index, struct oxe_frame *f)
{
	unsigned int size = skb_shinfo(skb)->gso_size, off = index * size;
	u8 *udp_end = skb_transport_header(skb) + sizeof(struct udphdr);

	/* Linear since oxe_shim_skb_gso_segments; UDP left data at its payload. */
	if (skb_is_nonlinear(skb) || off >= skb->len || skb->data < udp_end)
		return -EINVAL;
	f->l3 = skb_network_header(skb);
	f->l4 = skb_transport_header(skb) - skb_network_header(skb);
	f->segment = true;
	f->index = index;
	f->roce = skb->data + off;
	f->roce_len = min(size, skb->len - off);
	return 0;
}

bool oxe_shim_skb_segments_one_qp(struct sk_buff *skb, unsigned int segs)
{
	unsigned int size = skb_shinfo(skb)->gso_size, i;
	/* The BTH's destination QP: bytes 5 to 7 of each segment. */
	const unsigned int at = 5;

	if (skb_is_nonlinear(skb) || size < at + 3)
		return false;
	for (i = 1; i < segs; i++) {
		unsigned int off = i * size;

		if (off + at + 3 > skb->len ||
		    memcmp(skb->data + at, skb->data + off + at, 3))
			return false;
	}
	return true;
}

struct sk_buff *oxe_shim_skb_segment(struct sk_buff *skb, unsigned int index)
{
	unsigned int size = skb_shinfo(skb)->gso_size, off = index * size;
	struct sk_buff *seg;

	if (off >= skb->len)
		return NULL;
	seg = skb_clone(skb, GFP_ATOMIC);
	if (!seg)
		return NULL;
	/* The clone's own view of the shared, linear data: the segment alone. */
	__skb_pull(seg, off);
	skb_trim(seg, min(size, seg->len));
	oxe_rx_cb_init(seg, true, index);
	return seg;
}

/*
 * The receive buffer of a RoCE socket: it holds what arrives while another
 * CPU drains it, and a drain that yields (oxe_shim_udp_rx_next's callers
 * take 64 packets a turn) leaves the rest there for its work item.
 */
#define OXE_RCVBUF (8 << 20)

int oxe_shim_udp_rx_open(struct net *net, bool ipv6, int cpu, struct socket **sockp)
{
	struct sockaddr_in6 a6 = {
		.sin6_family = AF_INET6,
		.sin6_addr = IN6ADDR_ANY_INIT,
		.sin6_port = htons(ROCE_V2_UDP_DPORT),
	};
	struct sockaddr_in a4 = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_ANY),
		.sin_port = htons(ROCE_V2_UDP_DPORT),
	};
	struct socket *sock;
	int err;

	err = sock_create_kern(net, ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0, &sock);
	if (err < 0)
		return err;
	if (ipv6) {
		err = ip6_sock_set_v6only(sock->sk);
		if (err < 0)
			goto out;
		/*
		 * RoCE v2 over IPv6 may carry a zero UDP checksum (rxe's and
		 * oxe's single packets do: the ICRC covers the packet), which
		 * IPv6 UDP refuses unless told (RFC 6935/6936).
		 */
		udp_set_no_check6_rx(sock->sk, true);
		udp_set_no_check6_tx(sock->sk, true);
	}
	/*
	 * One socket of a SO_REUSEPORT group per CPU, each claiming its CPU
	 * (SO_INCOMING_CPU): UDP hands a packet to the socket of the CPU that
	 * received it (reuseport_select_sock_by_hash), so each CPU drains a
	 * queue only it fills. Set before bind, which counts the claim.
	 */
	sock->sk->sk_reuseport = 1;
	WRITE_ONCE(sock->sk->sk_incoming_cpu, cpu);
#ifdef CONFIG_NET_RX_BUSY_POLL
	/* Never busy-poll from the receive softirq (net.core.busy_read). */
	WRITE_ONCE(sock->sk->sk_ll_usec, 0);
#endif
	if (ipv6)
		err = kernel_bind(sock, (struct sockaddr_unsized *)&a6, sizeof(a6));
	else
		err = kernel_bind(sock, (struct sockaddr_unsized *)&a4, sizeof(a4));
out:
	if (err < 0) {
		sock_release(sock);
		return err;
	}
	*sockp = sock;
	return 0;
}

bool oxe_shim_skb_to_host(struct sk_buff *skb)
{
	/*
	 * By the IP destination, as UDP decides whom to give a packet, not
	 * by the frame's (an IP multicast in a unicast frame still goes to
	 * every socket; a unicast one in a broadcast frame to one). A
	 * subnet-directed broadcast is not told apart here: see SECURITY.md.
	 */
	if (skb->protocol == htons(ETH_P_IP)) {
		__be32 daddr = ip_hdr(skb)->daddr;

		return !ipv4_is_multicast(daddr) && !ipv4_is_lbcast(daddr);
	}
	return !ipv6_addr_is_multicast(&ipv6_hdr(skb)->daddr);
}

void oxe_shim_udp_rx_attach(struct sock *sk, void (*ready)(struct sock *sk), void *state)
{
	/*
	 * GSO packets whole (not FRAGLIST ones: their segments carry headers
	 * of their own, which oxe could not rebuild).
	 */
	udp_set_bit(ACCEPT_L4, sk);
	WRITE_ONCE(sk->sk_rcvbuf, OXE_RCVBUF);
	sk->sk_userlocks |= SOCK_RCVBUF_LOCK;
	write_lock_bh(&sk->sk_callback_lock);
	rcu_assign_sk_user_data(sk, state);
	WRITE_ONCE(sk->sk_data_ready, ready);
	write_unlock_bh(&sk->sk_callback_lock);
}

void oxe_shim_udp_rx_detach(struct sock *sk)
{
	/*
	 * The callback stays (sock_def_readable is not exported): without its
	 * state it takes nothing, and the socket's release frees what is
	 * queued.
	 */
	write_lock_bh(&sk->sk_callback_lock);
	rcu_assign_sk_user_data(sk, NULL);
	write_unlock_bh(&sk->sk_callback_lock);
	/* Every data_ready call that may still see the state has returned. */
	synchronize_rcu();
}

void *oxe_shim_udp_rx_state(struct sock *sk)
{
	void *state;

	rcu_read_lock();
	state = rcu_dereference_sk_user_data(sk);
	rcu_read_unlock();
	return state;
}

struct sk_buff *oxe_shim_udp_rx_next(struct sock *sk, bool *dropped)
{
	struct sk_buff *skb;
	int off = 0, err;

	*dropped = false;
	skb = __skb_recv_udp(sk, MSG_DONTWAIT, &off, &err);
	if (!skb)
		return NULL;
	/*
	 * What UDP checks before it hands a packet to a tunnel, left to the
	 * reader for a queued one (as udp_read_skb does): a packet of this
	 * host (CHECKSUM_PARTIAL, a GSO one among them) or with no checksum
	 * passes.
	 */
	if (udp_lib_checksum_complete(skb)) {
		__UDPX_INC_STATS(sk, UDP_MIB_CSUMERRORS);
		__UDPX_INC_STATS(sk, UDP_MIB_INERRORS);
		udp_drops_inc(sk);
		kfree_skb_reason(skb, SKB_DROP_REASON_UDP_CSUM);
		*dropped = true;
		return NULL;
	}
	/*
	 * UDP kept its accounting in skb->dev while the packet was queued;
	 * the device it came in on is still known by index. (The caller runs
	 * with softirqs off, an RCU reader.)
	 */
	skb->dev = dev_get_by_index_rcu(sock_net(sk), skb->skb_iif);
	if (!skb->dev) {
		kfree_skb_reason(skb, SKB_DROP_REASON_DEV_READY);
		*dropped = true;
		return NULL;
	}
	__UDPX_INC_STATS(sk, UDP_MIB_INDATAGRAMS);
	return skb;
}

bool oxe_shim_udp_rx_pending(struct sock *sk)
{
	return !skb_queue_empty_lockless(&sk->sk_receive_queue) ||
	       !skb_queue_empty_lockless(&udp_sk(sk)->reader_queue);
}

void oxe_shim_skb_set_checked(struct sk_buff *skb, bool checked)
{
	BUILD_BUG_ON(sizeof(struct oxe_rx_cb) > sizeof(skb->cb));
	((struct oxe_rx_cb *)skb->cb)->checked = checked;
}

bool oxe_shim_skb_checked(struct sk_buff *skb)
{
	return ((struct oxe_rx_cb *)skb->cb)->checked;
}

struct ib_device *oxe_shim_ib_device_get_by_netdev(struct net_device *ndev)
{
	return oxe_device_on(&ndev);
}

void oxe_shim_local_bh_disable(void)
{
	local_bh_disable();
}

void oxe_shim_local_bh_enable(void)
{
	local_bh_enable();
}

