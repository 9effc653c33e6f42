/* Multi-head causal self-attention on the packed (B, T, 3C) projection.
 * Per (batch, head), in row tiles of TILE queries: a tile of queries only
 * sees keys up to its last row, so the GEMMs skip the masked upper
 * triangle beyond the tile (about half the work for long sequences). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

#define TILE 128

size_t cpu_attention_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t C, int64_t nh)
{
	(void)dt;
	(void)B;
	(void)C;
	(void)nh;
	return (size_t)(T * T) * sizeof(float); /* dA for one head in backward */
}

static int too_big(int64_t T, int64_t C)
{
	return T > 0x7fffffff / 4 || 3 * C > 0x7fffffff;
}

/* Causal softmax of rows [r0, r1) of the T x T score matrix `a`, in place;
 * entries right of the diagonal become 0. */
static void causal_softmax(float *a, int64_t T, int64_t r0, int64_t r1)
{
	for (int64_t i = r0; i < r1; i++) {
		float *restrict row = a + i * T;
		float mx = -INFINITY, sum = 0.0f, inv;

		for (int64_t j = 0; j <= i; j++)
			mx = row[j] > mx ? row[j] : mx;
		for (int64_t j = 0; j <= i; j++) {
			row[j] = expf(row[j] - mx);
			sum += row[j];
		}
		inv = 1.0f / sum;
		for (int64_t j = 0; j <= i; j++)
			row[j] *= inv;
		for (int64_t j = i + 1; j < T; j++)
			row[j] = 0.0f;
	}
}

weft_status cpu_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				  int64_t nh, const void *qkv, void *out, void *att,
				  void *scratch)
{
	int64_t hs = C / nh, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)hs);

	(void)kctx;
	(void)dt;
	(void)scratch;
	if (too_big(T, C))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "attention: T %lld, C %lld exceed "
				      "OpenBLAS's 32-bit sizes", (long long)T, (long long)C);
	for (int64_t b = 0; b < B; b++) {
		for (int64_t h = 0; h < nh; h++) {
			const float *q = (const float *)qkv + b * T * C3 + h * hs;
			const float *k = q + C, *v = q + 2 * C;
			float *a = (float *)att + (b * nh + h) * T * T;
			float *o = (float *)out + b * T * C + h * hs;

			for (int64_t r0 = 0; r0 < T; r0 += TILE) {
				int64_t r1 = r0 + TILE < T ? r0 + TILE : T;

				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0),
					    (int)r1, (int)hs, scale, q + r0 * C3, (int)C3, k, (int)C3,
					    0.0f, a + r0 * T, (int)T);
				causal_softmax(a, T, r0, r1);
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0),
					    (int)hs, (int)r1, 1.0f, a + r0 * T, (int)T, v, (int)C3,
					    0.0f, o + r0 * C, (int)C);
			}
		}
	}
	return WEFT_OK;
}

weft_status cpu_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				   int64_t nh, const void *qkv, const void *att,
				   const void *dout, void *dqkv, void *scratch)
{
	int64_t hs = C / nh, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)hs);
	float *da = scratch;

	(void)kctx;
	(void)dt;
	if (!dqkv)
		return WEFT_OK;
	if (too_big(T, C))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "attention: T %lld, C %lld exceed "
				      "OpenBLAS's 32-bit sizes", (long long)T, (long long)C);
	for (int64_t b = 0; b < B; b++) {
		for (int64_t h = 0; h < nh; h++) {
			const float *q = (const float *)qkv + b * T * C3 + h * hs;
			const float *k = q + C, *v = q + 2 * C;
			const float *a = (const float *)att + (b * nh + h) * T * T;
			const float *go = (const float *)dout + b * T * C + h * hs;
			float *dq = (float *)dqkv + b * T * C3 + h * hs;
			float *dk = dq + C, *dv = dq + 2 * C;

			for (int64_t r0 = 0; r0 < T; r0 += TILE) {
				int64_t r1 = r0 + TILE < T ? r0 + TILE : T, nr = r1 - r0;

				/* dA = dO V^T;  dV += A^T dO */
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)r1,
					    (int)hs, 1.0f, go + r0 * C, (int)C, v, (int)C3, 0.0f,
					    da + r0 * T, (int)T);
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r1, (int)hs,
					    (int)nr, 1.0f, a + r0 * T, (int)T, go + r0 * C, (int)C,
					    1.0f, dv, (int)C3);
				/* through the softmax, then the 1/sqrt(hs) scale */
				for (int64_t i = r0; i < r1; i++) {
					const float *restrict ar = a + i * T;
					float *restrict dr = da + i * T;
					float dot = 0.0f;

					for (int64_t j = 0; j <= i; j++)
						dot += ar[j] * dr[j];
					for (int64_t j = 0; j <= i; j++)
						dr[j] = ar[j] * (dr[j] - dot) * scale;
					for (int64_t j = i + 1; j < r1; j++)
						dr[j] = 0.0f;
				}
				/* dQ += dS K;  dK += dS^T Q */
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)hs,
					    (int)r1, 1.0f, da + r0 * T, (int)T, k, (int)C3, 1.0f,
					    dq + r0 * C3, (int)C3);
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r1, (int)hs,
					    (int)nr, 1.0f, da + r0 * T, (int)T, q + r0 * C3, (int)C3,
					    1.0f, dk, (int)C3);
			}
		}
	}
	return WEFT_OK;
}
