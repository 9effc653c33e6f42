/* The NCCL comm plugin on one rank. Everywhere: the plugin loads, and init
 * refuses quickly and clearly where it cannot work (no GPU, host memory, a
 * GPU that does not exist). On a GPU: the unique id goes through a real
 * rendezvous store, every collective runs (one rank: results equal the
 * inputs, avg included) on device and on host buffers (staged),
 * asynchronous handles complete, bad buffers give advice, a collective that cannot complete (a send with no receive) ends
 * within its deadline instead of hanging, and after that or an abort the
 * communicator fails fast. */
#include <dlfcn.h>
#include <time.h>

#include "cuda_test.h"
#include "dist/dist.h"
#include "plugin/loader_impl.h"
#include "weft/comm.h"

#define NCCL_SO WEFT_PLUGIN_DIR_FOR_TESTS "/comm_nccl.so"

static const weft_comm_ops *ops;
static weft_store_server *srv;
static weft_store_client *cl;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static weft_comm_init_args args(const char *name, weft_comm_device dev, int32_t index,
				int64_t timeout_ms)
{
	return (weft_comm_init_args){
		.struct_size = sizeof(weft_comm_init_args),
		.rank = 0,
		.size = 1,
		.store = weft_store_client_vtable(cl),
		.name = name,
		.timeout_ms = timeout_ms,
		.device = dev,
		.device_index = index,
	};
}

static weft_comm_buf dbuf(void *p, int64_t n, weft_comm_dtype dt)
{
	return (weft_comm_buf){ .data = p, .count = n, .dtype = dt,
				.device = WEFT_COMM_DEVICE_CUDA, .device_index = 0 };
}

static void test_refusals(int gpu)
{
	weft_comm *c = (weft_comm *)1;
	weft_comm_init_args a = args("refuse", WEFT_COMM_DEVICE_CPU, 0, 5000);

	WT_FAILS(ops->init(&a, &c), WEFT_ERR_UNSUPPORTED, "nccl moves GPU memory only",
		 "use trainer.comm=gloo");
	WT_CHECK(c == NULL);
	if (!gpu) {
		a = args("refuse", WEFT_COMM_DEVICE_CUDA, 0, 5000);
		WT_FAILS(ops->init(&a, &c), WEFT_ERR_UNSUPPORTED, "nccl: no CUDA device",
			 "trainer.comm=gloo");
		return;
	}
	a = args("refuse", WEFT_COMM_DEVICE_CUDA, 999, 5000);
	WT_FAILS(ops->init(&a, &c), WEFT_ERR_INVALID_ARG, "device cuda:999 does not exist");
}

static void expect_equal(const char *what, const float *dev, const float *want, int64_t n)
{
	float got[4096];
	int64_t bad = 0;

	WT_REQUIRE(n <= 4096);
	WT_REQUIRE(cudaMemcpy(got, dev, (size_t)n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
	for (int64_t i = 0; i < n; i++)
		bad += got[i] != want[i];
	if (bad)
		fprintf(stderr, "%s: %lld of %lld elements differ\n", what, (long long)bad,
			(long long)n);
	WT_CHECK(bad == 0);
}

static void test_collectives(void)
{
	enum { N = 4096 };
	static float host[N];
	weft_comm_init_args a = args("world", WEFT_COMM_DEVICE_CUDA, 0, 20000);
	weft_comm *c = NULL;
	weft_comm_work *w = NULL;
	float *x, *y;
	int done = 0;

	for (int i = 0; i < N; i++)
		host[i] = (float)(i % 97) - 40.5f;
	WT_REQUIRE(cudaMalloc((void **)&x, sizeof(host)) == cudaSuccess);
	WT_REQUIRE(cudaMalloc((void **)&y, sizeof(host)) == cudaSuccess);
	WT_REQUIRE(cudaMemcpy(x, host, sizeof(host), cudaMemcpyHostToDevice) == cudaSuccess);
	WT_OK(ops->init(&a, &c));
	WT_CHECK(ops->rank(c) == 0 && ops->size(c) == 1);

	for (int op = 0; op < WEFT_COMM_NUM_REDOPS; op++) {
		weft_comm_buf s = dbuf(x, N, WEFT_COMM_F32), r = dbuf(y, N, WEFT_COMM_F32);

		WT_OK(ops->all_reduce(c, &s, &r, (weft_comm_redop)op, NULL));
		expect_equal(weft_comm_redop_name((weft_comm_redop)op), y, host, N);
		WT_OK(ops->all_reduce(c, &s, &s, (weft_comm_redop)op, NULL)); /* in place */
		expect_equal("all_reduce in place", x, host, N);
	}
	{
		weft_comm_buf s = dbuf(x, N, WEFT_COMM_F32), r = dbuf(y, N, WEFT_COMM_F32);

		WT_OK(ops->all_gather(c, &s, &r, NULL));
		expect_equal("all_gather", y, host, N);
		WT_OK(ops->reduce_scatter(c, &s, &r, WEFT_COMM_SUM, NULL));
		expect_equal("reduce_scatter", y, host, N);
		WT_OK(ops->broadcast(c, &s, 0, NULL));
		expect_equal("broadcast", x, host, N);
		WT_OK(ops->all_to_all(c, &s, &r, NULL));
		expect_equal("all_to_all", y, host, N);
		WT_OK(ops->barrier(c, NULL));

		/* asynchronous: a handle, polled, then waited */
		WT_OK(ops->all_reduce(c, &s, &r, WEFT_COMM_SUM, &w));
		WT_REQUIRE(w != NULL);
		for (int i = 0; i < 100000 && !done; i++)
			WT_OK(ops->test(w, &done));
		WT_OK(ops->wait(w, -1));
		expect_equal("async all_reduce", y, host, N);
	}
	{
		/* advice for misuse */
		weft_comm_buf s = dbuf(x, N, WEFT_COMM_F32), h = s, r = dbuf(y, N, WEFT_COMM_BF16);

		/* a GPU buffer described as host memory: advice, not a fault */
		h.device = WEFT_COMM_DEVICE_CPU;
		WT_FAILS(ops->all_reduce(c, &h, &h, WEFT_COMM_SUM, NULL), WEFT_ERR_INVALID_ARG,
			 "comm 'world' rank 0/1", "all_reduce", "says host memory (device cpu) "
			 "but points into the memory of cuda:0", "describe it as device cuda");
		h.device = (weft_comm_device)7;
		WT_FAILS(ops->all_reduce(c, &h, &h, WEFT_COMM_SUM, NULL), WEFT_ERR_UNSUPPORTED,
			 "send is on device kind 7", "moves CUDA buffers, and host buffers");
		WT_FAILS(ops->all_reduce(c, &s, &r, WEFT_COMM_SUM, NULL), WEFT_ERR_DTYPE,
			 "send is f32 but recv is bf16");
		WT_FAILS(ops->broadcast(c, &s, 3, NULL), WEFT_ERR_INVALID_ARG,
			 "root 3 is not a rank of this communicator (0..0)");
	}
	ops->destroy(c);

	/* abort: later calls fail fast */
	a = args("aborted", WEFT_COMM_DEVICE_CUDA, 0, 20000);
	WT_OK(ops->init(&a, &c));
	ops->abort(c);
	{
		weft_comm_buf s = dbuf(x, N, WEFT_COMM_F32);

		WT_FAILS(ops->all_reduce(c, &s, &s, WEFT_COMM_SUM, NULL), WEFT_ERR_COMM,
			 "refused: the communicator broke earlier", "aborted by the host");
	}
	ops->destroy(c);
	cudaFree(x);
	cudaFree(y);
}

static weft_comm_buf hbuf(void *p, int64_t n, weft_comm_dtype dt)
{
	return (weft_comm_buf){ .data = p, .count = n, .dtype = dt,
				.device = WEFT_COMM_DEVICE_CPU };
}

static void fill(float *x, int64_t n, float v)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = v;
}

static int64_t differ(const float *a, const float *b, int64_t n)
{
	int64_t bad = 0;

	for (int64_t i = 0; i < n; i++)
		bad += a[i] != b[i];
	return bad;
}

/* Host buffers (the trainer's loss, eval sums, flags, the config hash)
 * are staged through the plugin's scratch area: on one rank every
 * collective must give back its input exactly (a byte not copied in or
 * out shows as the poison -7), in place and not, mixed with device
 * buffers, asynchronously between device collectives, and past the
 * first scratch size (4 MiB); the scratch is counted as comm memory while
 * the communicator lives and returned at destroy. */
static void test_host_buffers(void)
{
	enum { N = 4096, BIG = 1 << 20 };
	static float src[BIG], dst[BIG];
	double red[2] = { 2.5, 8.0 };
	weft_comm_init_args a = args("hostbuf", WEFT_COMM_DEVICE_CUDA, 0, 20000);
	weft_comm *c = NULL;
	weft_comm_work *w1 = NULL, *w2 = NULL, *w3 = NULL;
	weft_mem_stats before, during, after;
	float *d;

	for (int64_t i = 0; i < BIG; i++)
		src[i] = (float)(i % 1009) * 0.5f - 100.0f;
	WT_REQUIRE(cudaMalloc((void **)&d, N * 4) == cudaSuccess);
	weft_mem_get_stats(&before);
	WT_OK(ops->init(&a, &c));

	for (int op = 0; op < WEFT_COMM_NUM_REDOPS; op++) {
		weft_comm_buf s = hbuf(src, N, WEFT_COMM_F32), r = hbuf(dst, N, WEFT_COMM_F32);
		double r2[2] = { red[0], red[1] };
		weft_comm_buf l = hbuf(r2, 2, WEFT_COMM_F64);

		fill(dst, N, -7.0f);
		WT_OK(ops->all_reduce(c, &s, &r, (weft_comm_redop)op, NULL));
		WT_CHECK(differ(dst, src, N) == 0);
		WT_OK(ops->all_reduce(c, &l, &l, (weft_comm_redop)op, NULL)); /* in place */
		WT_CHECK(r2[0] == 2.5 && r2[1] == 8.0);
	}
	{
		weft_comm_buf s = hbuf(src, N, WEFT_COMM_F32), r = hbuf(dst, N, WEFT_COMM_F32);
		weft_comm_buf dd = dbuf(d, N, WEFT_COMM_F32);

		fill(dst, N, -7.0f);
		WT_OK(ops->all_gather(c, &s, &r, NULL));
		WT_CHECK(differ(dst, src, N) == 0);
		fill(dst, N, -7.0f);
		WT_OK(ops->reduce_scatter(c, &s, &r, WEFT_COMM_SUM, NULL));
		WT_CHECK(differ(dst, src, N) == 0);
		fill(dst, N, -7.0f);
		WT_OK(ops->all_to_all(c, &s, &r, NULL));
		WT_CHECK(differ(dst, src, N) == 0);
		memcpy(dst, src, N * 4);
		WT_OK(ops->broadcast(c, &r, 0, NULL));
		WT_CHECK(differ(dst, src, N) == 0);
		/* in place: all_gather with send at rank 0's block of recv */
		memcpy(dst, src, N * 4);
		WT_OK(ops->all_gather(c, &r, &r, NULL));
		WT_CHECK(differ(dst, src, N) == 0);
		/* host to device and back */
		WT_OK(ops->all_reduce(c, &s, &dd, WEFT_COMM_SUM, NULL));
		expect_equal("host send, device recv", d, src, N);
		fill(dst, N, -7.0f);
		WT_OK(ops->all_reduce(c, &dd, &r, WEFT_COMM_SUM, NULL));
		WT_CHECK(differ(dst, src, N) == 0);
	}
	{
		/* asynchronous: a staged call between device calls, in FIFO order */
		weft_comm_buf dd = dbuf(d, N, WEFT_COMM_F32);
		double r2[2] = { red[0], red[1] };
		weft_comm_buf l = hbuf(r2, 2, WEFT_COMM_F64);
		weft_comm_buf s = hbuf(src, 64, WEFT_COMM_F32), r = hbuf(dst, 64, WEFT_COMM_F32);

		fill(dst, 64, -7.0f);
		WT_OK(ops->all_reduce(c, &dd, &dd, WEFT_COMM_SUM, &w1));
		WT_OK(ops->all_reduce(c, &l, &l, WEFT_COMM_SUM, &w2));
		WT_OK(ops->all_reduce(c, &s, &r, WEFT_COMM_MAX, &w3)); /* a second area */
		WT_OK(ops->wait(w1, -1));
		WT_OK(ops->wait(w3, -1));
		WT_OK(ops->wait(w2, -1));
		WT_CHECK(r2[0] == 2.5 && r2[1] == 8.0);
		WT_CHECK(differ(dst, src, 64) == 0);
	}
	{
		/* past the first area: 4 MiB */
		weft_comm_buf s = hbuf(src, BIG, WEFT_COMM_F32), r = hbuf(dst, BIG, WEFT_COMM_F32);

		fill(dst, BIG, -7.0f);
		WT_OK(ops->all_reduce(c, &s, &r, WEFT_COMM_AVG, NULL));
		WT_CHECK(differ(dst, src, BIG) == 0);
	}
	weft_mem_get_stats(&during);
	/* at least the big area, device and pinned */
	WT_CHECK(during.current[WEFT_MEM_COMM] - before.current[WEFT_MEM_COMM] >= 2 * BIG * 4);
	ops->destroy(c);
	weft_mem_get_stats(&after);
	WT_CHECK(after.current[WEFT_MEM_COMM] == before.current[WEFT_MEM_COMM]);
	cudaFree(d);
}

/* A send nobody receives cannot finish: the deadline ends it. */
static void test_deadline(void)
{
	weft_comm_init_args a = args("stuck", WEFT_COMM_DEVICE_CUDA, 0, 1500);
	weft_comm *c = NULL;
	weft_comm_work *w = NULL;
	float *x;
	double t0;
	weft_status st;

	WT_REQUIRE(cudaMalloc((void **)&x, 1024 * 4) == cudaSuccess);
	WT_OK(ops->init(&a, &c));
	{
		weft_comm_buf s = dbuf(x, 1024, WEFT_COMM_F32);

		t0 = now_s();
		st = ops->send(c, &s, 0, &w);
		if (st == WEFT_OK)
			st = ops->wait(w, 1500);
		/* a timeout, or NCCL refusing the lone self-send: either way no hang */
		WT_CHECK(st == WEFT_ERR_TIMEOUT || st == WEFT_ERR_COMM);
		WT_CHECK(now_s() - t0 < 1.5 + 10.0);
		fprintf(stderr, "stuck send ended after %.2f s: %s\n", now_s() - t0,
			weft_error_last());
		WT_FAILS(ops->barrier(c, NULL), WEFT_ERR_COMM, "broke earlier");
	}
	ops->destroy(c);
	cudaFree(x);
}

int main(void)
{
	const weft_plugin_desc *desc;
	void *h = NULL;
	int n = 0, gpu = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
	const char *req = getenv("WEFT_CUDA_TESTS_REQUIRE_GPU");

	WT_OK(weft_plugin_open(NCCL_SO, &h, &desc));
	WT_REQUIRE(desc->count == 1 && desc->items[0].kind == WEFT_PLUGIN_COMM);
	ops = desc->items[0].vtable;
	WT_CHECK(!strcmp(ops->head.name, "nccl"));
	WT_OK(weft_store_server_start("127.0.0.1", 0, "nccl-smoke", &srv));
	WT_OK(weft_store_connect("127.0.0.1", weft_store_server_port(srv), "nccl-smoke", 5000, &cl));
	test_refusals(gpu);
	if (gpu) {
		test_collectives();
		test_host_buffers();
		test_deadline();
	} else if (req && !strcmp(req, "1")) {
		fprintf(stderr, "test_nccl_smoke: FAILED: a GPU is required "
			"(WEFT_CUDA_TESTS_REQUIRE_GPU=1) but there is none\n");
		wt_failures++;
	}
	weft_store_client_close(cl);
	weft_store_server_stop(srv);
	dlclose(h);
	return wt_done(gpu ? "test_nccl_smoke" : "test_nccl_smoke (no GPU: refusals checked)");
}
