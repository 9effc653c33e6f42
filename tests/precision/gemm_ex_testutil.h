/* What the tests of gemm_lowp_ex share (test_gemm_lowp_ex on the CPU,
 * tests/cuda/test_cuda_gemm_ex): a case, its random 16-bit inputs, and per
 * element the double-precision reference with the tolerance of an F32
 * computation of it. */
#ifndef WEFT_GEMM_EX_TESTUTIL_H
#define WEFT_GEMM_EX_TESTUTIL_H

#include <math.h>
#include <stdint.h>

#include "weft/device.h"
#include "weft/tensor.h"

/* One call: operands lo, C of c_dt, the epilogue, bias (0/1), beta, the
 * transposes, the sizes, and A and B that many elements past their
 * buffers' (aligned) starts. */
typedef struct ex_case {
	weft_dtype lo, c_dt;
	int32_t epi;
	int bias, ta, tb, shift;
	float beta;
	int64_t m, n, k;
} ex_case;

/* The combinations the contract allows: beta 1 with NONE only, no bias
 * with DGELU. */
static inline int ex_case_valid(const ex_case *x)
{
	return !(x->beta != 0.0f && x->epi != WEFT_EPI_NONE) &&
	       !(x->bias && x->epi == WEFT_EPI_DGELU);
}

/* Case number idx of the grid: operands BF16 and F16, C of F32 and of the
 * operands' dtype, each epilogue, bias x beta, the four transposes, the
 * sizes (m, n, k, shift). 0 past the end. Combinations the contract
 * refuses are in the grid: skip them with ex_case_valid. */
static inline int ex_case_at(int idx, const int64_t (*sizes)[4], int nsizes, ex_case *x)
{
	int s = idx % nsizes, t = (idx /= nsizes) % 4, v = (idx /= 4) % 4, e = (idx /= 4) % 3;
	int ci = (idx /= 3) % 2, li = (idx /= 2);

	if (li > 1)
		return 0;
	x->lo = li ? WEFT_F16 : WEFT_BF16;
	x->c_dt = ci ? x->lo : WEFT_F32;
	x->epi = e;
	x->bias = v & 1;
	x->beta = (v & 2) ? 1.0f : 0.0f;
	x->ta = t & 1;
	x->tb = t >> 1;
	x->m = sizes[s][0];
	x->n = sizes[s][1];
	x->k = sizes[s][2];
	x->shift = (int)sizes[s][3];
	return 1;
}

static uint64_t ex_rng = 0x2545f4914f6cdd1dull;

/* Uniform in [-1, 1). */
static inline float ex_uniform(void)
{
	ex_rng = ex_rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((ex_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static inline float ex_load(weft_dtype dt, const void *p, int64_t i)
{
	if (dt == WEFT_BF16)
		return weft_bf16_to_f32(((const uint16_t *)p)[i]);
	if (dt == WEFT_F16)
		return weft_f16_to_f32(((const uint16_t *)p)[i]);
	return ((const float *)p)[i];
}

static inline void ex_store(weft_dtype dt, void *p, int64_t i, float v)
{
	if (dt == WEFT_BF16)
		((uint16_t *)p)[i] = weft_f32_to_bf16(v);
	else if (dt == WEFT_F16)
		((uint16_t *)p)[i] = weft_f32_to_f16(v);
	else
		((float *)p)[i] = v;
}

/* v rounded to dt (nearest even), as a 16-bit C's bias is before it is
 * added; F32 keeps v. */
static inline float ex_round(weft_dtype dt, float v)
{
	if (dt == WEFT_BF16)
		return weft_bf16_to_f32(weft_f32_to_bf16(v));
	if (dt == WEFT_F16)
		return weft_f16_to_f32(weft_f32_to_f16(v));
	return v;
}

static inline double ex_gelu(double v)
{
	return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

static inline double ex_gelu_grad(double v)
{
	double t = tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
	double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v);

	return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du;
}

/* Random inputs: a (na) and b (nb) of lo, bias (n), C (nc of c_dt) and, for
 * DGELU, aux (pre-activations over GELU's curved part, |v| < 3). */
static inline void ex_fill(const ex_case *x, void *a, int64_t na, void *b, int64_t nb,
			   float *bias, void *c, void *aux, int64_t nc)
{
	for (int64_t i = 0; i < na; i++)
		ex_store(x->lo, a, i, ex_uniform());
	for (int64_t i = 0; i < nb; i++)
		ex_store(x->lo, b, i, ex_uniform());
	for (int64_t j = 0; j < x->n; j++)
		bias[j] = 0.5f * ex_uniform();
	for (int64_t i = 0; i < nc; i++) {
		ex_store(x->c_dt, c, i, ex_uniform());
		ex_store(x->c_dt, aux, i, x->epi == WEFT_EPI_DGELU ? 3.0f * ex_uniform() : 0.0f);
	}
}

/* Element (i, j) in double: *ref the result, *pre the pre-activation (the
 * aux GELU writes, or the aux DGELU reads), and *tol32 how far an F32
 * computation may be from *ref: 1e-5 M + 1e-6 (1 + |pre|) (1 + |D|), M the
 * sum of the magnitudes feeding the element (|alpha| sum_l |a_il b_lj| +
 * |bias_j| + |C_ij|, times |gelu'(aux)| for DGELU), D the product. a, b,
 * c0 (C before the call) and aux as the call saw them; bias as the caller
 * passed it (F32): with a 16-bit C the reference adds it rounded to c_dt,
 * as the contract says, so every device is held to the same rounded bias. */
static inline void ex_expect(const ex_case *x, float alpha, const void *a, int64_t lda,
			     const void *b, int64_t ldb, const float *bias, const void *c0,
			     const void *aux, int64_t ldc, int64_t i, int64_t j, double *ref,
			     double *pre, double *tol32)
{
	double dot = 0.0, mag = 0.0, v;
	int64_t at = i * ldc + j;

	for (int64_t l = 0; l < x->k; l++) {
		double p = (double)ex_load(x->lo, a, x->ta ? l * lda + i : i * lda + l) *
			   ex_load(x->lo, b, x->tb ? j * ldb + l : l * ldb + j);

		dot += p;
		mag += fabs(p);
	}
	dot *= alpha;
	mag *= fabs(alpha);
	if (x->epi == WEFT_EPI_DGELU) {
		v = ex_load(x->c_dt, aux, at);
		*ref = dot * ex_gelu_grad(v);
		mag *= fabs(ex_gelu_grad(v));
	} else {
		v = dot;
		if (x->bias) {
			double bj = ex_round(x->c_dt, bias[j]);

			v += bj;
			mag += fabs(bj);
		}
		if (x->beta != 0.0f) {
			v += ex_load(x->c_dt, c0, at);
			mag += fabs(ex_load(x->c_dt, c0, at));
		}
		*ref = x->epi == WEFT_EPI_GELU ? ex_gelu(v) : v;
	}
	*pre = v;
	*tol32 = 1e-5 * mag + 1e-6 * (1 + fabs(v)) * (1 + fabs(dot));
}

/* Inputs whose result tells a bias rounded to dt (the contract, with a
 * 16-bit C) from one added as given: A (m x k) and B (k x n), row-major,
 * dense, of dt, with D = A B = -0.375 u in every element (A's column 0
 * holds it, B's row 0 holds 1, the rest 0), u dt's unit in the last place
 * at 1 (2^-7 BF16, 2^-10 F16), and bias[j] = 1 + 0.75 u; all exact in
 * dt or F32. The bias rounded to dt is 1 + u, and C = 1 + 0.625 u rounds
 * to 1 + u (*want16); added as given, 1 + 0.375 u would round to 1. An F32
 * C keeps the bias as given: exactly 1 + 0.375 u (*want32). */
static inline void ex_tie_fill(weft_dtype dt, int64_t m, int64_t n, int64_t k, void *a,
			       void *b, float *bias, float *want16, float *want32)
{
	const float u = dt == WEFT_BF16 ? 0x1p-7f : 0x1p-10f;

	for (int64_t i = 0; i < m * k; i++)
		ex_store(dt, a, i, i % k ? 0.0f : -0.375f * u);
	for (int64_t i = 0; i < k * n; i++)
		ex_store(dt, b, i, i < n ? 1.0f : 0.0f);
	for (int64_t j = 0; j < n; j++)
		bias[j] = 1.0f + 0.75f * u;
	*want16 = 1.0f + u;
	*want32 = 1.0f + 0.375f * u;
}

#endif /* WEFT_GEMM_EX_TESTUTIL_H */
