/* Fused causal attention forward on tensor cores (mma.sync m16n8k16,
 * cuda_mma.cuh) with the softmax in registers: flash_attention_forward
 * (weft/kernels.h) for BF16 and F16 storage at head sizes 64 and 128, the
 * calls cuda_flash_tc_takes admits. What it computes is the scalar
 * kernel's (cuda_flash.cu): on the packed qkv (B, T, (nh + 2 nkv) hs) with
 * query head h reading kv head h / (nh / nkv), out = softmax(q k^T /
 * sqrt(hs) + causal mask) v, rounded once to the dtype, and lse (F32,
 * (B, nh, T)) = ln sum_j<=t exp(q_t k_j / sqrt(hs)). Scores, the running
 * max and sum, and the output accumulator are F32; the probabilities are
 * rounded to the dtype only as the A operand of P V (the sum is of the
 * unrounded ones).
 *
 * Layout (cuda_flash_mma.cuh's tiles): a block of four warps owns 64
 * query rows of one head, each warp 16. The warp's Q fragments are loaded
 * once into registers (ldmatrix from a staged tile). The block walks the
 * key/value tiles from the first to its own (causal: the tiles past the
 * diagonal are skipped, those that cross it masked), tiles of 64 keys at
 * head size 64 and of 32 at 128 (fwd_tile: registers and shared
 * memory). Tiles sit
 * in shared memory with padded rows (conflict-free ldmatrix), two buffers
 * of K and V: the next tile's cp.async copies (coalesced 16-byte pieces)
 * are issued before the current tile's math and waited for after it, so
 * each load's latency is covered by a whole tile of products (two
 * __syncthreads a tile). Per tile, each warp:
 *   S = Q K^T: 16 x n scores in n / 8 accumulator tiles, K read by
 *     non-transposed ldmatrix as the B operand;
 *   the online softmax in registers: a lane holds two rows (g and g + 8
 *     of its quad, cuda_mma.cuh's C layout), reduces the tile's max over
 *     its elements of each, then over its quad (two __shfl_xor_sync);
 *     p = exp2(s * scale * log2 e - m), the scale folded into one FMA;
 *     the old sum and O are rescaled by exp2(m_old - m_new); each lane
 *     sums its own p and the quad's sums are added once at the end;
 *   O += P V: the score accumulators rounded and packed two by two are
 *     the A fragments of P (no trip through shared memory), V read by
 *     ldmatrix .trans as the B operand; O is 16 x hs, hs / 2 F32 a lane.
 * A warp whose 16 rows all precede a tile's keys (hs 128's last tile, for
 * warps 0 and 1) skips its products. O goes out through shared memory as
 * 128-bit coalesced stores; lse from one lane a quad. Rows past T: the
 * staged rows of Q, K and V past T are zeros (their scores finite, their
 * values 0), and no row past T is stored; T need not be a multiple of 64.
 *
 * Scheduling: grid (nh, B, query tiles) with the query tile counted from
 * the last, so the longest blocks of every head start first and the short
 * ones fill the tail (causal load balance).
 *
 * Requires: sm_80 or later (mma.sync with bf16; older device code traps
 * and cuda_flash_tc_takes keeps such devices off it) and qkv and out
 * 16-byte aligned (the 16-byte copies, loads and stores; cuda_flash.cu
 * sends other pointers to the scalar kernels). Per pair of a query tile
 * and a key tile of n keys it issues 2 x 2 x 64 x n x hs tensor-core FLOPs
 * (S and P V, masked and padding elements included; a warp that skips a
 * tile a quarter less). */
#include <math.h>

#include "cuda_dev.cuh"
#include "cuda_flash.cuh"
#include "cuda_flash_mma.cuh"

/* Keys (and values) of a staged tile: 64 at head size 64; 32 at 128,
 * which keeps the score tile of a lane at 16 registers (Q's 32, O's 64
 * and the rest fit in 255 without spills) and the two buffers of K and V
 * in 34 KiB (64 keys would need 68 KiB, past the 48 KiB of static shared
 * memory). */
template <int HS> struct fwd_tile {
	static constexpr int N = HS == 128 ? 32 : 64;
};

/* grid (nh, B, query tiles from z0 on); `tiles` query tiles in all, the
 * block's counted from the last. scale_log2 = flash_mma_scale_log2(HS). */
template <class E, int HS>
__global__ void __launch_bounds__(FLASH_MMA_THREADS)
flash_mma_fwd_kernel(int64_t T, int64_t nh, int64_t nkv, int64_t tiles, int64_t z0,
		     float scale_log2, const E *qkv, E *out, float *lse)
{
#if MMA_DEVICE
	constexpr int M = FLASH_MMA_ROWS, N = fwd_tile<HS>::N, LD = FLASH_MMA_LD(HS);
	constexpr int KD = HS / 16; /* k-steps of S over the head dim */
	constexpr int NS = N / 8;   /* n-tiles of S over the tile's keys */
	constexpr int KP = N / 16;  /* k-steps of P V over the tile's keys */
	constexpr int NO = HS / 8;  /* n-tiles of O over the head dim */
	/* two buffers of a K tile and a V tile (N rows each); Q's 64 rows
	 * staged in the second at the start, O's in the first at the end */
	__shared__ __align__(16) E kv[4 * N * LD];
	int64_t h = blockIdx.x, b = blockIdx.y, kvh = h / (nh / nkv);
	int64_t i0 = (tiles - 1 - (z0 + (int64_t)blockIdx.z)) * M, L = (nh + 2 * nkv) * HS;
	const E *kp = qkv + b * T * L + (nh + kvh) * HS, *vp = kp + nkv * HS;
	int lane = (int)threadIdx.x % 32, w0 = (int)threadIdx.x / 32 * 16;
	int g = lane / 4, t = lane % 4;
	int64_t kend = i0 + M < T ? i0 + M : T; /* keys the block's rows see: 0 .. kend - 1 */
	uint32_t qa[KD][4];
	float o[NO][4], s[NS][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f };

	/* the first K and V tiles in flight while Q goes to registers */
	flash_mma_copy<E, N, HS>(kv, kp, L, T);
	flash_mma_copy<E, N, HS>(kv + N * LD, vp, L, T);
	cp_async_commit();
	{
		uint4 q[FLASH_MMA_CHUNKS(M, HS)];

		flash_mma_load<E, M, HS>(q, qkv + (b * T + i0) * L + h * HS, L, T - i0);
		flash_mma_store<E, M, HS>(kv + 2 * N * LD, q);
	}
	__syncthreads();
	FLASH_MMA_UNROLL
	for (int kd = 0; kd < KD; kd++)
		ldmatrix_x4(qa[kd], flash_mma_at_a(kv + 2 * N * LD, LD, w0, kd * 16));
	FLASH_MMA_UNROLL
	for (int n = 0; n < NO; n++)
		o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

	for (int64_t j0 = 0; j0 < kend; j0 += N) {
		const E *ks = kv + (j0 / N % 2) * 2 * N * LD, *vs = ks + N * LD;
		bool more = j0 + N < kend;
		/* the tile holds keys past some of the warp's rows; past all
		 * of them (hs 128's last tile for warps 0 and 1) it adds nothing */
		bool diag = j0 + N - 1 > i0 + w0, skip = j0 > i0 + w0 + 15;

		__syncthreads(); /* the other buffer's readers (Q's, the last tile's) are done */
		if (more) { /* the next tiles in flight during this one's products */
			E *next = kv + ((j0 / N + 1) % 2) * 2 * N * LD;

			flash_mma_copy<E, N, HS>(next, kp + (j0 + N) * L, L, T - j0 - N);
			flash_mma_copy<E, N, HS>(next + N * LD, vp + (j0 + N) * L, L, T - j0 - N);
			cp_async_commit();
			cp_async_wait<1>();
		} else {
			cp_async_wait<0>();
		}
		__syncthreads(); /* this tile's K and V visible */
		if (skip)
			continue;
		/* S = Q K^T */
		FLASH_MMA_UNROLL
		for (int n = 0; n < NS; n++)
			s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
		FLASH_MMA_UNROLL
		for (int kd = 0; kd < KD; kd++) {
			FLASH_MMA_UNROLL
			for (int n = 0; n < NS; n += 2) {
				uint32_t kb[4];

				ldmatrix_x4(kb, flash_mma_at_bt(ks, LD, n * 8, kd * 16));
				mma_16816<E>(s[n], qa[kd], kb);
				mma_16816<E>(s[n + 1], qa[kd], kb + 2);
			}
		}
		/* the online softmax of rows g (e = 0, 1) and g + 8 (e = 2, 3) */
		if (diag) { /* key j0 + column > query i0 + row */
			int d = (int)(i0 - j0) + w0 + g;

			FLASH_MMA_UNROLL
			for (int n = 0; n < NS; n++)
				FLASH_MMA_UNROLL
				for (int e = 0; e < 4; e++)
					if (n * 8 + 2 * t + (e & 1) > d + (e >> 1) * 8)
						s[n][e] = -INFINITY;
		}
		FLASH_MMA_UNROLL
		for (int r = 0; r < 2; r++) {
			float mt = -INFINITY, corr;

			FLASH_MMA_UNROLL
			for (int n = 0; n < NS; n++)
				mt = fmaxf(mt, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
			/* m stays finite: every row sees key 0 on the first tile;
			 * a row a later tile masks whole keeps its m (corr 1, p 0) */
			mt = fmaxf(m[r], flash_mma_quad_max(mt) * scale_log2);
			corr = exp2f(m[r] - mt); /* 0 on the first tile (m = -inf) */
			m[r] = mt;
			l[r] *= corr;
			FLASH_MMA_UNROLL
			for (int n = 0; n < NO; n++) {
				o[n][2 * r] *= corr;
				o[n][2 * r + 1] *= corr;
			}
			FLASH_MMA_UNROLL
			for (int n = 0; n < NS; n++)
				FLASH_MMA_UNROLL
				for (int e = 2 * r; e < 2 * r + 2; e++) {
					s[n][e] = exp2f(fmaf(s[n][e], scale_log2, -mt));
					l[r] += s[n][e];
				}
		}
		/* O += P V, P's A fragments packed from S's accumulators */
		FLASH_MMA_UNROLL
		for (int k = 0; k < KP; k++) {
			uint32_t pa[4] = { mma_pack<E>(s[2 * k][0], s[2 * k][1]),
					   mma_pack<E>(s[2 * k][2], s[2 * k][3]),
					   mma_pack<E>(s[2 * k + 1][0], s[2 * k + 1][1]),
					   mma_pack<E>(s[2 * k + 1][2], s[2 * k + 1][3]) };

			FLASH_MMA_UNROLL
			for (int n = 0; n < NO; n += 2) {
				uint32_t vb[4];

				ldmatrix_x4_trans(vb, flash_mma_at_a(vs, LD, k * 16, n * 8));
				mma_16816<E>(o[n], pa, vb);
				mma_16816<E>(o[n + 1], pa, vb + 2);
			}
		}
	}

	/* out = O / l through the first buffer: each warp its 16 rows, then
	 * 128-bit rows to global */
	__syncthreads(); /* the last tile is read by every warp */
	FLASH_MMA_UNROLL
	for (int r = 0; r < 2; r++) {
		float inv;

		l[r] = flash_mma_quad_sum(l[r]);
		inv = 1.0f / l[r];
		FLASH_MMA_UNROLL
		for (int n = 0; n < NO; n++) {
			uint32_t v = mma_pack<E>(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);

			memcpy((void *)(kv + (w0 + g + 8 * r) * LD + n * 8 + 2 * t), &v, 4);
		}
		if (t == 0 && i0 + w0 + g + 8 * r < T)
			lse[(b * nh + h) * T + i0 + w0 + g + 8 * r] =
				m[r] / FLASH_MMA_LOG2E + logf(l[r]);
	}
	__syncthreads();
	FLASH_MMA_UNROLL
	for (int i = 0; i < FLASH_MMA_CHUNKS(M, HS); i++) {
		int c = (int)threadIdx.x + i * FLASH_MMA_THREADS, row = c / (HS / 8);
		int col = c % (HS / 8) * 8;

		if (i0 + row < T)
			*(uint4 *)(out + (b * T + i0 + row) * nh * HS + h * HS + col) =
				*(const uint4 *)(kv + row * LD + col);
	}
#else
	__trap();
#endif
}

/* ---- host side ---- */

int cuda_flash_tc_takes(cuda_ctx *c, weft_dtype dt, int64_t hs)
{
	cudaFuncAttributes a;

	if ((dt != WEFT_BF16 && dt != WEFT_F16) || (hs != 64 && hs != 128))
		return 0;
	if (c->flash_tc)
		return c->flash_tc == 2;
	/* the PTX version the device's code of this library was built from,
	 * asked once per context (the context's device is current here) */
	if (cudaFuncGetAttributes(&a, (const void *)flash_mma_fwd_kernel<__nv_bfloat16, 64>) !=
	    cudaSuccess) {
		cudaGetLastError(); /* no code for this device: not the next launch's error */
		c->flash_tc = 1;
		return 0;
	}
	c->flash_tc = a.ptxVersion >= 80 ? 2 : 1;
	return c->flash_tc == 2;
}

template <class E, int HS>
static weft_status mma_forward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B, int64_t T,
			       int64_t nh, int64_t nkv, int64_t hs, const void *qkv, void *out,
			       float *lse)
{
	void (*k_flash_mma_fwd)(int64_t, int64_t, int64_t, int64_t, int64_t, float, const E *, E *,
				float *) = flash_mma_fwd_kernel<E, HS>;
	int64_t tiles = (T + FLASH_MMA_ROWS - 1) / FLASH_MMA_ROWS;
	weft_status ret = WEFT_OK;

	/* gridDim.z holds at most 65535 query tiles a launch */
	for (int64_t z0 = 0; z0 < tiles && !ret; z0 += 65535) {
		dim3 grid((unsigned)nh, (unsigned)B, (unsigned)(tiles - z0 < 65535 ? tiles - z0 : 65535));

		k_flash_mma_fwd<<<grid, FLASH_MMA_THREADS, 0, c->stream>>>(
			T, nh, nkv, tiles, z0, flash_mma_scale_log2(HS), (const E *)qkv, (E *)out,
			lse);
		ret = cuda_launched(c, name, SIZES_FLASH);
	}
	return ret;
}

weft_status cuda_flash_tc_forward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				  int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				  void *out, float *lse)
{
	if (dt == WEFT_BF16)
		return hs == 64 ? mma_forward<__nv_bfloat16, 64>(c, name, dt, B, T, nh, nkv, hs, qkv,
								 out, lse) :
				  mma_forward<__nv_bfloat16, 128>(c, name, dt, B, T, nh, nkv, hs,
								  qkv, out, lse);
	return hs == 64 ? mma_forward<__half, 64>(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse) :
			  mma_forward<__half, 128>(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse);
}
