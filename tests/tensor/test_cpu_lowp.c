/* The CPU table's 16-bit activation members (kernels/cpu/cpu_lowp.c, ABI
 * 1.6) against its F32 kernels on the same widened inputs, for BF16 and
 * F16 (widening is exact, so both sides see the same F32 values).
 *
 * 1. sum_rows_lowp: out has the bits of sum_rows over the widened rows,
 *    added to what out held (tolerance 0: the same F32 additions in the
 *    same order), over one chunk of rows and over several (rows past the
 *    4 MiB work area, whose chunk boundaries must not change the order).
 * 2. layernorm_lowp_forward: with the residual (sum = round(x + r), into
 *    its own buffer and in place over x) and without (r NULL, sum NULL or
 *    a copy of x), b NULL or not: sum, mean and rstd have the bits of the
 *    F32 kernel's on s as stored, y those of its output rounded once
 *    (tolerance 0: the F32 kernel itself computes them).
 * 3. layernorm_lowp_backward: dx (dx_write 1: written over NaN; 0: added
 *    to dx's widened contents) has the bits of the F32 kernel's rounded
 *    once, dw and db its bits (db NULL too), over one chunk and several.
 * 4. cross_entropy_lowp_forward on rows of ld > vocab whose padding holds
 *    NaN, vocab not a multiple of 8, ignore_index rows, I32 and I64
 *    targets: count exact; loss within 1e-6 relative of the F32 kernel's
 *    (same row helpers; the compiler may contract differently); lse within
 *    1e-6 + 1e-6 |lse| of log(sum exp z) in double (cpu_expf is accurate
 *    to ~2e-7 relative, the sum adds in F32).
 * 5. cross_entropy_lowp_backward: each element within one rounding of the
 *    F32 kernel's gradient (2^-8 |ref| for BF16, 2^-10 for F16, plus F16's
 *    subnormal spacing 2^-24 and 1e-6 |dloss / count| for the F32
 *    differences of exp(z - lse) against exp(z - max) / sum); ignore_index
 *    rows 0; padding still NaN (never written); in place (dlogits ==
 *    logits) the same bits as out of place.
 * 6. Errors: a dtype other than F16 / BF16; a residual without `sum`. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_cpu.h"
#include "tensor_testutil.h"
#include "weft/half.h"
#include "weft/kernels.h"
#include "weft_test.h"

static const weft_kernel_table *K;

/* A quiet NaN in both BF16 and F16. */
#define NAN16 ((uint16_t)0x7fc0u)

/* One 16-bit value of dt from / to F32. */
static uint16_t f2h(weft_dtype dt, float v)
{
	return dt == WEFT_F16 ? weft_half_f32_to_f16(v) : weft_half_f32_to_bf16(v);
}

static float h2f(weft_dtype dt, uint16_t h)
{
	return dt == WEFT_F16 ? weft_half_f16_to_f32(h) : weft_half_bf16_to_f32(h);
}

/* n 16-bit values, uniform in [lo, hi) rounded to dt, and their widening. */
static uint16_t *rand_h(weft_dtype dt, int64_t n, float lo, float hi, float **wide)
{
	uint16_t *h = malloc((size_t)n * sizeof(uint16_t));
	float *f = malloc((size_t)n * sizeof(float));

	WT_REQUIRE(h && f);
	for (int64_t i = 0; i < n; i++) {
		h[i] = f2h(dt, tu_uniform(lo, hi));
		f[i] = h2f(dt, h[i]);
	}
	*wide = f;
	return h;
}

static float *rand_f(int64_t n, float lo, float hi)
{
	float *f = malloc((size_t)n * sizeof(float));

	WT_REQUIRE(f);
	for (int64_t i = 0; i < n; i++)
		f[i] = tu_uniform(lo, hi);
	return f;
}

static float *dup_f(const float *x, int64_t n)
{
	float *f = malloc((size_t)n * sizeof(float));

	WT_REQUIRE(f);
	memcpy(f, x, (size_t)n * sizeof(float));
	return f;
}

/* Elements of a 16-bit array that differ from `ref` rounded to dt. */
static int64_t bits_off_h(weft_dtype dt, const uint16_t *got, const float *ref, int64_t n)
{
	int64_t bad = 0;

	for (int64_t i = 0; i < n; i++)
		bad += got[i] != f2h(dt, ref[i]);
	return bad;
}

static int64_t bits_off_f(const float *got, const float *ref, int64_t n)
{
	return memcmp(got, ref, (size_t)n * sizeof(float)) ? 1 : 0;
}

static void check_sum_rows(weft_dtype dt, int64_t rows, int64_t cols)
{
	float *xw, *out = rand_f(cols, -1, 1), *ref = dup_f(out, cols);
	uint16_t *x = rand_h(dt, rows * cols, -2, 2, &xw);

	WT_OK(K->sum_rows_lowp(NULL, dt, rows, cols, x, out));
	WT_OK(K->sum_rows(NULL, WEFT_F32, rows, cols, xw, ref));
	WT_CHECK(bits_off_f(out, ref, cols) == 0);
	free(x);
	free(xw);
	free(out);
	free(ref);
}

/* mode 0: r NULL, sum NULL; 1: r NULL, sum a copy; 2: r, own sum; 3: r,
 * sum over x. */
static void check_ln_forward(weft_dtype dt, int64_t rows, int64_t cols, int mode, int with_b)
{
	int64_t n = rows * cols;
	float *xw, *rw, *sw = malloc((size_t)n * 4), *yref = malloc((size_t)n * 4);
	uint16_t *x = rand_h(dt, n, -3, 3, &xw), *r = rand_h(dt, n, -1, 1, &rw);
	uint16_t *sum = malloc((size_t)n * 2), *y = malloc((size_t)n * 2);
	float *w = rand_f(cols, 0.5f, 1.5f), *b = with_b ? rand_f(cols, -0.5f, 0.5f) : NULL;
	float *mean = malloc((size_t)rows * 4), *rstd = malloc((size_t)rows * 4);
	float *mref = malloc((size_t)rows * 4), *rref = malloc((size_t)rows * 4);
	uint16_t *sum_arg = mode == 0 ? NULL : mode == 3 ? x : sum;
	int64_t bad_s = 0;

	WT_REQUIRE(sw && yref && sum && y && mean && rstd && mref && rref);
	for (int64_t i = 0; i < n; i++) /* s as stored: rounded once */
		sw[i] = mode >= 2 ? h2f(dt, f2h(dt, xw[i] + rw[i])) : xw[i];
	WT_OK(K->layernorm_lowp_forward(NULL, dt, rows, cols, 1e-5f, x, mode >= 2 ? r : NULL,
					sum_arg, w, b, y, mean, rstd));
	WT_OK(K->layernorm_forward(NULL, WEFT_F32, rows, cols, 1e-5f, sw, w, b, yref, mref, rref));
	if (sum_arg)
		bad_s = bits_off_h(dt, sum_arg, sw, n);
	WT_CHECK(bad_s == 0);
	WT_CHECK(bits_off_h(dt, y, yref, n) == 0);
	WT_CHECK(bits_off_f(mean, mref, rows) == 0);
	WT_CHECK(bits_off_f(rstd, rref, rows) == 0);
	free(x); free(xw); free(r); free(rw); free(sw); free(yref); free(sum); free(y);
	free(w); free(b); free(mean); free(rstd); free(mref); free(rref);
}

static void check_ln_backward(weft_dtype dt, int64_t rows, int64_t cols, int dx_write,
			      int with_db)
{
	int64_t n = rows * cols;
	float *sw, *dyw, *dxw, *w = rand_f(cols, 0.5f, 1.5f);
	uint16_t *s = rand_h(dt, n, -3, 3, &sw), *dy = rand_h(dt, n, -1, 1, &dyw);
	uint16_t *dx = rand_h(dt, n, -1, 1, &dxw);
	float *mean = malloc((size_t)rows * 4), *rstd = malloc((size_t)rows * 4);
	float *yscr = malloc((size_t)n * 4);
	float *dw = rand_f(cols, -1, 1), *db = rand_f(cols, -1, 1);
	float *dwref = dup_f(dw, cols), *dbref = dup_f(db, cols);

	WT_REQUIRE(mean && rstd && yscr);
	WT_OK(K->layernorm_forward(NULL, WEFT_F32, rows, cols, 1e-5f, sw, w, NULL, yscr, mean,
				   rstd));
	if (dx_write) { /* dx is not read: NaN there must not show */
		for (int64_t i = 0; i < n; i++)
			dx[i] = NAN16;
		memset(dxw, 0, (size_t)n * 4);
	}
	WT_OK(K->layernorm_lowp_backward(NULL, dt, rows, cols, s, w, mean, rstd, dy, dx,
					 dx_write, dw, with_db ? db : NULL));
	WT_OK(K->layernorm_backward(NULL, WEFT_F32, rows, cols, sw, w, mean, rstd, dyw, dxw,
				    dwref, with_db ? dbref : NULL));
	WT_CHECK(bits_off_h(dt, dx, dxw, n) == 0);
	WT_CHECK(bits_off_f(dw, dwref, cols) == 0);
	WT_CHECK(bits_off_f(db, dbref, cols) == 0);
	free(s); free(sw); free(dy); free(dyw); free(dx); free(dxw); free(w); free(mean);
	free(rstd); free(yscr); free(dw); free(db); free(dwref); free(dbref);
}

static void check_ce(weft_dtype dt, weft_dtype idx_dt, int64_t rows, int64_t vocab, int64_t pad)
{
	int64_t ld = vocab + pad, n = rows * ld, ign = -100, bad = 0, pad_bad = 0;
	float *zw, *dense = malloc((size_t)(rows * vocab) * 4);
	float *probs = malloc((size_t)(rows * vocab) * 4), *gref = calloc((size_t)(rows * vocab), 4);
	uint16_t *z = rand_h(dt, n, -4, 4, &zw), *g = malloc((size_t)n * 2);
	uint16_t *inplace = malloc((size_t)n * 2);
	int64_t *tg = malloc((size_t)rows * 8);
	int32_t *tg32 = malloc((size_t)rows * 4);
	float *lse = malloc((size_t)rows * 4), loss, count, lref, cref, dloss = 1.3f, scale;
	double rel = dt == WEFT_BF16 ? 1.0 / 256 : 1.0 / 1024;
	const void *targets;

	WT_REQUIRE(dense && probs && gref && g && inplace && tg && tg32 && lse);
	for (int64_t r = 0; r < rows; r++) {
		tg[r] = r % 4 == 1 ? ign : (int64_t)(tu_uniform(0, 1) * (float)vocab) % vocab;
		tg32[r] = (int32_t)tg[r];
		for (int64_t j = 0; j < ld; j++)
			if (j >= vocab)
				z[r * ld + j] = NAN16; /* NaN */
			else
				dense[r * vocab + j] = zw[r * ld + j];
	}
	targets = idx_dt == WEFT_I64 ? (const void *)tg : (const void *)tg32;
	WT_OK(K->cross_entropy_lowp_forward(NULL, dt, rows, vocab, ld, z, idx_dt, targets, ign, lse,
					    &loss, &count));
	WT_OK(K->cross_entropy_forward(NULL, WEFT_F32, rows, vocab, dense, idx_dt, targets, ign,
				       probs, &lref, &cref));
	WT_CHECK(count == cref);
	WT_CLOSE(loss, lref, 1e-6, 0.0);
	for (int64_t r = 0; r < rows; r++) {
		double s = 0.0;

		for (int64_t j = 0; j < vocab; j++)
			s += exp((double)dense[r * vocab + j]);
		WT_CLOSE(lse[r], log(s), 1e-6, 1e-6);
	}
	memcpy(inplace, z, (size_t)n * 2);
	for (int64_t i = 0; i < n; i++)
		g[i] = NAN16; /* written over, padding kept */
	WT_OK(K->cross_entropy_lowp_backward(NULL, dt, rows, vocab, ld, z, idx_dt, targets, ign,
					     lse, &dloss, &count, g));
	WT_OK(K->cross_entropy_lowp_backward(NULL, dt, rows, vocab, ld, inplace, idx_dt, targets,
					     ign, lse, &dloss, &count, inplace));
	WT_OK(K->cross_entropy_backward(NULL, WEFT_F32, rows, vocab, probs, idx_dt, targets, ign,
					&dloss, &count, gref));
	scale = dloss / count;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < ld; j++) {
			uint16_t h = g[r * ld + j];
			float got = h2f(dt, h), want;

			if (j >= vocab) {
				pad_bad += h != NAN16;
				pad_bad += inplace[r * ld + j] != z[r * ld + j];
				continue;
			}
			want = gref[r * vocab + j];
			if (tg[r] == ign)
				bad += got != 0.0f;
			else
				bad += !(fabs((double)got - want) <=
					 rel * fabs(want) + 0x1p-24 + 1e-6 * scale);
		}
	WT_CHECK(bad == 0);
	WT_CHECK(pad_bad == 0);
	WT_CHECK(memcmp(g, inplace, (size_t)n * 2) == 0);
	free(zw); free(dense); free(probs); free(gref); free(z); free(g); free(inplace);
	free(tg); free(tg32); free(lse);
}

int main(void)
{
	static const weft_dtype dts[] = { WEFT_BF16, WEFT_F16 };
	uint16_t h[4] = { 0 };
	float f[4] = { 0 }, loss, count;

	K = weft_kernels_cpu_table();
	for (int d = 0; d < 2; d++) {
		weft_dtype dt = dts[d];

		check_sum_rows(dt, 37, 53);
		check_sum_rows(dt, 1100, 1000); /* 2 chunks: 1024 rows and 76 */
		for (int mode = 0; mode < 4; mode++)
			check_ln_forward(dt, 45, 77, mode, mode % 2);
		check_ln_forward(dt, 1100, 1000, 2, 1);
		for (int wr = 0; wr < 2; wr++) {
			check_ln_backward(dt, 45, 77, wr, 1);
			check_ln_backward(dt, 45, 77, wr, 0);
		}
		check_ln_backward(dt, 1100, 1000, 0, 1);
		check_ce(dt, WEFT_I64, 13, 1003, 5);
		check_ce(dt, WEFT_I32, 9, 61, 0);
	}
	WT_FAILS(K->sum_rows_lowp(NULL, WEFT_F32, 1, 1, h, f), WEFT_ERR_DTYPE, "sum_rows_lowp",
		 "F16 or BF16");
	WT_FAILS(K->cross_entropy_lowp_forward(NULL, WEFT_F32, 1, 2, 2, h, WEFT_I64, h, -100, f,
					       &loss, &count), WEFT_ERR_DTYPE,
		 "cross_entropy_lowp_forward", "F16 or BF16");
	WT_FAILS(K->layernorm_lowp_forward(NULL, WEFT_BF16, 1, 2, 1e-5f, h, h + 2, NULL, f, NULL,
					   h, f, f + 1), WEFT_ERR_INVALID_ARG, "residual", "sum");
	return wt_done("test_cpu_lowp");
}
