/* Flash attention backward on tensor cores through mma.sync (cuda_mma.cuh):
 * flash_attention_backward (weft/kernels.h) for BF16 and F16 storage at
 * head sizes 64 and 128, the score-like tiles S, dP, P and dS kept in
 * registers as the accumulators of one product and fed, rounded and
 * packed, as the A operand of the next. cuda_flash.cu sends every other
 * call to its scalar kernels. Deterministic: no atomics, every sum in a
 * fixed order.
 *
 * Two kernels, the dQ kernel launched first:
 *   - dQ (grid: query tiles, nh, B): a block owns BR = 64 query rows of
 *     one head, a group of 16 rows per warp. It stages its Q and dO rows,
 *     keeps their A fragments in registers and computes D = rowsum(dO * O)
 *     of its rows (O read once here, dO from the staged tile; written to
 *     D for the dK/dV kernel), then walks the key tiles up to its own:
 *     dP = dO V^T, and per 16 keys S = Q K^T, P = exp(S scale - lse),
 *     dS = P (dP - D) scale, dQ += dS K (K through ldmatrix .trans).
 *   - dK/dV (grid: key tiles, nkv, B): a block owns 64 keys of one kv
 *     head, 16 a warp group, K and V as A fragments in registers; over
 *     the query heads of the group in order, and for each over the query
 *     tiles from its own on: dP^T = V dO^T and per 16 queries
 *     S^T = K Q^T (Q and dO tiles read with ldmatrix), P^T from the lse,
 *     dV += P^T dO at once, dS^T = P^T (dP^T - D) scale, then
 *     dK += dS^T Q (dO and Q through ldmatrix .trans).
 * Each adds its F32 result into dqkv once (once per column half, below),
 * one rounding. The probabilities are taken in base 2 (exp2f; the scale
 * and the saved lse times log2 e).
 *
 * The gradient a warp accumulates is 16 rows by SLICE = 64 columns in F32
 * (32 registers a lane; dK and dV 64), beside the K and V (or Q and dO)
 * fragments of its rows (HS / 2 registers each) and the 64-column dP
 * tile (32). At head size 128 the gradient of all 128 columns would not
 * fit beside them in 255 registers, so the kernels take two passes over
 * their tiles, each accumulating (and adding into dqkv) one 64-column
 * half; each pass recomputes S and dP over the whole head. Tensor-core
 * FLOPs per pair of 64 x 64 tiles (and query head): dQ 3 products of
 * 2 x 64 x 64 x HS at head size 64 (dP, S, dQ), 5 at 128 (dP and S
 * twice); dK/dV 4 at 64 (dP^T, S^T, dV, dK), 6 at 128. On a diagonal
 * tile at head size 64 a warp skips the 16-column chunks the causal mask
 * empties (bwd_shape::SKIP), so a diagonal pair issues 10/16 of those; at
 * 128 diagonal pairs are issued in full.
 *
 * Tiles are staged in shared memory in the storage dtype, rows padded by
 * 16 bytes (ldmatrix reads 8 rows of 16 bytes from distinct banks), with
 * 128-bit loads, a thread's pieces consecutive along a row (coalesced;
 * cuda_flash_mma.cuh's flash_mma_load and flash_mma_store). At head size
 * 64 the next tiles' loads are issued into registers before the current
 * tile's products and stored after them; at 128 those 64 registers would
 * spill, and a tile is loaded and stored at the top of its step.
 *
 * Causal skipping: a query tile reads the key tiles up to its own and a
 * key tile the query tiles from its own on; only the diagonal tile and a
 * tile reaching past T are masked. The dQ kernel takes the longest query
 * tiles (the last) first; the dK/dV kernel's longest key tiles are its
 * first.
 *
 * The caller keeps the 16-byte alignment the 128-bit loads need (every
 * pointer; the row strides are multiples of 64 elements). */
#include <math.h>

#include "cuda_dev.cuh"
#include "cuda_flash.cuh"
#include "cuda_flash_mma.cuh"

#define BR FLASH_MMA_ROWS /* rows a block owns, and rows of a staged tile */
#define SLICE 64	  /* gradient columns accumulated in one pass */

/* The shape of a block at head size HS. */
template <int HS> struct bwd_shape {
	static const int LD = FLASH_MMA_LD(HS);	     /* shared row stride, elements */
	static const int PER = FLASH_MMA_CHUNKS(BR, HS); /* a thread's 16 bytes of a tile */
	static const int PASSES = HS / SLICE;		     /* over the gradient's columns */
	/* the next tiles' loads held in registers across the current tile's
	 * products: at head size 64 only (at 128 their 64 registers would
	 * spill the gradient) */
	static const bool AHEAD = HS == 64;
	/* on a diagonal tile a warp skips the 16-column chunks the causal mask
	 * empties: at head size 64 only (at 128 the run-time chunk bounds made
	 * ptxas spill 104-116 bytes in the dK/dV kernel) */
	static const bool SKIP = HS == 64;
};

/* Rows r0 .. r0 + BR - 1 of head `head` (rows of `width` elements, batch
 * row b) into this thread's registers v (flash_mma_load; zeros at or past
 * T). */
template <class E, int HS>
__device__ __forceinline__ void tile_fetch(uint4 *v, const E *src, int64_t b, int64_t T,
					   int64_t r0, int64_t width, int64_t head)
{
	flash_mma_load<E, BR, HS>(v, src + (b * T + r0) * width + head * HS, width, T - r0);
}

/* The A fragments of the warp's 16 rows at row0 of a shared tile (all HS
 * columns): a[kk] covers columns 16 kk .. 16 kk + 15. */
template <class E, int HS>
__device__ __forceinline__ void rows_frags(uint32_t (*a)[4], const E *tile, int row0)
{
	FLASH_MMA_UNROLL
	for (int kk = 0; kk < HS / 16; kk++)
		ldmatrix_x4(a[kk], flash_mma_at_a(tile, bwd_shape<HS>::LD, row0, 16 * kk));
}

/* acc[0..1] = a X^T over the head: the warp's 16 rows (fragments a) by
 * rows n0 .. n0 + 15 of the shared tile X (two 8-column D tiles). */
template <class E, int HS>
__device__ __forceinline__ void product_xt(float (*acc)[4], const uint32_t (*a)[4], const E *x,
					   int n0)
{
	FLASH_MMA_UNROLL
	for (int i = 0; i < 8; i++)
		acc[i / 4][i % 4] = 0.0f;
	FLASH_MMA_UNROLL
	for (int kk = 0; kk < HS / 16; kk++) {
		uint32_t bf[4];

		ldmatrix_x4(bf, flash_mma_at_bt(x, bwd_shape<HS>::LD, n0, 16 * kk));
		mma_16816<E>(acc[0], a[kk], bf);
		mma_16816<E>(acc[1], a[kk], bf + 2);
	}
}

/* acc[SLICE / 8][4] += a Y: a the A fragment of 16 rows by 16 (the rows
 * k0 .. k0 + 15 of the shared tile Y), Y's columns c0 .. c0 + SLICE - 1
 * read transposed. */
template <class E, int HS>
__device__ __forceinline__ void product_y(float (*acc)[4], const uint32_t a[4], const E *y,
					  int k0, int c0)
{
	FLASH_MMA_UNROLL
	for (int np = 0; np < SLICE / 16; np++) {
		uint32_t bf[4];

		ldmatrix_x4_trans(bf, flash_mma_at_a(y, bwd_shape<HS>::LD, k0, c0 + 16 * np));
		mma_16816<E>(acc[2 * np], a, bf);
		mma_16816<E>(acc[2 * np + 1], a, bf + 2);
	}
}

/* The A fragment of the 16 columns of two 8-column D tiles d[0], d[1],
 * rounded to E. */
template <class E> __device__ __forceinline__ void d_to_a(uint32_t a[4], const float (*d)[4])
{
	a[0] = mma_pack<E>(d[0][0], d[0][1]);
	a[1] = mma_pack<E>(d[0][2], d[0][3]);
	a[2] = mma_pack<E>(d[1][0], d[1][1]);
	a[3] = mma_pack<E>(d[1][2], d[1][3]);
}

/* The tile of dP (or dP^T): the warp's 16 rows (fragments a) by the 64
 * rows of the shared tile X, eight 8-column D tiles; only the 16-column
 * chunks c0 .. c1 (the others, which the causal mask empties, are left as
 * they are). */
template <class E, int HS>
__device__ __forceinline__ void product_dp(float (*dp)[4], const uint32_t (*a)[4], const E *x,
					   int c0, int c1)
{
	FLASH_MMA_UNROLL
	for (int c = 0; c < BR / 16; c++)
		if (c >= c0 && c <= c1)
			product_xt<E, HS>(dp + 2 * c, a, x, 16 * c);
}

/* P and dS of 16 columns (c0 ..) of the warp's 16-row score tiles, in
 * place: p (two 8-column D tiles) holds S and becomes P = exp2(S sl2 -
 * lse), zero where the query does not see the key or is past T (only
 * where mask); dp holds dP and becomes dS = P (dP - D) scale. qk(r, c, &q,
 * &k) names the query and key of local row r and column c, stats(r, c,
 * &lse, &D) the query's lse (base 2) and D. */
template <class QK, class Stats>
__device__ __forceinline__ void probs(float (*p)[4], float (*dp)[4], int c0, bool mask, int64_t T,
				      float sl2, float scale, QK qk, Stats stats)
{
	int lane = threadIdx.x % 32;

	FLASH_MMA_UNROLL
	for (int i = 0; i < 8; i++) {
		int r = lane / 4 + 8 * (i % 4 / 2), c = c0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1);
		int64_t q, k;
		float l, d, pv;

		qk(r, c, &q, &k);
		stats(r, c, &l, &d);
		pv = !mask || (q < T && k <= q) ? exp2f(p[i / 4][i % 4] * sl2 - l) : 0.0f;
		p[i / 4][i % 4] = pv;
		dp[i / 4][i % 4] = pv * (dp[i / 4][i % 4] - d) * scale;
	}
}

/* Per 16 columns of the warp's 16 x 64 score tiles, the chunks ch0 ..
 * ch1: S = a X^T (fragments a, rows of the shared tile X), P and dS
 * (probs; dS in dp's place), then acc += F Y, F the 16 columns of P
 * (p_operand) or dS as an A fragment and Y the shared tile's rows of
 * those columns (columns c0 ..). */
template <class E, int HS, class QK, class Stats>
__device__ __forceinline__ void score_chunks(float (*dp)[4], const uint32_t (*a)[4], const E *x,
					     bool p_operand, float (*acc)[4], const E *y, int c0,
					     int ch0, int ch1, bool mask, int64_t T, float sl2,
					     float scale, QK qk, Stats stats)
{
	FLASH_MMA_UNROLL
	for (int c = 0; c < BR / 16; c++) {
		float p[2][4];
		uint32_t f[4];

		if (c < ch0 || c > ch1)
			continue;
		product_xt<E, HS>(p, a, x, 16 * c);
		probs(p, dp + 2 * c, 16 * c, mask, T, sl2, scale, qk, stats);
		d_to_a<E>(f, p_operand ? p : dp + 2 * c);
		product_y<E, HS>(acc, f, y, 16 * c, c0);
	}
}

/* The top of step s (of `steps`) of a kernel's walk over tiles: once the
 * previous step's readers are done, the step's two tiles (fetched during
 * the previous step at head size 64, now at 128) stored into x and y and
 * put() run (per-row statistics), then the next step's loads issued.
 * fetch(s) loads step s's tiles into pre; every thread takes part. */
template <class E, int HS, class Fetch, class Put>
__device__ __forceinline__ void step_stage(E *x, E *y, uint4 (*pre)[bwd_shape<HS>::PER],
					   Fetch fetch, Put put, int64_t s, int64_t steps)
{
	__syncthreads(); /* the fragments and the previous tiles are read */
	if (!bwd_shape<HS>::AHEAD)
		fetch(s);
	flash_mma_store<E, BR, HS>(x, pre[0]);
	flash_mma_store<E, BR, HS>(y, pre[1]);
	put();
	__syncthreads();
	if (bwd_shape<HS>::AHEAD && s + 1 < steps)
		fetch(s + 1);
}

/* dst += acc (write: dst = 0 + acc, dst not read: the same bits as adding
 * into zeros), then acc = 0: the warp's 16 rows r0 .. (those below T) by
 * SLICE columns from col0 of a row (rows of `width` elements, batch row
 * b); one rounding to E. */
template <class E>
__device__ __forceinline__ void add_acc(E *dst, float (*acc)[4], int64_t b, int64_t T,
					int64_t r0, int64_t width, int64_t col0, int write)
{
	int lane = threadIdx.x % 32;

	FLASH_MMA_UNROLL
	for (int half = 0; half < 2; half++) {
		int64_t r = r0 + lane / 4 + 8 * half;

		FLASH_MMA_UNROLL
		for (int n = 0; n < SLICE / 8; n++) {
			if (r < T) {
				uint32_t *p = (uint32_t *)(dst + (b * T + r) * width + col0 + n * 8 +
							   2 * (lane % 4));
				float lo = 0.0f, hi = 0.0f;

				if (!write)
					mma_unpack<E>(*p, &lo, &hi);
				*p = mma_pack<E>(lo + acc[n][2 * half], hi + acc[n][2 * half + 1]);
			}
			acc[n][2 * half] = 0.0f;
			acc[n][2 * half + 1] = 0.0f;
		}
	}
}

/* grid (query tiles, nh, B), the last tile first. D[b][h][t] = rowsum(dO *
 * O) of the block's rows; dQ += dS K over the key tiles up to the block's,
 * added into dqkv. */
template <class E, int HS>
__global__ void __launch_bounds__(FLASH_MMA_THREADS)
flash_mma_dq_kernel(int64_t T, int64_t nh, int64_t nkv, float scale, const E *qkv, const E *out,
		    const float *lse, float *D, const E *dout, E *dqkv, int write)
{
#if MMA_DEVICE
	typedef bwd_shape<HS> S;
	__shared__ __align__(16) E ks[BR * S::LD], vs[BR * S::LD];
	__shared__ float ls[BR], dd[BR];
	int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (nh / nkv);
	int64_t L = (nh + 2 * nkv) * HS, C = nh * HS, tiles = (T + BR - 1) / BR;
	int64_t it = tiles - 1 - blockIdx.x, i0 = it * BR, steps = S::PASSES * (it + 1);
	int tid = threadIdx.x, lane = tid % 32, row0 = tid / 32 * 16;
	float sl2 = flash_mma_scale_log2(HS);
	uint32_t qf[HS / 16][4], of[HS / 16][4];
	float dq[SLICE / 8][4], lse_r[2], d_r[2];
	uint4 pre[2][S::PER];

	/* Q and dO rows of the block (in the K and V tiles' place) */
	tile_fetch<E, HS>(pre[0], qkv, b, T, i0, L, h);
	tile_fetch<E, HS>(pre[1], dout, b, T, i0, C, h);
	flash_mma_store<E, BR, HS>(ks, pre[0]);
	flash_mma_store<E, BR, HS>(vs, pre[1]);
	if (tid < BR) /* in base 2 */
		ls[tid] = i0 + tid < T ? lse[(b * nh + h) * T + i0 + tid] * FLASH_MMA_LOG2E : 0.0f;
	__syncthreads();
	{ /* D: two lanes a row, each HS / 2 columns */
		int r = tid / 2, col = tid % 2 * (HS / 2);
		float acc = 0.0f;

		if (i0 + r < T)
			for (int k = 0; k < HS / 2; k += 8) {
				uint4 o = *(const uint4 *)(out + (b * T + i0 + r) * C + h * HS + col + k);
				uint4 d = *(const uint4 *)(vs + r * S::LD + col + k);
				uint32_t ow[4] = { o.x, o.y, o.z, o.w }, dw[4] = { d.x, d.y, d.z, d.w };

				for (int e = 0; e < 4; e++) {
					float ol, oh, dl, dh;

					mma_unpack<E>(ow[e], &ol, &oh);
					mma_unpack<E>(dw[e], &dl, &dh);
					acc += dl * ol + dh * oh;
				}
			}
		acc += __shfl_xor_sync(0xffffffffu, acc, 1);
		if (tid % 2 == 0) {
			dd[r] = acc;
			if (i0 + r < T)
				D[(b * nh + h) * T + i0 + r] = acc;
		}
	}
	rows_frags<E, HS>(qf, ks, row0);
	rows_frags<E, HS>(of, vs, row0);
	__syncthreads();
	for (int half = 0; half < 2; half++) {
		lse_r[half] = ls[row0 + lane / 4 + 8 * half];
		d_r[half] = dd[row0 + lane / 4 + 8 * half];
	}
	for (int n = 0; n < SLICE / 8; n++)
		for (int i = 0; i < 4; i++)
			dq[n][i] = 0.0f;
	/* step s: key tile s % (it + 1) for the gradient's columns c0 =
	 * SLICE (s / (it + 1)); its K and V into pre */
	auto fetch = [&](int64_t s) {
		int64_t j0 = s % (it + 1) * BR;

		tile_fetch<E, HS>(pre[0], qkv, b, T, j0, L, nh + kvh);
		tile_fetch<E, HS>(pre[1], qkv, b, T, j0, L, nh + nkv + kvh);
	};
	if (S::AHEAD)
		fetch(0);
	for (int64_t s = 0; s < steps; s++) {
		int64_t jt = s % (it + 1), j0 = jt * BR;
		int c0 = (int)(s / (it + 1)) * SLICE;
		bool mask = jt == it; /* the diagonal tile, and the only one past T */
		/* on the diagonal the key chunks past the warp's rows are empty */
		int last = S::SKIP && mask ? row0 / 16 : BR / 16 - 1;
		float dp[BR / 8][4];

		step_stage<E, HS>(ks, vs, pre, fetch, [] {}, s, steps);
		product_dp<E, HS>(dp, of, vs, 0, last); /* dP = dO V^T */
		/* per 16 keys: S = Q K^T, P, dS, dQ += dS K */
		score_chunks<E, HS>(
			dp, qf, ks, false, dq, ks, c0, 0, last, mask, T, sl2, scale,
			[&](int r, int col, int64_t *q, int64_t *k) {
				*q = i0 + row0 + r;
				*k = j0 + col;
			},
			[&](int r, int, float *l, float *d) {
				*l = lse_r[r / 8];
				*d = d_r[r / 8];
			});
		if (jt == it)
			add_acc<E>(dqkv, dq, b, T, i0 + row0, L, h * HS + c0, write);
	}
#else
	__trap();
#endif
}

/* grid (key tiles, nkv, B). dK += dS^T Q and dV += P^T dO over the query
 * heads of kv head blockIdx.y's group in order and the query tiles from
 * the block's on, added into dqkv. D from the dQ kernel. */
template <class E, int HS>
__global__ void __launch_bounds__(FLASH_MMA_THREADS)
flash_mma_dkdv_kernel(int64_t T, int64_t nh, int64_t nkv, float scale, const E *qkv,
		      const float *lse, const float *D, const E *dout, E *dqkv, int write)
{
#if MMA_DEVICE
	typedef bwd_shape<HS> S;
	__shared__ __align__(16) E qs[BR * S::LD], os[BR * S::LD];
	__shared__ float ls[BR], dd[BR];
	int64_t b = blockIdx.z, kvh = blockIdx.y, grp = nh / nkv;
	int64_t L = (nh + 2 * nkv) * HS, C = nh * HS, tiles = (T + BR - 1) / BR;
	int64_t jt = blockIdx.x, j0 = jt * BR, nq = tiles - jt, pass = grp * nq;
	int64_t steps = S::PASSES * pass;
	int tid = threadIdx.x, row0 = tid / 32 * 16;
	float sl2 = flash_mma_scale_log2(HS), st;
	uint32_t kf[HS / 16][4], vf[HS / 16][4];
	float dk[SLICE / 8][4], dv[SLICE / 8][4];
	uint4 pre[2][S::PER];

	/* K and V rows of the block (in the Q and dO tiles' place) */
	tile_fetch<E, HS>(pre[0], qkv, b, T, j0, L, nh + kvh);
	tile_fetch<E, HS>(pre[1], qkv, b, T, j0, L, nh + nkv + kvh);
	flash_mma_store<E, BR, HS>(qs, pre[0]);
	flash_mma_store<E, BR, HS>(os, pre[1]);
	__syncthreads();
	rows_frags<E, HS>(kf, qs, row0);
	rows_frags<E, HS>(vf, os, row0);
	for (int n = 0; n < SLICE / 8; n++)
		for (int i = 0; i < 4; i++) {
			dk[n][i] = 0.0f;
			dv[n][i] = 0.0f;
		}
	/* step s: for the gradient's columns c0 = SLICE (s / pass), query head
	 * kvh grp + s % pass / nq, query tile jt + s % nq; its Q and dO into
	 * pre, a row's lse (base 2; threads 0-63) or D (64-127) into st */
	auto fetch = [&](int64_t s) {
		int64_t h = kvh * grp + s % pass / nq, i0 = (jt + s % nq) * BR;

		tile_fetch<E, HS>(pre[0], qkv, b, T, i0, L, h);
		tile_fetch<E, HS>(pre[1], dout, b, T, i0, C, h);
		st = 0.0f;
		if (i0 + tid % BR < T)
			st = tid < BR ? lse[(b * nh + h) * T + i0 + tid] * FLASH_MMA_LOG2E :
					D[(b * nh + h) * T + i0 + tid - BR];
	};
	if (S::AHEAD)
		fetch(0);
	for (int64_t s = 0; s < steps; s++) {
		int64_t i0 = (jt + s % nq) * BR;
		int c0 = (int)(s / pass) * SLICE;
		bool mask = i0 == j0 || i0 + BR > T;
		/* on the diagonal the query chunks before the warp's keys are empty */
		int first = S::SKIP && i0 == j0 ? row0 / 16 : 0;
		float dp[BR / 8][4];

		step_stage<E, HS>(
			qs, os, pre, fetch,
			[&] {
				if (tid < BR)
					ls[tid] = st;
				else
					dd[tid - BR] = st;
			},
			s, steps);
		product_dp<E, HS>(dp, vf, os, first, BR / 16 - 1); /* dP^T = V dO^T */
		/* per 16 queries: S^T = K Q^T, P^T, dS^T (in dp's place), dV += P^T dO */
		score_chunks<E, HS>(
			dp, kf, qs, true, dv, os, c0, first, BR / 16 - 1, mask, T, sl2, scale,
			[&](int r, int col, int64_t *q, int64_t *k) {
				*q = i0 + col;
				*k = j0 + row0 + r;
			},
			[&](int, int col, float *l, float *d) {
				*l = ls[col];
				*d = dd[col];
			});
		/* dK += dS^T Q */
		FLASH_MMA_UNROLL
		for (int c = 0; c < BR / 16; c++) {
			uint32_t a[4];

			if (c < first)
				continue;
			d_to_a<E>(a, dp + 2 * c);
			product_y<E, HS>(dk, a, qs, 16 * c, c0);
		}
		if (s % pass == pass - 1) {
			add_acc<E>(dqkv, dk, b, T, j0 + row0, L, (nh + kvh) * HS + c0, write);
			add_acc<E>(dqkv, dv, b, T, j0 + row0, L, (nh + nkv + kvh) * HS + c0, write);
		}
	}
#else
	__trap();
#endif
}

/* ---- host side ---- */

template <class E, int HS>
static weft_status mma_backward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				const void *out, const float *lse, float *D, const void *dout,
				void *dqkv, int write)
{
	void (*k_flash_mma_bwd_dq)(int64_t, int64_t, int64_t, float, const E *, const E *,
				   const float *, float *, const E *, E *, int) =
		flash_mma_dq_kernel<E, HS>;
	void (*k_flash_mma_bwd_dkdv)(int64_t, int64_t, int64_t, float, const E *, const float *,
				     const float *, const E *, E *, int) =
		flash_mma_dkdv_kernel<E, HS>;
	unsigned tiles = (unsigned)((T + BR - 1) / BR), threads = FLASH_MMA_THREADS;
	float scale = 1.0f / sqrtf((float)HS);
	weft_status ret;

	k_flash_mma_bwd_dq<<<dim3(tiles, (unsigned)nh, (unsigned)B), threads, 0, c->stream>>>(
		T, nh, nkv, scale, (const E *)qkv, (const E *)out, lse, D, (const E *)dout,
		(E *)dqkv, write);
	if ((ret = cuda_launched(c, name, SIZES_FLASH)))
		return ret;
	k_flash_mma_bwd_dkdv<<<dim3(tiles, (unsigned)nkv, (unsigned)B), threads, 0, c->stream>>>(
		T, nh, nkv, scale, (const E *)qkv, lse, (const float *)D, (const E *)dout,
		(E *)dqkv, write);
	return cuda_launched(c, name, SIZES_FLASH);
}

weft_status cuda_flash_tc_backward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				   int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				   const void *out, const float *lse, float *D, const void *dout,
				   void *dqkv, int write)
{
	if (dt == WEFT_BF16)
		return hs == 64 ? mma_backward<__nv_bfloat16, 64>(c, name, dt, B, T, nh, nkv, hs, qkv,
								  out, lse, D, dout, dqkv, write) :
				  mma_backward<__nv_bfloat16, 128>(c, name, dt, B, T, nh, nkv, hs,
								   qkv, out, lse, D, dout, dqkv,
								   write);
	return hs == 64 ? mma_backward<__half, 64>(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse, D,
						   dout, dqkv, write) :
			  mma_backward<__half, 128>(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse, D,
						    dout, dqkv, write);
}
