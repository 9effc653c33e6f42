/* gemm_lowp_ex on the CPU: the reference every device's fused-epilogue
 * product is held to. A and B (BF16 or F16) are widened exactly to F32 and
 * multiplied in F32 (cpu_gemm_lowp: AMX tiles for BF16 where the CPU has
 * them, else sgemm), then the epilogue runs per element in F32 (bias, GELU
 * with its pre-activation saved, GELU's backward, with the GELU of
 * gelu_forward / gelu_backward) and each stored value is rounded once to
 * its dtype. With a 16-bit C the F32 bias is first rounded to C's dtype
 * (the contract: as autocast rounds a linear layer's bias, and as
 * cuBLASLt takes a bias of D's type); an F32 C adds it as given.
 *
 * BGRAD's bias gradient sums A's 16-bit values, widened exactly, per
 * element i of aux in kk order, starting from aux[i] (beta 1) or from 0:
 * with trans_a (a linear layer's dw = dy^T x, aux = db) that is the order
 * sum_rows_lowp adds the rows of dy in (cpu_sum_rows_ld, per column, row
 * after row), so the fused and the unfused backward give the same bits. */
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "weft/half.h"
#include "weft/gemm_ex.h"

/* The 16-bit dtypes gemm_lowp_ex takes as in_dt. */
#define CPU_EX_IN_DTS (WEFT_DTYPE_BIT(WEFT_BF16) | WEFT_DTYPE_BIT(WEFT_F16))

typedef struct epi_args {
	int32_t epilogue;
	weft_dtype c_dt;
	int64_t n, ldd, ldc;
	const float *d; /* the F32 product, rows ldd apart (C itself when c_dt is F32) */
	const float *bias; /* as added: rounded to c_dt already when C is 16-bit */
	void *c, *aux;
} epi_args;

/* Rows [r0, r1) of the epilogue: d's F32 values to C (and aux). */
CPU_HOT
static void epi_rows(void *p, int64_t r0, int64_t r1)
{
	const epi_args *e = p;

	for (int64_t r = r0; r < r1; r++) {
		const float *dr = e->d + r * e->ldd;
		int64_t row = r * e->ldc;

		for (int64_t j = 0; j < e->n; j++) {
			float v = dr[j];

			if (e->epilogue == WEFT_EPI_DGELU) {
				v *= cpu_gelu_tanh_grad(weft_half_load(e->c_dt, e->aux, row + j));
			} else {
				if (e->bias)
					v += e->bias[j];
				if (e->epilogue == WEFT_EPI_GELU) {
					weft_half_store(e->c_dt, e->aux, row + j, v);
					v = cpu_gelu_tanh(v);
				}
			}
			weft_half_store(e->c_dt, e->c, row + j, v);
		}
	}
}

typedef struct bgrad_args {
	int64_t k, lda;
	const float *a; /* A widened: m rows of k, lda apart */
	float *aux;
} bgrad_args;

/* aux[i] += A's row i, kk in order, for rows [i0, i1) (A not transposed). */
CPU_HOT
static void bgrad_rows(void *p, int64_t i0, int64_t i1)
{
	const bgrad_args *g = p;

	for (int64_t i = i0; i < i1; i++) {
		const float *ai = g->a + i * g->lda;
		float s = g->aux[i];

		for (int64_t kk = 0; kk < g->k; kk++)
			s += ai[kk];
		g->aux[i] = s;
	}
}

/* BGRAD: aux (m floats) = (beta 1: aux +) the sums over kk of op(A)[i][kk],
 * A's na elements widened into wa first. */
static void bgrad(weft_dtype in_dt, int trans_a, int64_t m, int64_t k, const void *a,
		  int64_t lda, int64_t na, float *wa, float beta, float *aux)
{
	bgrad_args g = { .k = k, .lda = lda, .a = wa, .aux = aux };

	weft_half_convert(na, in_dt, a, WEFT_F32, wa);
	if (beta == 0.0f)
		memset(aux, 0, (size_t)m * sizeof(float));
	if (trans_a)
		cpu_sum_rows_ld(k, m, wa, lda, aux);
	else
		cpu_parallel_for(m, CPU_GRAIN / (k + 1) + 1, bgrad_rows, &g);
}

weft_status cpu_gemm_lowp_ex(void *kctx, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
			     int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			     const void *b, int64_t ldb, float beta, weft_dtype c_dt, void *c,
			     int64_t ldc, const float *bias, int32_t epilogue, void *aux)
{
	weft_status st;
	const char *bad = weft_gemm_ex_check(CPU_EX_IN_DTS, in_dt, c_dt, alpha, beta, epilogue,
					      bias, aux, &st);
	int64_t na, nb, nd, nbias;
	size_t wide;
	const float *add_bias = bias;
	float *buf, *d;
	epi_args e;

	if (bad)
		return weft_error_set(st, "gemm_lowp_ex: %s (got in_dt %d, c_dt %d, alpha %g, "
				      "beta %g, epilogue %d, bias %s, aux %s)", bad, (int)in_dt,
				      (int)c_dt, (double)alpha, (double)beta, (int)epilogue,
				      bias ? "set" : "NULL", aux ? "set" : "NULL");
	if (m <= 0 || (n <= 0 && epilogue != WEFT_EPI_BGRAD))
		return WEFT_OK;
	na = weft_gemm_span(trans_a ? k : m, trans_a ? m : k, lda, 0, 1);
	nb = weft_gemm_span(trans_b ? n : k, trans_b ? k : n, ldb, 0, 1);
	/* F32 C is the product's own buffer; a 16-bit one gets an F32 one, and
	 * its bias is rounded to c_dt once, into n floats after it */
	nd = c_dt == WEFT_F32 ? 0 : m * n;
	nbias = c_dt != WEFT_F32 && bias ? n : 0;
	wide = cpu_gemm_lowp_scratch(in_dt, na, nb);
	buf = cpu_thread_buffer(CPU_BUF_EPILOGUE, wide + (size_t)(nd + nbias) * sizeof(float) + 1);
	if (!buf)
		return weft_error_set(WEFT_ERR_NOMEM, "gemm_lowp_ex: no memory for the %zu bytes "
				      "of F32 operands and result of a %lld x %lld x %lld product",
				      wide + (size_t)(nd + nbias) * sizeof(float), (long long)m,
				      (long long)n, (long long)k);
	d = c_dt == WEFT_F32 ? c : buf + (na + nb);
	if (nbias) {
		float *rb = buf + (na + nb + nd);

		for (int64_t j = 0; j < n; j++)
			rb[j] = c_dt == WEFT_BF16 ?
				weft_half_bf16_to_f32(weft_half_f32_to_bf16(bias[j])) :
				weft_half_f16_to_f32(weft_half_f32_to_f16(bias[j]));
		add_bias = rb;
	}
	if (c_dt != WEFT_F32 && beta != 0.0f)
		for (int64_t r = 0; r < m && n > 0; r++)
			weft_half_convert(n, c_dt, (const uint16_t *)c + r * ldc, WEFT_F32,
					  d + r * n);
	if (n > 0) /* (BGRAD with n 0: the bias gradient alone) */
		st = cpu_gemm_lowp(kctx, in_dt, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b,
				   ldb, 0, beta, d, c_dt == WEFT_F32 ? ldc : n, 0, 1, buf);
	if (st)
		return st;
	if (epilogue == WEFT_EPI_BGRAD) /* the product is done with buf's operands */
		bgrad(in_dt, trans_a, m, k, a, lda, na, buf, beta, aux);
	if (n <= 0 || (c_dt == WEFT_F32 && !bias &&
		       (epilogue == WEFT_EPI_NONE || epilogue == WEFT_EPI_BGRAD)))
		return WEFT_OK; /* the product is the result */
	e = (epi_args){ .epilogue = epilogue, .c_dt = c_dt, .n = n,
			.ldd = c_dt == WEFT_F32 ? ldc : n, .ldc = ldc, .d = d, .bias = add_bias,
			.c = c, .aux = aux };
	cpu_parallel_for(m, CPU_GRAIN / (4 * n) + 1, epi_rows, &e);
	return WEFT_OK;
}
