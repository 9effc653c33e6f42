/* The 16-bit activation members on CUDA (kernels/cuda/cuda_lowp.cu, ABI
 * 1.6) against the CPU table's (kernels/cpu/cpu_lowp.c) on the same BF16 /
 * F16 inputs:
 * - sum_rows_lowp; layernorm_lowp_forward with the residual fused (sum in
 *   its own buffer and in place over x) and without (r NULL), b NULL or
 *   not; layernorm_lowp_backward with dx_write 1 (dx holds NaN, never
 *   read) and 0, db NULL or not; cross_entropy_lowp_forward and _backward
 *   with ignore_index rows, I32 and I64 targets, padded rows whose padding
 *   holds NaN (never read: the results are finite; never written: it still
 *   holds the same bits), out of place and in place (dlogits == logits);
 *   cross_entropy_lowp_fused and _regrad (ABI 1.7; test_ce_fused);
 * - shapes whose rows start 16-byte aligned (the 128-bit path) with cols
 *   not a multiple of 8 (the scalar tail), rows that start misaligned
 *   (cols odd, or every operand one element past an aligned address), and
 *   rows past one partial-sum run (several slots);
 * - determinism: the same inputs twice give the same bits (column sums,
 *   statistics, loss);
 * - no member waits for the device (test_no_wait), and the second call of
 *   each allocates nothing that would make it wait;
 * - errors: a dtype that is not 16-bit, a residual without `sum`.
 *
 * Tolerances, per result:
 * - 16-bit outputs are rounded once from F32 values that differ only in
 *   the last bits of F32 (order of sums, the exp of each side), so they
 *   may round to neighbours: one unit in the last place, 2^-7 relative for
 *   BF16 (8 bits) and 2^-10 for F16 (11 bits), plus 1e-6 absolute for
 *   results that cancel to near 0 (F32's error on operands of size ~3)
 *   and F16's subnormal spacing 2^-24. The residual sum s = x + r is
 *   rounded from the same F32 sum on both sides: the same bits.
 * - F32 statistics (mean, rstd, lse, loss) differ by accumulation order:
 *   1e-6 relative (at most a few hundred terms of one sign pattern), with
 *   1e-6 absolute for a mean near 0.
 * - F32 column sums (sum_rows_lowp, dw, db) are summed in another order:
 *   within 2 (rows + 1) 2^-24 times the sum of the terms' magnitudes (the
 *   bound of recursive summation, for each side).
 */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "cuda_test.h"
#include "weft/half.h"

static const weft_dtype lp_dts[] = { WEFT_BF16, WEFT_F16 };

/* A side: the CPU or the GPU table, computing on 16-bit `dt` buffers. */
static ct_dev side(int k, weft_dtype dt)
{
	ct_dev d = k ? ct_gpu_dev(dt) : ct_cpu_dev();

	d.dt = dt;
	return d;
}

/* n values from h, as d->dt, at element `skew` of a fresh buffer (skew 1:
 * the operand starts 2 bytes past an aligned address). */
static void *put(ct_dev *d, const float *h, int64_t n, int64_t skew)
{
	size_t bytes = (size_t)(n + skew) * 2;
	uint16_t *tmp = malloc(bytes + 2);
	char *p = ct_alloc(d, bytes);

	WT_REQUIRE(tmp != NULL);
	WT_OK(ct_cpu->convert(NULL, n, WEFT_F32, h, d->dt, tmp + skew));
	WT_OK(d->t->copy(d->kctx, p + skew * 2, tmp + skew, (size_t)n * 2,
			 WEFT_COPY_HOST_TO_DEVICE));
	free(tmp);
	return p + skew * 2;
}

/* n F32 values onto d (NULL: none). */
static float *put_f32(ct_dev *d, const float *h, int64_t n)
{
	return h ? ct_in_raw(d, h, (size_t)n * 4) : NULL;
}

/* The raw 16-bit values of n elements at p. */
static uint16_t *get_bits(ct_dev *d, const void *p, int64_t n)
{
	uint16_t *h = malloc((size_t)n * 2 + 2);

	WT_REQUIRE(h != NULL);
	WT_OK(d->t->copy(d->kctx, h, p, (size_t)n * 2, WEFT_COPY_DEVICE_TO_HOST));
	return h;
}

static float *get_f32(ct_dev *d, const float *p, int64_t n)
{
	float *h = malloc((size_t)n * 4 + 4);

	WT_REQUIRE(h != NULL);
	ct_out_f32(d, p, n, h);
	return h;
}

static float widen(weft_dtype dt, uint16_t b)
{
	return dt == WEFT_F16 ? weft_half_f16_to_f32(b) : weft_half_bf16_to_f32(b);
}

/* One ulp of a 16-bit result (see the top). */
static ct_tol one_ulp(weft_dtype dt)
{
	return (ct_tol){ dt == WEFT_BF16 ? 0x1p-7 : 0x1p-10, 1e-6 + 0x1p-24 };
}

/* 16-bit results, compared as floats. */
static void expect_bits_close(const char *what, weft_dtype dt, const uint16_t *got,
			      const uint16_t *want, int64_t n, ct_tol tol)
{
	float *g = malloc((size_t)n * 4 + 4), *w = malloc((size_t)n * 4 + 4);

	WT_REQUIRE(g && w);
	for (int64_t i = 0; i < n; i++) {
		g[i] = widen(dt, got[i]);
		w[i] = widen(dt, want[i]);
	}
	ct_expect_close(what, dt, g, w, n, tol);
	free(g);
	free(w);
}

/* Column sums: |got - want| <= 2 (rows + 1) 2^-24 mag[j]. */
static void expect_col_sums(const char *what, const float *got, const float *want,
			    const double *mag, int64_t cols, int64_t rows)
{
	int64_t bad = 0;

	for (int64_t j = 0; j < cols; j++)
		bad += !(fabs((double)got[j] - want[j]) <= 2.0 * (rows + 1) * 0x1p-24 * mag[j]);
	if (bad)
		fprintf(stderr, "%s: %lld of %lld columns past the summation bound\n", what,
			(long long)bad, (long long)cols);
	WT_CHECK(bad == 0);
}

typedef struct shape {
	int64_t rows, cols, skew;
} shape;

/* aligned rows with a tail; odd cols (rows alternate); all operands
 * skewed; several partial-sum runs (sum_rows: 64 rows, layernorm: 32);
 * columns past one tile of sum_rows_lowp's threads (128 x 8) */
static const shape shapes[] = { { 45, 77, 0 }, { 40, 768, 0 }, { 33, 64, 1 }, { 150, 136, 0 },
				{ 20, 1288, 0 } };

static void test_sum_rows(weft_dtype dt)
{
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int64_t rows = shapes[s].rows, cols = shapes[s].cols, n = rows * cols;
		float *x = ct_random(300 + s, n, -2.0f, 2.0f, dt);
		float *o0 = ct_random(310 + s, cols, -1.0f, 1.0f, WEFT_F32), *out[3];
		double *mag = calloc((size_t)cols, sizeof(double));

		WT_REQUIRE(mag != NULL);
		for (int64_t i = 0; i < n; i++)
			mag[i % cols] += fabs(x[i]);
		for (int64_t j = 0; j < cols; j++)
			mag[j] += fabs(o0[j]);
		for (int k = 0; k < 2; k++) {
			ct_dev d = side(k, dt);
			void *xd = put(&d, x, n, shapes[s].skew);
			float *od = put_f32(&d, o0, cols);

			WT_OK(d.t->sum_rows_lowp(d.kctx, dt, rows, cols, xd, od));
			out[k] = get_f32(&d, od, cols);
			if (k == 1) { /* again from the same out: the same bits */
				WT_OK(d.t->copy(d.kctx, od, o0, (size_t)cols * 4,
						WEFT_COPY_HOST_TO_DEVICE));
				WT_OK(d.t->sum_rows_lowp(d.kctx, dt, rows, cols, xd, od));
				out[2] = get_f32(&d, od, cols);
			}
			ct_release(&d);
		}
		expect_col_sums("sum_rows_lowp", out[1], out[0], mag, cols, rows);
		WT_CHECK(memcmp(out[1], out[2], (size_t)cols * 4) == 0);
		for (int k = 0; k < 3; k++)
			free(out[k]);
		free(x);
		free(o0);
		free(mag);
	}
}

/* mode 0: r NULL, sum NULL; 1: r NULL, sum a copy; 2: r, its own sum; 3:
 * r, sum over x (in place). */
static void test_ln_forward(weft_dtype dt)
{
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int mode = 0; mode < 4; mode++) {
			int64_t rows = shapes[s].rows, cols = shapes[s].cols, n = rows * cols;
			int64_t skew = shapes[s].skew;
			float *x = ct_random(400 + s, n, -3.0f, 3.0f, dt);
			float *r = ct_random(410 + s, n, -1.0f, 1.0f, dt);
			float *w = ct_random(420 + s, cols, 0.5f, 1.5f, WEFT_F32);
			float *b = mode % 2 ? ct_random(430 + s, cols, -0.5f, 0.5f, WEFT_F32) : NULL;
			uint16_t *y[2], *sum[2];
			float *mean[3], *rstd[3];

			for (int k = 0; k < 2; k++) {
				ct_dev d = side(k, dt);
				void *xd = put(&d, x, n, skew), *rd = mode >= 2 ? put(&d, r, n, skew) : NULL;
				void *sd = mode == 0 ? NULL : mode == 3 ? xd : put(&d, x, n, skew);
				void *yd = put(&d, x, n, skew);
				float *wd = put_f32(&d, w, cols), *bd = put_f32(&d, b, cols);
				float *md = ct_alloc(&d, (size_t)rows * 4);
				float *rsd = ct_alloc(&d, (size_t)rows * 4);

				if (mode == 1) /* a copy of x goes to sum: start it elsewhere */
					WT_OK(d.t->zero(d.kctx, sd, (size_t)n * 2));
				WT_OK(d.t->layernorm_lowp_forward(d.kctx, dt, rows, cols, 1e-5f, xd, rd, sd,
								  wd, bd, yd, md, rsd));
				y[k] = get_bits(&d, yd, n);
				sum[k] = sd ? get_bits(&d, sd, n) : NULL;
				mean[k] = get_f32(&d, md, rows);
				rstd[k] = get_f32(&d, rsd, rows);
				if (k == 1 && mode != 3) { /* again: the same statistics */
					WT_OK(d.t->layernorm_lowp_forward(d.kctx, dt, rows, cols, 1e-5f,
									  xd, rd, sd, wd, bd, yd, md,
									  rsd));
					mean[2] = get_f32(&d, md, rows);
					rstd[2] = get_f32(&d, rsd, rows);
					WT_CHECK(memcmp(mean[2], mean[1], (size_t)rows * 4) == 0);
					WT_CHECK(memcmp(rstd[2], rstd[1], (size_t)rows * 4) == 0);
					free(mean[2]);
					free(rstd[2]);
				}
				ct_release(&d);
			}
			if (sum[0])
				WT_CHECK(memcmp(sum[0], sum[1], (size_t)n * 2) == 0);
			ct_expect_close("layernorm_lowp_forward mean", WEFT_F32, mean[1], mean[0], rows,
					(ct_tol){ 1e-6, 1e-6 });
			ct_expect_close("layernorm_lowp_forward rstd", WEFT_F32, rstd[1], rstd[0], rows,
					(ct_tol){ 1e-6, 0.0 });
			expect_bits_close("layernorm_lowp_forward y", dt, y[1], y[0], n, one_ulp(dt));
			for (int k = 0; k < 2; k++) {
				free(y[k]);
				free(sum[k]);
				free(mean[k]);
				free(rstd[k]);
			}
			free(x);
			free(r);
			free(w);
			free(b);
		}
}

static void test_ln_backward(weft_dtype dt)
{
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int mode = 0; mode < 4; mode++) {
			int dx_write = mode & 1, with_db = mode < 2;
			int64_t rows = shapes[s].rows, cols = shapes[s].cols, n = rows * cols;
			int64_t skew = shapes[s].skew;
			float *x = ct_random(500 + s, n, -3.0f, 3.0f, dt);
			float *dy = ct_random(510 + s, n, -1.0f, 1.0f, dt);
			float *dx0 = ct_random(520 + s, n, -1.0f, 1.0f, dt);
			float *w = ct_random(530 + s, cols, 0.5f, 1.5f, WEFT_F32);
			float *dw0 = ct_random(540 + s, cols, -1.0f, 1.0f, WEFT_F32);
			float *db0 = ct_random(550 + s, cols, -1.0f, 1.0f, WEFT_F32);
			float *mean = malloc((size_t)rows * 4), *rstd = malloc((size_t)rows * 4);
			double *mag_w = calloc((size_t)cols, 8), *mag_b = calloc((size_t)cols, 8);
			uint16_t *dx[3];
			float *dw[3], *db[3];

			WT_REQUIRE(mean && rstd && mag_w && mag_b);
			if (dx_write) /* not read: NaN must not show */
				for (int64_t i = 0; i < n; i++)
					dx0[i] = NAN;
			for (int64_t i = 0; i < rows; i++) { /* the statistics of x, as F32 */
				double m = 0.0, v = 0.0;

				for (int64_t j = 0; j < cols; j++)
					m += x[i * cols + j];
				m /= (double)cols;
				for (int64_t j = 0; j < cols; j++)
					v += (x[i * cols + j] - m) * (x[i * cols + j] - m);
				mean[i] = (float)m;
				rstd[i] = (float)(1.0 / sqrt(v / (double)cols + 1e-5));
				for (int64_t j = 0; j < cols; j++) {
					double g = dy[i * cols + j];

					mag_w[j] += fabs(g * (x[i * cols + j] - mean[i]) * rstd[i]);
					mag_b[j] += fabs(g);
				}
			}
			for (int64_t j = 0; j < cols; j++) {
				mag_w[j] += fabs(dw0[j]);
				mag_b[j] += fabs(db0[j]);
			}
			for (int k = 0; k < 2; k++) {
				ct_dev d = side(k, dt);
				void *sd = put(&d, x, n, skew), *dyd = put(&d, dy, n, skew);
				void *dxd = put(&d, dx0, n, skew);
				float *wd = put_f32(&d, w, cols), *md = put_f32(&d, mean, rows);
				float *rd = put_f32(&d, rstd, rows), *dwd = put_f32(&d, dw0, cols);
				float *dbd = with_db ? put_f32(&d, db0, cols) : NULL;

				WT_OK(d.t->layernorm_lowp_backward(d.kctx, dt, rows, cols, sd, wd, md, rd,
								   dyd, dxd, dx_write, dwd, dbd));
				dx[k] = get_bits(&d, dxd, n);
				dw[k] = get_f32(&d, dwd, cols);
				db[k] = with_db ? get_f32(&d, dbd, cols) : NULL;
				if (k == 1 && dx_write) { /* again from the same dw, db: same bits */
					WT_OK(d.t->copy(d.kctx, dwd, dw0, (size_t)cols * 4,
							WEFT_COPY_HOST_TO_DEVICE));
					if (with_db)
						WT_OK(d.t->copy(d.kctx, dbd, db0, (size_t)cols * 4,
								WEFT_COPY_HOST_TO_DEVICE));
					WT_OK(d.t->layernorm_lowp_backward(d.kctx, dt, rows, cols, sd, wd,
									   md, rd, dyd, dxd, 1, dwd,
									   dbd));
					dx[2] = get_bits(&d, dxd, n);
					dw[2] = get_f32(&d, dwd, cols);
					db[2] = with_db ? get_f32(&d, dbd, cols) : NULL;
					WT_CHECK(memcmp(dx[2], dx[1], (size_t)n * 2) == 0);
					WT_CHECK(memcmp(dw[2], dw[1], (size_t)cols * 4) == 0);
					WT_CHECK(!with_db || memcmp(db[2], db[1], (size_t)cols * 4) == 0);
					free(dx[2]);
					free(dw[2]);
					free(db[2]);
				}
				ct_release(&d);
			}
			expect_bits_close("layernorm_lowp_backward dx", dt, dx[1], dx[0], n,
					  one_ulp(dt));
			expect_col_sums("layernorm_lowp_backward dw", dw[1], dw[0], mag_w, cols, rows);
			if (with_db)
				expect_col_sums("layernorm_lowp_backward db", db[1], db[0], mag_b, cols,
						rows);
			for (int k = 0; k < 2; k++) {
				free(dx[k]);
				free(dw[k]);
				free(db[k]);
			}
			free(x); free(dy); free(dx0); free(w); free(dw0); free(db0);
			free(mean); free(rstd); free(mag_w); free(mag_b);
		}
}

/* Rows of `vocab` logits, `ld` apart, at element `skew`; padding NaN. */
typedef struct ce_shape {
	int64_t rows, vocab, ld, skew;
	weft_dtype idx_dt;
} ce_shape;

static const ce_shape ce_shapes[] = {
	{ 13, 1003, 1008, 0, WEFT_I64 }, /* aligned rows, a tail of 3, padding */
	{ 9, 61, 61, 0, WEFT_I32 },      /* rows alternately misaligned */
	{ 6, 4096, 4100, 1, WEFT_I64 },  /* every row misaligned, padding */
	{ 5, 5003, 5008, 0, WEFT_I32 },  /* 3 stretches of 8 a thread: the max grows */
};

/* Targets of cs's rows (every fourth from row 1 ign, I64 and I32 copies)
 * and NaN in the padding of z. */
static void ce_inputs(const ce_shape *cs, int64_t ign, float *z, int64_t *tg, int32_t *tg32)
{
	WT_REQUIRE(tg && tg32);
	for (int64_t r = 0; r < cs->rows; r++) {
		tg[r] = r % 4 == 1 ? ign : (r * 7919 + 13) % cs->vocab;
		tg32[r] = (int32_t)tg[r];
		for (int64_t j = cs->vocab; j < cs->ld; j++)
			z[r * cs->ld + j] = NAN;
	}
}

static void test_ce(weft_dtype dt, const ce_shape *cs)
{
	int64_t rows = cs->rows, vocab = cs->vocab, ld = cs->ld, n = rows * ld, ign = -100;
	float *z = ct_random(600 + (uint64_t)vocab, n, -4.0f, 4.0f, dt), dloss = 1.3f;
	int64_t *tg = malloc((size_t)rows * 8);
	int32_t *tg32 = malloc((size_t)rows * 4);
	const void *targets = cs->idx_dt == WEFT_I64 ? (const void *)tg : (const void *)tg32;
	size_t tbytes = (size_t)rows * (cs->idx_dt == WEFT_I64 ? 8 : 4);
	float *lse[2], *stats[3], *lse_cpu = NULL;
	uint16_t *g[2], *inplace = NULL, *zbits = NULL;
	int64_t pad_bad = 0, ign_bad = 0;
	float scale;

	ce_inputs(cs, ign, z, tg, tg32);
	for (int k = 0; k < 2; k++) {
		ct_dev d = side(k, dt);
		void *zd = put(&d, z, n, cs->skew), *gd = put(&d, z, n, cs->skew);
		void *zip = put(&d, z, n, cs->skew), *td = ct_in_raw(&d, targets, tbytes);
		float *ld_ = ct_alloc(&d, (size_t)rows * 4), *st = ct_alloc(&d, 16);
		float *lse_in;

		WT_OK(d.t->cross_entropy_lowp_forward(d.kctx, dt, rows, vocab, ld, zd, cs->idx_dt,
						      td, ign, ld_, st, st + 1));
		lse[k] = get_f32(&d, ld_, rows);
		stats[k] = get_f32(&d, st, 2);
		if (k == 1) { /* again: the same bits */
			WT_OK(d.t->cross_entropy_lowp_forward(d.kctx, dt, rows, vocab, ld, zd,
							      cs->idx_dt, td, ign, ld_, st, st + 1));
			stats[2] = get_f32(&d, st, 2);
			WT_CHECK(memcmp(stats[2], stats[1], 8) == 0);
			free(stats[2]);
		}
		/* backward on both sides from the CPU's lse and count */
		if (k == 0)
			lse_cpu = lse[0];
		lse_in = put_f32(&d, lse_cpu, rows);
		WT_OK(d.t->copy(d.kctx, st + 2, &dloss, 4, WEFT_COPY_HOST_TO_DEVICE));
		WT_OK(d.t->copy(d.kctx, st + 3, &stats[0][1], 4, WEFT_COPY_HOST_TO_DEVICE));
		/* gd holds the logits, padding NaN: every used element is written over */
		WT_OK(d.t->cross_entropy_lowp_backward(d.kctx, dt, rows, vocab, ld, zd, cs->idx_dt, td,
						       ign, lse_in, st + 2, st + 3, gd));
		g[k] = get_bits(&d, (char *)gd - cs->skew * 2, n + cs->skew);
		if (k == 1) {
			WT_OK(d.t->cross_entropy_lowp_backward(d.kctx, dt, rows, vocab, ld, zip,
							       cs->idx_dt, td, ign, lse_in, st + 2,
							       st + 3, zip));
			inplace = get_bits(&d, (char *)zip - cs->skew * 2, n + cs->skew);
			zbits = get_bits(&d, (char *)zd - cs->skew * 2, n + cs->skew);
		}
		ct_release(&d);
	}
	WT_CHECK(stats[1][1] == stats[0][1]);
	WT_CHECK(stats[0][1] == (float)(rows - (rows + 2) / 4));
	WT_CLOSE(stats[1][0], stats[0][0], 1e-6, 1e-6);
	ct_expect_close("cross_entropy_lowp_forward lse", WEFT_F32, lse[1], lse[0], rows,
			(ct_tol){ 1e-6, 1e-6 });
	for (int64_t r = 0; r < rows; r++) /* padding read: NaN would spread */
		WT_CHECK(isfinite(lse[1][r]));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < ld; j++) {
			int64_t e = cs->skew + r * ld + j;

			if (j >= vocab) { /* padding: the logits' NaN, untouched */
				pad_bad += g[1][e] != zbits[e] || inplace[e] != zbits[e];
				pad_bad += !isnan(widen(dt, zbits[e]));
			} else if (tg[r] == ign) {
				ign_bad += widen(dt, g[1][e]) != 0.0f;
			}
		}
	/* in place: the bits of out of place, padding included */
	WT_CHECK(memcmp(inplace + cs->skew, g[1] + cs->skew, (size_t)n * 2) == 0);
	/* the absolute part: F32's error on probabilities times the scale */
	scale = dloss / stats[0][1];
	for (int k = 0; k < 2; k++) /* the used columns, packed */
		for (int64_t r = 0; r < rows; r++)
			memmove(g[k] + r * vocab, g[k] + cs->skew + r * ld, (size_t)vocab * 2);
	expect_bits_close("cross_entropy_lowp_backward", dt, g[1], g[0], rows * vocab,
			  (ct_tol){ one_ulp(dt).rtol, 0x1p-24 + 1e-6 * scale });
	WT_CHECK(pad_bad == 0);
	WT_CHECK(ign_bad == 0);
	for (int k = 0; k < 2; k++) {
		free(lse[k]);
		free(stats[k]);
		free(g[k]);
	}
	free(inplace);
	free(zbits);
	free(z);
	free(tg);
	free(tg32);
}

/* ---- the fused classifier (ABI 1.7) ----
 * cross_entropy_lowp_fused with the hint 1024 and _regrad, per side (each
 * against itself) and the GPU against the CPU, on the shapes above:
 * - the fused call gives the side's own _forward (lse, loss, count) and
 *   _backward from a dloss equal to the hint (the gradient, padding
 *   included) bit for bit: the same statistics and formula (the GPU's
 *   forward and fused kernels take the same blocks);
 * - _regrad with *dloss equal to the hint leaves every bit as it was;
 *   with 3.7 it gives _backward's gradient for 3.7 within (3u + 4u^2 +
 *   2^-20) |g| (u = 2^-8 BF16, 2^-11 F16) plus 2^-24 (1 + 3.7 / 1024)
 *   (kernels.h's bounds of each to the exact value, added, over 1 - u;
 *   F16's subnormals);
 * - _regrad over the same 16-bit input on both sides: the same bits (one
 *   F32 product and one rounding); ignored rows and the padding keep
 *   their bits;
 * - the GPU's fused results against the CPU's with test_ce's tolerances
 *   (the scale hint / count). */
static void test_ce_fused(weft_dtype dt, const ce_shape *cs)
{
	int64_t rows = cs->rows, vocab = cs->vocab, ld = cs->ld, n = rows * ld, ign = -100;
	int64_t nb = n + cs->skew, bad_pad = 0, bad_ign = 0, bad_re = 0;
	float *z = ct_random(610 + (uint64_t)vocab, n, -4.0f, 4.0f, dt), sc[2] = { 1024.0f, 3.7f };
	int64_t *tg = malloc((size_t)rows * 8);
	int32_t *tg32 = malloc((size_t)rows * 4);
	const void *targets = cs->idx_dt == WEFT_I64 ? (const void *)tg : (const void *)tg32;
	size_t tbytes = (size_t)rows * (cs->idx_dt == WEFT_I64 ? 8 : 4);
	double u = dt == WEFT_BF16 ? 0x1p-8 : 0x1p-11;
	uint16_t *fz[2], *rz[2];
	float *st_h[2], *lse[2];

	ce_inputs(cs, ign, z, tg, tg32);
	for (int k = 0; k < 2; k++) {
		ct_dev d = side(k, dt);
		char *zf = put(&d, z, n, cs->skew), *zt = put(&d, z, n, cs->skew);
		char *zt2 = put(&d, z, n, cs->skew), *zr = put(&d, z, n, cs->skew);
		void *td = ct_in_raw(&d, targets, tbytes);
		float *lf = ct_alloc(&d, (size_t)rows * 4), *lt = ct_alloc(&d, (size_t)rows * 4);
		float *st = ct_alloc(&d, 32), *lt_h;
		uint16_t *two, *same, *re, *re_two, *zb;

		WT_OK(d.t->copy(d.kctx, st + 4, sc, 8, WEFT_COPY_HOST_TO_DEVICE));
		WT_OK(d.t->cross_entropy_lowp_fused(d.kctx, dt, rows, vocab, ld, zf, cs->idx_dt, td,
						    ign, sc[0], lf, st, st + 1));
		WT_OK(d.t->cross_entropy_lowp_forward(d.kctx, dt, rows, vocab, ld, zt, cs->idx_dt,
						      td, ign, lt, st + 2, st + 3));
		WT_OK(d.t->cross_entropy_lowp_backward(d.kctx, dt, rows, vocab, ld, zt, cs->idx_dt,
						       td, ign, lt, st + 4, st + 3, zt));
		WT_OK(d.t->cross_entropy_lowp_backward(d.kctx, dt, rows, vocab, ld, zt2, cs->idx_dt,
						       td, ign, lt, st + 5, st + 3, zt2));
		fz[k] = get_bits(&d, zf - cs->skew * 2, nb);
		two = get_bits(&d, zt - cs->skew * 2, nb);
		re_two = get_bits(&d, zt2 - cs->skew * 2, nb);
		st_h[k] = get_f32(&d, st, 4);
		lse[k] = get_f32(&d, lf, rows);
		lt_h = get_f32(&d, lt, rows);
		/* fused = forward, then backward from the hint: the same bits */
		WT_CHECK(memcmp(st_h[k], st_h[k] + 2, 8) == 0);
		WT_CHECK(memcmp(lse[k], lt_h, (size_t)rows * 4) == 0);
		WT_CHECK(memcmp(fz[k], two, (size_t)nb * 2) == 0);
		/* the correction: nothing when dloss is the hint; else within 3u */
		WT_OK(d.t->cross_entropy_lowp_regrad(d.kctx, dt, rows, vocab, ld, zf, cs->idx_dt,
						     td, ign, sc[0], st + 4));
		same = get_bits(&d, zf - cs->skew * 2, nb);
		WT_CHECK(memcmp(same, fz[k], (size_t)nb * 2) == 0);
		WT_OK(d.t->cross_entropy_lowp_regrad(d.kctx, dt, rows, vocab, ld, zf, cs->idx_dt,
						     td, ign, sc[0], st + 5));
		re = get_bits(&d, zf - cs->skew * 2, nb);
		for (int64_t e = cs->skew; e < nb; e++) {
			double g = widen(dt, re[e]), w = widen(dt, re_two[e]);

			bad_re += !(fabs(g - w) <= (3 * u + 4 * u * u + 0x1p-20) * fabs(w) +
						   0x1p-24 * (1 + sc[1] / sc[0])) &&
				  !(isnan(g) && isnan(w));
		}
		/* over the logits themselves: ignored rows and padding untouched */
		zb = get_bits(&d, zr - cs->skew * 2, nb);
		WT_OK(d.t->cross_entropy_lowp_regrad(d.kctx, dt, rows, vocab, ld, zr, cs->idx_dt,
						     td, ign, sc[0], st + 5));
		rz[k] = get_bits(&d, zr - cs->skew * 2, nb);
		for (int64_t r = 0; r < rows; r++)
			for (int64_t j = 0; j < ld; j++) {
				int64_t e = cs->skew + r * ld + j;

				if (j >= vocab)
					bad_pad += rz[k][e] != zb[e] || re[e] != zb[e];
				else if (tg[r] == ign)
					bad_ign += rz[k][e] != zb[e] || widen(dt, re[e]) != 0.0f;
			}
		free(two); free(same); free(re); free(re_two); free(lt_h); free(zb);
		ct_release(&d);
	}
	WT_CHECK(bad_re == 0 && bad_pad == 0 && bad_ign == 0);
	WT_CHECK(memcmp(rz[1], rz[0], (size_t)nb * 2) == 0);
	WT_CHECK(st_h[1][1] == st_h[0][1]);
	WT_CLOSE(st_h[1][0], st_h[0][0], 1e-6, 1e-6);
	ct_expect_close("cross_entropy_lowp_fused lse", WEFT_F32, lse[1], lse[0], rows,
			(ct_tol){ 1e-6, 1e-6 });
	for (int k = 0; k < 2; k++)
		for (int64_t r = 0; r < rows; r++)
			memmove(fz[k] + r * vocab, fz[k] + cs->skew + r * ld, (size_t)vocab * 2);
	expect_bits_close("cross_entropy_lowp_fused", dt, fz[1], fz[0], rows * vocab,
			  (ct_tol){ one_ulp(dt).rtol, 0x1p-24 + 1e-6 * sc[0] / st_h[0][1] });
	for (int k = 0; k < 2; k++) {
		free(fz[k]);
		free(rz[k]);
		free(st_h[k]);
		free(lse[k]);
	}
	free(z);
	free(tg);
	free(tg32);
}

/* ---- nothing waits for the device ----
 * A host function queued on the legacy default stream holds back the
 * context's (blocking) stream until the test opens the gate. Each member
 * is called behind it; one that waited for its stream (a synchronize, a
 * copy to the host) would wait for the gate, which opens only after every
 * member has returned, so the function gives up after GATE_SECONDS and
 * says so. The emulator runs the function only when something waits for
 * the stream, so there it fails as surely. */
#define GATE_SECONDS 3
static int gate_open, gate_gave_up;

static void gate_fn(void *arg)
{
	struct timespec pause = { 0, 1000000 }; /* 1 ms */

	(void)arg;
	for (int i = 0; i < GATE_SECONDS * 1000 && !__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE);
	     i++)
		nanosleep(&pause, NULL);
	if (!__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE))
		__atomic_store_n(&gate_gave_up, 1, __ATOMIC_RELEASE);
}

/* Calls every member once on the GPU (the first round grows the row
 * scratch; the second, behind the gate, must not wait). */
static void call_all(ct_dev *d, weft_dtype dt, void **p, float **f)
{
	const int64_t rows = 40, cols = 768, ld = 1008, vocab = 1003;

	WT_OK(d->t->sum_rows_lowp(d->kctx, dt, rows, cols, p[0], f[0]));
	WT_OK(d->t->layernorm_lowp_forward(d->kctx, dt, rows, cols, 1e-5f, p[0], p[1], p[2], f[1],
					   NULL, p[3], f[2], f[3]));
	WT_OK(d->t->layernorm_lowp_backward(d->kctx, dt, rows, cols, p[2], f[1], f[2], f[3], p[1],
					    p[0], 0, f[0], f[4]));
	WT_OK(d->t->cross_entropy_lowp_forward(d->kctx, dt, rows, vocab, ld, p[4], WEFT_I32, p[5],
					       -100, f[5], f[6], f[6] + 1));
	WT_OK(d->t->cross_entropy_lowp_backward(d->kctx, dt, rows, vocab, ld, p[4], WEFT_I32, p[5],
						-100, f[5], f[6], f[6] + 1, p[4]));
	WT_OK(d->t->cross_entropy_lowp_fused(d->kctx, dt, rows, vocab, ld, p[4], WEFT_I32, p[5],
					     -100, 2.0f, f[5], f[6], f[6] + 1));
	WT_OK(d->t->cross_entropy_lowp_regrad(d->kctx, dt, rows, vocab, ld, p[4], WEFT_I32, p[5],
					      -100, 2.0f, f[6]));
}

static void test_no_wait(weft_dtype dt)
{
	ct_dev d = side(1, dt);
	const char *sync_check = getenv("WEFT_CUDA_SYNC_CHECK");
	float *x = ct_random(700, 40 * 1008, -2.0f, 2.0f, dt), *w = ct_random(701, 768, 0.5f, 1.5f,
									 WEFT_F32);
	void *p[6];
	float *f[7];

	if (sync_check && strcmp(sync_check, "0")) { /* it waits for every kernel */
		printf("test_cuda_lowp: no-wait check skipped under WEFT_CUDA_SYNC_CHECK\n");
		goto out_free;
	}
	for (int i = 0; i < 5; i++)
		p[i] = put(&d, x, 40 * 1008, 0);
	p[5] = ct_alloc(&d, 40 * 4); /* targets 0 */
	for (int i = 0; i < 7; i++)
		f[i] = i == 1 ? put_f32(&d, w, 768) : ct_alloc(&d, 1008 * 4);
	call_all(&d, dt, p, f);
	WT_OK(d.t->synchronize(d.kctx));
	gate_open = gate_gave_up = 0;
	WT_REQUIRE(cudaLaunchHostFunc(0, gate_fn, NULL) == cudaSuccess);
	call_all(&d, dt, p, f);
	__atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
	WT_OK(d.t->synchronize(d.kctx));
	WT_REQUIRE(cudaStreamSynchronize(0) == cudaSuccess);
	if (gate_gave_up)
		fprintf(stderr, "test_cuda_lowp (%s): a member waited for the device\n",
			ct_name(dt));
	WT_CHECK(!__atomic_load_n(&gate_gave_up, __ATOMIC_ACQUIRE));
	ct_release(&d);
out_free:
	free(x);
	free(w);
}

static void test_errors(void)
{
	ct_dev d = side(1, WEFT_BF16);
	void *buf = ct_alloc(&d, 64);
	float *f = ct_alloc(&d, 64);

	WT_FAILS(ct_gpu->sum_rows_lowp(ct_kctx, WEFT_F32, 1, 2, buf, f), WEFT_ERR_DTYPE,
		 "sum_rows_lowp", "bf16 or f16");
	WT_FAILS(ct_gpu->cross_entropy_lowp_backward(ct_kctx, WEFT_F32, 1, 2, 2, buf, WEFT_I64, buf,
						     -100, f, f, f, buf),
		 WEFT_ERR_DTYPE, "cross_entropy_lowp_backward", "bf16 or f16");
	WT_FAILS(ct_gpu->cross_entropy_lowp_fused(ct_kctx, WEFT_BF16, 1, 2, 2, buf, WEFT_I64, buf,
						  -100, 0.0f, f, f, f),
		 WEFT_ERR_INVALID_ARG, "cross_entropy_lowp_fused", "dloss_hint");
	WT_FAILS(ct_gpu->cross_entropy_lowp_regrad(ct_kctx, WEFT_BF16, 1, 2, 2, buf, WEFT_I64, buf,
						   -100, INFINITY, f),
		 WEFT_ERR_INVALID_ARG, "cross_entropy_lowp_regrad", "dloss_hint");
	WT_FAILS(ct_gpu->layernorm_lowp_forward(ct_kctx, WEFT_BF16, 1, 2, 1e-5f, buf,
						(char *)buf + 8, NULL, f, NULL, (char *)buf + 16,
						f + 2, f + 3),
		 WEFT_ERR_INVALID_ARG, "residual", "sum");
	ct_release(&d);
}

int main(void)
{
	ct_setup("test_cuda_lowp");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, cross_entropy_lowp_regrad));
	for (int i = 0; i < 2; i++) {
		test_sum_rows(lp_dts[i]);
		test_ln_forward(lp_dts[i]);
		test_ln_backward(lp_dts[i]);
		for (size_t s = 0; s < sizeof(ce_shapes) / sizeof(ce_shapes[0]); s++)
			test_ce(lp_dts[i], &ce_shapes[s]);
		for (size_t s = 0; s < sizeof(ce_shapes) / sizeof(ce_shapes[0]); s++)
			test_ce_fused(lp_dts[i], &ce_shapes[s]);
		test_no_wait(lp_dts[i]);
	}
	test_errors();
	ct_teardown();
	return wt_done("test_cuda_lowp");
}
