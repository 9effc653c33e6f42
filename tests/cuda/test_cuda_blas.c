/* gemm and sum_rows on CUDA against the CPU kernels: every transpose
 * combination, padded leading dimensions, batches with shared operands
 * (stride 0) and a shared accumulated C, beta 0 (C ignored, even NaN),
 * beta != 0, k = 0 (also on a shared C, scaled once per product); in F32
 * (no TF32, so 1e-5 relative per sqrt(k)), BF16 and F16 (fp32
 * accumulation; the error is the output rounding). */
#include "cuda_test.h"

struct gemm_case {
	int ta, tb;
	int64_t m, n, k, batch;
	int share_a, share_c;
	float alpha, beta;
};

static void run_gemm(ct_dev *d, const struct gemm_case *g, const float *A, const float *B,
		     const float *C0, int64_t lda, int64_t ldb, int64_t ldc, int64_t sa,
		     int64_t sb, int64_t sc, int64_t na, int64_t nb, int64_t nc, float *out)
{
	void *a = ct_in(d, A, na), *b = ct_in(d, B, nb), *c = ct_in(d, C0, nc);

	WT_OK(d->t->gemm(d->kctx, d->dt, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, lda, sa, b,
			 ldb, sb, g->beta, c, ldc, sc, g->batch));
	ct_out(d, c, nc, out);
	ct_release(d);
}

static void gemm_case(weft_dtype dt, const struct gemm_case *g, uint64_t seed)
{
	int64_t lda = (g->ta ? g->m : g->k) + 3, ldb = (g->tb ? g->k : g->n) + 2, ldc = g->n + 1;
	int64_t size_a = (g->ta ? g->k : g->m) * lda, size_b = (g->tb ? g->n : g->k) * ldb;
	int64_t size_c = g->m * ldc;
	int64_t sa = g->share_a ? 0 : size_a, sb = size_b, sc = g->share_c ? 0 : size_c;
	int64_t na = g->share_a ? size_a : size_a * g->batch, nb = size_b * g->batch;
	int64_t nc = g->share_c ? size_c : size_c * g->batch;
	float *A = ct_random(seed, na, -1.0f, 1.0f, dt);
	float *B = ct_random(seed + 1, nb, -1.0f, 1.0f, dt);
	float *C0 = ct_random(seed + 2, nc, -1.0f, 1.0f, dt);
	float *want = malloc((size_t)nc * sizeof(float)), *got = malloc((size_t)nc * sizeof(float));
	ct_dev cpu = ct_cpu_dev(), gpu = ct_gpu_dev(dt);
	char what[128];
	double depth = g->k > 0 ? sqrt((double)g->k) : 1.0;

	WT_REQUIRE(want && got);
	if (g->beta == 0.0f) /* "beta == 0 ignores C": poison it */
		for (int64_t i = 0; i < nc; i++)
			C0[i] = (i % ldc) < g->n ? NAN : C0[i];
	run_gemm(&cpu, g, A, B, C0, lda, ldb, ldc, sa, sb, sc, na, nb, nc, want);
	run_gemm(&gpu, g, A, B, C0, lda, ldb, ldc, sa, sb, sc, na, nb, nc, got);
	snprintf(what, sizeof(what), "gemm %s%s m %lld n %lld k %lld batch %lld%s%s beta %g",
		 g->ta ? "T" : "N", g->tb ? "T" : "N", (long long)g->m, (long long)g->n,
		 (long long)g->k, (long long)g->batch, g->share_a ? " shared-A" : "",
		 g->share_c ? " shared-C" : "", (double)g->beta);
	/* a shared C sums `batch` products */
	ct_expect_close(what, dt, got, want, nc,
			ct_tol_for(dt, depth * (g->share_c ? (double)g->batch : 1.0)));
	free(A);
	free(B);
	free(C0);
	free(want);
	free(got);
}

static void test_gemm(weft_dtype dt)
{
	static const struct gemm_case cases[] = {
		{ 0, 0, 17, 23, 31, 1, 0, 0, 1.0f, 0.0f },
		{ 0, 1, 17, 23, 31, 1, 0, 0, 1.0f, 0.0f },
		{ 1, 0, 17, 23, 31, 1, 0, 0, 1.0f, 0.0f },
		{ 1, 1, 17, 23, 31, 1, 0, 0, 0.5f, 1.0f },
		{ 0, 1, 64, 48, 128, 3, 0, 0, 2.0f, 0.5f },
		{ 0, 0, 9, 5, 7, 4, 1, 0, 1.0f, 0.0f },   /* one A for every batch */
		{ 1, 0, 6, 5, 11, 3, 0, 1, 1.0f, 1.0f },  /* one C accumulated over the batch */
		{ 0, 0, 5, 6, 0, 2, 0, 0, 1.0f, 0.25f },  /* k = 0: C = beta C */
		{ 0, 0, 5, 6, 0, 1, 0, 0, 1.0f, 0.0f },   /* k = 0, beta 0: C = 0 */
		{ 0, 0, 5, 6, 0, 3, 0, 1, 1.0f, 0.5f },   /* k = 0, one C: beta applied 3 times */
		{ 0, 0, 1, 1, 1, 1, 0, 0, 1.0f, 0.0f },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		gemm_case(dt, &cases[i], 1000 + 10 * i);
}

static void test_sum_rows(weft_dtype dt)
{
	static const int64_t shapes[][2] = { { 1000, 37 }, { 3, 1 }, { 1, 70 }, { 4096, 768 } };

	for (size_t s = 0; s < 4; s++) {
		int64_t rows = shapes[s][0], cols = shapes[s][1];
		float *x = ct_random(50 + s, rows * cols, -1.0f, 1.0f, dt);
		float *y0 = ct_random(60 + s, cols, -1.0f, 1.0f, dt);
		float *want = malloc((size_t)cols * sizeof(float));
		float *got = malloc((size_t)cols * sizeof(float));
		ct_dev cpu = ct_cpu_dev(), gpu = ct_gpu_dev(dt);
		ct_dev *sides[2] = { &cpu, &gpu };
		float *outs[2] = { want, got };

		for (int k = 0; k < 2; k++) {
			ct_dev *d = sides[k];
			void *xd = ct_in(d, x, rows * cols), *yd = ct_in(d, y0, cols);

			WT_OK(d->t->sum_rows(d->kctx, d->dt, rows, cols, xd, yd));
			ct_out(d, yd, cols, outs[k]);
			ct_release(d);
		}
		/* sums of `rows` terms of size 1: error grows with sqrt(rows) */
		ct_expect_close("sum_rows", dt, got, want, cols, ct_tol_for(dt, sqrt((double)rows)));
		free(x);
		free(y0);
		free(want);
		free(got);
	}
}

int main(void)
{
	ct_setup("test_cuda_blas");
	for (int i = 0; i < CT_NDTYPES; i++) {
		test_gemm(ct_float_dtypes[i]);
		test_sum_rows(ct_float_dtypes[i]);
	}
	ct_teardown();
	return wt_done("test_cuda_blas");
}
