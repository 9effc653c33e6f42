/* Causal self-attention on a packed projection, GPT's multi-head (B, T,
 * 3C) and grouped-query heads (B, T, (nh + 2 nkv) hs) alike:
 * per batch row, cuBLAS strided-batched GEMMs over the heads (scores kept
 * in F32 whatever the dtype), and a causal softmax kernel between them.
 * The probabilities are written to `att` (the table's contract: backward
 * reads them), so this is the plain, memory-bound formulation; the fused
 * kernels that save only row statistics are cuda_flash.cu's. */
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

/* Causal attention with nh query heads and nkv kv heads (nkv divides nh;
 * GPT's multi-head attention is nkv = nh) on qkv rows of L = (nh + 2 nkv)
 * hs elements: q | k | v. Per batch row, for each member m of a group
 * (query heads kv * g + m, g = nh / nkv), strided-batched GEMMs over the
 * nkv kv heads; the scores of all nh heads land in one F32 block so the
 * causal softmax runs once per row. A kv head's gradient gathers its
 * group's contributions in turn (beta 1), never two at once. */
static weft_status gqa_forward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
			       int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
			       void *out, void *att, float *scores)
{
	size_t es = cuda_dt_size(dt);
	int64_t g = nh / nkv, L = (nh + 2 * nkv) * hs, C = nh * hs, TT = T * T;
	float scale = 1.0f / sqrtf((float)hs);
	weft_status st = WEFT_OK;

	for (int64_t b = 0; b < B && !st; b++) {
		const char *q = (const char *)qkv + (size_t)(b * T * L) * es;
		const char *k = q + (size_t)C * es, *v = k + (size_t)(nkv * hs) * es;
		char *a = (char *)att + (size_t)(b * nh * TT) * es;
		char *o = (char *)out + (size_t)(b * T * C) * es;

		for (int64_t m = 0; m < g && !st; m++)
			st = cuda_gemm_ex(c, name, dt, WEFT_F32, 0, 1, T, T, hs, scale,
					  q + (size_t)(m * hs) * es, L, g * hs, k, L, hs, 0.0f,
					  scores + m * TT, T, g * TT, nkv);
		if (!st)
			st = cuda_causal_softmax(c, dt, nh, T, scores, a);
		for (int64_t m = 0; m < g && !st; m++)
			st = cuda_gemm_ex(c, name, dt, dt, 0, 0, T, hs, T, 1.0f,
					  a + (size_t)(m * TT) * es, T, g * TT, v, L, hs, 0.0f,
					  o + (size_t)(m * hs) * es, C, g * hs, nkv);
	}
	return st;
}

static weft_status gqa_backward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				const void *att, const void *dout, void *dqkv, void *scratch)
{
	size_t es = cuda_dt_size(dt);
	int64_t g = nh / nkv, L = (nh + 2 * nkv) * hs, C = nh * hs, TT = T * T;
	float scale = 1.0f / sqrtf((float)hs), *da = scratch;
	char *ds = (char *)scratch + f32_part(nh, T);
	weft_status st = WEFT_OK;

	for (int64_t b = 0; b < B && !st; b++) {
		const char *q = (const char *)qkv + (size_t)(b * T * L) * es;
		const char *k = q + (size_t)C * es, *v = k + (size_t)(nkv * hs) * es;
		const char *a = (const char *)att + (size_t)(b * nh * TT) * es;
		const char *go = (const char *)dout + (size_t)(b * T * C) * es;
		char *dq = (char *)dqkv + (size_t)(b * T * L) * es;
		char *dk = dq + (size_t)C * es, *dv = dk + (size_t)(nkv * hs) * es;

		/* dA = dO V^T (F32);  dV += A^T dO */
		for (int64_t m = 0; m < g && !st; m++)
			st = cuda_gemm_ex(c, name, dt, WEFT_F32, 0, 1, T, T, hs, 1.0f,
					  go + (size_t)(m * hs) * es, C, g * hs, v, L, hs, 0.0f,
					  da + m * TT, T, g * TT, nkv);
		for (int64_t m = 0; m < g && !st; m++)
			st = cuda_gemm_ex(c, name, dt, dt, 1, 0, T, hs, T, 1.0f,
					  a + (size_t)(m * TT) * es, T, g * TT,
					  go + (size_t)(m * hs) * es, C, g * hs, 1.0f, dv, L, hs, nkv);
		/* through the softmax and the 1/sqrt(hs) scale */
		if (!st)
			st = cuda_causal_softmax_backward(c, dt, nh, T, scale, a, da, ds);
		/* dQ += dS K;  dK += dS^T Q */
		for (int64_t m = 0; m < g && !st; m++)
			st = cuda_gemm_ex(c, name, dt, dt, 0, 0, T, hs, T, 1.0f,
					  ds + (size_t)(m * TT) * es, T, g * TT, k, L, hs, 1.0f,
					  dq + (size_t)(m * hs) * es, L, g * hs, nkv);
		for (int64_t m = 0; m < g && !st; m++)
			st = cuda_gemm_ex(c, name, dt, dt, 1, 0, T, hs, T, 1.0f,
					  ds + (size_t)(m * TT) * es, T, g * TT,
					  q + (size_t)(m * hs) * es, L, g * hs, 1.0f, dk, L, hs, nkv);
	}
	return st;
}

weft_status cuda_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				   int64_t nh, const void *qkv, void *out, void *att,
				   void *scratch)
{
	const char *name = "attention_forward";
	cuda_ctx *c = kctx;
	weft_status st = cuda_need_ctx(c, name);

	if (st)
		return st;
	if (B <= 0 || T <= 0 || C <= 0 || nh <= 0)
		return WEFT_OK;
	return gqa_forward(c, name, dt, B, T, nh, nh, C / nh, qkv, out, att, scratch);
}

weft_status cuda_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				    int64_t nh, const void *qkv, const void *att,
				    const void *dout, void *dqkv, void *scratch)
{
	const char *name = "attention_backward";
	cuda_ctx *c = kctx;
	weft_status st = cuda_need_ctx(c, name);

	if (st)
		return st;
	if (B <= 0 || T <= 0 || C <= 0 || nh <= 0 || !dqkv)
		return WEFT_OK;
	return gqa_backward(c, name, dt, B, T, nh, nh, C / nh, qkv, att, dout, dqkv, scratch);
}

size_t cuda_attention_gqa_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv,
				  int64_t hs)
{
	(void)nkv;
	return cuda_attention_scratch(dt, B, T, nh * hs, nh);
}

weft_status cuda_attention_gqa_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
				       int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				       void *out, void *att, void *scratch)
{
	const char *name = "attention_gqa_forward";
	cuda_ctx *c = kctx;
	weft_status st = cuda_need_ctx(c, name);

	if (st)
		return st;
	if (B <= 0 || T <= 0 || nh <= 0 || nkv <= 0 || hs <= 0)
		return WEFT_OK;
	return gqa_forward(c, name, dt, B, T, nh, nkv, hs, qkv, out, att, scratch);
}

weft_status cuda_attention_gqa_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
					const void *att, const void *dout, void *dqkv,
					void *scratch)
{
	const char *name = "attention_gqa_backward";
	cuda_ctx *c = kctx;
	weft_status st = cuda_need_ctx(c, name);

	if (st)
		return st;
	if (B <= 0 || T <= 0 || nh <= 0 || nkv <= 0 || hs <= 0 || !dqkv)
		return WEFT_OK;
	return gqa_backward(c, name, dt, B, T, nh, nkv, hs, qkv, att, dout, dqkv, scratch);
}
