/* The CPU's gemm_lowp_ex (kernels/cpu/cpu_gemm_ex.c), the reference of the
 * fused-epilogue product every device is held to.
 *
 * 1. Against a plain double-precision computation on the same 16-bit
 *    operands (widened exactly), for BF16 and F16 operands, C of F32 and of
 *    the operands' dtype, every epilogue, bias and no bias, beta 0 and 1
 *    (NONE), all four transposes, odd sizes with padded leading
 *    dimensions, and one product large enough for the CPU's blocked
 *    kernels (AVX-512 or AMX where present). Tolerance per element, M the
 *    sum of the magnitudes feeding it (|alpha| sum_l |a_il b_lj| + |bias_j|
 *    + |C_ij|, times |gelu'(aux)| for DGELU), v its pre-activation, D its
 *    product:
 *      F32:    1e-5 M + 1e-6 (1 + |v|) (1 + |D|). The F32 sums' error
 *              bound is 2 (k + 2) 2^-24 M <= 1.6e-5 M at k = 130; in
 *              practice the error grows as sqrt(k), well under 1e-5 M; GELU
 *              and its derivative in F32 (cpu_tanhf, absolute error ~2e-7)
 *              add at most a few 1e-7 (1 + |v|) times what they multiply.
 *      16-bit: the F32 tolerance plus one rounding: 2^-8 |ref| (BF16, 8
 *              significant bits) or 2^-11 |ref| + 2^-24 (F16, 11 bits and
 *              its subnormals).
 *    And each 16-bit value is rounded once, from the F32 value: wherever
 *    the whole interval ref +- the F32 tolerance rounds to one 16-bit value,
 *    the result is that value, exactly (a GELU computed from the rounded
 *    aux, or a bias added after a rounding, misses about half of them);
 *    at least half of the 16-bit results are decided so (70% here).
 * 2. The epilogue's GELU is the CPU's gelu_forward / gelu_backward: C of
 *    GELU equals gelu_forward(aux), C of DGELU equals gelu_backward(aux,
 *    D) from zero, within 1e-6 relative + 1e-7 (the same F32 formula; the
 *    compiler may contract a multiply-add differently in the two loops).
 * 3. The bias of a 16-bit C is rounded to C's dtype before it is added,
 *    an F32 C's is added as given (the contract): on ex_tie_fill's inputs
 *    every element is exactly the value each rule gives, BF16 and F16,
 *    NONE and GELU (its aux), and differs from the other rule's.
 * 4. k = 0: C = bias (+ C); m = 0 writes nothing.
 * 5. Misuse: each refused argument gives its WEFT_ERR_* and a message
 *    naming gemm_lowp_ex and what to pass, and leaves C unwritten.
 * 6. BGRAD (since ABI 1.7): C is the NONE product's bit for bit, and aux[i]
 *    is op(A)'s row i summed in F32 in kk order, from 0 (beta 0) or from
 *    aux[i] (beta 1): equal, bit for bit, to that sum computed here, for
 *    BF16 and F16, every transpose, padded lda, both betas, C F32 and
 *    16-bit; with trans_a and lda = m (a linear layer's dy) it is
 *    sum_rows_lowp's result on the same rows, bit for bit; k = 0 gives 0
 *    (beta 0) or leaves aux (beta 1); n = 0 still sums. The table
 *    advertises it (gemm_lowp_ex_epilogues).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft/device.h"
#include "weft/gemm_ex.h"
#include "weft/tensor.h"
#include "weft_test.h"
#include "precision/gemm_ex_testutil.h"

static int64_t cases_run, decided_16, missed_16, total_16;

/* |got - ref| / its tolerance: tol32 (the F32 computation's) plus, for a
 * 16-bit dtype, one rounding; and, where ref +- tol32 rounds to one 16-bit
 * value, whether got is that value (counted). */
static double check_value(weft_dtype dt, double got, double ref, double tol32)
{
	double tol = tol32;

	if (dt == WEFT_F32)
		return fabs(got - ref) / tol;
	tol += dt == WEFT_BF16 ? ldexp(fabs(ref), -8) : ldexp(fabs(ref), -11) + ldexp(1.0, -24);
	total_16++;
	if (ex_round(dt, (float)(ref - tol32)) == ex_round(dt, (float)(ref + tol32))) {
		decided_16++;
		missed_16 += got != ex_round(dt, (float)ref);
	}
	return fabs(got - ref) / tol;
}

/* Runs one case; returns the worst |err| / tol seen. */
static double run_case(const weft_kernel_table *kt, const ex_case *x)
{
	const int64_t m = x->m, n = x->n, k = x->k;
	const int64_t ar = x->ta ? k : m, ac = x->ta ? m : k, br = x->tb ? n : k,
		      bc = x->tb ? k : n;
	const int64_t lda = ac + 3, ldb = bc + 1, ldc = n + 5;
	const float alpha = 0.75f;
	size_t cs = x->c_dt == WEFT_F32 ? 4 : 2;
	uint16_t *a = calloc((size_t)(ar * lda), 2), *b = calloc((size_t)(br * ldb), 2);
	float *bias = malloc((size_t)n * 4);
	char *c = calloc((size_t)(m * ldc), cs), *c0 = calloc((size_t)(m * ldc), cs);
	char *aux = calloc((size_t)(m * ldc), cs);
	double worst = 0.0;

	WT_REQUIRE(a && b && bias && c && c0 && aux);
	ex_fill(x, a, ar * lda, b, br * ldb, bias, c0, aux, m * ldc);
	memcpy(c, c0, (size_t)(m * ldc) * cs);
	WT_OK(kt->gemm_lowp_ex(NULL, x->lo, x->ta, x->tb, m, n, k, alpha, a, lda, b, ldb, x->beta,
			       x->c_dt, c, ldc, x->bias ? bias : NULL, x->epi,
			       x->epi == WEFT_EPI_NONE ? NULL : aux));
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double ref, v, tol;

			ex_expect(x, alpha, a, lda, b, ldb, bias, c0, aux, ldc, i, j, &ref, &v, &tol);
			worst = fmax(worst, check_value(x->c_dt, ex_load(x->c_dt, c, i * ldc + j),
							ref, tol));
			if (x->epi == WEFT_EPI_GELU) /* the pre-activation, as stored */
				worst = fmax(worst, check_value(x->c_dt,
								ex_load(x->c_dt, aux, i * ldc + j),
								v, tol));
		}
		/* the padding between rows is never written */
		for (int64_t j = n; j < ldc && i + 1 < m; j++)
			WT_REQUIRE(!memcmp(c + (i * ldc + j) * cs, c0 + (i * ldc + j) * cs, cs));
	}
	if (worst > 1.0)
		fprintf(stderr, "case lo %d c_dt %d epi %d bias %d beta %g %s%s %lldx%lldx%lld: "
			"worst err/tol %.3g\n", (int)x->lo, (int)x->c_dt, (int)x->epi, x->bias,
			(double)x->beta, x->ta ? "T" : "N", x->tb ? "T" : "N", (long long)m,
			(long long)n, (long long)k, worst);
	cases_run++;
	free(a);
	free(b);
	free(bias);
	free(c);
	free(c0);
	free(aux);
	return worst;
}

static void check_against_double(const weft_kernel_table *kt)
{
	static const int64_t sizes[][4] = { { 7, 13, 29, 0 }, { 33, 40, 70, 0 },
					    { 130, 136, 128, 0 } };
	double worst = 0.0;
	ex_case x;

	for (int i = 0; ex_case_at(i, sizes, 3, &x); i++) {
		/* the large size once per transpose and epilogue */
		if (!ex_case_valid(&x) || (x.m == 130 && x.epi != WEFT_EPI_DGELU &&
					   !(x.bias && x.beta == 0.0f && x.lo == WEFT_BF16)))
			continue;
		worst = fmax(worst, run_case(kt, &x));
	}
	printf("%lld cases, worst error / tolerance %.3f; 16-bit results: %lld, %lld decided "
	       "by one rounding, %lld of those missed\n", (long long)cases_run, worst,
	       (long long)total_16, (long long)decided_16, (long long)missed_16);
	WT_CHECK(worst <= 1.0);
	WT_CHECK(missed_16 == 0);
	WT_CHECK(decided_16 >= 0.5 * (double)total_16);
}

/* GELU of the epilogue = the table's gelu_forward / gelu_backward */
static void check_same_gelu(const weft_kernel_table *kt)
{
	enum { M = 9, N = 21, K = 17 };
	uint16_t a[M * K], b[K * N];
	float bias[N], c[M * N], aux[M * N], d[M * N], want[M * N];

	for (int i = 0; i < M * K; i++)
		a[i] = weft_f32_to_bf16(2.0f * ex_uniform());
	for (int i = 0; i < K * N; i++)
		b[i] = weft_f32_to_bf16(ex_uniform());
	for (int j = 0; j < N; j++)
		bias[j] = ex_uniform();
	WT_OK(kt->gemm_lowp_ex(NULL, WEFT_BF16, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, WEFT_F32,
			       c, N, bias, WEFT_EPI_GELU, aux));
	WT_OK(kt->gelu_forward(NULL, WEFT_F32, M * N, aux, want));
	for (int i = 0; i < M * N; i++)
		WT_CLOSE(c[i], want[i], 1e-6, 1e-7);
	/* DGELU from the aux just saved, against gelu_backward with dy = D */
	WT_OK(kt->gemm_lowp_ex(NULL, WEFT_BF16, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, WEFT_F32,
			       d, N, NULL, WEFT_EPI_NONE, NULL));
	memset(want, 0, sizeof(want));
	WT_OK(kt->gelu_backward(NULL, WEFT_F32, M * N, aux, d, want));
	WT_OK(kt->gemm_lowp_ex(NULL, WEFT_BF16, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, WEFT_F32,
			       c, N, NULL, WEFT_EPI_DGELU, aux));
	for (int i = 0; i < M * N; i++)
		WT_CLOSE(c[i], want[i], 1e-6, 1e-7);
}

static void check_bias_rounded(const weft_kernel_table *kt)
{
	enum { M = 5, N = 6, K = 3 };
	uint16_t a[M * K], b[K * N], c16[M * N], aux16[M * N];
	float bias[N], c32[M * N], aux32[M * N], want16, want32;

	for (int d = 0; d < 2; d++) {
		weft_dtype dt = d ? WEFT_F16 : WEFT_BF16;

		ex_tie_fill(dt, M, N, K, a, b, bias, &want16, &want32);
		WT_CHECK(ex_round(dt, want32) != want16); /* the two rules differ */
		for (int32_t epi = WEFT_EPI_NONE; epi <= WEFT_EPI_GELU; epi++) {
			WT_OK(kt->gemm_lowp_ex(NULL, dt, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, dt,
					       c16, N, bias, epi, epi ? aux16 : NULL));
			WT_OK(kt->gemm_lowp_ex(NULL, dt, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f,
					       WEFT_F32, c32, N, bias, epi, epi ? aux32 : NULL));
			for (int i = 0; i < M * N; i++) {
				float got16 = ex_load(dt, epi ? aux16 : c16, i);
				float got32 = epi ? aux32[i] : c32[i];

				WT_CHECK(got16 == want16 && got32 == want32);
			}
		}
	}
}

static void check_empty(const weft_kernel_table *kt)
{
	uint16_t a[4] = { 0 }, b[6] = { 0 }, cb[6];
	float bias[3] = { 0.5f, -1.25f, 2.0f }, c[6];

	/* k = 0: the product is 0, C = bias (+ C) */
	for (int i = 0; i < 6; i++)
		c[i] = (float)i;
	WT_OK(kt->gemm_lowp_ex(NULL, WEFT_F16, 0, 0, 2, 3, 0, 1.0f, a, 1, b, 3, 1.0f, WEFT_F32, c,
			       3, bias, WEFT_EPI_NONE, NULL));
	for (int i = 0; i < 6; i++)
		WT_CHECK(c[i] == (float)i + bias[i % 3]);
	WT_OK(kt->gemm_lowp_ex(NULL, WEFT_BF16, 1, 1, 2, 3, 0, 1.0f, a, 2, b, 1, 0.0f, WEFT_BF16,
			       cb, 3, bias, WEFT_EPI_NONE, NULL));
	for (int i = 0; i < 6; i++)
		WT_CHECK(weft_bf16_to_f32(cb[i]) == bias[i % 3]);
	/* m = 0: nothing written */
	WT_OK(kt->gemm_lowp_ex(NULL, WEFT_BF16, 0, 0, 0, 3, 2, 1.0f, a, 2, b, 3, 0.0f, WEFT_F32,
			       NULL, 3, bias, WEFT_EPI_NONE, NULL));
}

static void check_misuse(const weft_kernel_table *kt)
{
	uint16_t a[4] = { 0 }, b[4] = { 0 };
	float c[4] = { 7, 7, 7, 7 }, aux[4] = { 0 }, bias[2] = { 1, 1 };

#define EX(in_dt, beta, c_dt, bias_, epi, aux_)                                              \
	kt->gemm_lowp_ex(NULL, in_dt, 0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, beta, c_dt, c, 2, bias_, \
			 epi, aux_)
	WT_FAILS(EX(WEFT_F32, 0.0f, WEFT_F32, NULL, WEFT_EPI_NONE, NULL), WEFT_ERR_DTYPE,
		 "gemm_lowp_ex", "in_dt", "pass BF16 or F16", "got in_dt 0");
	WT_FAILS(EX(WEFT_BF16, 0.0f, WEFT_F16, NULL, WEFT_EPI_NONE, NULL), WEFT_ERR_DTYPE,
		 "gemm_lowp_ex", "c_dt must be F32 or in_dt", "c_dt 1");
	WT_FAILS(EX(WEFT_F16, 0.0f, WEFT_I32, NULL, WEFT_EPI_NONE, NULL), WEFT_ERR_DTYPE,
		 "gemm_lowp_ex", "c_dt must be F32 or in_dt");
	WT_FAILS(EX(WEFT_BF16, 0.5f, WEFT_F32, NULL, WEFT_EPI_NONE, NULL), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "beta must be 0", "or 1", "beta 0.5");
	WT_FAILS(EX(WEFT_BF16, 1.0f, WEFT_F32, NULL, WEFT_EPI_GELU, aux), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "WEFT_EPI_NONE or WEFT_EPI_BGRAD only", "pass beta 0");
	WT_FAILS(EX(WEFT_BF16, 0.0f, WEFT_F32, NULL, 4, NULL), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "unknown epilogue", "WEFT_EPI_NONE, WEFT_EPI_GELU, "
		 "WEFT_EPI_DGELU or WEFT_EPI_BGRAD", "epilogue 4");
	WT_FAILS(EX(WEFT_BF16, 0.0f, WEFT_F32, bias, WEFT_EPI_BGRAD, aux), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "WEFT_EPI_BGRAD takes no bias", "pass bias NULL");
	WT_FAILS(EX(WEFT_BF16, 1.0f, WEFT_F32, NULL, WEFT_EPI_BGRAD, NULL), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "WEFT_EPI_BGRAD writes the bias gradient", "pass it",
		 "aux NULL");
	WT_FAILS(kt->gemm_lowp_ex(NULL, WEFT_BF16, 1, 0, 2, 2, 2, 2.0f, a, 2, b, 2, 0.0f, WEFT_F32,
				  c, 2, NULL, WEFT_EPI_BGRAD, aux),
		 WEFT_ERR_INVALID_ARG, "gemm_lowp_ex", "pass alpha 1", "alpha 2");
	WT_FAILS(EX(WEFT_BF16, 0.0f, WEFT_F32, NULL, -1, NULL), WEFT_ERR_INVALID_ARG,
		 "unknown epilogue");
	WT_FAILS(EX(WEFT_BF16, 0.0f, WEFT_F32, bias, WEFT_EPI_DGELU, aux), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "WEFT_EPI_DGELU takes no bias", "pass bias NULL");
	WT_FAILS(EX(WEFT_BF16, 0.0f, WEFT_F32, bias, WEFT_EPI_GELU, NULL), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "aux", "pass it", "aux NULL");
	WT_FAILS(EX(WEFT_F16, 0.0f, WEFT_F16, NULL, WEFT_EPI_DGELU, NULL), WEFT_ERR_INVALID_ARG,
		 "gemm_lowp_ex", "reads aux");
#undef EX
	for (int i = 0; i < 4; i++)
		WT_CHECK(c[i] == 7.0f && aux[i] == 0.0f);
}

/* One BGRAD call against the same product with NONE and the F32 row sums
 * computed here (see 6.); 1 when every bit agrees. */
static int bgrad_case(const weft_kernel_table *kt, weft_dtype lo, weft_dtype c_dt, int ta,
		      int tb, float beta, int64_t m, int64_t n, int64_t k, int64_t lda)
{
	const int64_t ar = ta ? k : m, br = tb ? n : k, ldb = (tb ? k : n) + 1, ldc = n + 2;
	size_t cs = c_dt == WEFT_F32 ? 4 : 2, cbytes = (size_t)(m * ldc) * cs + 1;
	uint16_t *a = malloc((size_t)(ar * lda) * 2 + 2), *b = malloc((size_t)(br * ldb) * 2 + 2);
	char *c = malloc(cbytes), *want = malloc(cbytes);
	float *aux = malloc((size_t)m * 4 + 4), *sums = malloc((size_t)m * 4 + 4);
	int ok;

	WT_REQUIRE(a && b && c && want && aux && sums);
	for (int64_t i = 0; i < ar * lda; i++)
		ex_store(lo, a, i, 3.0f * ex_uniform());
	for (int64_t i = 0; i < br * ldb; i++)
		ex_store(lo, b, i, ex_uniform());
	for (int64_t i = 0; i < m * ldc; i++)
		ex_store(c_dt, c, i, ex_uniform());
	memcpy(want, c, cbytes);
	for (int64_t i = 0; i < m; i++) {
		float s = 0.0f;

		aux[i] = NAN; /* beta 0 must not read it */
		if (beta != 0.0f)
			s = aux[i] = ex_uniform();
		for (int64_t kk = 0; kk < k; kk++)
			s += ex_load(lo, a, ta ? kk * lda + i : i * lda + kk);
		sums[i] = s;
	}
	WT_OK(kt->gemm_lowp_ex(NULL, lo, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c_dt, want,
			       ldc, NULL, WEFT_EPI_NONE, NULL));
	WT_OK(kt->gemm_lowp_ex(NULL, lo, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c_dt, c, ldc,
			       NULL, WEFT_EPI_BGRAD, aux));
	ok = !memcmp(c, want, cbytes) && !memcmp(aux, sums, (size_t)m * 4);
	if (ta && lda == m && beta != 0.0f) { /* sum_rows_lowp's bits on the same rows */
		for (int64_t i = 0; i < m; i++)
			aux[i] = sums[i] = 0.5f * (float)i;
		WT_OK(kt->sum_rows_lowp(NULL, lo, k, m, a, sums));
		WT_OK(kt->gemm_lowp_ex(NULL, lo, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c_dt,
				       c, ldc, NULL, WEFT_EPI_BGRAD, aux));
		ok = ok && !memcmp(aux, sums, (size_t)m * 4);
	}
	if (!ok)
		fprintf(stderr, "BGRAD %d->%d %s%s beta %g %lldx%lldx%lld lda %lld: bits differ\n",
			(int)lo, (int)c_dt, ta ? "T" : "N", tb ? "T" : "N", (double)beta,
			(long long)m, (long long)n, (long long)k, (long long)lda);
	free(a);
	free(b);
	free(c);
	free(want);
	free(aux);
	free(sums);
	return ok;
}

static void check_bgrad(const weft_kernel_table *kt)
{
	static const int64_t sizes[][3] = { { 7, 5, 13 }, { 48, 33, 130 }, { 5, 3, 0 },
					    { 6, 0, 9 } };
	int bad = 0, cases = 0;

	WT_CHECK(weft_gemm_ex_epilogues(kt) & (1u << WEFT_EPI_BGRAD));
	for (int i = 0; i < 2 * 2 * 4 * 2 * 4 * 2; i++) {
		int v = i, s = v % 4, t = (v /= 4) % 4, be = (v /= 4) % 2, ci = (v /= 2) % 2,
		    li = (v /= 2) % 2, dense = v / 2;
		weft_dtype lo = li ? WEFT_F16 : WEFT_BF16;
		int ta = t & 1;
		int64_t m = sizes[s][0], k = sizes[s][2];
		int64_t lda = (ta ? m : k) + (dense ? 0 : 3);

		bad += !bgrad_case(kt, lo, ci ? lo : WEFT_F32, ta, t >> 1, be ? 1.0f : 0.0f, m,
				   sizes[s][1], k, lda > 0 ? lda : 1);
		cases++;
	}
	printf("BGRAD: %d cases, %d with bits that differ\n", cases, bad);
	WT_CHECK(bad == 0);
}

int main(void)
{
	const weft_kernel_table *kt;

	WT_OK(weft_kernels_get(WEFT_CPU, &kt));
	WT_REQUIRE(WEFT_HAS_MEMBER(kt, weft_kernel_table, gemm_lowp_ex) && kt->gemm_lowp_ex);
	check_against_double(kt);
	check_same_gelu(kt);
	check_bias_rounded(kt);
	check_empty(kt);
	check_misuse(kt);
	check_bgrad(kt);
	return wt_done("test_gemm_lowp_ex");
}
