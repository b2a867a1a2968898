// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * verbs_races DEV_A GID_A DEV_B GID_B MODE [-s SECONDS] [-r SEED]:
 * races and cross-object checks of the kind security reports find in
 * soft-RoCE drivers, each asserting what the peer and the process see
 * (bytes, completion statuses), not only that nothing crashed; the guest
 * suite also fails on any kernel report in dmesg (KASAN, lockdep, WARN).
 *
 * One process opens both devices (ib_core's shared mode): RC QPs of DEV_A
 * (veth0) are the requesters, those of DEV_B (veth1, netns peer) the
 * responders, connected by the RoCE v2 GIDs at the given indexes, MTU 1024.
 * Only standard verbs are used, so either device may be rxe or oxe; the
 * device under test is DEV_B, except in ring-scribble (DEV_A). MODE is one
 * of the following, or "all"; SECONDS (5 by default) is how long each of
 * the first three runs.
 *
 *   sqd-rd-atomic  A keeps up to 16 RDMA READs (1 byte to 16 KiB, 16 KiB
 *       mostly, at random offsets) posted against a 1 MiB buffer of B
 *       that holds a fixed pattern, with 8 in flight (A's max_rd_atomic 8,
 *       B's max_dest_rd_atomic 8 to begin with). Meanwhile a thread cycles
 *       B's QP RTS -> SQD, waits for ibv_query_qp to report SQD drained,
 *       resizes B's responder resources with SQD -> SQD changing
 *       IBV_QP_MAX_DEST_RD_ATOMIC (1 and 16 in turn, at most the device's
 *       max_qp_rd_atom), checks the new value with ibv_query_qp, and goes
 *       back SQD -> RTS. A QP in SQD still answers requests (IBTA), and
 *       ib_core's table allows MAX_DEST_RD_ATOMIC in SQD -> SQD for RC.
 *       Every READ must complete with success and land exactly the
 *       buffer's bytes, with nothing written past its length; retries
 *       inside the transport are allowed, an error completion is not. A
 *       device that refuses the resize with EINVAL is reported (NOTE) and
 *       the thread changes IBV_QP_MIN_RNR_TIMER instead. Some resizes must
 *       have happened with READs outstanding, or nothing was tested.
 *   err-while-arriving  rounds, each on new QPs: B posts 512 receives of
 *       4 KiB; A streams messages 0, 1, 2, ... (SENDs and RDMA WRITE with
 *       immediate in turn, 8 bytes to 4 KiB, so up to four packets each,
 *       the sequence number in the first bytes, the immediate and the
 *       wr_id, the rest a pattern of it), up to 32 outstanding. After a
 *       random number of delivered messages (or, one round in eight, a
 *       random short time) B moves its QP to ERR while packets still
 *       arrive, then drains its CQ. Every receive must complete exactly
 *       once; the successes must come first in CQ order (no success after
 *       the first flush), in posting order, with exactly their message's
 *       bytes (a SEND's in its receive buffer, nothing past its length; a
 *       WRITE's at its place, the receive buffer untouched, the sequence
 *       number in the immediate); nothing else may complete afterwards.
 *       Every message A saw acknowledged must be one B completed with
 *       success (B completes a receive before acknowledging it). A's own
 *       completions may be successes or RETRY_EXC / RNR_RETRY_EXC / REM_* /
 *       FLUSH errors, each work request exactly once.
 *   ring-scribble  the send and receive rings of A's QP are mapped into the
 *       process from the uverbs device (found as the /dev/infiniband/uverbs*
 *       mappings that appear in /proc/self/maps across ibv_create_qp; the
 *       CQ ring, created before, is left alone). A thread rewrites random
 *       32-bit words of them, the producer and consumer indices included,
 *       while the main thread posts SENDs and RDMA WRITEs of 1 to 4 SGEs to
 *       B, and B answers each batch with a SEND to A's receive ring. The
 *       kernel must treat every slot and index as untrusted: the process and
 *       the kernel survive; every completion has a defined status and A's
 *       QP number, and a successful one a defined opcode; errors, stalls
 *       and refused posts are allowed and the QPs are then moved to ERR,
 *       drained and made anew (each destroy must succeed). At the end, on
 *       new QPs with the scribbling stopped, a WRITE, a SEND and a READ of a
 *       pattern must succeed byte for byte, and every object must be
 *       destroyed without EBUSY.
 *   mw-pd  memory windows across PDs of B (IBTA 10.6.7: the QP, the window
 *       and the MR share a PD): binding a type 2 window of PD2 through a
 *       QP of PD1 to an MR of PD1, and one of PD1 through a QP of PD2 to an
 *       MR of PD1, must complete with IBV_WC_MW_BIND_ERR; binding a type 1
 *       window (ibv_bind_mw) of PD2 to an MR of PD1 through a QP of PD1,
 *       and one of PD2 to an MR of PD2 through a QP of PD1, may be refused
 *       by libibverbs (EPERM, EINVAL) or by the device (MW_BIND_ERR). After
 *       each, a WRITE from A through the rkey the bind named and through
 *       the window's old one, on new QPs of either PD, must fail with
 *       REM_ACCESS_ERR and leave B's memory as it was. Control: the same
 *       binds within one PD succeed and a WRITE through each window lands,
 *       byte for byte, and nowhere else; then the type 2 window is freed by
 *       a local invalidate of its rkey on the QP that bound it (which must
 *       succeed; a WRITE through the rkey then fails with REM_ACCESS_ERR) and
 *       the type 1 window by an unbind (ibv_bind_mw of length 0; WRITEs
 *       through its new and its bound rkey then fail). A device that cannot
 *       allocate a window type fails. B's counters hw_counters/mw_bind,
 *       mw_invalidate and mw_active (30 ms after each step, past ib_core's
 *       cache) must move exactly as oxe defines them: mw_active up by one per
 *       ibv_alloc_mw, down by one per ibv_dealloc_mw; mw_bind up by one per
 *       bind or type 1 unbind that took effect, not for a refused one;
 *       mw_invalidate up by one per window an invalidation freed. They must
 *       exist on an oxe device; on another, they are checked only if there.
 *   rereg-ro  B registers 2 pages it made PROT_READ, for REMOTE_READ only
 *       (a read-only pin); ibv_rereg_mr(IBV_REREG_MR_CHANGE_ACCESS) to
 *       LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ must fail with EFAULT or
 *       EACCES (printed) and leave the MR as it was: A's WRITE through its
 *       rkey fails with REM_ACCESS_ERR, the pages keep their pattern, and
 *       A's READ through it returns the pattern. The pages must still be
 *       read-only: /proc/self/maps shows them r--, a write of the process
 *       faults (caught), and a child that reads then writes them is stopped
 *       by SIGSEGV at the write (its handler exits, so the kernel logs no
 *       segfault; skipped when fork-init keeps registered pages out of
 *       children).
 *   async-events  the asynchronous events of B's context, read from its
 *       async_fd (made non-blocking, polled; an event that must come is
 *       waited for 10 s, and where none may come, none may in 0.5 s), each
 *       one's type and element (the QP, or port 1) checked and the event
 *       acked. What was pending before is read and printed first. (a) A
 *       WRITE through B's MR's rkey ^ 0x80: A completes with
 *       REM_ACCESS_ERR, B's context gets exactly one QP_ACCESS_ERR for B's
 *       QP, A's context none. (b) An aligned FETCH_AND_ADD through an MR
 *       registered with REMOTE_ATOMIC, to a QP allowing it, returns the old
 *       value and adds (the control); then one 4 bytes off 8-byte alignment
 *       (IBTA 9.4.5: an invalid request): A completes with REM_INV_REQ_ERR,
 *       B's context gets exactly one QP_REQ_ERR for B's QP, A's none, and
 *       B's memory is untouched. It is posted with ibv_wr_atomic_fetch_add
 *       (librxe's ibv_post_send refuses a misaligned atomic); a requester
 *       that fails it itself and sends nothing (an oxe one does: B's QP
 *       stays in RTS) leaves B untested, and so does atomic_cap NONE (both
 *       printed). (c) A SEND of 256 bytes to B's only receive, of 64: A
 *       completes with REM_INV_REQ_ERR, B's receive with LOC_LEN_ERR, and
 *       neither context gets an event (an error a receive completion
 *       reports needs none). (d) B's netdev (the one sysfs gives for B's
 *       GID) is set down with ip, here or in netns peer: B's context gets
 *       PORT_ERR for port 1 and ibv_query_port says the port is not ACTIVE;
 *       then up again, with the static IPv6 addresses going down dropped:
 *       PORT_ACTIVE, and the port ACTIVE (GID_CHANGE events are allowed
 *       meanwhile, and a port event repeated). The link is brought back up
 *       on every way out (failures, exit, SIGTERM, SIGINT, SIGHUP); then A's
 *       port must be ACTIVE too, and B's GID table hold again B's GID at its
 *       index and every other GID it had (link-local ones aside).
 *
 * Every wait gives up after 30 s (async-events: 10 s). Exit status 0 if every check held, 1 if
 * one did not, 2 if the setup failed; each failure is one line on stderr
 * starting with "FAIL:", and each mode ends with one line of counts.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
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

#define PROG "verbs_races"
#define MAX_PRINTED 64		/* FAIL lines printed; the rest are counted */
#include "verbs_util.h"		/* CHECK and failf are thread-safe: the modes race */

#define WAIT_SECS 30		/* for any completion, a thread, a child */

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	union ibv_gid gid;
	int gid_index;
};

static struct side A, B;	/* requester (DEV_A), responder (DEV_B) */
static size_t page;
static uint64_t seed;

/* Whether `got` holds `want`; if not, a failure naming the first differing byte. */
static int same(const unsigned char *got, const unsigned char *want, size_t n,
		const char *mode, const char *what)
{
	size_t i = first_mismatch(got, want, n);

	CHECK(i == n, "%s: %s (%zu bytes): first mismatch at offset %#zx: expected %#04x, "
	      "got %#04x", mode, what, n, i, want[i], got[i]);
	return i == n;
}

/* Whether all `n` bytes at `p` are `c`; if not, a failure naming the first other. */
static int all_are(const unsigned char *p, size_t n, unsigned char c, const char *mode,
		   const char *what)
{
	size_t i;

	__atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);
	for (i = 0; i < n && p[i] == c; i++)
		;
	if (i == n)
		return 1;
	failf("%s: %s (%zu bytes): byte at offset %#zx is %#04x, not %#04x", mode, what, n, i,
	      p[i], c);
	return 0;
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static void open_side(struct side *s, const char *name, int gid_index)
{
	s->ctx = open_device(name);
	s->name = name;
	s->gid_index = gid_index;
	if (ibv_query_device(s->ctx, &s->attr))
		die("ibv_query_device");
	s->gid = query_gid(s->ctx, gid_index);
	s->pd = alloc_pd(s->ctx);
}

/* --- QPs: an RC pair, A's QP the requester, B's the responder. --- */

static const struct qp_opts default_opts = {
	.send_wr = 16, .recv_wr = 16, .send_sge = 1, .recv_sge = 1, .cqe = 64,
	.rd_atomic = 4, .dest_rd_atomic = 4,
	.timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
};

struct pair {
	struct ibv_cq *acq, *bcq;
	struct ibv_qp *aqp, *bqp;
};

/*
 * The two CQs and QPs of a pair, A's in A's PD, B's in `bpd`, both in
 * INIT (receives may be posted now); connect() brings them to RTS.
 */
static void pair_create(struct pair *p, struct ibv_pd *bpd, const struct qp_opts *o)
{
	p->acq = ibv_create_cq(A.ctx, o->cqe, NULL, NULL, 0);
	p->bcq = ibv_create_cq(B.ctx, o->cqe, NULL, NULL, 0);
	if (!p->acq || !p->bcq)
		die("ibv_create_cq");
	p->aqp = create_qp(A.pd, p->acq, o);
	p->bqp = create_qp(bpd, p->bcq, o);
	to_init(p->aqp);
	to_init(p->bqp);
}

static void pair_connect(struct pair *p, const struct qp_opts *o)
{
	to_rts(p->aqp, A.gid_index, p->bqp, &B.gid, o);
	to_rts(p->bqp, B.gid_index, p->aqp, &A.gid, o);
}

static void pair_open(struct pair *p, struct ibv_pd *bpd, const struct qp_opts *o)
{
	pair_create(p, bpd, o);
	pair_connect(p, o);
}

/* Destroys a pair; each destroy must succeed (an EBUSY is a leak). */
static void pair_close(struct pair *p, const char *mode)
{
	struct ibv_qp *qp[2] = { p->aqp, p->bqp };
	struct ibv_cq *cq[2] = { p->acq, p->bcq };
	const char *name[2] = { A.name, B.name };
	int i, err;

	for (i = 0; i < 2; i++) {
		if (!qp[i])
			continue;
		err = ibv_destroy_qp(qp[i]);
		CHECK(!err, "%s: ibv_destroy_qp of %s's QP: %s", mode, name[i], strerror(err));
	}
	for (i = 0; i < 2; i++) {
		if (!cq[i])
			continue;
		err = ibv_destroy_cq(cq[i]);
		CHECK(!err, "%s: ibv_destroy_cq of %s: %s", mode, name[i], strerror(err));
	}
	memset(p, 0, sizeof(*p));
}

static int modify_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* An errno from a verb that returns one (some return -1 and set errno). */
static int verb_err(int ret)
{
	if (ret < 0)
		return errno ? errno : EIO;
	return ret;
}

/* One signaled RDMA WRITE or READ of A's, waited for: its status, or -1 if none came. */
static int rdma_once(struct pair *p, enum ibv_wr_opcode op, void *local, uint32_t len,
		     uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = { (uintptr_t)local, len, lkey };
	struct ibv_send_wr wr = { .wr_id = 0x77, .sg_list = &sg, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(p->aqp, &wr, &bad))
		die("ibv_post_send");
	if (!poll_wc(p->acq, &wc, 1, WAIT_SECS))
		return -1;
	return wc.status;
}

static const char *status_str(int st)
{
	return st < 0 ? "no completion in 30 s" : ibv_wc_status_str(st);
}

/* ====================== sqd-rd-atomic ====================== */

#define RD_BUF (1 << 20)	/* B's buffer */
#define RD_LEN 16384		/* the longest READ */
#define RD_SLOTS 16		/* READs posted at once */
#define RD_STRIDE (RD_LEN + 64)	/* a landing slot and its guard */

static struct {
	struct ibv_qp *qp;
	int stop, failed, refused, dest_max;
	int outstanding;	/* A's READs posted and not completed */
	char msg[256];
	unsigned long cycles, resizes, busy;
} sqd;

static void sqd_fail(const char *what, int err)
{
	snprintf(sqd.msg, sizeof(sqd.msg), "%s: %s", what, strerror(err));
	__atomic_store_n(&sqd.failed, 1, __ATOMIC_RELEASE);
}

/* Waits for B's QP to be in SQD with its send queue drained; an errno if not. */
static int wait_sqd_drained(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	double t0 = now();
	int err;

	for (;;) {
		memset(&a, 0, sizeof(a));
		err = verb_err(ibv_query_qp(qp, &a, IBV_QP_STATE, &init));
		if (err)
			return err;
		if (a.qp_state == IBV_QPS_SQD && !a.sq_draining)
			return 0;
		if (now() - t0 > WAIT_SECS)
			return ETIMEDOUT;
		usleep(20);
	}
}

static int sqd_modify(int mask, struct ibv_qp_attr *a)
{
	return verb_err(ibv_modify_qp(sqd.qp, a, mask));
}

static void *sqd_mutator(void *arg)
{
	uint64_t rng = mix(seed, 1, 0x737164);
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	int big = 0, value, err, busy;

	(void)arg;
	while (!__atomic_load_n(&sqd.stop, __ATOMIC_ACQUIRE)) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_SQD;
		err = sqd_modify(IBV_QP_STATE, &a);
		if (err) {
			sqd_fail("RTS -> SQD", err);
			break;
		}
		err = wait_sqd_drained(sqd.qp);
		if (err) {
			sqd_fail("waiting for SQD drained (ibv_query_qp)", err);
			break;
		}
		usleep(rnd(&rng) % 100);
		value = big ? sqd.dest_max : 1;
		big ^= 1;
		busy = __atomic_load_n(&sqd.outstanding, __ATOMIC_RELAXED) > 0;
		if (!sqd.refused) {
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_SQD;
			a.max_dest_rd_atomic = value;
			err = sqd_modify(IBV_QP_STATE | IBV_QP_MAX_DEST_RD_ATOMIC, &a);
			if (err == EINVAL && !sqd.resizes) {
				sqd.refused = 1;
				printf("verbs_races: NOTE: %s refuses SQD -> SQD with "
				       "IBV_QP_MAX_DEST_RD_ATOMIC (EINVAL): the responder "
				       "resources are NOT resized; SQD -> SQD changes "
				       "IBV_QP_MIN_RNR_TIMER instead\n", B.name);
				fflush(stdout);
			} else if (err) {
				sqd_fail("SQD -> SQD with IBV_QP_MAX_DEST_RD_ATOMIC", err);
				break;
			} else {
				sqd.resizes++;
				sqd.busy += busy;
				memset(&a, 0, sizeof(a));
				err = verb_err(ibv_query_qp(sqd.qp, &a, IBV_QP_STATE |
							    IBV_QP_MAX_DEST_RD_ATOMIC, &init));
				CHECK(!err, "sqd-rd-atomic: ibv_query_qp in SQD: %s",
				      strerror(err));
				CHECK(err || (a.max_dest_rd_atomic == value &&
					      a.qp_state == IBV_QPS_SQD),
				      "sqd-rd-atomic: after SQD -> SQD to max_dest_rd_atomic %d, "
				      "ibv_query_qp says %d in state %d", value,
				      a.max_dest_rd_atomic, a.qp_state);
			}
		}
		if (sqd.refused) {
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_SQD;
			a.min_rnr_timer = big ? 12 : 14;
			err = sqd_modify(IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER, &a);
			if (err) {
				sqd_fail("SQD -> SQD with IBV_QP_MIN_RNR_TIMER", err);
				break;
			}
		}
		usleep(rnd(&rng) % 100);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		err = sqd_modify(IBV_QP_STATE, &a);
		if (err) {
			sqd_fail("SQD -> RTS", err);
			break;
		}
		sqd.cycles++;
		usleep(rnd(&rng) % 500);
	}
	return NULL;
}

static void mode_sqd_rd_atomic(double seconds)
{
	struct qp_opts o = default_opts;
	struct { size_t off, len; } slot[RD_SLOTS];
	int free_slot[RD_SLOTS], nfree = RD_SLOTS, i, n, err, ok = 1, fails0 = failures, idle = 0;
	unsigned long long reads = 0, bytes = 0;
	uint64_t rng = mix(seed, 1, 0x726571);
	unsigned char *tb, *land;
	struct ibv_mr *mtb, *mland;
	struct ibv_wc wc[RD_SLOTS];
	double end, last;
	struct pair p;
	pthread_t th;

	tb = map_anon(RD_BUF);
	land = map_anon(RD_SLOTS * RD_STRIDE);
	fill(tb, RD_BUF, mix(seed, 1, 0x627566));
	mtb = reg(B.pd, tb, RD_BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	mland = reg(A.pd, land, RD_SLOTS * RD_STRIDE, IBV_ACCESS_LOCAL_WRITE);

	o.send_wr = 2 * RD_SLOTS;
	o.cqe = 4 * RD_SLOTS;
	o.rd_atomic = 8 <= A.attr.max_qp_init_rd_atom ? 8 : A.attr.max_qp_init_rd_atom;
	o.dest_rd_atomic = 8 <= B.attr.max_qp_rd_atom ? 8 : B.attr.max_qp_rd_atom;
	pair_open(&p, B.pd, &o);

	memset(&sqd, 0, sizeof(sqd));
	sqd.qp = p.bqp;
	sqd.dest_max = 16 <= B.attr.max_qp_rd_atom ? 16 : B.attr.max_qp_rd_atom;
	for (i = 0; i < RD_SLOTS; i++)
		free_slot[i] = i;
	start_thread(&th, sqd_mutator, NULL);
	end = now() + seconds;
	last = now();
	while (ok) {
		int draining = now() >= end || __atomic_load_n(&sqd.failed, __ATOMIC_ACQUIRE);

		if (draining && nfree == RD_SLOTS)
			break;
		while (!draining && nfree) {
			struct ibv_send_wr wr = { 0 }, *bad;
			struct ibv_sge sg;
			int s = free_slot[--nfree];
			size_t len = rnd(&rng) % 4 ? RD_LEN : 1 + rnd(&rng) % RD_LEN;
			size_t off = rnd(&rng) % (RD_BUF - len + 1);

			slot[s].off = off;
			slot[s].len = len;
			memset(land + s * RD_STRIDE, 0xa5, RD_STRIDE);
			sg = (struct ibv_sge){ (uintptr_t)(land + s * RD_STRIDE), (uint32_t)len,
					       mland->lkey };
			wr.wr_id = s;
			wr.sg_list = &sg;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_READ;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = (uintptr_t)tb + off;
			wr.wr.rdma.rkey = mtb->rkey;
			if (ibv_post_send(p.aqp, &wr, &bad))
				die("ibv_post_send of a READ");
			__atomic_add_fetch(&sqd.outstanding, 1, __ATOMIC_RELAXED);
		}
		n = ibv_poll_cq(p.acq, RD_SLOTS, wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (!n) {
			if (now() - last > WAIT_SECS) {
				CHECK(0, "sqd-rd-atomic: %d READs outstanding, none completed "
				      "in %d s", RD_SLOTS - nfree, WAIT_SECS);
				ok = 0;
			}
			idle_pause(&idle);
			continue;
		}
		last = now();
		for (i = 0; i < n && ok; i++) {
			int s = (int)wc[i].wr_id;
			unsigned char *l;

			if (wc[i].wr_id >= RD_SLOTS) {
				CHECK(0, "sqd-rd-atomic: a completion with unknown wr_id %#llx",
				      (unsigned long long)wc[i].wr_id);
				ok = 0;
				break;
			}
			l = land + s * RD_STRIDE;
			__atomic_sub_fetch(&sqd.outstanding, 1, __ATOMIC_RELAXED);
			free_slot[nfree++] = s;
			CHECK(wc[i].status == IBV_WC_SUCCESS,
			      "sqd-rd-atomic: the READ of %zu bytes at %#zx completed with %s "
			      "(vendor error %#x) after %lu SQD cycles", slot[s].len, slot[s].off,
			      ibv_wc_status_str(wc[i].status), wc[i].vendor_err, sqd.cycles);
			if (wc[i].status != IBV_WC_SUCCESS) {
				ok = 0;
				break;
			}
			if (!same(l, tb + slot[s].off, slot[s].len, "sqd-rd-atomic",
				  "a READ of the responder's fixed pattern") ||
			    !all_are(l + slot[s].len, RD_STRIDE - slot[s].len, 0xa5,
				     "sqd-rd-atomic", "the landing slot past a READ's length"))
				ok = 0;
			reads++;
			bytes += slot[s].len;
		}
	}
	__atomic_store_n(&sqd.stop, 1, __ATOMIC_RELEASE);
	err = join_within(th, WAIT_SECS);
	if (err) {
		fprintf(stderr, "FAIL: sqd-rd-atomic: the SQD thread did not stop within %d s: "
			"%s\n", WAIT_SECS, strerror(err));
		exit(1);
	}
	CHECK(!sqd.failed, "sqd-rd-atomic: the SQD thread: %s", sqd.msg);
	CHECK(reads > 0 || !ok, "sqd-rd-atomic: no READ completed");
	CHECK(sqd.cycles > 0 || sqd.failed, "sqd-rd-atomic: no SQD cycle completed");
	CHECK(sqd.refused || sqd.busy > 0 || sqd.failed || !ok,
	      "sqd-rd-atomic: none of %lu resizes happened with READs outstanding",
	      sqd.resizes);
	if (!sqd.failed) {
		struct ibv_qp_init_attr init;
		struct ibv_qp_attr a;

		err = verb_err(ibv_query_qp(p.bqp, &a, IBV_QP_STATE, &init));
		CHECK(!err && a.qp_state == IBV_QPS_RTS,
		      "sqd-rd-atomic: B's QP is not back in RTS after the cycles (%s, state %d)",
		      strerror(err), err ? -1 : (int)a.qp_state);
	}
	printf("verbs_races %s -> %s, sqd-rd-atomic: %llu READs, %llu bytes checked, %lu SQD "
	       "cycles, %lu resizes of max_dest_rd_atomic (1 <-> %d), %lu with READs "
	       "outstanding%s, %d failure(s)\n", A.name, B.name, reads, bytes, sqd.cycles,
	       sqd.resizes, sqd.dest_max, sqd.busy,
	       sqd.refused ? " (resize REFUSED by the device: MIN_RNR_TIMER changed instead)" : "",
	       failures - fails0);
	pair_close(&p, "sqd-rd-atomic");
	CHECK(!ibv_dereg_mr(mtb) && !ibv_dereg_mr(mland), "sqd-rd-atomic: ibv_dereg_mr failed");
	munmap(tb, RD_BUF);
	munmap(land, RD_SLOTS * RD_STRIDE);
}

/* ====================== err-while-arriving ====================== */

#define EW_N 512		/* B's receives, and the most messages a round */
#define EW_SLOT 4096		/* a receive buffer, a WRITE's place */
#define EW_OUT 32		/* A's messages outstanding */

static unsigned char *ew_src, *ew_recv, *ew_wbuf;
static struct ibv_mr *ew_msrc, *ew_mrecv, *ew_mwbuf;

/* Message k of round r: its length (8 to 4096), and its bytes. */
static size_t ew_len(unsigned int r, unsigned int k)
{
	uint64_t h = mix(seed, r, k);

	return h % 2 ? 8 + (h >> 8) % 57 : 65 + (h >> 8) % (EW_SLOT - 64);
}

static void ew_msg(unsigned char *p, unsigned int r, unsigned int k)
{
	size_t n = ew_len(r, k);

	fill(p, n, mix(seed ^ 0x6d7367, r, k));
	memcpy(p, &k, 4);
	memcpy(p + 4, &r, 4);
}

struct ew_round {
	struct pair p;
	unsigned int r;
	int stop;		/* B is done: A stops posting */
	int finished;		/* A is done */
	int posted, done, hung, post_err;
	unsigned char status[EW_N];	/* A's, 0xff until it completes */
	int dup, unknown;
};

static void *ew_sender(void *arg)
{
	struct ew_round *w = arg;
	double last = now();
	struct ibv_wc wc[16];
	int err_seen = 0, n, i, idle = 0;

	for (;;) {
		int stopping = __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE);

		if (!stopping && !err_seen && w->posted < EW_N && w->posted - w->done < EW_OUT) {
			unsigned int k = w->posted;
			unsigned char *src = ew_src + (size_t)k * EW_SLOT;
			struct ibv_sge sg = { (uintptr_t)src, (uint32_t)ew_len(w->r, k),
					      ew_msrc->lkey };
			struct ibv_send_wr wr = { .wr_id = k, .sg_list = &sg, .num_sge = 1,
						  .send_flags = IBV_SEND_SIGNALED }, *bad;

			ew_msg(src, w->r, k);
			wr.imm_data = htonl(k);
			if (k % 2) {
				wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
				wr.wr.rdma.remote_addr = (uintptr_t)(ew_wbuf + (size_t)k * EW_SLOT);
				wr.wr.rdma.rkey = ew_mwbuf->rkey;
			} else {
				wr.opcode = IBV_WR_SEND;
			}
			if (ibv_post_send(w->p.aqp, &wr, &bad)) {
				w->post_err = errno ? errno : EIO;
				err_seen = 1;
			} else {
				w->posted++;
			}
			if (w->posted % 4)
				continue;
		}
		n = ibv_poll_cq(w->p.acq, 16, wc);
		if (n < 0) {
			w->post_err = EIO;
			break;
		}
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id >= (uint64_t)w->posted) {
				w->unknown++;
				continue;
			}
			if (w->status[wc[i].wr_id] != 0xff) {
				w->dup++;
				continue;
			}
			w->status[wc[i].wr_id] = wc[i].status;
			w->done++;
			if (wc[i].status != IBV_WC_SUCCESS)
				err_seen = 1;
		}
		if (n) {
			last = now();
		} else {
			if (now() - last > WAIT_SECS) {
				w->hung = 1;
				break;
			}
			idle_pause(&idle);
		}
		if ((stopping || err_seen || w->posted == EW_N) && w->done == w->posted)
			break;
	}
	__atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

struct ew_totals {
	unsigned long rounds, mixed, delivered, flushed, a_ok, a_err;
};

/* Checks a successful receive `wc` of round `r`: the message whose number it carries. */
static void ew_check_success(const struct ibv_wc *wc, unsigned int r, unsigned char *want)
{
	unsigned int k = (unsigned int)wc->wr_id, carried;
	unsigned char *buf = ew_recv + (size_t)k * EW_SLOT;
	unsigned char *place = ew_wbuf + (size_t)k * EW_SLOT;
	size_t len = ew_len(r, k);
	char what[96];

	if (k % 2 == 0) {
		CHECK(wc->opcode == IBV_WC_RECV,
		      "err-while-arriving: receive %u (a SEND's) completed with opcode %d", k,
		      wc->opcode);
		memcpy(&carried, buf, 4);
		CHECK(carried == k, "err-while-arriving: receive %u holds message %u", k, carried);
		CHECK(wc->byte_len == len, "err-while-arriving: receive %u: byte_len %u, the "
		      "message has %zu", k, wc->byte_len, len);
		ew_msg(want, r, k);
		snprintf(what, sizeof(what), "the receive buffer of SEND %u", k);
		same(buf, want, len, "err-while-arriving", what);
		snprintf(what, sizeof(what), "receive buffer %u past its SEND", k);
		all_are(buf + len, EW_SLOT - len, 0xc5, "err-while-arriving", what);
		return;
	}
	CHECK(wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc->wc_flags & IBV_WC_WITH_IMM),
	      "err-while-arriving: receive %u (a WRITE with immediate's) completed with "
	      "opcode %d, wc_flags %#x", k, wc->opcode, wc->wc_flags);
	carried = ntohl(wc->imm_data);
	CHECK(carried == k, "err-while-arriving: receive %u carries the immediate of message %u",
	      k, carried);
	CHECK(wc->byte_len == len, "err-while-arriving: receive %u: byte_len %u, the WRITE "
	      "has %zu", k, wc->byte_len, len);
	ew_msg(want, r, k);
	snprintf(what, sizeof(what), "the place of WRITE %u", k);
	same(place, want, len, "err-while-arriving", what);
	snprintf(what, sizeof(what), "the place of WRITE %u past its length", k);
	all_are(place + len, EW_SLOT - len, 0xc5, "err-while-arriving", what);
	snprintf(what, sizeof(what), "receive buffer %u (a WRITE with immediate's)", k);
	all_are(buf, EW_SLOT, 0xc5, "err-while-arriving", what);
}

static void ew_one_round(struct ew_round *w, struct ew_totals *t, uint64_t *rng,
			 unsigned char *want)
{
	struct qp_opts o = default_opts;
	struct ibv_recv_wr rwr[EW_N], *bad;
	struct ibv_sge rsg[EW_N];
	unsigned char seen[EW_N];
	struct ibv_wc wc[32];
	int accounted = 0, succ = 0, flushes = 0, errd = 0, err, i, n, extra = 0, idle = 0;
	int by_time = rnd(rng) % 8 == 0, trigger = 1 + rnd(rng) % (EW_N - 1);
	int succ_at_err = 0, a_ok = 0, a_bad = 0, a_ok_max = -1;
	double t0, t_err, last;
	pthread_t th;

	o.send_wr = 2 * EW_OUT;
	o.recv_wr = EW_N;
	o.cqe = 2 * EW_N;
	o.timeout = 14;
	o.retry_cnt = 3;
	o.rnr_retry = 3;
	o.min_rnr_timer = 1;
	memset(ew_recv, 0xc5, (size_t)EW_N * EW_SLOT);
	memset(ew_wbuf, 0xc5, (size_t)EW_N * EW_SLOT);
	memset(seen, 0, sizeof(seen));
	memset(w->status, 0xff, sizeof(w->status));
	w->stop = w->finished = w->posted = w->done = w->hung = w->post_err = 0;
	w->dup = w->unknown = 0;

	pair_create(&w->p, B.pd, &o);
	for (i = 0; i < EW_N; i++) {
		rsg[i] = (struct ibv_sge){ (uintptr_t)(ew_recv + (size_t)i * EW_SLOT), EW_SLOT,
					   ew_mrecv->lkey };
		rwr[i] = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &rsg[i], .num_sge = 1,
					       .next = i + 1 < EW_N ? &rwr[i + 1] : NULL };
	}
	if (ibv_post_recv(w->p.bqp, rwr, &bad))
		die("ibv_post_recv of B's receives");
	pair_connect(&w->p, &o);

	t0 = last = now();
	t_err = t0 + (rnd(rng) % 3000) / 1e6;
	start_thread(&th, ew_sender, w);
	while (accounted < EW_N) {
		n = ibv_poll_cq(w->p.bcq, 32, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (i = 0; i < n; i++) {
			uint64_t id = wc[i].wr_id;

			if (id >= EW_N) {
				CHECK(0, "err-while-arriving: round %u: a completion of B with "
				      "unknown wr_id %#llx (%s)", w->r, (unsigned long long)id,
				      ibv_wc_status_str(wc[i].status));
				continue;
			}
			CHECK(!seen[id], "err-while-arriving: round %u: receive %llu completed "
			      "twice (now %s)", w->r, (unsigned long long)id,
			      ibv_wc_status_str(wc[i].status));
			if (seen[id])
				continue;
			seen[id] = 1;
			accounted++;
			if (wc[i].status == IBV_WC_SUCCESS) {
				CHECK(!flushes, "err-while-arriving: round %u: receive %llu "
				      "completed with success after %d flushed ones", w->r,
				      (unsigned long long)id, flushes);
				CHECK((int)id == succ, "err-while-arriving: round %u: receive "
				      "%llu completed with success after %d successes: out of "
				      "order", w->r, (unsigned long long)id, succ);
				ew_check_success(&wc[i], w->r, want);
				succ++;
			} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
				flushes++;
			} else {
				CHECK(0, "err-while-arriving: round %u: receive %llu completed "
				      "with %s (vendor error %#x)", w->r, (unsigned long long)id,
				      ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
			}
		}
		if (n)
			last = now();
		else
			idle_pause(&idle);
		if (!errd && (succ >= trigger || (by_time && now() >= t_err) ||
			      now() - t0 > 2 || __atomic_load_n(&w->finished, __ATOMIC_ACQUIRE))) {
			err = verb_err(modify_err(w->p.bqp));
			CHECK(!err, "err-while-arriving: round %u: moving B's QP to ERR: %s", w->r,
			      strerror(err));
			errd = 1;
			succ_at_err = succ;
		}
		if (now() - last > WAIT_SECS) {
			CHECK(0, "err-while-arriving: round %u: %d of %d receives completed; "
			      "none more in %d s", w->r, accounted, EW_N, WAIT_SECS);
			break;
		}
	}
	/* Nothing more may come: every receive is accounted for. */
	for (last = now(); now() - last < 0.1;) {
		n = ibv_poll_cq(w->p.bcq, 32, wc);
		if (n < 0)
			die("ibv_poll_cq");
		extra += n;
	}
	CHECK(!extra || accounted < EW_N, "err-while-arriving: round %u: %d completions more "
	      "after all %d receives were accounted for", w->r, extra, EW_N);

	__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
	err = join_within(th, 2 * WAIT_SECS);
	if (err) {
		fprintf(stderr, "FAIL: err-while-arriving: the sender did not stop: %s\n",
			strerror(err));
		exit(1);
	}
	CHECK(!w->hung, "err-while-arriving: round %u: A's %d sends outstanding did not "
	      "complete in %d s", w->r, w->posted - w->done, WAIT_SECS);
	CHECK(!w->dup && !w->unknown, "err-while-arriving: round %u: A saw %d completions "
	      "twice, %d with an unknown wr_id", w->r, w->dup, w->unknown);
	for (i = 0; i < w->posted; i++) {
		switch (w->status[i]) {
		case IBV_WC_SUCCESS:
			a_ok++;
			a_ok_max = i;
			break;
		case IBV_WC_WR_FLUSH_ERR:
		case IBV_WC_RETRY_EXC_ERR:
		case IBV_WC_RNR_RETRY_EXC_ERR:
		case IBV_WC_REM_ACCESS_ERR:
		case IBV_WC_REM_INV_REQ_ERR:
		case IBV_WC_REM_OP_ERR:
		case IBV_WC_REM_ABORT_ERR:
			a_bad++;
			break;
		case 0xff:
			break;	/* counted as hung above */
		default:
			a_bad++;
			CHECK(0, "err-while-arriving: round %u: A's message %d completed with %s",
			      w->r, i, ibv_wc_status_str(w->status[i]));
		}
	}
	/* An acknowledged message was delivered: B completes before it acknowledges. */
	CHECK(a_ok_max < succ, "err-while-arriving: round %u: A's message %d was acknowledged "
	      "but B completed only %d receives with success", w->r, a_ok_max, succ);
	t->rounds++;
	t->mixed += succ_at_err > 0 && flushes > 0;
	t->delivered += succ;
	t->flushed += flushes;
	t->a_ok += a_ok;
	t->a_err += a_bad;
	pair_close(&w->p, "err-while-arriving");
}

static void mode_err_while_arriving(double seconds)
{
	size_t len = (size_t)EW_N * EW_SLOT;
	struct ew_totals t = { 0 };
	uint64_t rng = mix(seed, 2, 0x657272);
	int fails0 = failures;
	struct ew_round *w;
	unsigned char *want;
	double end;

	ew_src = map_anon(len);
	ew_recv = map_anon(len);
	ew_wbuf = map_anon(len);
	want = malloc(EW_SLOT);
	w = calloc(1, sizeof(*w));
	if (!want || !w)
		die("malloc");
	ew_msrc = reg(A.pd, ew_src, len, IBV_ACCESS_LOCAL_WRITE);
	ew_mrecv = reg(B.pd, ew_recv, len, IBV_ACCESS_LOCAL_WRITE);
	ew_mwbuf = reg(B.pd, ew_wbuf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	end = now() + seconds;
	do {
		w->r = t.rounds;
		ew_one_round(w, &t, &rng, want);
	} while (now() < end || t.rounds < 3);
	CHECK(t.mixed > 0, "err-while-arriving: in none of %lu rounds did B go to ERR between "
	      "deliveries and flushes", t.rounds);
	printf("verbs_races %s -> %s, err-while-arriving: %lu rounds (%lu with the QP failed "
	       "between deliveries), %lu messages delivered and checked, %lu receives "
	       "flushed; A: %lu acknowledged, %lu in error, %d failure(s)\n", A.name, B.name,
	       t.rounds, t.mixed, t.delivered, t.flushed, t.a_ok, t.a_err, failures - fails0);
	CHECK(!ibv_dereg_mr(ew_msrc) && !ibv_dereg_mr(ew_mrecv) && !ibv_dereg_mr(ew_mwbuf),
	      "err-while-arriving: ibv_dereg_mr failed");
	munmap(ew_src, len);
	munmap(ew_recv, len);
	munmap(ew_wbuf, len);
	free(want);
	free(w);
}

/* ====================== ring-scribble ====================== */

#define SC_AMR (128 << 10)	/* A's memory: 64 KiB to send from, then receives, READs */
#define SC_SRC (64 << 10)
#define SC_WBUF (64 << 10)	/* B's WRITE target */
#define SC_BRECV 64		/* B's receives, 4 KiB each */
#define SC_ARECV 16		/* A's receives, 4 pieces of 64 bytes each */
#define SC_MAXRINGS 8
#define SC_MAXMAPS 8192
#define B_RECV_TAG (1ull << 62)
#define B_SEND_TAG (1ull << 63)

struct span {
	uintptr_t lo, hi;
};

static struct {
	pthread_mutex_t lock;
	struct span ring[SC_MAXRINGS];
	int nrings, stop;
	unsigned long scribbles;
} sc = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct span sc_maps[2][SC_MAXMAPS];

/* The mappings of this process; the writable uverbs ones only, if `uverbs`. */
static int read_maps(struct span *s, int uverbs)
{
	char line[512], perms[5];
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long lo, hi;
	int n = 0;

	if (!f)
		die("/proc/self/maps");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
			continue;
		if (uverbs && (!strstr(line, "/dev/infiniband/uverbs") || perms[1] != 'w'))
			continue;
		if (n == SC_MAXMAPS) {
			fprintf(stderr, "verbs_races: more than %d mappings\n", SC_MAXMAPS);
			exit(2);
		}
		s[n++] = (struct span){ lo, hi };
	}
	fclose(f);
	return n;
}

/*
 * A's QP, created on `cq`, with sc.ring set to the uverbs mappings that
 * appeared meanwhile: its rings. Called with sc.lock held.
 */
static struct ibv_qp *sc_create_qp(struct ibv_cq *cq, const struct qp_opts *o)
{
	int n0 = read_maps(sc_maps[0], 0), n1, i, j, nr = 0;
	struct ibv_qp *qp = create_qp(A.pd, cq, o);

	n1 = read_maps(sc_maps[1], 1);
	for (i = 0; i < n1; i++) {
		struct span m = sc_maps[1][i];
		int old = 0;

		for (j = 0; j < n0; j++) {
			if (sc_maps[0][j].lo == m.lo && sc_maps[0][j].hi == m.hi) {
				old = 1;
				break;
			}
			if (sc_maps[0][j].lo < m.hi && m.lo < sc_maps[0][j].hi) {
				fprintf(stderr, "verbs_races: ring-scribble: the new uverbs "
					"mapping %#lx-%#lx overlaps the old mapping %#lx-%#lx: "
					"cannot tell the QP's rings from the rest\n",
					(unsigned long)m.lo, (unsigned long)m.hi,
					(unsigned long)sc_maps[0][j].lo,
					(unsigned long)sc_maps[0][j].hi);
				exit(2);
			}
		}
		if (old)
			continue;
		if (nr == SC_MAXRINGS) {
			fprintf(stderr, "verbs_races: ring-scribble: more than %d new uverbs "
				"mappings with one QP\n", SC_MAXRINGS);
			exit(2);
		}
		sc.ring[nr++] = m;
	}
	if (!nr) {
		fprintf(stderr, "verbs_races: ring-scribble: no /dev/infiniband/uverbs mapping "
			"appeared with ibv_create_qp on %s: its rings are not mapped into the "
			"process\n", A.name);
		exit(2);
	}
	sc.nrings = nr;
	return qp;
}

static void *sc_scribbler(void *arg)
{
	uint64_t rng = mix(seed, 3, 0x736372);
	int i, n;

	(void)arg;
	while (!__atomic_load_n(&sc.stop, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&sc.lock);
		n = sc.nrings ? 1 + rnd(&rng) % 4 : 0;
		for (i = 0; i < n; i++) {
			struct span *r = &sc.ring[rnd(&rng) % sc.nrings];
			size_t words = (r->hi - r->lo) / 4, w;
			uint32_t *p, v, old;
			uint64_t x = rnd(&rng);

			/* The producer index, the consumer index, or any word. */
			switch (x % 16) {
			case 0:
				w = 0;
				break;
			case 1:
				w = 16;
				break;
			default:
				w = (x >> 8) % words;
			}
			p = (uint32_t *)r->lo + w;
			old = __atomic_load_n(p, __ATOMIC_RELAXED);
			switch ((x >> 4) % 4) {
			case 0:
				v = (uint32_t)rnd(&rng);
				break;
			case 1:
				v = old + (uint32_t)(rnd(&rng) % 9) - 4;
				break;
			case 2: {
				static const uint32_t edge[] = { 0, 1, 0x7fffffff, 0x80000000,
								 0xffffffff, 0xfffffffe, 64, 4096,
								 65536 };

				v = edge[rnd(&rng) % (sizeof(edge) / sizeof(edge[0]))];
				break;
			}
			default:
				v = old ^ (1u << (rnd(&rng) % 32));
			}
			__atomic_store_n(p, v, __ATOMIC_RELAXED);
			sc.scribbles++;
		}
		pthread_mutex_unlock(&sc.lock);
		usleep(rnd(&rng) % 2000);
	}
	return NULL;
}

struct sc_state {
	struct pair p;
	struct qp_opts o;
	unsigned char *amem, *brecv, *bwbuf;
	struct ibv_mr *amr, *brecv_mr, *bwbuf_mr;
	int a_recvs, b_recvs;		/* outstanding, as far as we know */
	uint64_t b_recv_id, b_send_id;
	unsigned long batches, wrs, a_comps, a_errs, b_comps, b_errs;
	unsigned long resets, stalls, refused, cq_errs;
};

/* Every completion of A's must be well-formed, whatever its rings held. */
static void sc_check_a(struct sc_state *s, const struct ibv_wc *wc)
{
	s->a_comps++;
	CHECK(wc->status <= IBV_WC_TM_RNDV_INCOMPLETE, "ring-scribble: a completion of A "
	      "with undefined status %d", wc->status);
	CHECK(wc->qp_num == s->p.aqp->qp_num, "ring-scribble: a completion of A's CQ names QP "
	      "%#x, not A's %#x", wc->qp_num, s->p.aqp->qp_num);
	if (wc->status != IBV_WC_SUCCESS) {
		s->a_errs++;
		return;
	}
	CHECK(wc->opcode <= IBV_WC_ATOMIC_WRITE ||
	      (wc->opcode >= IBV_WC_RECV && wc->opcode <= IBV_WC_DRIVER3),
	      "ring-scribble: a successful completion of A with undefined opcode %d",
	      wc->opcode);
	if (wc->opcode & IBV_WC_RECV)
		s->a_recvs--;
}

static void sc_check_b(struct sc_state *s, const struct ibv_wc *wc)
{
	s->b_comps++;
	CHECK(wc->status <= IBV_WC_TM_RNDV_INCOMPLETE, "ring-scribble: a completion of B "
	      "with undefined status %d", wc->status);
	if (wc->wr_id & B_RECV_TAG)
		s->b_recvs--;
	if (wc->status != IBV_WC_SUCCESS)
		s->b_errs++;
}

/* Polls both CQs until A has `want_a` and B `want_b` more completions, or all is quiet. */
static int sc_poll(struct sc_state *s, int want_a, int want_b, double quiet, int *err)
{
	double last = now(), t0 = last;
	struct ibv_wc wc[16];
	int got_a = 0, got_b = 0, na, nb, i, idle = 0;

	while (got_a < want_a || got_b < want_b) {
		na = ibv_poll_cq(s->p.acq, 16, wc);
		if (na < 0) {
			/* A CQ the garbage overran: a reset will make a new one. */
			s->cq_errs++;
			*err = 1;
			return 0;
		}
		for (i = 0; i < na; i++) {
			sc_check_a(s, &wc[i]);
			*err |= wc[i].status != IBV_WC_SUCCESS;
		}
		got_a += na;
		nb = ibv_poll_cq(s->p.bcq, 16, wc);
		if (nb < 0)
			die("ibv_poll_cq of B");
		for (i = 0; i < nb; i++) {
			sc_check_b(s, &wc[i]);
			*err |= wc[i].status != IBV_WC_SUCCESS;
		}
		got_b += nb;
		if (na || nb)
			last = now();
		else
			idle_pause(&idle);
		if (now() - last > quiet)
			return 0;
		if (now() - t0 > WAIT_SECS) {
			CHECK(0, "ring-scribble: completions kept coming for %d s", WAIT_SECS);
			return 0;
		}
	}
	return 1;
}

static void sc_post_recvs(struct sc_state *s, uint64_t *rng, int *err)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sg[4];
	int i, n;

	while (!*err && s->b_recvs < SC_BRECV) {
		int k = s->b_recv_id++ % SC_BRECV;

		sg[0] = (struct ibv_sge){ (uintptr_t)(s->brecv + (size_t)k * 4096), 4096,
					  s->brecv_mr->lkey };
		wr = (struct ibv_recv_wr){ .wr_id = B_RECV_TAG | s->b_recv_id, .sg_list = sg,
					   .num_sge = 1 };
		if (ibv_post_recv(s->p.bqp, &wr, &bad))
			*err = 1;
		else
			s->b_recvs++;
	}
	while (!*err && s->a_recvs < SC_ARECV) {
		n = 1 + rnd(rng) % 4;
		for (i = 0; i < n; i++) {
			unsigned char *at = s->amem + SC_SRC + (rnd(rng) % 256) * 64;

			sg[i] = (struct ibv_sge){ (uintptr_t)at, 64, s->amr->lkey };
		}
		wr = (struct ibv_recv_wr){ .wr_id = rnd(rng), .sg_list = sg, .num_sge = n };
		if (ibv_post_recv(s->p.aqp, &wr, &bad)) {
			/* A broken consumer index reads as a full ring: allowed. */
			s->refused++;
			*err = 1;
		} else {
			s->a_recvs++;
		}
	}
}

/* New QPs (and CQs) for both sides, A's rings handed to the scribbler. */
static void sc_open(struct sc_state *s, uint64_t *rng, int scribble)
{
	int err = 0;

	pthread_mutex_lock(&sc.lock);
	s->p.acq = ibv_create_cq(A.ctx, s->o.cqe, NULL, NULL, 0);
	s->p.bcq = ibv_create_cq(B.ctx, s->o.cqe, NULL, NULL, 0);
	if (!s->p.acq || !s->p.bcq)
		die("ibv_create_cq");
	s->p.aqp = sc_create_qp(s->p.acq, &s->o);
	s->p.bqp = create_qp(B.pd, s->p.bcq, &s->o);
	to_init(s->p.aqp);
	to_init(s->p.bqp);
	s->a_recvs = s->b_recvs = 0;
	pair_connect(&s->p, &s->o);
	if (!scribble)
		sc.nrings = 0;
	pthread_mutex_unlock(&sc.lock);
	sc_post_recvs(s, rng, &err);
	if (err && !scribble)
		die("ibv_post_recv on fresh QPs");
}

/* Both QPs to ERR, the CQs drained, everything destroyed; the scribbler held off. */
static void sc_close(struct sc_state *s)
{
	int err = 0, e;

	pthread_mutex_lock(&sc.lock);
	sc.nrings = 0;
	e = verb_err(modify_err(s->p.aqp));
	CHECK(!e, "ring-scribble: moving A's QP to ERR: %s", strerror(e));
	e = verb_err(modify_err(s->p.bqp));
	CHECK(!e, "ring-scribble: moving B's QP to ERR: %s", strerror(e));
	sc_poll(s, 1 << 30, 1 << 30, 0.2, &err);
	pair_close(&s->p, "ring-scribble");
	s->resets++;
	pthread_mutex_unlock(&sc.lock);
}

/* A batch of 1 to 8 SENDs and WRITEs of 1 to 4 SGEs, and B's answer; whether all went well. */
static int sc_batch(struct sc_state *s, uint64_t *rng)
{
	struct ibv_send_wr wr[8], *bad, bw;
	struct ibv_sge sg[8][4], bsg;
	int k = 1 + rnd(rng) % 8, sends = 0, i, j, err = 0;

	for (i = 0; i < k; i++) {
		int n = 1 + rnd(rng) % 4;
		uint32_t total = 0;

		for (j = 0; j < n; j++) {
			uint32_t len = 1 + rnd(rng) % 1024;

			sg[i][j] = (struct ibv_sge){
				(uintptr_t)(s->amem + rnd(rng) % (SC_SRC - len + 1)), len,
				s->amr->lkey };
			total += len;
		}
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = rnd(rng);
		wr[i].sg_list = sg[i];
		wr[i].num_sge = n;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		if (rnd(rng) % 2) {
			wr[i].opcode = IBV_WR_SEND;
			sends++;
		} else {
			wr[i].opcode = IBV_WR_RDMA_WRITE;
			wr[i].wr.rdma.remote_addr =
				(uintptr_t)(s->bwbuf + rnd(rng) % (SC_WBUF - total + 1));
			wr[i].wr.rdma.rkey = s->bwbuf_mr->rkey;
		}
	}
	if (ibv_post_send(s->p.aqp, wr, &bad)) {
		s->refused++;
		return 0;
	}
	s->batches++;
	s->wrs += k;
	bsg = (struct ibv_sge){ (uintptr_t)s->bwbuf, 64, s->bwbuf_mr->lkey };
	bw = (struct ibv_send_wr){ .wr_id = B_SEND_TAG | s->b_send_id++, .sg_list = &bsg,
				   .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED };
	if (ibv_post_send(s->p.bqp, &bw, &bad)) {
		s->refused++;
		return 0;
	}
	if (!sc_poll(s, k + 1, sends + 1, 0.3, &err) && !err) {
		s->stalls++;
		return 0;
	}
	if (err)
		return 0;
	sc_post_recvs(s, rng, &err);
	return !err;
}

/* On fresh QPs, unscribbled: a WRITE, a SEND and a READ of a pattern, byte for byte. */
static void sc_clean_transfer(struct sc_state *s, uint64_t *rng)
{
	const size_t len = 16384, piece = len / 4;
	unsigned char *src = s->amem, *back = s->amem + SC_SRC;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sg[4];
	struct ibv_wc wc;
	int i, st;

	fill(src, SC_SRC, rnd(rng));
	memset(back, 0, SC_AMR - SC_SRC);
	memset(s->bwbuf, 0, SC_WBUF);
	memset(s->brecv, 0, (size_t)SC_BRECV * 4096);
	for (i = 0; i < 4; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)(src + i * piece), (uint32_t)piece,
					  s->amr->lkey };
	wr.sg_list = sg;
	wr.num_sge = 4;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)s->bwbuf;
	wr.wr.rdma.rkey = s->bwbuf_mr->rkey;
	if (ibv_post_send(s->p.aqp, &wr, &bad))
		die("ibv_post_send of the clean WRITE");
	st = poll_wc(s->p.acq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
	CHECK(st == IBV_WC_SUCCESS, "ring-scribble: the clean WRITE after the scribbling: %s",
	      status_str(st));
	if (st == IBV_WC_SUCCESS)
		same(s->bwbuf, src, len, "ring-scribble", "the clean WRITE after the scribbling");

	/* A SEND of 4 KiB in 4 pieces, into B's receive (k = the next one's slot). */
	for (i = 0; i < 4; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)(src + len + i * 1024), 1024, s->amr->lkey };
	wr.opcode = IBV_WR_SEND;
	if (ibv_post_send(s->p.aqp, &wr, &bad))
		die("ibv_post_send of the clean SEND");
	st = poll_wc(s->p.acq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
	CHECK(st == IBV_WC_SUCCESS, "ring-scribble: the clean SEND after the scribbling: %s",
	      status_str(st));
	st = poll_wc(s->p.bcq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
	CHECK(st == IBV_WC_SUCCESS && wc.byte_len == 4096,
	      "ring-scribble: B's receive of the clean SEND: %s, %u bytes", status_str(st),
	      st < 0 ? 0 : wc.byte_len);
	if (st == IBV_WC_SUCCESS) {
		uint64_t id = (wc.wr_id & ~B_RECV_TAG) - 1;

		same(s->brecv + (id % SC_BRECV) * 4096, src + len, 4096, "ring-scribble",
		     "the clean SEND after the scribbling");
	}

	st = rdma_once(&s->p, IBV_WR_RDMA_READ, back, (uint32_t)len, s->amr->lkey,
		       (uintptr_t)s->bwbuf, s->bwbuf_mr->rkey);
	CHECK(st == IBV_WC_SUCCESS, "ring-scribble: the clean READ after the scribbling: %s",
	      status_str(st));
	if (st == IBV_WC_SUCCESS)
		same(back, src, len, "ring-scribble", "the clean READ after the scribbling");
}

static void mode_ring_scribble(double seconds)
{
	struct sc_state s;
	uint64_t rng = mix(seed, 3, 0x726571);
	int fails0 = failures, err;
	double end;
	pthread_t th;

	memset(&s, 0, sizeof(s));
	s.o = default_opts;
	s.o.send_wr = 64;
	s.o.recv_wr = SC_BRECV;
	s.o.send_sge = 4;
	s.o.recv_sge = 4;
	s.o.cqe = 4096;	/* room for a ring's worth of garbage of each queue */
	s.o.timeout = 12;
	s.o.retry_cnt = 3;
	s.o.rnr_retry = 3;
	s.o.min_rnr_timer = 1;
	s.amem = map_anon(SC_AMR);
	s.brecv = map_anon((size_t)SC_BRECV * 4096);
	s.bwbuf = map_anon(SC_WBUF);
	fill(s.amem, SC_AMR, rnd(&rng));
	s.amr = reg(A.pd, s.amem, SC_AMR, IBV_ACCESS_LOCAL_WRITE);
	s.brecv_mr = reg(B.pd, s.brecv, (size_t)SC_BRECV * 4096, IBV_ACCESS_LOCAL_WRITE);
	s.bwbuf_mr = reg(B.pd, s.bwbuf, SC_WBUF, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (strncmp(A.name, "oxe", 3))
		printf("verbs_races: NOTE: ring-scribble scribbles the rings of %s, not an oxe "
		       "device\n", A.name);

	sc_open(&s, &rng, 1);
	printf("verbs_races: ring-scribble: %d uverbs mapping(s) appeared with %s's QP:",
	       sc.nrings, A.name);
	for (err = 0; err < sc.nrings; err++)
		printf(" %#lx-%#lx", (unsigned long)sc.ring[err].lo,
		       (unsigned long)sc.ring[err].hi);
	printf("\n");
	fflush(stdout);
	sc.stop = 0;
	sc.scribbles = 0;
	start_thread(&th, sc_scribbler, NULL);
	end = now() + seconds;
	while (now() < end) {
		if (!sc_batch(&s, &rng)) {
			sc_close(&s);
			sc_open(&s, &rng, 1);
		}
	}
	__atomic_store_n(&sc.stop, 1, __ATOMIC_RELEASE);
	err = join_within(th, WAIT_SECS);
	if (err) {
		fprintf(stderr, "FAIL: ring-scribble: the scribbler did not stop: %s\n",
			strerror(err));
		exit(1);
	}
	sc_close(&s);
	s.resets--;	/* the last one is not for trouble */

	sc_open(&s, &rng, 0);
	sc_clean_transfer(&s, &rng);
	pair_close(&s.p, "ring-scribble");

	err = ibv_dereg_mr(s.amr);
	CHECK(!err, "ring-scribble: ibv_dereg_mr of A's MR: %s", strerror(err));
	err = ibv_dereg_mr(s.brecv_mr);
	CHECK(!err, "ring-scribble: ibv_dereg_mr of B's receive MR: %s", strerror(err));
	err = ibv_dereg_mr(s.bwbuf_mr);
	CHECK(!err, "ring-scribble: ibv_dereg_mr of B's WRITE MR: %s", strerror(err));
	CHECK(s.batches > 0, "ring-scribble: no batch was posted");
	printf("verbs_races %s -> %s, ring-scribble: %lu words scribbled, %lu batches (%lu WRs) "
	       "posted, %lu refused; A: %lu completions (%lu errors), B: %lu (%lu errors); "
	       "%lu QP resets (%lu stalls, %lu CQ errors); clean transfer checked, "
	       "%d failure(s)\n", A.name, B.name, sc.scribbles, s.batches, s.wrs, s.refused,
	       s.a_comps, s.a_errs, s.b_comps, s.b_errs, s.resets, s.stalls, s.cq_errs,
	       failures - fails0);
	munmap(s.amem, SC_AMR);
	munmap(s.brecv, (size_t)SC_BRECV * 4096);
	munmap(s.bwbuf, SC_WBUF);
}

/* ====================== mw-pd ====================== */

#define MW_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define MR_ACCESS (IBV_ACCESS_MW_BIND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		   IBV_ACCESS_REMOTE_READ)

static struct {
	unsigned char *mem, *shadow, *src;	/* B's 4 pages, their copy, A's page */
	struct ibv_mr *mr[2], *msrc;		/* MR i of PD i+1: pages 2i, 2i+1 */
	struct ibv_pd *pd[2];
	unsigned long binds, writes, invalidates;
	int counted;				/* B has the three window counters */
	long long cnt[3];			/* their values at the last look */
	unsigned long counter_checks;
} mw;

/* A device counter, /sys/class/infiniband/DEV/hw_counters/NAME: -1 if absent. */
static long long hw_counter(const char *dev, const char *name)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/hw_counters/%s", dev, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static const char *const mw_counter_names[3] = { "mw_bind", "mw_invalidate", "mw_active" };

/* B's window counters, into `c`: whether all three are there. */
static int mw_read_counters(long long c[3])
{
	int i, all = 1;

	usleep(30000);	/* ib_core caches hw counters for a jiffy: read past one */
	for (i = 0; i < 3; i++) {
		c[i] = hw_counter(B.name, mw_counter_names[i]);
		all &= c[i] >= 0;
	}
	return all;
}

/*
 * After `what`: B's mw_bind, mw_invalidate and mw_active must have moved by
 * exactly `bind`, `inv` and `active` since the last look. oxe counts a bind
 * (or a type 1 unbind) that took effect, a type 2 window freed by an
 * invalidation, and the windows allocated and not deallocated
 * (rust/counters.rs, rust/mw.rs, rust/limits.rs).
 */
static void mw_counted(const char *what, int bind, int inv, int active)
{
	long long cur[3], d[3] = { bind, inv, active };
	int i;

	if (!mw.counted)
		return;
	mw_read_counters(cur);
	for (i = 0; i < 3; i++) {
		CHECK(cur[i] == mw.cnt[i] + d[i], "mw-pd: %s: %s of %s went from %lld to %lld, "
		      "not by %+lld", what, mw_counter_names[i], B.name, mw.cnt[i], cur[i], d[i]);
		mw.cnt[i] = cur[i];
	}
	mw.counter_checks++;
}

static struct ibv_mw *mw_alloc(int pdi, enum ibv_mw_type type)
{
	struct ibv_mw *w = ibv_alloc_mw(mw.pd[pdi], type);
	char what[64];

	CHECK(w != NULL, "mw-pd: ibv_alloc_mw of type %d in PD%d on %s: %s", type, pdi + 1,
	      B.name, strerror(errno));
	snprintf(what, sizeof(what), "ibv_alloc_mw of type %d in PD%d", type, pdi + 1);
	mw_counted(what, 0, 0, w != NULL);
	return w;
}

static void mw_dealloc(struct ibv_mw *w, const char *what)
{
	char m[160];
	int err = ibv_dealloc_mw(w);

	CHECK(!err, "mw-pd: %s: ibv_dealloc_mw: %s", what, strerror(err));
	snprintf(m, sizeof(m), "%s: ibv_dealloc_mw", what);
	mw_counted(m, 0, 0, err ? 0 : -1);
}

/* The window's range: the second page of MR `mri`. */
static uint64_t mw_addr(int mri)
{
	return (uintptr_t)mw.mem + (2 * mri + 1) * page;
}

/*
 * A WRITE of 256 bytes from A at `addr` through `rkey`, on `p` or (NULL)
 * on new QPs with B's in PD `pdi`: its status, or -1 if none came.
 */
static int mw_write(struct pair *p, int pdi, uint64_t addr, uint32_t rkey)
{
	struct pair fresh;
	int st;

	fill(mw.src, 256, rnd(&seed));
	if (!p) {
		pair_open(&fresh, mw.pd[pdi], &default_opts);
		p = &fresh;
	}
	st = rdma_once(p, IBV_WR_RDMA_WRITE, mw.src, 256, mw.msrc->lkey, addr + 100, rkey);
	mw.writes++;
	if (p == &fresh)
		pair_close(&fresh, "mw-pd");
	return st;
}

/* WRITEs through `rkey` on new QPs of both PDs must fail, B's memory untouched. */
static void mw_no_access(const char *what, uint64_t addr, uint32_t rkey)
{
	char m[160];
	int pdi, st;

	for (pdi = 0; pdi < 2; pdi++) {
		st = mw_write(NULL, pdi, addr, rkey);
		CHECK(st == IBV_WC_REM_ACCESS_ERR, "mw-pd: %s: a WRITE through rkey %#x on a QP "
		      "of PD%d completed with %s, not REM_ACCESS_ERR", what, rkey, pdi + 1,
		      status_str(st));
		snprintf(m, sizeof(m), "%s: B's memory after a WRITE through rkey %#x on a QP of "
			 "PD%d", what, rkey, pdi + 1);
		if (!same(mw.mem, mw.shadow, 4 * page, "mw-pd", m))
			memcpy(mw.shadow, mw.mem, 4 * page);
	}
}

/*
 * A type 2 bind work request on `p`'s B QP of window `w` to MR `mri`; the
 * bind's status, -1 if none came, -2 - errno if the post was refused.
 */
static int mw_bind2(struct pair *p, struct ibv_mw *w, uint32_t rkey, int mri)
{
	struct ibv_send_wr wr = { .wr_id = 0xb1d, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	int err;

	wr.bind_mw.mw = w;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ mw.mr[mri], mw_addr(mri), page,
							  MW_ACCESS };
	mw.binds++;
	err = ibv_post_send(p->bqp, &wr, &bad);
	if (err)
		return -2 - verb_err(err);
	if (!poll_wc(p->bcq, &wc, 1, WAIT_SECS))
		return -1;
	return wc.status;
}

static const char *bind_str(int st, char *buf, size_t n)
{
	if (st <= -2)
		snprintf(buf, n, "post refused: %s", strerror(-2 - st));
	else
		snprintf(buf, n, "%s", status_str(st));
	return buf;
}

/* Type 2: window of PD `mwpd`, QP of PD `qppd`, MR of PD1; must fail. */
static void mw_type2_cross(int mwpd, int qppd)
{
	struct ibv_mw *w = mw_alloc(mwpd, IBV_MW_TYPE_2);
	char what[128], b[96];
	struct pair p;
	uint32_t old, rkey;
	int st;

	if (!w)
		return;
	snprintf(what, sizeof(what), "type 2 window of PD%d bound through a QP of PD%d to an "
		 "MR of PD1", mwpd + 1, qppd + 1);
	old = w->rkey;
	rkey = ibv_inc_rkey(old);
	pair_open(&p, mw.pd[qppd], &default_opts);
	st = mw_bind2(&p, w, rkey, 0);
	CHECK(st == IBV_WC_MW_BIND_ERR, "mw-pd: %s: the bind: %s, not MW_BIND_ERR", what,
	      bind_str(st, b, sizeof(b)));
	mw_counted(what, st == IBV_WC_SUCCESS, 0, 0);
	pair_close(&p, "mw-pd");
	mw_no_access(what, mw_addr(0), rkey);
	mw_no_access(what, mw_addr(0), old);
	mw_dealloc(w, what);
}

/* Type 1: window of PD `mwpd` to MR `mri` through a QP of PD `qppd`; must be refused. */
static void mw_type1_cross(int mwpd, int mri, int qppd)
{
	struct ibv_mw *w = mw_alloc(mwpd, IBV_MW_TYPE_1);
	struct ibv_mw_bind mb = { .wr_id = 0xb1d, .send_flags = IBV_SEND_SIGNALED };
	char what[128];
	struct ibv_wc wc;
	struct pair p;
	uint32_t old, named;
	int err, st;

	if (!w)
		return;
	snprintf(what, sizeof(what), "type 1 window of PD%d bound to an MR of PD%d through a "
		 "QP of PD%d", mwpd + 1, mri + 1, qppd + 1);
	old = w->rkey;
	named = ibv_inc_rkey(old);
	mb.bind_info = (struct ibv_mw_bind_info){ mw.mr[mri], mw_addr(mri), page, MW_ACCESS };
	pair_open(&p, mw.pd[qppd], &default_opts);
	mw.binds++;
	err = ibv_bind_mw(p.bqp, w, &mb);
	if (err) {
		CHECK(err == EPERM || err == EINVAL, "mw-pd: %s: ibv_bind_mw refused it with %s, "
		      "not EPERM or EINVAL", what, strerror(err));
		printf("verbs_races: mw-pd: %s: refused by ibv_bind_mw (%s)\n", what,
		       strerror(err));
		st = -2 - err;
	} else {
		st = poll_wc(p.bcq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
		CHECK(st == IBV_WC_MW_BIND_ERR, "mw-pd: %s: the bind completed with %s, not "
		      "MW_BIND_ERR", what, status_str(st));
		printf("verbs_races: mw-pd: %s: the device answered %s\n", what, status_str(st));
		named = w->rkey != old ? w->rkey : named;
	}
	mw_counted(what, st == IBV_WC_SUCCESS, 0, 0);
	pair_close(&p, "mw-pd");
	mw_no_access(what, mw_addr(mri), named);
	mw_no_access(what, mw_addr(mri), old);
	mw_dealloc(w, what);
}

/*
 * The control's type 2 window, bound through `p`'s B QP with `rkey` and
 * written through: a local invalidate of `rkey` on that QP succeeds, counts
 * in mw_invalidate, and a WRITE through `rkey` then fails, B's memory as it was.
 */
static void mw_invalidate2(struct pair *p, uint32_t rkey, const char *what)
{
	struct ibv_send_wr wr = { .wr_id = 0x1a5, .opcode = IBV_WR_LOCAL_INV,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	char m[128], b[96];
	struct ibv_wc wc;
	int err, st;

	memset(&wc, 0, sizeof(wc));
	wr.invalidate_rkey = rkey;
	err = ibv_post_send(p->bqp, &wr, &bad);
	st = err ? -2 - verb_err(err) : poll_wc(p->bcq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
	CHECK(st == IBV_WC_SUCCESS, "mw-pd: %s: a local invalidate of the window's rkey %#x on "
	      "the QP that bound it: %s", what, rkey, bind_str(st, b, sizeof(b)));
	CHECK(st != IBV_WC_SUCCESS || wc.opcode == IBV_WC_LOCAL_INV, "mw-pd: %s: the local "
	      "invalidate completed with opcode %d, not LOCAL_INV", what, wc.opcode);
	snprintf(m, sizeof(m), "%s: a local invalidate of the window", what);
	mw_counted(m, 0, st == IBV_WC_SUCCESS, 0);
	mw.invalidates++;
	if (st != IBV_WC_SUCCESS)
		return;
	st = mw_write(p, 0, mw_addr(0), rkey);
	CHECK(st == IBV_WC_REM_ACCESS_ERR, "mw-pd: %s: a WRITE through rkey %#x after its "
	      "window was invalidated completed with %s, not REM_ACCESS_ERR", what, rkey,
	      status_str(st));
	if (!same(mw.mem, mw.shadow, 4 * page, "mw-pd",
		  "B's memory after a WRITE through an invalidated window"))
		memcpy(mw.shadow, mw.mem, 4 * page);
}

/*
 * The control's type 1 window `w`, bound and written through: a bind of
 * length 0 through `p`'s B QP unbinds it, counts in mw_bind, and WRITEs
 * through its new rkey and `bound` (the one it was bound with) then fail.
 */
static void mw_unbind1(struct pair *p, struct ibv_mw *w, uint32_t bound, const char *what)
{
	struct ibv_mw_bind mb = { .wr_id = 0xb1e, .send_flags = IBV_SEND_SIGNALED };
	char m[128], b[96];
	struct ibv_wc wc;
	int err, st;

	/* bind_info all zero: no MR, address 0, length 0 */
	mw.binds++;
	err = ibv_bind_mw(p->bqp, w, &mb);
	st = err ? -2 - err : poll_wc(p->bcq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
	CHECK(st == IBV_WC_SUCCESS, "mw-pd: %s: an unbind (ibv_bind_mw of length 0): %s", what,
	      bind_str(st, b, sizeof(b)));
	snprintf(m, sizeof(m), "%s: an unbind", what);
	mw_counted(m, st == IBV_WC_SUCCESS, 0, 0);
	if (st != IBV_WC_SUCCESS)
		return;
	snprintf(m, sizeof(m), "%s, after an unbind", what);
	mw_no_access(m, mw_addr(0), w->rkey);
	mw_no_access(m, mw_addr(0), bound);
}

/*
 * The control: window, QP and MR of PD1; a WRITE through the window lands,
 * and only there. Then the window is freed: a type 2 one by a local
 * invalidate, a type 1 one by an unbind.
 */
static void mw_control(enum ibv_mw_type type)
{
	struct ibv_mw *w = mw_alloc(0, type);
	char what[64], b[96];
	uint32_t rkey = 0;
	struct pair p;
	int st, err;

	if (!w)
		return;
	snprintf(what, sizeof(what), "control, type %d, all in PD1", type);
	pair_open(&p, mw.pd[0], &default_opts);
	if (type == IBV_MW_TYPE_2) {
		rkey = ibv_inc_rkey(w->rkey);
		st = mw_bind2(&p, w, rkey, 0);
	} else {
		struct ibv_mw_bind mb = { .wr_id = 0xb1d, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_wc wc;

		mb.bind_info = (struct ibv_mw_bind_info){ mw.mr[0], mw_addr(0), page, MW_ACCESS };
		mw.binds++;
		err = ibv_bind_mw(p.bqp, w, &mb);
		st = err ? -2 - err : poll_wc(p.bcq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
		rkey = w->rkey;
	}
	CHECK(st == IBV_WC_SUCCESS, "mw-pd: %s: the bind: %s", what, bind_str(st, b, sizeof(b)));
	mw_counted(what, st == IBV_WC_SUCCESS, 0, 0);
	if (st == IBV_WC_SUCCESS) {
		st = mw_write(&p, 0, mw_addr(0), rkey);
		CHECK(st == IBV_WC_SUCCESS, "mw-pd: %s: a WRITE through the window: %s", what,
		      status_str(st));
		if (st == IBV_WC_SUCCESS)
			memcpy(mw.shadow + page + 100, mw.src, 256);
		if (!same(mw.mem, mw.shadow, 4 * page, "mw-pd",
			  "B's memory after a WRITE through a window (control)"))
			memcpy(mw.shadow, mw.mem, 4 * page);
		if (st == IBV_WC_SUCCESS && type == IBV_MW_TYPE_2)
			mw_invalidate2(&p, rkey, what);
		else if (st == IBV_WC_SUCCESS)
			mw_unbind1(&p, w, rkey, what);
	}
	pair_close(&p, "mw-pd");
	mw_dealloc(w, what);
}

static void mode_mw_pd(void)
{
	int fails0 = failures, i, err;
	long long start_cnt[3];
	char counted[160];

	memset(&mw, 0, sizeof(mw));
	mw.mem = map_anon(4 * page);
	mw.src = map_anon(page);
	mw.shadow = malloc(4 * page);
	if (!mw.shadow)
		die("malloc");
	fill(mw.mem, 4 * page, mix(seed, 4, 0x6d656d));
	memcpy(mw.shadow, mw.mem, 4 * page);
	mw.pd[0] = B.pd;
	mw.pd[1] = alloc_pd(B.ctx);
	for (i = 0; i < 2; i++)
		mw.mr[i] = reg(mw.pd[i], mw.mem + 2 * i * page, 2 * page, MR_ACCESS);
	mw.msrc = reg(A.pd, mw.src, page, IBV_ACCESS_LOCAL_WRITE);
	printf("verbs_races: mw-pd: %s has max_mw %d, capability flags%s%s%s\n", B.name,
	       B.attr.max_mw,
	       B.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW ? " MEM_WINDOW" : "",
	       B.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A ? " TYPE_2A" : "",
	       B.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B ? " TYPE_2B" : "");
	/* The window counters: oxe's must be there; another device's are checked if there. */
	mw.counted = mw_read_counters(mw.cnt);
	for (i = 0; i < 3 && !mw.counted; i++)
		CHECK(mw.cnt[i] >= 0 || strncmp(B.name, "oxe", 3), "mw-pd: %s has no "
		      "hw_counters/%s", B.name, mw_counter_names[i]);
	if (!mw.counted && strncmp(B.name, "oxe", 3))
		printf("verbs_races: NOTE: mw-pd: %s lacks the counters mw_bind, mw_invalidate "
		       "and mw_active: not checked\n", B.name);
	fflush(stdout);
	for (i = 0; i < 3; i++)
		start_cnt[i] = mw.cnt[i];

	mw_type2_cross(1, 0);
	mw_type2_cross(0, 1);
	mw_type1_cross(1, 0, 0);
	mw_type1_cross(1, 1, 0);
	mw_control(IBV_MW_TYPE_2);
	mw_control(IBV_MW_TYPE_1);
	CHECK(!mw.counted || mw.cnt[2] == start_cnt[2], "mw-pd: mw_active of %s is %lld after "
	      "every window was deallocated, %lld before the first", B.name, mw.cnt[2],
	      start_cnt[2]);

	if (mw.counted)
		snprintf(counted, sizeof(counted), "counters checked %lu times (mw_bind %+lld, "
			 "mw_invalidate %+lld, mw_active %+lld)", mw.counter_checks,
			 mw.cnt[0] - start_cnt[0], mw.cnt[1] - start_cnt[1],
			 mw.cnt[2] - start_cnt[2]);
	else
		snprintf(counted, sizeof(counted), "counters NOT checked");
	printf("verbs_races %s -> %s, mw-pd: %lu binds, %lu invalidation(s), %lu WRITEs through "
	       "windows, %s, %d failure(s)\n", A.name, B.name, mw.binds, mw.invalidates,
	       mw.writes, counted, failures - fails0);
	for (i = 0; i < 2; i++) {
		err = ibv_dereg_mr(mw.mr[i]);
		CHECK(!err, "mw-pd: ibv_dereg_mr of the MR of PD%d: %s", i + 1, strerror(err));
	}
	err = ibv_dereg_mr(mw.msrc);
	CHECK(!err, "mw-pd: ibv_dereg_mr of A's MR: %s", strerror(err));
	err = ibv_dealloc_pd(mw.pd[1]);
	CHECK(!err, "mw-pd: ibv_dealloc_pd of PD2: %s", strerror(err));
	munmap(mw.mem, 4 * page);
	munmap(mw.src, page);
	free(mw.shadow);
}

/* ====================== rereg-ro ====================== */

#define SEGV_EXIT 42

static sigjmp_buf segv_jump;

static void on_segv(int sig)
{
	(void)sig;
	_exit(SEGV_EXIT);
}

static void on_segv_here(int sig)
{
	(void)sig;
	siglongjmp(segv_jump, 1);
}

/* Whether this process's own write to `p` faults (the byte is put back if not). */
static int write_faults_here(unsigned char *p)
{
	struct sigaction sa, old_segv, old_bus;
	volatile unsigned char *q = p;
	volatile int faulted = 0;
	unsigned char v = *q;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv_here;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	if (!sigsetjmp(segv_jump, 1)) {
		*q = v ^ 0xff;
		*q = v;
	} else {
		faulted = 1;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return faulted;
}

/* The permissions /proc/self/maps gives the mapping holding `addr` ("----" if none). */
static void maps_perms(const void *addr, char perms[5])
{
	char line[512], pr[5];
	unsigned long lo, hi;
	FILE *f = fopen("/proc/self/maps", "r");

	strcpy(perms, "----");
	if (!f)
		die("/proc/self/maps");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3 && lo <= (uintptr_t)addr &&
		    (uintptr_t)addr < hi) {
			memcpy(perms, pr, 5);
			break;
		}
	fclose(f);
}

/*
 * Whether a child's write to `p` faults: it reads a byte first (sent back
 * through a pipe, so that an unmapped page is told apart), then writes it.
 * The child's SIGSEGV handler exits, so the kernel logs no segfault.
 */
static void child_write_faults(unsigned char *p, unsigned char want)
{
	int fd[2], status = 0;
	unsigned char got = 0;
	ssize_t n = 0;
	pid_t pid, r;

	if (pipe(fd))
		die("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		volatile unsigned char *q = p;
		struct sigaction sa;
		unsigned char v;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_segv;
		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		close(fd[0]);
		v = q[0];
		if (write(fd[1], &v, 1) != 1)
			_exit(3);
		q[0] = v ^ 0xff;
		_exit(0);
	}
	close(fd[1]);
	r = wait_child(pid, &status, WAIT_SECS, 1000);
	if (!r) {
		CHECK(0, "rereg-ro: the writing child did not exit within %d s", WAIT_SECS);
		close(fd[0]);
		return;
	}
	if (r < 0)
		die("waitpid");
	n = read(fd[0], &got, 1);
	close(fd[0]);
	CHECK(n == 1 && got == want, "rereg-ro: the child could not read the registered page "
	      "(read %zd byte(s), %#04x, expected %#04x)", n, got, want);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == SEGV_EXIT,
	      "rereg-ro: a write to the read-only registered page %s",
	      WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "succeeded: the page is writable" :
	      "did not fault as expected");
}

static void mode_rereg_ro(void)
{
	unsigned char *pages, *shadow, *src;
	struct ibv_mr *mr, *msrc;
	uint32_t lkey, rkey;
	int fails0 = failures, ret, err, st;
	char perms[5], errname[32] = "none";
	struct pair p;

	pages = map_anon(2 * page);
	src = map_anon(2 * page);
	shadow = malloc(2 * page);
	if (!shadow)
		die("malloc");
	fill(pages, 2 * page, mix(seed, 5, 0x726f));
	memcpy(shadow, pages, 2 * page);
	if (mprotect(pages, 2 * page, PROT_READ))
		die("mprotect");
	msrc = reg(A.pd, src, 2 * page, IBV_ACCESS_LOCAL_WRITE);
	mr = ibv_reg_mr(B.pd, pages, 2 * page, IBV_ACCESS_REMOTE_READ);
	CHECK(mr != NULL, "rereg-ro: ibv_reg_mr of read-only pages for REMOTE_READ only: %s",
	      strerror(errno));
	if (!mr)
		goto out;
	lkey = mr->lkey;
	rkey = mr->rkey;

	errno = 0;
	ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ);
	err = errno;
	if (ret)
		snprintf(errname, sizeof(errname), "%s", err == EFAULT ? "EFAULT" :
			 err == EACCES ? "EACCES" : strerror(err));
	CHECK(ret != 0, "rereg-ro: ibv_rereg_mr to LOCAL_WRITE | REMOTE_WRITE of read-only "
	      "pages succeeded");
	CHECK(!ret || err == EFAULT || err == EACCES, "rereg-ro: ibv_rereg_mr of read-only "
	      "pages to writable failed with %s (return %d), not EFAULT or EACCES",
	      strerror(err), ret);
	printf("verbs_races: rereg-ro: ibv_rereg_mr to writable returned %d, errno %s\n", ret,
	       errname);
	CHECK(mr->lkey == lkey && mr->rkey == rkey, "rereg-ro: the failed rereg changed the "
	      "keys (%#x/%#x -> %#x/%#x)", lkey, rkey, mr->lkey, mr->rkey);

	maps_perms(pages, perms);
	CHECK(!strcmp(perms, "r--p"), "rereg-ro: the registered pages are %s in "
	      "/proc/self/maps, not r--p", perms);
	maps_perms(pages + page, perms);
	CHECK(!strcmp(perms, "r--p"), "rereg-ro: the second registered page is %s in "
	      "/proc/self/maps, not r--p", perms);
	CHECK(write_faults_here(pages) && write_faults_here(pages + page),
	      "rereg-ro: this process could write to the read-only registered pages");
	/* With fork-init, libibverbs keeps registered pages out of children (MADV_DONTFORK). */
	if (ibv_is_fork_initialized() == IBV_FORK_ENABLED) {
		printf("verbs_races: NOTE: rereg-ro: fork-init is on (MADV_DONTFORK): no child "
		       "write test\n");
	} else {
		child_write_faults(pages, shadow[0]);
		child_write_faults(pages + page, shadow[page]);
	}

	/* A WRITE through the rkey: refused, nothing written. */
	fill(src, 2 * page, rnd(&seed));
	pair_open(&p, B.pd, &default_opts);
	st = rdma_once(&p, IBV_WR_RDMA_WRITE, src, 2 * page, msrc->lkey, (uintptr_t)pages,
		       mr->rkey);
	CHECK(st == IBV_WC_REM_ACCESS_ERR, "rereg-ro: a WRITE through the rkey of the "
	      "read-only MR completed with %s, not REM_ACCESS_ERR", status_str(st));
	pair_close(&p, "rereg-ro");
	same(pages, shadow, 2 * page, "rereg-ro", "the read-only pages after a WRITE");

	/* A READ through it still works. */
	memset(src, 0, 2 * page);
	pair_open(&p, B.pd, &default_opts);
	st = rdma_once(&p, IBV_WR_RDMA_READ, src, 2 * page, msrc->lkey, (uintptr_t)pages,
		       mr->rkey);
	CHECK(st == IBV_WC_SUCCESS, "rereg-ro: a READ through the rkey of the read-only MR "
	      "after the failed rereg completed with %s", status_str(st));
	if (st == IBV_WC_SUCCESS)
		same(src, shadow, 2 * page, "rereg-ro", "a READ of the read-only pages");
	pair_close(&p, "rereg-ro");

	err = ibv_dereg_mr(mr);
	CHECK(!err, "rereg-ro: ibv_dereg_mr of the read-only MR: %s", strerror(err));
out:
	printf("verbs_races %s -> %s, rereg-ro: rereg to writable refused with %s, WRITE "
	       "refused, READ returned the pattern, pages still read-only: %d failure(s)\n",
	       A.name, B.name, errname, failures - fails0);
	err = ibv_dereg_mr(msrc);
	CHECK(!err, "rereg-ro: ibv_dereg_mr of A's MR: %s", strerror(err));
	munmap(pages, 2 * page);
	munmap(src, 2 * page);
	free(shadow);
}

/* ====================== async-events ====================== */

#define EV_WAIT 10		/* s: for an event that must come, a port state */
#define EV_QUIET 0.5		/* s: of nothing, where nothing may come */

static struct {
	unsigned char *bmem, *shadow, *src;	/* B's 2 pages (target, receive), A's page */
	struct ibv_mr *bmr, *amr;
	unsigned long events;			/* events read and acked, drains aside */
	char rkey[96], atomic[160], port[256];	/* what the cases found */
} evs;

/* B's netdev while this mode has it down: put back up on every way out. */
static struct {
	char name[64];
	int peer;			/* it lives in netns peer */
	volatile sig_atomic_t down;	/* set down, not yet back up */
	char addr6[8][64];		/* its static IPv6 addresses, which going down drops */
	int naddr6;
	struct sigaction old[3];
} lnk;

static const int lnk_signals[3] = { SIGTERM, SIGINT, SIGHUP };

/* Whether the element of an event of type `t` is a QP. */
static int ev_is_qp(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return 1;
	default:
		return 0;
	}
}

/* An event in words: its type and its element. */
static const char *ev_str(const struct ibv_async_event *e, char *buf, size_t n)
{
	const char *t = ibv_event_type_str(e->event_type);

	if (ev_is_qp(e->event_type))
		snprintf(buf, n, "%s on QP %#x", t, e->element.qp->qp_num);
	else if (e->event_type == IBV_EVENT_CQ_ERR)
		snprintf(buf, n, "%s on a CQ", t);
	else if (e->event_type == IBV_EVENT_SRQ_ERR ||
		 e->event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
		snprintf(buf, n, "%s on an SRQ", t);
	else if (e->event_type == IBV_EVENT_WQ_FATAL)
		snprintf(buf, n, "%s on a WQ", t);
	else
		snprintf(buf, n, "%s on port %d", t, e->element.port_num);
	return buf;
}

/*
 * The next asynchronous event of `s` within `secs` (its async_fd is
 * non-blocking, and polled): 1, the event in `e`, to be acked; 0 if none came.
 */
static int ev_next(struct side *s, struct ibv_async_event *e, double secs)
{
	struct pollfd pfd = { .fd = s->ctx->async_fd, .events = POLLIN };
	double end = now() + secs, left;

	for (;;) {
		errno = 0;
		if (!ibv_get_async_event(s->ctx, e))
			return 1;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			die("ibv_get_async_event");
		left = end - now();
		if (left <= 0)
			return 0;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			die("poll of an async_fd");
	}
}

/* Appends `what` to the list `list` (of `n` bytes), "; " between items. */
static void append(char *list, size_t n, const char *what)
{
	size_t used = strlen(list);

	if (used + 3 < n)
		snprintf(list + used, n - used, "%s%s", used ? "; " : "", what);
}

/* Nothing may arrive on the context of `s` for `secs`; whatever does is acked. */
static int ev_none(struct side *s, double secs, const char *what)
{
	struct ibv_async_event e;
	char list[512] = "", b[96];
	double end = now() + secs;
	int n = 0;

	while (ev_next(s, &e, end - now())) {
		append(list, sizeof(list), ev_str(&e, b, sizeof(b)));
		ibv_ack_async_event(&e);
		evs.events++;
		n++;
	}
	CHECK(!n, "async-events: %s: %s's context got %d event(s), none expected: %s", what,
	      s->name, n, list);
	return n;
}

/*
 * Exactly one event on the context of `s` within EV_WAIT s: `type` on `qp`,
 * and nothing more for EV_QUIET s. Whether it came.
 */
static int ev_expect_qp(struct side *s, enum ibv_event_type type, struct ibv_qp *qp,
			const char *what)
{
	struct ibv_async_event e;
	char b[96];
	int got = ev_next(s, &e, EV_WAIT), ok;

	CHECK(got, "async-events: %s: no async event on %s's context in %d s, expected %s on "
	      "QP %#x", what, s->name, EV_WAIT, ibv_event_type_str(type), qp->qp_num);
	if (!got)
		return 0;
	evs.events++;
	ok = e.event_type == type && e.element.qp == qp;
	CHECK(ok, "async-events: %s: %s's context got %s, expected %s on QP %#x", what,
	      s->name, ev_str(&e, b, sizeof(b)), ibv_event_type_str(type), qp->qp_num);
	ibv_ack_async_event(&e);
	ev_none(s, EV_QUIET, what);
	return ok;
}

/* Reads and acks what was pending on the context of `s`; printed if `say`. */
static int ev_drain(struct side *s, int say)
{
	struct ibv_async_event e;
	char b[96];
	int n = 0;

	while (ev_next(s, &e, 0)) {
		if (say)
			printf("verbs_races: NOTE: async-events: %s's context had %s pending\n",
			       s->name, ev_str(&e, b, sizeof(b)));
		ibv_ack_async_event(&e);
		n++;
	}
	return n;
}

/* The state of `qp` (-1 if ibv_query_qp fails) once it is `want`, or after `secs`. */
static int qp_state_within(struct ibv_qp *qp, enum ibv_qp_state want, double secs)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	double end = now() + secs;
	int st;

	for (;;) {
		memset(&a, 0, sizeof(a));
		st = ibv_query_qp(qp, &a, IBV_QP_STATE, &init) ? -1 : (int)a.qp_state;
		if (st == (int)want || now() > end)
			return st;
		usleep(10000);
	}
}

/* ---- a: an RDMA WRITE through a wrong rkey ---- */

static void ev_wrong_rkey(void)
{
	const char *what = "a WRITE through a wrong rkey";
	uint32_t bad = evs.bmr->rkey ^ 0x80;
	struct pair p;
	int st;

	fill(evs.src, 256, rnd(&seed));
	pair_open(&p, B.pd, &default_opts);
	st = rdma_once(&p, IBV_WR_RDMA_WRITE, evs.src, 256, evs.amr->lkey, (uintptr_t)evs.bmem,
		       bad);
	CHECK(st == IBV_WC_REM_ACCESS_ERR, "async-events: %s (%#x, the MR's is %#x): A's "
	      "completion: %s, not REM_ACCESS_ERR", what, bad, evs.bmr->rkey, status_str(st));
	snprintf(evs.rkey, sizeof(evs.rkey), "%s",
		 ev_expect_qp(&B, IBV_EVENT_QP_ACCESS_ERR, p.bqp, what) ? "QP_ACCESS_ERR" :
		 "NOT QP_ACCESS_ERR");
	ev_none(&A, EV_QUIET, what);
	if (!same(evs.bmem, evs.shadow, page, "async-events",
		  "B's memory after a WRITE through a wrong rkey"))
		memcpy(evs.shadow, evs.bmem, page);
	pair_close(&p, "async-events");
}

/* ---- b: a misaligned atomic ---- */

/*
 * A's QP for the atomics, on `cq`, built for ibv_wr_atomic_fetch_add (whose
 * builders do not refuse a misaligned address, where ibv_post_send may):
 * NULL if the device makes none.
 */
static struct ibv_qp *ev_atomic_qp(struct ibv_cq *cq, const struct qp_opts *o)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = o->send_wr, .max_recv_wr = o->recv_wr,
			 .max_send_sge = o->send_sge, .max_recv_sge = o->recv_sge },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = A.pd,
		.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
	};

	return ibv_create_qp_ex(A.ctx, &a);
}

/*
 * A FETCH_AND_ADD of `add` from A at `raddr` through `rkey`, the original
 * value landing in evs.src: its status, -1 if none came, -2 - errno if the
 * post was refused.
 */
static int ev_fetch_add(struct pair *p, uint64_t raddr, uint32_t rkey, uint64_t add)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(p->aqp);
	struct ibv_wc wc;
	int err;

	if (qx) {
		ibv_wr_start(qx);
		qx->wr_id = 0xfa;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_fetch_add(qx, rkey, raddr, add);
		ibv_wr_set_sge(qx, evs.amr->lkey, (uintptr_t)evs.src, 8);
		err = ibv_wr_complete(qx);
	} else {
		struct ibv_sge sg = { (uintptr_t)evs.src, 8, evs.amr->lkey };
		struct ibv_send_wr wr = { .wr_id = 0xfa, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		err = ibv_post_send(p->aqp, &wr, &bad);
	}
	if (err)
		return -2 - verb_err(err);
	if (!poll_wc(p->acq, &wc, 1, WAIT_SECS))
		return -1;
	return wc.status;
}

static void ev_misaligned_atomic(void)
{
	const char *what = "a FETCH_AND_ADD at an address not 8-byte aligned";
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT,
				  .qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
						     IBV_ACCESS_REMOTE_WRITE |
						     IBV_ACCESS_REMOTE_READ |
						     IBV_ACCESS_REMOTE_ATOMIC };
	struct qp_opts o = default_opts;
	unsigned char *at = evs.bmem + 64;
	uint64_t want, orig, now_at;
	char b[96];
	struct pair p;
	int st;

	if (B.attr.atomic_cap == IBV_ATOMIC_NONE || A.attr.atomic_cap == IBV_ATOMIC_NONE) {
		printf("verbs_races: NOTE: async-events: %s reports atomic_cap NONE: no "
		       "misaligned atomic sent\n",
		       B.attr.atomic_cap == IBV_ATOMIC_NONE ? B.name : A.name);
		snprintf(evs.atomic, sizeof(evs.atomic), "not tested (atomic_cap NONE)");
		return;
	}
	memset(&p, 0, sizeof(p));
	p.acq = ibv_create_cq(A.ctx, o.cqe, NULL, NULL, 0);
	p.bcq = ibv_create_cq(B.ctx, o.cqe, NULL, NULL, 0);
	if (!p.acq || !p.bcq)
		die("ibv_create_cq");
	p.aqp = ev_atomic_qp(p.acq, &o);
	if (!p.aqp) {
		printf("verbs_races: NOTE: async-events: %s makes no QP with "
		       "ibv_wr_atomic_fetch_add (%s): ibv_post_send instead\n", A.name,
		       strerror(errno));
		p.aqp = create_qp(A.pd, p.acq, &o);
	}
	p.bqp = create_qp(B.pd, p.bcq, &o);
	to_init(p.aqp);
	to_init(p.bqp);
	if (ibv_modify_qp(p.bqp, &qa, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS))
		die("modify INIT -> INIT, REMOTE_ATOMIC on");
	pair_connect(&p, &o);

	/* The control: an aligned one succeeds, so atomics pass on these QPs and this MR. */
	memcpy(&want, at, 8);
	memset(evs.src, 0, 8);
	st = ev_fetch_add(&p, (uintptr_t)at, evs.bmr->rkey, 5);
	CHECK(st == IBV_WC_SUCCESS, "async-events: an aligned FETCH_AND_ADD (the control): %s",
	      bind_str(st, b, sizeof(b)));
	if (st != IBV_WC_SUCCESS) {
		snprintf(evs.atomic, sizeof(evs.atomic), "not tested (the aligned control "
			 "failed)");
		goto out;
	}
	memcpy(&orig, evs.src, 8);
	memcpy(&now_at, at, 8);
	CHECK(orig == want && now_at == want + 5, "async-events: an aligned FETCH_AND_ADD of 5 "
	      "to %#llx returned %#llx and left %#llx", (unsigned long long)want,
	      (unsigned long long)orig, (unsigned long long)now_at);
	memcpy(evs.shadow, evs.bmem, page);

	st = ev_fetch_add(&p, (uintptr_t)at + 4, evs.bmr->rkey, 5);
	if (st <= -2) {
		printf("verbs_races: NOTE: async-events: %s refuses to post %s (%s): not sent to "
		       "%s\n", A.name, what, strerror(-2 - st), B.name);
		snprintf(evs.atomic, sizeof(evs.atomic), "NOT TESTED (%s refuses to post it)",
			 A.name);
		goto out;
	}
	CHECK(st == IBV_WC_REM_INV_REQ_ERR, "async-events: %s: A's completion: %s, not "
	      "REM_INV_REQ_ERR", what, status_str(st));
	/*
	 * Whether it reached B: a responder that refuses a request moves its QP
	 * to ERR. An oxe requester fails a misaligned atomic itself and sends
	 * nothing (rust/req.rs), and B's QP stays in RTS.
	 */
	if (qp_state_within(p.bqp, IBV_QPS_ERR, 2) != IBV_QPS_ERR) {
		printf("verbs_races: NOTE: async-events: %s failed %s itself (%s) and sent "
		       "nothing: %s's QP is still in RTS, no event of %s's tested\n", A.name,
		       what, status_str(st), B.name, B.name);
		snprintf(evs.atomic, sizeof(evs.atomic), "NOT TESTED (%s fails it itself, "
			 "unsent)", A.name);
		ev_none(&B, EV_QUIET, what);
	} else if (ev_expect_qp(&B, IBV_EVENT_QP_REQ_ERR, p.bqp, what)) {
		snprintf(evs.atomic, sizeof(evs.atomic), "QP_REQ_ERR on %s's QP", B.name);
	} else {
		snprintf(evs.atomic, sizeof(evs.atomic), "NOT QP_REQ_ERR on %s's QP", B.name);
	}
	ev_none(&A, EV_QUIET, what);
	if (!same(evs.bmem, evs.shadow, page, "async-events",
		  "B's memory after a misaligned FETCH_AND_ADD"))
		memcpy(evs.shadow, evs.bmem, page);
out:
	pair_close(&p, "async-events");
}

/* ---- c: a receive that fails on B's side ---- */

static void ev_short_receive(void)
{
	const char *what = "a SEND of 256 bytes to a receive of 64";
	unsigned char *rbuf = evs.bmem + page;
	struct ibv_sge rsg = { (uintptr_t)rbuf, 64, evs.bmr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0x5ec, .sg_list = &rsg, .num_sge = 1 }, *rbad;
	struct ibv_sge sg = { (uintptr_t)evs.src, 256, evs.amr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x5e, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	struct pair p;
	int st;

	memset(rbuf, 0xc5, page);
	fill(evs.src, 256, rnd(&seed));
	pair_create(&p, B.pd, &default_opts);
	if (ibv_post_recv(p.bqp, &rwr, &rbad))
		die("ibv_post_recv");
	pair_connect(&p, &default_opts);
	if (ibv_post_send(p.aqp, &wr, &bad))
		die("ibv_post_send of a SEND");
	st = poll_wc(p.acq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
	CHECK(st == IBV_WC_REM_INV_REQ_ERR, "async-events: %s: A's completion: %s, not "
	      "REM_INV_REQ_ERR", what, status_str(st));
	st = poll_wc(p.bcq, &wc, 1, WAIT_SECS) ? (int)wc.status : -1;
	CHECK(st == IBV_WC_LOC_LEN_ERR && wc.wr_id == 0x5ec, "async-events: %s: B's receive "
	      "completed with %s (wr_id %#llx), not LOC_LEN_ERR", what, status_str(st),
	      st < 0 ? 0ull : (unsigned long long)wc.wr_id);
	all_are(rbuf + 64, page - 64, 0xc5, "async-events",
		"B's receive page past its 64-byte buffer");
	/* (rust/resp.rs: an error a receive completion reports needs no event) */
	ev_none(&B, EV_QUIET, what);
	ev_none(&A, EV_QUIET, what);
	pair_close(&p, "async-events");
}

/* ---- d: port events, B's netdev set down and up ---- */

/*
 * Runs ip with `args` (up to 12, NULL-terminated), after "-n peer" if
 * `peer`: its exit status, or -1 if it did not run. Its standard output goes
 * to `out` (`outlen` bytes, NUL-terminated) if `out` is not NULL, its
 * standard error nowhere if `quiet`. No shell, no stdio: it also runs from a
 * signal handler.
 */
static int run_ip(int peer, int quiet, char *out, size_t outlen, const char *const *args)
{
	const char *argv[16];
	int n = 0, fd[2] = { -1, -1 }, status, null;
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	argv[n++] = "ip";
	if (peer) {
		argv[n++] = "-n";
		argv[n++] = "peer";
	}
	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	if (out && (outlen < 1 || pipe(fd)))
		return -1;
	pid = fork();
	if (pid < 0) {
		if (out) {
			close(fd[0]);
			close(fd[1]);
		}
		return -1;
	}
	if (pid == 0) {
		if (out) {
			dup2(fd[1], 1);
			close(fd[0]);
			close(fd[1]);
		}
		null = quiet ? open("/dev/null", O_WRONLY) : -1;
		if (null >= 0)
			dup2(null, 2);
		execvp("ip", (char *const *)argv);
		_exit(127);
	}
	if (out) {
		close(fd[1]);
		while (got + 1 < outlen) {
			r = read(fd[0], out + got, outlen - 1 - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			got += r;
		}
		out[got] = 0;
		close(fd[0]);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * B's netdev back up, with the static IPv6 addresses its going down dropped
 * (keep_addr_on_down is off), if this mode set it down: the number of ip
 * commands that failed, or -1 if it was not down.
 */
static int link_restore(void)
{
	int i, bad;

	if (!lnk.down)
		return -1;
	lnk.down = 0;
	bad = run_ip(lnk.peer, 0, NULL, 0,
		     (const char *const[]){ "link", "set", lnk.name, "up", NULL }) != 0;
	for (i = 0; i < lnk.naddr6; i++)
		bad += run_ip(lnk.peer, 0, NULL, 0,
			      (const char *const[]){ "addr", "replace", lnk.addr6[i], "dev",
						     lnk.name, "nodad", NULL }) != 0;
	return bad;
}

static void link_restore_at_exit(void)
{
	link_restore();
}

static void link_restore_on_signal(int sig)
{
	link_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* The netdev of B's GID at `index` (sysfs), in `name`: whether there is one. */
static int gid_ndev(int index, char *name, size_t n)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d",
		 B.name, index);
	name[0] = 0;
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(name, n, f))
		name[0] = 0;
	fclose(f);
	name[strcspn(name, "\n")] = 0;
	return name[0] != 0;
}

/* Port 1's state on `s` (-1 if ibv_query_port fails) once it is (not) ACTIVE, or after `secs`. */
static int port_state_within(struct side *s, int active, double secs)
{
	struct ibv_port_attr pa;
	double end = now() + secs;
	int st;

	for (;;) {
		memset(&pa, 0, sizeof(pa));
		st = ibv_query_port(s->ctx, 1, &pa) ? -1 : (int)pa.state;
		if ((st == IBV_PORT_ACTIVE) == active || now() > end)
			return st;
		usleep(20000);
	}
}

static const char *port_str(int st)
{
	return st < 0 ? "unknown (ibv_query_port failed)" :
		ibv_port_state_str((enum ibv_port_state)st);
}

/*
 * Reads B's events until `want` arrives on port 1 (`must`: within EV_WAIT s,
 * a failure if not), or (not `must`) those pending. Also allowed, on port 1:
 * GID_CHANGE (the addresses the link drops and gets back), counted in
 * `*gid_changes`, and `also` (a port event repeated: a driver may report
 * each netdev event). Anything else is a failure.
 */
static int ev_port(enum ibv_event_type want, enum ibv_event_type also, int must,
		   int *gid_changes, const char *what)
{
	struct ibv_async_event e;
	char list[512] = "", b[96];
	double end = now() + (must ? EV_WAIT : 0);
	int got = 0, nbad = 0;

	while ((!got || !must) && ev_next(&B, &e, end - now())) {
		int port1 = !ev_is_qp(e.event_type) && e.element.port_num == 1;

		evs.events++;
		if (port1 && e.event_type == want) {
			got = 1;
		} else if (port1 && e.event_type == IBV_EVENT_GID_CHANGE) {
			++*gid_changes;
		} else if (!(port1 && e.event_type == also)) {
			append(list, sizeof(list), ev_str(&e, b, sizeof(b)));
			nbad++;
		}
		ibv_ack_async_event(&e);
	}
	CHECK(got || !must, "async-events: %s: no %s on port 1 of %s's context in %d s", what,
	      ibv_event_type_str(want), B.name, EV_WAIT);
	CHECK(!nbad, "async-events: %s: %s's context got %d unexpected event(s): %s", what,
	      B.name, nbad, list);
	return got;
}

static int gid_eq(const union ibv_gid *x, const union ibv_gid *y)
{
	return !memcmp(x->raw, y->raw, sizeof(x->raw));
}

static const char *gid_str(const union ibv_gid *g, char *buf, size_t n)
{
	if (!inet_ntop(AF_INET6, g->raw, buf, n))
		snprintf(buf, n, "?");
	return buf;
}

/* The valid entries of B's GID table on port 1, into `t` (`max` of them): how many. */
static int gid_table(struct ibv_gid_entry *t, int max)
{
	ssize_t n = ibv_query_gid_table(B.ctx, t, max, 0);
	int i, k = 0;

	for (i = 0; i < n; i++)
		if (t[i].port_num == 1)
			t[k++] = t[i];
	return k;
}

/*
 * Waits EV_WAIT s at most for B's GID table to hold again its GID at B's
 * index and every GID (and type) of `had` (`n` entries, at any index; the
 * link-local ones aside): whether it does. What is missing goes to `missing`. `cur` has room for
 * `max` entries.
 */
static int gids_back(const struct ibv_gid_entry *had, int n, struct ibv_gid_entry *cur,
		     int max, char *missing, size_t mlen)
{
	double end = now() + EV_WAIT;
	char b[INET6_ADDRSTRLEN], m[INET6_ADDRSTRLEN + 48];
	int i, j, k, ok;

	for (;;) {
		k = gid_table(cur, max);
		missing[0] = 0;
		for (j = 0; j < k && !(cur[j].gid_index == (uint32_t)B.gid_index &&
				       gid_eq(&cur[j].gid, &B.gid)); j++)
			;
		ok = j < k;
		if (!ok) {
			snprintf(m, sizeof(m), "%s at index %d", gid_str(&B.gid, b, sizeof(b)),
				 B.gid_index);
			append(missing, mlen, m);
		}
		for (i = 0; i < n; i++) {
			/* (link-local ones are the kernel's to make again, not this test's) */
			if (had[i].gid.raw[0] == 0xfe && (had[i].gid.raw[1] & 0xc0) == 0x80)
				continue;
			for (j = 0; j < k && !(gid_eq(&cur[j].gid, &had[i].gid) &&
					       cur[j].gid_type == had[i].gid_type); j++)
				;
			if (j == k) {
				ok = 0;
				snprintf(m, sizeof(m), "%s (type %u, was at index %u)",
					 gid_str(&had[i].gid, b, sizeof(b)), had[i].gid_type,
					 had[i].gid_index);
				append(missing, mlen, m);
			}
		}
		if (ok || now() > end)
			return ok;
		usleep(100000);
	}
}

static void ev_port_events(void)
{
	const char *what_down = "B's netdev set down", *what_up = "B's netdev set up";
	static int at_exit_set;
	struct ibv_gid_entry *had, *cur;
	struct ibv_port_attr pa;
	struct sigaction sa;
	char out[4096], missing[512], *line, *save, *p;
	int i, n, len = 0, err, st, down_st = -1, gid_changes = 0, ok, left;

	snprintf(evs.port, sizeof(evs.port), "NOT TESTED");
	memset(&pa, 0, sizeof(pa));
	if (!ibv_query_port(B.ctx, 1, &pa))
		len = pa.gid_tbl_len;
	ok = gid_ndev(B.gid_index, lnk.name, sizeof(lnk.name));
	for (i = 0; i < len && !ok; i++)
		ok = gid_ndev(i, lnk.name, sizeof(lnk.name));
	CHECK(ok, "async-events: port: no netdev in /sys/class/infiniband/%s/ports/1/gid_attrs/"
	      "ndevs", B.name);
	if (!ok)
		return;
	/* Here, or in netns peer (veth1). */
	lnk.peer = 0;
	if (run_ip(0, 1, NULL, 0, (const char *const[]){ "link", "show", "dev", lnk.name, NULL })) {
		lnk.peer = 1;
		err = run_ip(1, 1, NULL, 0,
			     (const char *const[]){ "link", "show", "dev", lnk.name, NULL });
		CHECK(!err, "async-events: port: %s's netdev %s is neither in this netns nor in "
		      "netns peer (ip: %d)", B.name, lnk.name, err);
		if (err)
			return;
	}
	st = port_state_within(&B, 1, 0);
	CHECK(st == IBV_PORT_ACTIVE, "async-events: port: %s's port is %s before its netdev "
	      "goes down", B.name, port_str(st));
	if (st != IBV_PORT_ACTIVE)
		return;
	len = len > 0 ? len : 1024;
	had = calloc(len, sizeof(*had));
	cur = calloc(len, sizeof(*cur));
	if (!had || !cur)
		die("calloc");
	n = gid_table(had, len);
	lnk.naddr6 = 0;
	if (!run_ip(lnk.peer, 1, out, sizeof(out),
		    (const char *const[]){ "-6", "-o", "addr", "show", "dev", lnk.name, "scope",
					   "global", NULL })) {
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			p = strstr(line, " inet6 ");
			if (p && strstr(line, "valid_lft forever") && lnk.naddr6 < 8 &&
			    sscanf(p + 7, "%63s", lnk.addr6[lnk.naddr6]) == 1)
				lnk.naddr6++;
		}
	}

	/* From here until link_restore(), nothing returns or dies without putting it back. */
	if (!at_exit_set++)
		atexit(link_restore_at_exit);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = link_restore_on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < 3; i++)
		sigaction(lnk_signals[i], &sa, &lnk.old[i]);
	lnk.down = 1;
	fflush(stdout);
	err = run_ip(lnk.peer, 0, NULL, 0,
		     (const char *const[]){ "link", "set", lnk.name, "down", NULL });
	CHECK(!err, "async-events: port: ip%s link set %s down: exit status %d",
	      lnk.peer ? " -n peer" : "", lnk.name, err);
	if (!err) {
		ev_port(IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ERR, 1, &gid_changes, what_down);
		down_st = port_state_within(&B, 0, EV_WAIT);
		CHECK(down_st >= 0 && down_st != IBV_PORT_ACTIVE, "async-events: port: "
		      "ibv_query_port says %s with %s down", port_str(down_st), lnk.name);
	}
	left = link_restore();
	for (i = 0; i < 3; i++)
		sigaction(lnk_signals[i], &lnk.old[i], NULL);
	CHECK(!left, "async-events: port: putting %s back up (and its %d IPv6 address(es)): "
	      "%d ip command(s) failed", lnk.name, lnk.naddr6, left);
	if (!err)
		ev_port(IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR, 1, &gid_changes, what_up);
	st = port_state_within(&B, 1, EV_WAIT);
	CHECK(st == IBV_PORT_ACTIVE, "async-events: port: %s's port is %s %d s after %s came "
	      "back up", B.name, port_str(st), EV_WAIT, lnk.name);
	i = port_state_within(&A, 1, EV_WAIT);
	CHECK(i == IBV_PORT_ACTIVE, "async-events: port: %s's port is %s %d s after %s came "
	      "back up", A.name, port_str(i), EV_WAIT, lnk.name);
	ok = gids_back(had, n, cur, len, missing, sizeof(missing));
	CHECK(ok, "async-events: port: %s's GID table %d s after %s came back up lacks: %s",
	      B.name, EV_WAIT, lnk.name, missing);
	/* What came meanwhile: more of the same only. */
	ev_port(IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ACTIVE, 0, &gid_changes, what_up);
	/* A's port followed its peer's carrier: its events are not this test's. */
	ev_drain(&A, 0);
	if (!err)
		snprintf(evs.port, sizeof(evs.port), "%s%s down: PORT_ERR, port %s; up: "
			 "PORT_ACTIVE, port %s; %d GIDs %s (%d GID_CHANGE, %d IPv6 address(es) put "
			 "back)", lnk.peer ? "netns peer's " : "", lnk.name, port_str(down_st),
			 port_str(st), n, ok ? "back" : "NOT back", gid_changes, lnk.naddr6);
	free(had);
	free(cur);
}

static const char *atomic_cap_str(enum ibv_atomic_cap c)
{
	return c == IBV_ATOMIC_NONE ? "NONE" : c == IBV_ATOMIC_HCA ? "HCA" :
		c == IBV_ATOMIC_GLOB ? "GLOB" : "?";
}

static void mode_async_events(void)
{
	struct side *s[2] = { &A, &B };
	int fails0 = failures, fl[2], i, err;

	memset(&evs, 0, sizeof(evs));
	for (i = 0; i < 2; i++) {
		fl[i] = fcntl(s[i]->ctx->async_fd, F_GETFL);
		if (fl[i] < 0 || fcntl(s[i]->ctx->async_fd, F_SETFL, fl[i] | O_NONBLOCK))
			die("fcntl of an async_fd");
	}
	evs.bmem = map_anon(2 * page);
	evs.src = map_anon(page);
	evs.shadow = malloc(page);
	if (!evs.shadow)
		die("malloc");
	fill(evs.bmem, 2 * page, mix(seed, 6, 0x657673));
	memcpy(evs.shadow, evs.bmem, page);
	evs.bmr = reg(B.pd, evs.bmem, 2 * page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	evs.amr = reg(A.pd, evs.src, page, IBV_ACCESS_LOCAL_WRITE);
	printf("verbs_races: async-events: atomic_cap %s on %s, %s on %s\n",
	       atomic_cap_str(A.attr.atomic_cap), A.name, atomic_cap_str(B.attr.atomic_cap),
	       B.name);
	/* What came before this mode is not its business. */
	ev_drain(&A, 1);
	ev_drain(&B, 1);
	fflush(stdout);

	ev_wrong_rkey();
	ev_misaligned_atomic();
	ev_short_receive();
	ev_port_events();

	printf("verbs_races %s -> %s, async-events: a WRITE through a wrong rkey: %s on %s's "
	       "QP, none on %s; a misaligned atomic: %s; a receive too short: LOC_LEN_ERR, no "
	       "event; port: %s; %lu events read, %d failure(s)\n", A.name, B.name, evs.rkey,
	       B.name, A.name, evs.atomic, evs.port, evs.events, failures - fails0);
	err = ibv_dereg_mr(evs.bmr);
	CHECK(!err, "async-events: ibv_dereg_mr of B's MR: %s", strerror(err));
	err = ibv_dereg_mr(evs.amr);
	CHECK(!err, "async-events: ibv_dereg_mr of A's MR: %s", strerror(err));
	for (i = 0; i < 2; i++)
		fcntl(s[i]->ctx->async_fd, F_SETFL, fl[i]);
	munmap(evs.bmem, 2 * page);
	munmap(evs.src, page);
	free(evs.shadow);
}

/* ====================== main ====================== */

static const char *const mode_names[] = {
	"sqd-rd-atomic", "err-while-arriving", "ring-scribble", "mw-pd", "rereg-ro",
	"async-events",
};

static void usage(void)
{
	fprintf(stderr, "usage: verbs_races DEV_A GID_A DEV_B GID_B MODE [-s SECONDS] "
		"[-r SEED]\n  MODE: sqd-rd-atomic, err-while-arriving, ring-scribble, mw-pd, "
		"rereg-ro, async-events, all\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double seconds = 5;
	const char *mode;
	unsigned int i;
	int opt, m = -1, err;

	seed = default_seed();
	while ((opt = getopt(argc, argv, "s:r:")) != -1) {
		switch (opt) {
		case 's':
			if (!parse_seconds(optarg, &seconds))
				usage();
			break;
		case 'r':
			if (!parse_seed(optarg, &seed))
				usage();
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 5)
		usage();
	mode = argv[optind + 4];
	for (i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++)
		if (!strcmp(mode, mode_names[i]))
			m = i;
	if (m < 0 && strcmp(mode, "all"))
		usage();

	page = sysconf(_SC_PAGESIZE);
	open_side(&A, argv[optind], atoi(argv[optind + 1]));
	open_side(&B, argv[optind + 2], atoi(argv[optind + 3]));
	printf("verbs_races %s -> %s: seed %#llx, mode %s, %.1f s\n", A.name, B.name,
	       (unsigned long long)seed, mode, seconds);
	fflush(stdout);

	if (m < 0 || m == 0)
		mode_sqd_rd_atomic(seconds);
	fflush(stdout);
	if (m < 0 || m == 1)
		mode_err_while_arriving(seconds);
	fflush(stdout);
	if (m < 0 || m == 2)
		mode_ring_scribble(seconds);
	fflush(stdout);
	if (m < 0 || m == 3)
		mode_mw_pd();
	fflush(stdout);
	if (m < 0 || m == 4)
		mode_rereg_ro();
	fflush(stdout);
	if (m < 0 || m == 5)
		mode_async_events();

	err = ibv_dealloc_pd(A.pd);
	CHECK(!err, "ibv_dealloc_pd of %s: %s", A.name, strerror(err));
	err = ibv_dealloc_pd(B.pd);
	CHECK(!err, "ibv_dealloc_pd of %s: %s", B.name, strerror(err));
	err = ibv_close_device(A.ctx);
	CHECK(!err, "ibv_close_device of %s: %s", A.name, strerror(errno));
	err = ibv_close_device(B.ctx);
	CHECK(!err, "ibv_close_device of %s: %s", B.name, strerror(errno));
	printf("verbs_races %s -> %s: %d checks, %d failure(s)%s\n", A.name, B.name, checks,
	       failures, failures > MAX_PRINTED ? " (only the first printed)" : "");
	return failures ? 1 : 0;
}
