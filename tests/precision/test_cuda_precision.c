/* Mixed precision on CUDA against the CPU reference (skipped, 77, without
 * a GPU; scripts/gpu-check runs it with WEFT_CUDA_TESTS_REQUIRE_GPU=1).
 *
 * 1. gemm_lowp (cublasGemmStridedBatchedEx, 16-bit A and B, F32 C,
 *    CUBLAS_COMPUTE_32F) against the CPU's gemm_lowp on the same 16-bit
 *    inputs, every transpose and a strided batch, for bf16 and f16: both
 *    are F32 sums of the same exact products (a 16-bit times 16-bit
 *    product fits F32), so they differ only by summation order: k * 2^-24
 *    of the sum of |products| at worst, which for k = 96 and inputs in
 *    [-1, 1) is below 1e-4 of max |C| (the bound used). A cuBLAS that took
 *    F32 inputs, or rounded C to 16 bits, would be off by 1e-3 or more.
 * 2. weft_op_linear under autocast on a CUDA context against the same on
 *    the CPU: y, dx, dw, db within 1e-4 of each result's max magnitude
 *    (the same bound; the rounding of x, w, dy to 16 bits is the same
 *    round-to-nearest-even on both).
 * 3. 16-mixed's overflow test on device memory (weft_grads_nonfinite_on:
 *    the CUDA library's unscale_check with factor 1): finds an inf, a -inf
 *    or a NaN at any place, nothing in finite arrays, and leaves the
 *    gradients unchanged.
 */
#include <math.h>
#include <string.h>

#include "cuda_test.h"
#include "train/precision.h"
#include "weft/autograd.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "precision_testutil.h"

static void close_to(const char *what, const float *got, const float *want, int64_t n)
{
	double d = max_diff(got, want, n), s = max_abs(want, n);

	if (!(d <= 1e-4 * s))
		fprintf(stderr, "%s: max |cuda - cpu| %.3g, max |cpu| %.3g\n", what, d, s);
	WT_CHECK(d <= 1e-4 * s);
}

static void test_gemm(weft_dtype lo, int ta, int tb)
{
	const int64_t m = 48, n = 40, k = 96, batch = 3;
	const int64_t sa = m * k, sb = k * n, sc = m * n;
	float *a = ct_random(11 + ta, sa * batch, -1, 1, lo);
	float *b = ct_random(23 + tb, sb * batch, -1, 1, lo);
	float *want = calloc((size_t)(sc * batch), 4), *got = calloc((size_t)(sc * batch), 4);
	ct_dev gpu = ct_gpu_dev(lo);
	int64_t lda = ta ? m : k, ldb = tb ? k : n;
	size_t sbytes = ct_cpu->gemm_lowp_scratch(lo, sa * batch, sb * batch);
	void *scratch = malloc(sbytes), *al = malloc((size_t)(sa * batch) * 2);
	void *bl = malloc((size_t)(sb * batch) * 2), *ga, *gb, *gc;
	char what[64];

	WT_REQUIRE(want && got && scratch && al && bl);
	WT_OK(ct_cpu->convert(NULL, sa * batch, WEFT_F32, a, lo, al));
	WT_OK(ct_cpu->convert(NULL, sb * batch, WEFT_F32, b, lo, bl));
	WT_OK(ct_cpu->gemm_lowp(NULL, lo, ta, tb, m, n, k, 1.0f, al, lda, sa, bl, ldb, sb, 0.0f,
				want, n, sc, batch, scratch));
	ga = ct_in(&gpu, a, sa * batch);
	gb = ct_in(&gpu, b, sb * batch);
	gc = ct_alloc(&gpu, (size_t)(sc * batch) * 4);
	WT_OK(ct_gpu->gemm_lowp(ct_kctx, lo, ta, tb, m, n, k, 1.0f, ga, lda, sa, gb, ldb, sb, 0.0f,
				gc, n, sc, batch, NULL));
	ct_out_f32(&gpu, gc, sc * batch, got);
	snprintf(what, sizeof(what), "gemm_lowp %s %c%c", ct_name(lo), ta ? 'T' : 'N',
		 tb ? 'T' : 'N');
	close_to(what, got, want, sc * batch);
	ct_release(&gpu);
	free(a), free(b), free(want), free(got), free(scratch), free(al), free(bl);
}

/* y = x w^T + b and its backward under autocast `lo` on `dev`; results to
 * the host arrays. */
static void linear_on(weft_device dev, weft_dtype lo, const float *xh, const float *wh,
		      const float *bh, const float *dyh, float *y, float *dx, float *dw, float *db)
{
	enum { R = 24, IN = 64, OUT = 40 };
	int64_t xs[2] = { R, IN }, ws[2] = { OUT, IN }, bs[1] = { OUT }, ys[2] = { R, OUT };
	weft_ctx_options o = { .device = dev };
	weft_ctx *ctx;
	weft_tensor *x, *w, *b, *out, *dy;

	WT_OK(weft_ctx_create(&o, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, lo));
	/* the autocast linear layer with F32 activations on both devices
	 * (CUDA's default keeps them in 16 bits: test_cuda_bf16_mixed_fit) */
	WT_OK(weft_ctx_set_lowp_activations(ctx, WEFT_LOWP_ACT_OFF));
	WT_OK(weft_tensor_alloc("x", WEFT_F32, 2, xs, dev, WEFT_MEM_OTHER, &x));
	WT_OK(weft_tensor_alloc("w", WEFT_F32, 2, ws, dev, WEFT_MEM_OTHER, &w));
	WT_OK(weft_tensor_alloc("b", WEFT_F32, 1, bs, dev, WEFT_MEM_OTHER, &b));
	WT_OK(weft_tensor_copy_from_host(x, xh, R * IN * 4));
	WT_OK(weft_tensor_copy_from_host(w, wh, OUT * IN * 4));
	WT_OK(weft_tensor_copy_from_host(b, bh, OUT * 4));
	weft_tensor_requires_grad(x, 1);
	weft_tensor_requires_grad(w, 1);
	weft_tensor_requires_grad(b, 1);
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_linear(ctx, x, w, b, &out));
	WT_OK(weft_ctx_tensor(ctx, "dy", WEFT_F32, 2, ys, &dy));
	WT_OK(weft_tensor_copy_from_host(dy, dyh, R * OUT * 4));
	WT_OK(weft_backward_from(ctx, out, dy));
	WT_OK(weft_tensor_copy_to_host(out, y, R * OUT * 4));
	WT_OK(weft_tensor_copy_to_host(x->grad, dx, R * IN * 4));
	WT_OK(weft_tensor_copy_to_host(w->grad, dw, OUT * IN * 4));
	WT_OK(weft_tensor_copy_to_host(b->grad, db, OUT * 4));
	weft_tensor_free(x);
	weft_tensor_free(w);
	weft_tensor_free(b);
	weft_ctx_free(ctx);
}

static void test_linear(weft_dtype lo)
{
	enum { R = 24, IN = 64, OUT = 40 };
	float *xh = ct_random(1, R * IN, -1, 1, WEFT_F32), *wh = ct_random(2, OUT * IN, -1, 1, WEFT_F32);
	float *bh = ct_random(3, OUT, -1, 1, WEFT_F32), *dyh = ct_random(4, R * OUT, -1, 1, WEFT_F32);
	static float y[2][R * OUT], dx[2][R * IN], dw[2][OUT * IN], db[2][OUT];
	weft_device cuda = { .type = WEFT_DEVICE_CUDA, .index = 0 };

	linear_on(WEFT_CPU, lo, xh, wh, bh, dyh, y[0], dx[0], dw[0], db[0]);
	linear_on(cuda, lo, xh, wh, bh, dyh, y[1], dx[1], dw[1], db[1]);
	close_to("linear y", y[1], y[0], R * OUT);
	close_to("linear dx", dx[1], dx[0], R * IN);
	close_to("linear dw", dw[1], dw[0], OUT * IN);
	close_to("linear db", db[1], db[0], OUT);
	free(xh), free(wh), free(bh), free(dyh);
}

static void test_overflow_check(void)
{
	enum { N = 5000 };
	weft_ctx_options o = { .device = { .type = WEFT_DEVICE_CUDA, .index = 0 } };
	weft_ctx *ctx;
	float *h = ct_random(9, N, -1e4f, 1e4f, WEFT_F32), back[N];
	const float bad[3] = { INFINITY, -INFINITY, NAN };
	const int64_t at[3] = { 0, 2411, N - 1 };
	void *d;
	const float *arr[2];
	int64_t lens[2] = { N, N / 2 };
	int found = -1;

	WT_OK(weft_ctx_create(&o, &ctx));
	WT_OK(weft_device_alloc(o.device, WEFT_MEM_OTHER, N * 4, &d));
	arr[0] = d;
	arr[1] = d; /* the first half again: two arrays in one call */
	WT_OK(ct_gpu->copy(NULL, d, h, N * 4, WEFT_COPY_HOST_TO_DEVICE));
	WT_OK(weft_grads_nonfinite_on(ctx, arr, lens, 2, &found));
	WT_CHECK(found == 0);
	WT_OK(ct_gpu->copy(NULL, back, d, N * 4, WEFT_COPY_DEVICE_TO_HOST));
	WT_CHECK(!memcmp(back, h, sizeof(back))); /* factor 1: unchanged */
	for (int i = 0; i < 3; i++) {
		weft_ctx_step_begin(ctx);
		WT_OK(ct_gpu->copy(NULL, (float *)d + at[i], &bad[i], 4, WEFT_COPY_HOST_TO_DEVICE));
		WT_OK(weft_grads_nonfinite_on(ctx, arr, lens, 1, &found));
		WT_CHECK(found == 1);
		WT_OK(ct_gpu->copy(NULL, (float *)d + at[i], &h[at[i]], 4,
				   WEFT_COPY_HOST_TO_DEVICE));
	}
	weft_device_free(o.device, WEFT_MEM_OTHER, d, N * 4);
	weft_ctx_free(ctx);
	free(h);
}

int main(void)
{
	ct_setup("test_cuda_precision");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, gemm_lowp) && ct_gpu->gemm_lowp);
	for (int t = 0; t < 4; t++) {
		test_gemm(WEFT_BF16, t & 1, t >> 1);
		test_gemm(WEFT_F16, t & 1, t >> 1);
	}
	test_linear(WEFT_BF16);
	test_linear(WEFT_F16);
	test_overflow_check();
	ct_teardown();
	return wt_done("test_cuda_precision");
}
