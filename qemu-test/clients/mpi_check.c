// SPDX-License-Identifier: GPL-2.0
/*
 * mpi_check: an MPI program that checks every byte it moves, for the
 * middleware suite (qemu-test/guest/suites/middleware.sh). Two ranks, one per
 * RDMA device; each check prints "ok NAME" or "FAIL NAME: why", and the
 * program exits non-zero if any check failed.
 *
 *  - pingpong: every power of two from 1 byte to 4 MiB (or to the first
 *    argument, a power of two), and one byte either side of it. Rank 0 sends a pattern seeded by the message's number, rank 1
 *    checks it and answers with a pattern of another seed, which rank 0 checks. Each
 *    receive lands in a buffer with 64 guard bytes after the message, which
 *    must be untouched, and MPI_Get_count must give the size.
 *  - collectives: MPI_Bcast of 1 MiB, MPI_Allreduce (sum) of 128 Ki int64s,
 *    MPI_Alltoall, MPI_Barrier.
 *  - one-sided, in a 1 MiB window: MPI_Put from rank 0 into rank 1 and MPI_Get
 *    back from it, each at unaligned offsets and checked by bytes;
 *    MPI_Fetch_and_op (sum) by both ranks on one counter, whose fetched values
 *    must be every value from 0 once; MPI_Compare_and_swap, each swap finding
 *    what it compares with, and one with a stale compare between each two
 *    that must leave the value alone.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0xa5
#define MAX_SIZE (4u << 20)
#define WIN_SIZE (1u << 20)
#define ROUNDS 3
#define FETCHES 200

static int rank, failures;
/* The ping-pong's largest power of two: MAX_SIZE, or the first argument. */
static size_t max_size = MAX_SIZE;

static void verdict(const char *name, int ok, const char *why)
{
	int all;

	/* A check passes only where it passed on both ranks. */
	MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	if (!ok)
		fprintf(stderr, "rank %d: %s: %s\n", rank, name, why);
	if (rank == 0)
		printf("%s %s\n", all ? "ok" : "FAIL", name);
	fflush(stdout);
	failures += !all;
}

/* A byte stream no two (seed, offset) pairs share in practice. */
static uint8_t pattern(uint64_t seed, uint64_t off)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + off;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (uint8_t)x;
}

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(seed, i);
}

/* Returns the first offset that differs from the pattern, or len. */
static size_t first_bad(const uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(seed, i))
			return i;
	return len;
}

static int guard_intact(const uint8_t *buf)
{
	for (int i = 0; i < GUARD; i++)
		if (buf[i] != GUARD_BYTE)
			return 0;
	return 1;
}

/* Receives LEN bytes from PEER into BUF and checks them against SEED. */
static int recv_checked(uint8_t *buf, size_t len, int peer, uint64_t seed, char *why, size_t whylen)
{
	MPI_Status st;
	int count;
	size_t bad;

	memset(buf, GUARD_BYTE, len + GUARD);
	MPI_Recv(buf, (int)(len + GUARD), MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
	MPI_Get_count(&st, MPI_BYTE, &count);
	if ((size_t)count != len) {
		snprintf(why, whylen, "received %d bytes, sent %zu", count, len);
		return 0;
	}
	bad = first_bad(buf, len, seed);
	if (bad != len) {
		snprintf(why, whylen, "%zu bytes: byte %zu is 0x%02x, sent 0x%02x", len, bad, buf[bad],
			 pattern(seed, bad));
		return 0;
	}
	if (!guard_intact(buf + len)) {
		snprintf(why, whylen, "%zu bytes: the guard after the message was written", len);
		return 0;
	}
	return 1;
}

static void check_pingpong(void)
{
	uint8_t *sbuf = malloc(max_size + 1), *rbuf = malloc(max_size + 1 + GUARD);
	char why[160] = "", this[160];
	uint64_t msg = 0;
	int ok = 1;

	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 2);
	/* Every size runs on both ranks whatever failed, so neither waits alone. */
	for (size_t p = 1; p <= max_size; p <<= 1) {
		size_t sizes[3] = { p - 1, p, p + 1 };

		for (int s = 0; s < 3; s++) {
			size_t len = sizes[s];

			for (int r = 0; r < ROUNDS; r++) {
				/* Every message its own seed: one replayed or
				 * delivered twice cannot pass for the next. */
				uint64_t ping = ++msg << 1, pong = ping | 1;
				int good;

				if (rank == 0) {
					fill(sbuf, len, ping);
					MPI_Send(sbuf, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
					good = recv_checked(rbuf, len, 1, pong, this, sizeof(this));
				} else {
					good = recv_checked(rbuf, len, 0, ping, this, sizeof(this));
					fill(sbuf, len, pong);
					MPI_Send(sbuf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
				}
				if (!good && ok)
					memcpy(why, this, sizeof(why));
				ok &= good;
			}
		}
	}
	if (max_size >= 1 << 20)
		snprintf(this, sizeof(this), "pingpong 0 B to %zu MiB + 1", max_size >> 20);
	else
		snprintf(this, sizeof(this), "pingpong 0 B to %zu KiB + 1", max_size >> 10);
	verdict(this, ok, why);
	free(sbuf);
	free(rbuf);
}

static void check_collectives(void)
{
	enum { BCAST = 1 << 20, N = 128 << 10 };
	uint8_t *b = malloc(BCAST);
	int64_t *v = malloc(N * sizeof(*v)), *sum = malloc(N * sizeof(*sum));
	int64_t a2a_out[2], a2a_in[2];
	char why[160] = "";
	size_t bad;
	int ok = 1;

	if (!b || !v || !sum)
		MPI_Abort(MPI_COMM_WORLD, 2);

	if (rank == 1)
		fill(b, BCAST, 77);
	else
		memset(b, 0, BCAST);
	MPI_Bcast(b, BCAST, MPI_BYTE, 1, MPI_COMM_WORLD);
	bad = first_bad(b, BCAST, 77);
	if (bad != BCAST) {
		ok = 0;
		snprintf(why, sizeof(why), "byte %zu of the broadcast differs", bad);
	}
	verdict("bcast 1 MiB", ok, why);

	ok = 1;
	for (int64_t i = 0; i < N; i++)
		v[i] = (rank + 1) * (i * 1000003 + 7);
	MPI_Allreduce(v, sum, N, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	for (int64_t i = 0; ok && i < N; i++)
		if (sum[i] != 3 * (i * 1000003 + 7)) {
			ok = 0;
			snprintf(why, sizeof(why), "element %ld is %ld, expected %ld", (long)i, (long)sum[i],
				 (long)(3 * (i * 1000003 + 7)));
		}
	verdict("allreduce 128 Ki int64", ok, why);

	ok = 1;
	for (int i = 0; i < 2; i++)
		a2a_out[i] = 100 * rank + i;
	MPI_Alltoall(a2a_out, 1, MPI_INT64_T, a2a_in, 1, MPI_INT64_T, MPI_COMM_WORLD);
	for (int i = 0; i < 2; i++)
		if (a2a_in[i] != 100 * i + rank) {
			ok = 0;
			snprintf(why, sizeof(why), "from rank %d came %ld", i, (long)a2a_in[i]);
		}
	verdict("alltoall", ok, why);
	MPI_Barrier(MPI_COMM_WORLD);
	free(b);
	free(v);
	free(sum);
}

/* The window's own counter, read under a lock that orders it after every
 * other rank's atomics. */
static int64_t read_counter(int64_t *counter, MPI_Win win)
{
	int64_t v;

	MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
	v = *counter;
	MPI_Win_unlock(rank, win);
	return v;
}

static void check_one_sided(void)
{
	uint8_t *base, *local = malloc(WIN_SIZE);
	int64_t *counter;
	MPI_Win win, cwin;
	char why[160] = "";
	size_t bad;
	int ok = 1;
	/* Offsets and lengths that start and end off page and word boundaries. */
	static const size_t spans[][2] = { { 0, 1 }, { 3, 4093 }, { 4097, 9 }, { 65533, 200003 },
					   { 300001, 700000 } };

	if (!local)
		MPI_Abort(MPI_COMM_WORLD, 2);
	/* Local stores and loads of the window happen between fences, which
	 * order them against the other rank's puts and gets. */
	MPI_Win_allocate(WIN_SIZE, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	MPI_Win_fence(0, win);
	memset(base, GUARD_BYTE, WIN_SIZE);
	MPI_Win_fence(0, win);
	if (rank == 0)
		for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
			fill(local + spans[i][0], spans[i][1], 1000 + i);
			MPI_Put(local + spans[i][0], (int)spans[i][1], MPI_BYTE, 1, (MPI_Aint)spans[i][0],
				(int)spans[i][1], MPI_BYTE, win);
		}
	MPI_Win_fence(0, win);
	if (rank == 1) {
		size_t at = 0;

		for (size_t i = 0; ok && i < sizeof(spans) / sizeof(spans[0]); i++) {
			for (; ok && at < spans[i][0]; at++)
				if (base[at] != GUARD_BYTE) {
					ok = 0;
					snprintf(why, sizeof(why), "byte %zu, outside every put, was written", at);
				}
			bad = first_bad(base + spans[i][0], spans[i][1], 1000 + i);
			if (ok && bad != spans[i][1]) {
				ok = 0;
				snprintf(why, sizeof(why), "put %zu: byte %zu differs", i, bad);
			}
			at = spans[i][0] + spans[i][1];
		}
		for (; ok && at < WIN_SIZE; at++)
			if (base[at] != GUARD_BYTE) {
				ok = 0;
				snprintf(why, sizeof(why), "byte %zu, after every put, was written", at);
			}
	}
	verdict("put into the window", ok, why);

	/* Get: rank 1 fills its window, rank 0 reads spans of it. */
	ok = 1;
	if (rank == 1)
		fill(base, WIN_SIZE, 4242);
	MPI_Win_fence(0, win);
	if (rank == 0) {
		memset(local, 0, WIN_SIZE);
		for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++)
			MPI_Get(local + spans[i][0], (int)spans[i][1], MPI_BYTE, 1, (MPI_Aint)spans[i][0],
				(int)spans[i][1], MPI_BYTE, win);
	}
	MPI_Win_fence(0, win);
	if (rank == 0) {
		size_t at = 0;

		/* Each span's bytes as rank 1 has them; every other byte still 0. */
		for (size_t i = 0; i <= sizeof(spans) / sizeof(spans[0]); i++) {
			size_t from = i < sizeof(spans) / sizeof(spans[0]) ? spans[i][0] : WIN_SIZE;

			for (; ok && at < from; at++)
				if (local[at]) {
					ok = 0;
					snprintf(why, sizeof(why), "byte %zu, outside every get, was written", at);
				}
			if (from == WIN_SIZE)
				break;
			for (; ok && at < from + spans[i][1]; at++)
				if (local[at] != pattern(4242, at)) {
					ok = 0;
					snprintf(why, sizeof(why), "get %zu: byte %zu differs", i, at);
				}
		}
	}
	verdict("get from the window", ok, why);
	MPI_Win_free(&win);

	/*
	 * Atomics on a counter in rank 1: both ranks add 1 FETCHES times. Every
	 * fetched value is unique and below 2 * FETCHES, so the two ranks' sets
	 * together are exactly 0 .. 2 * FETCHES - 1.
	 */
	ok = 1;
	MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &counter, &cwin);
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, cwin);
	*counter = 0;
	MPI_Win_unlock(rank, cwin);
	MPI_Barrier(MPI_COMM_WORLD);
	{
		int64_t one = 1, got, mine[FETCHES], all[2 * FETCHES];
		uint8_t *seen = calloc(2 * FETCHES, 1);

		if (!seen)
			MPI_Abort(MPI_COMM_WORLD, 2);
		MPI_Win_lock_all(0, cwin);
		for (int i = 0; i < FETCHES; i++) {
			MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 1, 0, MPI_SUM, cwin);
			MPI_Win_flush(1, cwin);
			mine[i] = got;
		}
		MPI_Win_unlock_all(cwin);
		MPI_Allgather(mine, FETCHES, MPI_INT64_T, all, FETCHES, MPI_INT64_T, MPI_COMM_WORLD);
		for (int i = 0; ok && i < 2 * FETCHES; i++) {
			if (all[i] < 0 || all[i] >= 2 * FETCHES || seen[all[i]]) {
				ok = 0;
				snprintf(why, sizeof(why), "fetched %ld twice or out of range", (long)all[i]);
			} else {
				seen[all[i]] = 1;
			}
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 1 && ok && read_counter(counter, cwin) != 2 * FETCHES) {
			ok = 0;
			snprintf(why, sizeof(why), "counter is %ld, expected %d",
				 (long)read_counter(counter, cwin), 2 * FETCHES);
		}
		free(seen);
	}
	verdict("fetch_and_op sum, both ranks", ok, why);

	/*
	 * Compare-and-swap: rank 0 moves the counter from 400 to 410 by one;
	 * each swap must find what it compares with. Between them, a swap
	 * with a stale compare and a value far off must find the new value
	 * and leave it: one that swapped anyway would show in the next swap
	 * and in the final count.
	 */
	ok = 1;
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, cwin);
		for (int64_t v = 2 * FETCHES; ok && v < 2 * FETCHES + 10; v++) {
			int64_t next = v + 1, old, stale = v, far = v + 1000, old2;

			MPI_Compare_and_swap(&next, &v, &old, MPI_INT64_T, 1, 0, cwin);
			MPI_Win_flush(1, cwin);
			MPI_Compare_and_swap(&far, &stale, &old2, MPI_INT64_T, 1, 0, cwin);
			MPI_Win_flush(1, cwin);
			if (old != v || old2 != next) {
				ok = 0;
				snprintf(why, sizeof(why), "swap at %ld found %ld, stale compare found %ld",
					 (long)v, (long)old, (long)old2);
			}
		}
		MPI_Win_unlock(1, cwin);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1 && read_counter(counter, cwin) != 2 * FETCHES + 10) {
		ok = 0;
		snprintf(why, sizeof(why), "counter is %ld after the swaps",
			 (long)read_counter(counter, cwin));
	}
	verdict("compare_and_swap", ok, why);
	MPI_Win_free(&cwin);
	free(local);
}

int main(int argc, char **argv)
{
	int size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_check: needs 2 ranks, has %d\n", size);
		MPI_Finalize();
		return 2;
	}
	if (argc > 1) {
		char *end;
		unsigned long v = strtoul(argv[1], &end, 0);

		/* A power of two, 1 KiB to MAX_SIZE. */
		if (*end || v < 1024 || v > MAX_SIZE || (v & (v - 1))) {
			if (rank == 0)
				fprintf(stderr, "mpi_check: %s is no power of two from 1024 to %u\n",
					argv[1], MAX_SIZE);
			MPI_Finalize();
			return 2;
		}
		max_size = v;
	}
	check_pingpong();
	check_collectives();
	check_one_sided();
	if (rank == 0)
		printf("%s: %d check(s) failed\n", failures ? "FAIL" : "ok", failures);
	MPI_Finalize();
	return failures ? 1 : 0;
}
