// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mkey_inflight OXE_DEV OXE_GID PEER_DEV PEER_GID: an invalidation stops a
 * message in flight, even when the key is configured again before the
 * message's next packet (IBTA 10.6.7).
 *
 * The responder is an RC QP of OXE_DEV with an indirect key over region A
 * of its buffer; the requester, an RC QP of PEER_DEV (rxe, which sends each
 * packet as a datagram of its own), writes two packets through the key. The
 * suite shapes the peer's link so that the packets arrive about two seconds
 * apart. Once the first has landed in A, the responder invalidates the key
 * and configures it again, under the same key, over region B. The second
 * packet must then be refused (the WRITE completes with a remote access
 * error), and neither B nor the rest of A may hold any of its bytes.
 *
 * Exit status 0 if every check held, 1 if one did not, 2 if the setup
 * failed; one line per failure on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "oxedv.h"

#define BUF 65536
#define GUARD 0xee
#define MSG 2048	/* two packets at a 1024-byte MTU */
#define HALF 1024
#define REGION_A 0
#define REGION_B 16384

static int failures;

#define CHECK(cond, ...)                                        \
	do {                                                    \
		if (!(cond)) {                                  \
			fprintf(stderr, "FAIL: " __VA_ARGS__);  \
			fputc('\n', stderr);                    \
			failures++;                             \
		}                                               \
	} while (0)

static void die(const char *what)
{
	fprintf(stderr, "mkey_inflight: %s: %s\n", what, strerror(errno ? errno : EIO));
	exit(2);
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	int gid_index;
};

static void open_side(struct side *s, const char *name, int gid_index)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i;

	if (!list)
		die("ibv_get_device_list");
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			s->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!s->ctx)
		die(name);
	s->gid_index = gid_index;
	if (ibv_query_gid(s->ctx, 1, gid_index, &s->gid))
		die("ibv_query_gid");
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0);
	if (!s->pd || !s->cq)
		die("pd or cq");
}

static void new_qp(struct side *s, int ex)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = s->pd,
	};

	if (ex) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_LOCAL_INV;
	}
	s->qp = ibv_create_qp_ex(s->ctx, &a);
	if (!s->qp)
		die("ibv_create_qp_ex");
}

/* Connects `s` to QP `dest` at `dgid`; the requester's transport timer is
 * long (8.6 s), so that no retry overtakes the shaped link. */
static void to_rts(struct side *s, uint32_t dest, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = s->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 21;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The next completion of `s`, or -1 after `secs`. */
static int completion(struct side *s, double secs, struct ibv_wc *wc)
{
	double t0 = now();
	int n;

	while ((n = ibv_poll_cq(s->cq, 1, wc)) == 0)
		if (now() - t0 > secs)
			return -1;
	if (n < 0)
		die("ibv_poll_cq");
	return wc->status;
}

/* Posts one local work request on the responder's QP; its status. */
static int local_wr(struct side *r, struct oxedv_mkey *mk, const struct ibv_sge *entry)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(r->qp);
	struct ibv_wc wc;

	ibv_wr_start(x);
	x->wr_id = entry ? 2 : 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	if (entry)
		oxedv_wr_mr_list(x, mk, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 1, entry);
	else
		ibv_wr_local_inv(x, mk->lkey);
	if (ibv_wr_complete(x))
		die("ibv_wr_complete");
	return completion(r, 10, &wc);
}

static size_t differs(const unsigned char *p, int byte, size_t n)
{
	size_t i, bad = 0;

	for (i = 0; i < n; i++)
		bad += p[i] != byte;
	return bad;
}

int main(int argc, char **argv)
{
	struct side r = { 0 }, q = { 0 };
	unsigned char *tb, *src;
	struct ibv_mr *mtb, *msrc;
	struct oxedv_mkey_init_attr ka = { 0 };
	struct oxedv_mkey *mk;
	struct ibv_sge entry;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	double t0, landed, reconfigured;
	int i, st;

	if (argc != 5) {
		fprintf(stderr, "usage: mkey_inflight OXE_DEV OXE_GID PEER_DEV PEER_GID\n");
		return 2;
	}
	open_side(&r, argv[1], atoi(argv[2]));
	open_side(&q, argv[3], atoi(argv[4]));
	tb = aligned_alloc(4096, BUF);
	src = aligned_alloc(4096, 4096);
	if (!tb || !src)
		die("buffers");
	memset(tb, GUARD, BUF);
	for (i = 0; i < MSG; i++)
		src[i] = (unsigned char)(i * 7 + 1) | 1;	/* never GUARD (0xee is even) */
	mtb = ibv_reg_mr(r.pd, tb, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	msrc = ibv_reg_mr(q.pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mtb || !msrc)
		die("ibv_reg_mr");
	ka.pd = r.pd;
	ka.create_flags = OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
	ka.max_entries = 1;
	mk = oxedv_create_mkey(&ka);
	if (!mk)
		die("oxedv_create_mkey");
	new_qp(&r, 1);
	new_qp(&q, 0);
	to_rts(&r, q.qp->qp_num, &q.gid);
	to_rts(&q, r.qp->qp_num, &r.gid);

	entry = (struct ibv_sge){ (uintptr_t)tb + REGION_A, MSG, mtb->lkey };
	if (local_wr(&r, mk, &entry) != IBV_WC_SUCCESS)
		die("configuring the key over region A");

	/* The peer's WRITE of two packets through the key, at its offset 0. */
	sge = (struct ibv_sge){ (uintptr_t)src, MSG, msrc->lkey };
	wr.wr_id = 9;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = 0;
	wr.wr.rdma.rkey = mk->rkey;
	t0 = now();
	if (ibv_post_send(q.qp, &wr, &bad))
		die("ibv_post_send");

	/* The first packet lands in A (the last of its bytes, once there). */
	while (tb[REGION_A + HALF - 1] == GUARD)
		if (now() - t0 > 30)
			die("the first packet never landed");
	landed = now() - t0;
	st = local_wr(&r, mk, NULL);
	CHECK(st == IBV_WC_SUCCESS, "LOCAL_INV of the key: status %d", st);
	entry = (struct ibv_sge){ (uintptr_t)tb + REGION_B, MSG, mtb->lkey };
	st = local_wr(&r, mk, &entry);
	CHECK(st == IBV_WC_SUCCESS, "configuring the key again over region B: status %d", st);
	reconfigured = now() - t0;
	/* Until the second packet arrives, the message is half done. */
	CHECK(differs(tb + REGION_A + HALF, GUARD, HALF) == 0,
	      "the second packet arrived before the key was configured again (%.2f s, first packet at %.2f s): the link is not shaped",
	      reconfigured, landed);

	st = completion(&q, 30, &wc);
	printf("first packet at %.2f s, key invalidated and configured again at %.2f s, WRITE completed at %.2f s with status %d (%s)\n",
	       landed, reconfigured, now() - t0, st, st >= 0 ? ibv_wc_status_str(st) : "none");
	CHECK(st == IBV_WC_REM_ACCESS_ERR,
	      "the WRITE begun before the invalidation completed with status %d, not a remote access error", st);
	CHECK(memcmp(tb + REGION_A, src, HALF) == 0, "the first packet's bytes are not in region A");
	CHECK(differs(tb + REGION_A + HALF, GUARD, HALF) == 0,
	      "%zu bytes of region A past the first packet were written",
	      differs(tb + REGION_A + HALF, GUARD, HALF));
	CHECK(differs(tb + REGION_B, GUARD, MSG) == 0,
	      "%zu bytes of region B, which the key named only after the invalidation, were written",
	      differs(tb + REGION_B, GUARD, MSG));
	CHECK(differs(tb + REGION_A + MSG, GUARD, REGION_B - REGION_A - MSG) == 0 &&
	      differs(tb + REGION_B + MSG, GUARD, BUF - REGION_B - MSG) == 0,
	      "bytes outside both regions were written");

	ibv_destroy_qp(q.qp);
	ibv_destroy_qp(r.qp);
	oxedv_destroy_mkey(mk);
	ibv_dereg_mr(mtb);
	ibv_dereg_mr(msrc);
	ibv_destroy_cq(q.cq);
	ibv_destroy_cq(r.cq);
	ibv_dealloc_pd(q.pd);
	ibv_dealloc_pd(r.pd);
	ibv_close_device(q.ctx);
	ibv_close_device(r.ctx);
	printf("mkey_inflight %s <- %s: %d failure(s)\n", argv[1], argv[3], failures);
	return failures ? 1 : 0;
}
