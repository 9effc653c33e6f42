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
 * Both sides add a 16-bit C's bias rounded to C's dtype (the contract;
 * ex_expect too). On ex_tie_fill's inputs, where the rounded and the
 * unrounded bias give different results, every element is the rounded
 * rule's exactly (the F32 C's the unrounded one's), through cuBLASLt's
 * fused bias epilogue (A aligned) and the unfused path (A 2 bytes off).
 * Also: a call's misuse gives the CPU's error with "cuda:0 kernel
 * gemm_lowp_ex" in front; a second call of a shape reuses its plan (the
 * same results from the cache).
 *
 * BGRAD (since ABI 1.7), against the CPU the same way: BF16 and F16, C of
 * F32 (cuBLASLt's BGRADB where it takes the call) and of the operands'
 * dtype (unfused), beta 0 and 1, all four transposes, the sizes above (a
 * k of 9: lda odd; odd m: unfused), A also 2 bytes off (unfused), and a
 * linear layer's dw shape (trans_a, lda = m: the column-sum kernels when
 * unfused). C is held to the NONE bound above (alpha 1, no bias). aux[i],
 * against the CPU's: |cuda - cpu| <= 2 (k + 1) 2^-24 (|aux0_i| + sum_kk
 * |op(A)_i,kk|) + 1e-30: each side adds the same k (+ 1, with beta 1) F32
 * terms (16-bit values, exact in F32) in its own order, each order within
 * (k + 1) 2^-24 of those magnitudes of the exact sum (measured worst
 * 0.71 of it under the emulator, whose 200 calls take each path: 56
 * cuBLASLt BGRADB, 28 of them with beta 1, 44 the column-sum kernels, 100
 * cuda_gemm_bgrad). Refused: a bias, alpha other than 1, a NULL aux.
 *
 * `test_cuda_gemm_ex fused-bias-counts` (the emulator only, with its
 * EMU_COUNTS, registered by tests/cuda_emu as
 * test_cuda_gemm_ex_fused_bias_emu): a BF16 C with a bias takes the fused
 * path - one cuBLASLt G line whose bias read is 2 bytes an element, the
 * bias's conversion (n elements) the one kernel beside it, no epilogue
 * kernel - and moves at least the F32 product's write and read-back
 * (2 m n 4 bytes) less than the unfused path on the same call with A
 * misaligned, up to the four pages the two paths' bias handling touch.
 * And a linear layer's dw with BGRAD (F32 C, 64 x 32 x 128, A = dy
 * transposed): fused, one cuBLASLt G line (bgradb) and no kernel with beta
 * 0, the axpy that adds the bias gradient beside it with beta 1; unfused
 * (A 2 bytes off), the product's G line and sum_rows_lowp's two kernels,
 * reading A (2 m k bytes) once more than the fused call, up to two pages. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ex_tie_fill's product (M x N x K of dt, C of c_dt, a bias, NONE) on the
 * GPU, A `shift` elements past an aligned address (0: cuBLASLt's fused
 * path; 1, 2 bytes, which no tensor-core algorithm takes: the unfused
 * one); then, with `between` (the emulator's mark) around the call only,
 * checks every element is the contract's value exactly. */
enum { TIE_M = 256, TIE_N = 256, TIE_K = 64 };
static void tie_run(weft_dtype dt, weft_dtype c_dt, int shift, void (*between)(const char *),
		    const char *label)
{
	size_t cbytes = (size_t)TIE_M * TIE_N * ct_size(c_dt);
	uint16_t *a = calloc(TIE_M * TIE_K + 1, 2), *b = malloc(TIE_K * TIE_N * 2);
	float bias[TIE_N], want16, want32, want;
	char *got = malloc(cbytes);
	ct_dev g = ct_gpu_dev(dt);
	void *da, *db, *dc;
	float *dbias;
	int64_t bad = 0;

	WT_REQUIRE(a && b && got);
	ex_tie_fill(dt, TIE_M, TIE_N, TIE_K, a + shift, b, bias, &want16, &want32);
	want = c_dt == WEFT_F32 ? want32 : want16;
	da = ct_in_raw(&g, a, (TIE_M * TIE_K + 1) * 2);
	db = ct_in_raw(&g, b, TIE_K * TIE_N * 2);
	dbias = ct_in_raw(&g, bias, sizeof(bias));
	dc = ct_alloc(&g, cbytes);
	if (between)
		between(label);
	WT_OK(ct_gpu->gemm_lowp_ex(ct_kctx, dt, 0, 0, TIE_M, TIE_N, TIE_K, 1.0f,
				   (uint16_t *)da + shift, TIE_K, db, TIE_N, 0.0f, c_dt, dc, TIE_N,
				   dbias, WEFT_EPI_NONE, NULL));
	if (between)
		between("after");
	WT_OK(ct_gpu->copy(ct_kctx, got, dc, cbytes, WEFT_COPY_DEVICE_TO_HOST));
	for (int64_t i = 0; i < (int64_t)TIE_M * TIE_N; i++)
		bad += ex_load(c_dt, got, i) != want;
	if (bad)
		fprintf(stderr, "%s->%s A shift %d: %lld elements are not %.9g\n", ct_name(dt),
			ct_name(c_dt), shift, (long long)bad, (double)want);
	WT_CHECK(bad == 0);
	ct_release(&g);
	free(a);
	free(b);
	free(got);
}

static void check_bias_rounded(void)
{
	for (int d = 0; d < 2; d++)
		for (int shift = 0; shift < 2; shift++) {
			weft_dtype dt = d ? WEFT_F16 : WEFT_BF16;

			tie_run(dt, dt, shift, NULL, NULL);
			tie_run(dt, WEFT_F32, shift, NULL, NULL);
		}
}

static void check_fused_bias_counts(const char *path)
{
	void (*mark)(const char *) = NULL;
	const double ab = TIE_M * TIE_K * 2.0 + TIE_K * TIE_N * 2.0, product = TIE_M * TIE_N * 4.0;
	ct_span fu, un;

	*(void **)&mark = dlsym(RTLD_DEFAULT, "emu_count_mark");
	WT_REQUIRE(mark != NULL); /* run under the CUDA emulator */
	tie_run(WEFT_BF16, WEFT_BF16, 0, mark, "fused");
	tie_run(WEFT_BF16, WEFT_BF16, 1, mark, "unfused");
	fu = ct_count_span(path, "fused", "after", NULL);
	un = ct_count_span(path, "unfused", "after", NULL);
	printf("bf16 %dx%dx%d with a bias, bf16 C: fused %d G + %d K lines (%s; %s), %.0f bytes; "
	       "unfused %d G + %d K (%s; %s), %.0f bytes\n", TIE_M, TIE_N, TIE_K, fu.g, fu.k,
	       fu.g_name, fu.k_names, fu.bytes, un.g, un.k, un.g_name, un.k_names, un.bytes);
	WT_CHECK(fu.g == 1 && strstr(fu.g_name, "cublasLtMatmul") && strstr(fu.g_name, " bias"));
	WT_CHECK(fu.g_read == ab + TIE_N * 2.0); /* the bias read as BF16 */
	WT_CHECK(fu.k == 1 && strstr(fu.k_names, "convert") && !strstr(fu.k_names, "epilogue"));
	WT_CHECK(un.g == 1 && un.k == 1 && strstr(un.k_names, "epilogue"));
	WT_CHECK(un.bytes - fu.bytes >= 2.0 * product - 4.0 * 4096.0);
}

/* One BGRAD call on the GPU and the CPU (alpha 1, no bias; x->epi,
 * x->bias ignored): C's worst ratio to the NONE bound, and aux's to the
 * bound in the header. lda is A's stored width (m with trans_a: a linear
 * layer's dy) when dense_a, else that plus 8 (16 bytes: fused where the
 * width is a multiple of 8). */
static double run_bgrad(const ex_case *x, int dense_a)
{
	const int64_t m = x->m, n = x->n, k = x->k, sh = x->shift;
	const int64_t ar = x->ta ? k : m, ac = x->ta ? m : k, br = x->tb ? n : k,
		      bc = x->tb ? k : n;
	const int64_t lda = dense_a ? ac : ac + 8, ldb = bc, ldc = n, na = ar * lda + sh,
		      nb = br * ldb + sh;
	ex_case xn = *x;
	size_t cs = ct_size(x->c_dt), cbytes = (size_t)(m * ldc) * cs;
	uint16_t *a = malloc((size_t)na * 2), *b = malloc((size_t)nb * 2);
	float *bias = malloc((size_t)n * 4), *aux0 = malloc((size_t)m * 4),
	      *want_aux = malloc((size_t)m * 4), *got_aux = malloc((size_t)m * 4);
	char *c = malloc(cbytes), *scratch = malloc(cbytes), *want = malloc(cbytes),
	     *got = malloc(cbytes);
	ct_dev g = ct_gpu_dev(x->lo);
	void *da, *db, *dc;
	float *daux;
	double worst = 0.0;

	WT_REQUIRE(a && b && bias && aux0 && want_aux && got_aux && c && scratch && want && got);
	xn.epi = WEFT_EPI_NONE;
	xn.bias = 0;
	ex_fill(&xn, a, na, b, nb, bias, c, scratch, m * ldc);
	for (int64_t i = 0; i < m; i++)
		aux0[i] = 4.0f * ex_uniform();
	da = ct_in_raw(&g, a, (size_t)na * 2);
	db = ct_in_raw(&g, b, (size_t)nb * 2);
	dc = ct_in_raw(&g, c, cbytes);
	daux = ct_in_raw(&g, aux0, (size_t)m * 4);
	memcpy(want, c, cbytes);
	memcpy(want_aux, aux0, (size_t)m * 4);
	WT_OK(ct_cpu->gemm_lowp_ex(NULL, x->lo, x->ta, x->tb, m, n, k, 1.0f, a + sh, lda, b + sh,
				   ldb, x->beta, x->c_dt, want, ldc, NULL, WEFT_EPI_BGRAD,
				   want_aux));
	WT_OK(ct_gpu->gemm_lowp_ex(ct_kctx, x->lo, x->ta, x->tb, m, n, k, 1.0f,
				   (uint16_t *)da + sh, lda, (uint16_t *)db + sh, ldb, x->beta,
				   x->c_dt, dc, ldc, NULL, WEFT_EPI_BGRAD, daux));
	WT_OK(ct_gpu->copy(ct_kctx, got, dc, cbytes, WEFT_COPY_DEVICE_TO_HOST));
	WT_OK(ct_gpu->copy(ct_kctx, got_aux, daux, (size_t)m * 4, WEFT_COPY_DEVICE_TO_HOST));
	for (int64_t i = 0; i < m; i++) {
		double mag = x->beta != 0.0f ? fabs(aux0[i]) : 0.0;

		for (int64_t j = 0; j < n; j++) {
			double ref, v, tol;

			ex_expect(&xn, 1.0f, a + sh, lda, b + sh, ldb, bias, c, NULL, ldc, i, j, &ref,
				  &v, &tol);
			worst = fmax(worst, ratio(x->c_dt, ex_load(x->c_dt, got, i * ldc + j),
						  ex_load(x->c_dt, want, i * ldc + j), tol));
		}
		for (int64_t l = 0; l < k; l++)
			mag += fabs(ex_load(x->lo, a + sh, x->ta ? l * lda + i : i * lda + l));
		worst = fmax(worst, fabs((double)got_aux[i] - want_aux[i]) /
					    (2.0 * (double)(k + 1) * 0x1p-24 * mag + 1e-30));
	}
	if (worst > 1.0)
		fprintf(stderr, "BGRAD %s->%s beta %g %s%s shift %d lda %lld %lldx%lldx%lld: worst "
			"|cuda - cpu| / tol %.3g\n", ct_name(x->lo), ct_name(x->c_dt),
			(double)x->beta, x->ta ? "T" : "N", x->tb ? "T" : "N", x->shift,
			(long long)lda, (long long)m, (long long)n, (long long)k, worst);
	ct_release(&g);
	free(a);
	free(b);
	free(bias);
	free(aux0);
	free(want_aux);
	free(got_aux);
	free(c);
	free(scratch);
	free(want);
	free(got);
	return worst;
}

static void check_bgrad(void)
{
	static const int64_t sizes[][4] = { { 24, 40, 72, 0 }, { 7, 13, 29, 0 }, { 16, 24, 9, 0 },
					    { 24, 40, 72, 1 }, { 64, 32, 128, 0 } };
	double worst = 0.0;
	int cases = 0;
	ex_case x;

	/* the grid's epilogue and bias do not matter here: one of each */
	for (int i = 0; ex_case_at(i, sizes, 5, &x); i++) {
		if (x.epi != WEFT_EPI_NONE || x.bias || (x.shift && (x.ta || x.tb)))
			continue;
		worst = fmax(worst, run_bgrad(&x, 0));
		if (x.ta) /* a linear layer's dy: lda = m */
			worst = fmax(worst, run_bgrad(&x, 1));
		cases += 1 + x.ta;
	}
	printf("BGRAD: %d cases, worst |cuda - cpu| / tolerance %.3f\n", cases, worst);
	WT_CHECK(worst <= 1.0);
}

/* A linear layer's dw with BGRAD: dy (BG_K rows of BG_M, BF16) `shift`
 * elements past an aligned address, x (BG_K x BG_N), an F32 C; `mark`
 * around the call. */
enum { BG_M = 64, BG_N = 32, BG_K = 128 };
static void bgrad_run(int shift, float beta, void (*mark)(const char *), const char *label)
{
	uint16_t *a = calloc(BG_K * BG_M + 1, 2), *b = malloc(BG_K * BG_N * 2);
	float *zero = calloc(BG_M * BG_N, 4);
	ct_dev g = ct_gpu_dev(WEFT_BF16);
	void *da, *db, *dc, *daux;

	WT_REQUIRE(a && b && zero);
	for (int i = 0; i < BG_K * BG_M; i++)
		a[i + shift] = weft_f32_to_bf16(ex_uniform());
	for (int i = 0; i < BG_K * BG_N; i++)
		b[i] = weft_f32_to_bf16(ex_uniform());
	da = ct_in_raw(&g, a, (BG_K * BG_M + 1) * 2);
	db = ct_in_raw(&g, b, BG_K * BG_N * 2);
	dc = ct_in_raw(&g, zero, BG_M * BG_N * 4);
	daux = ct_in_raw(&g, zero, BG_M * 4);
	mark(label);
	WT_OK(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_BF16, 1, 0, BG_M, BG_N, BG_K, 1.0f,
				   (uint16_t *)da + shift, BG_M, db, BG_N, beta, WEFT_F32, dc, BG_N,
				   NULL, WEFT_EPI_BGRAD, daux));
	mark("after");
	ct_release(&g);
	free(a);
	free(b);
	free(zero);
}

static void check_bgrad_counts(const char *path)
{
	void (*mark)(const char *) = NULL;
	ct_span f0, f1, un;

	*(void **)&mark = dlsym(RTLD_DEFAULT, "emu_count_mark");
	WT_REQUIRE(mark != NULL); /* run under the CUDA emulator */
	bgrad_run(0, 0.0f, mark, "bgrad fused");
	bgrad_run(0, 1.0f, mark, "bgrad fused beta 1");
	bgrad_run(1, 0.0f, mark, "bgrad unfused");
	f0 = ct_count_span(path, "bgrad fused", "after", NULL);
	f1 = ct_count_span(path, "bgrad fused beta 1", "after", NULL);
	un = ct_count_span(path, "bgrad unfused", "after", NULL);
	printf("dw + db %dx%dx%d: fused %d G + %d K (%s; %s), %.0f bytes; beta 1 %d G + %d K "
	       "(%s), %.0f bytes; unfused %d G + %d K (%s), %.0f bytes\n", BG_M, BG_N, BG_K, f0.g,
	       f0.k, f0.g_name, f0.k_names, f0.bytes, f1.g, f1.k, f1.k_names, f1.bytes, un.g, un.k,
	       un.k_names, un.bytes);
	WT_CHECK(f0.g == 1 && strstr(f0.g_name, "bgradb") && f0.k == 0);
	WT_CHECK(f1.g == 1 && strstr(f1.g_name, "bgradb") && f1.k == 1 &&
		 strstr(f1.k_names, "axpy"));
	WT_CHECK(un.g == 1 && !strstr(un.g_name, "bgradb") && strstr(un.k_names, "k_sum_rows_part") &&
		 strstr(un.k_names, "k_add_parts"));
	WT_CHECK(un.bytes - f0.bytes >= 2.0 * BG_M * BG_K - 2.0 * 4096.0);
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
	WT_FAILS(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_BF16, 1, 0, 2, 2, 2, 1.0f, p, 2, p, 2, 0.0f,
				      WEFT_F32, p, 2, bias, WEFT_EPI_BGRAD, bias),
		 WEFT_ERR_INVALID_ARG, "cuda:0 kernel gemm_lowp_ex", "WEFT_EPI_BGRAD takes no "
		 "bias", "pass bias NULL");
	WT_FAILS(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_BF16, 1, 0, 2, 2, 2, 0.5f, p, 2, p, 2, 0.0f,
				      WEFT_F32, p, 2, NULL, WEFT_EPI_BGRAD, bias),
		 WEFT_ERR_INVALID_ARG, "cuda:0 kernel gemm_lowp_ex", "pass alpha 1",
		 "alpha 0.5");
	WT_FAILS(ct_gpu->gemm_lowp_ex(ct_kctx, WEFT_BF16, 1, 0, 2, 2, 2, 1.0f, p, 2, p, 2, 1.0f,
				      WEFT_F32, p, 2, NULL, WEFT_EPI_BGRAD, NULL),
		 WEFT_ERR_INVALID_ARG, "cuda:0 kernel gemm_lowp_ex", "writes the bias gradient "
		 "(m F32 elements) to aux: pass it");
	ct_release(&g);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		char path[] = "/tmp/weft_gemm_ex_counts_XXXXXX";
		int fd = mkstemp(path);

		WT_REQUIRE(!strcmp(argv[1], "fused-bias-counts") && fd >= 0);
		close(fd);
		setenv("EMU_COUNTS", path, 1); /* before any device work */
		ct_setup("test_cuda_gemm_ex");
		check_fused_bias_counts(path);
		check_bgrad_counts(path);
		ct_teardown();
		unlink(path);
		return wt_done("test_cuda_gemm_ex_fused_bias");
	}
	ct_setup("test_cuda_gemm_ex");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, gemm_lowp_ex) &&
		   ct_gpu->gemm_lowp_ex && ct_cpu->gemm_lowp_ex);
	check_against_cpu();
	check_plan_reuse();
	check_bias_rounded();
	check_bgrad();
	check_misuse();
	ct_teardown();
	return wt_done("test_cuda_gemm_ex");
}
