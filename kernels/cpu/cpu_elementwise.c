/* Elementwise kernels: add, mul, scale, axpy, fill, convert, relu, gelu,
 * dropout. Loops are written to vectorize (restrict, unit stride). */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"
#include "half.h"

CPU_HOT
weft_status cpu_add(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
		    const void *b, void *out)
{
	const float *A = a, *restrict B = b;
	float *O = out; /* may alias A */

	(void)kctx;
	(void)dt;
	if (nb == n) {
		for (int64_t i = 0; i < n; i++)
			O[i] = A[i] + B[i];
		return WEFT_OK;
	}
	for (int64_t r = 0; nb && r < n / nb; r++) {
		const float *ar = A + r * nb;
		float *orow = O + r * nb;

		for (int64_t j = 0; j < nb; j++)
			orow[j] = ar[j] + B[j];
	}
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
weft_status cpu_scale(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x,
		      void *out)
{
	const float *X = x;
	float *O = out;

	(void)kctx;
	(void)dt;
	for (int64_t i = 0; i < n; i++)
		O[i] = alpha * X[i];
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_axpy(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x, void *y)
{
	const float *restrict X = x;
	float *restrict Y = y;

	(void)kctx;
	(void)dt;
	if (!Y)
		return WEFT_OK;
	if (alpha == 1.0f) {
		for (int64_t i = 0; i < n; i++)
			Y[i] += X[i];
		return WEFT_OK;
	}
	for (int64_t i = 0; i < n; i++)
		Y[i] += alpha * X[i];
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_fill(void *kctx, weft_dtype dt, int64_t n, float value, void *out)
{
	float *restrict O = out;

	(void)kctx;
	(void)dt;
	for (int64_t i = 0; i < n; i++)
		O[i] = value;
	return WEFT_OK;
}

weft_status cpu_convert(void *kctx, int64_t n, weft_dtype src_dt, const void *src,
			weft_dtype dst_dt, void *dst)
{
	(void)kctx;
	if (n > 0 && src_dt == dst_dt)
		memmove(dst, src, (size_t)n * (src_dt == WEFT_F32 ? 4u : 2u));
	else if (n > 0)
		half_convert(n, src_dt, src, dst_dt, dst);
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

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

CPU_HOT
weft_status cpu_gelu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out)
{
	const float *restrict X = x;
	float *restrict O = out;

	(void)kctx;
	(void)dt;
	for (int64_t i = 0; i < n; i++) {
		float v = X[i];
		float u = GELU_S * (v + GELU_C * v * v * v);

		O[i] = 0.5f * v * (1.0f + cpu_tanhf(u));
	}
	return WEFT_OK;
}

CPU_HOT
weft_status cpu_gelu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
			      const void *dy, void *dx)
{
	const float *restrict X = x, *restrict DY = dy;
	float *restrict DX = dx;

	(void)kctx;
	(void)dt;
	if (!DX)
		return WEFT_OK;
	for (int64_t i = 0; i < n; i++) {
		float v = X[i];
		float u = GELU_S * (v + GELU_C * v * v * v);
		float t = cpu_tanhf(u);
		float du = GELU_S * (1.0f + 3.0f * GELU_C * v * v);

		DX[i] += DY[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
	}
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
