/* Warp-level tensor-core primitives of sm_80 and later, as the PTX ISA
 * defines them: the m16n8k16 matrix product of 16-bit operands with F32
 * accumulators (mma.sync) and the shared-memory matrix loads that feed it
 * (ldmatrix). Kernels that keep their tiles in registers (the flash
 * attention kernels: the softmax of a score tile without a trip through
 * shared memory) use these instead of the warp matrix API, whose register
 * layout is unspecified.
 *
 * Register layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"): a lane
 * is g = lane / 4 (its group) and t = lane % 4; a 32-bit register holds
 * two 16-bit elements, the lower column (or k) in the lower half.
 *   A, 16 x 16 (m x k), row-major, a[4]:
 *     a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
 *     a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
 *   B, 16 x 8 (k x n), b[2]:
 *     b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
 *   C and D, 16 x 8 F32, c[4]:
 *     c[0], c[1] = C[g][2t, 2t+1]     c[2], c[3] = C[g+8][2t, 2t+1]
 * so a D tile of one product, rounded and packed two by two, is the A
 * fragment of the next (the columns 0-7 of a 16 x 16 A tile are one D
 * tile's, 8-15 the next one's).
 *
 * ldmatrix: each of up to four 8 x 8 matrices of 16-bit elements, rows of
 * 16 bytes (16-byte aligned, in shared memory); lanes 8i .. 8i+7 give the
 * addresses of matrix i's rows 0-7. Lane l receives in r[i] matrix i's
 * row l/4, columns 2(l%4) and 2(l%4)+1; with .trans the transposed
 * matrix's: rows 2(l%4) and 2(l%4)+1 of column l/4. So one x4 load of a
 * 16 x 16 row-major tile (lanes 0-15 rows 0-15 at column 0, lanes 16-31
 * rows 0-15 at column 8) is an A fragment, and a .trans load of a
 * row-major k x n tile is B fragments.
 *
 * These layouts were checked against the PTX ISA ("Matrix Fragments for
 * mma.m16n8k16 with floating point type", "ldmatrix") and against
 * CUTLASS's GPU-run SM80 16x8x16 MMA traits and SM75 LDSM copy traits,
 * whose thread-value layouts reduce to the same A, B, C/D and ldmatrix
 * maps (.trans included), by reading both. tests/cuda_emu/emu_mma.cu
 * checks the emulated calls against a host product: the C/D layout
 * independently, the A/B and ldmatrix layouts only together (the same
 * mistake in both would cancel), so a GPU run of the flash tests is the
 * proof of the layouts the emulator has not had yet.
 *
 * Every lane of the warp must execute each call (converged, none
 * returned). Built for an architecture before sm_80 the calls trap; the
 * callers keep such devices off these kernels.
 *
 * Under the CUDA emulator (tests/cuda_emu) the same calls are warp
 * collectives: every lane's registers are gathered, the product is taken
 * in F32 (products of the 16-bit inputs summed in k order after the
 * accumulator) and each lane keeps its own elements; ldmatrix reads the
 * addresses the lanes give. The emulator checks that all 32 lanes take
 * part, at the same call, and that each row address is 16-byte aligned,
 * and counts 2 x 16 x 8 x 16 FLOPs of class tc16 per warp and mma. Its
 * cp.async (below) defers each copy until a wait retires its group. */
#ifndef WEFT_CUDA_MMA_CUH
#define WEFT_CUDA_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#ifdef WEFT_CUDA_EMU_H
/* libemucuda (emu_launch.cpp): each lane of the caller's warp hands in
 * `bytes` (at most 32) of its own and receives every lane's, lane order,
 * in `all` (32 x bytes); a warp barrier. tc16_flops > 0 counts that many
 * FLOPs of class tc16 once for the warp. */
void emu_warp_gather(const char *call, const void *mine, unsigned bytes, void *all,
		     double tc16_flops);
/* Reports and aborts unless `row` (lane's ldmatrix row address) is 16-byte
 * aligned. */
void emu_ldmatrix_check(const char *call, const void *row, int lane);
/* libemucuda (emu_async.cpp): cp.async deferred. emu_cp_async queues a
 * copy of `bytes` in the calling thread's open group (checked: 16-byte
 * aligned addresses, a device source, a shared destination); commit closes
 * the group; wait(n) performs the copies of all but the n most recent
 * committed groups, wait(-1) commits and performs every one. */
void emu_cp_async(const char *call, void *smem, const void *gmem, unsigned bytes);
void emu_cp_async_commit(void);
void emu_cp_async_wait(int n);
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define MMA_DEVICE 0
#else
#define MMA_DEVICE 1
#endif

/* Two F32 values rounded to E (__nv_bfloat16 or __half) and packed, lo in
 * the lower half. */
template <class E> __device__ __forceinline__ uint32_t mma_pack(float lo, float hi);

template <> __device__ __forceinline__ uint32_t mma_pack<__nv_bfloat16>(float lo, float hi)
{
	__nv_bfloat16_raw l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);

	return (uint32_t)l.x | (uint32_t)h.x << 16;
}

template <> __device__ __forceinline__ uint32_t mma_pack<__half>(float lo, float hi)
{
	__half_raw l = __float2half_rn(lo), h = __float2half_rn(hi);

	return (uint32_t)l.x | (uint32_t)h.x << 16;
}

/* The two 16-bit halves of r as F32 (lo = the lower half). Through the
 * _raw types: a memcpy into the 16-bit classes is no valid C++ to g++,
 * which builds these for the emulator. */
template <class E> __device__ __forceinline__ void mma_unpack(uint32_t r, float *lo, float *hi);

template <> __device__ __forceinline__ void mma_unpack<__nv_bfloat16>(uint32_t r, float *lo,
								    float *hi)
{
	__nv_bfloat16_raw l, h;

	l.x = (unsigned short)(r & 0xffffu);
	h.x = (unsigned short)(r >> 16);
	*lo = __bfloat162float(__nv_bfloat16(l));
	*hi = __bfloat162float(__nv_bfloat16(h));
}

template <> __device__ __forceinline__ void mma_unpack<__half>(uint32_t r, float *lo, float *hi)
{
	__half_raw l, h;

	l.x = (unsigned short)(r & 0xffffu);
	h.x = (unsigned short)(r >> 16);
	*lo = __half2float(__half(l));
	*hi = __half2float(__half(h));
}

#ifdef WEFT_CUDA_EMU_H
template <class E> static inline float mma_emu_elem(const uint32_t *regs, int reg, int half)
{
	float lo, hi;

	mma_unpack<E>(regs[reg], &lo, &hi);
	return half ? hi : lo;
}

/* One emulated m16n8k16 product: every lane's fragments, the tiles
 * rebuilt from the layouts above, this lane's four outputs. */
template <class E> static inline void mma_emu_16816(float c[4], const uint32_t a[4],
						    const uint32_t b[2])
{
	uint32_t mine[6] = { a[0], a[1], a[2], a[3], b[0], b[1] }, all[32][6];
	float A[2][16], B[16][2];
	int lane = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
	int g = lane / 4, t = lane % 4;

	emu_warp_gather("mma.sync.m16n8k16", mine, sizeof mine, all, 2.0 * 16 * 8 * 16);
	/* only what this lane's outputs read: A's rows g and g + 8 (lanes
	 * 4g .. 4g + 3) and B's columns 2t and 2t + 1 (lanes 8t .. 8t + 7) */
	for (int l = 4 * g; l < 4 * g + 4; l++)
		for (int h = 0; h < 2; h++) {
			int k = 2 * (l % 4) + h;

			A[0][k] = mma_emu_elem<E>(all[l], 0, h);
			A[1][k] = mma_emu_elem<E>(all[l], 1, h);
			A[0][k + 8] = mma_emu_elem<E>(all[l], 2, h);
			A[1][k + 8] = mma_emu_elem<E>(all[l], 3, h);
		}
	for (int l = 8 * t; l < 8 * t + 8; l++)
		for (int h = 0; h < 2; h++) {
			int k = 2 * (l % 4) + h, n = l / 4 - 2 * t; /* column 2t + n */

			B[k][n] = mma_emu_elem<E>(all[l], 4, h);
			B[k + 8][n] = mma_emu_elem<E>(all[l], 5, h);
		}
	for (int i = 0; i < 4; i++) {
		float s = c[i];

		for (int k = 0; k < 16; k++)
			s += A[i / 2][k] * B[k][i & 1];
		c[i] = s;
	}
}

/* ldmatrix of `n` (1, 2, 4) 8 x 8 matrices, transposed or not. */
static inline void mma_emu_ldmatrix(const char *call, uint32_t *r, int n, int trans,
				    const void *p)
{
	const unsigned char *all[32];
	int lane = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;

	emu_warp_gather(call, &p, sizeof p, all, 0);
	for (int l = 0; l < 8 * n; l++)
		emu_ldmatrix_check(call, all[l], l);
	for (int i = 0; i < n; i++) {
		uint16_t h[2];

		for (int e = 0; e < 2; e++) {
			int row = trans ? 2 * (lane % 4) + e : lane / 4;
			int col = trans ? lane / 4 : 2 * (lane % 4) + e;

			memcpy(&h[e], all[8 * i + row] + 2 * col, 2);
		}
		memcpy(&r[i], h, 4);
	}
}
#endif

/* D = A B + C on tensor cores, in place on c (see the layouts above). */
template <class E> __device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4],
							   const uint32_t b[2]);

template <> __device__ __forceinline__ void mma_16816<__nv_bfloat16>(float c[4],
								   const uint32_t a[4],
								   const uint32_t b[2])
{
#if defined(WEFT_CUDA_EMU_H)
	mma_emu_16816<__nv_bfloat16>(c, a, b);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

template <> __device__ __forceinline__ void mma_16816<__half>(float c[4], const uint32_t a[4],
							    const uint32_t b[2])
{
#if defined(WEFT_CUDA_EMU_H)
	mma_emu_16816<__half>(c, a, b);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

#if defined(__CUDA_ARCH__) && MMA_DEVICE && !defined(WEFT_CUDA_EMU_H)
#define MMA_SMEM(p) ((unsigned)__cvta_generic_to_shared(p))
#endif

/* Four 8 x 8 matrices (r[0..3]); p: this lane's row address (above). */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p)
{
#if defined(WEFT_CUDA_EMU_H)
	mma_emu_ldmatrix("ldmatrix.x4", r, 4, 0, p);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(MMA_SMEM(p)));
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *p)
{
#if defined(WEFT_CUDA_EMU_H)
	mma_emu_ldmatrix("ldmatrix.x4.trans", r, 4, 1, p);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(MMA_SMEM(p)));
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

/* Two 8 x 8 matrices (r[0..1]): lanes 0-15 give the row addresses (the
 * others' p is not read but must be a valid value). */
__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void *p)
{
#if defined(WEFT_CUDA_EMU_H)
	mma_emu_ldmatrix("ldmatrix.x2", r, 2, 0, p);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
		     : "=r"(r[0]), "=r"(r[1])
		     : "r"(MMA_SMEM(p)));
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const void *p)
{
#if defined(WEFT_CUDA_EMU_H)
	mma_emu_ldmatrix("ldmatrix.x2.trans", r, 2, 1, p);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
		     : "=r"(r[0]), "=r"(r[1])
		     : "r"(MMA_SMEM(p)));
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

/* ---- cp.async: asynchronous 16-byte copies from global to shared memory ----
 * A thread's copies join its open group; cp_async_commit closes the group;
 * cp_async_wait<N>() returns once at most the N most recently committed
 * groups are still in flight (every earlier one has landed in shared
 * memory), cp_async_wait_all() once every copy has. A copy is visible to
 * the issuing thread after the wait, to the others after a __syncthreads
 * that follows it. Both addresses 16-byte aligned, the source in global
 * memory, the destination in shared memory. So a kernel loads tile k+1
 * while it computes on tile k: issue k+1, commit, wait<1>, __syncthreads,
 * compute on k, __syncthreads before overwriting k's buffer. */
__device__ __forceinline__ void cp_async_16(void *smem, const void *gmem)
{
#if defined(WEFT_CUDA_EMU_H)
	emu_cp_async("cp.async.cg.shared.global", smem, gmem, 16);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
		     :
		     : "r"(MMA_SMEM(smem)), "l"(gmem)
		     : "memory");
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

__device__ __forceinline__ void cp_async_commit(void)
{
#if defined(WEFT_CUDA_EMU_H)
	emu_cp_async_commit();
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

template <int N> __device__ __forceinline__ void cp_async_wait(void)
{
	static_assert(N >= 0, "cp_async_wait<N>: N counts groups still in flight, N >= 0");
#if defined(WEFT_CUDA_EMU_H)
	emu_cp_async_wait(N);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("cp.async.wait_group %0;\n" : : "n"(N) : "memory");
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

__device__ __forceinline__ void cp_async_wait_all(void)
{
#if defined(WEFT_CUDA_EMU_H)
	emu_cp_async_wait(-1);
#elif defined(__CUDA_ARCH__) && MMA_DEVICE
	asm volatile("cp.async.wait_all;\n" ::: "memory");
#elif defined(__CUDA_ARCH__)
	__trap();
#endif
}

#endif
