/* The layers of Llama-family models: RMSNorm, rotary position embeddings
 * (rotate-half layout) and SwiGLU, forward and backward (weft/device.h,
 * since ABI 1.4). Rows are split over the kernel threads; the hot loops
 * are multiversioned (CPU_HOT) so they run AVX2 + FMA wide where the CPU
 * has it. Sums over a row run in the fixed lanes of cpu_sum, and the
 * weight gradient of RMSNorm is summed in fixed blocks of rows, so every
 * result is the same at any thread count. */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

/* ---- RMSNorm ---- */

typedef struct rms_args {
	int64_t rows, cols;
	float eps;
	const float *x, *w, *dy, *rstd;
	float *out, *rstd_out, *dx, *dw;
	float *part; /* backward: each block's dw sums */
} rms_args;

/* Sum of x[j]^2, in cpu_sum's lanes. */
static inline float sum_squares(const float *restrict x, int64_t n)
{
	return cpu_dot(x, x, n);
}

CPU_HOT
static void rms_fwd_rows(void *p, int64_t r0, int64_t r1)
{
	const rms_args *a = p;
	const float *restrict W = a->w;
	int64_t cols = a->cols;

	for (int64_t r = r0; r < r1; r++) {
		const float *restrict xr = a->x + r * cols;
		float *restrict o = a->out + r * cols;
		float s = 1.0f / sqrtf(sum_squares(xr, cols) / (float)cols + a->eps);

		/* (x rstd) w, in that order, as LlamaRMSNorm rounds it */
		if (W)
			for (int64_t j = 0; j < cols; j++)
				o[j] = (xr[j] * s) * W[j];
		else
			for (int64_t j = 0; j < cols; j++)
				o[j] = xr[j] * s;
		a->rstd_out[r] = s;
	}
}

weft_status cpu_rmsnorm_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols, float eps,
				const void *x, const void *w, void *out, float *rstd)
{
	rms_args a = { .rows = rows, .cols = cols, .eps = eps, .x = x, .w = w, .out = out,
		       .rstd_out = rstd };

	(void)kctx;
	(void)dt;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	cpu_parallel_for(rows, CPU_GRAIN / (cols + 1) + 1, rms_fwd_rows, &a);
	return WEFT_OK;
}

/* Rows of a block whose dw partial sums the backward keeps apart (a fixed
 * size, so the sums do not depend on how the threads split rows). */
#define RMS_BLOCK 32

/* With n = x rstd and g = dy w: dx += rstd (g - n mean(g n)), over blocks
 * [b0, b1) of RMS_BLOCK rows; with dw wanted, block b's sum of dy n (rows
 * in order) goes to a->part + b cols. */
CPU_HOT
static void rms_bwd_blocks(void *p, int64_t b0, int64_t b1)
{
	const rms_args *a = p;
	const float *restrict W = a->w;
	int64_t cols = a->cols;

	for (int64_t b = b0; b < b1; b++) {
		int64_t r1 = (b + 1) * RMS_BLOCK < a->rows ? (b + 1) * RMS_BLOCK : a->rows;
		float *restrict pw = a->part ? a->part + b * cols : NULL;

		if (pw)
			memset(pw, 0, (size_t)cols * sizeof(float));
		for (int64_t r = b * RMS_BLOCK; r < r1; r++) {
			const float *restrict xr = a->x + r * cols;
			const float *restrict g = a->dy + r * cols;
			float *restrict dxr = a->dx ? a->dx + r * cols : NULL;
			float s = a->rstd[r], acc[CPU_LANES] = { 0 }, m;
			int64_t j = 0;

			if (pw)
				for (j = 0; j < cols; j++)
					pw[j] += g[j] * (xr[j] * s);
			if (!dxr)
				continue;
			for (j = 0; j + CPU_LANES <= cols; j += CPU_LANES)
				for (int l = 0; l < CPU_LANES; l++)
					acc[l] += g[j + l] * (W ? W[j + l] : 1.0f) * (xr[j + l] * s);
			for (int l = 0; j + l < cols; l++)
				acc[l] += g[j + l] * (W ? W[j + l] : 1.0f) * (xr[j + l] * s);
			m = cpu_sum(acc, CPU_LANES) / (float)cols;
			for (j = 0; j < cols; j++)
				dxr[j] += (g[j] * (W ? W[j] : 1.0f) - (xr[j] * s) * m) * s;
		}
	}
}

/* dw += the blocks' sums, in block order, for columns [c0, c1). */
CPU_HOT
static void rms_bwd_cols(void *p, int64_t c0, int64_t c1)
{
	const rms_args *a = p;
	int64_t nb = (a->rows + RMS_BLOCK - 1) / RMS_BLOCK, cols = a->cols;

	for (int64_t b = 0; b < nb; b++) {
		const float *restrict pw = a->part + b * cols;

		for (int64_t j = c0; j < c1; j++)
			a->dw[j] += pw[j];
	}
}

weft_status cpu_rmsnorm_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				 const void *x, const void *w, const float *rstd, const void *dy,
				 void *dx, void *dw)
{
	int64_t nb = (rows + RMS_BLOCK - 1) / RMS_BLOCK;
	rms_args a = { .rows = rows, .cols = cols, .x = x, .w = w, .dy = dy, .rstd = rstd,
		       .dx = dx, .dw = dw };

	(void)kctx;
	(void)dt;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	if (dw) {
		a.part = cpu_pack_buffer((size_t)(nb * cols) * sizeof(float));
		if (!a.part)
			return weft_error_set(WEFT_ERR_NOMEM, "rmsnorm backward: out of memory for "
					      "%lld x %lld partial sums", (long long)nb,
					      (long long)cols);
	}
	if (dx || a.part)
		cpu_parallel_for(nb, CPU_GRAIN / (RMS_BLOCK * cols + 1) + 1, rms_bwd_blocks, &a);
	if (a.part)
		cpu_parallel_for(cols, CPU_GRAIN / (nb + 1) + 1, rms_bwd_cols, &a);
	return WEFT_OK;
}

/* ---- rotary position embeddings ---- */

typedef struct rope_args {
	const float *inv_freq; /* head_dim / 2 */
	float *cs;             /* per position t: half cosines, then half sines */
	int64_t T, width, n_rot, hs, pos_offset;
	int backward;
	const float *x;
	float *out;
} rope_args;

/* The cosines and sines of positions [t0, t1): for pair i the angle
 * (float)(pos_offset + t) * inv_freq[i] (a float product), its cosine and
 * sine taken in double and rounded once. Backward stores the sine negated
 * (the transposed rotation). */
static void rope_table(void *p, int64_t t0, int64_t t1)
{
	const rope_args *a = p;
	int64_t half = a->hs / 2;

	for (int64_t t = t0; t < t1; t++) {
		float pos = (float)(a->pos_offset + t), *c = a->cs + t * 2 * half, *s = c + half;

		for (int64_t i = 0; i < half; i++) {
			double ang = (double)(pos * a->inv_freq[i]);

			c[i] = (float)cos(ang);
			s[i] = a->backward ? -(float)sin(ang) : (float)sin(ang);
		}
	}
}

/* Rows [r0, r1) of (B T): every rotated head with its row's position's
 * table; the rest of the row copied (forward) or added (backward). */
CPU_HOT
static void rope_rows(void *p, int64_t r0, int64_t r1)
{
	const rope_args *a = p;
	int64_t half = a->hs / 2, W = a->width, rot = a->n_rot * a->hs;

	for (int64_t r = r0; r < r1; r++) {
		const float *restrict xr = a->x + r * W;
		float *restrict o = a->out + r * W;
		const float *restrict c = a->cs + (r % a->T) * 2 * half, *restrict s = c + half;

		for (int64_t h = 0; h < a->n_rot; h++) {
			const float *restrict x1 = xr + h * a->hs, *restrict x2 = x1 + half;
			float *restrict o1 = o + h * a->hs, *restrict o2 = o1 + half;

			if (a->backward)
				for (int64_t i = 0; i < half; i++) {
					o1[i] += x1[i] * c[i] - x2[i] * s[i];
					o2[i] += x2[i] * c[i] + x1[i] * s[i];
				}
			else
				for (int64_t i = 0; i < half; i++) {
					o1[i] = x1[i] * c[i] - x2[i] * s[i];
					o2[i] = x2[i] * c[i] + x1[i] * s[i];
				}
		}
		if (a->backward)
			for (int64_t j = rot; j < W; j++)
				o[j] += xr[j];
		else if (W > rot)
			memcpy(o + rot, xr + rot, (size_t)(W - rot) * sizeof(float));
	}
}

/* The frequencies, then one table of cosines and sines per position (the
 * batch rows share it), in the calling thread's packing buffer; then the
 * rows. */
static weft_status rope_run(const weft_rope *rope, int backward, int64_t B, int64_t T,
			    int64_t width, int64_t n_rot, int64_t head_dim, int64_t pos_offset,
			    const void *x, void *out)
{
	rope_args a = { .T = T, .width = width, .n_rot = n_rot, .hs = head_dim,
			.pos_offset = pos_offset, .backward = backward, .x = x, .out = out };
	int64_t half = head_dim / 2;
	float *f;

	if (B <= 0 || T <= 0 || width <= 0)
		return WEFT_OK;
	f = cpu_pack_buffer((size_t)(half + 2 * T * half + 1) * sizeof(float));
	if (!f)
		return weft_error_set(WEFT_ERR_NOMEM, "rope: out of memory for the cosines and "
				      "sines of %lld positions x %lld frequencies", (long long)T,
				      (long long)half);
	for (int64_t i = 0; i < half; i++)
		f[i] = weft_rope_inv_freq(rope, head_dim, i);
	a.inv_freq = f;
	a.cs = f + half;
	cpu_parallel_for(T, CPU_GRAIN / (16 * half + 1) + 1, rope_table, &a);
	cpu_parallel_for(B * T, CPU_GRAIN / (width + 1) + 1, rope_rows, &a);
	return WEFT_OK;
}

weft_status cpu_rope_forward(void *kctx, weft_dtype dt, const weft_rope *rope, int64_t B,
			     int64_t T, int64_t width, int64_t n_rot, int64_t head_dim,
			     int64_t pos_offset, const void *x, void *out)
{
	(void)kctx;
	(void)dt;
	return rope_run(rope, 0, B, T, width, n_rot, head_dim, pos_offset, x, out);
}

weft_status cpu_rope_backward(void *kctx, weft_dtype dt, const weft_rope *rope, int64_t B,
			      int64_t T, int64_t width, int64_t n_rot, int64_t head_dim,
			      int64_t pos_offset, const void *dy, void *dx)
{
	(void)kctx;
	(void)dt;
	return dx ? rope_run(rope, 1, B, T, width, n_rot, head_dim, pos_offset, dy, dx) : WEFT_OK;
}

/* ---- SwiGLU ---- */

typedef struct swiglu_args {
	int64_t cols, ld;
	const float *gate, *up, *dy;
	float *out, *dgate, *dup;
} swiglu_args;

CPU_HOT
static void swiglu_fwd_rows(void *p, int64_t r0, int64_t r1)
{
	const swiglu_args *a = p;

	for (int64_t r = r0; r < r1; r++) {
		const float *restrict g = a->gate + r * a->ld, *restrict u = a->up + r * a->ld;
		float *restrict o = a->out + r * a->cols;

		for (int64_t j = 0; j < a->cols; j++)
			o[j] = g[j] / (1.0f + cpu_expf(-g[j])) * u[j];
	}
}

/* With sig = 1 / (1 + exp(-g)): silu(g) = g sig and
 * silu'(g) = sig (1 + g (1 - sig)). */
CPU_HOT
static void swiglu_bwd_rows(void *p, int64_t r0, int64_t r1)
{
	const swiglu_args *a = p;

	for (int64_t r = r0; r < r1; r++) {
		const float *restrict g = a->gate + r * a->ld, *restrict u = a->up + r * a->ld;
		const float *restrict d = a->dy + r * a->cols;
		float *dg = a->dgate ? a->dgate + r * a->ld : NULL;
		float *du = a->dup ? a->dup + r * a->ld : NULL;

		if (dg && du) /* one exp for both (they may be one buffer: no restrict) */
			for (int64_t j = 0; j < a->cols; j++) {
				float sig = 1.0f / (1.0f + cpu_expf(-g[j]));
				float gd = d[j] * u[j] * (sig * (1.0f + g[j] * (1.0f - sig)));
				float ud = d[j] * (g[j] * sig);

				dg[j] += gd;
				du[j] += ud;
			}
		else if (dg)
			for (int64_t j = 0; j < a->cols; j++) {
				float sig = 1.0f / (1.0f + cpu_expf(-g[j]));

				dg[j] += d[j] * u[j] * (sig * (1.0f + g[j] * (1.0f - sig)));
			}
		else
			for (int64_t j = 0; j < a->cols; j++)
				du[j] += d[j] * (g[j] / (1.0f + cpu_expf(-g[j])));
	}
}

weft_status cpu_swiglu_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
			       const void *gate, const void *up, int64_t ld, void *out)
{
	swiglu_args a = { .cols = cols, .ld = ld, .gate = gate, .up = up, .out = out };

	(void)kctx;
	(void)dt;
	if (rows > 0 && cols > 0)
		cpu_parallel_for(rows, CPU_GRAIN / (cols + 1) + 1, swiglu_fwd_rows, &a);
	return WEFT_OK;
}

weft_status cpu_swiglu_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				const void *gate, const void *up, int64_t ld, const void *dy,
				void *dgate, void *dup)
{
	swiglu_args a = { .cols = cols, .ld = ld, .gate = gate, .up = up, .dy = dy,
			  .dgate = dgate, .dup = dup };

	(void)kctx;
	(void)dt;
	if (rows > 0 && cols > 0 && (dgate || dup))
		cpu_parallel_for(rows, CPU_GRAIN / (cols + 1) + 1, swiglu_bwd_rows, &a);
	return WEFT_OK;
}
