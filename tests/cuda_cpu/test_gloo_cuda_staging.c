/* comm gloo on CUDA buffers, on a machine without a GPU: the plugin's
 * staging path runs against a fake of the CUDA kernel library's staging
 * copies (fake_cuda.h), whose "device" addresses fault on any direct CPU
 * access. Three ranks (threads of this process, each with its own store
 * client) run every collective on fake device buffers, twice, and check:
 *   - results are exact (small integers, exactly representable in every
 *     dtype used, partial sums below 256, so any difference is a bug);
 *   - every copy goes between device memory and a live pinned block, with
 *     the buffer's device index;
 *   - the second round allocates no pinned memory (buffers are reused);
 *   - after destroy every pinned block is freed.
 * Before the fake is loaded a CUDA buffer is refused with advice; a failed
 * copy fails the collective naming the staging. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>

#include "dist/dist.h"
#include "plugin/loader_impl.h"
#include "weft/comm.h"
#include "weft_test.h"
#include "fake_cuda.h"
#include "weft/half.h"

#define P 3
#define DEV 2 /* the device index the buffers claim; copies must carry it */

static const weft_comm_ops *ops;
static weft_store_server *srv;
static fake_cuda_dev_alloc_fn dev_alloc;
static fake_cuda_dev_free_fn dev_free;
static fake_cuda_dev_host_fn dev_host;
static fake_cuda_get_stats_fn get_stats;
static fake_cuda_fail_copies_fn fail_copies;
static pthread_barrier_t round_barrier;
static int64_t allocs_after_round1;

static pthread_mutex_t check_mu = PTHREAD_MUTEX_INITIALIZER;

/* A check from a rank thread (wt_checks is not thread-safe by itself). */
static void rcheck(int cond, int r, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&check_mu);
	wt_checks++;
	if (!cond) {
		wt_failures++;
		fprintf(stderr, "rank %d: ", r);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&check_mu);
}

/* A buffer argument: fake device memory (DB) or host memory (HB). */
#define DB(p, n, dt) (&(weft_comm_buf){ .data = (p), .count = (n), .dtype = (dt), \
					.device = WEFT_COMM_DEVICE_CUDA, .device_index = DEV })
#define HB(p, n, dt) (&(weft_comm_buf){ .data = (p), .count = (n), .dtype = (dt), \
					.device = WEFT_COMM_DEVICE_CPU })

static weft_comm_init_args args(weft_store_client *cl, const char *name, int r, int size)
{
	return (weft_comm_init_args){
		.struct_size = sizeof(weft_comm_init_args),
		.rank = r,
		.size = size,
		.store = weft_store_client_vtable(cl),
		.name = name,
		.timeout_ms = 20000,
		.device = WEFT_COMM_DEVICE_CUDA,
		.device_index = DEV,
		.bind_host = "127.0.0.1",
	};
}

/* Typed access to a fake device buffer's contents. */
static float *F(void *dev)
{
	return dev_host(dev);
}

static void round_of_collectives(weft_comm *c, int r, int round)
{
	const int n = 1000, m = 37, k = 50, b = 4, q = 100;
	float *s = dev_alloc(n * 4), *d = dev_alloc(n * 4), *h = calloc(n, 4);
	uint16_t *bf = dev_alloc(m * 2);
	float *rs = dev_alloc(P * 7 * 4), *rsd = dev_alloc(7 * 4);
	int32_t *ag = dev_alloc(P * 9 * 4);
	double *bc = dev_alloc(k * 8);
	int64_t *a2s = dev_alloc(P * b * 8), *a2r = dev_alloc(P * b * 8);
	float *ps = dev_alloc(q * 4), *pr = dev_alloc(q * 4);
	weft_comm_work *ws, *wr;
	int bad;

	/* all_reduce sum, f32, out of place */
	for (int i = 0; i < n; i++)
		F(s)[i] = (float)((r + 1) * (i % 5 + 1));
	WT_OK(ops->all_reduce(c, DB(s, n, WEFT_COMM_F32), DB(d, n, WEFT_COMM_F32),
			      WEFT_COMM_SUM, NULL));
	bad = 0;
	for (int i = 0; i < n; i++)
		bad += F(d)[i] != (float)(6 * (i % 5 + 1)) || F(s)[i] != (float)((r + 1) * (i % 5 + 1));
	rcheck(!bad, r, "round %d: all_reduce f32: %d wrong elements (or send changed)", round, bad);

	/* all_reduce avg, bf16, in place: (1 + 2 + 3) * v / 3 = 2 v */
	for (int i = 0; i < m; i++)
		((uint16_t *)dev_host(bf))[i] = weft_half_f32_to_bf16((float)((r + 1) * (i % 7 + 1)));
	WT_OK(ops->all_reduce(c, DB(bf, m, WEFT_COMM_BF16), DB(bf, m, WEFT_COMM_BF16),
			      WEFT_COMM_AVG, NULL));
	bad = 0;
	for (int i = 0; i < m; i++)
		bad += weft_half_bf16_to_f32(((uint16_t *)dev_host(bf))[i]) != (float)(2 * (i % 7 + 1));
	rcheck(!bad, r, "round %d: all_reduce bf16 avg in place: %d wrong", round, bad);

	/* all_reduce from host memory into device memory (mixed sides) */
	for (int i = 0; i < n; i++)
		h[i] = (float)(r + i % 3);
	WT_OK(ops->all_reduce(c, HB(h, n, WEFT_COMM_F32), DB(d, n, WEFT_COMM_F32),
			      WEFT_COMM_MAX, NULL));
	bad = 0;
	for (int i = 0; i < n; i++)
		bad += F(d)[i] != (float)(P - 1 + i % 3);
	rcheck(!bad, r, "round %d: all_reduce host -> device max: %d wrong", round, bad);

	/* reduce_scatter sum: block j of rank r holds r + j + i */
	for (int j = 0; j < P; j++)
		for (int i = 0; i < 7; i++)
			F(rs)[j * 7 + i] = (float)(r + j + i);
	WT_OK(ops->reduce_scatter(c, DB(rs, P * 7, WEFT_COMM_F32), DB(rsd, 7, WEFT_COMM_F32),
				  WEFT_COMM_SUM, NULL));
	bad = 0;
	for (int i = 0; i < 7; i++)
		bad += F(rsd)[i] != (float)(3 + P * (r + i)); /* sum over ranks of (rank + r + i) */
	rcheck(!bad, r, "round %d: reduce_scatter: %d wrong", round, bad);

	/* all_gather in place, i32 */
	for (int i = 0; i < 9; i++)
		((int32_t *)dev_host(ag))[r * 9 + i] = 100 * r + i;
	WT_OK(ops->all_gather(c, DB(ag + r * 9, 9, WEFT_COMM_I32),
			      DB(ag, P * 9, WEFT_COMM_I32), NULL));
	bad = 0;
	for (int j = 0; j < P; j++)
		for (int i = 0; i < 9; i++)
			bad += ((int32_t *)dev_host(ag))[j * 9 + i] != 100 * j + i;
	rcheck(!bad, r, "round %d: all_gather in place: %d wrong", round, bad);

	/* broadcast f64 from rank 1 */
	for (int i = 0; i < k; i++)
		((double *)dev_host(bc))[i] = r == 1 ? 0.5 * i : -1.0;
	WT_OK(ops->broadcast(c, DB(bc, k, WEFT_COMM_F64), 1, NULL));
	bad = 0;
	for (int i = 0; i < k; i++)
		bad += ((double *)dev_host(bc))[i] != 0.5 * i;
	rcheck(!bad, r, "round %d: broadcast: %d wrong", round, bad);

	/* all_to_all i64: rank r's block j is 10 r + j */
	for (int j = 0; j < P; j++)
		for (int i = 0; i < b; i++)
			((int64_t *)dev_host(a2s))[j * b + i] = 10 * r + j + 1000 * i;
	WT_OK(ops->all_to_all(c, DB(a2s, P * b, WEFT_COMM_I64), DB(a2r, P * b, WEFT_COMM_I64),
			      NULL));
	bad = 0;
	for (int j = 0; j < P; j++)
		for (int i = 0; i < b; i++)
			bad += ((int64_t *)dev_host(a2r))[j * b + i] != 10 * j + r + 1000 * i;
	rcheck(!bad, r, "round %d: all_to_all: %d wrong", round, bad);

	/* a ring of asynchronous send/recv: the recv lands on the device in wait */
	for (int i = 0; i < q; i++) {
		F(ps)[i] = (float)(r * 1000 + i);
		F(pr)[i] = -1.0f;
	}
	WT_OK(ops->send(c, DB(ps, q, WEFT_COMM_F32), (r + 1) % P, &ws));
	WT_OK(ops->recv(c, DB(pr, q, WEFT_COMM_F32), (r + P - 1) % P, &wr));
	WT_OK(ops->wait(wr, -1));
	WT_OK(ops->wait(ws, -1));
	bad = 0;
	for (int i = 0; i < q; i++)
		bad += F(pr)[i] != (float)(((r + P - 1) % P) * 1000 + i);
	rcheck(!bad, r, "round %d: send/recv ring: %d wrong", round, bad);

	WT_OK(ops->barrier(c, NULL));
	dev_free(s);
	dev_free(d);
	free(h);
	dev_free(bf);
	dev_free(rs);
	dev_free(rsd);
	dev_free(ag);
	dev_free(bc);
	dev_free(a2s);
	dev_free(a2r);
	dev_free(ps);
	dev_free(pr);
}

static void *rank_main(void *arg)
{
	int r = (int)(intptr_t)arg;
	weft_store_client *cl;
	weft_comm *c;
	weft_comm_init_args a;
	fake_cuda_stats st;

	WT_OK(weft_store_connect("127.0.0.1", weft_store_server_port(srv), "staging", 10000, &cl));
	a = args(cl, "staged", r, P);
	WT_OK(ops->init(&a, &c));
	round_of_collectives(c, r, 1);
	pthread_barrier_wait(&round_barrier);
	if (r == 0) {
		get_stats(&st);
		allocs_after_round1 = st.pinned_allocs;
	}
	pthread_barrier_wait(&round_barrier);
	round_of_collectives(c, r, 2);
	pthread_barrier_wait(&round_barrier);
	get_stats(&st);
	rcheck(st.pinned_allocs == allocs_after_round1, r,
	       "round 2 allocated pinned memory: %lld blocks after round 1, %lld after round 2",
	       (long long)allocs_after_round1, (long long)st.pinned_allocs);
	pthread_barrier_wait(&round_barrier);
	ops->destroy(c);
	weft_store_client_close(cl);
	return NULL;
}

/* One rank alone: refusals and a failing copy. */
static void test_single(int fake_loaded)
{
	weft_store_client *cl;
	weft_comm *c;
	weft_comm_init_args a;
	weft_comm_buf x;
	void *dev;

	WT_OK(weft_store_connect("127.0.0.1", weft_store_server_port(srv), "staging", 10000, &cl));
	a = args(cl, "single-bad", 0, 1);
	a.device = (weft_comm_device)7;
	WT_FAILS(ops->init(&a, &c), WEFT_ERR_UNSUPPORTED, "comm 'single-bad' rank 0/1: device "
		 "kind 7 is unknown", "moves CPU and CUDA buffers");
	a = args(cl, fake_loaded ? "single-fake" : "single-none", 0, 1);
	WT_OK(ops->init(&a, &c));
	if (!fake_loaded) {
		/* any non-NULL pointer: the call must refuse before touching it */
		x = *DB((void *)((uintptr_t)1 << 55 | 4096), 16, WEFT_COMM_F32);
		WT_FAILS(ops->all_reduce(c, &x, &x, WEFT_COMM_SUM, NULL), WEFT_ERR_UNSUPPORTED,
			 "comm 'single-none' rank 0/1: all_reduce: send is CUDA memory (cuda:2)",
			 "weft_kernels_cuda.so is not loaded", "trainer.comm=nccl");
		x.device = (weft_comm_device)7;
		WT_FAILS(ops->broadcast(c, &x, 0, NULL), WEFT_ERR_UNSUPPORTED,
			 "buf is on device kind 7", "moves CPU and CUDA buffers");
		ops->destroy(c);
		weft_store_client_close(cl);
		return;
	}
	dev = dev_alloc(16 * 4);
	x = *DB(dev, 16, WEFT_COMM_F32);
	fail_copies(1);
	WT_FAILS(ops->all_reduce(c, &x, &x, WEFT_COMM_SUM, NULL), WEFT_ERR_INTERNAL,
		 "all_reduce #1 (f32 x 16, sum) failed: staging cuda:2 memory through pinned host "
		 "memory", "injected copy failure");
	ops->destroy(c);
	dev_free(dev);
	weft_store_client_close(cl);
}

int main(void)
{
	const weft_plugin_desc *desc;
	pthread_t th[P];
	fake_cuda_stats st;
	void *h = NULL, *fake;

	WT_OK(weft_plugin_open(WEFT_GLOO_SO, &h, &desc));
	WT_REQUIRE(desc->count == 1 && desc->items[0].kind == WEFT_PLUGIN_COMM);
	ops = desc->items[0].vtable;
	WT_OK(weft_store_server_start("127.0.0.1", 0, "staging", &srv));

	test_single(0);

	fake = dlopen(WEFT_FAKE_CUDA_SO, RTLD_NOW | RTLD_LOCAL);
	if (!fake)
		fprintf(stderr, "%s\n", dlerror());
	WT_REQUIRE(fake != NULL);
	((fake_cuda_setup_fn)(uintptr_t)dlsym(fake, "fake_cuda_setup"))(weft_host_services());
	dev_alloc = (fake_cuda_dev_alloc_fn)(uintptr_t)dlsym(fake, "fake_cuda_dev_alloc");
	dev_free = (fake_cuda_dev_free_fn)(uintptr_t)dlsym(fake, "fake_cuda_dev_free");
	dev_host = (fake_cuda_dev_host_fn)(uintptr_t)dlsym(fake, "fake_cuda_dev_host");
	get_stats = (fake_cuda_get_stats_fn)(uintptr_t)dlsym(fake, "fake_cuda_get_stats");
	fail_copies = (fake_cuda_fail_copies_fn)(uintptr_t)dlsym(fake, "fake_cuda_fail_copies");
	WT_REQUIRE(dev_alloc && dev_free && dev_host && get_stats && fail_copies);

	pthread_barrier_init(&round_barrier, NULL, P);
	for (int r = 0; r < P; r++)
		WT_REQUIRE(pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r) == 0);
	for (int r = 0; r < P; r++)
		pthread_join(th[r], NULL);
	pthread_barrier_destroy(&round_barrier);

	get_stats(&st);
	WT_CHECK(st.bad_copies == 0);
	WT_CHECK(st.last_index == DEV);
	WT_CHECK(st.copies_to_host > 0 && st.copies_to_device > 0);
	/* each communicator holds at most a send and a recv block, each p2p
	 * handle one; 3 ranks, 2 handles in flight each */
	WT_CHECK(st.pinned_allocs >= P * 2 && st.pinned_allocs <= P * 16);
	WT_CHECK(st.pinned_live == 0 && st.pinned_bytes == 0);
	WT_CHECK(st.pinned_frees == st.pinned_allocs);
	fprintf(stderr, "staging: %lld pinned blocks, %lld copies to host, %lld to device\n",
		(long long)st.pinned_allocs, (long long)st.copies_to_host,
		(long long)st.copies_to_device);

	test_single(1);
	get_stats(&st);
	WT_CHECK(st.pinned_live == 0);

	weft_store_server_stop(srv);
	dlclose(fake);
	dlclose(h);
	return wt_done("test_gloo_cuda_staging");
}
