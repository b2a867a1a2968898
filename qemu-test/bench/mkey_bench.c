// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mkey_bench DEV GID_INDEX OUT.json: what oxe's indirect keys are for, timed,
 * between two RC QPs of DEV connected to each other through its GID
 * GID_INDEX.
 *
 * Scatter: 1 MiB that belongs in 256 regions of 4 KiB, 8 KiB apart in a
 * 2 MiB target, moved three ways:
 *   - one RDMA WRITE through an indirect key laid out over the regions (one
 *     entry of 4 KiB, skipping 4 KiB, 256 rounds);
 *   - 256 RDMA WRITEs, one per region, posted together (the last signaled);
 *   - a bounce: one 1 MiB WRITE into a contiguous buffer, then the target
 *     copies it into the regions itself.
 * And, to tell the key's cost from the scatter's, one 1 MiB WRITE into the
 * contiguous buffer directly and through a key of one entry over it.
 * Configure: configuring that key through the send queue against ibv_reg_mr
 * of the same 2 MiB (the bytes it spans): alone (post, doorbell, completion:
 * a system call's round trip), and per key when BATCH keys are configured
 * in one batch, as an application posts a configuration with the work that
 * uses it.
 *
 * Each figure is the median of several runs in microseconds; the data is
 * checked after each scatter. Only ratios mean anything under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "oxedv.h"

#define REGION 4096u
#define REGIONS 256u
#define PAYLOAD (REGION * REGIONS)
#define SPAN (2u * PAYLOAD)
#define RUNS 15
#define BATCH 16

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qa, *qb;
static struct ibv_qp_ex *xa;
static union ibv_gid gid;
static int gid_index;

static void die(const char *what)
{
	fprintf(stderr, "mkey_bench: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static struct ibv_qp *new_qp(void)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = REGIONS + 8, .max_recv_wr = 4, .max_send_sge = 4,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_LOCAL_INV,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);

	if (!qp)
		die("ibv_create_qp_ex");
	return qp;
}

static void to_rts(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	struct ibv_port_attr port;

	if (ibv_query_port(ctx, 1, &port))
		die("ibv_query_port");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = dest;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* Waits for one completion, which must be a success. */
static void complete(const char *what)
{
	struct ibv_wc wc;
	double t0 = now_us();
	int n;

	for (;;) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1)
			break;
		if (now_us() - t0 > 30e6) {
			fprintf(stderr, "mkey_bench: %s: no completion in 30 s\n", what);
			exit(2);
		}
	}
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "mkey_bench: %s: %s\n", what, ibv_wc_status_str(wc.status));
		exit(2);
	}
}

static void *huge_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		       -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

/* Whether region r of the target holds the source's r-th 4 KiB. */
static int scattered(const unsigned char *target, const unsigned char *src)
{
	unsigned int r;

	for (r = 0; r < REGIONS; r++)
		if (memcmp(target + 2 * REGION * r, src + REGION * r, REGION))
			return 0;
	return 1;
}

/* Configures the n keys in one batch, the last one signaled. */
static void configure(struct oxedv_mkey **mk, int n, struct ibv_mr *tmr, unsigned char *target)
{
	struct oxedv_mr_interleaved e = { (uintptr_t)target, REGION, REGION, tmr->lkey };
	int i;

	ibv_wr_start(xa);
	for (i = 0; i < n; i++) {
		xa->wr_id = 1;
		xa->wr_flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
		oxedv_wr_mr_interleaved(xa, mk[i], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
					REGIONS, 1, &e);
	}
	if (ibv_wr_complete(xa))
		die("configure");
	complete("configure");
}

static void invalidate(struct oxedv_mkey **mk, int n)
{
	int i;

	ibv_wr_start(xa);
	for (i = 0; i < n; i++) {
		xa->wr_id = 2;
		xa->wr_flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
		ibv_wr_local_inv(xa, mk[i]->lkey);
	}
	if (ibv_wr_complete(xa))
		die("local_inv");
	complete("local_inv");
}

static void write_one(uint32_t lkey, void *from, uint32_t len, uint32_t rkey, uint64_t to,
		      int signaled)
{
	xa->wr_id = 3;
	xa->wr_flags = signaled ? IBV_SEND_SIGNALED : 0;
	ibv_wr_rdma_write(xa, rkey, to);
	ibv_wr_set_sge(xa, lkey, (uintptr_t)from, len);
}

int main(int argc, char **argv)
{
	double t_mkey[RUNS], t_writes[RUNS], t_bounce[RUNS], t_conf[RUNS], t_batch[RUNS];
	double t_reg[RUNS], t_flat[RUNS], t_flat_key[RUNS];
	struct oxedv_mkey *flat;
	struct oxedv_mkey *keys[BATCH];
	struct ibv_device **list, *dev = NULL;
	unsigned char *src, *target, *bounce;
	struct ibv_mr *smr, *tmr, *bmr;
	struct oxedv_mkey_init_attr ma;
	struct oxedv_mkey *mk = NULL;
	double t0;
	int i, n, run;
	unsigned int r;
	FILE *out;

	if (argc != 4) {
		fprintf(stderr, "usage: mkey_bench DEV GID_INDEX OUT.json\n");
		return 2;
	}
	gid_index = atoi(argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev || !oxedv_is_supported(dev)) {
		fprintf(stderr, "mkey_bench: %s is not an oxe device\n", argv[1]);
		return 2;
	}
	ctx = ibv_open_device(dev);
	if (!ctx || ibv_query_gid(ctx, 1, gid_index, &gid))
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 2 * REGIONS, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd or cq");
	qa = new_qp();
	qb = new_qp();
	xa = ibv_qp_to_qp_ex(qa);
	to_rts(qa, qb->qp_num);
	to_rts(qb, qa->qp_num);

	src = huge_alloc(PAYLOAD);
	target = huge_alloc(SPAN);
	bounce = huge_alloc(PAYLOAD);
	for (i = 0; i < (int)PAYLOAD; i++)
		src[i] = (unsigned char)(i * 7 + i / 4096);
	smr = ibv_reg_mr(pd, src, PAYLOAD, IBV_ACCESS_LOCAL_WRITE);
	tmr = ibv_reg_mr(pd, target, SPAN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	bmr = ibv_reg_mr(pd, bounce, PAYLOAD, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ma = (struct oxedv_mkey_init_attr){ .pd = pd,
					    .create_flags = OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT,
					    .max_entries = 1 };
	for (i = 0; i < BATCH; i++) {
		keys[i] = oxedv_create_mkey(&ma);
		if (!keys[i])
			die("oxedv_create_mkey");
	}
	mk = keys[0];
	flat = oxedv_create_mkey(&ma);
	if (!flat)
		die("oxedv_create_mkey");
	if (!smr || !tmr || !bmr)
		die("registration");

	for (run = 0; run < RUNS; run++) {
		/* Configuring keys, against registering the bytes one spans. */
		t0 = now_us();
		configure(keys, BATCH, tmr, target);
		t_batch[run] = (now_us() - t0) / BATCH;
		invalidate(keys, BATCH);
		t0 = now_us();
		configure(&mk, 1, tmr, target);
		t_conf[run] = now_us() - t0;
		t0 = now_us();
		{
			struct ibv_mr *m = ibv_reg_mr(pd, target, SPAN,
						      IBV_ACCESS_LOCAL_WRITE |
						      IBV_ACCESS_REMOTE_WRITE);

			t_reg[run] = now_us() - t0;
			if (!m)
				die("ibv_reg_mr");
			ibv_dereg_mr(m);
		}

		/* One WRITE through the key. */
		memset(target, 0, SPAN);
		t0 = now_us();
		ibv_wr_start(xa);
		write_one(smr->lkey, src, PAYLOAD, mk->rkey, 0, 1);
		if (ibv_wr_complete(xa))
			die("post");
		complete("WRITE through the key");
		t_mkey[run] = now_us() - t0;
		if (!scattered(target, src)) {
			fprintf(stderr, "mkey_bench: the WRITE through the key did not scatter\n");
			return 1;
		}
		invalidate(&mk, 1);

		/* 256 WRITEs. */
		memset(target, 0, SPAN);
		t0 = now_us();
		ibv_wr_start(xa);
		for (r = 0; r < REGIONS; r++)
			write_one(smr->lkey, src + REGION * r, REGION, tmr->rkey,
				  (uintptr_t)target + 2 * REGION * r, r == REGIONS - 1);
		if (ibv_wr_complete(xa))
			die("post");
		complete("256 WRITEs");
		t_writes[run] = now_us() - t0;
		if (!scattered(target, src)) {
			fprintf(stderr, "mkey_bench: the 256 WRITEs did not scatter\n");
			return 1;
		}

		/* The contiguous WRITE, directly and through a key of one entry. */
		t0 = now_us();
		ibv_wr_start(xa);
		write_one(smr->lkey, src, PAYLOAD, bmr->rkey, (uintptr_t)bounce, 1);
		if (ibv_wr_complete(xa))
			die("post");
		complete("contiguous WRITE");
		t_flat[run] = now_us() - t0;
		{
			struct ibv_sge e = { (uintptr_t)bounce, PAYLOAD, bmr->lkey };

			ibv_wr_start(xa);
			xa->wr_id = 1;
			xa->wr_flags = IBV_SEND_SIGNALED;
			oxedv_wr_mr_list(xa, flat, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
					 1, &e);
			if (ibv_wr_complete(xa))
				die("configure");
			complete("configure");
		}
		t0 = now_us();
		ibv_wr_start(xa);
		write_one(smr->lkey, src, PAYLOAD, flat->rkey, 0, 1);
		if (ibv_wr_complete(xa))
			die("post");
		complete("contiguous WRITE through a key");
		t_flat_key[run] = now_us() - t0;
		invalidate(&flat, 1);

		/* A bounce buffer, then the target's own copy. */
		memset(target, 0, SPAN);
		t0 = now_us();
		ibv_wr_start(xa);
		write_one(smr->lkey, src, PAYLOAD, bmr->rkey, (uintptr_t)bounce, 1);
		if (ibv_wr_complete(xa))
			die("post");
		complete("bounce WRITE");
		for (r = 0; r < REGIONS; r++)
			memcpy(target + 2 * REGION * r, bounce + REGION * r, REGION);
		t_bounce[run] = now_us() - t0;
		if (!scattered(target, src)) {
			fprintf(stderr, "mkey_bench: the bounce did not scatter\n");
			return 1;
		}
	}

	out = fopen(argv[3], "w");
	if (!out)
		die(argv[3]);
	fprintf(out,
		"{\"device\": \"%s\", \"runs\": %d, \"payload_bytes\": %u, \"regions\": %u,\n"
		" \"scatter_us\": {\"mkey_write\": %.1f, \"separate_writes\": %.1f, "
		"\"bounce\": %.1f, \"contiguous_write\": %.1f, \"contiguous_key_write\": %.1f},\n"
		" \"configure_us\": %.1f, \"configure_alone_us\": %.1f, \"batch\": %d,"
		" \"reg_mr_us\": %.1f}\n",
		argv[1], RUNS, PAYLOAD, REGIONS, median(t_mkey, RUNS), median(t_writes, RUNS),
		median(t_bounce, RUNS), median(t_flat, RUNS), median(t_flat_key, RUNS),
		median(t_batch, RUNS), median(t_conf, RUNS), BATCH,
		median(t_reg, RUNS));
	fclose(out);
	printf("mkey_bench %s: 1 MiB into %u regions: one WRITE through a key %.1f us, %u WRITEs "
	       "%.1f us, bounce %.1f us; configure %.1f us a key in batches of %d, %.1f us alone; "
	       "ibv_reg_mr of 2 MiB %.1f us\n",
	       argv[1], REGIONS, median(t_mkey, RUNS), REGIONS, median(t_writes, RUNS),
	       median(t_bounce, RUNS), median(t_batch, RUNS), BATCH, median(t_conf, RUNS),
	       median(t_reg, RUNS));
	printf("mkey_bench %s: 1 MiB contiguous: %.1f us directly, %.1f us through a key of one "
	       "entry\n", argv[1], median(t_flat, RUNS), median(t_flat_key, RUNS));
	for (i = 0; i < BATCH; i++)
		oxedv_destroy_mkey(keys[i]);
	oxedv_destroy_mkey(flat);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(tmr);
	ibv_dereg_mr(bmr);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
