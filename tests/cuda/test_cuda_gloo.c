/* comm gloo on CUDA buffers, on a GPU: two ranks (processes, as `weft fit
 * --trainer.devices=2` makes them) sharing the GPUs by local rank mod GPU
 * count (core/train/device_map.h); the test shows them one GPU, so both
 * use cuda:0, which NCCL would refuse. Each rank:
 *   - ordering: queues kernels that write a buffer on its compute stream
 *     and issues the all-reduce at once, without synchronizing; the staged
 *     copy must wait for them (the sum is exact: every value is a small
 *     integer). Kernels queued after the wait must see the reduced values;
 *   - DDP equivalence at the kernel level: each rank computes the weight
 *     gradient of its half of a batch (X_r^T dY_r, a cuBLAS GEMM), the
 *     gradients are averaged over gloo in F32 and in BF16, and the result
 *     must match the CPU table's gradient of the whole batch divided by 2
 *     (F32: 1e-5, scaled by sqrt of the batch as cuda_test.h states for
 *     GEMMs; BF16: the rounding of each half and of the average, within
 *     1.6e-2 x 4);
 *   - moves: broadcast, all_gather, reduce_scatter and an asynchronous
 *     send/recv pair between device buffers, compared exactly;
 *   - pinned staging memory is accounted under "comm" while the
 *     communicator lives and released by destroy.
 * Without a GPU it exits 77 (skipped) before starting the ranks. */
#include <limits.h>
#include <unistd.h>

#include "common/spawn.h"
#include "cuda_test.h"
#include "dist/dist.h"
#include "plugin/registry.h"
#include "train/device_map.h"
#include "weft/comm.h"
#include "weft/memory.h"

#define NAME "test_cuda_gloo"

static int R, P;
static weft_device dev;
static const weft_comm_ops *ops;
static weft_comm *comm;

#define DB(p, n, dt) (&(weft_comm_buf){ .data = (p), .count = (n), .dtype = (dt), \
					.device = WEFT_COMM_DEVICE_CUDA, \
					.device_index = dev.index })

static void *dalloc(size_t bytes)
{
	void *p = NULL;

	WT_OK(ct_gpu->mem_alloc(dev.index, WEFT_MEM_OTHER, bytes, &p));
	return p;
}

static void dfree(void *p, size_t bytes)
{
	ct_gpu->mem_free(dev.index, WEFT_MEM_OTHER, p, bytes);
}

/* Kernels still queued on the compute stream when the collective starts. */
static void test_ordering(void)
{
	const int64_t n = (int64_t)1 << 22; /* 16 MiB: the axpys take a while */
	const int reps = 8;
	float *buf = dalloc((size_t)n * 4), *ones = dalloc((size_t)n * 4);
	float *h = malloc((size_t)n * 4);
	int64_t bad = 0;

	WT_REQUIRE(h != NULL);
	WT_OK(ct_gpu->fill(ct_kctx, WEFT_F32, n, (float)(R + 1), ones));
	WT_OK(ct_gpu->zero(ct_kctx, buf, (size_t)n * 4));
	for (int i = 0; i < reps; i++)
		WT_OK(ct_gpu->axpy(ct_kctx, WEFT_F32, n, 1.0f, ones, buf));
	/* no synchronize: the staging copy must wait for the axpys */
	WT_OK(ops->all_reduce(comm, DB(buf, n, WEFT_COMM_F32), DB(buf, n, WEFT_COMM_F32),
			      WEFT_COMM_SUM, NULL));
	/* and work queued after the wait must see the reduced values */
	WT_OK(ct_gpu->scale(ct_kctx, WEFT_F32, n, 0.5f, buf, buf));
	WT_OK(ct_gpu->copy(ct_kctx, h, buf, (size_t)n * 4, WEFT_COPY_DEVICE_TO_HOST));
	/* sum over ranks of reps * (r + 1), halved */
	for (int64_t i = 0; i < n; i++)
		bad += h[i] != 0.5f * (float)(reps * P * (P + 1) / 2);
	if (bad)
		fprintf(stderr, "rank %d: ordering: %lld of %lld elements wrong (first %g)\n", R,
			(long long)bad, (long long)n, (double)h[0]);
	WT_CHECK(bad == 0);
	free(h);
	dfree(buf, (size_t)n * 4);
	dfree(ones, (size_t)n * 4);
}

/* Weight gradient of a linear layer, batch split over the ranks. */
static void test_grad_equivalence(void)
{
	const int64_t B = 64, K = 96, M = 80, b = B / 2;
	float *x = ct_random(11, B * K, -1.0f, 1.0f, WEFT_F32);
	float *dy = ct_random(12, B * M, -1.0f, 1.0f, WEFT_F32);
	float *want = calloc((size_t)(K * M), 4), *got = malloc((size_t)(K * M) * 4);
	ct_dev g = ct_gpu_dev(WEFT_F32);
	float *dx, *ddy, *dw;
	uint16_t *dw16;
	ct_tol tol;

	WT_REQUIRE(want && got);
	/* reference: the whole batch on the CPU, averaged over the ranks */
	WT_OK(ct_cpu->gemm(NULL, WEFT_F32, 1, 0, K, M, B, 1.0f / (float)P, x, K, 0, dy, M, 0,
			   0.0f, want, M, 0, 1));
	/* this rank: rows [R b, (R + 1) b) */
	dx = ct_in(&g, x + R * b * K, b * K);
	ddy = ct_in(&g, dy + R * b * M, b * M);
	dw = ct_alloc(&g, (size_t)(K * M) * 4);
	WT_OK(ct_gpu->gemm(ct_kctx, WEFT_F32, 1, 0, K, M, b, 1.0f, dx, K, 0, ddy, M, 0, 0.0f, dw,
			   M, 0, 1));
	WT_OK(ops->all_reduce(comm, DB(dw, K * M, WEFT_COMM_F32), DB(dw, K * M, WEFT_COMM_F32),
			      WEFT_COMM_AVG, NULL));
	ct_out(&g, dw, K * M, got);
	tol = ct_tol_for(WEFT_F32, sqrt((double)B));
	ct_expect_close("ddp-style f32 gradient over gloo vs whole batch", WEFT_F32, got, want,
			K * M, tol);

	/* the same gradient kept in bf16, averaged in bf16 */
	dw16 = ct_alloc(&g, (size_t)(K * M) * 2);
	WT_OK(ct_gpu->gemm(ct_kctx, WEFT_F32, 1, 0, K, M, b, 1.0f, dx, K, 0, ddy, M, 0, 0.0f, dw,
			   M, 0, 1));
	WT_OK(ct_gpu->convert(ct_kctx, K * M, WEFT_F32, dw, WEFT_BF16, dw16));
	WT_OK(ops->all_reduce(comm, DB(dw16, K * M, WEFT_COMM_BF16),
			      DB(dw16, K * M, WEFT_COMM_BF16), WEFT_COMM_AVG, NULL));
	WT_OK(ct_gpu->convert(ct_kctx, K * M, WEFT_BF16, dw16, WEFT_F32, dw));
	ct_out(&g, dw, K * M, got);
	/* entries are about 2 (32 products of values in [-1, 1)); each half
	 * is rounded to bf16 (2^-9 relative) and the average once more, so
	 * the error stays below 2^-7 x 2 ~ 0.016 even where the halves cancel;
	 * cuda_test.h's bf16 figure x 4 (0.064 relative and absolute) */
	tol = ct_tol_for(WEFT_BF16, 4.0);
	ct_expect_close("ddp-style bf16 gradient over gloo vs whole batch", WEFT_BF16, got, want,
			K * M, tol);
	ct_release(&g);
	free(x);
	free(dy);
	free(want);
	free(got);
}

static void test_moves(void)
{
	const int64_t n = 1000;
	ct_dev g = ct_gpu_dev(WEFT_F32);
	float *h = malloc((size_t)(n * P) * 4), *a, *all, *rs, *part;
	weft_comm_work *w;
	int64_t bad = 0;

	WT_REQUIRE(h != NULL);
	/* broadcast from the last rank */
	for (int64_t i = 0; i < n; i++)
		h[i] = R == P - 1 ? (float)(i % 251) : -1.0f;
	a = ct_in(&g, h, n);
	WT_OK(ops->broadcast(comm, DB(a, n, WEFT_COMM_F32), P - 1, NULL));
	ct_out(&g, a, n, h);
	for (int64_t i = 0; i < n; i++)
		bad += h[i] != (float)(i % 251);
	WT_CHECK(bad == 0);

	/* all_gather in place: block r holds r * 1000 + i */
	all = ct_alloc(&g, (size_t)(n * P) * 4);
	for (int64_t i = 0; i < n; i++)
		h[i] = (float)(R * 1000 + i % 997);
	WT_OK(ct_gpu->copy(ct_kctx, all + R * n, h, (size_t)n * 4, WEFT_COPY_HOST_TO_DEVICE));
	WT_OK(ops->all_gather(comm, DB(all + R * n, n, WEFT_COMM_F32),
			      DB(all, n * P, WEFT_COMM_F32), NULL));
	ct_out(&g, all, n * P, h);
	bad = 0;
	for (int r = 0; r < P; r++)
		for (int64_t i = 0; i < n; i++)
			bad += h[r * n + i] != (float)(r * 1000 + i % 997);
	WT_CHECK(bad == 0);

	/* reduce_scatter of the gathered blocks: block R summed over ranks */
	rs = ct_alloc(&g, (size_t)n * 4);
	WT_OK(ops->reduce_scatter(comm, DB(all, n * P, WEFT_COMM_F32), DB(rs, n, WEFT_COMM_F32),
				  WEFT_COMM_SUM, NULL));
	ct_out(&g, rs, n, h);
	bad = 0;
	for (int64_t i = 0; i < n; i++)
		bad += h[i] != (float)(P * (R * 1000 + i % 997));
	WT_CHECK(bad == 0);

	/* rank 0 sends to rank 1, asynchronously; the receiver's buffer is
	 * written on the device by its wait */
	part = ct_alloc(&g, (size_t)n * 4);
	if (R == 0) {
		WT_OK(ops->send(comm, DB(rs, n, WEFT_COMM_F32), 1, &w));
		WT_OK(ops->wait(w, -1));
	} else if (R == 1) {
		WT_OK(ops->recv(comm, DB(part, n, WEFT_COMM_F32), 0, &w));
		WT_OK(ops->wait(w, -1));
		ct_out(&g, part, n, h);
		bad = 0;
		for (int64_t i = 0; i < n; i++)
			bad += h[i] != (float)(P * (i % 997)); /* rank 0's reduce_scatter block */
		WT_CHECK(bad == 0);
	}
	WT_OK(ops->barrier(comm, NULL));
	ct_release(&g);
	free(h);
}

static int rank_main(void)
{
	weft_dist_env env;
	weft_store_client *store;
	weft_registry *reg;
	weft_mem_stats before, during, after;
	const void *vt;
	char path[4096];
	weft_comm_init_args a;

	WT_OK(weft_dist_env_detect(&env));
	R = env.rank;
	P = env.world_size;
	dev = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
	WT_OK(weft_device_map_apply(&dev, env.local_rank, env.local_world_size, "gloo"));
	WT_OK(weft_kernels_get(WEFT_CPU, &ct_cpu));
	WT_OK(weft_kernels_get(dev, &ct_gpu));
	WT_OK(ct_gpu->ctx_create(dev.index, &ct_kctx));
	fprintf(stderr, "rank %d/%d (local %d/%d) on cuda:%d\n", R, P, env.local_rank,
		env.local_world_size, (int)dev.index);
	WT_REQUIRE(dev.index == 0); /* one visible GPU, shared */

	WT_OK(weft_store_connect(env.store_host, env.store_port, env.secret, 30000, &store));
	WT_OK(weft_registry_create(&reg));
	snprintf(path, sizeof(path), "%s/comm_gloo.so", WEFT_PLUGIN_DIR_FOR_TESTS);
	WT_OK(weft_registry_add_file(reg, path));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_COMM, "gloo", &vt, NULL));
	ops = vt;
	a = (weft_comm_init_args){
		.struct_size = sizeof(a),
		.rank = R,
		.size = P,
		.store = weft_store_client_vtable(store),
		.name = "cuda-gloo",
		.timeout_ms = 60000,
		.device = WEFT_COMM_DEVICE_CUDA,
		.device_index = dev.index,
		.bind_host = "127.0.0.1",
	};
	weft_mem_get_stats(&before);
	WT_OK(ops->init(&a, &comm));
	test_ordering();
	test_grad_equivalence();
	test_moves();
	weft_mem_get_stats(&during);
	/* the 16 MiB staged both ways is pinned and counted as comm memory */
	WT_CHECK(during.current[WEFT_MEM_COMM] - before.current[WEFT_MEM_COMM] >=
		 ((int64_t)1 << 22) * 4);
	ops->destroy(comm);
	weft_mem_get_stats(&after);
	WT_CHECK(after.current[WEFT_MEM_COMM] == before.current[WEFT_MEM_COMM]);
	ct_teardown();
	weft_registry_free(reg);
	weft_store_client_close(store);
	return wt_done(NAME " rank");
}

int main(int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t len;
	wt_spawn_result res;

	if (argc > 1 && !strcmp(argv[1], "rank"))
		return rank_main();
	ct_require_gpu(NAME);
	/* both ranks see one GPU (the first visible), so they share it on any
	 * machine: local ranks 0 and 1 map to cuda:0 */
	{
		const char *vis = getenv("CUDA_VISIBLE_DEVICES");
		char first[64] = "0";

		if (vis && *vis) {
			snprintf(first, sizeof(first), "%s", vis);
			first[strcspn(first, ",")] = '\0';
		}
		setenv("CUDA_VISIBLE_DEVICES", first, 1);
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	WT_REQUIRE(len > 0);
	self[len] = '\0';
	{
		char *child[] = { self, "rank", NULL };

		WT_REQUIRE(wt_spawn(2, child, 100.0, &res) == 0);
	}
	WT_CHECK(!res.hung);
	for (int r = 0; r < res.n; r++)
		WT_CHECK(wt_spawn_exited(&res, r, 0));
	return wt_done(NAME);
}
