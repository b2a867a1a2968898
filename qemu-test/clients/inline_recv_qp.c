// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * inline_recv_qp DEV GID_INDEX: oxe's direct verbs for inline receive, from a
 * C program linked against the provider as an mlx5dv program links against
 * libmlx5.
 *
 * Checks that oxedv_is_supported() knows the device, that oxedv_query_device()
 * reports the threshold (64, or 0 when OXE_SCATTER_TO_CQE=0 was set before
 * the device was opened), that oxedv_create_qp() refuses what it does not
 * know, and that OXEDV_QP_CREATE_DISABLE_SCATTER_TO_CQE turns inline receive
 * off for its QP alone: a 32-byte SEND to that QP lands without moving the
 * hw counter rx_inline_cqe, the same SEND to a QP created without the flag
 * moves it by one; `rdma -dd resource show qp` says which QP uses it. Exit
 * status 0 if every check held; each failure is one line on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "oxedv.h"

#define MSG 32

static int failures;
static const char *dev_name;

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
	fprintf(stderr, "inline_recv_qp: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* rx_inline_cqe; ib_core caches hw counters for a jiffy, so wait past one. */
static long inline_count(void)
{
	char path[256];
	long v = -1;
	FILE *f;

	usleep(30000);
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/hw_counters/rx_inline_cqe",
		 dev_name);
	f = fopen(path, "r");
	if (!f)
		die(path);
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
	int gid_index;
};

static struct ibv_qp *rc_qp(struct side *s, struct oxedv_qp_init_attr *oxe)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = s->pd,
	};
	return oxedv_create_qp(s->ctx, &a, oxe);
}

static void to_rts(struct side *s, struct ibv_qp *qp, uint32_t dest, uint32_t psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = s->gid;
	a.ah_attr.grh.sgid_index = s->gid_index;
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
	a.sq_psn = psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* The SEND's (wr_id 2) and the receive's (wr_id 1) completions, in either order. */
static void poll_both(struct side *s, const char *what)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int seen = 0, n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (seen != 3) {
		n = ibv_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 20) {
				CHECK(0, "%s: no completion in 20 s", what);
				return;
			}
			continue;
		}
		CHECK(wc.status == IBV_WC_SUCCESS, "%s: wr_id %llu: status %s", what,
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		CHECK(wc.wr_id == 1 || wc.wr_id == 2, "%s: wr_id %llu", what,
		      (unsigned long long)wc.wr_id);
		if (wc.wr_id == 1) {
			CHECK(wc.opcode == IBV_WC_RECV && wc.byte_len == MSG,
			      "%s: receive opcode %d, byte_len %u", what, wc.opcode, wc.byte_len);
			seen |= 1;
		} else {
			seen |= 2;
		}
	}
}

/*
 * `rdma -dd resource show qp` of one QP: its driver attributes say whether it
 * uses inline receive ("inline_recv on|off").
 */
static void check_res_show(struct ibv_qp *qp, const char *want, const char *what)
{
	char cmd[160], out[2048] = "";
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "rdma -dd resource show qp link %s/1 lqpn %u 2>&1", dev_name,
		 qp->qp_num);
	p = popen(cmd, "r");
	if (!p)
		die("popen rdma");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	pclose(p);
	CHECK(strstr(out, want) != NULL, "%s: `%s` does not say \"%s\": %s", what, cmd, want, out);
}

/* A SEND of MSG bytes from `from` to `to`; returns rx_inline_cqe's change. */
static long send_one(struct side *s, struct ibv_qp *from, struct ibv_qp *to, int seed,
		     const char *what)
{
	char *src = s->buf, *dst = s->buf + 2048;
	struct ibv_sge rs = { (uintptr_t)dst, 1024, s->mr->lkey };
	struct ibv_sge ss = { (uintptr_t)src, MSG, s->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *bad_r;
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ss, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *bad_s;
	long before, after;
	int i;

	for (i = 0; i < MSG; i++)
		src[i] = (char)(i * 7 + seed);
	memset(dst, 0xee, 1024);
	before = inline_count();
	if (ibv_post_recv(to, &rwr, &bad_r) || ibv_post_send(from, &swr, &bad_s))
		die("post");
	poll_both(s, what);
	after = inline_count();
	CHECK(!memcmp(src, dst, MSG) && (unsigned char)dst[MSG] == 0xee,
	      "%s: the message did not land as sent", what);
	return after - before;
}

int main(int argc, char **argv)
{
	struct oxedv_qp_init_attr off = {
		.comp_mask = OXEDV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
		.create_flags = OXEDV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
	};
	struct oxedv_qp_init_attr bad_flag = {
		.comp_mask = OXEDV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
		.create_flags = 1u << 7,
	};
	struct oxedv_qp_init_attr bad_mask = { .comp_mask = 1u << 5 };
	struct oxedv_device_attr attr = { 0 };
	struct ibv_qp *tx1, *rx_off, *tx2, *rx_on, *q;
	struct ibv_device **list, *dev = NULL;
	const char *env = getenv("OXE_SCATTER_TO_CQE");
	int env_off = env && !strcmp(env, "0");
	struct side s = { 0 };
	long d_off, d_on;
	int i, n;

	if (argc != 3) {
		fprintf(stderr, "usage: inline_recv_qp DEV GID_INDEX\n");
		return 2;
	}
	dev_name = argv[1];
	s.gid_index = atoi(argv[2]);
	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list");
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "inline_recv_qp: no device %s\n", dev_name);
		return 2;
	}
	CHECK(oxedv_is_supported(dev), "oxedv_is_supported(%s) is false", dev_name);
	CHECK(!oxedv_is_supported(NULL), "oxedv_is_supported(NULL) is true");
	s.ctx = ibv_open_device(dev);
	if (!s.ctx)
		die("ibv_open_device");
	CHECK(oxedv_query_device(s.ctx, &attr) == 0, "oxedv_query_device failed");
	CHECK(attr.inline_recv_max == (env_off ? 0u : 64u), "inline_recv_max %u%s",
	      attr.inline_recv_max, env_off ? " with OXE_SCATTER_TO_CQE=0" : "");
	attr.comp_mask = 1;
	CHECK(oxedv_query_device(s.ctx, &attr) == EINVAL, "an unknown comp_mask is not EINVAL");
	if (ibv_query_gid(s.ctx, 1, s.gid_index, &s.gid))
		die("ibv_query_gid");
	s.pd = ibv_alloc_pd(s.ctx);
	s.cq = ibv_create_cq(s.ctx, 16, NULL, NULL, 0);
	s.buf = aligned_alloc(4096, 4096);
	if (!s.pd || !s.cq || !s.buf)
		die("pd, cq or buffer");
	s.mr = ibv_reg_mr(s.pd, s.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!s.mr)
		die("ibv_reg_mr");

	errno = 0;
	q = rc_qp(&s, &bad_flag);
	CHECK(!q && errno == EINVAL, "an unknown create flag: qp %p, errno %d", (void *)q, errno);
	errno = 0;
	q = rc_qp(&s, &bad_mask);
	CHECK(!q && errno == EINVAL, "an unknown comp_mask bit: qp %p, errno %d", (void *)q,
	      errno);

	tx1 = rc_qp(&s, NULL);
	rx_off = rc_qp(&s, &off);
	tx2 = rc_qp(&s, NULL);
	rx_on = rc_qp(&s, NULL);
	if (!tx1 || !rx_off || !tx2 || !rx_on)
		die("oxedv_create_qp");
	to_rts(&s, tx1, rx_off->qp_num, 100);
	to_rts(&s, rx_off, tx1->qp_num, 100);
	to_rts(&s, tx2, rx_on->qp_num, 200);
	to_rts(&s, rx_on, tx2->qp_num, 200);

	check_res_show(rx_off, "inline_recv off", "the QP created with the flag");
	check_res_show(rx_on, env_off ? "inline_recv off" : "inline_recv on",
		       "the QP created without it");
	d_off = send_one(&s, tx1, rx_off, 1, "to the QP with inline receive off");
	d_on = send_one(&s, tx2, rx_on, 2, "to the QP with inline receive on");
	CHECK(d_off == 0, "the QP created with DISABLE_SCATTER_TO_CQE: rx_inline_cqe moved by %ld",
	      d_off);
	CHECK(d_on == (env_off ? 0 : 1), "the QP created without it: rx_inline_cqe moved by %ld",
	      d_on);
	printf("inline_recv_qp %s: inline_recv_max %u, rx_inline_cqe +%ld (flag off) +%ld "
	       "(default), %d failure(s)\n",
	       dev_name, attr.inline_recv_max, d_off, d_on, failures);

	ibv_destroy_qp(tx1);
	ibv_destroy_qp(rx_off);
	ibv_destroy_qp(tx2);
	ibv_destroy_qp(rx_on);
	ibv_dereg_mr(s.mr);
	free(s.buf);
	ibv_destroy_cq(s.cq);
	ibv_dealloc_pd(s.pd);
	ibv_close_device(s.ctx);
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
