/* The NCCL plugin orders its comm stream after the compute streams with
 * events, and with nothing else (no legacy default stream, no device-wide
 * synchronize): plugins/comm/nccl and the emulated kernel library, two
 * ranks on two emulated devices (EMU_DEVICES=2), whose streams really
 * defer work.
 *
 *   test_nccl_compute_order_emu            (test_nccl_compute_order_emu)
 *       each rank fills a buffer with rank + 1 on a kernel-table context's
 *       stream and, without synchronizing, all-reduces it (asynchronously,
 *       then blocking); a second context (pp computes micro-batches on
 *       several) fills another buffer the same way. Every element must be
 *       1 + 2 = 3 exactly (small integers: tolerance 0). The fill is only
 *       queued when the collective is issued, so this holds only when the
 *       comm stream waits for the contexts' events
 *       (weft_cuda_extras.stream_wait_compute); with that wait removed the
 *       emulator runs the collective first and it reduces zeros.
 *   test_nccl_compute_order_emu foreign    (nccl_emu_catches_unordered_compute)
 *       on purpose, the buffer is written by a copy on a stream that is no
 *       kernel-table context's (a blocking stream the test made), which the
 *       plugin does not order after: the program must read stale data and
 *       exit 1 saying so. Ordering through the legacy default stream (the
 *       plugin's earlier scheme, which waits for every blocking stream)
 *       would hide this; so the pair proves the events are the order.
 *   test_nccl_compute_order_emu old-kernels (nccl_refuses_kernels_before_abi_1_4)
 *       one rank, with WEFT_PLUGIN_PATH naming first a kernel library
 *       whose extras end where ABI 1.3 did (fake_old_kernels.c): an
 *       all-reduce of a device buffer is refused with the advice to
 *       rebuild the kernels, and the communicator is broken after it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "dist/dist.h"
#include "plugin/loader_impl.h"
#include "weft/comm.h"
#include "weft/device.h"
#include "weft_test.h"

#define NCCL_SO WEFT_EMU_PLUGIN_DIR "/comm_nccl.so"
#define RANKS 2
#define N 1000

static const weft_comm_ops *ops;
static const weft_kernel_table *k;

static weft_comm_buf dbuf(void *p, int rank)
{
	return (weft_comm_buf){ .data = p, .count = N, .dtype = WEFT_COMM_F32,
				.device = WEFT_COMM_DEVICE_CUDA, .device_index = rank };
}

/* Elements of the F32 device buffer x (read on kctx) that are not want. */
static int64_t count_bad(void *kctx, const float *x, float want)
{
	static float h[N];
	int64_t bad = 0;

	WT_OK(k->copy(kctx, h, x, sizeof(h), WEFT_COPY_DEVICE_TO_HOST));
	WT_OK(k->synchronize(kctx));
	for (int64_t i = 0; i < N; i++)
		bad += h[i] != want;
	if (bad)
		fprintf(stderr, "rank buffer: %lld of %d elements are not %g (x[0] = %g)\n",
			(long long)bad, N, want, h[0]);
	return bad;
}

static void *dev_buf(int rank, void *kctx)
{
	void *p = NULL;

	WT_OK(k->mem_alloc(rank, WEFT_MEM_OTHER, N * sizeof(float), &p));
	WT_OK(k->zero(kctx, p, N * sizeof(float)));
	WT_OK(k->synchronize(kctx));
	return p;
}

/* Compute on two contexts, then collectives with no synchronize between. */
static void ordered(weft_comm *c, int rank)
{
	void *ka = NULL, *kb = NULL;
	float *x, *y;
	weft_comm_work *w = NULL;
	weft_comm_buf bx, by;

	WT_OK(k->ctx_create(rank, &ka));
	WT_OK(k->ctx_create(rank, &kb));
	x = dev_buf(rank, ka);
	y = dev_buf(rank, kb);
	bx = dbuf(x, rank);
	by = dbuf(y, rank);

	/* asynchronous: issue, then wait */
	WT_OK(k->fill(ka, WEFT_F32, N, (float)(rank + 1), x));
	WT_OK(ops->all_reduce(c, &bx, &bx, WEFT_COMM_SUM, &w));
	WT_OK(ops->wait(w, -1));
	WT_CHECK(count_bad(ka, x, 3.0f) == 0);

	/* blocking, on a second context's output */
	WT_OK(k->fill(kb, WEFT_F32, N, (float)(rank + 1), y));
	WT_OK(ops->all_reduce(c, &by, &by, WEFT_COMM_SUM, NULL));
	WT_CHECK(count_bad(kb, y, 3.0f) == 0);

	/* and again on the first, after the collective's wait (compute issued
	 * after wait runs after the collective) */
	WT_OK(k->fill(ka, WEFT_F32, N, (float)(10 * (rank + 1)), x));
	WT_OK(ops->all_reduce(c, &bx, &bx, WEFT_COMM_SUM, NULL));
	WT_CHECK(count_bad(ka, x, 30.0f) == 0);

	k->mem_free(rank, WEFT_MEM_OTHER, x, N * sizeof(float));
	k->mem_free(rank, WEFT_MEM_OTHER, y, N * sizeof(float));
	k->ctx_destroy(ka);
	k->ctx_destroy(kb);
}

/* The buffer written on a stream the plugin does not know; returns 1 when
 * the all-reduce read stale data (what this mode expects). */
static int foreign(weft_comm *c, int rank)
{
	static float h[N];
	void *kctx = NULL;
	cudaStream_t s;
	float *x, *pin = NULL;
	weft_comm_buf bx;
	int64_t bad;

	WT_OK(k->ctx_create(rank, &kctx)); /* a context exists, but is not the writer */
	x = dev_buf(rank, kctx);
	bx = dbuf(x, rank);
	WT_REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
	WT_REQUIRE(cudaMallocHost((void **)&pin, sizeof(h)) == cudaSuccess);
	for (int i = 0; i < N; i++)
		pin[i] = (float)(rank + 1);
	WT_REQUIRE(cudaMemcpyAsync(x, pin, sizeof(h), cudaMemcpyHostToDevice, s) == cudaSuccess);
	WT_OK(ops->all_reduce(c, &bx, &bx, WEFT_COMM_SUM, NULL));
	/* the wait of a device collective leaves the waiting to the device: a
	 * barrier, which the host waits for, runs the comm stream's work (the
	 * all-reduce first) before anything forces the foreign copy */
	WT_OK(ops->barrier(c, NULL));
	WT_REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
	/* what the collective left: read after the foreign copy ran, so an
	 * unordered reduce shows as rank + 1 (the copy came last) */
	bad = count_bad(kctx, x, 3.0f);
	cudaFreeHost(pin);
	cudaStreamDestroy(s);
	k->mem_free(rank, WEFT_MEM_OTHER, x, N * sizeof(float));
	k->ctx_destroy(kctx);
	return bad > 0;
}

/* One rank over a kernel library built before ABI 1.4. */
static void old_kernels(void)
{
	weft_comm_init_args a = {
		.struct_size = sizeof(weft_comm_init_args), .rank = 0, .size = 1,
		.name = "old", .timeout_ms = 20000, .device = WEFT_COMM_DEVICE_CUDA,
		.device_index = 0,
	};
	const weft_plugin_desc *desc;
	weft_store_server *srv;
	weft_store_client *cl = NULL;
	weft_comm *c = NULL;
	void *h = NULL, *kctx = NULL, *x;
	weft_comm_buf b;

	WT_OK(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &k));
	WT_OK(weft_plugin_open(NCCL_SO, &h, &desc));
	ops = desc->items[0].vtable;
	WT_OK(weft_store_server_start("127.0.0.1", 0, "nccl-old", &srv));
	WT_OK(weft_store_connect("127.0.0.1", weft_store_server_port(srv), "nccl-old", 5000, &cl));
	a.store = weft_store_client_vtable(cl);
	WT_OK(ops->init(&a, &c));
	WT_REQUIRE(c != NULL);
	WT_OK(k->ctx_create(0, &kctx));
	x = dev_buf(0, kctx);
	b = dbuf(x, 0);
	WT_FAILS(ops->all_reduce(c, &b, &b, WEFT_COMM_SUM, NULL), WEFT_ERR_UNSUPPORTED,
		 "nccl: comm 'old' rank 0/1: all_reduce", "fake/weft_kernels_cuda.so",
		 "was built before ABI 1.4 and cannot order the comm stream after its compute "
		 "streams", "rebuild the CUDA kernels with this weft");
	/* broken from then on, saying why */
	WT_FAILS(ops->all_reduce(c, &b, &b, WEFT_COMM_SUM, NULL), WEFT_ERR_COMM,
		 "the communicator broke earlier", "was built before ABI 1.4");
	k->mem_free(0, WEFT_MEM_OTHER, x, N * sizeof(float));
	k->ctx_destroy(kctx);
	ops->destroy(c);
	weft_store_client_close(cl);
	weft_store_server_stop(srv);
}

static int rank_main(int rank, int port, int foreign_mode)
{
	weft_comm_init_args a = {
		.struct_size = sizeof(weft_comm_init_args), .rank = rank, .size = RANKS,
		.name = "world", .timeout_ms = 20000, .device = WEFT_COMM_DEVICE_CUDA,
		.device_index = rank,
	};
	const weft_plugin_desc *desc;
	weft_store_client *cl = NULL;
	weft_comm *c = NULL;
	void *h = NULL;
	int stale = 0;

	WT_OK(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = rank }, &k));
	WT_OK(weft_plugin_open(NCCL_SO, &h, &desc));
	ops = desc->items[0].vtable;
	WT_OK(weft_store_connect("127.0.0.1", port, "nccl-order", 5000, &cl));
	a.store = weft_store_client_vtable(cl);
	WT_OK(ops->init(&a, &c));
	WT_REQUIRE(c != NULL);
	if (foreign_mode)
		stale = foreign(c, rank);
	else
		ordered(c, rank);
	ops->destroy(c);
	weft_store_client_close(cl);
	return stale;
}

int main(int argc, char **argv)
{
	int foreign_mode = argc > 1 && !strcmp(argv[1], "foreign");

	if (argc > 1 && !strcmp(argv[1], "old-kernels")) {
		old_kernels();
		return wt_done("test_nccl_compute_order_emu old-kernels");
	}
	weft_store_server *srv;
	pid_t pid[RANKS];
	int bad = 0, stale = 0, n = 0;

	/* a rank: this program again, as `--rank R PORT MODE` */
	if (argc == 5 && !strcmp(argv[1], "--rank")) {
		int r;

		alarm(50); /* a hang ends as a failure */
		r = rank_main(atoi(argv[2]), atoi(argv[3]), !strcmp(argv[4], "foreign"));
		fflush(NULL);
		return wt_failures ? 1 : r ? 3 : 0;
	}
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < RANKS) {
		fprintf(stderr, "test_nccl_compute_order_emu: needs %d devices (EMU_DEVICES=%d), "
			"found %d\n", RANKS, RANKS, n);
		return 1;
	}
	WT_OK(weft_store_server_start("127.0.0.1", 0, "nccl-order", &srv));
	fflush(NULL);
	for (int r = 0; r < RANKS; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			/* exec, not just fork: the store's thread may hold a lock */
			char rs[16], ps[16];

			snprintf(rs, sizeof(rs), "%d", r);
			snprintf(ps, sizeof(ps), "%d", weft_store_server_port(srv));
			execl("/proc/self/exe", argv[0], "--rank", rs, ps,
			      foreign_mode ? "foreign" : "ordered", (char *)NULL);
			_exit(127);
		}
	}
	for (int r = 0; r < RANKS; r++) {
		int st = 0;

		waitpid(pid[r], &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
			stale++;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "rank %d ended with %s %d\n", r,
				WIFEXITED(st) ? "exit" : "signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			bad++;
		}
	}
	weft_store_server_stop(srv);
	WT_CHECK(bad == 0);
	if (foreign_mode) {
		if (stale) {
			fprintf(stderr, "test_nccl_compute_order_emu: all_reduce read stale data on "
				"%d rank(s): the comm stream is not ordered after a stream that is "
				"no kernel-table context's\n", stale);
			return 1;
		}
		printf("test_nccl_compute_order_emu: foreign: the all_reduce saw the foreign "
		       "stream's copy (something orders the comm stream after every stream)\n");
		return wt_failures ? 1 : 0;
	}
	WT_CHECK(stale == 0);
	return wt_done("test_nccl_compute_order_emu");
}
