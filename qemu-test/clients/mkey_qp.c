// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * mkey_qp DEV GID_INDEX: oxe's indirect keys (oxedv_create_mkey,
 * oxedv_wr_mr_list, oxedv_wr_mr_interleaved), from a C program linked against
 * the provider, over two RC QPs of one device.
 *
 * Checks creation errors; list layouts of odd sizes at odd offsets, written,
 * read and used as local keys on both the send and the receive side; every
 * entry boundary at -1, 0 and +1; interleaved rounds and the gaps they skip;
 * rights that must be granted by every entry; nesting up to the depth limit
 * and one past it; local invalidation and SEND with Invalidate; an entry's MR
 * deregistered under the key; atomics inside one entry and across two; and
 * the hw counters mkey_configure and mkey_access. Exit status 0 if every
 * check held; each failure is one line on stderr.
 *
 * mkey_qp --show DEV GID_INDEX: for watching by hand. Builds a list key of
 * three entries and a key of two levels over it, writes through the second,
 * prints where to look (debugfs, rdma resource, hw counters) and waits for
 * Enter before it lets go of them.
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

static int failures, checks;
static const char *dev_name;

#define CHECK(cond, ...)                                        \
	do {                                                    \
		checks++;                                       \
		if (!(cond)) {                                  \
			fprintf(stderr, "FAIL: " __VA_ARGS__);  \
			fputc('\n', stderr);                    \
			failures++;                             \
		}                                               \
	} while (0)

static void die(const char *what)
{
	fprintf(stderr, "mkey_qp: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int gid_index;
static struct ibv_qp *qa, *qb;	/* requester, responder */
static struct ibv_qp_ex *xa;
static unsigned char *src, *tb;	/* A's source, B's target */
static struct ibv_mr *msrc, *mtb, *mro;	/* mro: tb again, without REMOTE_WRITE */
/* Completions polled while waiting for another, in arrival order. */
static struct ibv_wc stash[64];
static int stashed;

static long counter(const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	usleep(30000);	/* ib_core caches hw counters for a jiffy */
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/hw_counters/%s", dev_name, name);
	f = fopen(path, "r");
	if (!f)
		die(path);
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Whether the debugfs file of `mk` holds every one of the `n` strings. */
static void debugfs_says(struct oxedv_mkey *mk, const char **want, int n, const char *what)
{
	char path[128], out[4096] = "";
	size_t len;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/sys/kernel/debug/oxe/%s/mr-%u", dev_name, mk->lkey >> 8);
	f = fopen(path, "r");
	if (!f) {
		CHECK(0, "%s: %s: %s", what, path, strerror(errno));
		return;
	}
	len = fread(out, 1, sizeof(out) - 1, f);
	out[len] = 0;
	fclose(f);
	for (i = 0; i < n; i++)
		CHECK(strstr(out, want[i]) != NULL, "%s: %s has no \"%s\":\n%s", what, path, want[i],
		      out);
}

/* Whether `rdma -dd resource show mr` of `mk` says `want`. */
static void rdma_says(struct oxedv_mkey *mk, const char *want, const char *what)
{
	char cmd[160], out[4096] = "";
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "rdma -dd resource show mr dev %s lkey %u 2>&1", dev_name,
		 mk->lkey);
	p = popen(cmd, "r");
	if (!p)
		die("popen rdma");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	pclose(p);
	CHECK(strstr(out, want) != NULL, "%s: `%s` does not say \"%s\": %s", what, cmd, want, out);
}

static struct ibv_qp *new_qp(void)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 16,
			 .max_recv_sge = 4 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV,
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
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 4;
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
	a.sq_psn = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* A connected pair again: after an error completion both are rebuilt. */
static void fresh_pair(void)
{
	struct ibv_wc wc[16];

	if (qa)
		ibv_destroy_qp(qa);
	if (qb)
		ibv_destroy_qp(qb);
	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
	stashed = 0;
	qa = new_qp();
	qb = new_qp();
	xa = ibv_qp_to_qp_ex(qa);
	to_rts(qa, qb->qp_num);
	to_rts(qb, qa->qp_num);
}

/* The completion of wr_id `id`; its status, or -1 after 20 s. */
static int wait_for(uint64_t id, struct ibv_wc *out)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int n, i;

	for (i = 0; i < stashed; i++) {
		if (stash[i].wr_id != id)
			continue;
		wc = stash[i];
		memmove(stash + i, stash + i + 1, (stashed - i - 1) * sizeof(wc));
		stashed--;
		if (out)
			*out = wc;
		return wc.status;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1 && wc.wr_id == id) {
			if (out)
				*out = wc;
			return wc.status;
		}
		if (n == 1 && stashed < 64)
			stash[stashed++] = wc;
		if (n == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 20)
				return -1;
		}
	}
}

static uint64_t next_id = 100;

/* Posts what `build` adds to A's batch, signaled; the completion's status. */
#define POST(out, ...)                                                  \
	({                                                              \
		uint64_t id_ = next_id++;                               \
		int st_;                                                \
		ibv_wr_start(xa);                                       \
		xa->wr_id = id_;                                        \
		xa->wr_flags = IBV_SEND_SIGNALED;                       \
		__VA_ARGS__;                                            \
		st_ = ibv_wr_complete(xa) ? -2 : wait_for(id_, out);    \
		st_;                                                    \
	})

static int configure_list(struct oxedv_mkey *mk, uint32_t access, const struct ibv_sge *s, int n)
{
	struct ibv_wc wc;
	int st = POST(&wc, oxedv_wr_mr_list(xa, mk, access, n, s));

	if (st == IBV_WC_SUCCESS)
		CHECK(wc.opcode == IBV_WC_DRIVER1, "a configuration completed with opcode %d",
		      wc.opcode);
	return st;
}

static int write_at(uint32_t rkey, uint64_t off, uint32_t len)
{
	return POST(NULL, ibv_wr_rdma_write(xa, rkey, off);
		    ibv_wr_set_sge(xa, msrc->lkey, (uintptr_t)src, len));
}

/* A READ into the second half of A's buffer, then copied to `into`. */
static int read_at(uint32_t rkey, uint64_t off, uint32_t len, void *into)
{
	unsigned char *land = src + 2048;
	int st = POST(NULL, ibv_wr_rdma_read(xa, rkey, off);
		      ibv_wr_set_sge(xa, msrc->lkey, (uintptr_t)land, len));

	memcpy(into, land, len);
	return st;
}

static struct oxedv_mkey *mkey(uint32_t flags, uint16_t max)
{
	struct oxedv_mkey_init_attr a = { .pd = pd, .create_flags = flags, .max_entries = max };
	struct oxedv_mkey *mk = oxedv_create_mkey(&a);

	if (!mk)
		die("oxedv_create_mkey");
	return mk;
}

static void pattern(int seed)
{
	int i;

	for (i = 0; i < 4096; i++)
		src[i] = (unsigned char)(i * 13 + seed);
	memset(tb, GUARD, BUF);
}

/* tb[at .. at + n) holds src[from .. from + n), and the bytes around it are guards. */
static void landed(size_t at, size_t from, size_t n, const char *what)
{
	CHECK(!memcmp(tb + at, src + from, n), "%s: %zu bytes at %#zx are not the message's %zu..",
	      what, n, at, from);
	CHECK(at == 0 || tb[at - 1] == GUARD, "%s: the byte before %#zx was written", what, at);
	CHECK(tb[at + n] == GUARD, "%s: the byte after %#zx+%zu was written", what, at, n);
}

static void creation(void)
{
	struct oxedv_mkey_init_attr a = { .pd = pd, .create_flags = OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT };
	struct oxedv_mkey *mk;

	errno = 0;
	CHECK(!oxedv_create_mkey(NULL) && errno == EINVAL, "NULL attributes: errno %d", errno);
	a.max_entries = 0;
	errno = 0;
	CHECK(!oxedv_create_mkey(&a) && errno == EINVAL, "max_entries 0: errno %d", errno);
	a.max_entries = 33;
	errno = 0;
	CHECK(!oxedv_create_mkey(&a) && errno == EINVAL, "max_entries 33: errno %d", errno);
	a.max_entries = 4;
	a.create_flags = 0;
	errno = 0;
	CHECK(!oxedv_create_mkey(&a) && errno == EINVAL, "no INDIRECT flag: errno %d", errno);
	a.create_flags = OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT | (1u << 9);
	errno = 0;
	CHECK(!oxedv_create_mkey(&a) && errno == EINVAL, "an unknown flag: errno %d", errno);
	a.create_flags = OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
	a.max_entries = 32;
	mk = oxedv_create_mkey(&a);
	CHECK(mk && mk->lkey == mk->rkey && mk->lkey != 0, "a key of 32 entries");
	/* Free: it grants nothing yet. */
	if (mk) {
		CHECK(write_at(mk->rkey, 0, 1) == IBV_WC_REM_ACCESS_ERR,
		      "a WRITE through a Free key did not fail with a remote access error");
		fresh_pair();
		CHECK(oxedv_destroy_mkey(mk) == 0, "oxedv_destroy_mkey");
	}
}

/* A list of three entries of 7, 5 and 9 bytes at odd offsets. */
static void list_layout(void)
{
	struct oxedv_mkey *mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 3);
	struct ibv_sge e[3] = {
		{ (uintptr_t)tb + 3, 7, mtb->lkey },
		{ (uintptr_t)tb + 0x100, 5, mtb->lkey },
		{ (uintptr_t)tb + 0x201, 9, mtb->lkey },
	};
	uint32_t rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	unsigned char back[64];
	long acc0 = counter("mkey_access");
	uint64_t off;

	char line[128];
	const char *want[3] = { "indirect valid", "layout list, 3 entries, depth 1", line };

	CHECK(configure_list(mk, rw, e, 3) == IBV_WC_SUCCESS, "configuring a list of 3");
	snprintf(line, sizeof(line), "entry 1: key %#010x addr %#lx len 5 skip 0", mtb->lkey,
		 (unsigned long)(uintptr_t)tb + 0x100);
	debugfs_says(mk, want, 3, "a configured list");
	rdma_says(mk, "drv_indirect list", "a configured list");
	rdma_says(mk, "drv_indirect_entries 3", "a configured list");
	/* netlink goes to unprivileged callers too: lengths, never keys or addresses. */
	rdma_says(mk, "drv_entry2 len 9 skip 0", "a configured list");
	/* Configured twice without an invalidate: the key is not Free. */
	CHECK(configure_list(mk, rw, e, 3) == IBV_WC_MW_BIND_ERR,
	      "configuring a Valid key again did not fail with a memory management error");
	fresh_pair();

	pattern(1);
	CHECK(write_at(mk->rkey, 0, 21) == IBV_WC_SUCCESS, "WRITE of the whole key");
	landed(3, 0, 7, "list entry 0");
	landed(0x100, 7, 5, "list entry 1");
	landed(0x201, 12, 9, "list entry 2");

	/* Every boundary, and one byte either side of it. */
	for (off = 5; off <= 14; off++) {
		pattern((int)off);
		CHECK(write_at(mk->rkey, off, 3) == IBV_WC_SUCCESS, "WRITE of 3 at %lu", off);
		for (int i = 0; i < 3; i++) {
			uint64_t k = off + i;
			size_t at = k < 7 ? 3 + k : k < 12 ? 0x100 + k - 7 : 0x201 + k - 12;

			CHECK(tb[at] == src[i], "WRITE of 3 at %lu: key byte %lu not at %#zx", off,
			      k, at);
		}
	}
	pattern(2);
	CHECK(write_at(mk->rkey, 20, 1) == IBV_WC_SUCCESS, "WRITE of the last byte");
	CHECK(tb[0x209] == src[0] && tb[0x20a] == GUARD, "the last byte landed at 0x209");
	CHECK(write_at(mk->rkey, 20, 2) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE one byte past the key's end was not refused");
	fresh_pair();
	CHECK(write_at(mk->rkey, 21, 1) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE starting at the key's end was not refused");
	fresh_pair();

	pattern(3);
	memcpy(tb + 3, "ABCDEFG", 7);
	memcpy(tb + 0x100, "HIJKL", 5);
	memcpy(tb + 0x201, "MNOPQRSTU", 9);
	memset(back, 0, sizeof(back));
	CHECK(read_at(mk->rkey, 0, 21, back) == IBV_WC_SUCCESS, "READ of the whole key");
	CHECK(!memcmp(back, "ABCDEFGHIJKLMNOPQRSTU", 21), "READ gathered %.21s", back);
	CHECK(read_at(mk->rkey, 6, 8, back) == IBV_WC_SUCCESS, "READ across two boundaries");
	CHECK(!memcmp(back, "GHIJKLMN", 8), "READ across boundaries gathered %.8s", back);

	/* The key as an lkey: a SEND gathering from it, a receive scattering into it. */
	{
		unsigned char *land = src + 3072;
		struct ibv_sge rs = { (uintptr_t)land, 64, msrc->lkey };
		struct ibv_recv_wr r = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *bad;

		memset(land, 0, 64);
		if (ibv_post_recv(qb, &r, &bad))
			die("post_recv");
		CHECK(POST(NULL, ibv_wr_send(xa); ibv_wr_set_sge(xa, mk->lkey, 2, 17)) ==
		      IBV_WC_SUCCESS, "SEND gathering through the key");
		CHECK(wait_for(1, NULL) == IBV_WC_SUCCESS, "the receive of that SEND");
		CHECK(!memcmp(land, "CDEFGHIJKLMNOPQRS", 17), "SEND gathered %.17s", land);

		rs = (struct ibv_sge){ 0, 21, mk->lkey };
		if (ibv_post_recv(qb, &r, &bad))
			die("post_recv");
		pattern(4);
		CHECK(POST(NULL, ibv_wr_send(xa); ibv_wr_set_sge(xa, msrc->lkey, (uintptr_t)src, 21)) ==
		      IBV_WC_SUCCESS, "SEND into a receive through the key");
		CHECK(wait_for(1, NULL) == IBV_WC_SUCCESS, "a receive scattering through the key");
		landed(3, 0, 7, "received, entry 0");
		landed(0x100, 7, 5, "received, entry 1");
		landed(0x201, 12, 9, "received, entry 2");
	}
	CHECK(counter("mkey_access") > acc0, "mkey_access did not move");
	CHECK(oxedv_destroy_mkey(mk) == 0, "oxedv_destroy_mkey");
}

static void interleaved_layout(void)
{
	struct oxedv_mkey *mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 2);
	struct oxedv_mr_interleaved il[2] = {
		{ (uintptr_t)tb + 0x400, 8, 2, mtb->lkey },
		{ (uintptr_t)tb + 0x440, 8, 2, mtb->lkey },
	};
	uint32_t rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	int r;

	CHECK(POST(NULL, oxedv_wr_mr_interleaved(xa, mk, rw, 3, 2, il)) == IBV_WC_SUCCESS,
	      "configuring 2 entries interleaved over 3 rounds");
	pattern(5);
	CHECK(write_at(mk->rkey, 0, 48) == IBV_WC_SUCCESS, "WRITE of the interleaved key");
	for (r = 0; r < 3; r++) {
		CHECK(!memcmp(tb + 0x400 + 10 * r, src + 16 * r, 8), "round %d, entry 0", r);
		CHECK(!memcmp(tb + 0x440 + 10 * r, src + 16 * r + 8, 8), "round %d, entry 1", r);
		CHECK(tb[0x408 + 10 * r] == GUARD && tb[0x409 + 10 * r] == GUARD &&
		      tb[0x448 + 10 * r] == GUARD, "round %d: a skipped byte was written", r);
	}
	CHECK(tb[0x3ff] == GUARD && tb[0x43f] == GUARD, "a byte before an entry was written");
	CHECK(write_at(mk->rkey, 47, 2) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE past the interleaved key's end was not refused");
	fresh_pair();
	CHECK(oxedv_destroy_mkey(mk) == 0, "oxedv_destroy_mkey");

	/* Zero rounds is refused by the provider. */
	mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 2);
	CHECK(POST(NULL, oxedv_wr_mr_interleaved(xa, mk, rw, 0, 2, il)) == -2,
	      "zero rounds did not fail ibv_wr_complete");
	oxedv_destroy_mkey(mk);
}

/* The key grants nothing its entries do not. */
static void rights(void)
{
	struct oxedv_mkey *mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 2);
	struct ibv_sge e[2] = {
		{ (uintptr_t)tb + 0x600, 16, mtb->lkey },
		{ (uintptr_t)tb + 0x700, 16, mro->lkey },
	};
	unsigned char back[32];

	CHECK(configure_list(mk, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, e, 2) ==
	      IBV_WC_MW_BIND_ERR, "REMOTE_WRITE over an MR without it was configured");
	fresh_pair();
	CHECK(configure_list(mk, IBV_ACCESS_REMOTE_READ, e, 2) == IBV_WC_SUCCESS,
	      "REMOTE_READ over MRs that both grant it");
	CHECK(read_at(mk->rkey, 0, 32, back) == IBV_WC_SUCCESS, "READ through a read-only key");
	CHECK(write_at(mk->rkey, 0, 1) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE through a key without REMOTE_WRITE was not refused");
	fresh_pair();
	CHECK(oxedv_destroy_mkey(mk) == 0, "oxedv_destroy_mkey");

	/* An entry longer than its MR, and an unknown key. */
	mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 1);
	e[0] = (struct ibv_sge){ (uintptr_t)tb + BUF - 4, 5, mtb->lkey };
	CHECK(configure_list(mk, IBV_ACCESS_REMOTE_READ, e, 1) == IBV_WC_MW_BIND_ERR,
	      "an entry one byte past its MR was configured");
	fresh_pair();
	e[0] = (struct ibv_sge){ (uintptr_t)tb + BUF - 4, 4, mtb->lkey };
	CHECK(configure_list(mk, IBV_ACCESS_REMOTE_READ, e, 1) == IBV_WC_SUCCESS,
	      "an entry ending at its MR's end");
	oxedv_destroy_mkey(mk);
	mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 1);
	e[0] = (struct ibv_sge){ 0, 4, mtb->lkey ^ 0x80 };
	CHECK(configure_list(mk, IBV_ACCESS_REMOTE_READ, e, 1) == IBV_WC_MW_BIND_ERR,
	      "an entry with a stale key was configured");
	fresh_pair();
	oxedv_destroy_mkey(mk);
}

/* Keys of keys, down to the depth limit and one past it. */
static void nesting(void)
{
	uint32_t rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct oxedv_mkey *k[5];
	struct ibv_sge e[2];
	int i;

	for (i = 0; i < 5; i++)
		k[i] = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 2);
	e[0] = (struct ibv_sge){ (uintptr_t)tb + 0x800, 8, mtb->lkey };
	e[1] = (struct ibv_sge){ (uintptr_t)tb + 0x900, 8, mtb->lkey };
	CHECK(configure_list(k[0], rw, e, 2) == IBV_WC_SUCCESS, "level 1");
	for (i = 1; i < 5; i++) {
		/* Each level: 8 bytes of the one below from its byte 2, then 2 of an MR. */
		e[0] = (struct ibv_sge){ 2, 8, k[i - 1]->lkey };
		e[1] = (struct ibv_sge){ (uintptr_t)tb + 0xa00 + 16 * i, 2, mtb->lkey };
		if (i < 4) {
			CHECK(configure_list(k[i], rw, e, 2) == IBV_WC_SUCCESS, "level %d", i + 1);
		} else {
			CHECK(configure_list(k[i], rw, e, 2) == IBV_WC_MW_BIND_ERR,
			      "level %d, past the depth limit, was configured", i + 1);
			fresh_pair();
		}
	}
	pattern(6);
	/* Level 2: bytes 0..5 are level 1's 2..7 (tb 0x802), 6..7 its 8..9 (tb 0x900). */
	CHECK(write_at(k[1]->rkey, 0, 10) == IBV_WC_SUCCESS, "WRITE through level 2");
	landed(0x802, 0, 6, "level 2 -> level 1 entry 0");
	landed(0x900, 6, 2, "level 2 -> level 1 entry 1");
	landed(0xa10, 8, 2, "level 2 entry 1");
	pattern(7);
	CHECK(write_at(k[3]->rkey, 0, 1) == IBV_WC_SUCCESS, "WRITE through level 4");
	/* Level 4 byte 0 = level 3 byte 2 = level 2 byte 4 = level 1 byte 6 = tb 0x806. */
	landed(0x806, 0, 1, "level 4 down to its MR");
	CHECK(write_at(k[3]->rkey, 9, 2) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE past level 4's end was not refused");
	fresh_pair();
	for (i = 4; i >= 0; i--)
		CHECK(oxedv_destroy_mkey(k[i]) == 0, "oxedv_destroy_mkey level %d", i + 1);
}

static void invalidation(void)
{
	uint32_t rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct oxedv_mkey *mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 1);
	struct oxedv_mkey *rmk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT |
				      OXEDV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE, 1);
	struct ibv_sge e = { (uintptr_t)tb + 0xc00, 32, mtb->lkey };
	struct ibv_mr *m3;
	unsigned char *b3;
	struct ibv_wc wc;
	uint32_t old;

	CHECK(configure_list(mk, rw, &e, 1) == IBV_WC_SUCCESS, "configure before LOCAL_INV");
	CHECK(POST(NULL, ibv_wr_local_inv(xa, mk->lkey)) == IBV_WC_SUCCESS, "LOCAL_INV of the key");
	CHECK(write_at(mk->rkey, 0, 4) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE through an invalidated key was not refused");
	fresh_pair();
	/*
	 * A configuration gives the key a new variant: an rkey a peer held
	 * from the key's last layout reaches nothing in the new one.
	 */
	old = mk->rkey;
	e.addr = (uintptr_t)tb + 0xc40;
	pattern(11);
	CHECK(configure_list(mk, rw, &e, 1) == IBV_WC_SUCCESS, "configure again after LOCAL_INV");
	CHECK(mk->rkey != old && mk->lkey == mk->rkey && mk->rkey >> 8 == old >> 8,
	      "configuring again kept the key %#x (now %#x)", old, mk->rkey);
	CHECK(write_at(old, 0, 4) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE with the rkey of the key's previous layout was not refused");
	CHECK(tb[0xc40] == GUARD && tb[0xc43] == GUARD,
	      "the previous layout's rkey wrote into the new layout");
	fresh_pair();
	CHECK(write_at(mk->rkey, 0, 4) == IBV_WC_SUCCESS, "WRITE after configuring again");
	landed(0xc40, 0, 4, "WRITE with the new key");

	/*
	 * An aborted configuration leaves the application one key ahead of
	 * the device: the key is still Valid under the key it had, and the
	 * application's key still invalidates and configures it.
	 */
	old = mk->rkey;
	ibv_wr_start(xa);
	oxedv_wr_mr_list(xa, mk, rw, 1, &e);
	ibv_wr_abort(xa);
	CHECK(mk->rkey != old, "an aborted configuration kept the key");
	pattern(12);
	CHECK(write_at(old, 0, 4) == IBV_WC_SUCCESS, "WRITE after an aborted configuration");
	landed(0xc40, 0, 4, "WRITE after an aborted configuration");
	CHECK(POST(NULL, ibv_wr_local_inv(xa, mk->lkey)) == IBV_WC_SUCCESS,
	      "LOCAL_INV with the key an aborted configuration gave");
	CHECK(configure_list(mk, rw, &e, 1) == IBV_WC_SUCCESS, "configure after an abort");
	CHECK(write_at(mk->rkey, 0, 4) == IBV_WC_SUCCESS, "WRITE after configuring past an abort");

	/* SEND with Invalidate: only for a key created for it. */
	CHECK(configure_list(rmk, rw, &e, 1) == IBV_WC_SUCCESS, "configure the remote one");
	{
		struct ibv_sge rs = { (uintptr_t)tb + 0xd00, 64, mtb->lkey };
		struct ibv_recv_wr r = { .wr_id = 2, .sg_list = &rs, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qb, &r, &bad))
			die("post_recv");
		CHECK(POST(NULL, ibv_wr_send_inv(xa, rmk->rkey);
			   ibv_wr_set_sge(xa, msrc->lkey, (uintptr_t)src, 8)) == IBV_WC_SUCCESS,
		      "SEND with Invalidate");
		CHECK(wait_for(2, &wc) == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) &&
		      wc.invalidated_rkey == rmk->rkey, "the receive reports the invalidation");
		CHECK(write_at(rmk->rkey, 0, 4) == IBV_WC_REM_ACCESS_ERR,
		      "a WRITE through a remotely invalidated key was not refused");
		fresh_pair();
		if (ibv_post_recv(qb, &r, &bad))
			die("post_recv");
		CHECK(POST(NULL, ibv_wr_send_inv(xa, mk->rkey);
			   ibv_wr_set_sge(xa, msrc->lkey, (uintptr_t)src, 8)) != IBV_WC_SUCCESS,
		      "SEND with Invalidate of a key not created for it succeeded");
		fresh_pair();
	}

	/* An entry's MR deregistered under the key. */
	b3 = aligned_alloc(4096, 4096);
	m3 = ibv_reg_mr(pd, b3, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!b3 || !m3)
		die("MR to deregister");
	e = (struct ibv_sge){ (uintptr_t)b3, 64, m3->lkey };
	CHECK(POST(NULL, ibv_wr_local_inv(xa, mk->lkey)) == IBV_WC_SUCCESS, "LOCAL_INV");
	CHECK(configure_list(mk, rw, &e, 1) == IBV_WC_SUCCESS, "configure over the doomed MR");
	CHECK(write_at(mk->rkey, 0, 4) == IBV_WC_SUCCESS, "WRITE before the dereg");
	CHECK(ibv_dereg_mr(m3) == 0, "dereg of an MR an indirect key names");
	CHECK(write_at(mk->rkey, 0, 4) == IBV_WC_REM_ACCESS_ERR,
	      "a WRITE through a key whose entry's MR was deregistered was not refused");
	fresh_pair();
	free(b3);
	oxedv_destroy_mkey(mk);
	oxedv_destroy_mkey(rmk);
}

static void atomics(void)
{
	uint32_t rights = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	struct oxedv_mkey *mk = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 3);
	struct ibv_sge e[3] = {
		{ (uintptr_t)tb + 0xe00, 16, mtb->lkey },
		{ (uintptr_t)tb + 0xe80, 4, mtb->lkey },
		{ (uintptr_t)tb + 0xf00, 4, mtb->lkey },
	};
	uint64_t v = 40, *old = (uint64_t *)src;

	pattern(8);
	memcpy(tb + 0xe08, &v, 8);
	CHECK(configure_list(mk, rights, e, 3) == IBV_WC_SUCCESS, "configure for atomics");
	CHECK(POST(NULL, ibv_wr_atomic_fetch_add(xa, mk->rkey, 8, 2);
		   ibv_wr_set_sge(xa, msrc->lkey, (uintptr_t)src, 8)) == IBV_WC_SUCCESS,
	      "FETCH_ADD inside one entry");
	memcpy(&v, tb + 0xe08, 8);
	CHECK(*old == 40 && v == 42, "FETCH_ADD returned %llu and left %llu",
	      (unsigned long long)*old, (unsigned long long)v);
	/* Bytes 16..23: two entries of 4. */
	CHECK(POST(NULL, ibv_wr_atomic_fetch_add(xa, mk->rkey, 16, 1);
		   ibv_wr_set_sge(xa, msrc->lkey, (uintptr_t)src, 8)) != IBV_WC_SUCCESS,
	      "an atomic across two entries succeeded");
	CHECK(tb[0xe80] == GUARD && tb[0xf00] == GUARD, "an atomic across two entries wrote");
	fresh_pair();
	oxedv_destroy_mkey(mk);
}

/* The --show mode: two keys to look at, kept until Enter. */
static int show(void)
{
	uint32_t rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct oxedv_mkey *k1 = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 3);
	struct oxedv_mkey *k2 = mkey(OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 2);
	struct ibv_sge e1[3] = {
		{ (uintptr_t)tb + 3, 7, mtb->lkey },
		{ (uintptr_t)tb + 0x100, 5, mtb->lkey },
		{ (uintptr_t)tb + 0x201, 9, mtb->lkey },
	};
	struct ibv_sge e2[2] = { { 2, 16, k1->lkey }, { (uintptr_t)tb + 0x800, 4, mtb->lkey } };

	if (configure_list(k1, rw, e1, 3) != IBV_WC_SUCCESS ||
	    configure_list(k2, rw, e2, 2) != IBV_WC_SUCCESS) {
		fprintf(stderr, "mkey_qp: configuring the keys failed\n");
		return 1;
	}
	memset(tb, '.', 0x900);
	memcpy(src, "through-two-keys", 16);
	memcpy(src + 16, "OXE!", 4);
	if (write_at(k2->rkey, 0, 20) != IBV_WC_SUCCESS) {
		fprintf(stderr, "mkey_qp: the WRITE through the keys failed\n");
		return 1;
	}
	printf("key 0x%08x: a list of 3 entries over MR 0x%08x (7 B at +3, 5 B at +0x100, 9 B at +0x201)\n"
	       "key 0x%08x: 16 bytes of key 0x%08x from its byte 2, then 4 B of the MR at +0x800\n"
	       "a 20-byte WRITE through 0x%08x landed as: %.5s at +5, %.5s at +0x100, %.6s at +0x201, %.4s at +0x800\n\n"
	       "  cat /sys/kernel/debug/oxe/%s/mr-%u /sys/kernel/debug/oxe/%s/mr-%u\n"
	       "  rdma -dd resource show mr dev %s\n"
	       "  grep . /sys/class/infiniband/%s/hw_counters/mkey_*\n\n"
	       "Enter lets them go.\n",
	       k1->lkey, mtb->lkey, k2->lkey, k1->lkey, k2->rkey, (char *)tb + 5, (char *)tb + 0x100,
	       (char *)tb + 0x201, (char *)tb + 0x800, dev_name, k1->lkey >> 8, dev_name,
	       k2->lkey >> 8, dev_name, dev_name);
	fflush(stdout);
	getchar();
	oxedv_destroy_mkey(k2);
	oxedv_destroy_mkey(k1);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	long conf0, conf1;
	int i, n, showing = argc == 4 && !strcmp(argv[1], "--show");

	if (argc != 3 && !showing) {
		fprintf(stderr, "usage: mkey_qp [--show] DEV GID_INDEX\n");
		return 2;
	}
	dev_name = argv[1 + showing];
	gid_index = atoi(argv[2 + showing]);
	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list");
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "mkey_qp: no device %s\n", dev_name);
		return 2;
	}
	ctx = ibv_open_device(dev);
	if (!ctx || ibv_query_gid(ctx, 1, gid_index, &gid))
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	src = aligned_alloc(4096, 4096);
	tb = aligned_alloc(4096, BUF);
	if (!pd || !cq || !src || !tb)
		die("pd, cq or buffers");
	msrc = ibv_reg_mr(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	mtb = ibv_reg_mr(pd, tb, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	mro = ibv_reg_mr(pd, tb, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!msrc || !mtb || !mro)
		die("ibv_reg_mr");
	fresh_pair();
	if (showing)
		return show();

	conf0 = counter("mkey_configure");
	creation();
	list_layout();
	interleaved_layout();
	rights();
	nesting();
	invalidation();
	atomics();
	conf1 = counter("mkey_configure");
	/* The configurations above that succeeded: list 1, interleaved 1,
	 * rights 2, nesting 4, invalidation 5, atomics 1. */
	CHECK(conf1 - conf0 == 14, "mkey_configure moved by %ld, not 14", conf1 - conf0);

	printf("mkey_qp %s: %d checks, %d failure(s), mkey_configure +%ld\n", dev_name, checks,
	       failures, conf1 - conf0);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(msrc);
	ibv_dereg_mr(mtb);
	ibv_dereg_mr(mro);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return failures ? 1 : 0;
}
