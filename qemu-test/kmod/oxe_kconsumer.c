// SPDX-License-Identifier: GPL-2.0
/*
 * A kernel consumer of an RDMA device, as the guest's kconsumer suite loads
 * it: everything happens in module init, which fails (and says why in the
 * kernel log) if the device misbehaves.
 *
 * Two things only a kernel ULP can do are checked:
 *  - its completion handler polls the CQ at once (some ULPs do): the device
 *    must call the handler in a context where that is allowed;
 *  - a post refused because the send queue is full must leave the requests
 *    already queued alone. The sender is moved to SQD, so that nothing it
 *    posts leaves, and its UD send queue is filled with sends to a receiver
 *    on this device; one more send, to another host, must be refused; back
 *    in RTS, every queued send must reach the receiver.
 */
#include <linux/module.h>
#include <linux/inet.h>
#include <linux/netdevice.h>
#include <linux/wait.h>
#include <net/ipv6.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>

static char *netdev = "veth0";
module_param(netdev, charp, 0444);
MODULE_PARM_DESC(netdev, "the netdev of the RDMA device under test");
static int gid_index = 1;
module_param(gid_index, int, 0444);
MODULE_PARM_DESC(gid_index, "the device's RoCE v2 GID for its IPv4 address");
static char *far_ip = "10.11.0.2";
module_param(far_ip, charp, 0444);
MODULE_PARM_DESC(far_ip, "an IPv4 address of another host, with no listener for RoCE");

#define QKEY 0x11111111
#define MSG 64
#define RECVS 32
#define SEND_DEPTH 4

struct kc {
	struct ib_device *ib;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *snd, *rcv;
	struct ib_ah *near, *far;
	u8 *buf;
	u64 dma;
	size_t len;
	atomic_t sent, received, failed, handled;
	DECLARE_BITMAP(seen, RECVS);
	wait_queue_head_t wait;
};

/* The receive buffers first (GRH, then the message), the send buffers after. */
static size_t recv_off(int i)
{
	return (size_t)i * (sizeof(struct ib_grh) + MSG);
}

static size_t send_off(int i)
{
	return recv_off(RECVS) + (size_t)i * MSG;
}

static void kc_count(struct kc *kc, const struct ib_wc *wc)
{
	u64 i = wc->wr_id;

	if (wc->status != IB_WC_SUCCESS) {
		pr_err("oxe_kconsumer: completion %llu: %s\n", wc->wr_id,
		       ib_wc_status_msg(wc->status));
		atomic_inc(&kc->failed);
	} else if (wc->opcode & IB_WC_RECV) {
		/*
		 * The sender put its index in the message's first byte. (Handler
		 * calls may overlap: set_bit is atomic.)
		 */
		u8 sender = i < RECVS ? kc->buf[recv_off(i) + sizeof(struct ib_grh)] : RECVS;

		if (sender < RECVS)
			set_bit(sender, kc->seen);
		atomic_inc(&kc->received);
	} else {
		atomic_inc(&kc->sent);
	}
}

/* Polls right in the handler, and again after re-arming if it missed any. */
static void kc_comp(struct ib_cq *cq, void *ctx)
{
	struct kc *kc = ctx;
	struct ib_wc wc[8];
	int n, i;

	atomic_inc(&kc->handled);
	do {
		while ((n = ib_poll_cq(cq, ARRAY_SIZE(wc), wc)) > 0)
			for (i = 0; i < n; i++)
				kc_count(kc, &wc[i]);
	} while (ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS) > 0);
	wake_up(&kc->wait);
}

static struct ib_qp *kc_qp(struct kc *kc, u32 send_wr, u32 recv_wr)
{
	struct ib_qp_init_attr init = {
		.send_cq = kc->cq,
		.recv_cq = kc->cq,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_UD,
	};
	struct ib_qp_attr a = { .qp_state = IB_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ib_qp *qp = ib_create_qp(kc->pd, &init);
	int err;

	if (IS_ERR(qp))
		return qp;
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	a.qp_state = IB_QPS_RTR;
	err = err ?: ib_modify_qp(qp, &a, IB_QP_STATE);
	a.qp_state = IB_QPS_RTS;
	err = err ?: ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN);
	if (err) {
		ib_destroy_qp(qp);
		return ERR_PTR(err);
	}
	return qp;
}

static struct ib_ah *kc_ah(struct kc *kc, union ib_gid *dgid)
{
	struct rdma_ah_attr a = {};

	a.type = rdma_ah_find_type(kc->ib, 1);
	rdma_ah_set_port_num(&a, 1);
	rdma_ah_set_grh(&a, dgid, 0, gid_index, 64, 0);
	return rdma_create_ah(kc->pd, &a, RDMA_CREATE_AH_SLEEPABLE);
}

static int kc_send(struct kc *kc, int i, struct ib_ah *ah)
{
	struct ib_sge sge = {
		.addr = kc->dma + send_off(i),
		.length = MSG,
		.lkey = kc->pd->local_dma_lkey,
	};
	struct ib_ud_wr wr = {
		.wr = { .wr_id = 1000 + i, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED },
		.ah = ah,
		.remote_qpn = kc->rcv->qp_num,
		.remote_qkey = QKEY,
	};

	kc->buf[send_off(i)] = i;
	return ib_post_send(kc->snd, &wr.wr, NULL);
}

static int kc_recv(struct kc *kc, int i)
{
	struct ib_sge sge = {
		.addr = kc->dma + recv_off(i),
		.length = sizeof(struct ib_grh) + MSG,
		.lkey = kc->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(kc->rcv, &wr, NULL);
}

static int kc_run(struct kc *kc)
{
	struct ib_qp_attr a = {};
	union ib_gid near_gid, far_gid = {};
	__be32 far4;
	int err, i, queued = 0;

	err = rdma_query_gid(kc->ib, 1, gid_index, &near_gid);
	if (err)
		return err;
	if (!in4_pton(far_ip, -1, (u8 *)&far4, -1, NULL))
		return -EINVAL;
	ipv6_addr_set_v4mapped(far4, (struct in6_addr *)far_gid.raw);

	kc->near = kc_ah(kc, &near_gid);
	if (IS_ERR(kc->near))
		return PTR_ERR(kc->near);
	kc->far = kc_ah(kc, &far_gid);
	if (IS_ERR(kc->far))
		return PTR_ERR(kc->far);
	for (i = 0; i < RECVS; i++) {
		err = kc_recv(kc, i);
		if (err)
			return err;
	}

	a.qp_state = IB_QPS_SQD;
	err = ib_modify_qp(kc->snd, &a, IB_QP_STATE);
	if (err) {
		pr_err("oxe_kconsumer: RTS -> SQD: %d\n", err);
		return err;
	}
	while (queued < RECVS && !(err = kc_send(kc, queued, kc->near)))
		queued++;
	if (err != -ENOMEM || queued == 0 || queued >= RECVS) {
		pr_err("oxe_kconsumer: filling the send queue: %d sends, then %d\n", queued, err);
		return -EIO;
	}
	err = kc_send(kc, RECVS - 1, kc->far);
	if (err != -ENOMEM) {
		pr_err("oxe_kconsumer: a post to a full send queue returned %d\n", err);
		return -EIO;
	}
	a.qp_state = IB_QPS_RTS;
	err = ib_modify_qp(kc->snd, &a, IB_QP_STATE);
	if (err)
		return err;

	wait_event_timeout(kc->wait, atomic_read(&kc->received) >= queued &&
			   atomic_read(&kc->sent) >= queued, 30 * HZ);
	pr_info("oxe_kconsumer: %d queued, %d sent, %d received (%*pbl), %d failed, %d handler calls\n",
		queued, atomic_read(&kc->sent), atomic_read(&kc->received), RECVS, kc->seen,
		atomic_read(&kc->failed), atomic_read(&kc->handled));
	if (atomic_read(&kc->failed) || atomic_read(&kc->sent) != queued ||
	    atomic_read(&kc->received) != queued || bitmap_weight(kc->seen, RECVS) != queued) {
		pr_err("oxe_kconsumer: the queued sends did not all arrive, each once\n");
		return -EIO;
	}
	return 0;
}

static int __init kc_init(void)
{
	struct ib_cq_init_attr cq_attr = { .cqe = 2 * RECVS + SEND_DEPTH };
	struct net_device *nd;
	struct kc *kc;
	int err;

	kc = kzalloc(sizeof(*kc), GFP_KERNEL);
	if (!kc)
		return -ENOMEM;
	init_waitqueue_head(&kc->wait);
	kc->len = send_off(RECVS);
	kc->buf = kzalloc(kc->len, GFP_KERNEL);
	nd = dev_get_by_name(&init_net, netdev);
	if (nd) {
		kc->ib = ib_device_get_by_netdev(nd, RDMA_DRIVER_UNKNOWN);
		dev_put(nd);
	}
	err = !kc->ib ? -ENODEV : !kc->buf ? -ENOMEM : 0;
	if (!kc->ib)
		goto out;
	if (err)
		goto put;
	kc->dma = ib_dma_map_single(kc->ib, kc->buf, kc->len, DMA_BIDIRECTIONAL);
	err = ib_dma_mapping_error(kc->ib, kc->dma) ? -ENOMEM : 0;
	if (err)
		goto put;
	kc->pd = ib_alloc_pd(kc->ib, 0);
	err = PTR_ERR_OR_ZERO(kc->pd);
	if (err)
		goto unmap;
	kc->cq = ib_create_cq(kc->ib, kc_comp, NULL, kc, &cq_attr);
	err = PTR_ERR_OR_ZERO(kc->cq);
	if (err)
		goto pd;
	ib_req_notify_cq(kc->cq, IB_CQ_NEXT_COMP);
	kc->snd = kc_qp(kc, SEND_DEPTH, 1);
	err = PTR_ERR_OR_ZERO(kc->snd);
	if (err)
		goto cq;
	kc->rcv = kc_qp(kc, 1, RECVS);
	err = PTR_ERR_OR_ZERO(kc->rcv);
	if (err)
		goto snd;

	err = kc_run(kc);

	if (!IS_ERR_OR_NULL(kc->far))
		rdma_destroy_ah(kc->far, RDMA_DESTROY_AH_SLEEPABLE);
	if (!IS_ERR_OR_NULL(kc->near))
		rdma_destroy_ah(kc->near, RDMA_DESTROY_AH_SLEEPABLE);
	ib_destroy_qp(kc->rcv);
snd:
	ib_destroy_qp(kc->snd);
cq:
	ib_destroy_cq(kc->cq);
pd:
	ib_dealloc_pd(kc->pd);
unmap:
	ib_dma_unmap_single(kc->ib, kc->dma, kc->len, DMA_BIDIRECTIONAL);
put:
	ib_device_put(kc->ib);
out:
	kfree(kc->buf);
	kfree(kc);
	if (err)
		pr_err("oxe_kconsumer: the device on %s failed (%d)\n", netdev, err);
	else
		pr_info("oxe_kconsumer: the device on %s passed\n", netdev);
	return err;
}

static void __exit kc_exit(void)
{
}

module_init(kc_init);
module_exit(kc_exit);
MODULE_DESCRIPTION("oxe's test of a kernel consumer: polling from the completion handler, a full send queue");
MODULE_LICENSE("GPL");
