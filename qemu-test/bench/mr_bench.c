// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mr_bench: memory-registration latency on one device.
 *
 *   mr_bench DEV OUT.json
 *
 * For each size, on a buffer that is mmap'd and touched beforehand (so page
 * faults are not measured), times ibv_reg_mr + ibv_dereg_mr; then times an
 * access-only ibv_rereg_mr against the dereg + reg it replaces, and
 * reg + dereg of a 1 GiB ON_DEMAND (ODP) MR, which pins nothing, against the
 * pinned one. Reports the median of several runs in microseconds. Run it on oxe and rxe in the same
 * guest: only the ratio between them means anything under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

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

int main(int argc, char **argv)
{
	const size_t sizes[] = { 4096, 64UL << 10, 2UL << 20, 64UL << 20, 1UL << 30 };
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	const int rr = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	double odp_us = -1;
	FILE *out;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEV OUT.json\n", argv[0]);
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
