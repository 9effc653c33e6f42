/* The emulated NCCL on its own, with ranks as forked processes on the
 * emulated CUDA runtime:
 *   - all_reduce of every type weft uses (f32, f16, bf16, f64, i32, i64)
 *     with sum, avg, max, min and prod, in and out of place, across several
 *     chunks, equals a host reference exactly (the inputs are multiples of
 *     3 in -6..6, so every sum, product and average is an exact small
 *     integer in each type: tolerance 0), and reduce_scatter, all_gather
 *     (also in place), broadcast (also ncclBcast) and reduce too;
 *   - reductions fold in rank order, rounded to the type after each step:
 *     bf16 1 + 2^-8 + 2^-8 is 1 (each step a tie to even), not 1 + 2^-7;
 *     f16 likewise with 2^-11; f32 sums of arbitrary values are the bits
 *     of a rank-order float fold, the same on a second run;
 *   - send/recv groups of messages larger than the ring finish whatever
 *     the order within the group (send first on some ranks, receive first
 *     on others, then the other way round), an all-to-all group with
 *     self-sends, and two messages to one peer arrive in order;
 *   - split: colors, keys (reverse order), NCCL_SPLIT_NOCOLOR, a
 *     collective on the new communicators and the parent still working;
 *   - a peer that aborts, a peer whose process exits, a peer that does not
 *     take part (the deadline, EMU_NCCL_TIMEOUT_MS), and two ranks that
 *     both send before receiving outside a group (the rendezvous) each end
 *     in an error that says so, quickly, never a hang; the communicator
 *     refuses later calls;
 *   - a non-blocking init (ncclInProgress until all joined), a rank that
 *     never joins (the deadline), ncclCommAbort from a second thread while
 *     a collective waits (it returns at once), a recv smaller than its send;
 *   - misuse: different collectives on two ranks, a stale unique id, a
 *     pageable host buffer, a peer out of range, a send to itself outside
 *     a group, each with its message. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "weft_test.h"

#define COUNT 3001 /* elements: several 4 KiB chunks for every type */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- values in every type (exact for the values used here) ---- */

static uint16_t f16_of(double v)
{
	int e;
	double m;

	if (v == 0.0)
		return 0;
	m = frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
	return (uint16_t)((v < 0 ? 0x8000 : 0) | (unsigned)(e - 1 + 15) << 10 |
			  (unsigned)((m * 2.0 - 1.0) * 1024.0));
}

static double f16_val(uint16_t h)
{
	int e = (h >> 10) & 31, f = h & 1023;
	double v = e ? ldexp(1.0 + f / 1024.0, e - 15) : ldexp((double)f, -24);

	return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_of(double v)
{
	float f = (float)v;
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16);
}

static double bf16_val(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static size_t tsize(ncclDataType_t t)
{
	return t == ncclFloat16 || t == ncclBfloat16 ? 2 : t == ncclFloat32 || t == ncclInt32 ? 4 : 8;
}

static void put(void *p, ncclDataType_t t, size_t i, double v)
{
	switch (t) {
	case ncclFloat16: ((uint16_t *)p)[i] = f16_of(v); break;
	case ncclBfloat16: ((uint16_t *)p)[i] = bf16_of(v); break;
	case ncclFloat32: ((float *)p)[i] = (float)v; break;
	case ncclFloat64: ((double *)p)[i] = v; break;
	case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
	default: ((int64_t *)p)[i] = (int64_t)v; break;
	}
}

static double get(const void *p, ncclDataType_t t, size_t i)
{
	switch (t) {
	case ncclFloat16: return f16_val(((const uint16_t *)p)[i]);
	case ncclBfloat16: return bf16_val(((const uint16_t *)p)[i]);
	case ncclFloat32: return ((const float *)p)[i];
	case ncclFloat64: return ((const double *)p)[i];
	case ncclInt32: return ((const int32_t *)p)[i];
	default: return (double)((const int64_t *)p)[i];
	}
}

/* Rank r's element i: a multiple of 3 in -6..6. */
static double val(int r, size_t i)
{
	return 3.0 * (double)((int)((i * 7 + (size_t)r * 5) % 5) - 2);
}

static double fold(int n, size_t i, ncclRedOp_t op, double (*v)(int, size_t))
{
	double acc = v(0, i);

	for (int r = 1; r < n; r++) {
		double x = v(r, i);

		acc = op == ncclProd ? acc * x : op == ncclMax ? fmax(acc, x) :
		      op == ncclMin ? fmin(acc, x) : acc + x;
	}
	return op == ncclAvg ? acc / n : acc;
}

/* ---- per-rank helpers ---- */

static cudaStream_t stream;

/* The outcome of an issued call once its stream work ran. */
static ncclResult_t settle(ncclComm_t c, ncclResult_t r)
{
	ncclResult_t ae = ncclSuccess;

	if (r != ncclSuccess)
		return r;
	if (cudaStreamSynchronize(stream) != cudaSuccess)
		return ncclUnhandledCudaError;
	if (ncclCommGetAsyncError(c, &ae) != ncclSuccess)
		return ncclInternalError;
	return ae;
}

#define EXPECT_ERR(r, want, text)                                                         \
	do {                                                                              \
		ncclResult_t r_ = (r);                                                    \
		WT_CHECK(r_ == (want));                                                   \
		if (r_ != (want))                                                         \
			fprintf(stderr, "  got %d (%s), want %d\n", (int)r_,              \
				ncclGetErrorString(r_), (int)(want));                     \
		WT_STR_CONTAINS(ncclGetLastError(NULL), text);                            \
	} while (0)

static void *dalloc(size_t bytes)
{
	void *p = NULL;

	if (cudaMalloc(&p, bytes) != cudaSuccess) {
		fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes);
		exit(2);
	}
	return p;
}

static void up(void *d, const void *h, size_t n)
{
	WT_REQUIRE(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) == cudaSuccess);
}

static void down(void *h, const void *d, size_t n)
{
	WT_REQUIRE(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) == cudaSuccess);
}

static ncclComm_t join(int n, const ncclUniqueId *id, int rank)
{
	ncclComm_t c = NULL;

	WT_REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
	WT_REQUIRE(ncclCommInitRank(&c, n, *id, rank) == ncclSuccess);
	return c;
}

/* Runs fn on n forked ranks; counts ranks that did not exit with want_rc
 * (want_rc[r] or 0). */
typedef void (*rank_fn)(int rank, int n, const ncclUniqueId *id);

static int run(const char *name, int n, rank_fn fn, const int *want_rc)
{
	pid_t pid[8];
	ncclUniqueId id;
	int bad = 0;
	double t0 = now_s();

	if (ncclGetUniqueId(&id) != ncclSuccess) {
		fprintf(stderr, "%s: ncclGetUniqueId: %s\n", name, ncclGetLastError(NULL));
		return 1;
	}
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			alarm(30); /* a hang ends as a failure, not a stuck test */
			fn(r, n, &id);
			fflush(NULL);
			_exit(wt_failures ? 1 : 0);
		}
	}
	for (int r = 0; r < n; r++) {
		int st = 0, want = want_rc ? want_rc[r] : 0;

		waitpid(pid[r], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
			fprintf(stderr, "%s: rank %d ended with %s %d (want exit %d)\n", name, r,
				WIFEXITED(st) ? "exit" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), want);
			bad++;
		}
	}
	fprintf(stderr, "%s: %d ranks, %.2f s%s\n", name, n, now_s() - t0, bad ? ": FAILED" : "");
	return bad;
}

/* ---- collectives ---- */

static void check_all_reduce(ncclComm_t c, int rank, int n, ncclDataType_t t, ncclRedOp_t op,
			     int in_place)
{
	size_t es = tsize(t);
	char *h = malloc(COUNT * es), *d = dalloc(COUNT * es), *o = in_place ? d : dalloc(COUNT * es);
	int bad = 0;

	for (size_t i = 0; i < COUNT; i++)
		put(h, t, i, val(rank, i));
	up(d, h, COUNT * es);
	WT_CHECK(settle(c, ncclAllReduce(d, o, COUNT, t, op, c, stream)) == ncclSuccess);
	down(h, o, COUNT * es);
	for (size_t i = 0; i < COUNT; i++)
		if (get(h, t, i) != fold(n, i, op, val) && bad++ < 3)
			fprintf(stderr, "rank %d all_reduce type %d op %d%s [%zu]: %g, want %g\n",
				rank, (int)t, (int)op, in_place ? " in place" : "", i, get(h, t, i),
				fold(n, i, op, val));
	WT_CHECK(bad == 0);
	cudaFree(d);
	if (!in_place)
		cudaFree(o);
	free(h);
}

/* bf16 1 + 2^-8 + 2^-8 and f16 1 + 2^-11 + 2^-11 in rank order: each
 * step is a tie that rounds to even (1), so the result is 1; summing the
 * small ones first would give 1 + 2^-7 (1 + 2^-10). */
static void check_rank_order(ncclComm_t c, int rank)
{
	ncclDataType_t types[2] = { ncclBfloat16, ncclFloat16 };
	double small[2] = { ldexp(1.0, -8), ldexp(1.0, -11) };

	for (int k = 0; k < 2; k++) {
		uint16_t h[4], *d = dalloc(sizeof(h));

		for (int i = 0; i < 4; i++)
			put(h, types[k], (size_t)i, rank == 0 ? 1.0 : small[k]);
		up(d, h, sizeof(h));
		WT_CHECK(settle(c, ncclAllReduce(d, d, 4, types[k], ncclSum, c, stream)) ==
			 ncclSuccess);
		down(h, d, sizeof(h));
		for (int i = 0; i < 4; i++)
			WT_CHECK(get(h, types[k], (size_t)i) == 1.0);
		cudaFree(d);
	}
}

/* f32 sums of arbitrary values are a rank-order float fold, bit for bit. */
static float arb(int r, size_t i)
{
	return (float)sin((double)(i * 31 + (size_t)r * 17)) * 1e3f / (float)(r + 1);
}

static void check_f32_bits(ncclComm_t c, int rank, int n)
{
	float *h = malloc(COUNT * 4), *d = dalloc(COUNT * 4), *o = dalloc(COUNT * 4);
	float *o2 = malloc(COUNT * 4);
	int bad = 0;

	for (size_t i = 0; i < COUNT; i++)
		h[i] = arb(rank, i);
	up(d, h, COUNT * 4);
	WT_CHECK(settle(c, ncclAllReduce(d, o, COUNT, ncclFloat32, ncclSum, c, stream)) ==
		 ncclSuccess);
	down(h, o, COUNT * 4);
	WT_CHECK(settle(c, ncclAllReduce(d, o, COUNT, ncclFloat32, ncclSum, c, stream)) ==
		 ncclSuccess);
	down(o2, o, COUNT * 4);
	for (size_t i = 0; i < COUNT; i++) {
		float acc = arb(0, i);

		for (int r = 1; r < n; r++)
			acc += arb(r, i);
		bad += memcmp(&acc, &h[i], 4) != 0 || memcmp(&o2[i], &h[i], 4) != 0;
	}
	WT_CHECK(bad == 0);
	cudaFree(d);
	cudaFree(o);
	free(h);
	free(o2);
}

static void check_others(ncclComm_t c, int rank, int n)
{
	enum { RC = 1500, SC = 2000 };
	double *h = malloc((size_t)n * SC * 8);
	char *d = dalloc((size_t)n * SC * 8), *o = dalloc((size_t)n * SC * 8);
	int bad = 0;

	/* reduce_scatter, f32 and bf16, sum and max */
	for (int k = 0; k < 4; k++) {
		ncclDataType_t t = k < 2 ? ncclFloat32 : ncclBfloat16;
		ncclRedOp_t op = k % 2 ? ncclMax : ncclSum;
		size_t es = tsize(t);

		for (size_t i = 0; i < (size_t)n * RC; i++)
			put(h, t, i, val(rank, i));
		up(d, h, (size_t)n * RC * es);
		WT_CHECK(settle(c, ncclReduceScatter(d, o, RC, t, op, c, stream)) == ncclSuccess);
		down(h, o, RC * es);
		for (size_t i = 0; i < RC; i++)
			bad += get(h, t, i) != fold(n, (size_t)rank * RC + i, op, val);
	}
	WT_CHECK(bad == 0);
	/* all_gather, i64, out of place and in place (send at this rank's block) */
	for (int in_place = 0; in_place < 2; in_place++) {
		char *s = in_place ? o + (size_t)rank * SC * 8 : d;

		for (size_t i = 0; i < SC; i++)
			put(h, ncclInt64, i, val(rank, i));
		up(s, h, SC * 8);
		WT_CHECK(settle(c, ncclAllGather(s, o, SC, ncclInt64, c, stream)) == ncclSuccess);
		down(h, o, (size_t)n * SC * 8);
		for (int r = 0; r < n; r++)
			for (size_t i = 0; i < SC; i++)
				bad += get(h, ncclInt64, (size_t)r * SC + i) != val(r, i);
	}
	WT_CHECK(bad == 0);
	/* broadcast from rank 1 (out of place, then in place), f64 */
	for (int in_place = 0; in_place < 2; in_place++) {
		for (size_t i = 0; i < SC; i++)
			h[i] = val(rank, i) + rank;
		up(d, h, SC * 8);
		WT_CHECK(settle(c, in_place ? ncclBcast(d, SC, ncclFloat64, 1, c, stream) :
				ncclBroadcast(d, o, SC, ncclFloat64, 1, c, stream)) == ncclSuccess);
		down(h, in_place ? d : o, SC * 8);
		for (size_t i = 0; i < SC; i++)
			bad += h[i] != val(1, i) + 1;
	}
	WT_CHECK(bad == 0);
	/* count 0: nothing to move, NULL buffers allowed */
	WT_CHECK(settle(c, ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, c, stream)) ==
		 ncclSuccess);
	/* reduce to rank n-1, i32 sum */
	for (size_t i = 0; i < SC; i++)
		put(h, ncclInt32, i, val(rank, i));
	up(d, h, SC * 4);
	WT_CHECK(settle(c, ncclReduce(d, o, SC, ncclInt32, ncclSum, n - 1, c, stream)) ==
		 ncclSuccess);
	if (rank == n - 1) {
		down(h, o, SC * 4);
		for (size_t i = 0; i < SC; i++)
			bad += get(h, ncclInt32, i) != fold(n, i, ncclSum, val);
	}
	WT_CHECK(bad == 0);
	cudaFree(d);
	cudaFree(o);
	free(h);
}

static void rank_collectives(int rank, int n, const ncclUniqueId *id)
{
	ncclDataType_t types[] = { ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64, ncclInt32,
				   ncclInt64 };
	ncclRedOp_t ops[] = { ncclSum, ncclAvg, ncclMax, ncclMin, ncclProd };
	ncclComm_t c = join(n, id, rank);

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
			check_all_reduce(c, rank, n, types[t], ops[o], o == 0);
	check_all_reduce(c, rank, n, ncclFloat32, ncclAvg, 1);
	check_rank_order(c, rank);
	check_f32_bits(c, rank, n);
	check_others(c, rank, n);
	WT_CHECK(ncclCommFinalize(c) == ncclSuccess);
	WT_CHECK(ncclCommDestroy(c) == ncclSuccess);
}

/* ---- send/recv ---- */

#define P2P 5000 /* floats: 20 KB through a 4 KiB ring */

static float pat(int from, int to, size_t i)
{
	return (float)(from * 100000 + to * 10000) + (float)(i % 9973);
}

static void rank_p2p(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c = join(n, id, rank);
	float *h = malloc((size_t)n * P2P * 4);
	float *s = dalloc((size_t)n * P2P * 4), *r = dalloc((size_t)n * P2P * 4);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n, bad = 0;

	/* a ring, the order in the group differing between ranks, then swapped */
	for (int round = 0; round < 2; round++) {
		int send_first = (rank % 2) ^ round;

		for (size_t i = 0; i < P2P; i++)
			h[i] = pat(rank, next, i);
		up(s, h, P2P * 4);
		WT_CHECK(ncclGroupStart() == ncclSuccess);
		if (send_first)
			WT_CHECK(ncclSend(s, P2P, ncclFloat32, next, c, stream) == ncclSuccess);
		WT_CHECK(ncclRecv(r, P2P, ncclFloat32, prev, c, stream) == ncclSuccess);
		if (!send_first)
			WT_CHECK(ncclSend(s, P2P, ncclFloat32, next, c, stream) == ncclSuccess);
		WT_CHECK(settle(c, ncclGroupEnd()) == ncclSuccess);
		down(h, r, P2P * 4);
		for (size_t i = 0; i < P2P; i++)
			bad += h[i] != pat(prev, rank, i);
	}
	WT_CHECK(bad == 0);
	/* all-to-all with self-sends: receives first on rank 0, sends first elsewhere */
	for (int j = 0; j < n; j++)
		for (size_t i = 0; i < P2P; i++)
			h[(size_t)j * P2P + i] = pat(rank, j, i);
	up(s, h, (size_t)n * P2P * 4);
	WT_CHECK(ncclGroupStart() == ncclSuccess);
	for (int j = 0; j < n; j++) {
		if (rank == 0)
			WT_CHECK(ncclRecv(r + (size_t)j * P2P, P2P, ncclFloat32, j, c, stream) == 0);
		WT_CHECK(ncclSend(s + (size_t)j * P2P, P2P, ncclFloat32, j, c, stream) == 0);
		if (rank != 0)
			WT_CHECK(ncclRecv(r + (size_t)j * P2P, P2P, ncclFloat32, j, c, stream) == 0);
	}
	WT_CHECK(settle(c, ncclGroupEnd()) == ncclSuccess);
	down(h, r, (size_t)n * P2P * 4);
	for (int j = 0; j < n; j++)
		for (size_t i = 0; i < P2P; i++)
			bad += h[(size_t)j * P2P + i] != pat(j, rank, i);
	WT_CHECK(bad == 0);
	/* two messages to one peer in one group arrive in order (rank 0 -> 1) */
	if (rank < 2) {
		for (size_t i = 0; i < 2 * P2P; i++)
			h[i] = (float)i;
		up(s, h, 2 * P2P * 4);
		WT_CHECK(ncclGroupStart() == ncclSuccess);
		for (int k = 0; k < 2; k++) {
			if (rank == 0)
				WT_CHECK(ncclSend(s + (size_t)k * P2P, P2P, ncclFloat32, 1, c,
						  stream) == ncclSuccess);
			else
				WT_CHECK(ncclRecv(r + (size_t)k * P2P, P2P, ncclFloat32, 0, c,
						  stream) == ncclSuccess);
		}
		WT_CHECK(settle(c, ncclGroupEnd()) == ncclSuccess);
		if (rank == 1) {
			down(h, r, 2 * P2P * 4);
			for (size_t i = 0; i < 2 * P2P; i++)
				bad += h[i] != (float)i;
		}
	}
	WT_CHECK(bad == 0);
	WT_CHECK(ncclCommDestroy(c) == ncclSuccess);
	cudaFree(s);
	cudaFree(r);
	free(h);
}

/* ---- split ---- */

static void rank_split(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c = join(n, id, rank), sub = NULL;
	int color = rank == 3 ? NCCL_SPLIT_NOCOLOR : rank % 2, cnt = 0, me = -1;
	int32_t h = rank + 1, *d = dalloc(4);

	WT_REQUIRE(n == 4);
	WT_CHECK(ncclCommSplit(c, color, -rank, &sub, NULL) == ncclSuccess);
	if (rank == 3) {
		WT_CHECK(sub == NULL);
	} else {
		WT_REQUIRE(sub != NULL);
		WT_CHECK(ncclCommCount(sub, &cnt) == ncclSuccess);
		WT_CHECK(ncclCommUserRank(sub, &me) == ncclSuccess);
		/* color 0: ranks 0 and 2, keys 0 and -2: 2 comes first */
		WT_CHECK(cnt == (color == 0 ? 2 : 1));
		WT_CHECK(me == (rank == 2 ? 0 : rank == 0 ? 1 : 0));
		up(d, &h, 4);
		WT_CHECK(settle(sub, ncclAllReduce(d, d, 1, ncclInt32, ncclSum, sub, stream)) ==
			 ncclSuccess);
		down(&h, d, 4);
		WT_CHECK(h == (color == 0 ? 1 + 3 : 2));
		WT_CHECK(ncclCommDestroy(sub) == ncclSuccess);
	}
	/* the parent still works */
	h = rank + 1;
	up(d, &h, 4);
	WT_CHECK(settle(c, ncclAllReduce(d, d, 1, ncclInt32, ncclSum, c, stream)) == ncclSuccess);
	down(&h, d, 4);
	WT_CHECK(h == 1 + 2 + 3 + 4);
	WT_CHECK(ncclCommDestroy(c) == ncclSuccess);
	cudaFree(d);
}

/* ---- failures ---- */

static void rank_abort(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c;
	float *d = dalloc(64 * 4);
	double t0;

	setenv("EMU_NCCL_TIMEOUT_MS", "20000", 1);
	c = join(n, id, rank);
	if (rank == 1) {
		usleep(200 * 1000);
		WT_CHECK(ncclCommAbort(c) == ncclSuccess);
		return;
	}
	t0 = now_s();
	EXPECT_ERR(settle(c, ncclAllReduce(d, d, 64, ncclFloat32, ncclSum, c, stream)),
		   ncclRemoteError, "rank 1 aborted the communicator");
	WT_CHECK(now_s() - t0 < 5.0); /* far below the 20 s deadline */
	EXPECT_ERR(ncclAllReduce(d, d, 64, ncclFloat32, ncclSum, c, stream), ncclRemoteError,
		   "the communicator failed earlier");
	WT_CHECK(ncclCommAbort(c) == ncclSuccess);
}

static void rank_dies(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c;
	float *d = dalloc(64 * 4);
	double t0;

	setenv("EMU_NCCL_TIMEOUT_MS", "20000", 1);
	c = join(n, id, rank);
	if (rank == 1)
		_exit(3); /* gone without a word */
	t0 = now_s();
	EXPECT_ERR(settle(c, ncclAllReduce(d, d, 64, ncclFloat32, ncclSum, c, stream)),
		   ncclRemoteError, "the process of rank 1");
	WT_CHECK(now_s() - t0 < 5.0);
	WT_CHECK(ncclCommAbort(c) == ncclSuccess);
}

static void rank_timeout(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c;
	float *d = dalloc(64 * 4);
	double t0, dt;

	setenv("EMU_NCCL_TIMEOUT_MS", "400", 1);
	c = join(n, id, rank);
	if (rank == 1) { /* alive, but never calls the collective */
		usleep(4000 * 1000);
		WT_CHECK(ncclCommDestroy(c) == ncclSuccess);
		return;
	}
	t0 = now_s();
	EXPECT_ERR(settle(c, ncclAllReduce(d, d, 64, ncclFloat32, ncclSum, c, stream)),
		   ncclSystemError, "timed out after 400 ms waiting for rank 1");
	dt = now_s() - t0;
	WT_CHECK(dt >= 0.4 && dt < 3.5); /* the deadline, plus slack for a loaded machine */
	WT_CHECK(ncclCommAbort(c) == ncclSuccess);
}

/* Both ranks send before they receive, outside a group: a send completes
 * only when its receiver takes it, so neither does; the deadline ends it
 * on one rank and the other hears that rank failed. */
static void rank_rendezvous(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c;
	float *d = dalloc(64 * 4);
	ncclResult_t r;

	setenv("EMU_NCCL_TIMEOUT_MS", "400", 1);
	c = join(n, id, rank);
	r = settle(c, ncclSend(d, 64, ncclFloat32, 1 - rank, c, stream));
	WT_CHECK(r == ncclSystemError || r == ncclRemoteError);
	WT_STR_CONTAINS(ncclGetLastError(NULL), "send #1 (f32 x 64, to rank");
	WT_CHECK(ncclRecv(d, 64, ncclFloat32, 1 - rank, c, stream) != ncclSuccess);
	WT_CHECK(ncclCommAbort(c) == ncclSuccess);
}

static void rank_misuse(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c, again = NULL;
	float *d = dalloc(100 * 4), pageable[4] = { 0 };

	setenv("EMU_NCCL_TIMEOUT_MS", "5000", 1);
	c = join(n, id, rank);
	/* the id was used: a second communicator with it finds nothing */
	EXPECT_ERR(ncclCommInitRank(&again, n, *id, rank), ncclInvalidUsage, "the id is stale");
	WT_CHECK(again == NULL);
	EXPECT_ERR(ncclAllReduce(pageable, pageable, 4, ncclFloat32, ncclSum, c, stream),
		   ncclInvalidArgument, "is pageable host memory");
	EXPECT_ERR(ncclSend(d, 4, ncclFloat32, n, c, stream), ncclInvalidArgument,
		   "peer 2 is not a rank of this communicator (0..1)");
	EXPECT_ERR(ncclSend(d, 4, ncclFloat32, rank, c, stream), ncclInvalidUsage,
		   "a send to this rank itself outside a group can never");
	/* different collectives on the two ranks */
	EXPECT_ERR(settle(c, rank == 0 ? ncclAllReduce(d, d, 100, ncclFloat32, ncclSum, c, stream) :
			  ncclBroadcast(d, d, 100, ncclFloat32, 0, c, stream)),
		   ncclInvalidUsage, "does not match rank");
	WT_CHECK(ncclCommAbort(c) == ncclSuccess);
}

/* A non-blocking init returns ncclInProgress until every rank joined. */
static void rank_nonblocking(int rank, int n, const ncclUniqueId *id)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclResult_t r, ae = ncclInProgress;
	ncclComm_t c = NULL;
	int polls = 0, version = 0;

	cfg.blocking = 0;
	cfg.commName = "nb";
	WT_REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
	if (rank == 1)
		usleep(200 * 1000);
	r = ncclCommInitRankConfig(&c, n, *id, rank, &cfg);
	WT_CHECK(r == (rank == 0 ? ncclInProgress : ncclSuccess));
	WT_REQUIRE(c != NULL);
	for (double t0 = now_s(); ae == ncclInProgress && now_s() - t0 < 5.0; polls++) {
		WT_CHECK(ncclCommGetAsyncError(c, &ae) == ncclSuccess);
		usleep(1000);
	}
	WT_CHECK(ae == ncclSuccess);
	WT_CHECK(rank == 1 || polls > 1);
	WT_CHECK(ncclGetVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE);
	WT_CHECK(ncclCommDestroy(c) == ncclSuccess);
}

/* A rank that never joins: the others' init ends at the deadline. */
static void rank_never_joins(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t c = NULL;

	setenv("EMU_NCCL_TIMEOUT_MS", "300", 1);
	if (rank == 1)
		return;
	EXPECT_ERR(ncclCommInitRank(&c, n, *id, rank), ncclSystemError,
		   "waiting for every rank to join: timed out after 300 ms waiting for rank 1");
	WT_CHECK(c == NULL);
}

/* ncclCommAbort from another thread (a watchdog) ends a collective this
 * rank is stuck in, at once. */
struct stuck {
	ncclComm_t c;
	float *d;
	ncclResult_t r;
	double took;
};

static void *stuck_thread(void *p)
{
	struct stuck *s = p;
	double t0 = now_s();

	/* the comm must not be touched after the abort: no ncclCommGetAsyncError */
	s->r = ncclAllReduce(s->d, s->d, 64, ncclFloat32, ncclSum, s->c, stream);
	if (cudaStreamSynchronize(stream) != cudaSuccess)
		s->r = ncclUnhandledCudaError;
	s->took = now_s() - t0;
	return NULL;
}

static void rank_watchdog(int rank, int n, const ncclUniqueId *id)
{
	struct stuck s = { .d = dalloc(64 * 4) };
	pthread_t th;

	setenv("EMU_NCCL_TIMEOUT_MS", "20000", 1);
	s.c = join(n, id, rank);
	if (rank == 1) { /* takes no part, stays alive until rank 0 is done */
		usleep(5000 * 1000);
		WT_CHECK(ncclCommDestroy(s.c) == ncclSuccess);
		return;
	}
	WT_REQUIRE(pthread_create(&th, NULL, stuck_thread, &s) == 0);
	usleep(200 * 1000);
	WT_CHECK(ncclCommAbort(s.c) == ncclSuccess);
	pthread_join(th, NULL);
	/* the call's own result where the stream ran it at once, else its stream ended */
	WT_CHECK(s.r == ncclInvalidUsage || s.r == ncclSuccess);
	WT_STR_CONTAINS(ncclGetLastError(NULL), "the communicator was aborted on this rank");
	/* the abort (at 0.2 s) ends the wait far inside the 20 s deadline and
	 * before rank 1 leaves at 5 s; 4 s allows a loaded machine */
	WT_CHECK(s.took < 4.0);
}

/* A recv that expects fewer bytes than the send: both sides fail. */
static void rank_size_mismatch(int rank, int n, const ncclUniqueId *id)
{
	float *d = dalloc(64 * 4);
	ncclComm_t c;

	setenv("EMU_NCCL_TIMEOUT_MS", "5000", 1);
	c = join(n, id, rank);
	if (rank == 0) {
		ncclResult_t r = settle(c, ncclSend(d, 64, ncclFloat32, 1, c, stream));

		WT_CHECK(r == ncclInvalidUsage || r == ncclRemoteError);
	} else {
		EXPECT_ERR(settle(c, ncclRecv(d, 32, ncclFloat32, 0, c, stream)), ncclInvalidUsage,
			   "expects 128 bytes but rank 0 sent 256");
	}
	WT_CHECK(ncclCommAbort(c) == ncclSuccess);
}

int main(void)
{
	int dies[2] = { 0, 3 }, bad = 0;
	const char *s1 = ncclGetErrorString(ncclSystemError), *s2 = ncclGetErrorString(ncclRemoteError);

	WT_CHECK(s1 && s2 && *s1 && *s2 && strcmp(s1, s2) != 0);
	/* a hang in the scenarios that expect none ends as an error in 10 s */
	setenv("EMU_NCCL_TIMEOUT_MS", "10000", 0);
	bad += run("collectives", 3, rank_collectives, NULL);
	bad += run("send/recv groups", 3, rank_p2p, NULL);
	bad += run("split", 4, rank_split, NULL);
	bad += run("a peer aborts", 3, rank_abort, NULL);
	bad += run("a peer's process exits", 2, rank_dies, dies);
	bad += run("the deadline", 2, rank_timeout, NULL);
	bad += run("send before recv on both ranks", 2, rank_rendezvous, NULL);
	bad += run("misuse", 2, rank_misuse, NULL);
	bad += run("non-blocking init", 2, rank_nonblocking, NULL);
	bad += run("a rank never joins", 2, rank_never_joins, NULL);
	bad += run("abort from a watchdog thread", 2, rank_watchdog, NULL);
	bad += run("recv size differs from send", 2, rank_size_mismatch, NULL);
	WT_CHECK(bad == 0);
	return wt_done("test_emunccl");
}
