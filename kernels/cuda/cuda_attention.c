/* Causal multi-head self-attention on the packed (B, T, 3C) projection:
 * per batch row, cuBLAS strided-batched GEMMs over the heads (scores kept
 * in F32 whatever the dtype), and a causal softmax kernel between them.
 * The probabilities are written to `att` (the table's contract: backward
 * reads them), so this is the plain, memory-bound formulation; a fused
 * (flash-style) kernel would need the contract to save only row
 * statistics. */
#include <math.h>

#include "cuda_impl.h"

/* Bytes of the F32 part of the scratch, rounded up so the dS part that
 * follows it starts 256-byte aligned (what cuBLAS's fast paths want). */
static size_t f32_part(int64_t nh, int64_t T)
{
	return ((size_t)(nh * T * T) * 4u + 255u) & ~(size_t)255u;
}

/* Per batch row: F32 scores or dA (nh * T * T) and, in backward, dS in the
 * operand dtype (nh * T * T). The rows of the batch reuse it in turn. */
size_t cuda_attention_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t C, int64_t nh)
{
	(void)B;
	(void)C;
	return f32_part(nh, T) + (size_t)(nh * T * T) * cuda_dt_size(dt);
}

weft_status cuda_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				   int64_t nh, const void *qkv, void *out, void *att,
				   void *scratch)
{
	const char *name = "attention_forward";
	cuda_ctx *c = kctx;
	size_t es = cuda_dt_size(dt);
	int64_t hs, C3 = 3 * C;
	float scale, *scores = scratch;
	weft_status st = cuda_need_ctx(c, name);

	if (st)
		return st;
	if (B <= 0 || T <= 0 || C <= 0 || nh <= 0)
		return WEFT_OK;
	hs = C / nh;
	scale = 1.0f / sqrtf((float)hs);
	for (int64_t b = 0; b < B && !st; b++) {
		const char *q = (const char *)qkv + (size_t)(b * T * C3) * es;
		const char *k = q + (size_t)C * es, *v = q + (size_t)(2 * C) * es;
		char *a = (char *)att + (size_t)(b * nh * T * T) * es;
		char *o = (char *)out + (size_t)(b * T * C) * es;

		st = cuda_gemm_ex(c, name, dt, WEFT_F32, 0, 1, T, T, hs, scale, q, C3, hs, k, C3, hs,
				  0.0f, scores, T, T * T, nh);
		if (!st)
			st = cuda_causal_softmax(c, dt, nh, T, scores, a);
		if (!st)
			st = cuda_gemm_ex(c, name, dt, dt, 0, 0, T, hs, T, 1.0f, a, T, T * T, v, C3,
					  hs, 0.0f, o, C, hs, nh);
	}
	return st;
}

weft_status cuda_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				    int64_t nh, const void *qkv, const void *att,
				    const void *dout, void *dqkv, void *scratch)
{
	const char *name = "attention_backward";
	cuda_ctx *c = kctx;
	size_t es = cuda_dt_size(dt);
	int64_t hs, C3 = 3 * C;
	float scale, *da = scratch;
	void *ds = (char *)scratch + f32_part(nh, T);
	weft_status st = cuda_need_ctx(c, name);

	if (st)
		return st;
	if (B <= 0 || T <= 0 || C <= 0 || nh <= 0 || !dqkv)
		return WEFT_OK;
	hs = C / nh;
	scale = 1.0f / sqrtf((float)hs);
	for (int64_t b = 0; b < B && !st; b++) {
		const char *q = (const char *)qkv + (size_t)(b * T * C3) * es;
		const char *k = q + (size_t)C * es, *v = q + (size_t)(2 * C) * es;
		const char *a = (const char *)att + (size_t)(b * nh * T * T) * es;
		const char *go = (const char *)dout + (size_t)(b * T * C) * es;
		char *dq = (char *)dqkv + (size_t)(b * T * C3) * es;
		char *dk = dq + (size_t)C * es, *dv = dq + (size_t)(2 * C) * es;

		/* dA = dO V^T (F32);  dV += A^T dO */
		st = cuda_gemm_ex(c, name, dt, WEFT_F32, 0, 1, T, T, hs, 1.0f, go, C, hs, v, C3, hs,
				  0.0f, da, T, T * T, nh);
		if (!st)
			st = cuda_gemm_ex(c, name, dt, dt, 1, 0, T, hs, T, 1.0f, a, T, T * T, go, C,
					  hs, 1.0f, dv, C3, hs, nh);
		/* through the softmax and the 1/sqrt(hs) scale */
		if (!st)
			st = cuda_causal_softmax_backward(c, dt, nh, T, scale, a, da, ds);
		/* dQ += dS K;  dK += dS^T Q */
		if (!st)
			st = cuda_gemm_ex(c, name, dt, dt, 0, 0, T, hs, T, 1.0f, ds, T, T * T, k, C3,
					  hs, 1.0f, dq, C3, hs, nh);
		if (!st)
			st = cuda_gemm_ex(c, name, dt, dt, 1, 0, T, hs, T, 1.0f, ds, T, T * T, q, C3,
					  hs, 1.0f, dk, C3, hs, nh);
	}
	return st;
}
