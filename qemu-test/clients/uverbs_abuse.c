// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile local process against an RDMA device, through the raw uverbs
 * write() interface (no libibverbs: it would never hand the kernel a bad
 * reply buffer, which is the point here).
 *
 *   uverbs_abuse DEV reg-unwritable N     N registrations, each with its
 *       driver reply in a read-only page, from N forked children that exit;
 *       every one must fail with EFAULT and leave nothing pinned.
 *   uverbs_abuse DEV rereg-unwritable     a rereg to a larger range with
 *       its driver reply in a read-only page must fail with EFAULT and leave
 *       the MR as it was: pinned as before, same length.
 *   uverbs_abuse DEV flush-race SECONDS   one thread posts receives to a QP
 *       in the error state, another posts sends to ring its doorbell, and
 *       the kernel flushes meanwhile (libibverbs; the suite watches dmesg
 *       for a soft lockup or an RCU stall).
 *
 * The device's pages_pinned and mr_active gauges (hw_counters) are read
 * before and after; any difference fails. Exit status 0 only if every
 * check held.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/ib_user_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *dev;
static long page;

static long gauge(const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/hw_counters/%s", dev, name);
	f = fopen(path, "r");
	if (!f) {
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
		f = fopen(path, "r");
	}
	if (!f || fscanf(f, "%ld", &v) != 1) {
		fprintf(stderr, "cannot read counter %s of %s\n", name, dev);
		exit(2);
	}
	fclose(f);
	return v;
}

/* Opens the uverbs character device of `dev`. */
static int open_uverbs(void)
{
	char path[300], name[64];
	struct dirent *e;
	DIR *d = opendir("/sys/class/infiniband_verbs");
	int fd = -1;

	if (!d) {
		perror("/sys/class/infiniband_verbs");
		exit(2);
	}
	while ((e = readdir(d))) {
		FILE *f;

		if (strncmp(e->d_name, "uverbs", 6))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%63s", name) == 1 && !strcmp(name, dev)) {
			snprintf(path, sizeof(path), "/dev/infiniband/%s", e->d_name);
			fd = open(path, O_RDWR | O_CLOEXEC);
		}
		fclose(f);
		if (fd >= 0)
			break;
	}
	closedir(d);
	if (fd < 0) {
		fprintf(stderr, "no uverbs device for %s\n", dev);
		exit(2);
	}
	return fd;
}

/* One legacy write() command: header, then `cmd` (its response pointer
 * already set), with `out` bytes of reply room. Returns 0 or an errno. */
static int command(int fd, uint32_t op, void *cmd, size_t len, size_t out)
{
	char buf[256];
	struct ib_uverbs_cmd_hdr hdr = {
		.command = op,
		.in_words = (sizeof(hdr) + len) / 4,
		.out_words = out / 4,
	};

	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), cmd, len);
	if (write(fd, buf, sizeof(hdr) + len) != (ssize_t)(sizeof(hdr) + len))
		return errno;
	return 0;
}

/* Reply room with the driver's part in a read-only page: `core` bytes of
 * ib_core's reply end exactly where the unwritable page begins. */
static void *reply_before_readonly(size_t core)
{
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p + page, page, PROT_READ)) {
		perror("mmap");
		exit(2);
	}
	return p + page - core;
}

/* A context and a PD on a fresh uverbs file; returns the PD handle. */
static uint32_t context_and_pd(int fd)
{
	union {
		struct ib_uverbs_get_context_resp ctx;
		struct ib_uverbs_alloc_pd_resp pd;
		uint64_t room[32];
	} reply;
	struct ib_uverbs_get_context gc = { .response = (uintptr_t)&reply };
	struct ib_uverbs_alloc_pd ap = { .response = (uintptr_t)&reply };
	int err;

	err = command(fd, IB_USER_VERBS_CMD_GET_CONTEXT, &gc, sizeof(gc), sizeof(reply));
	if (err) {
		fprintf(stderr, "GET_CONTEXT: %s\n", strerror(err));
		exit(2);
	}
	/* The async event fd ib_core opened for us. */
	close(reply.ctx.async_fd);
	err = command(fd, IB_USER_VERBS_CMD_ALLOC_PD, &ap, sizeof(ap), sizeof(reply));
	if (err) {
		fprintf(stderr, "ALLOC_PD: %s\n", strerror(err));
		exit(2);
	}
	return reply.pd.pd_handle;
}

static void *touched(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	memset(p, 1, len);
	return p;
}

#define MR_PAGES 64
/* The driver part of the reply room (oxe's is 8 bytes; any room will do). */
#define DRIVER_ROOM 16

static int reg_unwritable(int n)
{
	long pinned = gauge("pages_pinned"), active = gauge("mr_active");
	int i, bad = 0;

	for (i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			int fd = open_uverbs();
			struct ib_uverbs_reg_mr rm = {
				.response = (uintptr_t)reply_before_readonly(sizeof(struct ib_uverbs_reg_mr_resp)),
				.length = MR_PAGES * page,
				.pd_handle = context_and_pd(fd),
				.access_flags = IBV_ACCESS_LOCAL_WRITE,
			};
			int err;

			rm.start = rm.hca_va = (uintptr_t)touched(rm.length);
			err = command(fd, IB_USER_VERBS_CMD_REG_MR, &rm, sizeof(rm),
				      sizeof(struct ib_uverbs_reg_mr_resp) + DRIVER_ROOM);
			if (err != EFAULT) {
				fprintf(stderr, "REG_MR with an unwritable reply: %s, not EFAULT\n",
					err ? strerror(err) : "success");
				_exit(1);
			}
			_exit(0);
		}
		int st;

		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	printf("reg-unwritable x%d: pages_pinned %ld -> %ld, mr_active %ld -> %ld\n", n, pinned,
	       gauge("pages_pinned"), active, gauge("mr_active"));
	return bad || gauge("pages_pinned") != pinned || gauge("mr_active") != active;
}

static int rereg_unwritable(void)
{
	long pinned = gauge("pages_pinned");
	int fd = open_uverbs(), err, bad = 0;
	struct ib_uverbs_reg_mr_resp reply[4];
	struct ib_uverbs_reg_mr rm = {
		.response = (uintptr_t)reply,
		.length = MR_PAGES * page,
		.pd_handle = context_and_pd(fd),
		.access_flags = IBV_ACCESS_LOCAL_WRITE,
	};

	rm.start = rm.hca_va = (uintptr_t)touched(rm.length);
	err = command(fd, IB_USER_VERBS_CMD_REG_MR, &rm, sizeof(rm), sizeof(reply));
	if (err) {
		fprintf(stderr, "REG_MR: %s\n", strerror(err));
		return 1;
	}
	long after_reg = gauge("pages_pinned");
	struct ib_uverbs_rereg_mr rr = {
		.response = (uintptr_t)reply_before_readonly(sizeof(struct ib_uverbs_rereg_mr_resp)),
		.mr_handle = reply[0].mr_handle,
		.flags = IBV_REREG_MR_CHANGE_TRANSLATION,
		.length = 4 * MR_PAGES * page,
	};

	rr.start = rr.hca_va = (uintptr_t)touched(rr.length);
	err = command(fd, IB_USER_VERBS_CMD_REREG_MR, &rr, sizeof(rr),
		      sizeof(struct ib_uverbs_rereg_mr_resp) + DRIVER_ROOM);
	if (err != EFAULT) {
		fprintf(stderr, "REREG_MR with an unwritable reply: %s, not EFAULT\n",
			err ? strerror(err) : "success");
		bad = 1;
	}
	printf("rereg-unwritable: pages_pinned %ld, %ld after reg (+%d), %ld after the failed rereg\n",
	       pinned, after_reg, MR_PAGES, gauge("pages_pinned"));
	if (after_reg - pinned != MR_PAGES || gauge("pages_pinned") != after_reg) {
		fprintf(stderr, "a failed rereg changed what the MR pins\n");
		bad = 1;
	}
	close(fd);
	return bad;
}

static struct ibv_qp *flush_qp;
static volatile int flush_stop;
static long flush_posts[2];

static struct ibv_sge flush_sge;

/* Keeps the receive queue's producer index moving. */
static void *recv_poster(void *arg)
{
	long *count = arg;
	struct ibv_recv_wr wr = { .sg_list = &flush_sge, .num_sge = 1 }, *badwr;

	while (!flush_stop) {
		if (!ibv_post_recv(flush_qp, &wr, &badwr))
			++*count;
	}
	return NULL;
}

/* Rings the doorbell: each send posted to a QP in error has the kernel
 * flush both of its queues. */
static void *send_poster(void *arg)
{
	long *count = arg;
	struct ibv_send_wr wr = { .sg_list = &flush_sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *badwr;

	while (!flush_stop) {
		if (!ibv_post_send(flush_qp, &wr, &badwr))
			++*count;
	}
	return NULL;
}

static int flush_race(int seconds)
{
	struct ibv_device **list = ibv_get_device_list(NULL), **d;
	struct ibv_context *ctx = NULL;
	pthread_t t[2];
	int i;

	for (d = list; d && *d; d++)
		if (!strcmp(ibv_get_device_name(*d), dev))
			ctx = ibv_open_device(*d);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", dev);
		return 1;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	/* A small CQ: the flush overruns it at once, as an attacker would. */
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 64, .max_recv_wr = 1024, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	static char buf[64];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;

	flush_sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr ? mr->lkey : 0 };
	flush_qp = mr && cq ? ibv_create_qp(pd, &init) : NULL;
	struct ibv_qp_attr init_attr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!flush_qp) {
		fprintf(stderr, "cannot create a QP: %s\n", strerror(errno));
		return 1;
	}
	if (ibv_modify_qp(flush_qp, &init_attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
	    ibv_modify_qp(flush_qp, &attr, IBV_QP_STATE)) {
		fprintf(stderr, "cannot move the QP to the error state: %s\n", strerror(errno));
		return 1;
	}
	pthread_create(&t[0], NULL, recv_poster, &flush_posts[0]);
	pthread_create(&t[1], NULL, send_poster, &flush_posts[1]);
	sleep(seconds);
	flush_stop = 1;
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("flush-race: %ld receives and %ld sends posted to a QP in error over %d s\n",
	       flush_posts[0], flush_posts[1], seconds);
	/* The flushes overran the CQ, which nobody polls, from the first
	 * ring on: that is one CQ error, not one event (each queued for us
	 * with GFP_ATOMIC) per completion lost. */
	int cq_errors = 0, bad = 0;
	struct ibv_async_event ev;

	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	while (!ibv_get_async_event(ctx, &ev)) {
		cq_errors += ev.event_type == IBV_EVENT_CQ_ERR;
		ibv_ack_async_event(&ev);
	}
	printf("flush-race: %d CQ error events\n", cq_errors);
	/* Vacuous unless the kernel flushed many rings' worth meanwhile. */
	if (flush_posts[0] < 4 * 1024) {
		fprintf(stderr, "the kernel flushed fewer than four receive rings\n");
		bad = 1;
	}
	if (cq_errors != 1) {
		fprintf(stderr, "one overrun of a CQ nobody polls raised %d events, not 1\n", cq_errors);
		bad = 1;
	}
	ibv_destroy_qp(flush_qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DEV reg-unwritable N | rereg-unwritable | flush-race SECONDS\n",
			argv[0]);
		return 2;
	}
	dev = argv[1];
	page = sysconf(_SC_PAGESIZE);
	if (!strcmp(argv[2], "reg-unwritable") && argc == 4)
		return reg_unwritable(atoi(argv[3]));
	if (!strcmp(argv[2], "rereg-unwritable"))
		return rereg_unwritable();
	if (!strcmp(argv[2], "flush-race") && argc == 4)
		return flush_race(atoi(argv[3]));
	fprintf(stderr, "unknown command %s\n", argv[2]);
	return 2;
}
