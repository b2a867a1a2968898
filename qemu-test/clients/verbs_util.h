/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * verbs_util.h: what the guest test clients written against plain verbs
 * (odp_race.c, verbs_races.c) share. Each is one program of one file, so
 * everything here is static, for the one file that includes it:
 *
 *   - the count of checks and failures, CHECK() and failf(): a failure is
 *     one line on stderr starting with "FAIL:";
 *   - die(): a setup error, "PROG: what: errno's text" on stderr, exit 2;
 *   - now(), a monotonic clock in seconds; rnd(), mix() and fill(), seeded
 *     pseudo-random streams; first_mismatch() for comparing bytes;
 *   - opening a device by name, its GID, a PD, an MR, all or exit 2;
 *   - an RC QP of the sizes a struct qp_opts gives, taken INIT -> RTR ->
 *     RTS to a peer QP over RoCE v2 (port 1, the GID at an index, MTU 1024,
 *     PSNs 7) with the rest of its settings;
 *   - polling a CQ for a bounded time; starting a thread and joining it
 *     within a time; waiting for a child within a time;
 *   - the options -s SECONDS and -r SEED, and the seed without -r.
 *
 * Before including it, a client defines PROG, its name as a string, and may
 * define MAX_PRINTED, how many FAIL lines are printed at most (all, if not
 * defined; the rest are still counted), and IDLE_PAUSE_US, how long a poll
 * loop sleeps every 64th time it finds nothing (50 us if not defined).
 */
#ifndef VERBS_UTIL_H
#define VERBS_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#ifndef PROG
#error "define PROG, the client's name, before including verbs_util.h"
#endif

#ifndef IDLE_PAUSE_US
#define IDLE_PAUSE_US 50
#endif

/* ---------------------------- checks ---------------------------- */

static int failures, checks;

/* A failure: counted, and printed as one "FAIL: " line (thread-safe). */
static inline void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static inline void failf(const char *fmt, ...)
{
	va_list ap;

#ifdef MAX_PRINTED
	if (__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED) > MAX_PRINTED)
		return;
#else
	__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
#endif
	flockfile(stderr);
	fputs("FAIL: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	funlockfile(stderr);
}

/* One check: a failure (the printf-style rest) if `cond` is false. Thread-safe. */
#define CHECK(cond, ...)                                                \
	do {                                                            \
		__atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);       \
		if (!(cond))                                            \
			failf(__VA_ARGS__);                             \
	} while (0)

/* A setup error: exit status 2. */
static inline void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno ? errno : EIO));
	exit(2);
}

/* Where `got` first differs from `want`: `n` if nowhere. */
static inline size_t first_mismatch(const unsigned char *got, const unsigned char *want,
				    size_t n)
{
	size_t i;

	if (!memcmp(got, want, n))
		return n;
	for (i = 0; i < n && got[i] == want[i]; i++)
		;
	return i;
}

/* ---------------------- time, random streams ---------------------- */

static inline double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Leaves the CPU to the softirqs and the driver's work now and then while polling. */
static inline void idle_pause(int *idle)
{
	if (++*idle % 64 == 0)
		usleep(IDLE_PAUSE_US);
}

/* xorshift64*, and splitmix64 to derive the streams' seeds. */
static inline uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static inline uint64_t mix(uint64_t x, uint64_t y, uint64_t z)
{
	x ^= y * 0x9e3779b97f4a7c15ull ^ z * 0xc2b2ae3d27d4eb4full;
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (x ^ (x >> 31)) | 1;
}

/* `n` bytes of the stream seeded with `s`. */
static inline void fill(unsigned char *p, size_t n, uint64_t s)
{
	uint64_t x;
	size_t i;

	for (i = 0; i < n; i += 8) {
		x = rnd(&s);
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

/* ----------------------- devices, PDs, MRs ----------------------- */

/* The device called `name`, opened; exit 2 if there is none. */
static inline struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list)
		die("ibv_get_device_list");
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, PROG ": no device %s\n", name);
		exit(2);
	}
	return ctx;
}

/* The GID at `index` of port 1. */
static inline union ibv_gid query_gid(struct ibv_context *ctx, int index)
{
	union ibv_gid gid;

	if (ibv_query_gid(ctx, 1, index, &gid))
		die("ibv_query_gid");
	return gid;
}

static inline struct ibv_pd *alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	if (!pd)
		die("ibv_alloc_pd");
	return pd;
}

static inline struct ibv_mr *reg(struct ibv_pd *pd, void *p, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, access);

	if (!mr)
		die("ibv_reg_mr");
	return mr;
}

/* -------------------- RC QPs over RoCE v2 GIDs -------------------- */

struct qp_opts {
	int send_wr, recv_wr, send_sge, recv_sge;	/* the QP's sizes */
	int cqe;					/* its CQ's, for the caller */
	int rd_atomic, dest_rd_atomic;
	int timeout, retry_cnt, rnr_retry, min_rnr_timer;
};

static inline struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq,
				       const struct qp_opts *o)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = o->send_wr, .max_recv_wr = o->recv_wr,
			 .max_send_sge = o->send_sge, .max_recv_sge = o->recv_sge },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

/* RESET -> INIT, open to local writes and remote WRITEs and READs. */
static inline void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
}

/* INIT -> RTR -> RTS, from the local GID at `sgid_index` to `peer` at `dgid`. */
static inline void to_rts(struct ibv_qp *qp, int sgid_index, const struct ibv_qp *peer,
			  const union ibv_gid *dgid, const struct qp_opts *o)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp_num;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = o->dest_rd_atomic;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = sgid_index;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = 7;
	a.max_rd_atomic = o->rd_atomic;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* --------------------- waiting, within bounds --------------------- */

/* Up to `n` completions of `cq` into `wc`: fewer only after `secs`. */
static inline int poll_wc(struct ibv_cq *cq, struct ibv_wc *wc, int n, double secs)
{
	double t0 = now();
	int got = 0, idle = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			die("ibv_poll_cq");
		got += r;
		if (r)
			continue;
		if (now() - t0 > secs)
			break;
		idle_pause(&idle);
	}
	return got;
}

static inline void start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	int err = pthread_create(th, NULL, fn, arg);

	if (err) {
		errno = err;
		die("pthread_create");
	}
}

/* Joins `th` if it ends within `secs`: 0, or an errno (ETIMEDOUT). */
static inline int join_within(pthread_t th, int secs)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	return pthread_timedjoin_np(th, NULL, &until);
}

/*
 * Waits `secs` at most for the child `pid` to exit, looking every `poll_us`:
 * waitpid's answer (`pid`, or -1 and errno), or 0 if it did not exit in
 * time, when it is killed (SIGKILL) and reaped.
 */
static inline pid_t wait_child(pid_t pid, int *status, int secs, unsigned int poll_us)
{
	double t0 = now();
	pid_t r;

	while ((r = waitpid(pid, status, WNOHANG)) == 0) {
		if (now() - t0 > secs) {
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			return 0;
		}
		usleep(poll_us);
	}
	return r;
}

/* ---------------------------- options ---------------------------- */

/* A run's seed unless -r gives one. */
static inline uint64_t default_seed(void)
{
	return (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
}

/* -s SECONDS: whether `arg` is a positive number (then in `*secs`). */
static inline int parse_seconds(const char *arg, double *secs)
{
	char *end;

	*secs = strtod(arg, &end);
	return !*end && *secs > 0;
}

/* -r SEED: whether `arg` is a number, decimal, 0x hex or 0 octal (then in `*seed`). */
static inline int parse_seed(const char *arg, uint64_t *seed)
{
	char *end;

	*seed = strtoull(arg, &end, 0);
	return !*end;
}

#endif /* VERBS_UTIL_H */
