/* gemm_lowp_ex's own epilogue, for the calls cuBLASLt's fused epilogues
 * cannot take (cuda_gemm_lt.c says which): per element of the F32 product,
 * the bias (rounded to C's dtype first when C is 16-bit, as the contract
 * says), GELU with its pre-activation saved, or GELU's backward, in F32,
 * each stored value rounded once to C's dtype, as the CPU's reference
 * (kernels/cpu/cpu_gemm_ex.c) computes them; and BGRAD's bias gradient
 * where neither cuBLASLt nor the column-sum kernels take it (A not
 * transposed, or rows of A that are not contiguous). */
#include "cuda_dev.cuh"

#define THREADS 256

/* v rounded to dt (nearest even) and widened back: F32 is left as it is. */
__device__ __forceinline__ float rounded(float v, int dt)
{
	if (dt == WEFT_BF16)
		return __bfloat162float(__float2bfloat16_rn(v));
	if (dt == WEFT_F16)
		return __half2float(__float2half_rn(v));
	return v;
}

__global__ void k_gemm_epilogue(int64_t m, int64_t n, const float *d, int64_t ldd, int add_c,
				int dt, void *c, int64_t ldc, const float *bias, int epi, void *aux)
{
	GRID_STRIDE(i, m * n) {
		int64_t r = i / n, j = i % n, at = r * ldc + j;
		float v = d[r * ldd + j];

		if (epi == WEFT_EPI_DGELU) {
			v *= dev_gelu_tanh_grad(ld(aux, at, dt));
		} else {
			if (add_c)
				v += ld(c, at, dt);
			if (bias)
				v += rounded(bias[j], dt);
			if (epi == WEFT_EPI_GELU) {
				st(aux, at, dt, v);
				v = dev_gelu_tanh(v);
			}
		}
		st(c, at, dt, v);
	}
}

extern "C" weft_status cuda_gemm_epilogue(cuda_ctx *c, int64_t m, int64_t n, const float *d,
					  int64_t ldd, int add_c, weft_dtype dt, void *cm,
					  int64_t ldc, const float *bias, int32_t epilogue,
					  void *aux)
{
	if (m <= 0 || n <= 0)
		return WEFT_OK;
	k_gemm_epilogue<<<grid_for(m * n, THREADS), THREADS, 0, c->stream>>>(
		m, n, d, ldd, add_c, (int)dt, cm, ldc, bias, (int)epilogue, aux);
	return cuda_launched(c, "gemm_lowp_ex", "epilogue %d on %s %lld x %lld", (int)epilogue,
			     cuda_dt_name(dt), (long long)m, (long long)n);
}

/* aux[i] = (add: aux[i] +) the sum over kk < k of A's element i si + kk sk
 * (16-bit dt), kk in order: a thread per i, so the order is fixed by the
 * arguments. */
__global__ void k_gemm_bgrad(int64_t m, int64_t k, const void *a, int64_t si, int64_t sk,
			     int dt, int add, float *aux)
{
	GRID_STRIDE(i, m) {
		float s = add ? aux[i] : 0.0f;

		for (int64_t kk = 0; kk < k; kk++)
			s += ld(a, i * si + kk * sk, dt);
		aux[i] = s;
	}
}

extern "C" weft_status cuda_gemm_bgrad(cuda_ctx *c, weft_dtype dt, int trans_a, int64_t m,
				       int64_t k, const void *a, int64_t lda, int add, float *aux)
{
	if (m <= 0)
		return WEFT_OK;
	k_gemm_bgrad<<<grid_for(m, THREADS), THREADS, 0, c->stream>>>(
		m, k, a, trans_a ? 1 : lda, trans_a ? lda : 1, (int)dt, add, aux);
	return cuda_launched(c, "gemm_lowp_ex", "bias gradient of %s %lld x %lld",
			     cuda_dt_name(dt), (long long)m, (long long)k);
}
