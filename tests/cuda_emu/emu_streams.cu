/* emu_streams - the emulator's streams and events against the CUDA
 * semantics they model (emu_stream.cpp), and the defect they exist to
 * catch. Built like the kernels: launch_rewrite.pl, then the host C++
 * compiler with cuda_emu.h, linked to libemucuda.
 *
 *   emu_streams            every semantic check below; exits 0 when all hold
 *   emu_streams missing-wait
 *                          on purpose, a kernel on stream B consumes stream
 *                          A's output without cudaStreamWaitEvent: the
 *                          emulator runs B's kernel before A's producer and
 *                          the program exits 1 saying it read stale data
 *                          (a real GPU may or may not show it)
 *   EMU_DEVICES=2 emu_streams devices
 *                          two devices: count, cudaSetDevice, memory and
 *                          streams of each (test_devices)
 *   EMU_DEVICES=2 emu_streams cross-device
 *                          on purpose, a kernel of cuda:1 reads cuda:0's
 *                          memory: the emulator's trap ends the process */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 256

static int failures;

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		if (!(cond)) {                                                          \
			failures++;                                                     \
			fprintf(stderr, "emu_streams: FAILED at line %d: ", __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fprintf(stderr, "\n");                                          \
		}                                                                       \
	} while (0)

#define OK(call) CHECK((call) == cudaSuccess, "%s", #call)

__global__ void k_fill(float *x, float v)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < N)
		x[i] = v + (float)i;
}

/* y = 2 x */
__global__ void k_twice(const float *x, float *y)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < N)
		y[i] = 2.0f * x[i];
}

/* Block 0 has nothing to do and leaves before the barrier the other
 * blocks use to reverse their slice through shared memory. */
__global__ void k_late_barrier(const float *x, float *y)
{
	__shared__ float s[64];
	unsigned t = threadIdx.x, i = blockIdx.x * 64 + t;

	if (blockIdx.x == 0)
		return;
	s[t] = x[i];
	__syncthreads();
	y[i] = s[63 - t];
}

/* The first element of y on the host. */
static float first(const float *y)
{
	float h = -1.0f;

	OK(cudaMemcpy(&h, y, sizeof(h), cudaMemcpyDeviceToHost));
	return h;
}

/* A kernel on B reads what a kernel on A wrote; with `wait` B waits for
 * A's event first. Returns y[0] after B is synchronized (want 2). */
static float producer_consumer(int wait, unsigned b_flags)
{
	cudaStream_t a, b;
	cudaEvent_t ev;
	float *x, *y, got;

	OK(cudaStreamCreate(&a));
	OK(cudaStreamCreateWithFlags(&b, b_flags));
	OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	OK(cudaMalloc((void **)&x, N * sizeof(float)));
	OK(cudaMalloc((void **)&y, N * sizeof(float)));
	OK(cudaMemset(x, 0, N * sizeof(float)));
	OK(cudaMemset(y, 0, N * sizeof(float)));
	k_fill<<<N / 64, 64, 0, a>>>(x, 1.0f);
	OK(cudaEventRecord(ev, a));
	if (wait)
		OK(cudaStreamWaitEvent(b, ev, 0));
	k_twice<<<N / 64, 64, 0, b>>>(x, y);
	OK(cudaStreamSynchronize(b));
	got = first(y);
	OK(cudaStreamDestroy(a));
	OK(cudaStreamDestroy(b));
	OK(cudaEventDestroy(ev));
	OK(cudaFree(x));
	OK(cudaFree(y));
	return got;
}

/* Work runs when forced, not when queued: a copy into pinned memory lands
 * only at the synchronize; an event query forces what the event recorded. */
static void test_deferred(void)
{
	cudaStream_t s;
	cudaEvent_t ev;
	float *x, *pin;

	OK(cudaStreamCreate(&s));
	OK(cudaEventCreate(&ev));
	OK(cudaMalloc((void **)&x, N * sizeof(float)));
	OK(cudaMallocHost((void **)&pin, N * sizeof(float)));
	pin[0] = -7.0f;
	k_fill<<<N / 64, 64, 0, s>>>(x, 5.0f);
	OK(cudaMemcpyAsync(pin, x, N * sizeof(float), cudaMemcpyDeviceToHost, s));
	CHECK(pin[0] == -7.0f, "the copy into pinned memory ran before anything forced it");
	OK(cudaEventRecord(ev, s));
	OK(cudaEventQuery(ev));
	CHECK(pin[0] == 5.0f && pin[N - 1] == 5.0f + N - 1, "cudaEventQuery did not run the "
	      "recorded work: pin[0] = %g", pin[0]);
	/* pageable memory: a copy from it reads the source at the call */
	float host[N];
	for (int i = 0; i < N; i++)
		host[i] = 3.0f;
	OK(cudaMemcpyAsync(x, host, sizeof(host), cudaMemcpyHostToDevice, s));
	host[0] = 99.0f;
	OK(cudaStreamSynchronize(s));
	CHECK(first(x) == 3.0f, "a copy from pageable memory read it late: %g", first(x));
	OK(cudaFreeHost(pin));
	OK(cudaFree(x));
	OK(cudaEventDestroy(ev));
	OK(cudaStreamDestroy(s));
}

/* The legacy default stream waits for blocking streams (and they for it);
 * a cudaStreamNonBlocking stream takes part in neither. */
static void test_legacy(void)
{
	cudaStream_t blk, nb;
	float *x, *y;

	OK(cudaStreamCreate(&blk));
	OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
	OK(cudaMalloc((void **)&x, N * sizeof(float)));
	OK(cudaMalloc((void **)&y, N * sizeof(float)));
	OK(cudaMemset(x, 0, N * sizeof(float)));
	/* blocking producer, legacy consumer: ordered */
	k_fill<<<N / 64, 64, 0, blk>>>(x, 1.0f);
	k_twice<<<N / 64, 64>>>(x, y);
	OK(cudaStreamSynchronize(0));
	CHECK(first(y) == 2.0f, "legacy stream did not wait for a blocking stream: y[0] = %g",
	      first(y));
	/* legacy producer, blocking consumer: ordered */
	k_fill<<<N / 64, 64>>>(x, 4.0f);
	k_twice<<<N / 64, 64, 0, blk>>>(x, y);
	OK(cudaStreamSynchronize(blk));
	CHECK(first(y) == 8.0f, "a blocking stream did not wait for the legacy stream: y[0] = %g",
	      first(y));
	/* non-blocking producer, legacy consumer: not ordered */
	OK(cudaDeviceSynchronize());
	k_fill<<<N / 64, 64, 0, nb>>>(x, 10.0f);
	k_twice<<<N / 64, 64>>>(x, y);
	OK(cudaStreamSynchronize(0));
	CHECK(first(y) == 8.0f, "the legacy stream waited for a non-blocking stream: y[0] = %g "
	      "(want the stale 2 x 4)", first(y));
	OK(cudaDeviceSynchronize());
	CHECK(first(x) == 10.0f, "cudaDeviceSynchronize left work of a non-blocking stream: %g",
	      first(x));
	OK(cudaFree(x));
	OK(cudaFree(y));
	OK(cudaStreamDestroy(blk));
	OK(cudaStreamDestroy(nb));
}

/* Work queued on a stream that is then destroyed still runs; the
 * per-thread default stream is a blocking stream. */
static void test_destroyed_and_per_thread(void)
{
	cudaStream_t s;
	float *x, *y;

	OK(cudaMalloc((void **)&x, N * sizeof(float)));
	OK(cudaMalloc((void **)&y, N * sizeof(float)));
	OK(cudaStreamCreate(&s));
	k_fill<<<N / 64, 64, 0, s>>>(x, 6.0f);
	OK(cudaStreamDestroy(s));
	OK(cudaDeviceSynchronize());
	CHECK(first(x) == 6.0f, "work of a destroyed stream was lost: %g", first(x));
	k_fill<<<N / 64, 64, 0, cudaStreamPerThread>>>(x, 7.0f);
	k_twice<<<N / 64, 64>>>(x, y);
	OK(cudaStreamSynchronize(0));
	CHECK(first(y) == 14.0f, "the legacy stream did not wait for the per-thread stream: %g",
	      first(y));
	OK(cudaFree(x));
	OK(cudaFree(y));
}

/* A barrier only some blocks (or some launches) reach works on each. */
static void test_late_barrier(void)
{
	float hx[N], hy[N], *x, *y;

	for (int i = 0; i < N; i++)
		hx[i] = (float)i;
	OK(cudaMalloc((void **)&x, sizeof(hx)));
	OK(cudaMalloc((void **)&y, sizeof(hy)));
	OK(cudaMemcpy(x, hx, sizeof(hx), cudaMemcpyHostToDevice));
	OK(cudaMemset(y, 0, sizeof(hy)));
	for (int run = 0; run < 2; run++) {
		k_late_barrier<<<N / 64, 64>>>(x, y);
		OK(cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost));
		for (int i = 64; i < N; i++)
			CHECK(hy[i] == hx[i / 64 * 64 + 63 - i % 64], "launch %d: y[%d] = %g", run, i,
			      hy[i]);
	}
	OK(cudaFree(x));
	OK(cudaFree(y));
}

/* ---- host functions (the interface the emulated NCCL builds on) ---- */

struct host_ctx {
	float *x, *y;
	cudaStream_t other;
	float seen;
};

static void host_fn(void *p)
{
	struct host_ctx *c = (struct host_ctx *)p;
	float v = 0.0f;

	c->seen = c->x[1]; /* device memory: plain loads and stores */
	c->x[0] = 42.0f;
	/* runtime calls run at once, on any stream, and do not deadlock */
	CHECK(cudaStreamSynchronize(c->other) == cudaSuccess, "cudaStreamSynchronize in a host fn");
	CHECK(cudaMemcpyAsync(c->y, c->x, sizeof(float), cudaMemcpyDeviceToDevice, c->other) ==
	      cudaSuccess, "cudaMemcpyAsync in a host fn");
	CHECK(cudaMemcpy(&v, c->y, sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
	      v == 42.0f, "cudaMemcpy in a host function did not run at once: %g", v);
	CHECK(cudaMemset(c->y + 1, 0, sizeof(float)) == cudaSuccess, "cudaMemset in a host fn");
	CHECK(cudaStreamSynchronize(0) == cudaSuccess, "cudaStreamSynchronize(0) in a host fn");
}

static void test_host_fn(void)
{
	struct host_ctx c;
	cudaStream_t s;

	OK(cudaStreamCreate(&s));
	OK(cudaStreamCreateWithFlags(&c.other, cudaStreamNonBlocking));
	OK(cudaMalloc((void **)&c.x, N * sizeof(float)));
	OK(cudaMalloc((void **)&c.y, N * sizeof(float)));
	c.seen = -1.0f;
	k_fill<<<N / 64, 64, 0, s>>>(c.x, 1.0f);
	OK(cudaLaunchHostFunc(s, host_fn, &c));
	k_twice<<<N / 64, 64, 0, s>>>(c.x, c.y);
	CHECK(c.seen == -1.0f, "the host function ran before anything forced it");
	OK(cudaStreamSynchronize(s));
	CHECK(c.seen == 2.0f, "the host function did not see the kernel before it: %g", c.seen);
	CHECK(first(c.y) == 84.0f, "the kernel after the host function did not see its store: %g",
	      first(c.y));
	OK(cudaFree(c.x));
	OK(cudaFree(c.y));
	OK(cudaStreamDestroy(s));
	OK(cudaStreamDestroy(c.other));
}

/* Several devices (run with EMU_DEVICES=2): the count, cudaSetDevice's
 * range, memory and streams tagged with the device current when made,
 * and a kernel of each device on its own memory. With `cross`, on
 * purpose, a kernel on device 1's stream reads device 0's memory: the
 * emulator traps it (the process dies of SIGSEGV after an EMU DEFECT). */
static void test_devices(int cross)
{
	struct cudaPointerAttributes at;
	cudaStream_t s[2];
	float *x[2], h = 0.0f;
	int n = 0, d = -1;

	OK(cudaGetDeviceCount(&n));
	CHECK(n == 2, "EMU_DEVICES=2 must give 2 devices, got %d", n);
	CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice, "cuda:2 must not exist");
	cudaGetLastError();
	for (int i = 0; i < 2; i++) {
		OK(cudaSetDevice(i));
		OK(cudaGetDevice(&d));
		CHECK(d == i, "cudaGetDevice must say %d, got %d", i, d);
		OK(cudaStreamCreate(&s[i]));
		OK(cudaMalloc((void **)&x[i], N * sizeof(float)));
		OK(cudaPointerGetAttributes(&at, x[i]));
		CHECK(at.type == cudaMemoryTypeDevice && at.device == i,
		      "memory made on cuda:%d must say device %d, says %d", i, i, at.device);
	}
	for (int i = 0; i < 2; i++) {
		OK(cudaSetDevice(i));
		k_fill<<<N / 64, 64, 0, s[i]>>>(x[i], 10.0f * (float)(i + 1));
		OK(cudaStreamSynchronize(s[i]));
		OK(cudaMemcpy(&h, x[i], sizeof(h), cudaMemcpyDeviceToHost));
		CHECK(h == 10.0f * (float)(i + 1), "cuda:%d's kernel wrote %g", i, h);
	}
	if (cross) {
		OK(cudaSetDevice(1));
		k_twice<<<N / 64, 64, 0, s[1]>>>(x[0], x[1]); /* x[0] is cuda:0's */
		OK(cudaStreamSynchronize(s[1]));
		fprintf(stderr, "emu_streams: a kernel of cuda:1 read cuda:0's memory unseen\n");
		exit(0);
	}
	for (int i = 0; i < 2; i++) {
		OK(cudaSetDevice(i));
		OK(cudaFree(x[i]));
		OK(cudaStreamDestroy(s[i]));
	}
	OK(cudaSetDevice(0));
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "devices") || !strcmp(argv[1], "cross-device"))) {
		test_devices(!strcmp(argv[1], "cross-device"));
		if (failures) {
			fprintf(stderr, "emu_streams: %d checks failed\n", failures);
			return 1;
		}
		printf("emu_streams: devices: all checks passed\n");
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "missing-wait")) {
		float got = producer_consumer(0, cudaStreamDefault);

		if (got != 2.0f) {
			fprintf(stderr, "emu_streams: stream B read stale data: y[0] = %g, want 2 "
				"(its kernel consumes stream A's output without a "
				"cudaStreamWaitEvent)\n", got);
			return 1;
		}
		printf("emu_streams: stream B read A's output (the missing wait went unseen)\n");
		return 0;
	}
	CHECK(producer_consumer(1, cudaStreamDefault) == 2.0f, "with the event wait, B must see A");
	CHECK(producer_consumer(1, cudaStreamNonBlocking) == 2.0f, "the same on a non-blocking B");
	CHECK(producer_consumer(0, cudaStreamNonBlocking) != 2.0f, "without the wait a "
	      "non-blocking B must read stale data");
	test_deferred();
	test_legacy();
	test_destroyed_and_per_thread();
	test_late_barrier();
	test_host_fn();
	if (failures) {
		fprintf(stderr, "emu_streams: %d checks failed\n", failures);
		return 1;
	}
	printf("emu_streams: all checks passed\n");
	return 0;
}
