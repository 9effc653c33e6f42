/* Device-side helpers for the .cu files: dtype loads and stores (compute
 * is always in float), the counter-based RNG of weft/device.h, reductions,
 * and launch sizes. Dtypes are a runtime argument, the same for every
 * thread, so one kernel serves F32, BF16 and F16 without templates. */
#ifndef WEFT_CUDA_DEV_CUH
#define WEFT_CUDA_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_impl.h"

__device__ __forceinline__ float ld(const void *p, int64_t i, int dt)
{
	if (dt == WEFT_BF16)
		return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
	if (dt == WEFT_F16)
		return __half2float(((const __half *)p)[i]);
	return ((const float *)p)[i];
}

/* Round to nearest even, as the CPU's half.h does. */
__device__ __forceinline__ void st(void *p, int64_t i, int dt, float v)
{
	if (dt == WEFT_BF16)
		((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
	else if (dt == WEFT_F16)
		((__half *)p)[i] = __float2half_rn(v);
	else
		((float *)p)[i] = v;
}

/* GELU, tanh form, and its derivative: the one definition of gelu_forward /
 * gelu_backward and gemm_lowp_ex's own epilogue (the CPU's cpu_gelu_tanh). */
#define DEV_GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define DEV_GELU_C 0.044715f

__device__ __forceinline__ float dev_gelu_tanh(float v)
{
	float u = DEV_GELU_S * (v + DEV_GELU_C * v * v * v);

	return 0.5f * v * (1.0f + tanhf(u));
}

__device__ __forceinline__ float dev_gelu_tanh_grad(float v)
{
	float u = DEV_GELU_S * (v + DEV_GELU_C * v * v * v);
	float t = tanhf(u);
	float du = DEV_GELU_S * (1.0f + 3.0f * DEV_GELU_C * v * v);

	return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
}

__device__ __forceinline__ int64_t ld_index(const void *idx, int64_t i, int idx_dt)
{
	return idx_dt == WEFT_I64 ? ((const int64_t *)idx)[i] : (int64_t)((const int32_t *)idx)[i];
}

/* weft_rng_hash of weft/device.h, bit for bit. */
__device__ __forceinline__ uint64_t dev_rng_hash(uint64_t key, uint64_t counter)
{
	uint64_t z = key ^ (counter * 0x9E3779B97F4A7C15ull);

	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	z = (z ^ (z >> 33)) * 0xFF51AFD7ED558CCDull;
	return z ^ (z >> 33);
}

/* weft_dropout_keep, bit for bit (the product is exact in float). */
__device__ __forceinline__ bool dev_dropout_keep(uint64_t key, uint64_t counter, float p)
{
	return __fmul_rn((float)(dev_rng_hash(key, counter) >> 40), 1.0f / 16777216.0f) >= p;
}

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. `sh` holds 32 floats. */
__device__ __forceinline__ float block_sum(float v, float *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	v = warp_sum(v);
	__syncthreads(); /* sh may still be read from an earlier call */
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	v = lane < nw ? sh[lane] : 0.0f;
	return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *sh)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	v = warp_max(v);
	__syncthreads();
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	v = lane < nw ? sh[lane] : -INFINITY;
	return warp_max(v);
}

/* Blocks for a grid-stride loop over n items with `threads` per block. */
static inline unsigned int grid_for(int64_t n, int threads)
{
	int64_t b = (n + threads - 1) / threads;

	if (b < 1)
		b = 1;
	return b > 65536 * 16 ? 65536u * 16u : (unsigned int)b;
}

#define GRID_STRIDE(i, n) \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
	     i += (int64_t)gridDim.x * blockDim.x)

#endif /* WEFT_CUDA_DEV_CUH */
