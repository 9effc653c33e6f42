/* Elementwise kernels: copy, zero and row broadcasts of host memory, add,
 * mul, scale, axpy, fill, convert, relu, gelu, dropout. Loops are written to vectorize (restrict, unit stride); the
 * large ones split over the CPU threads (cpu_parallel_for). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_impl.h"
#include "weft/half.h"

/* Copies and fills of host memory split over the CPU threads from
 * CPY_GRAIN bytes a thread (a gradient zeroed at the start of a step, a
 * gradient passed on in backward, a bias broadcast over a batch's rows):
 * one core alone does not reach the memory bandwidth of two. */
#define CPY_GRAIN ((int64_t)CPU_GRAIN * 8)

typedef struct bytes_args {
	char *dst;
	const char *src;
	size_t row, stride; /* rows_range: bytes a row, and between rows of dst */
} bytes_args;

static void copy_range(void *p, int64_t b0, int64_t b1)
{
	const bytes_args *a = p;

	memcpy(a->dst + b0, a->src + b0, (size_t)(b1 - b0));
}

static void zero_range(void *p, int64_t b0, int64_t b1)
{
	const bytes_args *a = p;

	memset(a->dst + b0, 0, (size_t)(b1 - b0));
}

static void rows_range(void *p, int64_t r0, int64_t r1)
{
	const bytes_args *a = p;

	for (int64_t r = r0; r < r1; r++)
		memcpy(a->dst + (size_t)r * a->stride, a->src, a->row);
}

weft_status cpu_copy(void *kctx, void *dst, const void *src, size_t bytes,
			    weft_copy_kind kind)
{
	bytes_args a = { .dst = dst, .src = src };
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

	(void)kctx;
	(void)kind;
	if (!bytes)
		return WEFT_OK;
	if (bytes > INT64_MAX || (int64_t)bytes < 2 * CPY_GRAIN || (d < s + bytes && s < d + bytes))
		memmove(dst, src, bytes); /* small, or overlapping: one pass in order */
	else
		cpu_parallel_for((int64_t)bytes, CPY_GRAIN, copy_range, &a);
	return WEFT_OK;
}

weft_status cpu_zero(void *kctx, void *dst, size_t bytes)
{
	bytes_args a = { .dst = dst };

	(void)kctx;
	if (bytes && bytes <= INT64_MAX) /* no object is larger */
		cpu_parallel_for((int64_t)bytes, CPY_GRAIN, zero_range, &a);
	return WEFT_OK;
}

void cpu_broadcast_rows_ld(int64_t rows, size_t row_bytes, const void *src, void *dst,
			   size_t stride)
{
	bytes_args a = { .dst = dst, .src = src, .row = row_bytes, .stride = stride };

	if (rows > 0 && row_bytes)
		cpu_parallel_for(rows, CPY_GRAIN / (int64_t)(row_bytes + 1) + 1, rows_range, &a);
}

weft_status cpu_broadcast_rows(void *kctx, int64_t rows, size_t row_bytes, const void *src,
			       void *dst)
{
	(void)kctx;
	cpu_broadcast_rows_ld(rows, row_bytes, src, dst, row_bytes);
	return WEFT_OK;
}

/* Operands of a split elementwise kernel. */
typedef struct ew_args {
	const float *x, *y;
	float *out;
	int64_t nb;
	float alpha;
} ew_args;

CPU_HOT
static void add_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *A = e->x, *restrict B = e->y;
	float *O = e->out; /* may alias A */

	if (e->nb == 0) { /* same shapes: i counts elements */
		for (int64_t i = i0; i < i1; i++)
			O[i] = A[i] + B[i];
		return;
	}
	for (int64_t r = i0; r < i1; r++) { /* b broadcast: i counts rows */
		const float *ar = A + r * e->nb;
		float *orow = O + r * e->nb;

		for (int64_t j = 0; j < e->nb; j++)
			orow[j] = ar[j] + B[j];
	}
}

weft_status cpu_add(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
		    const void *b, void *out)
{
	ew_args e = { .x = a, .y = b, .out = out, .nb = nb == n ? 0 : nb };

	(void)kctx;
	(void)dt;
	if (nb == n)
		cpu_parallel_for(n, CPU_GRAIN, add_range, &e);
	else if (nb > 0)
		cpu_parallel_for(n / nb, CPU_GRAIN / nb + 1, add_range, &e);
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_mul(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
		    const void *b, void *out)
{
	const float *A = a, *restrict B = b;
	float *O = out;

	(void)kctx;
	(void)dt;
	for (int64_t r = 0; nb && r < n / nb; r++) {
		const float *ar = A + r * nb;
		float *orow = O + r * nb;

		for (int64_t j = 0; j < nb; j++)
			orow[j] = ar[j] * B[j];
	}
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_mul_backward(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
			     const void *b, const void *dy, void *da, void *db)
{
	const float *restrict A = a, *restrict B = b, *restrict DY = dy;
	float *restrict DA = da, *restrict DB = db;

	(void)kctx;
	(void)dt;
	for (int64_t r = 0; nb && r < n / nb; r++) {
		const float *restrict dyr = DY + r * nb;

		if (DA) {
			float *restrict dar = DA + r * nb;

			for (int64_t j = 0; j < nb; j++)
				dar[j] += dyr[j] * B[j];
		}
		if (DB) {
			const float *restrict ar = A + r * nb;

			for (int64_t j = 0; j < nb; j++)
				DB[j] += dyr[j] * ar[j];
		}
	}
	return WEFT_OK;
}

CPU_HOT
static void scale_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *X = e->x;
	float *O = e->out; /* may alias X */

	for (int64_t i = i0; i < i1; i++)
		O[i] = e->alpha * X[i];
}

weft_status cpu_scale(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x,
		      void *out)
{
	ew_args e = { .x = x, .out = out, .alpha = alpha };

	(void)kctx;
	(void)dt;
	cpu_parallel_for(n, CPU_GRAIN, scale_range, &e);
	return WEFT_OK;
}

CPU_HOT
static void axpy_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *restrict X = e->x;
	float *restrict Y = e->out;

	if (e->alpha == 1.0f) {
		for (int64_t i = i0; i < i1; i++)
			Y[i] += X[i];
		return;
	}
	for (int64_t i = i0; i < i1; i++)
		Y[i] += e->alpha * X[i];
}

weft_status cpu_axpy(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x, void *y)
{
	ew_args e = { .x = x, .out = y, .alpha = alpha };

	(void)kctx;
	(void)dt;
	if (y)
		cpu_parallel_for(n, CPU_GRAIN, axpy_range, &e);
	return WEFT_OK;
}

CPU_HOT
static void fill_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	float *restrict O = e->out;

	for (int64_t i = i0; i < i1; i++)
		O[i] = e->alpha;
}

weft_status cpu_fill(void *kctx, weft_dtype dt, int64_t n, float value, void *out)
{
	ew_args e = { .out = out, .alpha = value };

	(void)kctx;
	(void)dt;
	cpu_parallel_for(n, CPU_GRAIN, fill_range, &e);
	return WEFT_OK;
}

typedef struct cvt_args {
	const void *src;
	void *dst;
} cvt_args;

/* F32 -> BF16 and back over a range: weft/half.h's conversions (rounding to
 * nearest even, NaN kept quiet with its sign) in loops that vectorize. */
CPU_HOT
static void f32_to_bf16_range(void *p, int64_t i0, int64_t i1)
{
	const cvt_args *c = p;
	const float *restrict S = c->src;
	uint16_t *restrict D = c->dst;

	for (int64_t i = i0; i < i1; i++)
		D[i] = weft_half_f32_to_bf16(S[i]);
}

CPU_HOT
static void bf16_to_f32_range(void *p, int64_t i0, int64_t i1)
{
	const cvt_args *c = p;
	const uint16_t *restrict S = c->src;
	float *restrict D = c->dst;

	for (int64_t i = i0; i < i1; i++)
		D[i] = weft_half_bf16_to_f32(S[i]);
}

weft_status cpu_convert(void *kctx, int64_t n, weft_dtype src_dt, const void *src,
			weft_dtype dst_dt, void *dst)
{
	cvt_args c = { .src = src, .dst = dst };

	(void)kctx;
	if (n <= 0)
		return WEFT_OK;
	if (src_dt == dst_dt)
		memmove(dst, src, (size_t)n * (src_dt == WEFT_F32 ? 4u : 2u));
	else if (src_dt == WEFT_F32 && dst_dt == WEFT_BF16)
		cpu_parallel_for(n, CPU_GRAIN, f32_to_bf16_range, &c);
	else if (src_dt == WEFT_BF16 && dst_dt == WEFT_F32)
		cpu_parallel_for(n, CPU_GRAIN, bf16_to_f32_range, &c);
	else
		weft_half_convert(n, src_dt, src, dst_dt, dst);
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_relu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out)
{
	const float *restrict X = x;
	float *restrict O = out;

	(void)kctx;
	(void)dt;
	for (int64_t i = 0; i < n; i++)
		O[i] = X[i] > 0.0f ? X[i] : 0.0f;
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_relu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
			      const void *dy, void *dx)
{
	const float *restrict X = x, *restrict DY = dy;
	float *restrict DX = dx;

	(void)kctx;
	(void)dt;
	if (!DX)
		return WEFT_OK;
	for (int64_t i = 0; i < n; i++)
		DX[i] += X[i] > 0.0f ? DY[i] : 0.0f;
	return WEFT_OK;
}

CPU_HOT
static void gelu_fwd_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *restrict X = e->x;
	float *restrict O = e->out;

	for (int64_t i = i0; i < i1; i++)
		O[i] = cpu_gelu_tanh(X[i]);
}

weft_status cpu_gelu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out)
{
	ew_args e = { .x = x, .out = out };

	(void)kctx;
	(void)dt;
	cpu_parallel_for(n, CPU_GRAIN / 4, gelu_fwd_range, &e);
	return WEFT_OK;
}

CPU_HOT
static void gelu_bwd_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *restrict X = e->x, *restrict DY = e->y;
	float *restrict DX = e->out;

	for (int64_t i = i0; i < i1; i++)
		DX[i] += DY[i] * cpu_gelu_tanh_grad(X[i]);
}

/* As gelu_bwd_range, writing DX: no zero fill before, no read of DX. */
CPU_HOT
static void gelu_bwd_write_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *restrict X = e->x, *restrict DY = e->y;
	float *restrict DX = e->out;

	for (int64_t i = i0; i < i1; i++)
		DX[i] = DY[i] * cpu_gelu_tanh_grad(X[i]);
}

/* dx (+)= dy * gelu'(x) over the threads, by `range`. */
static void gelu_backward_run(int64_t n, const void *x, const void *dy, void *dx,
			      cpu_range_fn range)
{
	ew_args e = { .x = x, .y = dy, .out = dx };

	if (dx)
		cpu_parallel_for(n, CPU_GRAIN / 4, range, &e);
}

weft_status cpu_gelu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
			      const void *dy, void *dx)
{
	(void)kctx;
	(void)dt;
	gelu_backward_run(n, x, dy, dx, gelu_bwd_range);
	return WEFT_OK;
}

/* GELU's exact form: x Phi(x), Phi(v) = 0.5 (1 + erf(v / sqrt(2))). */
#define GELU_RSQRT2 0.7071067811865476f  /* 1 / sqrt(2) */
#define GELU_RSQRT2PI 0.3989422804014327f /* 1 / sqrt(2 pi) */

CPU_HOT
static void gelu_erf_fwd_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *restrict X = e->x;
	float *restrict O = e->out;

	for (int64_t i = i0; i < i1; i++)
		O[i] = 0.5f * X[i] * (1.0f + erff(X[i] * GELU_RSQRT2));
}

weft_status cpu_gelu_erf_forward(void *kctx, weft_dtype dt, int64_t n, const void *x,
				 void *out)
{
	ew_args e = { .x = x, .out = out };

	(void)kctx;
	(void)dt;
	cpu_parallel_for(n, CPU_GRAIN / 4, gelu_erf_fwd_range, &e);
	return WEFT_OK;
}

/* dx += dy (Phi(v) + v phi(v)), phi(v) = exp(-v^2 / 2) / sqrt(2 pi). */
CPU_HOT
static void gelu_erf_bwd_range(void *p, int64_t i0, int64_t i1)
{
	const ew_args *e = p;
	const float *restrict X = e->x, *restrict DY = e->y;
	float *restrict DX = e->out;

	for (int64_t i = i0; i < i1; i++) {
		float v = X[i];
		float cdf = 0.5f * (1.0f + erff(v * GELU_RSQRT2));

		DX[i] += DY[i] * (cdf + v * GELU_RSQRT2PI * expf(-0.5f * v * v));
	}
}

weft_status cpu_gelu_erf_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
				  const void *dy, void *dx)
{
	(void)kctx;
	(void)dt;
	gelu_backward_run(n, x, dy, dx, gelu_erf_bwd_range);
	return WEFT_OK;
}

weft_status cpu_gelu_backward_write(void *kctx, weft_dtype dt, int64_t n, const void *x,
				    const void *dy, void *dx)
{
	(void)kctx;
	(void)dt;
	gelu_backward_run(n, x, dy, dx, gelu_bwd_write_range);
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_dropout_forward(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
				int64_t first, const void *x, void *out)
{
	const float *restrict X = x;
	float *restrict O = out;
	float scale = 1.0f / (1.0f - p);

	(void)kctx;
	(void)dt;
	for (int64_t i = 0; i < n; i++)
		O[i] = weft_dropout_keep(key, (uint64_t)(first + i), p) ? X[i] * scale : 0.0f;
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_dropout_backward(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
				 int64_t first, const void *dy, void *dx)
{
	const float *restrict DY = dy;
	float *restrict DX = dx;
	float scale = 1.0f / (1.0f - p);

	(void)kctx;
	(void)dt;
	if (!DX)
		return WEFT_OK;
	for (int64_t i = 0; i < n; i++)
		if (weft_dropout_keep(key, (uint64_t)(first + i), p))
			DX[i] += DY[i] * scale;
	return WEFT_OK;
}
