// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rc_xfer: one checked bulk transfer over an RC connection.
 *
 *   rc_xfer server ADDR [-p PORT] [-s SIZE] [-w SECONDS]
 *   rc_xfer client ADDR [-p PORT] [-s SIZE] [-c CHUNK] [-d DEPTH] [-t ACK_TIMEOUT]
 *                       [-r SEED] [-w SECONDS]
 *
 * The server binds ADDR, registers SIZE bytes (zeroed) for remote write and gives
 * their address and rkey to the client in the CM accept's private data. The client
 * fills SIZE bytes with a pseudo-random pattern (xorshift64* from SEED), RDMA WRITEs
 * them into the server's buffer in CHUNK-byte pieces with DEPTH outstanding, then
 * SENDs {size, seed, FNV-1a 64 of its buffer}. RC ordering places every WRITE
 * before that SEND completes at the server, which then hashes its own buffer,
 * prints both hashes, replies with its own and exits 0 only on a match (on a
 * mismatch it also locates the first wrong byte from the seed); the client exits
 * 0 only if the reply matches too.
 *
 * The connection is made with rdma_cm, retry_count 7, rnr_retry_count 7 and a
 * local ACK timeout of 4.096 us * 2^ACK_TIMEOUT, so that loss and reordering
 * are survivable. SECONDS bounds every wait (no progress for that long fails).
 * Sizes accept a K, M or G suffix.
 *
 * Built with -DWITH_OXEDV (build/rc_xfer_mkey, linked against the oxe
 * provider), the server takes -k GID_INDEX: it lays an oxe indirect key
 * over its buffer (oxedv.h: 32 entries, the buffer's 32 chunks in reverse
 * order), configured through a pair of QPs of its own connected to each
 * other through GID_INDEX before it accepts, and gives the client that
 * key's rkey and address 0. The peer, whatever its device, needs nothing
 * but the rkey; the server hashes the buffer as the key orders it.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_OXEDV
#include "oxedv.h"
#endif

#define MAGIC_INFO 0x6f786531u /* "oxe1" */
#define MAGIC_DONE 0x6f786532u
#define MAGIC_REPLY 0x6f786533u

/* Server -> client, in the accept's private data (big-endian fields). */
struct buf_info {
	uint64_t addr;
	uint64_t size;
	uint32_t rkey;
	uint32_t magic;
};

/* Client -> server when the writes are done, and the server's reply. */
struct xfer_msg {
	uint64_t size;
	uint64_t seed;
	uint64_t hash;
	uint32_t magic;
	uint32_t status; /* reply: 0 match, 1 mismatch */
};

struct opts {
	bool server;
	const char *addr;
	const char *port;
	uint64_t size;
	uint64_t chunk;
	int depth;
	int ack_timeout;
	uint64_t seed;
	int wait_s;
	/* -k: serve an indirect key configured through this GID index (-1: no). */
	int key_gid;
};

struct conn {
	struct rdma_event_channel *ec;
	struct rdma_cm_id *listen_id;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	bool armed;
	uint8_t *buf;
	struct ibv_mr *buf_mr;
	struct xfer_msg send_msg, recv_msg;
	struct ibv_mr *send_mr, *recv_mr;
#ifdef WITH_OXEDV
	struct oxedv_mkey *mkey;
#endif
};

enum { WRID_WRITE = 1, WRID_SEND, WRID_RECV };

static const char *role = "rc_xfer";

#define fail(...)                                              \
	do {                                                   \
		fprintf(stderr, "%s: ", role);                 \
		fprintf(stderr, __VA_ARGS__);                  \
		fputc('\n', stderr);                           \
		return -1;                                     \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G': case 'g': v <<= 10; /* fall through */
	case 'M': case 'm': v <<= 10; /* fall through */
	case 'K': case 'k': v <<= 10; break;
	case 0: break;
	default: return 0;
	}
	return v;
}

/* xorshift64*: deterministic, cheap, and never zero from a non-zero state. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static uint64_t pattern_state(uint64_t seed)
{
	return seed ? seed : 0x9E3779B97F4A7C15ULL;
}

/* The pattern is a stream of little-endian 64-bit words (size need not be a multiple of 8). */
static void fill_pattern(uint8_t *buf, uint64_t size, uint64_t seed)
{
	uint64_t s = pattern_state(seed), off;

	for (off = 0; off < size; off += 8) {
		uint64_t w = htole64(next_rand(&s));

		memcpy(buf + off, &w, size - off < 8 ? size - off : 8);
	}
}

/* The first offset where buf differs from the pattern, or size. */
static uint64_t first_mismatch(const uint8_t *buf, uint64_t size, uint64_t seed)
{
	uint64_t s = pattern_state(seed), off, i;

	for (off = 0; off < size; off += 8) {
		uint64_t w = htole64(next_rand(&s));
		uint64_t n = size - off < 8 ? size - off : 8;

		for (i = 0; i < n; i++)
			if (buf[off + i] != ((uint8_t *)&w)[i])
				return off + i;
	}
	return size;
}

static uint64_t fnv1a64(const uint8_t *p, uint64_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Waits up to wait_s for the next CM event, which must be of type want. */
static int get_event(struct conn *c, enum rdma_cm_event_type want, int wait_s,
		     struct rdma_cm_event **out)
{
	struct pollfd pfd = { .fd = c->ec->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int rc;

	do
		rc = poll(&pfd, 1, wait_s * 1000);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		fail("no %s event within %d s", rdma_event_str(want), wait_s);
	if (rc < 0 || rdma_get_cm_event(c->ec, &ev))
		fail("waiting for %s: %s", rdma_event_str(want), strerror(errno));
	if (ev->event != want) {
		fprintf(stderr, "%s: expected %s, got %s (status %d)\n", role,
			rdma_event_str(want), rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (out)
		*out = ev;
	else
		rdma_ack_cm_event(ev);
	return 0;
}

/*
 * Next work completion, waiting on the completion channel for at most wait_s.
 * Returns 1 with *wc filled, 0 on timeout, -1 on error. The CQ is armed and
 * polled again before sleeping, so no completion slips between the two.
 */
static int next_wc(struct conn *c, struct ibv_wc *wc, int wait_s)
{
	struct pollfd pfd = { .fd = c->ch->fd, .events = POLLIN };
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n, rc;

	for (;;) {
		n = ibv_poll_cq(c->cq, 1, wc);
		if (n)
			return n < 0 ? -1 : 1;
		if (!c->armed) {
			if (ibv_req_notify_cq(c->cq, 0))
				fail("ibv_req_notify_cq failed");
			c->armed = true;
			continue;
		}
		do
			rc = poll(&pfd, 1, wait_s * 1000);
		while (rc < 0 && errno == EINTR);
		if (rc == 0)
			return 0;
		if (rc < 0 || ibv_get_cq_event(c->ch, &ev_cq, &ev_ctx))
			fail("waiting for a completion: %s", strerror(errno));
		ibv_ack_cq_events(ev_cq, 1);
		c->armed = false;
	}
}

/* Waits for the completion of work request kind wr_id; any failed completion fails. */
static int wait_wc(struct conn *c, uint64_t wr_id, int wait_s)
{
	struct ibv_wc wc;
	int rc = next_wc(c, &wc, wait_s);

	if (rc == 0)
		fail("no completion within %d s", wait_s);
	if (rc < 0)
		return -1;
	if (wc.status != IBV_WC_SUCCESS)
		fail("work request %" PRIu64 " completed with %s (vendor error 0x%x)", wc.wr_id,
		     ibv_wc_status_str(wc.status), wc.vendor_err);
	if (wc.wr_id != wr_id)
		fail("unexpected completion of work request %" PRIu64 " (waiting for %" PRIu64 ")",
		     wc.wr_id, wr_id);
	return 0;
}

/* PD, CQ with its channel, QP on c->id, the bulk buffer and the two message buffers. */
static int setup_qp(struct conn *c, const struct opts *o, int access)
{
	struct ibv_qp_init_attr qpa = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = o->depth + 2, .max_recv_wr = 2,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_context *verbs = c->id->verbs;
	uint8_t t = o->ack_timeout;

	c->pd = ibv_alloc_pd(verbs);
	if (!c->pd)
		fail("ibv_alloc_pd: %s", strerror(errno));
	c->ch = ibv_create_comp_channel(verbs);
	if (!c->ch)
		fail("ibv_create_comp_channel: %s", strerror(errno));
	c->cq = ibv_create_cq(verbs, o->depth + 8, NULL, c->ch, 0);
	if (!c->cq)
		fail("ibv_create_cq: %s", strerror(errno));
	qpa.send_cq = qpa.recv_cq = c->cq;
	if (rdma_create_qp(c->id, c->pd, &qpa))
		fail("rdma_create_qp: %s", strerror(errno));
	/* Applied when rdma_cm moves the QP to RTS. */
	if (rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
		fail("rdma_set_option(ACK_TIMEOUT): %s", strerror(errno));

	c->buf = mmap(NULL, o->size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (c->buf == MAP_FAILED)
		fail("mmap %" PRIu64 " bytes: %s", o->size, strerror(errno));
	c->buf_mr = ibv_reg_mr(c->pd, c->buf, o->size, access);
	if (!c->buf_mr)
		fail("ibv_reg_mr %" PRIu64 " bytes: %s", o->size, strerror(errno));
	c->send_mr = ibv_reg_mr(c->pd, &c->send_msg, sizeof(c->send_msg), 0);
	c->recv_mr = ibv_reg_mr(c->pd, &c->recv_msg, sizeof(c->recv_msg), IBV_ACCESS_LOCAL_WRITE);
	if (!c->send_mr || !c->recv_mr)
		fail("ibv_reg_mr (messages): %s", strerror(errno));

	struct ibv_sge sge = { .addr = (uintptr_t)&c->recv_msg, .length = sizeof(c->recv_msg),
			       .lkey = c->recv_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WRID_RECV, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(c->id->qp, &wr, &bad))
		fail("ibv_post_recv: %s", strerror(errno));
	return 0;
}

static int post_send_msg(struct conn *c)
{
	struct ibv_sge sge = { .addr = (uintptr_t)&c->send_msg, .length = sizeof(c->send_msg),
			       .lkey = c->send_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = WRID_SEND, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad;

	if (ibv_post_send(c->id->qp, &wr, &bad))
		fail("ibv_post_send(SEND): %s", strerror(errno));
	return 0;
}

static void teardown(struct conn *c, const struct opts *o)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
#ifdef WITH_OXEDV
	if (c->mkey)
		oxedv_destroy_mkey(c->mkey);
#endif
	if (c->buf_mr)
		ibv_dereg_mr(c->buf_mr);
	if (c->buf && c->buf != MAP_FAILED)
		munmap(c->buf, o->size);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->ch)
		ibv_destroy_comp_channel(c->ch);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->listen_id)
		rdma_destroy_id(c->listen_id);
	if (c->ec)
		rdma_destroy_event_channel(c->ec);
}

static struct addrinfo *lookup(const char *addr, const char *port, bool passive)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = passive ? AI_PASSIVE : 0 }, *res;
	int rc = getaddrinfo(addr, port, &hints, &res);

	if (rc) {
		fprintf(stderr, "%s: %s:%s: %s\n", role, addr, port, gai_strerror(rc));
		return NULL;
	}
	return res;
}

#ifdef WITH_OXEDV
#define KEY_CHUNKS 32

/* Moves a QP of the loopback pair to RTS, connected to `dest`. */
static int loop_rts(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid, int gidx, uint8_t port)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = port };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		fail("loopback QP to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = port;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		fail("loopback QP to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		fail("loopback QP to RTS: %s", strerror(errno));
	return 0;
}

/*
 * The indirect key the client writes through: the buffer's KEY_CHUNKS
 * chunks in reverse order, configured on a loopback pair of QPs of the
 * connection's device and PD, which is gone once the key is configured.
 */
static int key_setup(struct conn *c, const struct opts *o)
{
	struct ibv_context *verbs = c->id->verbs;
	uint8_t port = c->id->port_num ? c->id->port_num : 1;
	uint64_t chunk = o->size / KEY_CHUNKS;
	struct oxedv_mkey_init_attr ka = { .pd = c->pd,
					   .create_flags = OXEDV_MKEY_INIT_ATTR_FLAGS_INDIRECT,
					   .max_entries = KEY_CHUNKS };
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = KEY_CHUNKS,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = c->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	struct ibv_sge e[KEY_CHUNKS];
	struct ibv_qp *qa_, *qb_;
	struct ibv_qp_ex *x;
	struct ibv_cq *cq;
	union ibv_gid gid;
	struct ibv_wc wc;
	int i, n = 0, rc = -1;

	if (o->size % KEY_CHUNKS || chunk > UINT32_MAX)
		fail("-k needs a size that is a multiple of %d", KEY_CHUNKS);
	if (!oxedv_is_supported(verbs->device))
		fail("-k: %s is not an oxe device", ibv_get_device_name(verbs->device));
	if (ibv_query_gid(verbs, port, o->key_gid, &gid))
		fail("ibv_query_gid %d: %s", o->key_gid, strerror(errno));
	c->mkey = oxedv_create_mkey(&ka);
	if (!c->mkey)
		fail("oxedv_create_mkey: %s", strerror(errno));
	cq = ibv_create_cq(verbs, 4, NULL, NULL, 0);
	if (!cq)
		fail("ibv_create_cq: %s", strerror(errno));
	qa.send_cq = qa.recv_cq = cq;
	qa_ = ibv_create_qp_ex(verbs, &qa);
	qb_ = ibv_create_qp_ex(verbs, &qa);
	if (!qa_ || !qb_) {
		fprintf(stderr, "%s: ibv_create_qp_ex: %s\n", role, strerror(errno));
		goto out;
	}
	if (loop_rts(qa_, qb_->qp_num, &gid, o->key_gid, port) ||
	    loop_rts(qb_, qa_->qp_num, &gid, o->key_gid, port))
		goto out;
	for (i = 0; i < KEY_CHUNKS; i++)
		e[i] = (struct ibv_sge){ (uintptr_t)c->buf + (KEY_CHUNKS - 1 - i) * chunk,
					 (uint32_t)chunk, c->buf_mr->lkey };
	x = ibv_qp_to_qp_ex(qa_);
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	oxedv_wr_mr_list(x, c->mkey, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			 KEY_CHUNKS, e);
	if (ibv_wr_complete(x)) {
		fprintf(stderr, "%s: posting the key's configuration: %s\n", role, strerror(errno));
		goto out;
	}
	for (i = 0; i < 2000 && (n = ibv_poll_cq(cq, 1, &wc)) == 0; i++)
		usleep(1000);
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "%s: configuring the key: %s\n", role,
			n == 1 ? ibv_wc_status_str(wc.status) : "no completion");
		goto out;
	}
	printf("server: indirect key 0x%x over the buffer, its %d chunks reversed\n",
	       c->mkey->rkey, KEY_CHUNKS);
	rc = 0;
out:
	if (qa_)
		ibv_destroy_qp(qa_);
	if (qb_)
		ibv_destroy_qp(qb_);
	ibv_destroy_cq(cq);
	return rc;
}

/* The first `n` bytes of the buffer as the key orders them (a copy). */
static uint8_t *key_view(struct conn *c, const struct opts *o, uint64_t n)
{
	uint64_t chunk = o->size / KEY_CHUNKS, at = 0;
	uint8_t *v = malloc(n ? n : 1);
	int i;

	for (i = 0; v && i < KEY_CHUNKS && at < n; i++) {
		uint64_t k = n - at < chunk ? n - at : chunk;

		memcpy(v + at, c->buf + (KEY_CHUNKS - 1 - i) * chunk, k);
		at += k;
	}
	return v;
}
#endif

static int run_server(struct conn *c, struct opts *o)
{
	struct rdma_cm_event *ev;
	struct addrinfo *ai = lookup(o->addr, o->port, true);
	int rc;

	if (!ai)
		return -1;
	rc = rdma_bind_addr(c->listen_id, ai->ai_addr);
	freeaddrinfo(ai);
	if (rc)
		fail("rdma_bind_addr %s: %s", o->addr, strerror(errno));
	if (rdma_listen(c->listen_id, 1))
		fail("rdma_listen: %s", strerror(errno));
	printf("server: listening on %s port %s, %" PRIu64 " bytes\n", o->addr, o->port, o->size);
	fflush(stdout);

	if (get_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, o->wait_s, &ev))
		return -1;
	c->id = ev->id;
	rdma_ack_cm_event(ev);
	printf("server: connection request on %s\n", ibv_get_device_name(c->id->verbs->device));
	if (setup_qp(c, o, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
		return -1;

	struct buf_info info = {
		.addr = htobe64((uintptr_t)c->buf),
		.size = htobe64(o->size),
		.rkey = htobe32(c->buf_mr->rkey),
		.magic = htobe32(MAGIC_INFO),
	};
	uint8_t *view = c->buf;
#ifdef WITH_OXEDV
	if (o->key_gid >= 0) {
		if (key_setup(c, o))
			return -1;
		/* Indirect keys are addressed from 0. */
		info.addr = 0;
		info.rkey = htobe32(c->mkey->rkey);
	}
#endif
	struct rdma_conn_param cp = {
		.private_data = &info,
		.private_data_len = sizeof(info),
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_accept(c->id, &cp))
		fail("rdma_accept: %s", strerror(errno));
	if (get_event(c, RDMA_CM_EVENT_ESTABLISHED, o->wait_s, NULL))
		return -1;
	printf("server: connected, waiting for the client's writes\n");
	fflush(stdout);

	if (wait_wc(c, WRID_RECV, o->wait_s))
		return -1;
	struct xfer_msg m = {
		.size = be64toh(c->recv_msg.size),
		.seed = be64toh(c->recv_msg.seed),
		.hash = be64toh(c->recv_msg.hash),
	};
	if (be32toh(c->recv_msg.magic) != MAGIC_DONE)
		fail("bad final message (magic 0x%08x)", be32toh(c->recv_msg.magic));
	if (m.size > o->size)
		fail("client wrote %" PRIu64 " bytes into a %" PRIu64 "-byte buffer", m.size, o->size);
	double t0 = now_s();
#ifdef WITH_OXEDV
	if (o->key_gid >= 0) {
		view = key_view(c, o, m.size);
		if (!view)
			fail("malloc %" PRIu64 " bytes", m.size);
	}
#endif
	uint64_t h = fnv1a64(view, m.size);
	bool match = h == m.hash;

	printf("server: %" PRIu64 " bytes, client fnv1a64 0x%016" PRIx64 ", server fnv1a64 0x%016" PRIx64
	       " (hashed in %.2f s): %s\n", m.size, m.hash, h, now_s() - t0, match ? "MATCH" : "MISMATCH");
	if (!match) {
		uint64_t off = first_mismatch(view, m.size, m.seed);

		if (off < m.size)
			printf("server: first byte differing from the pattern at offset %" PRIu64
			       " (chunk %" PRIu64 " of 1 MiB)\n", off, off >> 20);
		else
			printf("server: buffer equals the pattern; the client's hash is wrong\n");
	}
	if (view != c->buf)
		free(view);
	c->send_msg = (struct xfer_msg){
		.size = htobe64(m.size),
		.seed = htobe64(m.seed),
		.hash = htobe64(h),
		.magic = htobe32(MAGIC_REPLY),
		.status = htobe32(!match),
	};
	if (post_send_msg(c) || wait_wc(c, WRID_SEND, o->wait_s))
		return -1;
	/*
	 * The reply is acknowledged: the client has it, and only now may its
	 * QP go. Were the client to disconnect as soon as the reply arrived,
	 * a lost ACK for it (the loss suite drops 1%) would leave the resends
	 * to a QP in the error state, and this SEND would end in a retry
	 * count exceeded although the client had it.
	 */
	rdma_disconnect(c->id);
	if (get_event(c, RDMA_CM_EVENT_DISCONNECTED, o->wait_s, NULL))
		fprintf(stderr, "server: no disconnect event (not fatal)\n");
	fflush(stdout);
	return match ? 0 : -1;
}

static int run_client(struct conn *c, struct opts *o)
{
	struct rdma_cm_event *ev;
	struct addrinfo *ai = lookup(o->addr, o->port, false);
	int rc;

	if (!ai)
		return -1;
	if (rdma_create_id(c->ec, &c->id, NULL, RDMA_PS_TCP))
		fail("rdma_create_id: %s", strerror(errno));
	rc = rdma_resolve_addr(c->id, NULL, ai->ai_addr, 10000);
	freeaddrinfo(ai);
	if (rc)
		fail("rdma_resolve_addr %s: %s", o->addr, strerror(errno));
	if (get_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, o->wait_s, NULL))
		return -1;
	if (rdma_resolve_route(c->id, 10000))
		fail("rdma_resolve_route: %s", strerror(errno));
	if (get_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, o->wait_s, NULL))
		return -1;
	if (setup_qp(c, o, IBV_ACCESS_LOCAL_WRITE))
		return -1;

	double t0 = now_s();

	fill_pattern(c->buf, o->size, o->seed);
	uint64_t h = fnv1a64(c->buf, o->size);

	printf("client: %s, %" PRIu64 " bytes of pattern (seed %" PRIu64 "), fnv1a64 0x%016" PRIx64
	       " (%.2f s)\n", ibv_get_device_name(c->id->verbs->device), o->size, o->seed, h,
	       now_s() - t0);
	fflush(stdout);

	struct rdma_conn_param cp = {
		.responder_resources = 1,
		.initiator_depth = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_connect(c->id, &cp))
		fail("rdma_connect: %s", strerror(errno));
	if (get_event(c, RDMA_CM_EVENT_ESTABLISHED, o->wait_s, &ev))
		return -1;
	struct buf_info info = { 0 };

	if (ev->param.conn.private_data && ev->param.conn.private_data_len >= sizeof(info))
		memcpy(&info, ev->param.conn.private_data, sizeof(info));
	rdma_ack_cm_event(ev);
	if (be32toh(info.magic) != MAGIC_INFO)
		fail("no buffer description in the server's accept");
	uint64_t raddr = be64toh(info.addr), rsize = be64toh(info.size);
	uint32_t rkey = be32toh(info.rkey);

	if (rsize < o->size)
		fail("server buffer is %" PRIu64 " bytes, need %" PRIu64, rsize, o->size);
	printf("client: connected; writing into 0x%" PRIx64 " rkey 0x%x in %" PRIu64
	       "-byte chunks, %d outstanding, ACK timeout %d\n", raddr, rkey, o->chunk, o->depth,
	       o->ack_timeout);
	fflush(stdout);

	uint64_t off = 0, done = 0;
	int outstanding = 0;

	t0 = now_s();
	while (done < o->size) {
		while (outstanding < o->depth && off < o->size) {
			uint64_t len = o->size - off < o->chunk ? o->size - off : o->chunk;
			struct ibv_sge sge = { .addr = (uintptr_t)c->buf + off, .length = len,
					       .lkey = c->buf_mr->lkey };
			struct ibv_send_wr wr = { .wr_id = WRID_WRITE, .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_RDMA_WRITE }, *bad;

			wr.wr.rdma.remote_addr = raddr + off;
			wr.wr.rdma.rkey = rkey;
			if (ibv_post_send(c->id->qp, &wr, &bad))
				fail("ibv_post_send(WRITE at %" PRIu64 "): %s", off, strerror(errno));
			off += len;
			outstanding++;
		}
		if (wait_wc(c, WRID_WRITE, o->wait_s)) {
			fprintf(stderr, "client: %" PRIu64 " of %" PRIu64 " bytes acknowledged\n", done, o->size);
			return -1;
		}
		outstanding--;
		/* Completions come in order on one send queue. */
		done += o->size - done < o->chunk ? o->size - done : o->chunk;
		if (done % (16 << 20) < o->chunk && done < o->size) {
			printf("client: %" PRIu64 " MiB acknowledged at %.1f s\n", done >> 20, now_s() - t0);
			fflush(stdout);
		}
	}
	double dt = now_s() - t0;

	printf("client: wrote %" PRIu64 " bytes in %.2f s (%.1f MB/s)\n", o->size, dt,
	       o->size / dt / 1e6);
	c->send_msg = (struct xfer_msg){
		.size = htobe64(o->size),
		.seed = htobe64(o->seed),
		.hash = htobe64(h),
		.magic = htobe32(MAGIC_DONE),
	};
	if (post_send_msg(c) || wait_wc(c, WRID_SEND, o->wait_s) || wait_wc(c, WRID_RECV, o->wait_s))
		return -1;
	if (be32toh(c->recv_msg.magic) != MAGIC_REPLY)
		fail("bad reply (magic 0x%08x)", be32toh(c->recv_msg.magic));
	uint64_t sh = be64toh(c->recv_msg.hash);
	bool match = sh == h && !be32toh(c->recv_msg.status);

	printf("client: fnv1a64 0x%016" PRIx64 ", server fnv1a64 0x%016" PRIx64 ": %s\n", h, sh,
	       match ? "MATCH" : "MISMATCH");
	/* The server disconnects once its reply is acknowledged (run_server). */
	if (get_event(c, RDMA_CM_EVENT_DISCONNECTED, o->wait_s, NULL)) {
		fprintf(stderr, "client: no disconnect from the server (not fatal)\n");
		rdma_disconnect(c->id);
	}
	fflush(stdout);
	return match ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rc_xfer server ADDR [-p PORT] [-s SIZE] [-w SECONDS]%s\n"
		"       rc_xfer client ADDR [-p PORT] [-s SIZE] [-c CHUNK] [-d DEPTH]\n"
		"                           [-t ACK_TIMEOUT] [-r SEED] [-w SECONDS]\n",
#ifdef WITH_OXEDV
		" [-k GID_INDEX]"
#else
		""
#endif
	);
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = {
		.port = "7471",
		.size = 64ULL << 20,
		.chunk = 1 << 20,
		.depth = 8,
		.ack_timeout = 16,
		.seed = 1,
		.wait_s = 120,
		.key_gid = -1,
	};
	struct conn c = { 0 };
	int opt, rc;

	if (argc < 3)
		usage();
	if (!strcmp(argv[1], "server"))
		o.server = true;
	else if (strcmp(argv[1], "client"))
		usage();
	role = argv[1];
	o.addr = argv[2];
	optind = 3;
	while ((opt = getopt(argc, argv, "p:s:c:d:t:r:w:k:")) != -1) {
		switch (opt) {
		case 'p': o.port = optarg; break;
		case 's': o.size = parse_size(optarg); break;
		case 'c': o.chunk = parse_size(optarg); break;
		case 'd': o.depth = atoi(optarg); break;
		case 't': o.ack_timeout = atoi(optarg); break;
		case 'r': o.seed = strtoull(optarg, NULL, 0); break;
		case 'w': o.wait_s = atoi(optarg); break;
#ifdef WITH_OXEDV
		case 'k': o.key_gid = atoi(optarg); break;
#endif
		default: usage();
		}
	}
	if (!o.size || !o.chunk || o.chunk > (1U << 31) || o.depth < 1 || o.depth > 1024 ||
	    o.ack_timeout < 0 || o.ack_timeout > 31 || o.wait_s < 1)
		usage();

	c.ec = rdma_create_event_channel();
	if (!c.ec) {
		perror("rdma_create_event_channel");
		return 1;
	}
	if (o.server) {
		if (rdma_create_id(c.ec, &c.listen_id, NULL, RDMA_PS_TCP)) {
			perror("rdma_create_id");
			rc = -1;
		} else {
			rc = run_server(&c, &o);
		}
	} else {
		rc = run_client(&c, &o);
	}
	teardown(&c, &o);
	printf("%s: %s\n", role, rc ? "FAILED" : "ok");
	return rc ? 1 : 0;
}
