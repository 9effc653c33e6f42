/* The CPU's own F32 matrix product (kernels/cpu/cpu_sgemm.c), which the
 * kernel table's gemm runs for model-sized products on AVX-512 CPUs.
 *
 * 1. Against a double-precision reference, every element within the F32
 *    sum's error bound: |got - ref| <= 2 (k + 2) 2^-24 |alpha| sum_l
 *    |a_il b_lj| + 2^-22 |beta c_ij|. Cases: the four transposes; m, n, k
 *    that leave partial blocks (m not a multiple of 8, n of 48, k of the
 *    k blocks of at most 384, n past the 768 columns packed at once); padding
 *    (ld > columns); alpha != 1; beta 0, 1 and 0.25.
 * 2. beta = 0 does not read C: C filled with NaN comes out finite.
 * 3. Columns of C past n and rows past m are not written (padding kept).
 * 4. The same bits at 1, 2 and 3 kernel threads and on the calling thread
 *    alone (threads = 1, as attention calls it), and a row's result does
 *    not depend on the other rows (a slice of A's rows gives the same
 *    bits): data-parallel ranks and one process agree on each row.
 * 5. The table's gemm gives the same bits for a model-sized product as a
 *    direct call (it takes this path), or with WEFT_CPU_GEMM=openblas
 *    (run as test_cpu_sgemm_openblas) those of cblas_sgemm.
 * 6. The table's gemm_bias (C = alpha A B^T + bias in every row, C not
 *    read) within 1.'s bound, through the kernel and through the
 *    fallback (broadcast_rows, then OpenBLAS with beta 1).
 * 7. Products with a triangle (cpu_gemm_1, enum cpu_tri: causal
 *    attention's), on this kernel and, under WEFT_CPU_GEMM=openblas or
 *    without AVX-512, on OpenBLAS in blocks of CPU_TRI_TILE rows: the
 *    entries the contract says are not read hold NaN and every wanted
 *    element comes out within 1.'s bound of the triangle's sum; right of
 *    C's diagonal (C_LOWER) an element is either untouched or the
 *    product's; beta 0 and 1; sizes that leave partial blocks and more
 *    than one block of k. On this kernel, each element has the bits of
 *    the plain product with zeros where the triangle's are (the terms
 *    left out are exact zeros).
 * 8. The table's gemm_tn_sum (a linear layer's weight and bias gradients
 *    in one pass): C has the bits of the table's gemm with trans_a, and
 *    the sums the bits of sum_rows over the same A (the same additions in
 *    the same order), added to what the sums held; at 1, 2 and 3 threads
 *    (slices of rows and of columns), n past the 768 columns packed at
 *    once (the sums must be added once), a padded A, beta 0 and 1.
 * Without AVX-512 the kernel is not used: the test says so and checks 5's,
 * 7's and 8's fallbacks only. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "kernels_cpu.h"
#include "weft/device.h"
#include "tensor_testutil.h"
#include "weft_test.h"

typedef struct sg_case {
	int ta, tb;
	int64_t m, n, k, pad;
	float alpha, beta;
} sg_case;

/* A (m x k, or k x m when ta) with leading dimension cols + pad. */
static float *operand(int64_t rows, int64_t cols, int64_t pad)
{
	float *x = malloc((size_t)(rows * (cols + pad)) * sizeof(float));

	for (int64_t i = 0; x && i < rows * (cols + pad); i++)
		x[i] = tu_uniform(-1.0f, 1.0f);
	return x;
}

static int64_t worst_case;

static void check_case(const sg_case *g)
{
	int64_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k;
	int64_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
	int64_t lda = ac + g->pad, ldb = bc + g->pad, ldc = g->n + g->pad;
	float *a = operand(ar, ac, g->pad), *b = operand(br, bc, g->pad);
	float *c0 = operand(g->m, g->n, g->pad), *c = malloc((size_t)(g->m * ldc) * 4);
	int64_t bad = 0, pad_bad = 0;
	const double u = 1.0 / 16777216.0;

	WT_REQUIRE(a && b && c0 && c);
	memcpy(c, c0, (size_t)(g->m * ldc) * 4);
	WT_CHECK(cpu_sgemm(g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, lda, b, ldb, g->beta, NULL,
			   c, ldc, 0));
	for (int64_t i = 0; i < g->m; i++) {
		for (int64_t j = 0; j < g->n; j++) {
			double s = 0, mag = 0, ref, bound;

			for (int64_t l = 0; l < g->k; l++) {
				double x = g->ta ? a[l * lda + i] : a[i * lda + l];
				double y = g->tb ? b[j * ldb + l] : b[l * ldb + j];

				s += x * y;
				mag += fabs(x * y);
			}
			ref = g->alpha * s + (g->beta != 0.0f ? g->beta * (double)c0[i * ldc + j] : 0);
			bound = 2.0 * (double)(g->k + 2) * u * fabs(g->alpha) * mag +
				4.0 * u * fabs(g->beta * c0[i * ldc + j]) + 1e-30;
			if (!(fabs(c[i * ldc + j] - ref) <= bound))
				bad++;
		}
		for (int64_t j = g->n; j < ldc; j++)
			pad_bad += memcmp(&c[i * ldc + j], &c0[i * ldc + j], 4) != 0;
	}
	if (bad || pad_bad)
		printf("  %s%s m %lld n %lld k %lld pad %lld alpha %g beta %g: %lld elements "
		       "outside the bound, %lld padding elements written\n",
		       g->ta ? "T" : "N", g->tb ? "T" : "N", (long long)g->m, (long long)g->n,
		       (long long)g->k, (long long)g->pad, g->alpha, g->beta, (long long)bad,
		       (long long)pad_bad);
	WT_CHECK(bad == 0);
	WT_CHECK(pad_bad == 0);
	worst_case += bad;
	free(a);
	free(b);
	free(c0);
	free(c);
}

/* 2: beta = 0 never reads C. */
static void check_nan_c(int ta, int tb)
{
	enum { M = 37, N = 101, K = 300 };
	float *a = operand(M, K, 0), *b = operand(K, N, 0), *c = malloc(M * N * 4);
	int64_t nonfinite = 0;

	WT_REQUIRE(a && b && c);
	for (int i = 0; i < M * N; i++)
		c[i] = NAN;
	WT_CHECK(cpu_sgemm(ta, tb, M, N, K, 1.0f, a, ta ? M : K, b, tb ? K : N, 0.0f, NULL, c, N,
			   0));
	for (int i = 0; i < M * N; i++)
		nonfinite += !isfinite(c[i]);
	WT_CHECK(nonfinite == 0);
	free(a);
	free(b);
	free(c);
}

/* 4: the bits at 1, 2, 3 threads, and a slice of rows. */
static void check_bits(int ta, int tb)
{
	enum { M = 301, N = 250, K = 600, R0 = 37, RN = 100 };
	int64_t lda = ta ? M : K, ldb = tb ? K : N;
	float *a = operand(ta ? K : M, ta ? M : K, 0), *b = operand(tb ? N : K, tb ? K : N, 0);
	float *c[4], *part = malloc(RN * N * 4);
	int same_threads = 1;

	WT_REQUIRE(a && b && part);
	/* 1, 2, 3 kernel threads; then threads = 1 (this thread alone) at 3 */
	for (int t = 0; t < 4; t++) {
		c[t] = malloc(M * N * 4);
		WT_REQUIRE(c[t]);
		weft_kernels_cpu_set_threads(t < 3 ? t + 1 : 3);
		WT_CHECK(cpu_sgemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, NULL, c[t], N,
				   t < 3 ? 0 : 1));
		same_threads &= !memcmp(c[t], c[0], M * N * 4);
	}
	WT_CHECK(same_threads);
	/* rows R0 .. R0 + RN of C from rows R0 .. of op(A) alone */
	WT_CHECK(cpu_sgemm(ta, tb, RN, N, K, 1.0f, ta ? a + R0 : a + R0 * lda, lda, b, ldb, 0.0f,
			   NULL, part, N, 0));
	WT_CHECK(!memcmp(part, c[0] + R0 * N, RN * N * 4));
	weft_kernels_cpu_set_threads(2);
	for (int t = 0; t < 4; t++)
		free(c[t]);
	free(part);
	free(a);
	free(b);
}

/* 5: the table's gemm gives this kernel's bits, or, told so, OpenBLAS's
 * (cblas_sgemm called directly, same thread count). The two sum k in
 * blocks of their own; where they happen to give the same bits at this
 * size the test says so and cannot tell the paths apart. */
static void check_table(const weft_kernel_table *kt, int want_own)
{
	enum { M = 256, N = 384, K = 1000 };
	float *a = operand(M, K, 0), *b = operand(N, K, 0);
	float *c = malloc(M * N * 4), *own = malloc(M * N * 4), *blas = malloc(M * N * 4);
	int distinct;

	WT_REQUIRE(a && b && c && own && blas);
	WT_OK(kt->gemm(NULL, WEFT_F32, 0, 1, M, N, K, 1.0f, a, K, 0, b, K, 0, 0.0f, c, N, 0, 1));
	WT_CHECK(cpu_sgemm(0, 1, M, N, K, 1.0f, a, K, b, K, 0.0f, NULL, own, N, 0));
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, blas,
		    N);
	distinct = memcmp(own, blas, M * N * 4) != 0;
	printf("table gemm: %s bits expected; equal to this kernel's: %s, to OpenBLAS's: %s%s\n",
	       want_own ? "this kernel's" : "OpenBLAS's", memcmp(c, own, M * N * 4) ? "no" : "yes",
	       memcmp(c, blas, M * N * 4) ? "no" : "yes",
	       distinct ? "" : " (the two agree at this size: the path is not told apart)");
	WT_CHECK(!memcmp(c, want_own ? own : blas, M * N * 4));
	free(a);
	free(b);
	free(c);
	free(own);
	free(blas);
}

/* 6: the table's gemm_bias: alpha A B^T + bias in every row, C (NaN)
 * not read, within the bound of 1 (bias counted in the magnitudes). */
static void check_bias(const weft_kernel_table *kt, int64_t m, int64_t n, int64_t k, int64_t pad)
{
	int64_t ldc = n + pad;
	float *a = operand(m, k, 0), *b = operand(n, k, 0), *bias = operand(1, n, 0);
	float *c = malloc((size_t)(m * ldc) * 4);
	int64_t bad = 0, pad_bad = 0;
	const double u = 1.0 / 16777216.0;

	WT_REQUIRE(a && b && bias && c);
	for (int64_t i = 0; i < m * ldc; i++)
		c[i] = NAN;
	WT_REQUIRE(WEFT_HAS_MEMBER(kt, weft_kernel_table, gemm_bias) && kt->gemm_bias);
	WT_OK(kt->gemm_bias(NULL, WEFT_F32, 0, 1, m, n, k, 0.5f, a, k, b, k, bias, c, ldc));
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double s = 0, mag = 0, ref;

			for (int64_t l = 0; l < k; l++) {
				s += (double)a[i * k + l] * b[j * k + l];
				mag += fabs((double)a[i * k + l] * b[j * k + l]);
			}
			ref = 0.5 * s + bias[j];
			if (!(fabs(c[i * ldc + j] - ref) <=
			      2.0 * (double)(k + 2) * u * (0.5 * mag + fabs(bias[j])) + 1e-30))
				bad++;
		}
		for (int64_t j = n; j < ldc; j++)
			pad_bad += !isnan(c[i * ldc + j]);
	}
	printf("gemm_bias %lld x %lld x %lld: %lld elements outside the bound\n", (long long)m,
	       (long long)n, (long long)k, (long long)bad);
	WT_CHECK(bad == 0);
	WT_CHECK(pad_bad == 0);
	free(a);
	free(b);
	free(bias);
	free(c);
}

/* 7: C = alpha op(A) op(B) + beta C with triangle `tri`, m x n x k (m = k
 * for the triangles of A; m = n for C's). */
static void check_tri(int tri, int ta, int tb, int64_t m, int64_t n, int64_t k, float beta,
		      int want_bits)
{
	int64_t lda = ta ? m : k, ldb = tb ? k : n;
	float *a = operand(ta ? k : m, ta ? m : k, 0), *az = malloc((size_t)(m * k) * 4);
	float *b = operand(tb ? n : k, tb ? k : n, 0), *c0 = operand(m, n, 0);
	float *c = malloc((size_t)(m * n) * 4), *plain = malloc((size_t)(m * n) * 4);
	int64_t bad = 0, stray = 0, bits = 0;
	const double u = 1.0 / 16777216.0;
	const float alpha = 0.75f;

	WT_REQUIRE(a && az && b && c0 && c && plain);
	/* op(A)(i, l): NaN where the contract says it is not read, 0 where it is
	 * read and the triangle is zero; az the same with 0 for NaN */
	for (int64_t i = 0; i < m; i++) {
		for (int64_t l = 0; l < k; l++) {
			float *x = ta ? &a[l * lda + i] : &a[i * lda + l];
			int64_t up = (i / CPU_TRI_TILE + 1) * CPU_TRI_TILE;
			int64_t down = i / CPU_TRI_TILE * CPU_TRI_TILE;

			if (tri == CPU_TRI_A_LOWER && l > i)
				*x = l < up ? 0.0f : NAN;
			if (tri == CPU_TRI_A_UPPER && l < i)
				*x = l >= down ? 0.0f : NAN;
			az[ta ? l * lda + i : i * lda + l] = isnan(*x) ? 0.0f : *x;
		}
	}
	memcpy(c, c0, (size_t)(m * n) * 4);
	memcpy(plain, c0, (size_t)(m * n) * 4);
	cpu_gemm_1(tri, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double sum = 0, mag = 0, ref, bound;
			float got = c[i * n + j];

			for (int64_t l = 0; l < k; l++) {
				double x = az[ta ? l * lda + i : i * lda + l];
				double y = tb ? b[j * ldb + l] : b[l * ldb + j];

				sum += x * y;
				mag += fabs(x * y);
			}
			ref = alpha * sum + (beta != 0.0f ? beta * (double)c0[i * n + j] : 0);
			bound = 2.0 * (double)(k + 2) * u * alpha * mag +
				4.0 * u * fabs(beta * c0[i * n + j]) + 1e-30;
			if (tri == CPU_TRI_C_LOWER && j > i)
				stray += got != c0[i * n + j] && !(fabs(got - ref) <= bound);
			else
				bad += !(fabs(got - ref) <= bound);
		}
	}
	if (want_bits) {
		cpu_gemm_1(CPU_TRI_NONE, ta, tb, m, n, k, alpha, az, lda, b, ldb, beta, plain, n);
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++)
				bits += (tri != CPU_TRI_C_LOWER || j <= i) &&
					memcmp(&c[i * n + j], &plain[i * n + j], 4);
	}
	printf("  triangle %d %s%s %lld x %lld x %lld beta %g: %lld outside the bound, %lld "
	       "stray writes, %lld differ from the plain product\n", tri, ta ? "T" : "N",
	       tb ? "T" : "N", (long long)m, (long long)n, (long long)k, beta, (long long)bad,
	       (long long)stray, (long long)bits);
	WT_CHECK(bad == 0);
	WT_CHECK(stray == 0);
	WT_CHECK(bits == 0);
	free(a);
	free(az);
	free(b);
	free(c0);
	free(c);
	free(plain);
}

/* 7 for attention's products (T tokens, head size hs) and a few others */
static void check_tris(int want_bits)
{
	static const struct {
		int tri, ta, tb;
		int64_t m, n, k;
		float beta;
	} t[] = {
		/* attention at T = 256, hs = 64: scores, A V, dA, dV, dQ, dK */
		{ CPU_TRI_C_LOWER, 0, 1, 256, 256, 64, 0.0f },
		{ CPU_TRI_A_LOWER, 0, 0, 256, 64, 256, 0.0f },
		{ CPU_TRI_A_UPPER, 1, 0, 256, 64, 256, 1.0f },
		/* partial blocks of 8 rows, 32 and 48 columns and 64-row tiles */
		{ CPU_TRI_C_LOWER, 0, 1, 100, 100, 24, 0.0f },
		{ CPU_TRI_C_LOWER, 0, 0, 150, 150, 40, 1.0f },
		{ CPU_TRI_A_LOWER, 0, 0, 100, 24, 100, 1.0f },
		{ CPU_TRI_A_LOWER, 1, 1, 150, 96, 150, 0.0f },
		{ CPU_TRI_A_UPPER, 1, 0, 100, 24, 100, 0.0f },
		{ CPU_TRI_A_UPPER, 0, 1, 150, 96, 150, 1.0f },
		/* more than one block of k (at most 384) */
		{ CPU_TRI_C_LOWER, 0, 1, 520, 520, 400, 1.0f },
		{ CPU_TRI_A_LOWER, 0, 0, 520, 48, 520, 0.0f },
		{ CPU_TRI_A_UPPER, 1, 0, 520, 48, 520, 0.0f },
		{ CPU_TRI_A_UPPER, 0, 0, 520, 40, 520, 1.0f },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		check_tri(t[i].tri, t[i].ta, t[i].tb, t[i].m, t[i].n, t[i].k, t[i].beta, want_bits);
}

/* 8: gemm_tn_sum against gemm (trans_a) and sum_rows */
static void check_tn_sum(const weft_kernel_table *kt, int64_t m, int64_t n, int64_t k, int64_t pad,
			 float beta)
{
	int64_t lda = m + pad;
	float *a = operand(k, m, pad), *b = operand(k, n, 0), *c0 = operand(m, n, 0);
	float *c = malloc((size_t)(m * n) * 4), *want = malloc((size_t)(m * n) * 4);
	float *s0 = operand(1, m, 0), *s = malloc((size_t)m * 4), *swant = malloc((size_t)m * 4);
	float *dense = malloc((size_t)(k * m) * 4);
	int same = 1;

	WT_REQUIRE(a && b && c0 && c && want && s0 && s && swant && dense);
	WT_REQUIRE(WEFT_HAS_MEMBER(kt, weft_kernel_table, gemm_tn_sum) && kt->gemm_tn_sum);
	for (int64_t l = 0; l < k; l++)
		memcpy(dense + l * m, a + l * lda, (size_t)m * 4);
	memcpy(swant, s0, (size_t)m * 4);
	WT_OK(kt->sum_rows(NULL, WEFT_F32, k, m, dense, swant));
	for (int t = 1; t <= 3; t++) {
		weft_kernels_cpu_set_threads(t);
		memcpy(c, c0, (size_t)(m * n) * 4);
		memcpy(want, c0, (size_t)(m * n) * 4);
		memcpy(s, s0, (size_t)m * 4);
		WT_OK(kt->gemm(NULL, WEFT_F32, 1, 0, m, n, k, 0.5f, a, lda, 0, b, n, 0, beta, want, n,
			       0, 1));
		WT_OK(kt->gemm_tn_sum(NULL, WEFT_F32, m, n, k, 0.5f, a, lda, b, n, beta, c, n, s));
		same &= !memcmp(c, want, (size_t)(m * n) * 4) && !memcmp(s, swant, (size_t)m * 4);
	}
	printf("gemm_tn_sum %lld x %lld x %lld pad %lld beta %g: %s\n", (long long)m, (long long)n,
	       (long long)k, (long long)pad, beta,
	       same ? "the bits of gemm and sum_rows" : "differs from gemm and sum_rows");
	WT_CHECK(same);
	weft_kernels_cpu_set_threads(2);
	free(a);
	free(b);
	free(c0);
	free(c);
	free(want);
	free(s0);
	free(s);
	free(swant);
	free(dense);
}

static void check_tn_sums(const weft_kernel_table *kt)
{
	check_tn_sum(kt, 300, 200, 600, 0, 1.0f); /* slices of rows */
	check_tn_sum(kt, 100, 1600, 500, 3, 0.0f); /* of columns, past 768 */
	check_tn_sum(kt, 1152, 384, 1024, 0, 1.0f); /* c_attn's weight gradient */
	check_tn_sum(kt, 37, 45, 70, 5, 0.0f);
}

int main(void)
{
	const weft_kernel_table *kt;
	const char *env = getenv("WEFT_CPU_GEMM");
	int openblas = env && !strcmp(env, "openblas");
	static const sg_case cases[] = {
		{ 0, 0, 64, 96, 64, 0, 1.0f, 0.0f },
		{ 0, 1, 64, 96, 64, 0, 1.0f, 0.0f },
		{ 1, 0, 64, 96, 64, 0, 1.0f, 0.0f },
		{ 1, 1, 64, 96, 64, 0, 1.0f, 0.0f },
		{ 0, 0, 37, 101, 300, 3, 0.5f, 1.0f },
		{ 0, 1, 37, 101, 300, 3, 0.5f, 0.25f },
		{ 1, 0, 37, 101, 300, 5, -2.0f, 1.0f },
		{ 1, 1, 37, 101, 300, 5, 1.0f, 0.25f },
		{ 0, 1, 9, 1600, 40, 0, 1.0f, 1.0f }, /* past the columns packed at once */
		{ 1, 0, 1, 1, 1, 0, 1.0f, 0.0f },
		{ 0, 0, 7, 47, 513, 1, 1.0f, 0.0f },
		{ 1, 1, 15, 49, 17, 2, 1.0f, 0.0f },
		{ 0, 1, 200, 144, 384, 0, 1.0f, 0.0f },
		{ 1, 0, 384, 144, 1024, 0, 1.0f, 1.0f }, /* a weight gradient */
		/* 8 x 32 blocks (n a multiple of 32, not of 48): attention's heads */
		{ 0, 1, 64, 64, 64, 128, 0.125f, 0.0f },
		{ 1, 0, 256, 64, 64, 128, 1.0f, 1.0f },
		{ 0, 0, 64, 64, 256, 128, 1.0f, 0.0f },
		{ 0, 1, 61, 128, 64, 0, 1.0f, 1.0f },
		{ 1, 1, 33, 1600, 70, 0, 1.0f, 0.0f },
	};

	WT_OK(weft_kernels_get(WEFT_CPU, &kt));
	if (!cpu_sgemm_usable()) {
		printf("this CPU has no AVX-512: the table's gemm is OpenBLAS's alone\n");
		check_bias(kt, 300, 200, 600, 3);
		check_tris(0);
		check_tn_sums(kt);
		WT_CHECK(!cpu_sgemm(0, 0, 8, 8, 8, 1.0f, NULL, 8, NULL, 8, 0.0f, NULL, NULL, 8, 0));
		return wt_done("test_cpu_sgemm");
	}
	if (openblas) {
		check_table(kt, 0);
		check_bias(kt, 300, 200, 600, 3); /* broadcast_rows, then OpenBLAS */
		check_bias(kt, 20, 30, 10, 0);
		check_tris(0); /* OpenBLAS in blocks of rows */
		check_tn_sums(kt);
		return wt_done("test_cpu_sgemm");
	}
	weft_kernels_cpu_set_threads(2);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
	printf("%zu cases against the double reference: %lld elements outside the bound\n",
	       sizeof(cases) / sizeof(cases[0]), (long long)worst_case);
	for (int t = 0; t < 4; t++) {
		check_nan_c(t >> 1, t & 1);
		check_bits(t >> 1, t & 1);
	}
	check_table(kt, 1);
	check_bias(kt, 300, 200, 600, 3);
	check_bias(kt, 20, 30, 10, 0); /* below the kernel's sizes: OpenBLAS */
	check_tris(1);
	check_tn_sums(kt);
	return wt_done("test_cpu_sgemm");
}
