/* 16-bit activations on the CPU (weft_kernel_table, since ABI 1.6): the
 * bias sum, layernorm with the residual add, and the classifier's loss
 * over F16 / BF16 rows (with, since ABI 1.7, the fused classifier: the
 * loss and its gradient in one call, and the gradient's correction), the
 * references the CUDA kernels are tested against.
 *
 * Each widens its rows to F32 (exact), computes as the F32 kernel of the
 * same name does (by calling it: cpu_sum_rows, cpu_layernorm_forward and
 * _backward; the loss through the same row helpers as
 * cpu_cross_entropy_forward), and rounds each 16-bit output once. Rows are
 * widened a chunk at a time into a work area of at most LOWP_CHUNK floats
 * per operand; a chunk is a multiple of 32 rows (the row blocks whose
 * partial sums cpu_layernorm_backward keeps apart), so the column sums
 * (sum_rows, dw, db) are added in the order one F32 call over all the rows
 * adds them, and have its bits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "weft/half.h"
#include "weft/memory.h"

/* Floats of one operand's work area (4 MiB): enough rows for every kernel
 * thread to get a share of a chunk. */
#define LOWP_CHUNK ((int64_t)1 << 20)
/* Rows of a chunk are a multiple of this. */
#define LOWP_ROW_BLOCK 32

/* Checks that dt is a 16-bit activation dtype. */
static weft_status lowp_dtype(const char *member, weft_dtype dt)
{
	if (dt == WEFT_F16 || dt == WEFT_BF16)
		return WEFT_OK;
	return weft_error_set(WEFT_ERR_DTYPE, "cpu kernel %s: activations of dtype %d; it takes "
			      "F16 or BF16 (the table's lowp_act_dtypes)", member, (int)dt);
}

/* A call's F32 work area: `n` operands of `rows` (a chunk) x cols floats. */
typedef struct lowp_work {
	int64_t rows;  /* rows of a chunk */
	float *buf[3]; /* the operands, rows x cols each */
	size_t bytes;  /* of the whole area */
} lowp_work;

static weft_status lowp_work_get(lowp_work *w, const char *member, int n, int64_t rows,
				 int64_t cols)
{
	int64_t chunk = LOWP_CHUNK / cols / LOWP_ROW_BLOCK * LOWP_ROW_BLOCK;
	float *p;

	memset(w->buf, 0, sizeof(w->buf));
	w->rows = rows < chunk ? rows : (chunk > 0 ? chunk : LOWP_ROW_BLOCK);
	w->bytes = (size_t)(n * w->rows * cols) * sizeof(float);
	p = weft_mem_alloc(WEFT_MEM_OTHER, w->bytes);
	if (!p)
		return weft_error_set(WEFT_ERR_NOMEM, "cpu kernel %s: out of memory for %zu bytes "
				      "of F32 rows (%lld rows of %lld)", member, w->bytes,
				      (long long)w->rows, (long long)cols);
	for (int i = 0; i < 3; i++)
		w->buf[i] = i < n ? p + i * w->rows * cols : NULL;
	return WEFT_OK;
}

/* Frees the area (none when lowp_work_get failed). */
static void lowp_work_put(lowp_work *w)
{
	weft_mem_free(w->buf[0]);
}

/* Element e of a 16-bit array. */
static inline const void *at(const void *p, int64_t e)
{
	return (const uint16_t *)p + e;
}

static inline void *at_mut(void *p, int64_t e)
{
	return (uint16_t *)p + e;
}

weft_status cpu_sum_rows_lowp(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
			      const void *x, float *out)
{
	weft_status st = lowp_dtype("sum_rows_lowp", dt);
	lowp_work w;

	if (st || rows <= 0 || cols <= 0)
		return st;
	st = lowp_work_get(&w, "sum_rows_lowp", 1, rows, cols);
	for (int64_t r0 = 0; !st && r0 < rows; r0 += w.rows) {
		int64_t n = rows - r0 < w.rows ? rows - r0 : w.rows;

		cpu_convert(kctx, n * cols, dt, at(x, r0 * cols), WEFT_F32, w.buf[0]);
		st = cpu_sum_rows(kctx, WEFT_F32, n, cols, w.buf[0], out);
	}
	lowp_work_put(&w);
	return st;
}

weft_status cpu_layernorm_lowp_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				       float eps, const void *x, const void *r, void *sum,
				       const float *w, const float *b, void *y, float *mean,
				       float *rstd)
{
	const char *name = "layernorm_lowp_forward";
	weft_status st = lowp_dtype(name, dt);
	lowp_work wk;

	if (st || rows <= 0 || cols <= 0)
		return st;
	if (r && !sum)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "cpu kernel %s: a residual r needs the "
				      "sum output (x + r) for backward; pass `sum`", name);
	st = lowp_work_get(&wk, name, 2, rows, cols);
	for (int64_t r0 = 0; !st && r0 < rows; r0 += wk.rows) {
		int64_t n = rows - r0 < wk.rows ? rows - r0 : wk.rows, e = r0 * cols;
		float *s = wk.buf[0], *o = wk.buf[1];

		cpu_convert(kctx, n * cols, dt, at(x, e), WEFT_F32, s);
		if (r) { /* s = x + r, stored rounded; the statistics see s as stored */
			cpu_convert(kctx, n * cols, dt, at(r, e), WEFT_F32, o);
			cpu_add(kctx, WEFT_F32, n * cols, s, n * cols, o, s);
			cpu_convert(kctx, n * cols, WEFT_F32, s, dt, at_mut(sum, e));
			cpu_convert(kctx, n * cols, dt, at(sum, e), WEFT_F32, s);
		} else if (sum && sum != x) {
			memcpy(at_mut(sum, e), at(x, e), (size_t)(n * cols) * sizeof(uint16_t));
		}
		st = cpu_layernorm_forward(kctx, WEFT_F32, n, cols, eps, s, w, b, o, mean + r0,
					   rstd + r0);
		if (!st)
			cpu_convert(kctx, n * cols, WEFT_F32, o, dt, at_mut(y, e));
	}
	lowp_work_put(&wk);
	return st;
}

weft_status cpu_layernorm_lowp_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					const void *s, const float *w, const float *mean,
					const float *rstd, const void *dy, void *dx,
					int32_t dx_write, float *dw, float *db)
{
	const char *name = "layernorm_lowp_backward";
	weft_status st = lowp_dtype(name, dt);
	lowp_work wk;

	if (st || rows <= 0 || cols <= 0)
		return st;
	st = lowp_work_get(&wk, name, 3, rows, cols);
	for (int64_t r0 = 0; !st && r0 < rows; r0 += wk.rows) {
		int64_t n = rows - r0 < wk.rows ? rows - r0 : wk.rows, e = r0 * cols;
		float *ws = wk.buf[0], *wdy = wk.buf[1], *wdx = wk.buf[2];

		cpu_convert(kctx, n * cols, dt, at(s, e), WEFT_F32, ws);
		cpu_convert(kctx, n * cols, dt, at(dy, e), WEFT_F32, wdy);
		if (dx && dx_write)
			memset(wdx, 0, (size_t)(n * cols) * sizeof(float));
		else if (dx)
			cpu_convert(kctx, n * cols, dt, at(dx, e), WEFT_F32, wdx);
		st = cpu_layernorm_backward(kctx, WEFT_F32, n, cols, ws, w, mean + r0, rstd + r0,
					    wdy, dx ? wdx : NULL, dw, db);
		if (!st && dx)
			cpu_convert(kctx, n * cols, WEFT_F32, wdx, dt, at_mut(dx, e));
	}
	lowp_work_put(&wk);
	return st;
}

/* The loss of one row of `vocab` logits widened into z (overwritten with
 * exp(z - max)): as cpu_cross_entropy_forward computes a row, the max and
 * the sum of exponentials in lanes; returns log(sum) in *log_sum and the
 * max. */
CPU_HOT
static float ce_row(float *restrict z, int64_t vocab, float *log_sum)
{
	float mx = cpu_max(z, vocab);

	for (int64_t j = 0; j < vocab; j++)
		z[j] = cpu_expf(z[j] - mx);
	*log_sum = logf(cpu_sum(z, vocab));
	return mx;
}

weft_status cpu_cross_entropy_lowp_forward(void *kctx, weft_dtype dt, int64_t rows,
					   int64_t vocab, int64_t ld, const void *logits,
					   weft_dtype idx_dt, const void *targets,
					   int64_t ignore_index, float *lse, float *loss,
					   float *count)
{
	const char *name = "cross_entropy_lowp_forward";
	weft_status st = lowp_dtype(name, dt);
	double total = 0.0;
	int64_t counted = 0;
	float *z;

	if (st)
		return st;
	z = vocab > 0 ? cpu_pack_buffer((size_t)vocab * sizeof(float)) : NULL;
	if (vocab > 0 && !z)
		return weft_error_set(WEFT_ERR_NOMEM, "cpu kernel %s: out of memory for a row of "
				      "%lld floats", name, (long long)vocab);
	for (int64_t r = 0; vocab > 0 && r < rows; r++) {
		int64_t t = cpu_index(idx_dt, targets, r);
		float mx, log_sum, zt = 0.0f;

		cpu_convert(kctx, vocab, dt, at(logits, r * ld), WEFT_F32, z);
		if (t != ignore_index && t >= 0 && t < vocab) /* the caller checked targets */
			zt = z[t];
		mx = ce_row(z, vocab, &log_sum);
		lse[r] = log_sum + mx;
		if (t == ignore_index)
			continue;
		total += (double)log_sum + (double)mx - (double)zt;
		counted++;
	}
	*loss = counted ? (float)(total / (double)counted) : 0.0f;
	*count = (float)counted;
	return WEFT_OK;
}

/* Operands of the split loss backward. */
typedef struct ce_bwd_args {
	weft_dtype dt, idx_dt;
	int64_t vocab, ld, ignore_index;
	const void *logits, *targets;
	const float *lse;
	float scale;
	void *dlogits;
} ce_bwd_args;

/* Rows [r0, r1): each element read once and its gradient written once
 * (dlogits may be logits). */
CPU_HOT
static void ce_bwd_rows(void *p, int64_t r0, int64_t r1)
{
	const ce_bwd_args *a = p;

	for (int64_t r = r0; r < r1; r++) {
		int64_t t = cpu_index(a->idx_dt, a->targets, r), e = r * a->ld;
		float m = a->lse[r];

		if (t == a->ignore_index) {
			memset(at_mut(a->dlogits, e), 0, (size_t)a->vocab * sizeof(uint16_t));
			continue;
		}
		for (int64_t j = 0; j < a->vocab; j++) {
			float pj = cpu_expf(weft_half_load(a->dt, a->logits, e + j) - m);

			weft_half_store(a->dt, a->dlogits, e + j,
					(pj - (j == t ? 1.0f : 0.0f)) * a->scale);
		}
	}
}

weft_status cpu_cross_entropy_lowp_backward(void *kctx, weft_dtype dt, int64_t rows,
					    int64_t vocab, int64_t ld, const void *logits,
					    weft_dtype idx_dt, const void *targets,
					    int64_t ignore_index, const float *lse,
					    const float *dloss, const float *count, void *dlogits)
{
	weft_status st = lowp_dtype("cross_entropy_lowp_backward", dt);
	ce_bwd_args a = { .dt = dt, .idx_dt = idx_dt, .vocab = vocab, .ld = ld,
			  .ignore_index = ignore_index, .logits = logits, .targets = targets,
			  .lse = lse, .dlogits = dlogits };

	(void)kctx;
	if (st || rows <= 0 || vocab <= 0)
		return st;
	/* no row counts when count is 0: every row is an ignore_index row */
	a.scale = *count != 0.0f ? *dloss / *count : 0.0f;
	cpu_parallel_for(rows, CPU_GRAIN / (vocab + 1) + 1, ce_bwd_rows, &a);
	return WEFT_OK;
}

/* The fused classifier's upstream gradient hint: finite and not 0 (a 0
 * would leave nothing for cross_entropy_lowp_regrad to rescale). */
static weft_status hint_check(const char *member, weft_dtype dt, float dloss_hint)
{
	weft_status st = lowp_dtype(member, dt);

	if (!st && (!isfinite(dloss_hint) || dloss_hint == 0.0f))
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "cpu kernel %s: dloss_hint %g; pass the "
				    "finite, nonzero upstream gradient the loss expects (1, or "
				    "the loss scale)", member, (double)dloss_hint);
	return st;
}

/* The reference: the forward's statistics (its bits), then the backward's
 * rows with the scale dloss_hint / count, so the gradient has the bits
 * _backward writes from a dloss equal to the hint. Two passes over the
 * logits on the CPU (the forward's rows in order, for the loss's sum; the
 * gradient's in parallel); the count is the forward's. */
weft_status cpu_cross_entropy_lowp_fused(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
					 int64_t ld, void *logits, weft_dtype idx_dt,
					 const void *targets, int64_t ignore_index,
					 float dloss_hint, float *lse, float *loss, float *count)
{
	weft_status st = hint_check("cross_entropy_lowp_fused", dt, dloss_hint);
	ce_bwd_args a = { .dt = dt, .idx_dt = idx_dt, .vocab = vocab, .ld = ld,
			  .ignore_index = ignore_index, .logits = logits, .targets = targets,
			  .lse = lse, .dlogits = logits };

	if (!st)
		st = cpu_cross_entropy_lowp_forward(kctx, dt, rows, vocab, ld, logits, idx_dt,
						    targets, ignore_index, lse, loss, count);
	if (st || rows <= 0 || vocab <= 0)
		return st;
	a.scale = *count != 0.0f ? dloss_hint / *count : 0.0f;
	cpu_parallel_for(rows, CPU_GRAIN / (vocab + 1) + 1, ce_bwd_rows, &a);
	return WEFT_OK;
}

/* Rows [r0, r1) of the correction: each counted element times a->scale,
 * rounded again. */
CPU_HOT
static void ce_regrad_rows(void *p, int64_t r0, int64_t r1)
{
	const ce_bwd_args *a = p;

	for (int64_t r = r0; r < r1; r++) {
		int64_t e = r * a->ld;

		if (cpu_index(a->idx_dt, a->targets, r) == a->ignore_index)
			continue;
		for (int64_t j = 0; j < a->vocab; j++)
			weft_half_store(a->dt, a->dlogits, e + j,
					weft_half_load(a->dt, a->dlogits, e + j) * a->scale);
	}
}

weft_status cpu_cross_entropy_lowp_regrad(void *kctx, weft_dtype dt, int64_t rows,
					  int64_t vocab, int64_t ld, void *dlogits,
					  weft_dtype idx_dt, const void *targets,
					  int64_t ignore_index, float dloss_hint,
					  const float *dloss)
{
	weft_status st = hint_check("cross_entropy_lowp_regrad", dt, dloss_hint);
	ce_bwd_args a = { .dt = dt, .idx_dt = idx_dt, .vocab = vocab, .ld = ld,
			  .ignore_index = ignore_index, .targets = targets, .dlogits = dlogits };

	(void)kctx;
	if (st || rows <= 0 || vocab <= 0 || *dloss == dloss_hint)
		return st;
	a.scale = *dloss / dloss_hint;
	cpu_parallel_for(rows, CPU_GRAIN / (vocab + 1) + 1, ce_regrad_rows, &a);
	return WEFT_OK;
}
