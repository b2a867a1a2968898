// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mr_bench: memory-registration latency on one device.
 *
 *   mr_bench DEV OUT.json
 *   mr_bench --touch DEV GID_INDEX OUT.json
 *
 * For each size, on a buffer that is mmap'd and touched beforehand (so page
 * faults are not measured), times ibv_reg_mr + ibv_dereg_mr; then times an
 * access-only ibv_rereg_mr against the dereg + reg it replaces, and
 * reg + dereg of a 1 GiB ON_DEMAND (ODP) MR, which pins nothing, against the
 * pinned one. Reports the median of several runs in microseconds. Run it on oxe and rxe in the same
 * guest: only the ratio between them means anything under TCG.
 *
 * --touch measures what an ODP page fault costs the data path, between two
 * RC QPs of DEV connected to each other through its GID GID_INDEX: RDMA
 * WRITE and READ bandwidth into pinned memory, into ODP memory whose pages
 * are present (steady state), and into ODP memory whose pages the process
 * dropped (MADV_DONTNEED) before every message, so that each one faults
 * its pages in again (first touch); and the latency of a 4 KiB WRITE into
 * a pinned page against one into a dropped ODP page.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

/* Fewer runs for big sizes: under TCG a 1 GiB pin takes seconds. */
static int runs_for(size_t size)
{
	return size >= (1UL << 30) ? 3 : size >= (64UL << 20) ? 5 : 50;
}

/*
 * Median time of an access-only ibv_rereg_mr (toggling REMOTE_READ and
 * REMOTE_WRITE, both over writable pages, so no re-pin is due) and of the
 * dereg + reg that does the same without rereg. *rereg is -1 where the
 * provider has no rereg (rxe).
 */
static int rereg_vs_full(struct ibv_pd *pd, size_t size, int rw, int rr, double *rereg, double *full)
{
	const int runs = 50;
	double t[64];
	char *buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	struct ibv_mr *mr;
	int rc = 0;

	if (buf == MAP_FAILED)
		return 1;
	memset(buf, 1, size);
	mr = ibv_reg_mr(pd, buf, size, rw);
	if (!mr)
		return 1;
	for (int i = 0; i < runs; i++) {
		double t0 = now_us();

		rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, i % 2 ? rw : rr);
		t[i] = now_us() - t0;
		if (rc)
			break;
	}
	*rereg = rc ? -1 : median(t, runs);
	for (int i = 0; i < runs; i++) {
		double t0 = now_us();

		ibv_dereg_mr(mr);
		mr = ibv_reg_mr(pd, buf, size, i % 2 ? rw : rr);
		t[i] = now_us() - t0;
		if (!mr)
			return 1;
	}
	ibv_dereg_mr(mr);
	*full = median(t, runs);
	munmap(buf, size);
	return 0;
}

/* Median reg + dereg of an ODP MR over buf, or -1 if the device refuses. */
static double odp_reg_dereg(struct ibv_pd *pd, char *buf, size_t size, int access, int runs)
{
	double t[64];

	for (int i = 0; i < runs; i++) {
		double t0 = now_us();
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, access);

		if (!mr) {
			fprintf(stderr, "ODP reg %zu: %s\n", size, strerror(errno));
			return -1;
		}
		if (ibv_dereg_mr(mr))
			return -1;
		t[i] = now_us() - t0;
	}
	return median(t, runs);
}


/* Two RC QPs of one device, connected to each other, and their CQ. */
struct loop {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
};

static int loop_connect(struct loop *l, struct ibv_qp *qp, uint32_t dest, int gidx)
{
	struct ibv_port_attr port;
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};
	union ibv_gid gid;

	if (ibv_query_port(l->ctx, 1, &port) || ibv_query_gid(l->ctx, 1, gidx, &gid))
		return -1;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = port.active_mtu;
	attr.dest_qp_num = dest;
	attr.max_dest_rd_atomic = 1;
	/* The shortest RNR wait (0.01 ms), so that a device answering a
	 * fault with RNR NAK is not charged more than the spec's minimum. */
	attr.min_rnr_timer = 1;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.dgid = gid;
	attr.ah_attr.grh.sgid_index = gidx;
	attr.ah_attr.grh.hop_limit = 1;
	attr.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int loop_open(struct loop *l, struct ibv_context *ctx, struct ibv_pd *pd, int gidx)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	l->ctx = ctx;
	l->pd = pd;
	l->cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!l->cq)
		return -1;
	init.send_cq = init.recv_cq = l->cq;
	l->a = ibv_create_qp(pd, &init);
	l->b = ibv_create_qp(pd, &init);
	if (!l->a || !l->b)
		return -1;
	return loop_connect(l, l->a, l->b->qp_num, gidx) ||
	       loop_connect(l, l->b, l->a->qp_num, gidx);
}

/* One RDMA WRITE or READ from QP a, of len bytes from local to remote, and
 * its completion. */
static int loop_op(struct loop *l, int read, struct ibv_mr *local, struct ibv_mr *remote, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local->addr, .length = len, .lkey = local->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)remote->addr, .rkey = remote->rkey },
	}, *bad;
	struct ibv_wc wc;
	int n;

	if (ibv_post_send(l->a, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(l->cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "%s: %s\n", read ? "READ" : "WRITE",
			n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
		return -1;
	}
	return 0;
}

enum touch_mode { PINNED, ODP_PRESENT, ODP_FIRST_TOUCH };

/*
 * Runs iters messages of len bytes (WRITE, or READ if read) between two
 * buffers of the mode's kind, after one to warm up; the sink (the remote
 * buffer of a WRITE, the local one of a READ) is dropped before every
 * message for ODP_FIRST_TOUCH. Fills t[] with each message's time (µs) and
 * *ok with whether the last message's data arrived intact; returns the
 * total, or -1.
 */
static double touch_run(struct loop *l, int read, enum touch_mode mode, size_t len, int iters,
			double *t, int *ok)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | (mode == PINNED ? 0 : IBV_ACCESS_ON_DEMAND);
	char *src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *smr, *dmr, *local, *remote;
	char *sink = dst;
	double total = 0;

	if (src == MAP_FAILED || dst == MAP_FAILED)
		return -1;
	memset(src, 7, len);
	memset(dst, 1, len);
	smr = ibv_reg_mr(l->pd, src, len, access);
	dmr = ibv_reg_mr(l->pd, dst, len, access);
	if (!smr || !dmr) {
		fprintf(stderr, "reg %s %zu: %s\n", mode == PINNED ? "pinned" : "ODP", len,
			strerror(errno));
		return -1;
	}
	/* WRITE: a's src into b's dst. READ: b's src into a's dst. */
	local = read ? dmr : smr;
	remote = read ? smr : dmr;
	if (loop_op(l, read, local, remote, len))
		return -1;
	for (int i = 0; i < iters; i++) {
		double t0;

		if (mode == ODP_FIRST_TOUCH && madvise(sink, len, MADV_DONTNEED))
			return -1;
		t0 = now_us();
		if (loop_op(l, read, local, remote, len))
			return -1;
		t[i] = now_us() - t0;
		total += t[i];
	}
	/* Not fatal: the figures stand, and the report says whose data was wrong. */
	*ok = !memcmp(src, dst, len);
	if (!*ok)
		fprintf(stderr, "%s %zu B: the data arrived wrong\n", read ? "READ" : "WRITE", len);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	munmap(src, len);
	munmap(dst, len);
	return total;
}

static int touch(const char *dev, int gidx, const char *path)
{
	static const char *const mode_name[] = { "pinned", "odp_present", "odp_first_touch" };
	static const char *const op_name[] = { "write", "read" };
	const size_t len = 256UL << 10;
	const int iters = 40, lat_iters = 60, rounds = 3;
	struct ibv_context *ctx = open_dev(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	double mbs[2][3][3], lat[2][3], t[64];
	int bad[2][3] = { { 0 } };
	struct loop l;
	FILE *out;

	if (!pd || loop_open(&l, ctx, pd, gidx)) {
		fprintf(stderr, "%s: cannot set up a connected QP pair through GID %d\n", dev, gidx);
		return 1;
	}
	/* The modes take turns round by round, so that each sees the same host. */
	for (int r = 0; r < rounds; r++) {
		for (int op = 0; op < 2; op++)
			for (int m = PINNED; m <= ODP_FIRST_TOUCH; m++) {
				int ok;
				double us = touch_run(&l, op, m, len, iters, t, &ok);

				if (us < 0)
					return 1;
				bad[op][m] |= !ok;
				/* MB/s as perftest reports it: 2^20 bytes per second. */
				mbs[op][m][r] = len * iters / us * 1e6 / (1 << 20);
			}
		/* One 4 KiB WRITE: into a pinned page, into a dropped one. */
		for (int m = PINNED; m <= ODP_FIRST_TOUCH; m += ODP_FIRST_TOUCH) {
			int ok;

			if (touch_run(&l, 0, m, 4096, lat_iters, t, &ok) < 0)
				return 1;
			bad[0][m] |= !ok;
			lat[m / ODP_FIRST_TOUCH][r] = median(t, lat_iters);
		}
	}
	out = fopen(path, "w");
	if (!out)
		return 1;
	fprintf(out, "{\"device\": \"%s\", \"message_bytes\": %zu, \"rounds\": %d", dev, len, rounds);
	for (int op = 0; op < 2; op++) {
		fprintf(out, ", \"%s_mbs\": {", op_name[op]);
		for (int m = PINNED; m <= ODP_FIRST_TOUCH; m++) {
			double v = median(mbs[op][m], rounds);

			fprintf(out, "%s\"%s\": %.1f", m ? ", " : "", mode_name[m], v);
			printf("%s %s 256 KiB %s: %.1f MB/s%s\n", dev, op_name[op], mode_name[m], v,
			       bad[op][m] ? " (data arrived wrong)" : "");
		}
		fprintf(out, "}");
	}
	fprintf(out, ", \"write_4k_lat_us\": {\"pinned\": %.1f, \"odp_first_touch\": %.1f}",
		median(lat[0], rounds), median(lat[1], rounds));
	printf("%s WRITE 4 KiB latency: pinned %.1f us, ODP first touch %.1f us\n", dev,
	       median(lat[0], rounds), median(lat[1], rounds));
	fprintf(out, ", \"data_wrong\": [");
	for (int op = 0, n = 0; op < 2; op++)
		for (int m = PINNED; m <= ODP_FIRST_TOUCH; m++)
			if (bad[op][m])
				fprintf(out, "%s\"%s %s\"", n++ ? ", " : "", op_name[op], mode_name[m]);
	fprintf(out, "]}\n");
	fclose(out);
	ibv_destroy_qp(l.a);
	ibv_destroy_qp(l.b);
	ibv_destroy_cq(l.cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	const size_t sizes[] = { 4096, 64UL << 10, 2UL << 20, 64UL << 20, 1UL << 30 };
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	const int rr = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	double odp_us = -1;
	FILE *out;

	if (argc == 5 && !strcmp(argv[1], "--touch"))
		return touch(argv[2], atoi(argv[3]), argv[4]);
	if (argc != 3) {
		fprintf(stderr, "usage: %s DEV OUT.json | --touch DEV GID_INDEX OUT.json\n", argv[0]);
		return 2;
	}
	ctx = open_dev(argv[1]);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	out = fopen(argv[2], "w");
	if (!pd || !out)
		return 1;
	fprintf(out, "{\"device\": \"%s\", \"reg_dereg_us\": {", argv[1]);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t size = sizes[s];
		int runs = runs_for(size);
		double t[64];
		char *buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

		if (buf == MAP_FAILED)
			return 1;
		memset(buf, 1, size);
		for (int i = 0; i < runs; i++) {
			double t0 = now_us();
			struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, rw);

			if (!mr || ibv_dereg_mr(mr)) {
				fprintf(stderr, "reg/dereg %zu: %s\n", size, strerror(errno));
				return 1;
			}
			t[i] = now_us() - t0;
		}
		fprintf(out, "%s\"%zu\": %.1f", s ? ", " : "", size, median(t, runs));
		printf("%s reg+dereg %10zu B: %12.1f us\n", argv[1], size, median(t, runs));
		fflush(stdout);
		if (size == 1UL << 30)
			odp_us = odp_reg_dereg(pd, buf, size, rw | IBV_ACCESS_ON_DEMAND, runs);
		munmap(buf, size);
	}
	fprintf(out, "}");
	/* -1: the device refused ODP; JSON null. */
	if (odp_us < 0)
		fprintf(out, ", \"odp_reg_dereg_us\": {\"1073741824\": null}");
	else
		fprintf(out, ", \"odp_reg_dereg_us\": {\"1073741824\": %.1f}", odp_us);
	printf("%s ODP reg+dereg 1 GiB: %.1f us\n", argv[1], odp_us);

	/* Access changes: in place (rereg) against the dereg + reg they replace. */
	fprintf(out, ", \"rereg_access\": {");
	for (int s = 0; s < 2; s++) {
		size_t size = s ? 64UL << 20 : 2UL << 20;
		double rereg, full;

		if (rereg_vs_full(pd, size, rw, rr, &rereg, &full))
			return 1;
		fprintf(out, "%s\"%zu\": {\"rereg_us\": %.1f, \"dereg_reg_us\": %.1f}",
			s ? ", " : "", size, rereg, full);
		printf("%s access change %zu B: rereg %.1f us, dereg+reg %.1f us\n",
		       argv[1], size, rereg, full);
	}
	fprintf(out, "}");
	fprintf(out, "}\n");
	fclose(out);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
