/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for what bindgen cannot reach: macros and static inline functions
 * of the RDMA, net and mm headers, and fields of net_device (opaque to the
 * kernel crate). Most only forward. Some hold network logic that reaches
 * kernel internals with no Rust binding yet: the route cache, the lookup of
 * the local device that owns an address, the per-CPU socket group of port
 * 4791, GSO segment views, and a peek at a packet's BTH.
 * TODO: move that logic to Rust over thin bindings (rust/ib/).
 */
#ifndef OXE_SHIM_H
#define OXE_SHIM_H

#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

/* ---- net_device ---- */
struct net *oxe_shim_dev_net(const struct net_device *ndev);
/*
 * The namespace @ndev is in now, with a counted reference, or NULL if it is
 * being dismantled; oxe_shim_put_net() lets it go.
 */
struct net *oxe_shim_dev_net_get(const struct net_device *ndev);
void oxe_shim_put_net(struct net *net);
bool oxe_shim_netif_running(const struct net_device *ndev);
bool oxe_shim_netif_carrier_ok(const struct net_device *ndev);
void oxe_shim_dev_hold(struct net_device *ndev);
void oxe_shim_dev_put(struct net_device *ndev);
struct net_device *oxe_shim_netdev_notifier_info_to_dev(void *info);
unsigned int oxe_shim_netdev_mtu(const struct net_device *ndev);
unsigned int oxe_shim_netdev_addr_len(const struct net_device *ndev);
const u8 *oxe_shim_netdev_addr(const struct net_device *ndev);
const char *oxe_shim_netdev_name(const struct net_device *ndev);
/*
 * The RDMA_DRIVER_UNKNOWN device (a reference) on @ndev, or on the real
 * netdev under a VLAN.
 */
struct ib_device *oxe_shim_ib_device_get_by_netdev(struct net_device *ndev);

/* ---- Memory ---- */
struct ib_umem *oxe_shim_ib_umem_get(struct ib_device *dev, u64 addr, size_t size, int access);
/*
 * current->mm, as ib_umem_get records it (umem->owning_mm), with a reference on
 * the struct (mmgrab), or NULL; and its release.
 */
void *oxe_shim_mmgrab_current(void);
void oxe_shim_mmdrop(void *mm);
/* Page frame numbers of a umem's pages, in order; returns how many were written. */
size_t oxe_shim_umem_pfns(struct ib_umem *umem, unsigned long skip, unsigned long *pfns, size_t max);
/* A pinned page (by pfn) mapped for the kernel, for copies and atomics. */
void *oxe_shim_kmap_local_pfn(unsigned long pfn);
void oxe_shim_kunmap_local(void *va);
void oxe_shim_set_pfn_dirty(unsigned long pfn);
/*
 * Kernel memory a kernel consumer mapped for a fast-registration MR (on a
 * virtual-DMA device its DMA addresses are kernel virtual addresses):
 * whether @addr lies in the direct map, and its page frame number.
 */
bool oxe_shim_kva_valid(unsigned long addr);
unsigned long oxe_shim_kva_pfn(unsigned long addr);
/* One DMA-mapped scatterlist entry: its address and length, and the next entry. */
struct scatterlist *oxe_shim_sg_dma(struct scatterlist *sg, u64 *addr, unsigned int *len);
/* Pages as one kernel mapping that remap_vmalloc_range() accepts. */
void *oxe_shim_vmap_user(struct page **pages, unsigned int n);

/* ---- Context ---- */
bool oxe_shim_in_atomic(void);
void oxe_shim_local_bh_disable(void);
void oxe_shim_local_bh_enable(void);

/* ---- Packets ---- */

/* A RoCE v2 address vector, flattened from rdma_ah_attr. */
struct oxe_av {
	u8 sgid[16];
	u8 dgid[16];
	u32 flow_label;
	u8 ipv6;
	u8 traffic_class;
	u8 hop_limit;
	u8 valid;
	u8 sgid_index;
};

struct oxe_route_cache;

/*
 * Transmit: route and allocate a packet of @len bytes from the IP header
 * on, which the caller writes at *@l3 (headers included). *@local is set
 * when the destination is this host (loopback delivery, no wire); *@to is
 * then an RDMA_DRIVER_UNKNOWN device (maybe not oxe's) on the netdev that
 * owns the destination address, with a reference for the caller, or NULL
 * if there is none, and the skb's device is the netdev that device holds.
 * *@extra asks for that many more bytes of room after the packet, for more
 * segments (oxe_shim_tx_gso); it says on return how many were given: none
 * to a local destination, or when memory for them is short.
 */
struct sk_buff *oxe_shim_tx_alloc(struct net_device *ndev, const struct oxe_av *av,
				  struct oxe_route_cache *rc, unsigned int len,
				  unsigned int *extra, u8 **l3, bool *local,
				  struct ib_device **to, int *err);
/* skb_put and skb_trim on a linear skb of ours. */
u8 *oxe_shim_skb_put(struct sk_buff *skb, unsigned int len);
void oxe_shim_skb_trim(struct sk_buff *skb, unsigned int len);
/*
 * Marks a finished packet of @segs UDP segments of @gso_size bytes (the
 * last may be shorter) for UDP segmentation (SKB_GSO_UDP_L4), which needs
 * the UDP checksum offloaded: each segment gets a valid one.
 */
void oxe_shim_tx_gso(struct sk_buff *skb, unsigned int gso_size, unsigned int segs);
/*
 * The route a QP sent its last packet by (shim.c says why and how it is
 * checked): oxe_shim_tx_alloc takes one, or NULL to look the route up.
 */
struct oxe_route_cache *oxe_shim_route_cache_new(void);
void oxe_shim_route_cache_free(struct oxe_route_cache *rc);
int oxe_shim_tx_send(struct sk_buff *skb);
/*
 * A received packet as oxe reads it: its IP and UDP headers at @l3 (the
 * UDP header @l4 bytes on), and the RoCE packet, BTH to ICRC, at @roce.
 * For one segment of a GSO packet taken whole (oxe_shim_skb_segment) the
 * headers are the whole packet's, and @segment is set with the segment's
 * @index: UDP segmentation would have given it lengths and an IPv4
 * identification of its own. Linearizes the skb; 0 or an errno.
 */
struct oxe_frame {
	const u8 *l3;
	size_t l4;
	const u8 *roce;
	size_t roce_len;
	bool segment;
	u16 index;
};
int oxe_shim_skb_frame(struct sk_buff *skb, struct oxe_frame *f);
/* Marks a packet just handed to oxe: not checked, not a segment. */
void oxe_shim_skb_arrived(struct sk_buff *skb);
/*
 * A GSO packet taken whole: its number of segments (after making it
 * linear), 0 for a packet that is not one, or an errno for one oxe drops
 * (not UDP segmentation, segments too short or too many).
 */
int oxe_shim_skb_gso_segments(struct sk_buff *skb);
/* Segment @index of such a packet: a clone viewing its bytes, or NULL. */
struct sk_buff *oxe_shim_skb_segment(struct sk_buff *skb, unsigned int index);
/*
 * Segment @index of such a packet as oxe reads it, without a clone: for a
 * QP's backlog drain, which reads the segments of a packet queued whole.
 */
int oxe_shim_skb_segment_frame(struct sk_buff *skb, unsigned int index, struct oxe_frame *f);
/*
 * Whether the @segs segments of such a packet all name one destination QP
 * (their BTHs' bytes 5 to 7); false for segments too short to have one.
 */
bool oxe_shim_skb_segments_one_qp(struct sk_buff *skb, unsigned int segs);
/*
 * Marks such a packet as queued whole in a QP's backlog, @next the first
 * of its @count segments not processed yet; oxe_shim_skb_batch_next says
 * which (and how many in all), or -1 for a packet not so queued.
 */
void oxe_shim_skb_set_batch(struct sk_buff *skb, u16 next, u16 count);
int oxe_shim_skb_batch_next(struct sk_buff *skb, u16 *count);
/*
 * Opens and binds port 4791 in @net (IPv4, or IPv6 only) as the socket of
 * @cpu in a group of one per CPU (shim.c says how packets find it).
 */
int oxe_shim_udp_rx_open(struct net *net, bool ipv6, int cpu, struct socket **sockp);
/*
 * Whether a packet's IP destination is one host (not multicast, not the
 * limited broadcast): UDP gives every socket of a group its own copy of
 * the others.
 */
bool oxe_shim_skb_to_host(struct sk_buff *skb);
/*
 * A RoCE socket's receive: UDP queues packets (a GSO one whole) and calls
 * @ready, which takes them with oxe_shim_udp_rx_next and finds @state with
 * oxe_shim_udp_rx_state. Detach, before the socket is released, returns
 * once no @ready call can still see @state.
 */
void oxe_shim_udp_rx_attach(struct sock *sk, void (*ready)(struct sock *sk), void *state);
void oxe_shim_udp_rx_detach(struct sock *sk);
void *oxe_shim_udp_rx_state(struct sock *sk);
/*
 * The next packet queued, its checksum checked and its device set; or NULL,
 * with *@dropped set if it took one and dropped it (a bad checksum, a
 * device gone). Softirqs off.
 */
struct sk_buff *oxe_shim_udp_rx_next(struct sock *sk, bool *dropped);
/* Whether packets are queued (a lockless look: the caller orders it). */
bool oxe_shim_udp_rx_pending(struct sock *sk);
struct net_device *oxe_shim_skb_dev(struct sk_buff *skb);
/*
 * Whether a received packet's ICRC was checked and the packet counted
 * already (kept in the skb's control buffer, oxe's once UDP or the
 * loopback queue hands the skb over).
 */
void oxe_shim_skb_set_checked(struct sk_buff *skb, bool checked);
bool oxe_shim_skb_checked(struct sk_buff *skb);

#endif
