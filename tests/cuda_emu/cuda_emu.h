/* cuda_emu.h - force-included (g++ -include) into weft's kernels/cuda/ .cu
 * files after launch_rewrite.pl has turned `k<<<cfg>>>(args)` into
 * `emu_launch(emu_cfg(cfg), k, args)`, so they compile as host C++ against
 * the emulated runtime (libemucuda.so, README.md beside this file). A
 * launch is queued on its stream; when it runs, every CUDA thread of a
 * block is a fiber with real barriers for __syncthreads and warp shuffles,
 * so the kernels' index math, reductions and dtype handling execute as
 * written. __shared__ is `static`: one copy, which is per block because
 * blocks, and all device work of the process, run one at a time. The
 * warp matrix API (nvcuda::wmma) comes from cuda_emu_wmma.h, included at
 * the end. */
#ifndef WEFT_CUDA_EMU_H
#define WEFT_CUDA_EMU_H

#define __shared__ static
/* occupancy hints for nvcc; nothing to the emulator */
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

#include <cuda_runtime_api.h>
#include <vector_types.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <functional>

struct emu_cfg_t {
	dim3 grid, block;
	size_t shmem;
	cudaStream_t stream;
};

static inline emu_cfg_t emu_cfg(dim3 g, dim3 b, size_t sh = 0, cudaStream_t s = 0)
{
	return emu_cfg_t{ g, b, sh, s };
}

extern thread_local uint3 threadIdx __attribute__((tls_model("initial-exec")));
extern thread_local uint3 blockIdx __attribute__((tls_model("initial-exec")));
extern thread_local dim3 blockDim __attribute__((tls_model("initial-exec")));
extern thread_local dim3 gridDim __attribute__((tls_model("initial-exec")));

extern "C++" void emu_run(const emu_cfg_t &cfg, const char *name, std::function<void()> body);
void emu_syncthreads();
float emu_shfl_xor(float v, int lane_mask);
void emu_atomic_lock();
void emu_atomic_unlock();

template <class K, class... A> static void emu_launch_named(const char *name, emu_cfg_t cfg, K k,
							    A... a)
{
	emu_run(cfg, name, [=]() { k(a...); });
}
#define emu_launch(cfg, k, ...) emu_launch_named(#k, cfg, k, __VA_ARGS__)

#define __syncthreads() emu_syncthreads()
static inline float __shfl_xor_sync(unsigned mask, float v, int o)
{
	(void)mask;
	return emu_shfl_xor(v, o);
}

static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
	emu_atomic_lock();
	unsigned long long old = *p;
	if (v < old)
		*p = v;
	emu_atomic_unlock();
	return old;
}
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
	emu_atomic_lock();
	unsigned long long old = *p;
	*p = old + v;
	emu_atomic_unlock();
	return old;
}
static inline float atomicAdd(float *p, float v)
{
	emu_atomic_lock();
	float old = *p;
	*p = old + v;
	emu_atomic_unlock();
	return old;
}
/* bf16/f16 atomics round each addition to the 16-bit type, as the GPU does */
static inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v)
{
	emu_atomic_lock();
	__nv_bfloat16 old = *p;
	*p = __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(v));
	emu_atomic_unlock();
	return old;
}
static inline __half atomicAdd(__half *p, __half v)
{
	emu_atomic_lock();
	__half old = *p;
	*p = __float2half_rn(__half2float(old) + __half2float(v));
	emu_atomic_unlock();
	return old;
}

/* correctly rounded single operations (the file is built -ffp-contract=off) */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }

#include "cuda_emu_wmma.h"

#endif
