/* Row kernels: softmax, layernorm, embedding, cross-entropy, accuracy. */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

CPU_HOT
weft_status cpu_softmax_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				const void *x, void *y)
{
	(void)kctx;
	(void)dt;
	for (int64_t r = 0; cols && r < rows; r++) {
		const float *restrict xr = (const float *)x + r * cols;
		float *restrict yr = (float *)y + r * cols;
		float mx = cpu_max(xr, cols), inv;

		for (int64_t j = 0; j < cols; j++)
			yr[j] = cpu_expf(xr[j] - mx);
		inv = 1.0f / cpu_sum(yr, cols);
		for (int64_t j = 0; j < cols; j++)
			yr[j] *= inv;
	}
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_softmax_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				 const void *y, const void *dy, void *dx)
{
	(void)kctx;
	(void)dt;
	if (!dx)
		return WEFT_OK;
	for (int64_t r = 0; r < rows; r++) {
		const float *restrict yr = (const float *)y + r * cols;
		const float *restrict dyr = (const float *)dy + r * cols;
		float *restrict dxr = (float *)dx + r * cols;
		float dot = cpu_dot(yr, dyr, cols);

		for (int64_t j = 0; j < cols; j++)
			dxr[j] += yr[j] * (dyr[j] - dot);
	}
	return WEFT_OK;
}

/* Operands of the split row kernels. */
typedef struct ln_args {
	int64_t rows, cols;
	float eps;
	const float *x, *w, *b, *dy, *mean, *rstd;
	float *out, *mean_out, *rstd_out, *dx, *dw, *db;
	float *part; /* backward: each block's dw and db sums */
} ln_args;

/* Mean and 1 / sqrt(variance + eps) of each row (two passes: the mean,
 * then the squared deviations from it), then out = norm * w + b. */
CPU_HOT
static void ln_fwd_rows(void *p, int64_t r0, int64_t r1)
{
	const ln_args *a = p;
	const float *restrict W = a->w, *restrict Bv = a->b;
	int64_t cols = a->cols;

	for (int64_t r = r0; r < r1; r++) {
		const float *restrict xr = a->x + r * cols;
		float *restrict o = a->out + r * cols;
		float acc[CPU_LANES] = { 0 };
		float m = cpu_sum(xr, cols) / (float)cols, v, s;
		int64_t j = 0;

		for (; j + CPU_LANES <= cols; j += CPU_LANES)
			for (int l = 0; l < CPU_LANES; l++)
				acc[l] += (xr[j + l] - m) * (xr[j + l] - m);
		for (int l = 0; j + l < cols; l++)
			acc[l] += (xr[j + l] - m) * (xr[j + l] - m);
		v = cpu_sum(acc, CPU_LANES) / (float)cols;
		s = 1.0f / sqrtf(v + a->eps);
		if (W && Bv)
			for (j = 0; j < cols; j++)
				o[j] = (xr[j] - m) * s * W[j] + Bv[j];
		else
			for (j = 0; j < cols; j++)
				o[j] = (xr[j] - m) * s * (W ? W[j] : 1.0f) + (Bv ? Bv[j] : 0.0f);
		a->mean_out[r] = m;
		a->rstd_out[r] = s;
	}
}

weft_status cpu_layernorm_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				  float eps, const void *x, const void *w, const void *b,
				  void *out, float *mean, float *rstd)
{
	ln_args a = { .rows = rows, .cols = cols, .eps = eps, .x = x, .w = w, .b = b,
		      .out = out, .mean_out = mean, .rstd_out = rstd };

	(void)kctx;
	(void)dt;
	cpu_parallel_for(rows, CPU_GRAIN / (cols + 1) + 1, ln_fwd_rows, &a);
	return WEFT_OK;
}

/* Rows of a block whose dw / db partial sums the backward keeps apart (a
 * fixed size, so the sums do not depend on how the threads split rows). */
#define LN_BLOCK 32

/* With n = (x - mean) * rstd and g = dy * w:
 * dx += (g - mean(g) - n * mean(g * n)) * rstd, row by row, over blocks
 * [b0, b1) of LN_BLOCK rows; with dw / db wanted, block b's sums of dy * n
 * and of dy (in row order) go to a->part + 2 b cols (dw's, then db's),
 * from the same pass over the row. */
CPU_HOT
static void ln_bwd_blocks(void *p, int64_t b0, int64_t b1)
{
	const ln_args *a = p;
	const float *restrict W = a->w;
	int64_t cols = a->cols;

	for (int64_t b = b0; b < b1; b++) {
		int64_t r1 = (b + 1) * LN_BLOCK < a->rows ? (b + 1) * LN_BLOCK : a->rows;
		float *restrict pw = a->part ? a->part + 2 * b * cols : NULL;
		float *restrict pb = pw ? pw + cols : NULL;

		if (pw)
			memset(pw, 0, (size_t)(2 * cols) * sizeof(float));
		for (int64_t r = b * LN_BLOCK; r < r1; r++) {
			const float *restrict xr = a->x + r * cols;
			const float *restrict g = a->dy + r * cols;
			float *restrict dxr = a->dx ? a->dx + r * cols : NULL;
			float m = a->mean[r], s = a->rstd[r];
			float acc_d[CPU_LANES] = { 0 }, acc_n[CPU_LANES] = { 0 };
			float dmean, dnorm_mean;
			int64_t j = 0;

			if (pw)
				for (j = 0; j < cols; j++) {
					pw[j] += g[j] * ((xr[j] - m) * s);
					pb[j] += g[j];
				}
			if (!dxr)
				continue;
			for (j = 0; j + CPU_LANES <= cols; j += CPU_LANES)
				for (int l = 0; l < CPU_LANES; l++) {
					float nrm = (xr[j + l] - m) * s;
					float dn = g[j + l] * (W ? W[j + l] : 1.0f);

					acc_d[l] += dn;
					acc_n[l] += dn * nrm;
				}
			for (int l = 0; j + l < cols; l++) {
				float nrm = (xr[j + l] - m) * s;
				float dn = g[j + l] * (W ? W[j + l] : 1.0f);

				acc_d[l] += dn;
				acc_n[l] += dn * nrm;
			}
			dmean = cpu_sum(acc_d, CPU_LANES) / (float)cols;
			dnorm_mean = cpu_sum(acc_n, CPU_LANES) / (float)cols;
			for (j = 0; j < cols; j++) {
				float nrm = (xr[j] - m) * s;
				float dn = g[j] * (W ? W[j] : 1.0f);

				dxr[j] += (dn - dmean - nrm * dnorm_mean) * s;
			}
		}
	}
}

/* dw += the blocks' sums of dy * n, db += of dy, in block order, for
 * columns [c0, c1) (each part owns its columns). */
CPU_HOT
static void ln_bwd_cols(void *p, int64_t c0, int64_t c1)
{
	const ln_args *a = p;
	int64_t nb = (a->rows + LN_BLOCK - 1) / LN_BLOCK, cols = a->cols;

	for (int64_t b = 0; b < nb; b++) {
		const float *restrict pw = a->part + 2 * b * cols, *restrict pb = pw + cols;

		if (a->dw)
			for (int64_t j = c0; j < c1; j++)
				a->dw[j] += pw[j];
		if (a->db)
			for (int64_t j = c0; j < c1; j++)
				a->db[j] += pb[j];
	}
}

weft_status cpu_layernorm_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				   const void *x, const void *w, const float *mean,
				   const float *rstd, const void *dy, void *dx, void *dw,
				   void *db)
{
	int64_t nb = (rows + LN_BLOCK - 1) / LN_BLOCK;
	ln_args a = { .rows = rows, .cols = cols, .x = x, .w = w, .dy = dy, .mean = mean,
		      .rstd = rstd, .dx = dx, .dw = dw, .db = db };

	(void)kctx;
	(void)dt;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	if (dw || db) {
		a.part = cpu_pack_buffer((size_t)(2 * nb * cols) * sizeof(float));
		if (!a.part)
			return weft_error_set(WEFT_ERR_NOMEM, "layernorm backward: out of memory "
					      "for %lld x %lld partial sums", (long long)nb,
					      (long long)(2 * cols));
	}
	if (dx || a.part)
		cpu_parallel_for(nb, CPU_GRAIN / (LN_BLOCK * cols + 1) + 1, ln_bwd_blocks, &a);
	if (a.part)
		cpu_parallel_for(cols, CPU_GRAIN / (nb + 1) + 1, ln_bwd_cols, &a);
	return WEFT_OK;
}

weft_status cpu_embedding_forward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
				  weft_dtype idx_dt, const void *idx, int64_t vocab,
				  const void *table, void *out)
{
	(void)kctx;
	(void)dt;
	for (int64_t i = 0; i < n; i++) {
		int64_t id = cpu_index(idx_dt, idx, i);

		if (id < 0 || id >= vocab)
			return weft_error_set(WEFT_ERR_INVALID_ARG, "id %lld at position %lld is outside "
					      "the table's vocab [0, %lld): check the tokenizer or "
					      "the vocab_size", (long long)id, (long long)i,
					      (long long)vocab);
	}
	for (int64_t i = 0; i < n; i++)
		memcpy((float *)out + i * dim, (const float *)table + cpu_index(idx_dt, idx, i) * dim,
		       (size_t)dim * sizeof(float));
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_embedding_backward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
				   weft_dtype idx_dt, const void *idx, const void *dy,
				   void *dtable)
{
	(void)kctx;
	(void)dt;
	for (int64_t i = 0; i < n; i++) {
		const float *restrict g = (const float *)dy + i * dim;
		float *restrict t = (float *)dtable + cpu_index(idx_dt, idx, i) * dim;

		for (int64_t j = 0; j < dim; j++)
			t[j] += g[j];
	}
	return WEFT_OK;
}

static weft_status check_targets(int64_t rows, int64_t vocab, weft_dtype idx_dt,
				 const void *targets, int64_t ignore_index)
{
	for (int64_t r = 0; r < rows; r++) {
		int64_t t = cpu_index(idx_dt, targets, r);

		if (t != ignore_index && (t < 0 || t >= vocab))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "target %lld at row %lld is outside "
					      "[0, %lld) and is not the ignore index %lld",
					      (long long)t, (long long)r, (long long)vocab,
					      (long long)ignore_index);
	}
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_cross_entropy_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				      const void *logits, weft_dtype idx_dt, const void *targets,
				      int64_t ignore_index, void *probs, float *loss,
				      float *count)
{
	double total = 0.0;
	int64_t counted = 0;
	weft_status st = check_targets(rows, vocab, idx_dt, targets, ignore_index);

	if (st)
		return st;
	for (int64_t r = 0; r < rows; r++) {
		const float *restrict xr = (const float *)logits + r * vocab;
		float *restrict pr = (float *)probs + r * vocab;
		int64_t t = cpu_index(idx_dt, targets, r);
		float mx = cpu_max(xr, vocab), sum, inv;

		for (int64_t j = 0; j < vocab; j++)
			pr[j] = cpu_expf(xr[j] - mx);
		sum = cpu_sum(pr, vocab);
		inv = 1.0f / sum;
		for (int64_t j = 0; j < vocab; j++)
			pr[j] *= inv;
		if (t == ignore_index)
			continue;
		total += (double)logf(sum) + (double)mx - (double)xr[t];
		counted++;
	}
	(void)kctx;
	(void)dt;
	*loss = counted ? (float)(total / (double)counted) : 0.0f;
	*count = (float)counted;
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_cross_entropy_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				       const void *probs, weft_dtype idx_dt, const void *targets,
				       int64_t ignore_index, const float *dloss,
				       const float *count, void *dlogits)
{
	float scale;

	(void)kctx;
	(void)dt;
	if (!dlogits || *count == 0.0f)
		return WEFT_OK;
	scale = *dloss / *count;
	for (int64_t r = 0; r < rows; r++) {
		const float *restrict pr = (const float *)probs + r * vocab;
		float *restrict g = (float *)dlogits + r * vocab;
		int64_t t = cpu_index(idx_dt, targets, r);

		if (t == ignore_index)
			continue;
		for (int64_t j = 0; j < vocab; j++)
			g[j] += pr[j] * scale;
		g[t] -= scale;
	}
	return WEFT_OK;
}

weft_status cpu_accuracy(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
			 const void *logits, weft_dtype idx_dt, const void *targets,
			 int64_t ignore_index, int64_t *correct, int64_t *counted)
{
	weft_status st = check_targets(rows, vocab, idx_dt, targets, ignore_index);

	(void)kctx;
	(void)dt;
	*correct = *counted = 0;
	if (st)
		return st;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = (const float *)logits + r * vocab;
		int64_t t = cpu_index(idx_dt, targets, r), best = 0;

		if (t == ignore_index)
			continue;
		for (int64_t j = 1; j < vocab; j++)
			if (xr[j] > xr[best])
				best = j;
		(*counted)++;
		*correct += best == t;
	}
	return WEFT_OK;
}

/* ---- the vocabulary-parallel loss (weft/device.h, since ABI 1.4) ----
 * Row by row in column order, in double: the loops core/tp ran on the
 * host before the table had these members, so CPU runs keep their bits. */

weft_status cpu_vocab_ce_stats(void *kctx, int64_t rows, int64_t vocab, const float *logits,
			       weft_dtype idx_dt, const void *targets, int64_t begin,
			       const double *max, double *stats)
{
	(void)kctx;
	for (int64_t r = 0; r < rows; r++) {
		const float *z = logits + r * vocab;
		int64_t t = cpu_index(idx_dt, targets, r) - begin;
		float m = -INFINITY;
		double s = 0.0;

		if (!max) {
			for (int64_t j = 0; j < vocab; j++)
				m = z[j] > m ? z[j] : m;
			stats[r] = m;
			continue;
		}
		for (int64_t j = 0; j < vocab; j++)
			s += exp((double)z[j] - max[r]);
		stats[r] = s;
		stats[rows + r] = t >= 0 && t < vocab ? (double)z[t] : 0.0;
	}
	return WEFT_OK;
}

weft_status cpu_vocab_ce_backward(void *kctx, int64_t rows, int64_t vocab, const float *logits,
				  weft_dtype idx_dt, const void *targets, int64_t ignore_index,
				  int64_t begin, const double *max, const double *sum, double scale,
				  float *dlogits)
{
	(void)kctx;
	for (int64_t r = 0; r < rows; r++) {
		const float *z = logits + r * vocab;
		float *d = dlogits + r * vocab;
		int64_t tg = cpu_index(idx_dt, targets, r), t = tg - begin;

		if (tg == ignore_index)
			continue;
		for (int64_t j = 0; j < vocab; j++)
			d[j] += (float)(exp((double)z[j] - max[r]) / sum[r] * scale);
		if (t >= 0 && t < vocab)
			d[t] -= (float)scale;
	}
	return WEFT_OK;
}
