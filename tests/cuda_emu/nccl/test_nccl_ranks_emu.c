/* plugins/comm/nccl (the real sources, built on the emulated NCCL and CUDA
 * runtime) with three ranks as forked processes sharing a real rendezvous
 * store: the unique id travels through the store, and every collective
 * of the vtable gives the host reference's values exactly (inputs are
 * small integers, so sums, maxima, averages of multiples of 3 and bf16
 * values are exact: tolerance 0):
 *   - all_reduce with each weft op on f32 device buffers, in place and
 *     not, bf16 device buffers, and a staged f64 host buffer (the
 *     trainer's loss and eval sums);
 *   - reduce_scatter, all_gather, broadcast from rank 1, all_to_all,
 *     barrier;
 *   - send/recv between rank pairs (the receiver posting first on one
 *     side, the sender on the other);
 *   - asynchronous handles waited out of issue order;
 *   - a second group on a sub-set of the ranks (ranks 0 and 2), as the
 *     host builds groups through the store, next to the world group.
 * The test_nccl_smoke_emu test covers one rank and the refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "dist/dist.h"
#include "plugin/loader_impl.h"
#include "weft/comm.h"
#include "weft_test.h"

#define NCCL_SO WEFT_EMU_PLUGIN_DIR "/comm_nccl.so"
#define RANKS 3
#define N 3000 /* elements: several of the emulator's chunks (EMU_NCCL_CHUNK_BYTES) */

static const weft_comm_ops *ops;

static weft_comm_buf dbuf(void *p, int64_t n, weft_comm_dtype dt)
{
	return (weft_comm_buf){ .data = p, .count = n, .dtype = dt,
				.device = WEFT_COMM_DEVICE_CUDA, .device_index = 0 };
}

static double val(int r, int64_t i)
{
	return 3.0 * (double)((int)((i * 7 + r * 5) % 5) - 2);
}

static double reduce_ref(int n, int64_t i, weft_comm_redop op)
{
	double acc = val(0, i);

	for (int r = 1; r < n; r++)
		acc = op == WEFT_COMM_MAX ? (val(r, i) > acc ? val(r, i) : acc) :
		      op == WEFT_COMM_MIN ? (val(r, i) < acc ? val(r, i) : acc) : acc + val(r, i);
	return op == WEFT_COMM_AVG ? acc / n : acc;
}

static float *dev_f32(int64_t n)
{
	float *p = NULL;

	if (cudaMalloc((void **)&p, (size_t)n * 4) != cudaSuccess)
		exit(2);
	return p;
}

static void up(void *d, const void *h, size_t bytes)
{
	WT_REQUIRE(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
}

static void down(void *h, const void *d, size_t bytes)
{
	WT_REQUIRE(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
}

static weft_comm *init(weft_store_client *cl, const char *name, int rank, int size)
{
	weft_comm_init_args a = {
		.struct_size = sizeof(weft_comm_init_args), .rank = rank, .size = size,
		.store = weft_store_client_vtable(cl), .name = name, .timeout_ms = 20000,
		.device = WEFT_COMM_DEVICE_CUDA, .device_index = 0,
	};
	weft_comm *c = NULL;

	WT_OK(ops->init(&a, &c));
	WT_REQUIRE(c != NULL);
	return c;
}

static void all_reduces(weft_comm *c, int rank)
{
	static float h[RANKS * N];
	float *x = dev_f32(N), *y = dev_f32(N);
	int64_t bad = 0;

	for (int op = 0; op < WEFT_COMM_NUM_REDOPS; op++)
		for (int in_place = 0; in_place < 2; in_place++) {
			weft_comm_buf s = dbuf(x, N, WEFT_COMM_F32);
			weft_comm_buf r = dbuf(in_place ? x : y, N, WEFT_COMM_F32);

			for (int64_t i = 0; i < N; i++)
				h[i] = (float)val(rank, i);
			up(x, h, N * 4);
			WT_OK(ops->all_reduce(c, &s, &r, (weft_comm_redop)op, NULL));
			down(h, in_place ? x : y, N * 4);
			for (int64_t i = 0; i < N; i++)
				bad += h[i] != (float)reduce_ref(RANKS, i, (weft_comm_redop)op);
		}
	WT_CHECK(bad == 0);
	{
		/* bf16 on the device: the values are exact in bf16 */
		uint16_t hb[N];
		weft_comm_buf s = dbuf(x, N, WEFT_COMM_BF16);

		for (int64_t i = 0; i < N; i++) {
			float f = (float)val(rank, i);
			uint32_t u;

			memcpy(&u, &f, 4);
			hb[i] = (uint16_t)(u >> 16);
		}
		up(x, hb, sizeof(hb));
		WT_OK(ops->all_reduce(c, &s, &s, WEFT_COMM_SUM, NULL));
		down(hb, x, sizeof(hb));
		for (int64_t i = 0; i < N; i++) {
			uint32_t u = (uint32_t)hb[i] << 16;
			float f;

			memcpy(&f, &u, 4);
			bad += f != (float)reduce_ref(RANKS, i, WEFT_COMM_SUM);
		}
	}
	WT_CHECK(bad == 0);
	{
		/* a host buffer, staged by the plugin */
		double loss[2] = { rank + 0.5, 10.0 * rank };
		weft_comm_buf l = { .data = loss, .count = 2, .dtype = WEFT_COMM_F64,
				    .device = WEFT_COMM_DEVICE_CPU };

		WT_OK(ops->all_reduce(c, &l, &l, WEFT_COMM_AVG, NULL));
		WT_CHECK(loss[0] == 1.5 && loss[1] == 10.0);
	}
	cudaFree(x);
	cudaFree(y);
}

static void the_rest(weft_comm *c, int rank)
{
	static float h[RANKS * N];
	float *x = dev_f32(RANKS * N), *y = dev_f32(RANKS * N);
	weft_comm_work *w1 = NULL, *w2 = NULL;
	int64_t bad = 0;

	/* reduce_scatter: rank r gets block r of the sum */
	for (int64_t i = 0; i < RANKS * N; i++)
		h[i] = (float)val(rank, i);
	up(x, h, RANKS * N * 4);
	{
		weft_comm_buf s = dbuf(x, RANKS * N, WEFT_COMM_F32), r = dbuf(y, N, WEFT_COMM_F32);

		WT_OK(ops->reduce_scatter(c, &s, &r, WEFT_COMM_SUM, NULL));
	}
	down(h, y, N * 4);
	for (int64_t i = 0; i < N; i++)
		bad += h[i] != (float)reduce_ref(RANKS, (int64_t)rank * N + i, WEFT_COMM_SUM);
	WT_CHECK(bad == 0);
	/* all_gather */
	for (int64_t i = 0; i < N; i++)
		h[i] = (float)val(rank, i);
	up(x, h, N * 4);
	{
		weft_comm_buf s = dbuf(x, N, WEFT_COMM_F32), r = dbuf(y, RANKS * N, WEFT_COMM_F32);

		WT_OK(ops->all_gather(c, &s, &r, NULL));
	}
	down(h, y, RANKS * N * 4);
	for (int r = 0; r < RANKS; r++)
		for (int64_t i = 0; i < N; i++)
			bad += h[(int64_t)r * N + i] != (float)val(r, i);
	WT_CHECK(bad == 0);
	/* broadcast from rank 1 */
	for (int64_t i = 0; i < N; i++)
		h[i] = (float)val(rank, i) + (float)rank;
	up(x, h, N * 4);
	{
		weft_comm_buf b = dbuf(x, N, WEFT_COMM_F32);

		WT_OK(ops->broadcast(c, &b, 1, NULL));
	}
	down(h, x, N * 4);
	for (int64_t i = 0; i < N; i++)
		bad += h[i] != (float)val(1, i) + 1.0f;
	WT_CHECK(bad == 0);
	/* all_to_all: block j of rank r goes to rank j */
	for (int j = 0; j < RANKS; j++)
		for (int64_t i = 0; i < N; i++)
			h[(int64_t)j * N + i] = (float)(rank * 100 + j) + (float)(i % 7);
	up(x, h, RANKS * N * 4);
	{
		weft_comm_buf s = dbuf(x, RANKS * N, WEFT_COMM_F32);
		weft_comm_buf r = dbuf(y, RANKS * N, WEFT_COMM_F32);

		WT_OK(ops->all_to_all(c, &s, &r, NULL));
	}
	down(h, y, RANKS * N * 4);
	for (int j = 0; j < RANKS; j++)
		for (int64_t i = 0; i < N; i++)
			bad += h[(int64_t)j * N + i] != (float)(j * 100 + rank) + (float)(i % 7);
	WT_CHECK(bad == 0);
	WT_OK(ops->barrier(c, NULL));
	/* send/recv: 0 -> 1 (sender first on 0, receiver first on 1), then 1 -> 0 */
	if (rank < 2) {
		weft_comm_buf b = dbuf(x, N, WEFT_COMM_F32);

		for (int64_t i = 0; i < N; i++)
			h[i] = (float)(rank * 1000) + (float)i;
		up(x, h, N * 4);
		if (rank == 0) {
			WT_OK(ops->send(c, &b, 1, NULL));
			WT_OK(ops->recv(c, &b, 1, NULL));
		} else {
			weft_comm_buf t = dbuf(y, N, WEFT_COMM_F32);

			WT_OK(ops->recv(c, &t, 0, NULL));
			WT_OK(ops->send(c, &b, 0, NULL));
			b = t;
		}
		down(h, b.data, N * 4);
		for (int64_t i = 0; i < N; i++)
			bad += h[i] != (float)((1 - rank) * 1000) + (float)i;
	}
	WT_CHECK(bad == 0);
	/* two asynchronous all_reduces, waited last first */
	for (int64_t i = 0; i < N; i++)
		h[i] = (float)val(rank, i);
	up(x, h, N * 4);
	up(y, h, N * 4);
	{
		weft_comm_buf a = dbuf(x, N, WEFT_COMM_F32), b = dbuf(y, N, WEFT_COMM_F32);

		WT_OK(ops->all_reduce(c, &a, &a, WEFT_COMM_SUM, &w1));
		WT_OK(ops->all_reduce(c, &b, &b, WEFT_COMM_MAX, &w2));
		WT_OK(ops->wait(w2, -1));
		WT_OK(ops->wait(w1, -1));
	}
	down(h, x, N * 4);
	for (int64_t i = 0; i < N; i++)
		bad += h[i] != (float)reduce_ref(RANKS, i, WEFT_COMM_SUM);
	down(h, y, N * 4);
	for (int64_t i = 0; i < N; i++)
		bad += h[i] != (float)reduce_ref(RANKS, i, WEFT_COMM_MAX);
	WT_CHECK(bad == 0);
	cudaFree(x);
	cudaFree(y);
}

/* ranks 0 and 2 as a group of two beside the world group */
static void sub_group(weft_store_client *cl, weft_comm *world, int rank)
{
	float h = (float)(rank + 1), *x = dev_f32(1);
	weft_comm *sub;

	if (rank == 1) {
		WT_OK(ops->barrier(world, NULL));
		cudaFree(x);
		return;
	}
	sub = init(cl, "evens", rank / 2, 2);
	WT_CHECK(ops->rank(sub) == rank / 2 && ops->size(sub) == 2);
	up(x, &h, 4);
	{
		weft_comm_buf b = dbuf(x, 1, WEFT_COMM_F32);

		WT_OK(ops->all_reduce(sub, &b, &b, WEFT_COMM_SUM, NULL));
	}
	down(&h, x, 4);
	WT_CHECK(h == 1.0f + 3.0f);
	ops->destroy(sub);
	WT_OK(ops->barrier(world, NULL));
	cudaFree(x);
}

static void rank_main(int rank, int port)
{
	const weft_plugin_desc *desc;
	weft_store_client *cl = NULL;
	weft_comm *c;
	void *h = NULL;

	WT_OK(weft_plugin_open(NCCL_SO, &h, &desc));
	ops = desc->items[0].vtable;
	WT_OK(weft_store_connect("127.0.0.1", port, "nccl-ranks", 5000, &cl));
	c = init(cl, "world", rank, RANKS);
	WT_CHECK(ops->rank(c) == rank && ops->size(c) == RANKS);
	all_reduces(c, rank);
	the_rest(c, rank);
	sub_group(cl, c, rank);
	ops->destroy(c);
	weft_store_client_close(cl);
}

int main(int argc, char **argv)
{
	weft_store_server *srv;
	pid_t pid[RANKS];
	int bad = 0;

	/* a rank: this program again, started as `--rank R PORT` */
	if (argc == 4 && !strcmp(argv[1], "--rank")) {
		alarm(50); /* a hang ends as a failure */
		rank_main(atoi(argv[2]), atoi(argv[3]));
		fflush(NULL);
		return wt_failures ? 1 : 0;
	}
	WT_OK(weft_store_server_start("127.0.0.1", 0, "nccl-ranks", &srv));
	fflush(NULL);
	for (int r = 0; r < RANKS; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			/* exec, not just fork: the store's thread may hold a lock
			 * (the allocator's, under ASan) that a forked copy of this
			 * process would wait on forever */
			char rs[16], ps[16];

			snprintf(rs, sizeof(rs), "%d", r);
			snprintf(ps, sizeof(ps), "%d", weft_store_server_port(srv));
			execl("/proc/self/exe", argv[0], "--rank", rs, ps, (char *)NULL);
			_exit(127);
		}
	}
	for (int r = 0; r < RANKS; r++) {
		int st = 0;

		waitpid(pid[r], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "rank %d ended with %s %d\n", r,
				WIFEXITED(st) ? "exit" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			bad++;
		}
	}
	weft_store_server_stop(srv);
	WT_CHECK(bad == 0);
	return wt_done("test_nccl_ranks_emu");
}
