// SPDX-License-Identifier: GPL-2.0
/*
 * Fast registration as kernel ULPs (NVMe-oF, iSER, SRP, NFS/RDMA) use it,
 * checked against the pages themselves: everything happens in module init,
 * which fails (and says why in the kernel log) if the device misbehaves.
 *
 * Two RC QPs of the device are connected to each other through its GID:
 * A registers memory (IB_WR_REG_MR, IB_WR_LOCAL_INV on its send queue), B
 * is the peer that reaches it through the rkey. The MR maps separately
 * allocated pages in scrambled order; what an RDMA WRITE placed is read
 * back from each page with the CPU, at the offset the mapping implies, so
 * a mapping error cannot cancel out as it would in a write-then-read-back.
 * Bytes outside the registered range keep a guard value.
 *
 * Checked: registration of whole pages, then with an sg_offset and a short
 * last page; larger page sizes the device advertises (64 KiB, 2 MiB, of
 * compound pages); ib_map_mr_sg past max_num_sg; a REG_MR of a valid MR,
 * one asking remote write without local write, one reusing the key's
 * variant; a stale variant; LOCAL_INV and SEND with Invalidate, after
 * which the rkey gives nothing; a SEND through a just registered lkey,
 * and through a just invalidated one, on the same send queue.
 */
#include <linux/module.h>
#include <linux/jiffies.h>
#include <linux/math64.h>
#include <linux/delay.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>

static char *netdev = "veth0";
module_param(netdev, charp, 0444);
MODULE_PARM_DESC(netdev, "the netdev of the RDMA device under test");
static int gid_index = 1;
module_param(gid_index, int, 0444);
MODULE_PARM_DESC(gid_index, "the device's RoCE v2 GID for its IPv4 address");

#define PFX "oxe_fastreg: "
/* Pages an MR of order-0 pages maps; one more is allocated, to map too many. */
#define NPAGES 8
#define MAXC (NPAGES + 1)
/* B's local buffer, the source of WRITEs and the sink of READs. */
#define BUF_LEN SZ_64K
/* The receive buffer for SENDs, either way. */
#define MSG_LEN 4096
#define SEND_LEN 3000
#define INV_LEN 64
#define CQE 32
#define PSN 0x1234
#define WAIT_MS 10000
#define GUARD 0xa5
#define BUF_FILL 0x5a
/* A READ starts and ends this far inside what was written. */
#define READ_IN 777
#define ACCESS (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ)

enum { WR_REG = 1, WR_INV, WR_WRITE, WR_READ, WR_SEND, WR_RECV };

/* Memory for fast registration: chunks of 2^order pages, one MR. */
struct fr_reg {
	struct ib_mr *mr;
	struct page *chunk[MAXC];
	unsigned int order, nalloc;
	size_t size;			/* bytes a chunk: the page size mapped */
	unsigned int perm[MAXC];	/* position in the list -> chunk */
	int pos[MAXC];			/* chunk -> position in the list, or -1 */
	struct scatterlist sgl[MAXC];
	unsigned int n;			/* entries in the list */
	unsigned int mapped;		/* entries DMA-mapped (0: none) */
	unsigned int first;		/* sg_offset */
	u64 len;			/* bytes the mapping covers */
};

struct fr {
	struct ib_device *ib;
	struct ib_pd *pd;
	union ib_gid gid;
	struct ib_cq *cqa, *cqb;
	struct ib_qp *a, *b;
	u8 *buf, *msg;
	u64 buf_dma, msg_dma;
	struct fr_reg *pg, *big;
};

/* The byte at offset i of a pattern: no period a mapping error would hide in. */
static u8 pat(u32 seed, u64 i)
{
	u32 x = (u32)i * 0x9e3779b1u ^ (u32)(i >> 32) ^ seed * 0x85ebca6bu;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	x *= 0x297a2d39u;
	x ^= x >> 15;
	return x >> 24;
}

static void fr_new_key(struct ib_mr *mr)
{
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
}

/* Completions */

static int fr_expect(struct ib_cq *cq, u64 wr_id, enum ib_wc_status status,
		     const char *step, const char *what, struct ib_wc *out)
{
	unsigned long end = jiffies + msecs_to_jiffies(WAIT_MS);
	struct ib_wc wc;
	int n;

	for (;;) {
		n = ib_poll_cq(cq, 1, &wc);
		if (n > 0)
			break;
		if (n < 0) {
			pr_err(PFX "%s: polling for the %s's completion: %d\n", step, what, n);
			return n;
		}
		if (time_after(jiffies, end)) {
			pr_err(PFX "%s: no completion for the %s in %d s\n", step, what,
			       WAIT_MS / 1000);
			return -ETIMEDOUT;
		}
		usleep_range(500, 1000);
	}
	if (wc.wr_id != wr_id || wc.status != status) {
		pr_err(PFX "%s: %s: a completion of wr %llu with %s (vendor_err %#x), expected wr %llu with %s\n",
		       step, what, wc.wr_id, ib_wc_status_msg(wc.status), wc.vendor_err,
		       wr_id, ib_wc_status_msg(status));
		return -EIO;
	}
	if (out)
		*out = wc;
	return 0;
}

/* Nothing more on either CQ: no request completed twice, nothing unasked. */
static int fr_quiet(struct fr *fr, const char *step)
{
	struct ib_cq *cq[2] = { fr->cqa, fr->cqb };
	struct ib_wc wc;
	int i;

	for (i = 0; i < 2; i++) {
		if (ib_poll_cq(cq[i], 1, &wc) > 0) {
			pr_err(PFX "%s: an unexpected completion on %s's CQ: wr %llu, %s\n", step,
			       i ? "B" : "A", wc.wr_id, ib_wc_status_msg(wc.status));
			return -EIO;
		}
	}
	return 0;
}

/* The QP pair */

static struct ib_qp *fr_qp(struct fr *fr, struct ib_cq *cq)
{
	struct ib_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
	};

	return ib_create_qp(fr->pd, &init);
}

static int fr_connect(struct fr *fr, struct ib_qp *qp, u32 dest_qpn)
{
	struct ib_qp_attr a = {};
	int err;

	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			   IB_QP_ACCESS_FLAGS);
	if (err) {
		pr_err(PFX "QP %u: RESET -> INIT: %d\n", qp->qp_num, err);
		return err;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = PSN;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.type = rdma_ah_find_type(fr->ib, 1);
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, &fr->gid, 0, gid_index, 64, 0);
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
			   IB_QP_MIN_RNR_TIMER);
	if (err) {
		pr_err(PFX "QP %u: INIT -> RTR (to QP %u through GID %d): %d\n", qp->qp_num,
		       dest_qpn, gid_index, err);
		return err;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = PSN;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 6;
	a.max_rd_atomic = 1;
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			   IB_QP_RNR_RETRY | IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC);
	if (err)
		pr_err(PFX "QP %u: RTR -> RTS: %d\n", qp->qp_num, err);
	return err;
}

static void fr_pair_down(struct fr *fr)
{
	if (fr->b)
		ib_destroy_qp(fr->b);
	if (fr->a)
		ib_destroy_qp(fr->a);
	if (fr->cqb)
		ib_free_cq(fr->cqb);
	if (fr->cqa)
		ib_free_cq(fr->cqa);
	fr->a = fr->b = NULL;
	fr->cqa = fr->cqb = NULL;
}

static int fr_pair_up(struct fr *fr)
{
	struct ib_cq *cq;
	struct ib_qp *qp;
	int err;

	cq = ib_alloc_cq(fr->ib, fr, CQE, 0, IB_POLL_DIRECT);
	if (IS_ERR(cq)) {
		err = PTR_ERR(cq);
		goto fail;
	}
	fr->cqa = cq;
	cq = ib_alloc_cq(fr->ib, fr, CQE, 0, IB_POLL_DIRECT);
	if (IS_ERR(cq)) {
		err = PTR_ERR(cq);
		goto fail;
	}
	fr->cqb = cq;
	qp = fr_qp(fr, fr->cqa);
	if (IS_ERR(qp)) {
		err = PTR_ERR(qp);
		goto fail;
	}
	fr->a = qp;
	qp = fr_qp(fr, fr->cqb);
	if (IS_ERR(qp)) {
		err = PTR_ERR(qp);
		goto fail;
	}
	fr->b = qp;
	err = fr_connect(fr, fr->a, fr->b->qp_num);
	if (err)
		goto down;
	err = fr_connect(fr, fr->b, fr->a->qp_num);
	if (err)
		goto down;
	return 0;
fail:
	pr_err(PFX "creating a CQ or an RC QP: %d\n", err);
down:
	fr_pair_down(fr);
	return err;
}

/* After a step that left a QP in the error state: a fresh pair. */
static int fr_pair_reset(struct fr *fr, const char *step)
{
	int err;

	fr_pair_down(fr);
	err = fr_pair_up(fr);
	if (err)
		pr_err(PFX "%s: reconnecting a fresh QP pair: %d\n", step, err);
	return err;
}

/* Work requests */

static int fr_posted(int err, const char *step, const char *what)
{
	if (err)
		pr_err(PFX "%s: posting the %s: %d\n", step, what, err);
	return err;
}

static int fr_post_reg(struct fr *fr, struct ib_mr *mr, int access, struct ib_send_wr *next)
{
	struct ib_reg_wr wr = {
		.wr = { .wr_id = WR_REG, .opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED, .next = next },
		.mr = mr,
		.key = mr->rkey,
		.access = access,
	};

	return ib_post_send(fr->a, &wr.wr, NULL);
}

/* A REG_MR of the mapping last made, with mr->rkey, on A; its status. */
static int fr_register(struct fr *fr, struct fr_reg *r, int access,
		       enum ib_wc_status status, const char *step)
{
	int err = fr_posted(fr_post_reg(fr, r->mr, access, NULL), step, "REG_MR");

	return err ?: fr_expect(fr->cqa, WR_REG, status, step, "REG_MR", NULL);
}

static int fr_local_inv(struct fr *fr, u32 rkey, const char *step)
{
	struct ib_send_wr wr = {
		.wr_id = WR_INV, .opcode = IB_WR_LOCAL_INV, .send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = rkey,
	};
	int err = fr_posted(ib_post_send(fr->a, &wr, NULL), step, "LOCAL_INV");

	return err ?: fr_expect(fr->cqa, WR_INV, IB_WC_SUCCESS, step, "LOCAL_INV", NULL);
}

/* An RDMA WRITE or READ from B, of the first len bytes of its buffer. */
static int fr_rdma(struct fr *fr, enum ib_wr_opcode op, u64 len, u64 raddr, u32 rkey,
		   enum ib_wc_status status, const char *step)
{
	const char *what = op == IB_WR_RDMA_READ ? "RDMA READ" : "RDMA WRITE";
	u64 wr_id = op == IB_WR_RDMA_READ ? WR_READ : WR_WRITE;
	struct ib_sge sge = {
		.addr = fr->buf_dma, .length = len, .lkey = fr->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = raddr,
		.rkey = rkey,
	};
	int err = fr_posted(ib_post_send(fr->b, &wr.wr, NULL), step, what);

	return err ?: fr_expect(fr->cqb, wr_id, status, step, what, NULL);
}

static int fr_post_recv(struct fr *fr, struct ib_qp *qp, const char *step)
{
	struct ib_sge sge = {
		.addr = fr->msg_dma, .length = MSG_LEN, .lkey = fr->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = WR_RECV, .sg_list = &sge, .num_sge = 1 };

	memset(fr->msg, BUF_FILL, MSG_LEN);
	return fr_posted(ib_post_recv(qp, &wr, NULL), step, "receive");
}

/* Memory */

static void fr_unmap(struct fr *fr, struct fr_reg *r)
{
	if (r->mapped)
		ib_dma_unmap_sg(fr->ib, r->sgl, r->mapped, DMA_BIDIRECTIONAL);
	r->mapped = 0;
}

static void fr_reg_free(struct fr *fr, struct fr_reg *r)
{
	unsigned int c;

	if (!r)
		return;
	if (r->mr) {
		int err = ib_dereg_mr(r->mr);

		if (err)
			pr_err(PFX "ib_dereg_mr: %d\n", err);
	}
	fr_unmap(fr, r);
	for (c = 0; c < r->nalloc; c++)
		__free_pages(r->chunk[c], r->order);
	kfree(r);
}

/* nchunks chunks of 2^order pages, each naturally aligned; NULL if none. */
static struct fr_reg *fr_reg_new(unsigned int order, unsigned int nchunks)
{
	gfp_t gfp = GFP_KERNEL | __GFP_NOWARN | (order ? __GFP_COMP | __GFP_RETRY_MAYFAIL : 0);
	struct fr_reg *r = kzalloc(sizeof(*r), GFP_KERNEL);

	if (!r)
		return NULL;
	r->order = order;
	r->size = PAGE_SIZE << order;
	for (r->nalloc = 0; r->nalloc < nchunks; r->nalloc++) {
		r->chunk[r->nalloc] = alloc_pages(gfp, order);
		if (!r->chunk[r->nalloc]) {
			fr_reg_free(NULL, r);
			return NULL;
		}
	}
	return r;
}

static int fr_reg_mr(struct fr *fr, struct fr_reg *r, u32 max_sg)
{
	struct ib_mr *mr = ib_alloc_mr(fr->pd, IB_MR_TYPE_MEM_REG, max_sg);

	if (IS_ERR(mr)) {
		pr_err(PFX "ib_alloc_mr(MEM_REG, %u): %ld\n", max_sg, PTR_ERR(mr));
		return PTR_ERR(mr);
	}
	r->mr = mr;
	return 0;
}

/* Where byte off of the registered range is, in the page behind it. */
static u8 *fr_at(struct fr_reg *r, u64 off, size_t *room)
{
	u64 l = r->first + off;
	unsigned int j = div_u64(l, r->size);
	size_t o = l - (u64)j * r->size;

	*room = r->size - o;
	return (u8 *)page_address(r->chunk[r->perm[j]]) + o;
}

/* A scrambled order of n chunks (not the identity), from seed. */
static void fr_scramble(struct fr_reg *r, unsigned int n, u32 seed)
{
	unsigned int i, j, t;
	u32 x = seed | 1;

	for (i = 0; i < n; i++)
		r->perm[i] = i;
	for (i = n - 1; i > 0; i--) {
		x = x * 1664525u + 1013904223u;
		j = (x >> 8) % (i + 1);
		t = r->perm[i];
		r->perm[i] = r->perm[j];
		r->perm[j] = t;
	}
	for (i = 0; i < n && r->perm[i] == i; i++)
		;
	if (i == n && n > 1)
		swap(r->perm[0], r->perm[1]);
	for (i = 0; i < r->nalloc; i++)
		r->pos[i] = -1;
	for (i = 0; i < n; i++)
		r->pos[r->perm[i]] = i;
}

/*
 * A scatterlist of n chunks in scrambled order, DMA-mapped, the last one
 * tail bytes short, mapped into the MR from first bytes in with page
 * size r->size: ib_map_mr_sg's result in *got.
 */
static int fr_map(struct fr *fr, struct fr_reg *r, unsigned int n, unsigned int first,
		  unsigned int tail, u32 seed, int *got, const char *step)
{
	unsigned int j, off = first;
	int ret;

	fr_unmap(fr, r);
	fr_scramble(r, n, seed);
	sg_init_table(r->sgl, n);
	for (j = 0; j < n; j++)
		sg_set_page(&r->sgl[j], r->chunk[r->perm[j]],
			    j == n - 1 ? r->size - tail : r->size, 0);
	ret = ib_dma_map_sg(fr->ib, r->sgl, n, DMA_BIDIRECTIONAL);
	if (ret > 0)
		r->mapped = n;
	if (ret != n) {
		pr_err(PFX "%s: ib_dma_map_sg of %u entries: %d\n", step, n, ret);
		return -EIO;
	}
	r->n = n;
	r->first = first;
	r->len = (u64)n * r->size - first - tail;
	*got = ib_map_mr_sg(r->mr, r->sgl, n, &off, r->size);
	return 0;
}

/* fr_map, which must map every entry: the MR's iova and length as implied. */
static int fr_map_all(struct fr *fr, struct fr_reg *r, unsigned int n, unsigned int first,
		      unsigned int tail, u32 seed, const char *step)
{
	int got, err = fr_map(fr, r, n, first, tail, seed, &got, step);
	u64 iova;

	if (err)
		return err;
	if (got != n) {
		pr_err(PFX "%s: ib_map_mr_sg of %u entries (page size %zu, sg_offset %u): %d\n",
		       step, n, r->size, first, got);
		return got < 0 ? got : -EIO;
	}
	iova = sg_dma_address(&r->sgl[0]) + first;
	if (r->mr->iova != iova || r->mr->length != r->len) {
		pr_err(PFX "%s: ib_map_mr_sg set iova %#llx length %llu, expected %#llx %llu\n",
		       step, r->mr->iova, r->mr->length, iova, r->len);
		return -EIO;
	}
	return 0;
}

static void fr_guard(struct fr_reg *r)
{
	unsigned int c;

	for (c = 0; c < r->nalloc; c++)
		memset(page_address(r->chunk[c]), GUARD, r->size);
}

/* The CPU writes pattern seed at [off, off + len) of the range, through the pages. */
static void fr_fill(struct fr_reg *r, u64 off, u64 len, u32 seed)
{
	u64 k = off, end = off + len;
	size_t room, i;
	u8 *p;

	while (k < end) {
		p = fr_at(r, k, &room);
		room = min_t(u64, room, end - k);
		for (i = 0; i < room; i++)
			p[i] = pat(seed, k + i);
		k += room;
	}
}

/*
 * Every byte of every page: pattern seed at [off, off + len) of the
 * registered range (the byte at range offset k being pat(seed, k)), the
 * guard everywhere else.
 */
static int fr_check(struct fr_reg *r, u64 off, u64 len, u32 seed, const char *step,
		    const char *when)
{
	u64 bad = 0, l, k;
	unsigned int c;
	size_t o;
	u8 want;
	u8 *p;

	for (c = 0; c < r->nalloc; c++) {
		p = page_address(r->chunk[c]);
		for (o = 0; o < r->size; o++) {
			want = GUARD;
			if (r->pos[c] >= 0) {
				l = (u64)r->pos[c] * r->size + o;
				k = l - r->first;
				if (l >= r->first && k >= off && k < off + len)
					want = pat(seed, k);
			}
			if (p[o] == want)
				continue;
			if (!bad)
				pr_err(PFX "%s: %s: page %u (at %d in the list), byte %zu: %#x, expected %#x\n",
				       step, when, c, r->pos[c], o, p[o], want);
			bad++;
		}
	}
	if (bad) {
		pr_err(PFX "%s: %s: %llu bytes wrong (range offset %llu, %llu bytes written, sg_offset %u, %llu registered)\n",
		       step, when, bad, off, len, r->first, r->len);
		return -EIO;
	}
	return 0;
}

/* What a WRITE covers: all of the range, or a buffer's worth across its first boundary. */
static void fr_window(struct fr_reg *r, u64 *off, u64 *len)
{
	if (r->len <= BUF_LEN) {
		*off = 0;
		*len = r->len;
	} else {
		*off = r->size - r->first - BUF_LEN / 2;
		*len = BUF_LEN;
	}
}

static void fr_fill_buf(struct fr *fr, u64 off, u64 len, u32 seed)
{
	u64 i;

	for (i = 0; i < len; i++)
		fr->buf[i] = pat(seed, off + i);
}

/*
 * B writes through rkey: every byte lands where the mapping says, nothing
 * outside; then B reads what the CPU wrote into the pages.
 */
static int fr_write_read(struct fr *fr, struct fr_reg *r, u32 rkey, u32 seed, const char *step)
{
	u64 off, len, roff, rlen, i;
	int err;

	fr_window(r, &off, &len);
	fr_guard(r);
	fr_fill_buf(fr, off, len, seed);
	err = fr_rdma(fr, IB_WR_RDMA_WRITE, len, r->mr->iova + off, rkey, IB_WC_SUCCESS, step);
	err = err ?: fr_check(r, off, len, seed, step, "after the RDMA WRITE");
	if (err)
		return err;

	roff = off + READ_IN;
	rlen = len - 2 * READ_IN;
	fr_fill(r, roff, rlen, seed + 1);
	memset(fr->buf, BUF_FILL, BUF_LEN);
	err = fr_rdma(fr, IB_WR_RDMA_READ, rlen, r->mr->iova + roff, rkey, IB_WC_SUCCESS, step);
	if (err)
		return err;
	for (i = 0; i < BUF_LEN; i++) {
		u8 want = i < rlen ? pat(seed + 1, roff + i) : BUF_FILL;

		if (fr->buf[i] != want) {
			pr_err(PFX "%s: RDMA READ of %llu bytes at range offset %llu: byte %llu is %#x, expected %#x\n",
			       step, rlen, roff, i, fr->buf[i], want);
			return -EIO;
		}
	}
	return fr_quiet(fr, step);
}

/*
 * B writes through an rkey that must give nothing: a remote access error,
 * the pages untouched. B is in the error state after it: a fresh pair.
 */
static int fr_write_refused(struct fr *fr, struct fr_reg *r, u32 rkey, u32 seed,
			    const char *step)
{
	u64 off, len;
	int err;

	fr_window(r, &off, &len);
	fr_guard(r);
	fr_fill_buf(fr, off, len, seed);
	err = fr_rdma(fr, IB_WR_RDMA_WRITE, len, r->mr->iova + off, rkey,
		      IB_WC_REM_ACCESS_ERR, step);
	err = err ?: fr_check(r, 0, 0, seed, step, "after an RDMA WRITE that was refused");
	return err ?: fr_pair_reset(fr, step);
}

/* Steps */

static int fr_reg_pages(struct fr *fr)
{
	const char *step = "reg-pages";
	struct fr_reg *r = fr->pg;
	int err;

	fr_new_key(r->mr);
	err = fr_map_all(fr, r, NPAGES, 0, 0, 1, step);
	err = err ?: fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 11, step);
	err = err ?: fr_local_inv(fr, r->mr->rkey, step);
	if (!err)
		pr_info(PFX "%s: ok (%u pages of %zu bytes in scrambled order, %llu bytes)\n",
			step, NPAGES, r->size, r->len);
	return err;
}

static int fr_reg_offset(struct fr *fr)
{
	const char *step = "reg-offset";
	struct fr_reg *r = fr->pg;
	int err;

	fr_new_key(r->mr);
	err = fr_map_all(fr, r, NPAGES, 100, 300, 2, step);
	err = err ?: fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 12, step);
	err = err ?: fr_local_inv(fr, r->mr->rkey, step);
	if (!err)
		pr_info(PFX "%s: ok (sg_offset 100, last page 300 bytes short: %llu bytes)\n",
			step, r->len);
	return err;
}

/* A registration with pages of size bytes, of nchunks compound pages. */
static int fr_page_size(struct fr *fr, unsigned long size, unsigned int nchunks)
{
	const char *step = size == SZ_2M ? "page-size-2M" : "page-size-64K";
	u64 cap = fr->ib->attrs.page_size_cap;
	struct fr_reg *r;
	int err;

	if (size <= PAGE_SIZE) {
		pr_info(PFX "%s: skipped (not larger than PAGE_SIZE)\n", step);
		return 0;
	}
	if (!(cap & size)) {
		pr_info(PFX "%s: skipped (page_size_cap %#llx does not have it)\n", step, cap);
		return 0;
	}
	if (nchunks > fr->ib->attrs.max_fast_reg_page_list_len) {
		pr_info(PFX "%s: skipped (max_fast_reg_page_list_len %u)\n", step,
			fr->ib->attrs.max_fast_reg_page_list_len);
		return 0;
	}
	r = fr_reg_new(get_order(size), nchunks);
	if (!r) {
		pr_info(PFX "%s: skipped (could not allocate %u order-%d pages)\n", step,
			nchunks, get_order(size));
		return 0;
	}
	fr->big = r;
	err = fr_reg_mr(fr, r, nchunks);
	if (err)
		return err;
	fr_new_key(r->mr);
	/* The data starts and ends in the middle of a big page, past its first small one. */
	err = fr_map_all(fr, r, nchunks, PAGE_SIZE + 100, PAGE_SIZE + 300, 3, step);
	err = err ?: fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 13, step);
	err = err ?: fr_local_inv(fr, r->mr->rkey, step);
	if (err)
		return err;
	pr_info(PFX "%s: ok (%u pages of %lu KiB, sg_offset %lu, %llu bytes)\n", step,
		nchunks, size / 1024, PAGE_SIZE + 100, r->len);
	fr->big = NULL;
	fr_reg_free(fr, r);
	return 0;
}

static int fr_max_sg(struct fr *fr)
{
	const char *step = "max-num-sg";
	struct fr_reg *r = fr->pg;
	int ret, err;

	err = fr_map(fr, r, MAXC, 0, 0, 4, &ret, step);
	if (err)
		return err;
	if (ret >= MAXC) {
		pr_err(PFX "%s: ib_map_mr_sg mapped %d entries into an MR of max_num_sg %u\n",
		       step, ret, NPAGES);
		return -EIO;
	}
	pr_info(PFX "%s: ok (ib_map_mr_sg of %u entries, max_num_sg %u: %d)\n", step, MAXC,
		NPAGES, ret);
	return 0;
}

/*
 * A REG_MR of an MR that is Valid: refused (fastreg.rs register: the MR
 * must be Free) with a Memory Management Operation Error, which ends the
 * QP; the registration in force stays, key and all.
 */
static int fr_reg_valid(struct fr *fr)
{
	const char *step = "reg-valid-mr";
	struct fr_reg *r = fr->pg;
	u32 old;
	int err;

	fr_new_key(r->mr);
	err = fr_map_all(fr, r, NPAGES, 0, 0, 5, step);
	err = err ?: fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	if (err)
		return err;
	old = r->mr->rkey;
	fr_new_key(r->mr);
	err = fr_register(fr, r, ACCESS, IB_WC_MW_BIND_ERR, step);
	err = err ?: fr_pair_reset(fr, step);
	err = err ?: fr_write_read(fr, r, old, 15, step);
	err = err ?: fr_local_inv(fr, old, step);
	if (!err)
		pr_info(PFX "%s: ok (refused with %s, rkey %#x still in force)\n", step,
			ib_wc_status_msg(IB_WC_MW_BIND_ERR), old);
	return err;
}

/*
 * Remote write without local write, which IBTA forbids for a memory region
 * (fastreg.rs register validates the rights with Access::validate_for_mr):
 * refused, the MR left Free, so a REG_MR after it succeeds.
 */
static int fr_access(struct fr *fr)
{
	const char *step = "access";
	struct fr_reg *r = fr->pg;
	int err;

	fr_new_key(r->mr);
	err = fr_register(fr, r, IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ,
			  IB_WC_MW_BIND_ERR, step);
	err = err ?: fr_pair_reset(fr, step);
	if (err)
		return err;
	fr_new_key(r->mr);
	err = fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 16, step);
	err = err ?: fr_local_inv(fr, r->mr->rkey, step);
	if (!err)
		pr_info(PFX "%s: ok (REMOTE_WRITE without LOCAL_WRITE refused with %s, the MR left free)\n",
			step, ib_wc_status_msg(IB_WC_MW_BIND_ERR));
	return err;
}

/*
 * A REG_MR with the key it had before the invalidation, its variant not
 * updated: accepted (fastreg.rs register checks only that the key keeps
 * the MR's index; rxe does the same); the key works.
 */
static int fr_same_key(struct fr *fr)
{
	const char *step = "same-key";
	struct fr_reg *r = fr->pg;
	int err;

	err = fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 17, step);
	err = err ?: fr_local_inv(fr, r->mr->rkey, step);
	if (!err)
		pr_info(PFX "%s: ok (rkey %#x registered again without a new variant)\n", step,
			r->mr->rkey);
	return err;
}

/* Registered again with a new variant: the old one gives nothing. */
static int fr_stale_key(struct fr *fr)
{
	const char *step = "stale-key";
	struct fr_reg *r = fr->pg;
	u32 old = r->mr->rkey;
	int err;

	fr_new_key(r->mr);
	err = fr_map_all(fr, r, NPAGES, 0, 0, 6, step);
	err = err ?: fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_refused(fr, r, old, 18, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 19, step);
	err = err ?: fr_local_inv(fr, r->mr->rkey, step);
	if (!err)
		pr_info(PFX "%s: ok (old rkey %#x refused, new %#x works)\n", step, old,
			r->mr->rkey);
	return err;
}

static int fr_local_inv_step(struct fr *fr)
{
	const char *step = "local-inv";
	struct fr_reg *r = fr->pg;
	int err;

	fr_new_key(r->mr);
	err = fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 20, step);
	err = err ?: fr_local_inv(fr, r->mr->rkey, step);
	err = err ?: fr_write_refused(fr, r, r->mr->rkey, 21, step);
	if (!err)
		pr_info(PFX "%s: ok (a WRITE through the invalidated rkey: %s, pages untouched)\n",
			step, ib_wc_status_msg(IB_WC_REM_ACCESS_ERR));
	return err;
}

/* B's SEND with Invalidate names the rkey: A's receive says so, the rkey gives nothing. */
static int fr_remote_inv(struct fr *fr)
{
	const char *step = "remote-inv";
	struct fr_reg *r = fr->pg;
	struct ib_sge sge = {
		.addr = fr->buf_dma, .length = INV_LEN, .lkey = fr->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_id = WR_SEND, .sg_list = &sge, .num_sge = 1,
		.opcode = IB_WR_SEND_WITH_INV, .send_flags = IB_SEND_SIGNALED,
	};
	struct ib_wc wc;
	int err, i;

	fr_new_key(r->mr);
	err = fr_register(fr, r, ACCESS, IB_WC_SUCCESS, step);
	err = err ?: fr_write_read(fr, r, r->mr->rkey, 22, step);
	err = err ?: fr_post_recv(fr, fr->a, step);
	if (err)
		return err;
	fr_fill_buf(fr, 0, INV_LEN, 23);
	wr.ex.invalidate_rkey = r->mr->rkey;
	err = fr_posted(ib_post_send(fr->b, &wr, NULL), step, "SEND with Invalidate");
	err = err ?: fr_expect(fr->cqb, WR_SEND, IB_WC_SUCCESS, step, "SEND with Invalidate", NULL);
	err = err ?: fr_expect(fr->cqa, WR_RECV, IB_WC_SUCCESS, step, "receive", &wc);
	if (err)
		return err;
	if (!(wc.wc_flags & IB_WC_WITH_INVALIDATE) || wc.ex.invalidate_rkey != r->mr->rkey ||
	    wc.byte_len != INV_LEN || wc.opcode != IB_WC_RECV) {
		pr_err(PFX "%s: the receive: opcode %d, flags %#x, invalidated rkey %#x, %u bytes; expected RECV, WITH_INVALIDATE, %#x, %u bytes\n",
		       step, wc.opcode, wc.wc_flags, wc.ex.invalidate_rkey, wc.byte_len,
		       r->mr->rkey, INV_LEN);
		return -EIO;
	}
	for (i = 0; i < INV_LEN; i++) {
		if (fr->msg[i] != pat(23, i)) {
			pr_err(PFX "%s: the received message differs at byte %d\n", step, i);
			return -EIO;
		}
	}
	err = fr_quiet(fr, step);
	err = err ?: fr_write_refused(fr, r, r->mr->rkey, 24, step);
	if (!err)
		pr_info(PFX "%s: ok (rkey %#x invalidated by the peer's SEND; a WRITE through it: %s)\n",
			step, r->mr->rkey, ib_wc_status_msg(IB_WC_REM_ACCESS_ERR));
	return err;
}

/*
 * Send queue order: a SEND posted right after a REG_MR gathers through the
 * lkey it registers; one posted right after a LOCAL_INV of it fails with a
 * local protection error and sends nothing. No fence: IBTA has memory
 * operations take effect in send queue order (oxe: req.rs executes them at
 * fetch, before a later request is fetched), as ULPs rely on.
 */
static int fr_order(struct fr *fr)
{
	const char *step = "order";
	struct fr_reg *r = fr->pg;
	struct ib_sge sge = { .length = SEND_LEN };
	struct ib_send_wr send = {
		.wr_id = WR_SEND, .sg_list = &sge, .num_sge = 1,
		.opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED,
	};
	struct ib_send_wr inv = {
		.wr_id = WR_INV, .opcode = IB_WR_LOCAL_INV, .send_flags = IB_SEND_SIGNALED,
		.next = &send,
	};
	/* Across the boundary of the first two pages in the list. */
	u64 soff = PAGE_SIZE - 100 - SEND_LEN / 2;
	struct ib_wc wc;
	int err, i;

	fr_new_key(r->mr);
	err = fr_map_all(fr, r, NPAGES, 100, 300, 7, step);
	err = err ?: fr_post_recv(fr, fr->b, step);
	if (err)
		return err;
	fr_guard(r);
	fr_fill(r, 0, r->len, 25);
	sge.addr = r->mr->iova + soff;
	sge.lkey = r->mr->lkey;
	err = fr_posted(fr_post_reg(fr, r->mr, ACCESS, &send), step, "REG_MR and SEND");
	err = err ?: fr_expect(fr->cqa, WR_REG, IB_WC_SUCCESS, step, "REG_MR", NULL);
	err = err ?: fr_expect(fr->cqa, WR_SEND, IB_WC_SUCCESS, step,
			       "SEND through the lkey just registered", NULL);
	err = err ?: fr_expect(fr->cqb, WR_RECV, IB_WC_SUCCESS, step, "receive", &wc);
	if (err)
		return err;
	if (wc.byte_len != SEND_LEN) {
		pr_err(PFX "%s: received %u bytes, sent %u\n", step, wc.byte_len, SEND_LEN);
		return -EIO;
	}
	for (i = 0; i < MSG_LEN; i++) {
		u8 want = i < SEND_LEN ? pat(25, soff + i) : BUF_FILL;

		if (fr->msg[i] != want) {
			pr_err(PFX "%s: the message sent from range offset %llu differs at byte %d: %#x, expected %#x\n",
			       step, soff, i, fr->msg[i], want);
			return -EIO;
		}
	}

	err = fr_post_recv(fr, fr->b, step);
	if (err)
		return err;
	inv.ex.invalidate_rkey = r->mr->rkey;
	err = fr_posted(ib_post_send(fr->a, &inv, NULL), step, "LOCAL_INV and SEND");
	err = err ?: fr_expect(fr->cqa, WR_INV, IB_WC_SUCCESS, step, "LOCAL_INV", NULL);
	err = err ?: fr_expect(fr->cqa, WR_SEND, IB_WC_LOC_PROT_ERR, step,
			       "SEND through the lkey just invalidated", NULL);
	if (err)
		return err;
	/* Had it gone, the receive would have completed by the time A's error did. */
	if (ib_poll_cq(fr->cqb, 1, &wc) > 0) {
		pr_err(PFX "%s: B got a completion (wr %llu, %s) for a SEND through an invalidated lkey\n",
		       step, wc.wr_id, ib_wc_status_msg(wc.status));
		return -EIO;
	}
	err = fr_pair_reset(fr, step);
	if (!err)
		pr_info(PFX "%s: ok (SEND after REG_MR gathers through the new lkey; after LOCAL_INV: %s)\n",
			step, ib_wc_status_msg(IB_WC_LOC_PROT_ERR));
	return err;
}

static int fr_run(struct fr *fr)
{
	struct ib_device_attr *at = &fr->ib->attrs;
	int err;

	pr_info(PFX "%s: max_fast_reg_page_list_len %u, page_size_cap %#llx\n",
		dev_name(&fr->ib->dev), at->max_fast_reg_page_list_len, at->page_size_cap);
	if (!(at->device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS)) {
		pr_err(PFX "the device does not advertise IB_DEVICE_MEM_MGT_EXTENSIONS\n");
		return -EIO;
	}
	if (at->max_fast_reg_page_list_len < NPAGES || !(at->page_size_cap & PAGE_SIZE)) {
		pr_err(PFX "the device cannot register %u pages of PAGE_SIZE\n", NPAGES);
		return -EIO;
	}
	err = rdma_query_gid(fr->ib, 1, gid_index, &fr->gid);
	if (err) {
		pr_err(PFX "GID %d of port 1: %d\n", gid_index, err);
		return err;
	}
	err = fr_pair_up(fr);
	if (err)
		return err;
	pr_info(PFX "connect: ok (RC QPs %u and %u through GID %d)\n", fr->a->qp_num,
		fr->b->qp_num, gid_index);

	fr->pg = fr_reg_new(0, MAXC);
	if (!fr->pg) {
		err = -ENOMEM;
		goto out;
	}
	err = fr_reg_mr(fr, fr->pg, NPAGES);
	err = err ?: fr_reg_pages(fr);
	err = err ?: fr_reg_offset(fr);
	err = err ?: fr_page_size(fr, SZ_64K, 3);
	err = err ?: fr_page_size(fr, SZ_2M, 2);
	err = err ?: fr_max_sg(fr);
	err = err ?: fr_reg_valid(fr);
	err = err ?: fr_access(fr);
	err = err ?: fr_same_key(fr);
	err = err ?: fr_stale_key(fr);
	err = err ?: fr_local_inv_step(fr);
	err = err ?: fr_remote_inv(fr);
	err = err ?: fr_order(fr);
out:
	/* The QPs first: nothing reaches the pages once they are gone. */
	fr_pair_down(fr);
	fr_reg_free(fr, fr->big);
	fr_reg_free(fr, fr->pg);
	return err;
}

static int __init fr_init(void)
{
	struct net_device *nd;
	struct fr *fr;
	int err;

	fr = kzalloc(sizeof(*fr), GFP_KERNEL);
	if (!fr)
		return -ENOMEM;
	fr->buf = kmalloc(BUF_LEN, GFP_KERNEL);
	fr->msg = kmalloc(MSG_LEN, GFP_KERNEL);
	nd = dev_get_by_name(&init_net, netdev);
	if (nd) {
		fr->ib = ib_device_get_by_netdev(nd, RDMA_DRIVER_UNKNOWN);
		dev_put(nd);
	}
	err = !fr->ib ? -ENODEV : !fr->buf || !fr->msg ? -ENOMEM : 0;
	if (!fr->ib) {
		pr_err(PFX "no RDMA device on %s\n", netdev);
		goto out;
	}
	if (err)
		goto put;
	fr->buf_dma = ib_dma_map_single(fr->ib, fr->buf, BUF_LEN, DMA_BIDIRECTIONAL);
	err = ib_dma_mapping_error(fr->ib, fr->buf_dma) ? -ENOMEM : 0;
	if (err)
		goto put;
	fr->msg_dma = ib_dma_map_single(fr->ib, fr->msg, MSG_LEN, DMA_BIDIRECTIONAL);
	err = ib_dma_mapping_error(fr->ib, fr->msg_dma) ? -ENOMEM : 0;
	if (err)
		goto unmap_buf;
	fr->pd = ib_alloc_pd(fr->ib, 0);
	err = PTR_ERR_OR_ZERO(fr->pd);
	if (err)
		goto unmap_msg;

	err = fr_run(fr);

	ib_dealloc_pd(fr->pd);
unmap_msg:
	ib_dma_unmap_single(fr->ib, fr->msg_dma, MSG_LEN, DMA_BIDIRECTIONAL);
unmap_buf:
	ib_dma_unmap_single(fr->ib, fr->buf_dma, BUF_LEN, DMA_BIDIRECTIONAL);
put:
	ib_device_put(fr->ib);
out:
	kfree(fr->msg);
	kfree(fr->buf);
	kfree(fr);
	if (err)
		pr_err(PFX "the device on %s failed (%d)\n", netdev, err);
	else
		pr_info(PFX "the device on %s passed\n", netdev);
	return err;
}

static void __exit fr_exit(void)
{
}

module_init(fr_init);
module_exit(fr_exit);
MODULE_DESCRIPTION("oxe's test of fast registration as kernel ULPs use it, checked against the pages");
MODULE_LICENSE("GPL");
