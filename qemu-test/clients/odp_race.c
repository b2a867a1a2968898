// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * odp_race DEV_A GID_A DEV_B GID_B [-s SECONDS] [-m MODE[,MODE...]] [-r SEED] [-k]:
 * ODP invalidations racing RDMA traffic in flight, every byte checked.
 *
 * One process opens both devices (ib_core's shared mode): an RC QP of DEV_A
 * (veth0) is the requester, one of DEV_B (veth1, netns peer) the responder,
 * connected by the RoCE v2 GIDs at the given indexes, MTU 1024. The
 * responder's 1 MiB buffer is an explicit ODP MR (IBV_ACCESS_ON_DEMAND).
 * While a thread of the responder's side changes that buffer's mapping in a
 * loop, in ways that fire the mmu notifiers but keep its content, the
 * requester writes a fresh pattern to a random range of it (1 byte to
 * 64 KiB), reads the range back, and compares the bytes read and the
 * responder's own view of them with what it wrote; every fourth round it
 * also reads a range it did not write and compares it with its shadow copy
 * of the whole buffer. At the end of each mode the whole buffer is read
 * once more over the wire and compared, and the responder compares its
 * memory with the shadow. The modes (SECONDS each, 5 by default; MODE
 * "all" or a list):
 *
 *   dontneed  madvise(MADV_DONTNEED) of pages of a MAP_SHARED memfd mapping
 *             (the content stays in the page cache);
 *   fixed     mmap(MAP_FIXED | MAP_SHARED) of the same memfd pages over the
 *             live mapping, at the same address;
 *   mremap    mremap(MREMAP_MAYMOVE | MREMAP_FIXED) of a new mapping of the
 *             same memfd pages onto the MR's range;
 *   fork      fork() over a MAP_PRIVATE anonymous buffer: the parent's pages
 *             are write-protected for COW. Half the children (at random)
 *             _exit at once; the others wait until the parent has written
 *             a few pages through an atomic compare-and-swap of a byte
 *             with itself, which copies them away from the child's while
 *             it still shares them, so that a translation the
 *             invalidation left behind would point at the child's page.
 *
 * Every completion must succeed: the peer never sees the mutations (RNR
 * NAKs and retries are allowed, rnr_retry and retry_cnt 7, timeout 14);
 * every wait gives up after 30 s. DEV_B's hw counters whose names hold
 * "odp" or "invalid" are printed before and after each mode; where
 * odp_fault_pages and odp_invalidated_pages exist (oxe), each mode must
 * have moved both, or it tested nothing.
 *
 * DEV_B must claim ODP for RC WRITE and READ (ibv_query_device_ex): a device
 * that does not fails, unless -k is given, when it is skipped (exit 0).
 * -r SEED repeats a run's patterns and ranges (the mutations' timing is not
 * repeatable).
 *
 * Exit status 0 if every check held, 1 if one did not, 2 if the setup
 * failed; each failure is one line on stderr, a mismatch with its first
 * differing offset and both bytes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define PROG "odp_race"
#define IDLE_PAUSE_US 100	/* polling: leaves the CPU to the faults and the softirqs */
#include "verbs_util.h"

#define BUF (1 << 20)		/* the responder's ODP buffer */
#define MAXLEN 65536		/* the longest WRITE and READ */
#define WAIT_SECS 30		/* for any completion, the mutator, a child */
#define NCOUNTERS 32

/* The QPs: RNR NAKs and retries allowed. */
static const struct qp_opts opts = {
	.send_wr = 16, .recv_wr = 1, .send_sge = 1, .recv_sge = 1, .cqe = 32,
	.rd_atomic = 4, .dest_rd_atomic = 4,
	.timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
};

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	int gid_index;
};

static struct side req, resp;	/* requester (DEV_A), responder (DEV_B) */
static size_t page;
static uint64_t seed;

/* B's buffer, its memfd (-1 for the anonymous one), and its MR. */
static unsigned char *tb;
static int memfd = -1;
static struct ibv_mr *mtb;
/* A's memory: what it writes, where its READs land; and its copy of tb. */
static unsigned char *src, *land, *land2, *shadow;
static struct ibv_mr *msrc;

/* Between the requester and the mutator thread. */
static int stop, mut_failed;
static char mut_msg[256];
static unsigned long mutations, forks_held, touches;

struct counters {
	int n;
	char name[NCOUNTERS][320];	/* relative to /sys/class/infiniband/DEV_B */
	long long v[NCOUNTERS];
};

/*
 * Whether `got` holds `want`; if not, a failure naming the first differing
 * byte, at its offset in B's buffer (`at` is where `got` starts there).
 */
static int same(const unsigned char *got, const unsigned char *want, size_t n, size_t at,
		const char *mode, const char *what)
{
	size_t i = first_mismatch(got, want, n);

	CHECK(i == n, "%s: %s (%zu bytes at %#zx): first mismatch at offset %#zx: "
	      "expected %#04x, got %#04x", mode, what, n, at, at + i, want[i], got[i]);
	return i == n;
}

static void open_side(struct side *s, const char *name, int gid_index)
{
	s->ctx = open_device(name);
	s->name = name;
	s->gid_index = gid_index;
	s->gid = query_gid(s->ctx, gid_index);
	s->pd = alloc_pd(s->ctx);
}

static void new_qp(struct side *s)
{
	s->cq = ibv_create_cq(s->ctx, opts.cqe, NULL, NULL, 0);
	if (!s->cq)
		die("ibv_create_cq");
	s->qp = create_qp(s->pd, s->cq, &opts);
}

/* RESET -> INIT -> RTR -> RTS, to the QP of `peer`. */
static void connect_qp(struct side *s, const struct side *peer)
{
	to_init(s->qp);
	to_rts(s->qp, s->gid_index, peer->qp, &peer->gid, &opts);
}

static void drop_qp(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_destroy_cq(s->cq);
	s->qp = NULL;
	s->cq = NULL;
}

/*
 * Posts the chain `wr` of `n` signaled work requests on A's QP and waits for
 * them; whether all completed with success (if not, a failure says why).
 */
static int run_chain(struct ibv_send_wr *wr, int n, const char *mode, const char *what)
{
	static const char *const op[] = { [IBV_WR_RDMA_WRITE] = "WRITE",
					  [IBV_WR_RDMA_READ] = "READ" };
	struct ibv_send_wr *bad;
	struct ibv_wc wc[4];
	int i, got, ok = 1;

	for (i = 0; i < n; i++) {
		wr[i].wr_id = i;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	if (ibv_post_send(req.qp, wr, &bad))
		die("ibv_post_send");
	got = poll_wc(req.cq, wc, n, WAIT_SECS);
	/* The first error only: the QP is in error then, the rest are flushed. */
	for (i = 0; i < got && ok; i++) {
		const struct ibv_send_wr *w = &wr[wc[i].wr_id < (uint64_t)n ? wc[i].wr_id : 0];

		ok = wc[i].status == IBV_WC_SUCCESS;
		CHECK(ok, "%s: %s: the %s of %u bytes at %#lx completed with %s (vendor error %#x)",
		      mode, what, op[w->opcode], w->sg_list->length,
		      (unsigned long)(w->wr.rdma.remote_addr - (uintptr_t)tb),
		      ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
	}
	CHECK(got == n || !ok, "%s: %s: %d of %d completions in %d s: the traffic hangs", mode,
	      what, got, n, WAIT_SECS);
	return ok && got == n;
}

static void set_wr(struct ibv_send_wr *wr, struct ibv_sge *sg, enum ibv_wr_opcode opcode,
		   unsigned char *local, size_t off, size_t len)
{
	memset(wr, 0, sizeof(*wr));
	*sg = (struct ibv_sge){ (uintptr_t)local, (uint32_t)len, msrc->lkey };
	wr->opcode = opcode;
	wr->sg_list = sg;
	wr->wr.rdma.remote_addr = (uintptr_t)tb + off;
	wr->wr.rdma.rkey = mtb->rkey;
}

/* A length of 1..256, 1..4096 or (half the time) 1..64 KiB. */
static size_t pick_len(uint64_t *rng)
{
	static const size_t most[4] = { 256, 4096, MAXLEN, MAXLEN };

	return 1 + rnd(rng) % most[rnd(rng) % 4];
}

/*
 * One round: WRITE a fresh pattern to a random range, READ it back in the
 * same chain (the responder runs them in order) and, every fourth round,
 * READ a range outside it. Whether it all held; `bytes` counts what was
 * compared.
 */
static int one_round(const char *mode, unsigned long round, uint64_t *rng,
		     unsigned long long *bytes)
{
	size_t len = pick_len(rng), off = rnd(rng) % (BUF - len + 1), off2 = 0, len2 = 0;
	size_t before = off, after = BUF - off - len, gap, base;
	struct ibv_send_wr wr[3];
	struct ibv_sge sg[3];
	int n = 2, ok;

	fill(src, len, rnd(rng));
	memset(land, 0x5a, len);
	set_wr(&wr[0], &sg[0], IBV_WR_RDMA_WRITE, src, off, len);
	set_wr(&wr[1], &sg[1], IBV_WR_RDMA_READ, land, off, len);
	if (round % 4 == 3 && (before || after)) {
		gap = before >= after ? before : after;
		base = before >= after ? 0 : off + len;
		len2 = 1 + rnd(rng) % (gap < MAXLEN ? gap : MAXLEN);
		off2 = base + rnd(rng) % (gap - len2 + 1);
		memset(land2, 0xa5, len2);
		set_wr(&wr[2], &sg[2], IBV_WR_RDMA_READ, land2, off2, len2);
		n = 3;
	}
	if (!run_chain(wr, n, mode, "a round"))
		return 0;
	memcpy(shadow + off, src, len);
	/* What the peer reads, what the responder's CPU sees, what was not written. */
	ok = same(land, src, len, off, mode, "the READ back of a WRITE");
	ok = ok && same(tb + off, src, len, off, mode, "the responder's memory after a WRITE");
	ok = ok && (n < 3 || same(land2, shadow + off2, len2, off2, mode,
				  "a READ of a range not written this round"));
	*bytes += 2 * len + len2;
	return ok;
}

/* The whole buffer over the wire, 64 KiB at a time, against the shadow. */
static int read_all(const char *mode, unsigned long long *bytes)
{
	struct ibv_send_wr wr;
	struct ibv_sge sg;
	size_t off;

	for (off = 0; off < BUF; off += MAXLEN) {
		memset(land, 0x5a, MAXLEN);
		set_wr(&wr, &sg, IBV_WR_RDMA_READ, land, off, MAXLEN);
		if (!run_chain(&wr, 1, mode, "the final READ of the buffer") ||
		    !same(land, shadow + off, MAXLEN, off, mode, "the final READ of the buffer"))
			return 0;
		*bytes += MAXLEN;
	}
	return 1;
}

/* --- The mutations: each keeps the buffer's content. --- */

static void mut_fail(const char *what)
{
	snprintf(mut_msg, sizeof(mut_msg), "the mutator: %s: %s", what, strerror(errno));
	__atomic_store_n(&mut_failed, 1, __ATOMIC_RELEASE);
}

/* A random run of 1 to 32 pages of the buffer, or (one time in 8) all of it. */
static void pick_pages(uint64_t *rng, size_t *off, size_t *len)
{
	size_t pages = BUF / page, first = rnd(rng) % pages, n = 1 + rnd(rng) % 32;

	if (rnd(rng) % 8 == 0) {
		*off = 0;
		*len = BUF;
		return;
	}
	if (n > pages - first)
		n = pages - first;
	*off = first * page;
	*len = n * page;
}

static void mut_dontneed(uint64_t *rng)
{
	size_t off, len;

	pick_pages(rng, &off, &len);
	if (madvise(tb + off, len, MADV_DONTNEED))
		mut_fail("madvise(MADV_DONTNEED)");
}

static void mut_fixed(uint64_t *rng)
{
	size_t off, len;

	pick_pages(rng, &off, &len);
	if (mmap(tb + off, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, memfd, off) !=
	    tb + off)
		mut_fail("mmap(MAP_FIXED)");
}

static void mut_mremap(uint64_t *rng)
{
	size_t off, len;
	void *second;

	pick_pages(rng, &off, &len);
	/* Populated, so that page tables move along with the mapping. */
	second = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, off);
	if (second == MAP_FAILED) {
		mut_fail("mmap of the second mapping");
		return;
	}
	if (mremap(second, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, tb + off) != tb + off) {
		mut_fail("mremap(MREMAP_FIXED)");
		munmap(second, len);
	}
}

/* A write fault that leaves the byte as it was, whatever writes it meanwhile. */
static void touch(unsigned char *p)
{
	unsigned char v = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (!__atomic_compare_exchange_n(p, &v, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
}

static void mut_fork(uint64_t *rng)
{
	int hold = rnd(rng) % 2, p[2], status, i, n;
	pid_t pid, r;
	char c;

	if (pipe2(p, O_CLOEXEC)) {
		mut_fail("pipe2");
		return;
	}
	pid = fork();
	if (pid < 0) {
		mut_fail("fork");
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		/* Async-signal-safe calls only: the parent has other threads. */
		if (hold) {
			close(p[1]);
			while (read(p[0], &c, 1) < 0 && errno == EINTR)
				;
		}
		_exit(0);
	}
	close(p[0]);
	if (hold) {
		/* While the child shares the pages: these writes copy them. */
		n = 1 + rnd(rng) % 8;
		for (i = 0; i < n; i++)
			touch(tb + rnd(rng) % BUF);
		touches += n;
		forks_held++;
	}
	close(p[1]);
	r = wait_child(pid, &status, WAIT_SECS, 200);
	if (!r) {
		errno = ETIMEDOUT;
		mut_fail("the child did not exit");
		return;
	}
	if (r < 0)
		mut_fail("waitpid");
	else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		errno = ECHILD;
		mut_fail("the child did not exit with status 0");
	}
}

struct mode {
	const char *name;
	int anon;	/* a MAP_PRIVATE anonymous buffer, not the memfd */
	void (*mutate)(uint64_t *rng);
};

static const struct mode modes[] = {
	{ "dontneed", 0, mut_dontneed },
	{ "fixed", 0, mut_fixed },
	{ "mremap", 0, mut_mremap },
	{ "fork", 1, mut_fork },
};

static void *mutator(void *arg)
{
	const struct mode *m = arg;
	uint64_t rng = mix(seed, (uintptr_t)(m - modes), 0x6d7574);

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&mut_failed, __ATOMIC_ACQUIRE)) {
		m->mutate(&rng);
		mutations++;
		usleep(rnd(&rng) % 1000);
	}
	return NULL;
}

/* --- DEV_B's counters about ODP and invalidation, where it has any. --- */

static long long read_counter(const char *rel)
{
	char path[512];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/%s", resp.name, rel);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static void scan_counters(const char *sub, struct counters *c)
{
	char path[512];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/%s", resp.name, sub);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d)) && c->n < NCOUNTERS) {
		if (!strstr(e->d_name, "odp") && !strstr(e->d_name, "invalid"))
			continue;
		snprintf(c->name[c->n], sizeof(c->name[0]), "%s/%s", sub, e->d_name);
		c->v[c->n] = read_counter(c->name[c->n]);
		c->n++;
	}
	closedir(d);
}

static void counters(struct counters *c, const struct counters *like)
{
	int i;

	usleep(30000);	/* ib_core caches hw counters for a jiffy */
	if (like) {
		*c = *like;
		for (i = 0; i < c->n; i++)
			c->v[i] = read_counter(c->name[i]);
		return;
	}
	c->n = 0;
	scan_counters("hw_counters", c);
	scan_counters("ports/1/hw_counters", c);
}

/* The change of `name`, or -1 if DEV_B has no such counter. */
static long long moved(const struct counters *c0, const struct counters *c1, const char *name)
{
	int i;

	for (i = 0; i < c0->n; i++)
		if (!strcmp(c0->name[i], name) && c0->v[i] >= 0 && c1->v[i] >= 0)
			return c1->v[i] - c0->v[i];
	return -1;
}

/* --- One mode. --- */

static void map_buffer(const struct mode *m)
{
	if (m->anon) {
		tb = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	} else {
		memfd = memfd_create("odp_race", MFD_CLOEXEC);
		if (memfd < 0 || ftruncate(memfd, BUF))
			die("memfd");
		tb = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	}
	if (tb == MAP_FAILED)
		die("mmap of the responder's buffer");
}

static void run_mode(const struct mode *m, double seconds)
{
	struct counters c0, c1;
	unsigned long long bytes = 0;
	unsigned long rounds = 0;
	uint64_t rng = mix(seed, (uintptr_t)(m - modes), 0x726571);
	int fails0 = failures, traffic_ok = 1, i, err;
	long long inv, flt;
	pthread_t th;
	double t0, end;

	map_buffer(m);
	fill(tb, BUF, mix(seed, (uintptr_t)(m - modes), 0x627566));
	memcpy(shadow, tb, BUF);
	mtb = ibv_reg_mr(resp.pd, tb, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
	CHECK(mtb != NULL, "%s: %s claims ODP, but ibv_reg_mr with IBV_ACCESS_ON_DEMAND failed: %s",
	      m->name, resp.name, strerror(errno));
	if (!mtb)
		goto unmap;
	new_qp(&req);
	new_qp(&resp);
	connect_qp(&req, &resp);
	connect_qp(&resp, &req);
	counters(&c0, NULL);

	stop = mut_failed = 0;
	mutations = forks_held = touches = 0;
	start_thread(&th, mutator, (void *)m);
	t0 = now();
	end = t0 + seconds;
	while (now() < end && !__atomic_load_n(&mut_failed, __ATOMIC_ACQUIRE)) {
		if (!one_round(m->name, rounds, &rng, &bytes)) {
			traffic_ok = 0;
			break;
		}
		rounds++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	err = join_within(th, WAIT_SECS);
	if (err) {
		fprintf(stderr, "FAIL: %s: the mutator did not stop within %d s: %s\n", m->name,
			WAIT_SECS, strerror(err));
		exit(1);
	}
	t0 = now() - t0;
	CHECK(!mut_failed, "%s: %s", m->name, mut_msg);
	CHECK(rounds > 0 || !traffic_ok, "%s: no round completed in %.1f s", m->name, seconds);

	/*
	 * The peer's view of all of it, then the responder's: after a round
	 * that failed, the QP is gone and the shadow may not say what landed.
	 */
	if (traffic_ok) {
		read_all(m->name, &bytes);
		if (same(tb, shadow, BUF, 0, m->name,
			 "the responder's whole buffer against the shadow"))
			bytes += BUF;
	}

	counters(&c1, &c0);
	printf("odp_race %s -> %s, %s: %.1f s, %lu rounds, %llu bytes checked, %lu mutations",
	       req.name, resp.name, m->name, t0, rounds, bytes, mutations);
	if (m->anon)
		printf(" (%lu forks held while %lu bytes were written)", forks_held, touches);
	printf(", %d failure(s)\n", failures - fails0);
	for (i = 0; i < c0.n; i++)
		printf("  %s %lld -> %lld (%+lld)\n", c0.name[i], c0.v[i], c1.v[i],
		       c1.v[i] - c0.v[i]);
	if (!c0.n)
		printf("  (%s has no hw counter named *odp* or *invalid*)\n", resp.name);
	/* oxe's: the MR was faulted on demand, and the mutations reached it. */
	flt = moved(&c0, &c1, "hw_counters/odp_fault_pages");
	inv = moved(&c0, &c1, "hw_counters/odp_invalidated_pages");
	CHECK(flt != 0 || !traffic_ok, "%s: odp_fault_pages did not move: nothing was faulted",
	      m->name);
	CHECK(inv != 0 || !traffic_ok,
	      "%s: odp_invalidated_pages did not move: no mutation invalidated a page the MR had",
	      m->name);

	drop_qp(&req);
	drop_qp(&resp);
	if (ibv_dereg_mr(mtb))
		die("ibv_dereg_mr");
	mtb = NULL;
unmap:
	munmap(tb, BUF);
	tb = NULL;
	if (memfd >= 0)
		close(memfd);
	memfd = -1;
}

/* Whether `name` is in the comma-separated `list` (or the list is "all"). */
static int wanted(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	if (!strcmp(list, "all"))
		return 1;
	for (p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: odp_race DEV_A GID_A DEV_B GID_B [-s SECONDS] "
		"[-m MODE[,MODE...]] [-r SEED] [-k]\n"
		"  MODE: all (default), dontneed, fixed, mremap, fork\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct ibv_device_attr_ex attr = { 0 };
	const char *list = "all";
	double seconds = 5;
	int skip = 0, opt, ran = 0, err;
	uint32_t need = IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
	unsigned int i;

	seed = default_seed();
	while ((opt = getopt(argc, argv, "s:m:r:k")) != -1) {
		switch (opt) {
		case 's':
			if (!parse_seconds(optarg, &seconds))
				usage();
			break;
		case 'm':
			list = optarg;
			break;
		case 'r':
			if (!parse_seed(optarg, &seed))
				usage();
			break;
		case 'k':
			skip = 1;
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 4)
		usage();
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		ran |= wanted(list, modes[i].name);
	if (!ran)
		usage();

	/*
	 * Before any registration: on a kernel without copy-on-fork for pinned
	 * pages, A's MRs (not ODP) are then kept out of the children with
	 * MADV_DONTFORK; ODP MRs never are (libibverbs skips them), so the fork
	 * mode's buffer is still write-protected. With copy-on-fork, a no-op.
	 */
	err = ibv_fork_init();
	if (err) {
		errno = err;
		die("ibv_fork_init");
	}
	page = sysconf(_SC_PAGESIZE);
	open_side(&req, argv[optind], atoi(argv[optind + 1]));
	open_side(&resp, argv[optind + 2], atoi(argv[optind + 3]));

	if (ibv_query_device_ex(resp.ctx, NULL, &attr))
		die("ibv_query_device_ex");
	if (!(attr.odp_caps.general_caps & IBV_ODP_SUPPORT) ||
	    (attr.odp_caps.per_transport_caps.rc_odp_caps & need) != need) {
		if (skip) {
			printf("odp_race: SKIP: %s claims no ODP for RC WRITE and READ "
			       "(general caps %#llx, RC caps %#x)\n", resp.name,
			       (unsigned long long)attr.odp_caps.general_caps,
			       attr.odp_caps.per_transport_caps.rc_odp_caps);
			return 0;
		}
		CHECK(0, "%s claims no ODP for RC WRITE and READ (general caps %#llx, RC caps %#x)",
		      resp.name, (unsigned long long)attr.odp_caps.general_caps,
		      attr.odp_caps.per_transport_caps.rc_odp_caps);
		return 1;
	}

	src = mmap(NULL, 3 * MAXLEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	shadow = malloc(BUF);
	if (src == MAP_FAILED || !shadow)
		die("buffers");
	land = src + MAXLEN;
	land2 = src + 2 * MAXLEN;
	msrc = reg(req.pd, src, 3 * MAXLEN, IBV_ACCESS_LOCAL_WRITE);
	printf("odp_race %s -> %s: seed %#llx, %.1f s a mode, fork: %s\n", req.name, resp.name,
	       (unsigned long long)seed, seconds,
	       ibv_is_fork_initialized() == IBV_FORK_UNNEEDED ? "the kernel copies pinned pages" :
	       "non-ODP MRs MADV_DONTFORK");
	fflush(stdout);

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (!wanted(list, modes[i].name))
			continue;
		run_mode(&modes[i], seconds);
		fflush(stdout);
	}

	printf("odp_race %s -> %s: %d checks, %d failure(s)\n", req.name, resp.name, checks,
	       failures);
	ibv_dereg_mr(msrc);
	munmap(src, 3 * MAXLEN);
	free(shadow);
	ibv_dealloc_pd(req.pd);
	ibv_dealloc_pd(resp.pd);
	ibv_close_device(req.ctx);
	ibv_close_device(resp.ctx);
	return failures ? 1 : 0;
}
