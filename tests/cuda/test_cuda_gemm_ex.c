/* gemm_lowp_ex on CUDA against the CPU's (kernels/cpu/cpu_gemm_ex.c, itself
 * held to double precision by test_gemm_lowp_ex) on the same 16-bit
 * inputs: BF16 and F16 operands, C of F32 and of the operands' dtype, every
 * epilogue, bias and no bias, beta 0 and 1 (NONE), all four transposes, and
 * sizes whose leading dimensions are multiples of 8 (cuBLASLt's fused
 * epilogues where it takes them) and odd ones (the unfused path: an odd ldc
 * with GELU / DGELU, leading dimensions that are not 16 bytes). A and B are
 * also passed at an offset of one element (2 bytes), which no tensor-core
 * algorithm takes. Per element, M the sum of the magnitudes feeding it
 * (|alpha| sum_l |a_il b_lj| + |bias_j| + |C_ij|, times |gelu'(aux)| for
 * DGELU), v its pre-activation and D its product:
 *   F32 C:    |cuda - cpu| <= 1e-5 M + 1e-6 (1 + |v|) (1 + |D|): the two
 *             sum the same products in different orders (each within
 *             k 2^-24 M, k <= 72 here, of the exact sum) and evaluate
 *             tanh with different ulps (a few 1e-7 of GELU's terms).
 *   16-bit C: the F32 bound plus one unit in the last place of the result
 *             (2^-7 |ref| BF16, 2^-10 |ref| + 2^-24 F16): each side rounds
 *             its own F32 value once, so the two may land on neighbouring
 *             values. The aux GELU saves is held to the same.
 * Also: a call's misuse gives the CPU's error with "cuda:0 kernel
 * gemm_lowp_ex" in front; a second call of a shape reuses its plan (the
 * same results from the cache). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"
#include "precision/gemm_ex_testutil.h"
#include "weft/tensor.h"

/* |cuda - cpu| / tolerance for one value (F32 bound tol32). */
static double ratio(weft_dtype dt, double got, double want, double tol32)
{
	double tol = tol32;

	if (dt == WEFT_BF16)
		tol += ldexp(fabs(want), -7);
	else if (dt == WEFT_F16)
		tol += ldexp(fabs(want), -10) + ldexp(1.0, -24);
	return fabs(got - want) / tol;
}

static double run_case(const ex_case *x)
{
	const int64_t m = x->m, n = x->n, k = x->k, sh = x->shift;
	const int64_t ar = x->ta ? k : m, ac = x->ta ? m : k, br = x->tb ? n : k,
		      bc = x->tb ? k : n;
	const int64_t lda = ac, ldb = bc, ldc = n, na = ar * lda + sh, nb = br * ldb + sh;
	const float alpha = 0.75f;
	size_t cs = ct_size(x->c_dt), cbytes = (size_t)(m * ldc) * cs;
	uint16_t *a = malloc((size_t)na * 2), *b = malloc((size_t)nb * 2);
	float *bias = malloc((size_t)n * 4);
	char *c = malloc(cbytes), *aux = malloc(cbytes), *want = malloc(cbytes),
	     *want_aux = malloc(cbytes), *got = malloc(cbytes), *got_aux = malloc(cbytes);
	ct_dev g = ct_gpu_dev(x->lo);
	void *da, *db, *dc, *daux;
	float *dbias;
	double worst = 0.0;

	WT_REQUIRE(a && b && bias && c && aux && want && want_aux && got && got_aux);
	ex_fill(x, a, na, b, nb, bias, c, aux, m * ldc);
	da = ct_in_raw(&g, a, (size_t)na * 2);
	db = ct_in_raw(&g, b, (size_t)nb * 2);
	dc = ct_in_raw(&g, c, cbytes);
	daux = ct_in_raw(&g, aux, cbytes);
	dbias = ct_in_raw(&g, bias, (size_t)n * 4);
	memcpy(want, c, cbytes);
	memcpy(want_aux, aux, cbytes);
	WT_OK(ct_cpu->gemm_lowp_ex(NULL, x->lo, x->ta, x->tb, m, n, k, alpha, a + sh, lda, b + sh,
				   ldb, x->beta, x->c_dt, want, ldc, x->bias ? bias : NULL, x->epi,
				   x->epi == WEFT_EPI_NONE ? NULL : want_aux));
	WT_OK(ct_gpu->gemm_lowp_ex(ct_kctx, x->lo, x->ta, x->tb, m, n, k, alpha,
				   (uint16_t *)da + sh, lda, (uint16_t *)db + sh, ldb, x->beta,
				   x->c_dt, dc, ldc, x->bias ? dbias : NULL, x->epi,
				   x->epi == WEFT_EPI_NONE ? NULL : daux));
	WT_OK(ct_gpu->copy(ct_kctx, got, dc, cbytes, WEFT_COPY_DEVICE_TO_HOST));
	WT_OK(ct_gpu->copy(ct_kctx, got_aux, daux, cbytes, WEFT_COPY_DEVICE_TO_HOST));
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			int64_t at = i * ldc + j;
			double ref, v, tol;

			ex_expect(x, alpha, a + sh, lda, b + sh, ldb, bias, c, aux, ldc, i, j, &ref, &v,
				  &tol);
			worst = fmax(worst, ratio(x->c_dt, ex_load(x->c_dt, got, at),
						  ex_load(x->c_dt, want, at), tol));
			if (x->epi == WEFT_EPI_GELU)
				worst = fmax(worst, ratio(x->c_dt, ex_load(x->c_dt, got_aux, at),
							  ex_load(x->c_dt, want_aux, at), tol));
		}
	}
	if (worst > 1.0)
		fprintf(stderr, "case %s->%s epi %d bias %d beta %g %s%s shift %d %lldx%lldx%lld: "
			"worst |cuda - cpu| / tol %.3g\n", ct_name(x->lo), ct_name(x->c_dt),
			(int)x->epi, x->bias, (double)x->beta, x->ta ? "T" : "N", x->tb ? "T" : "N",
			x->shift, (long long)m, (long long)n, (long long)k, worst);
	ct_release(&g);
	free(a);
	free(b);
	free(bias);
	free(c);
	free(aux);
	free(want);
	free(want_aux);
	free(got);
	free(got_aux);
	return worst;
}

static void check_against_cpu(void)
{
	/* m x n x k, and A and B one element past an aligned address: multiples
	 * of 8 (fused where cuBLASLt takes the call), odd ones, a k of 9 (lda or
	 * ldb odd by the transposes), and the first again misaligned */
	static const int64_t sizes[][4] = { { 24, 40, 72, 0 }, { 7, 13, 29, 0 }, { 16, 24, 9, 0 },
					    { 24, 40, 72, 1 } };
	double worst = 0.0;
	int cases = 0;
	ex_case x;

	for (int i = 0; ex_case_at(i, sizes, 4, &x); i++) {
		if (!ex_case_valid(&x) || (x.shift && (x.ta || x.tb)))
			continue;
		worst = fmax(worst, run_case(&x));
		cases++;
	}
	printf("%d cases, worst |cuda - cpu| / tolerance %.3f\n", cases, worst);
	WT_CHECK(worst <= 1.0);
}

/* The same shape twice (its plan cached): the same bits. */
static void check_plan_reuse(void)
{
	enum { M = 16, N = 32, K = 24 };
	uint16_t a[M * K], b[K * N], c1[M * N], c2[M * N], x1[M * N], x2[M * N];
	float bias[N];
	ct_dev g = ct_gpu_dev(WEFT_BF16);
	void *da, *db, *dc, *dx;
	float *dbias;

	for (int i = 0; i < M * K; i++)
		a[i] = weft_f32_to_bf16(ex_uniform());
	for (int i = 0; i < K * N; i++)
		b[i] = weft_f32_to_bf16(ex_uniform());
	for (int j = 0; j < N; j++)
		bias[j] = ex_uniform();
	da = ct_in_raw(&g, a, sizeof(a));
	db = ct_in_raw(&g, b, sizeof(b));
	dc = ct_alloc(&g, sizeof(c1));
	dx = ct_alloc(&g, sizeof(x1));
	dbias = ct_in_raw(&g, bias, sizeof(bias));
	for (int r = 0; r < 2; r++) {
		WT_OK(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_BF16, 0, 0, M, N, K, 1.0f, da, K, db, N,
					   0.0f, WEFT_BF16, dc, N, dbias, WEFT_EPI_GELU, dx));
		WT_OK(ct_gpu->copy(ct_kctx, r ? c2 : c1, dc, sizeof(c1),
				   WEFT_COPY_DEVICE_TO_HOST));
		WT_OK(ct_gpu->copy(ct_kctx, r ? x2 : x1, dx, sizeof(x1),
				   WEFT_COPY_DEVICE_TO_HOST));
	}
	WT_CHECK(!memcmp(c1, c2, sizeof(c1)) && !memcmp(x1, x2, sizeof(x1)));
	ct_release(&g);
}

static void check_misuse(void)
{
	ct_dev g = ct_gpu_dev(WEFT_BF16);
	void *p = ct_alloc(&g, 64);
	float *bias = ct_alloc(&g, 16);

	WT_FAILS(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_BF16, 0, 0, 2, 2, 2, 1.0f, p, 2, p, 2, 0.0f,
				      WEFT_F16, p, 2, NULL, WEFT_EPI_NONE, NULL),
		 WEFT_ERR_DTYPE, "cuda:0 kernel gemm_lowp_ex", "c_dt must be F32 or in_dt");
	WT_FAILS(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_BF16, 0, 0, 2, 2, 2, 1.0f, p, 2, p, 2, 0.0f,
				      WEFT_F32, p, 2, bias, WEFT_EPI_DGELU, p),
		 WEFT_ERR_INVALID_ARG, "cuda:0 kernel gemm_lowp_ex", "pass bias NULL");
	WT_FAILS(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_F32, 0, 0, 2, 2, 2, 1.0f, p, 2, p, 2, 0.0f,
				      WEFT_F32, p, 2, NULL, WEFT_EPI_NONE, NULL),
		 WEFT_ERR_DTYPE, "cuda:0 kernel gemm_lowp_ex", "pass BF16 or F16");
	WT_FAILS(ct_gpu->gemm_lowp_ex(NULL, WEFT_BF16, 0, 0, 2, 2, 2, 1.0f, p, 2, p, 2, 0.0f,
				      WEFT_F32, p, 2, NULL, WEFT_EPI_NONE, NULL),
		 WEFT_ERR_INVALID_ARG, "gemm_lowp_ex");
	ct_release(&g);
}

int main(void)
{
	ct_setup("test_cuda_gemm_ex");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, gemm_lowp_ex) &&
		   ct_gpu->gemm_lowp_ex && ct_cpu->gemm_lowp_ex);
	check_against_cpu();
	check_plan_reuse();
	check_misuse();
	ct_teardown();
	return wt_done("test_cuda_gemm_ex");
}
