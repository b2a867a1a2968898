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
struct net_device *oxe_shim_netdev_notifier_info_to_dev(void *info);

int oxe_shim_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
int oxe_shim_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
/* Whether @len bytes of the request from @offset on are all zero. */
bool oxe_shim_udata_cleared(struct ib_udata *udata, size_t offset, size_t len);
/* copy_to_user to a user address carried in a command (0 or -EFAULT). */
struct nlattr *oxe_shim_nla_nest_start_driver(struct sk_buff *msg);
void oxe_shim_nla_nest_end(struct sk_buff *msg, struct nlattr *start);
void oxe_shim_nla_nest_cancel(struct sk_buff *msg, struct nlattr *start);
int oxe_shim_udp_tunnel_open(struct net *net, bool ipv6, struct socket **sockp,
			     int (*rcv)(struct sock *sk, struct sk_buff *skb));
unsigned int oxe_shim_netdev_mtu(const struct net_device *ndev);
unsigned int oxe_shim_netdev_addr_len(const struct net_device *ndev);
/*
 * The link-layer address the IP stack maps multicast GID @gid (16 bytes,
 * IPv4-mapped or IPv6) to, added to or removed from @ndev's receive filter
 * (reference counted). Devices without Ethernet addresses have no filter.
 */
/* One line of the debugfs "gids" file: -1 the header, else GID entry @i. */
int oxe_shim_gid_line(struct ib_device *ib, int i, char *buf, size_t len);


/* ---- Data path (queues, packets, pages, deferred work) ---- */

/*
 * Memory a queue lives in: zeroed, mappable to user space with
 * remap_vmalloc_range, and, if @account, charged to the caller's memory
 * cgroup, failing rather than calling the OOM killer at its limit.
 */
void *oxe_shim_vmalloc_user(size_t len, bool account);

/* A pinned page (by pfn) mapped for the kernel, for copies and atomics. */
void *oxe_shim_kmap_local_pfn(unsigned long pfn);
void oxe_shim_kunmap_local(void *va);

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

/*
 * Transmit: route and allocate a packet of @len bytes from the IP header
 * on, which the caller writes at *@l3 (headers included). *@local is set
 * when the destination is this host (loopback delivery, no wire); *@to is
 * then an RDMA_DRIVER_UNKNOWN device (maybe not oxe's) on the netdev that
 * owns the destination address, with a reference for the caller, or NULL
 * if there is none, and the skb's device is the netdev that device holds.
 */
struct sk_buff *oxe_shim_tx_alloc(struct net_device *ndev, const struct oxe_av *av,
				  unsigned int len, u8 **l3, bool *local,
				  struct ib_device **to, int *err);
int oxe_shim_tx_send(struct sk_buff *skb);
/* The bytes from the IP header to the end of the packet, linearized. */
u8 *oxe_shim_skb_l3(struct sk_buff *skb, size_t *len, size_t *l4_off);
struct net_device *oxe_shim_skb_dev(struct sk_buff *skb);

/* Macros and inline functions of workqueues, CPU masks and skb lists. */
struct workqueue_struct *oxe_shim_alloc_workqueue(const char *name, unsigned int flags);
void oxe_shim_init_delayed_work(struct delayed_work *dw, work_func_t fn);
void oxe_shim_init_work(struct work_struct *work, work_func_t fn);
int oxe_shim_next_online_cpu(int cpu);
void oxe_shim_skb_queue_head_init(struct sk_buff_head *list);
u64 oxe_shim_jiffies64(void);
u32 oxe_shim_crc32_le(u32 crc, const void *p, size_t len);

/*
 * Protocol state is touched both in softirq (receive) and in process
 * context (verbs, doorbells, timers): spinlocks that hold off softirqs.
 */
void oxe_shim_spin_lock_bh(spinlock_t *lock);
void oxe_shim_spin_unlock_bh(spinlock_t *lock);
int oxe_shim_spin_trylock_bh(spinlock_t *lock);
void oxe_shim_local_bh_disable(void);
void oxe_shim_local_bh_enable(void);
/* Waits until every softirq receive that might still hold an object is done. */

/*
 * Releasing a umem may sleep; the last reference to an MR can be dropped by
 * the receive path. The release context is allocated with the pin, so a
 * deferred release never needs memory.
 */
struct oxe_umem_release;
struct oxe_umem_release *oxe_shim_umem_release_new(void);
void oxe_shim_umem_release(struct ib_umem *umem, struct oxe_umem_release *r,
			   struct workqueue_struct *wq);

/* Completion and async event delivery. */

/* Kernel work requests: the typed containers of an ib_send_wr. */
struct ib_device *oxe_shim_ib_device_get_by_netdev(struct net_device *ndev);
struct ib_udata *oxe_shim_attrs_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *oxe_shim_udata_uctx(struct ib_udata *udata);

#endif
