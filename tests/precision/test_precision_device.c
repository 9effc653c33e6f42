/* 16-mixed's overflow test on device memory without a GPU: the CUDA path of
 * weft_grads_nonfinite_on (core/train/precision_device.c) against a fake
 * CUDA kernel library (fake_precision_cuda.c: host memory behind a table
 * named "cuda", and an unscale_check that computes on the host as the CUDA
 * kernel does). Checks that it
 * - finds the library's extras from the kernel table (dladdr, dlsym);
 * - runs unscale_check once per non-empty array with factor 1, so the
 *   gradients are unchanged, and reads every element;
 * - reports an inf, a -inf or a NaN at the first, a middle or the last
 *   place of any array, and nothing for finite arrays (FLT_MAX included);
 * - refuses a library whose extras lack unscale_check, naming the file
 *   and saying to rebuild.
 * The real kernel is checked against the CPU on a GPU (test_cuda_precision).
 */
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "train/precision.h"
#include "weft/autograd.h"
#include "weft/device.h"
#include "weft/plugin.h"
#include "weft_test.h"

typedef void (*enable_fn)(int on);
typedef void (*counts_fn)(int64_t *calls, int64_t *n);

int main(void)
{
	enum { N = 3000, M = 77 };
	void *so = dlopen(WEFT_FAKE_PRECISION_SO, RTLD_NOW | RTLD_LOCAL);
	weft_kernels_entry_fn entry;
	enable_fn enable;
	counts_fn counts;
	weft_ctx_options o = { .device = { .type = WEFT_DEVICE_CUDA, .index = 0 } };
	weft_ctx *ctx;
	static float a[N], b[M], a0[N];
	const float *arr[3] = { a, b, a };
	int64_t lens[3] = { N, M, 0 }, calls = 0, n = 0;
	const float bad[3] = { INFINITY, -INFINITY, NAN };
	const int64_t at[3] = { 0, N / 2, N - 1 };
	int found = -1;

	WT_REQUIRE(so != NULL);
	entry = (weft_kernels_entry_fn)(uintptr_t)dlsym(so, WEFT_KERNELS_ENTRY_SYMBOL);
	enable = (enable_fn)(uintptr_t)dlsym(so, "fake_precision_enable");
	counts = (counts_fn)(uintptr_t)dlsym(so, "fake_precision_counts");
	WT_REQUIRE(entry && enable && counts);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CUDA, entry(weft_host_services())));
	WT_OK(weft_ctx_create(&o, &ctx));
	for (int i = 0; i < N; i++)
		a[i] = a0[i] = (float)(i % 201 - 100) * 3.5f;
	for (int i = 0; i < M; i++)
		b[i] = i % 2 ? FLT_MAX : -FLT_MAX;

	/* an older library: no unscale_check */
	enable(0);
	WT_FAILS(weft_grads_nonfinite_on(ctx, arr, lens, 3, &found), WEFT_ERR_UNSUPPORTED,
		 "16-mixed on cuda", "fake_precision_cuda.so", "unscale_check",
		 "rebuild the CUDA kernels");
	enable(1);

	WT_OK(weft_grads_nonfinite_on(ctx, arr, lens, 3, &found));
	WT_CHECK(found == 0);
	counts(&calls, &n);
	WT_CHECK(calls == 2 && n == N + M); /* the empty array is not launched */
	WT_CHECK(!memcmp(a, a0, sizeof(a))); /* factor 1 */
	for (int k = 0; k < 3; k++) {
		for (int j = 0; j < 3; j++) {
			weft_ctx_step_begin(ctx); /* each call takes its flag from the arena */
			a[at[j]] = bad[k];
			WT_OK(weft_grads_nonfinite_on(ctx, arr, lens, 3, &found));
			WT_CHECK(found == 1);
			a[at[j]] = a0[at[j]];
		}
		b[M - 1] = bad[k];
		WT_OK(weft_grads_nonfinite_on(ctx, arr + 1, lens + 1, 1, &found));
		WT_CHECK(found == 1);
		WT_OK(weft_grads_nonfinite_on(ctx, arr, lens, 1, &found));
		WT_CHECK(found == 0);
		b[M - 1] = FLT_MAX;
	}
	weft_ctx_free(ctx);
	return wt_done("test_precision_device");
}
