/* cuda_flash_mma.cuh - what the flash attention kernels on mma.sync
 * (cuda_flash_mma_fwd.cu, and the backward) share: the tiling constants,
 * the staging of a tile of the packed qkv (or any row-major tensor of
 * heads) from global to shared memory, through registers or by cp.async,
 * the ldmatrix addresses of the operand fragments (cuda_mma.cuh's
 * layouts), the softmax's scale in base 2 and the reductions over the
 * four lanes that hold one row of an accumulator tile.
 *
 * Tiles: rows of HS elements (16-bit E) in shared memory with a row
 * stride of FLASH_MMA_LD(HS) = HS + 8 elements: every row starts 16-byte
 * aligned (ldmatrix, 128-bit stores) and the eight rows an 8 x 8 ldmatrix
 * reads fall on eight different 16-byte bank groups (a stride of HS + 8
 * elements is 4 words past a multiple of 32 banks), so the loads are
 * conflict-free. A block is FLASH_MMA_THREADS threads, four
 * warps of 16 rows each. */
#ifndef WEFT_CUDA_FLASH_MMA_CUH
#define WEFT_CUDA_FLASH_MMA_CUH

#include "cuda_mma.cuh"

#define FLASH_MMA_ROWS 64     /* rows a block owns */
#define FLASH_MMA_THREADS 128 /* four warps of 16 rows */
#define FLASH_MMA_LD(HS) ((HS) + 8)
/* the 16-byte pieces of a staged tile of N rows each thread moves */
#define FLASH_MMA_CHUNKS(N, HS) ((N) * (HS) / 8 / FLASH_MMA_THREADS)

/* Unrolls the loop that follows in device code (register arrays indexed
 * by its counter stay in registers); nothing under the emulator, where
 * g++ does not know the pragma. */
#if defined(__CUDA_ARCH__)
#define FLASH_MMA_UNROLL _Pragma("unroll")
#else
#define FLASH_MMA_UNROLL
#endif

/* The softmax's scale in base 2: exp(s / sqrt(hs)) = exp2(s * this), so a
 * kernel takes exp2f of one fused multiply-add; a natural-log value x
 * (the saved lse) is x * log2(e) in these units. */
#define FLASH_MMA_LOG2E 1.4426950408889634f
static inline __host__ __device__ float flash_mma_scale_log2(int hs)
{
	return FLASH_MMA_LOG2E / sqrtf((float)hs);
}

/* Loads rows 0 .. N - 1 of a tile of HS elements a row, rows `width`
 * elements apart from src (a head's columns of the packed qkv: src at
 * column head * HS of the tile's first row), into this thread's
 * registers r: 128-bit loads, consecutive threads reading consecutive 16
 * bytes of a row (coalesced); zeros for rows at or past `rows` (T less
 * the tile's first row), which are not read. src and width must keep
 * every piece 16-byte aligned (width a multiple of 8; the caller checks
 * the base pointer). Every thread takes part; store with flash_mma_store. */
template <class E, int N, int HS>
__device__ __forceinline__ void flash_mma_load(uint4 *r, const E *src, int64_t width,
					       int64_t rows)
{
	FLASH_MMA_UNROLL
	for (int i = 0; i < FLASH_MMA_CHUNKS(N, HS); i++) {
		int c = (int)threadIdx.x + i * FLASH_MMA_THREADS, row = c / (HS / 8);
		int col = c % (HS / 8) * 8;
		uint4 zero = { 0, 0, 0, 0 };

		r[i] = row < rows ? *(const uint4 *)(src + row * width + col) : zero;
	}
}

/* Stores what flash_mma_load<E, N, HS> loaded into the tile dst (N x HS,
 * row stride FLASH_MMA_LD(HS)); the caller orders it (__syncthreads)
 * against the tile's readers. */
template <class E, int N, int HS>
__device__ __forceinline__ void flash_mma_store(E *dst, const uint4 *r)
{
	FLASH_MMA_UNROLL
	for (int i = 0; i < FLASH_MMA_CHUNKS(N, HS); i++) {
		int c = (int)threadIdx.x + i * FLASH_MMA_THREADS, row = c / (HS / 8);
		int col = c % (HS / 8) * 8;

		*(uint4 *)(dst + row * FLASH_MMA_LD(HS) + col) = r[i];
	}
}

/* Issues this thread's cp.async copies of rows 0 .. N - 1 of a tile (as
 * flash_mma_load reads them: 16-byte pieces, consecutive threads
 * consecutive pieces of a row) into dst (row stride FLASH_MMA_LD(HS)), and
 * stores zeros for rows at or past `rows`, which are not read. The caller
 * commits the group, waits for it (cp_async_wait) and orders it
 * (__syncthreads) against the tile's readers; the buffer must be free
 * (its last readers past a barrier) when this is called. */
template <class E, int N, int HS>
__device__ __forceinline__ void flash_mma_copy(E *dst, const E *src, int64_t width, int64_t rows)
{
	FLASH_MMA_UNROLL
	for (int i = 0; i < FLASH_MMA_CHUNKS(N, HS); i++) {
		int c = (int)threadIdx.x + i * FLASH_MMA_THREADS, row = c / (HS / 8);
		int col = c % (HS / 8) * 8;
		E *d = dst + row * FLASH_MMA_LD(HS) + col;

		if (row < rows) {
			cp_async_16(d, src + row * width + col);
		} else {
			uint4 zero = { 0, 0, 0, 0 };

			*(uint4 *)d = zero;
		}
	}
}

/* This lane's row address for an ldmatrix x4 at (row0, col0) of a
 * row-major tile with row stride ld: matrix i = lane / 8 is rows row0 +
 * 8 (i % 2) .. + 7 at column col0 + 8 (i / 2). Non-transposed it is the
 * A fragment of the 16 x 16 block; .trans of a k x n block (keys by head
 * dims of V) it is the B fragments b[0], b[1] of the n-tile at col0 in
 * r[0], r[1] and of the n-tile at col0 + 8 in r[2], r[3]. */
template <class E>
__device__ __forceinline__ const E *flash_mma_at_a(const E *tile, int ld, int row0, int col0)
{
	int lane = (int)threadIdx.x % 32, i = lane / 8;

	return tile + (row0 + i % 2 * 8 + lane % 8) * ld + col0 + i / 2 * 8;
}

/* This lane's row address for a non-transposed ldmatrix x4 giving the B
 * fragments of X^T for a row-major X (rows are the product's n, columns
 * its k: K for S = Q K^T): rows row0 + 8 (i / 2) .. + 7 at column col0 +
 * 8 (i % 2), so r[0], r[1] are b[0], b[1] of the n-tile of rows row0 ..
 * row0 + 7 over k = col0 .. col0 + 15, and r[2], r[3] those of rows
 * row0 + 8 .. row0 + 15. */
template <class E>
__device__ __forceinline__ const E *flash_mma_at_bt(const E *tile, int ld, int row0, int col0)
{
	int lane = (int)threadIdx.x % 32, i = lane / 8;

	return tile + (row0 + i / 2 * 8 + lane % 8) * ld + col0 + i % 2 * 8;
}

/* The maximum and the sum of v over the four lanes of this lane's quad
 * (the lanes 4g .. 4g + 3 that hold rows g and g + 8 of an accumulator
 * tile); every lane of the warp takes part. */
__device__ __forceinline__ float flash_mma_quad_max(float v)
{
	v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
	return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float flash_mma_quad_sum(float v)
{
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

#endif /* WEFT_CUDA_FLASH_MMA_CUH */
