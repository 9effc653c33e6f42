/* Mixed precision's matrix product on the CPU (the reference every device
 * is held to), and the linear layer under autocast.
 *
 * 1. kernel table gemm_lowp with bf16 / f16 inputs equals the F32 GEMM
 *    (cblas_sgemm through the table's gemm) of those same 16-bit values
 *    widened to F32: both take every product exactly (16-bit x 16-bit
 *    fits F32) and sum in F32, in orders that may differ (OpenBLAS's, or
 *    AMX's tiles for BF16 where the CPU has them), so element (i, j) may
 *    differ by the two sums' error bounds, 2 (k + 2) 2^-24 |alpha|
 *    sum_l |a_il b_lj|, plus 2^-22 |C| for the scaling and beta terms.
 *    Cases: every transpose, a batch with strides, padding (ld > cols), a
 *    shared operand (stride 0), beta = 1 accumulation, and shapes that
 *    leave partial AMX tiles in m, n and k and span several threads.
 * 2. It differs from the F32 GEMM of the unrounded inputs by more than
 *    1e-3 (bf16, 8-bit mantissa: each input off by up to 2^-9 relative,
 *    so C moves by ~2^-9 * sqrt(k) * |a||b| ~ 1.6e-2 here) and 1e-4 (f16,
 *    11 bits: ~2e-3 here) of max |C|: the rounding is applied.
 * 3. weft_op_linear under weft_ctx_set_autocast: y, dx, dw, db against the
 *    same references (dx, dw from dy rounded too; db from dy unrounded),
 *    and without autocast the plain F32 results; errors for a bad dtype
 *    and for a kernel table without gemm_lowp, as advice.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/device.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"
#include "precision_testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void fill(float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = uniform();
}

/* x rounded to lo and back (exactly what 16-bit storage keeps) */
static void round_to(weft_dtype lo, const float *x, float *out, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		out[i] = lo == WEFT_BF16 ? weft_bf16_to_f32(weft_f32_to_bf16(x[i])) :
					   weft_f16_to_f32(weft_f32_to_f16(x[i]));
}

typedef struct gemm_case {
	int ta, tb;
	int64_t m, n, k, lda, ldb, ldc, sa, sb, sc, batch;
	float beta;
} gemm_case;

static void check_case(const weft_kernel_table *kt, weft_dtype lo, const gemm_case *g)
{
	int64_t na = weft_gemm_span(g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->lda, g->sa,
				    g->batch);
	int64_t nb = weft_gemm_span(g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->ldb, g->sb,
				    g->batch);
	int64_t nc = weft_gemm_span(g->m, g->n, g->ldc, g->sc, g->batch);
	float *a = malloc(na * 4), *b = malloc(nb * 4), *ar = malloc(na * 4), *br = malloc(nb * 4);
	float *c0 = malloc(nc * 4), *got = malloc(nc * 4), *ref = malloc(nc * 4);
	float *plain = malloc(nc * 4), *bound = malloc(nc * 4);
	uint16_t *al = malloc(na * 2), *bl = malloc(nb * 2);
	size_t sbytes = kt->gemm_lowp_scratch(lo, na, nb);
	void *scratch = malloc(sbytes ? sbytes : 1);
	double scale, d_ref, d_plain, worst = 0;
	const double u = 1.0 / 16777216.0;

	WT_REQUIRE(a && b && ar && br && c0 && got && ref && plain && bound && al && bl && scratch);
	fill(a, na);
	fill(b, nb);
	fill(c0, nc);
	round_to(lo, a, ar, na);
	round_to(lo, b, br, nb);
	WT_OK(weft_convert_host(na, WEFT_F32, a, lo, al));
	WT_OK(weft_convert_host(nb, WEFT_F32, b, lo, bl));
	memcpy(got, c0, nc * 4);
	memcpy(ref, c0, nc * 4);
	memcpy(plain, c0, nc * 4);
	WT_OK(kt->gemm_lowp(NULL, lo, g->ta, g->tb, g->m, g->n, g->k, 0.75f, al, g->lda, g->sa, bl,
			    g->ldb, g->sb, g->beta, got, g->ldc, g->sc, g->batch, scratch));
	WT_OK(kt->gemm(NULL, WEFT_F32, g->ta, g->tb, g->m, g->n, g->k, 0.75f, ar, g->lda, g->sa,
		       br, g->ldb, g->sb, g->beta, ref, g->ldc, g->sc, g->batch));
	WT_OK(kt->gemm(NULL, WEFT_F32, g->ta, g->tb, g->m, g->n, g->k, 0.75f, a, g->lda, g->sa, b,
		       g->ldb, g->sb, g->beta, plain, g->ldc, g->sc, g->batch));
	/* sum_l |a_il b_lj|: the F32 GEMM of the magnitudes */
	for (int64_t i = 0; i < na; i++)
		ar[i] = fabsf(ar[i]);
	for (int64_t i = 0; i < nb; i++)
		br[i] = fabsf(br[i]);
	memset(bound, 0, nc * 4);
	WT_OK(kt->gemm(NULL, WEFT_F32, g->ta, g->tb, g->m, g->n, g->k, 0.75f, ar, g->lda, g->sa,
		       br, g->ldb, g->sb, 0.0f, bound, g->ldc, g->sc, g->batch));
	for (int64_t i = 0; i < nc; i++) {
		double lim = 2.0 * (double)(g->k + 2) * u * bound[i] + 4.0 * u * fabs(ref[i]);
		double d = fabs((double)got[i] - ref[i]);

		if (d > worst * lim)
			worst = lim > 0 ? d / lim : (d > 0 ? INFINITY : worst);
	}
	scale = max_abs(ref, nc);
	d_ref = max_diff(got, ref, nc);
	d_plain = max_diff(got, plain, nc);
	if (worst > 1.0 || d_plain <= (lo == WEFT_BF16 ? 1e-3 : 1e-4) * scale)
		fprintf(stderr, "%s %c%c %lldx%lldx%lld batch %lld: |got - rounded ref| %.3g "
			"(%.3g of its bound), |got - f32| %.3g, max |C| %.3g\n", weft_dtype_name(lo),
			g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', (long long)g->m, (long long)g->n,
			(long long)g->k, (long long)g->batch, d_ref, worst, d_plain, scale);
	WT_CHECK(worst <= 1.0);
	WT_CHECK(d_plain > (lo == WEFT_BF16 ? 1e-3 : 1e-4) * scale);
	free(a), free(b), free(ar), free(br), free(c0), free(got), free(ref), free(plain);
	free(bound);
	free(al), free(bl), free(scratch);
}

static void test_kernel(const weft_kernel_table *kt)
{
	const gemm_case cases[] = {
		{ .m = 33, .n = 47, .k = 70, .lda = 70, .ldb = 47, .ldc = 47, .batch = 1 },
		{ .ta = 1, .m = 33, .n = 47, .k = 70, .lda = 33, .ldb = 47, .ldc = 47, .batch = 1 },
		{ .tb = 1, .m = 33, .n = 47, .k = 70, .lda = 70, .ldb = 70, .ldc = 47, .batch = 1,
		  .beta = 1.0f },
		{ .ta = 1, .tb = 1, .m = 33, .n = 47, .k = 70, .lda = 40, .ldb = 75, .ldc = 50,
		  .batch = 1 },
		/* 3 matrices a stride apart; B shared (stride 0); accumulate */
		{ .m = 16, .n = 24, .k = 64, .lda = 64, .ldb = 24, .ldc = 24, .sa = 16 * 64 + 5,
		  .sb = 0, .sc = 16 * 24, .batch = 3, .beta = 1.0f },
		/* partial tiles everywhere (m 70, n 40: an odd panel, k 100) */
		{ .m = 70, .n = 40, .k = 100, .lda = 100, .ldb = 40, .ldc = 40, .batch = 1 },
		{ .ta = 1, .tb = 1, .m = 70, .n = 40, .k = 100, .lda = 70, .ldb = 100, .ldc = 41,
		  .batch = 1, .beta = 1.0f },
		/* many 32 x 32 blocks, over the kernel threads */
		{ .tb = 1, .m = 256, .n = 200, .k = 520, .lda = 520, .ldb = 520, .ldc = 200,
		  .batch = 1 },
		{ .ta = 1, .m = 200, .n = 256, .k = 384, .lda = 200, .ldb = 256, .ldc = 256,
		  .batch = 1 },
	};

	WT_REQUIRE(WEFT_HAS_MEMBER(kt, weft_kernel_table, gemm_lowp_scratch));
	WT_REQUIRE(kt->gemm_lowp && kt->gemm_lowp_scratch);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_case(kt, WEFT_BF16, &cases[i]);
		check_case(kt, WEFT_F16, &cases[i]);
	}
	/* F32 inputs are gemm itself; other dtypes are refused */
	{
		float a[4] = { 1, 2, 3, 4 }, b[4] = { 5, 6, 7, 8 }, c[4], r[4];

		WT_OK(kt->gemm_lowp(NULL, WEFT_F32, 0, 0, 2, 2, 2, 1.0f, a, 2, 0, b, 2, 0, 0.0f, c, 2,
				    0, 1, NULL));
		WT_OK(kt->gemm(NULL, WEFT_F32, 0, 0, 2, 2, 2, 1.0f, a, 2, 0, b, 2, 0, 0.0f, r, 2, 0,
			       1));
		WT_CHECK(!memcmp(c, r, sizeof(c)));
		WT_FAILS(kt->gemm_lowp(NULL, WEFT_I32, 0, 0, 2, 2, 2, 1.0f, a, 2, 0, b, 2, 0, 0.0f,
				       c, 2, 0, 1, NULL), WEFT_ERR_DTYPE, "gemm_lowp", "F16 or BF16");
	}
}

/* y = x w^T + b under autocast `lo` (F32: off), backward from dy; checks
 * every result against sgemm on the rounded values. */
static void test_linear(weft_dtype lo)
{
	enum { R = 12, IN = 40, OUT = 24 };
	int64_t xs[2] = { R, IN }, ws[2] = { OUT, IN }, bs[1] = { OUT }, ys[2] = { R, OUT };
	weft_ctx *ctx;
	weft_tensor *x, *w, *b, *y, *dy;
	float xr[R * IN], wr[OUT * IN], dyv[R * OUT], dyr[R * OUT];
	float yref[R * OUT], dxref[R * IN], dwref[OUT * IN];
	const weft_kernel_table *kt;

	WT_OK(weft_kernels_get(WEFT_CPU, &kt));
	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, lo));
	WT_CHECK(weft_ctx_autocast(ctx) == lo);
	WT_OK(weft_tensor_alloc("x", WEFT_F32, 2, xs, WEFT_CPU, WEFT_MEM_OTHER, &x));
	WT_OK(weft_tensor_alloc("w", WEFT_F32, 2, ws, WEFT_CPU, WEFT_MEM_OTHER, &w));
	WT_OK(weft_tensor_alloc("b", WEFT_F32, 1, bs, WEFT_CPU, WEFT_MEM_OTHER, &b));
	fill(x->data, R * IN);
	fill(w->data, OUT * IN);
	fill(b->data, OUT);
	fill(dyv, R * OUT);
	weft_tensor_requires_grad(x, 1);
	weft_tensor_requires_grad(w, 1);
	weft_tensor_requires_grad(b, 1);
	if (lo == WEFT_F32) {
		memcpy(xr, x->data, sizeof(xr));
		memcpy(wr, w->data, sizeof(wr));
		memcpy(dyr, dyv, sizeof(dyr));
	} else {
		round_to(lo, x->data, xr, R * IN);
		round_to(lo, w->data, wr, OUT * IN);
		round_to(lo, dyv, dyr, R * OUT);
	}
	for (int r = 0; r < R; r++)
		memcpy(yref + r * OUT, b->data, OUT * 4);
	WT_OK(kt->gemm(NULL, WEFT_F32, 0, 1, R, OUT, IN, 1.0f, xr, IN, 0, wr, IN, 0, 1.0f, yref,
		       OUT, 0, 1));
	WT_OK(kt->gemm(NULL, WEFT_F32, 0, 0, R, IN, OUT, 1.0f, dyr, OUT, 0, wr, IN, 0, 0.0f, dxref,
		       IN, 0, 1));
	WT_OK(kt->gemm(NULL, WEFT_F32, 1, 0, OUT, IN, R, 1.0f, dyr, OUT, 0, xr, IN, 0, 0.0f, dwref,
		       IN, 0, 1));

	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_linear(ctx, x, w, b, &y));
	WT_OK(weft_ctx_tensor(ctx, "dy", WEFT_F32, 2, ys, &dy));
	memcpy(dy->data, dyv, sizeof(dyv));
	WT_OK(weft_backward_from(ctx, y, dy));
	WT_REQUIRE(x->grad && w->grad && b->grad);
	/* same arithmetic (bias added after the product instead of before
	 * under autocast: one rounding apart, 1e-6 of max |y|) */
	WT_CHECK(max_diff(y->data, yref, R * OUT) <= 1e-6 * max_abs(yref, R * OUT));
	WT_CHECK(max_diff(x->grad->data, dxref, R * IN) <= 1e-6 * max_abs(dxref, R * IN));
	WT_CHECK(max_diff(w->grad->data, dwref, OUT * IN) <= 1e-6 * max_abs(dwref, OUT * IN));
	for (int j = 0; j < OUT; j++) {
		double s = 0;

		for (int r = 0; r < R; r++)
			s += dyv[r * OUT + j]; /* db sums the unrounded F32 dy */
		WT_CLOSE(((float *)b->grad->data)[j], s, 1e-5, 1e-5);
	}
	weft_tensor_free(x);
	weft_tensor_free(w);
	weft_tensor_free(b);
	weft_ctx_free(ctx);
}

static void test_errors(void)
{
	const weft_kernel_table *cpu;
	weft_kernel_table bare;
	weft_ctx *ctx;

	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_FAILS(weft_ctx_set_autocast(ctx, WEFT_I32), WEFT_ERR_DTYPE, "autocast to I32",
		 "bf16 or f16");
	WT_CHECK(weft_ctx_autocast(ctx) == WEFT_F32);
	weft_ctx_free(ctx);

	/* a device whose kernels have no gemm_lowp (an older kernel table) */
	WT_OK(weft_kernels_get(WEFT_CPU, &cpu));
	bare = *cpu;
	bare.gemm_lowp = NULL;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &bare));
	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_FAILS(weft_ctx_set_autocast(ctx, WEFT_BF16), WEFT_ERR_UNSUPPORTED, "autocast to BF16",
		 "the cpu kernels have no low-precision matrix product", "precision 32-true");
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_F32));
	weft_ctx_free(ctx);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
}

/* The table's convert between F32 and BF16 is weft_f32_to_bf16 /
 * weft_bf16_to_f32 bit for bit: every BF16 pattern widened, and special
 * values (ties both ways, the largest finites, infinities, NaNs with
 * payloads, subnormals) plus 2^20 random bit patterns rounded, in one call
 * long enough to be split over threads. */
static void test_convert(const weft_kernel_table *kt)
{
	enum { N = 1 << 20 };
	static const uint32_t special[] = { 0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u,
					    0x3f80ffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
					    0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
					    0x00000001u, 0x807fffffu, 0x7f7f8000u };
	uint32_t *src = malloc(N * 4), *wide = malloc(65536 * 4);
	uint16_t *mid = malloc(N * 2), *all = malloc(65536 * 2);
	int64_t bad = 0;

	WT_REQUIRE(src && wide && mid && all);
	for (int64_t i = 0; i < N; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		src[i] = i < (int64_t)(sizeof(special) / 4) ? special[i] : (uint32_t)(rng >> 32);
	}
	WT_OK(kt->convert(NULL, N, WEFT_F32, src, WEFT_BF16, mid));
	for (int64_t i = 0; i < N; i++) {
		float f;

		memcpy(&f, &src[i], 4);
		bad += mid[i] != weft_f32_to_bf16(f);
	}
	WT_CHECK(bad == 0);
	for (int i = 0; i < 65536; i++)
		all[i] = (uint16_t)i;
	WT_OK(kt->convert(NULL, 65536, WEFT_BF16, all, WEFT_F32, wide));
	bad = 0;
	for (int i = 0; i < 65536; i++) {
		float f = weft_bf16_to_f32((uint16_t)i);
		uint32_t w;

		memcpy(&w, &f, 4);
		bad += wide[i] != w;
	}
	WT_CHECK(bad == 0);
	free(src), free(wide), free(mid), free(all);
}

int main(void)
{
	const weft_kernel_table *kt;

	WT_OK(weft_kernels_get(WEFT_CPU, &kt));
	test_convert(kt);
	test_kernel(kt);
	test_linear(WEFT_F32);
	test_linear(WEFT_BF16);
	test_linear(WEFT_F16);
	test_errors();
	return wt_done("test_autocast_gemm");
}
