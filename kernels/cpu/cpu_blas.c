/* Matrix products through OpenBLAS (cblas_sgemm), the low-precision
 * product of mixed precision (AMX tiles for BF16 where the CPU has them),
 * and row sums. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "weft/half.h"
#include "weft/memory.h"

/* Whether a product goes to cpu_sgemm: on a CPU that runs it, for the
 * products of model layers (each dimension at least 32, 2^21 multiply-adds
 * or more), unless WEFT_CPU_GEMM=openblas in the environment. */
static int own_gemm_on;
static pthread_once_t own_gemm_once = PTHREAD_ONCE_INIT;

static void own_gemm_probe(void)
{
	const char *e = getenv("WEFT_CPU_GEMM");

	own_gemm_on = !(e && !strcmp(e, "openblas")) && cpu_sgemm_usable();
}

static int use_own_gemm(int64_t m, int64_t n, int64_t k)
{
	pthread_once(&own_gemm_once, own_gemm_probe);
	return own_gemm_on && m >= 32 && n >= 32 && k >= 32 && m * n * k >= (1 << 21);
}

static void cblas_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
		      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
		      float *c, int64_t ldc)
{
	if (k <= 0) { /* C = beta C, C not read when beta is 0 */
		for (int64_t r = 0; r < m; r++)
			for (int64_t j = 0; j < n; j++)
				c[r * ldc + j] = beta == 0.0f ? 0.0f : beta * c[r * ldc + j];
		return;
	}
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda,
		    b, (int)ldb, beta, c, (int)ldc);
}

void cpu_gemm_1(int tri, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
		const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
		int64_t ldc)
{
	pthread_once(&own_gemm_once, own_gemm_probe);
	if (own_gemm_on && m >= 16 && n >= 16 && k >= 16 &&
	    cpu_sgemm_tri(tri, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, NULL, c,
			  ldc, 1))
		return;
	if (tri == CPU_TRI_NONE) {
		cblas_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
	/* blocks of CPU_TRI_TILE rows [r0, r1), each over what its rows need */
	for (int64_t r0 = 0; r0 < m; r0 += CPU_TRI_TILE) {
		int64_t r1 = m - r0 < CPU_TRI_TILE ? m : r0 + CPU_TRI_TILE;
		int64_t l0 = tri == CPU_TRI_A_UPPER ? (r0 < k ? r0 : k) : 0;
		int64_t nn = tri == CPU_TRI_C_LOWER && r1 < n ? r1 : n;
		int64_t kk = tri == CPU_TRI_A_LOWER && r1 < k ? r1 : k - l0;
		const float *ar = trans_a ? a + l0 * lda + r0 : a + r0 * lda + l0;
		const float *bl = trans_b ? b + l0 : b + l0 * ldb;

		cblas_f32(trans_a, trans_b, r1 - r0, nn, kk, alpha, ar, lda, bl, ldb, beta,
			  c + r0 * ldc, ldc);
	}
}

weft_status cpu_gemm(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m, int64_t n,
		     int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
		     const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
		     int64_t ldc, int64_t stride_c, int64_t batch)
{
	const float *A = a, *B = b;
	float *Cm = c;

	(void)kctx;
	(void)dt;
	if (m <= 0 || n <= 0 || batch <= 0)
		return WEFT_OK;
	if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff || lda > 0x7fffffff ||
	    ldb > 0x7fffffff || ldc > 0x7fffffff)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "gemm: %lld x %lld x %lld exceeds "
				      "OpenBLAS's 32-bit sizes", (long long)m, (long long)n,
				      (long long)k);
	for (int64_t i = 0; i < batch; i++) {
		float *ci = Cm + i * stride_c;

		if (use_own_gemm(m, n, k) &&
		    cpu_sgemm(trans_a, trans_b, m, n, k, alpha, A + i * stride_a, lda,
			      B + i * stride_b, ldb, beta, NULL, ci, ldc, 0))
			continue;
		cblas_f32(trans_a, trans_b, m, n, k, alpha, A + i * stride_a, lda,
			  B + i * stride_b, ldb, beta, ci, ldc);
	}
	return WEFT_OK;
}

weft_status cpu_gemm_bias(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m,
			  int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			  const void *b, int64_t ldb, const void *bias, void *c, int64_t ldc)
{
	if (m > 0 && n > 0 && k > 0 && use_own_gemm(m, n, k) &&
	    cpu_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0f, bias, c, ldc, 0))
		return WEFT_OK;
	/* the bias in every row of C, then the product added to it */
	cpu_broadcast_rows_ld(m, (size_t)n * sizeof(float), bias, c, (size_t)ldc * sizeof(float));
	return cpu_gemm(kctx, dt, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, 1.0f, c,
			ldc, 0, 1);
}

/* The packed operands of AMX and AVX-512 products, one buffer per calling thread
 * (counted under WEFT_MEM_OTHER), grown when a larger product comes and
 * freed when the thread ends. */
/* Mixed precision's matrix product. BF16 on a CPU with AMX runs on its
 * tiles (cpu_amx.c). Otherwise the reference: A and B (16-bit) are widened
 * exactly into F32 scratch, then multiplied by sgemm, so C is the F32 GEMM
 * of the 16-bit values, as a tensor core computes it (up to the order of
 * the F32 sums); that lets the mixed-precision path run, and be tested,
 * on any CPU. */
weft_status cpu_gemm_lowp(void *kctx, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
			  int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			  int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
			  float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch,
			  void *scratch)
{
	int64_t na, nb;
	float *wa = scratch, *wb;

	if (in_dt == WEFT_F32)
		return cpu_gemm(kctx, in_dt, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b,
				ldb, stride_b, beta, c, ldc, stride_c, batch);
	if (in_dt != WEFT_F16 && in_dt != WEFT_BF16)
		return weft_error_set(WEFT_ERR_DTYPE, "gemm_lowp: inputs of dtype %d; the CPU "
				      "takes F32, F16 or BF16", (int)in_dt);
	if (in_dt == WEFT_BF16 && k > 0 && m > 0 && n > 0 && batch > 0 && cpu_amx_usable()) {
		void *pack = cpu_pack_buffer(cpu_amx_scratch(m, n, k));

		if (!pack)
			return weft_error_set(WEFT_ERR_NOMEM, "gemm_lowp: no memory to pack a "
					      "%lld x %lld x %lld product for AMX", (long long)m,
					      (long long)n, (long long)k);
		return cpu_amx_gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b,
					 ldb, stride_b, beta, c, ldc, stride_c, batch, pack);
	}
	na = weft_gemm_span(trans_a ? k : m, trans_a ? m : k, lda, stride_a, batch);
	nb = weft_gemm_span(trans_b ? n : k, trans_b ? k : n, ldb, stride_b, batch);
	if ((na || nb) && !scratch)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gemm_lowp: %lld x %lld x %lld needs "
				      "%zu bytes of scratch and got none", (long long)m,
				      (long long)n, (long long)k, cpu_gemm_lowp_scratch(in_dt, na, nb));
	wb = wa + na;
	weft_half_convert(na, in_dt, a, WEFT_F32, wa);
	weft_half_convert(nb, in_dt, b, WEFT_F32, wb);
	return cpu_gemm(kctx, WEFT_F32, trans_a, trans_b, m, n, k, alpha, wa, lda, stride_a, wb,
			ldb, stride_b, beta, c, ldc, stride_c, batch);
}

size_t cpu_gemm_lowp_scratch(weft_dtype in_dt, int64_t a_elems, int64_t b_elems)
{
	if (in_dt == WEFT_F32)
		return 0;
	return (size_t)(a_elems + b_elems) * sizeof(float);
}

typedef struct sum_args {
	int64_t rows, ld; /* x's rows, ld floats apart */
	const float *x;
	float *y;
} sum_args;

/* y[c0..c1) += the rows of x there (each part owns its columns). */
CPU_HOT
static void sum_cols(void *p, int64_t c0, int64_t c1)
{
	const sum_args *a = p;
	float *restrict Y = a->y;

	for (int64_t i = 0; i < a->rows; i++) {
		const float *restrict xi = a->x + i * a->ld;

		for (int64_t j = c0; j < c1; j++)
			Y[j] += xi[j];
	}
}

void cpu_sum_rows_ld(int64_t rows, int64_t cols, const float *x, int64_t ld, float *y)
{
	sum_args a = { .rows = rows, .ld = ld, .x = x, .y = y };

	cpu_parallel_for(cols, CPU_GRAIN / (rows + 1) + 1, sum_cols, &a);
}

weft_status cpu_sum_rows(void *kctx, weft_dtype dt, int64_t rows, int64_t cols, const void *x,
			 void *y)
{
	(void)kctx;
	(void)dt;
	cpu_sum_rows_ld(rows, cols, x, cols, y);
	return WEFT_OK;
}

weft_status cpu_gemm_tn_sum(void *kctx, weft_dtype dt, int64_t m, int64_t n, int64_t k,
			    float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
			    float beta, void *c, int64_t ldc, void *sum)
{
	weft_status st;

	if (m > 0 && n > 0 && k > 0 && use_own_gemm(m, n, k) &&
	    cpu_sgemm_tn_sum(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, sum, 0))
		return WEFT_OK;
	st = cpu_gemm(kctx, dt, 1, 0, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
	if (!st)
		cpu_sum_rows_ld(k, m, a, lda, sum);
	return st;
}
