/* Fused causal attention backward on tensor cores: flash_attention_backward
 * (weft/kernels.h) for BF16 and F16 storage at head sizes 64 and 128,
 * through the CUDA C++ warp matrix API (nvcuda::wmma: 16x16x16 tiles of
 * the 16-bit inputs, F32 accumulators). The forward of these calls is
 * cuda_flash_mma_fwd.cu's (mma.sync, the softmax in registers), which also
 * holds cuda_flash_tc_takes. cuda_flash.cu sends every other call (F32,
 * other head sizes, a build without sm_80 code) to its scalar kernels,
 * which these match: the same packed layout, grouped-query heads,
 * log-sum-exp and backward passes.
 *
 * Layout: a block of two warps (64 threads) owns R = 32 rows of one head,
 * each warp 16 of them, and walks tiles of R rows of the other operand
 * staged in shared memory in the storage dtype (zeros past T). Products
 * of two 16-bit matrices run on tensor cores: scores S = Q K^T (K read as
 * a column-major B operand), dP = dO V^T, dV += P^T dO, dK += dS^T Q,
 * dQ += dS K. Everything else is F32: the accumulators, P and dS computed
 * from the F32 scores and the saved lse; P and dS are rounded to the
 * storage dtype only as operands of the next product. Causal block
 * skipping as the scalar kernels: a query tile reads the key tiles up to
 * its own, a key tile the query tiles from its own on.
 *
 * Portable WMMA: the code relies only on fill, load, store and mma; which
 * lane holds which element is never used. Element-wise work (the
 * probabilities, dS, the masks) goes through shared memory: a fragment is
 * stored, a thread per element works on it, and the next product loads it
 * back. Tiles start on 32-byte boundaries and every ldm
 * is a multiple of 16 bytes, as the API requires.
 *
 * Backward is deterministic (no atomics; every sum in a fixed order): the
 * dK/dV kernel a block per key tile, over the query heads of its kv
 * head's group in turn; the dQ kernel a block per query tile. Both add
 * their result into dqkv.
 *
 * bf16 WMMA needs sm_80: device code for an older architecture (a build
 * for one, CMAKE_CUDA_ARCHITECTURES) compiles to a trap, and
 * cuda_flash_tc_takes, asking the runtime which PTX version serves the
 * device, keeps such a device on the scalar kernels. */
#include <math.h>
#include <mma.h>

#include "cuda_dev.cuh"
#include "cuda_flash.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FLASH_TC_DEVICE 0
#else
#define FLASH_TC_DEVICE 1
#endif

namespace wmma = nvcuda::wmma;

#define ROWS 32    /* rows a block owns, and rows of a staged tile */
#define THREADS 64 /* two warps of 16 rows */

template <class E> using frag_a = wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major>;
/* B operand read from row-major memory as is (V, dO, Q, K by rows) */
template <class E> using frag_b = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major>;
/* B operand X^T read from a row-major X (K^T, Q^T, V^T, dO^T) */
template <class E> using frag_bt = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major>;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_acc;

__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <class E> __device__ __forceinline__ E from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v)
{
	return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half from_f<__half>(float v)
{
	return __float2half_rn(v);
}

/* Rows r0.. r0 + ROWS - 1 of head `head` (rows of `width` elements, batch row
 * b) into dst[ROWS][HS], zeros for rows at or past T; every thread takes
 * part. */
template <class E, int HS>
__device__ __forceinline__ void stage(E *dst, const E *src, int64_t b, int64_t T, int64_t r0,
				      int64_t width, int64_t head)
{
	for (int e = threadIdx.x; e < ROWS * HS; e += THREADS) {
		int r = e / HS, d = e % HS;

		dst[e] = r0 + r < T ? src[(b * T + r0 + r) * width + head * HS + d] : from_f<E>(0.0f);
	}
}

/* dst's rows r0.. (those below T) of head `head` += acc[ROWS][HS] (F32), one
 * rounding to the storage dtype; every thread takes part. */
template <class E, int HS>
__device__ __forceinline__ void add_rows(E *dst, const float *acc, int64_t b, int64_t T,
					 int64_t r0, int64_t width, int64_t head)
{
	for (int e = threadIdx.x; e < ROWS * HS; e += THREADS) {
		int r = e / HS, d = e % HS;

		if (r0 + r < T) {
			int64_t i = (b * T + r0 + r) * width + head * HS + d;

			dst[i] = from_f<E>(to_f(dst[i]) + acc[e]);
		}
	}
}

/* out[16 rows][ROWS] (F32, ldm ROWS) = a[16][HS] b^T, a and b row-major tiles
 * of ldm HS, b's ROWS rows: this warp's part of a score-like product. */
template <class E, int HS>
__device__ __forceinline__ void product_abt(float *out, const E *a, const E *b)
{
	frag_acc acc;
	frag_a<E> fa;
	frag_bt<E> fb;

	for (int n = 0; n < ROWS / 16; n++) {
		wmma::fill_fragment(acc, 0.0f);
		for (int kk = 0; kk < HS / 16; kk++) {
			wmma::load_matrix_sync(fa, a + kk * 16, HS);
			wmma::load_matrix_sync(fb, b + n * 16 * HS + kk * 16, HS);
			wmma::mma_sync(acc, fa, fb, acc);
		}
		wmma::store_matrix_sync(out + n * 16, acc, ROWS, wmma::mem_row_major);
	}
}

/* acc[HS / 16] (16 rows by HS) += a[16][ROWS] (ldm ROWS) b[ROWS][HS] (ldm HS). */
template <class E, int HS>
__device__ __forceinline__ void product_ab(frag_acc *acc, const E *a, const E *b)
{
	frag_a<E> fa;
	frag_b<E> fb;

	for (int d = 0; d < HS / 16; d++)
		for (int kk = 0; kk < ROWS / 16; kk++) {
			wmma::load_matrix_sync(fa, a + kk * 16, ROWS);
			wmma::load_matrix_sync(fb, b + kk * 16 * HS + d * 16, HS);
			wmma::mma_sync(acc[d], fa, fb, acc[d]);
		}
}

/* The probabilities and dS of a tile pair, element e of an ROWS x ROWS tile
 * whose rows are `rows` and columns `cols` (queries and keys, in either
 * order, as `keys_first` says): p = exp(s scale - lse), ds = p (dp - D)
 * scale, zero where the query does not see the key or is past T. */
template <class E>
__device__ __forceinline__ void probs(E *pt, E *dst, const float *s, const float *dp,
				      const float *ls, const float *ds, int64_t q0, int64_t k0,
				      int64_t T, float scale, bool keys_first)
{
	for (int e = threadIdx.x; e < ROWS * ROWS; e += THREADS) {
		int qi = keys_first ? e % ROWS : e / ROWS, kj = keys_first ? e / ROWS : e % ROWS;
		int64_t q = q0 + qi, key = k0 + kj;
		float p = 0.0f, dsv = 0.0f;

		if (q < T && key <= q) {
			p = expf(s[e] * scale - ls[qi]);
			dsv = p * (dp[e] - ds[qi]) * scale;
		}
		if (pt)
			pt[e] = from_f<E>(p);
		dst[e] = from_f<E>(dsv);
	}
}

/* The per-row lse and D of query rows q0.. of head h (0 past T). */
__device__ __forceinline__ void stage_stats(float *ls, float *ds, const float *lse,
					    const float *D, int64_t b, int64_t nh, int64_t h,
					    int64_t T, int64_t q0)
{
	int tid = threadIdx.x;

	if (tid < ROWS) {
		bool in = q0 + tid < T;

		ls[tid] = in ? lse[(b * nh + h) * T + q0 + tid] : 0.0f;
		ds[tid] = in ? D[(b * nh + h) * T + q0 + tid] : 0.0f;
	}
}

/* The backward kernels' shared memory, carved from BWD_BYTES(HS) bytes
 * 32-byte aligned: the q, dO, k and v tiles (ROWS x HS, storage dtype),
 * two F32 score-like tiles and two of the storage dtype (ROWS x ROWS),
 * and the staged lse and D (ROWS). Every tile starts on a 32-byte
 * boundary. */
#define BWD_BYTES(HS) (8 * ROWS * (HS) + 12 * ROWS * ROWS + 8 * ROWS)
template <class E> struct bwd_tiles {
	E *q, *dout, *k, *v;
	float *s, *dp;
	E *p, *ds;
	float *lse, *D;
};

template <class E, int HS> __device__ __forceinline__ bwd_tiles<E> bwd_carve(unsigned char *raw)
{
	bwd_tiles<E> t;

	t.q = (E *)raw;
	t.dout = t.q + ROWS * HS;
	t.k = t.dout + ROWS * HS;
	t.v = t.k + ROWS * HS;
	t.s = (float *)(t.v + ROWS * HS);
	t.dp = t.s + ROWS * ROWS;
	t.p = (E *)(t.dp + ROWS * ROWS);
	t.ds = t.p + ROWS * ROWS;
	t.lse = (float *)(t.ds + ROWS * ROWS);
	t.D = t.lse + ROWS;
	return t;
}

/* Adds the block's result, a warp's 16 rows at r0 in its fragments acc
 * (ROWS x HS in all), into dst's rows row0.. of head `head`, staged as
 * F32 in `stage` (ROWS x HS floats of shared memory no thread reads any
 * more); every thread takes part. */
template <class E, int HS>
__device__ __forceinline__ void add_frags(E *dst, float *stage, const frag_acc *acc, int r0,
					  int64_t b, int64_t T, int64_t row0, int64_t width,
					  int64_t head)
{
	__syncthreads();
	for (int d = 0; d < HS / 16; d++)
		wmma::store_matrix_sync(stage + r0 * HS + d * 16, acc[d], HS, wmma::mem_row_major);
	__syncthreads();
	add_rows<E, HS>(dst, stage, b, T, row0, width, head);
}

/* grid (key tiles, nkv, B): a warp 16 keys of kv head kvh; over the
 * group's query heads in turn and the query tiles from the key tile's on:
 * S^T = k q^T, dP^T = v dO^T, then dV += P^T dO and dK += dS^T q in
 * fragments. Adds dk and dv into dqkv. */
template <class E, int HS>
__global__ void __launch_bounds__(THREADS)
flash_tc_dkdv_kernel(int64_t T, int64_t nh, int64_t nkv, float scale, const E *qkv,
		     const float *lse, const float *D, const E *dout, E *dqkv)
{
#if FLASH_TC_DEVICE
	__shared__ __align__(32) unsigned char raw[BWD_BYTES(HS)];
	bwd_tiles<E> t = bwd_carve<E, HS>(raw);
	int64_t b = blockIdx.z, kvh = blockIdx.y, g = nh / nkv;
	int64_t L = (nh + 2 * nkv) * HS, C = nh * HS, j0 = (int64_t)blockIdx.x * ROWS;
	int r0 = threadIdx.x / 32 * 16;
	frag_acc dk[HS / 16], dv[HS / 16];

	for (int d = 0; d < HS / 16; d++) {
		wmma::fill_fragment(dk[d], 0.0f);
		wmma::fill_fragment(dv[d], 0.0f);
	}
	stage<E, HS>(t.k, qkv, b, T, j0, L, nh + kvh);
	stage<E, HS>(t.v, qkv, b, T, j0, L, nh + nkv + kvh);
	for (int64_t m = 0; m < g; m++) {
		int64_t h = kvh * g + m;

		for (int64_t i0 = j0; i0 < T; i0 += ROWS) {
			__syncthreads(); /* the previous tiles are read */
			stage<E, HS>(t.q, qkv, b, T, i0, L, h);
			stage<E, HS>(t.dout, dout, b, T, i0, C, h);
			stage_stats(t.lse, t.D, lse, D, b, nh, h, T, i0);
			__syncthreads();
			/* S^T and dP^T: this warp's keys by the tile's queries */
			product_abt<E, HS>(t.s + r0 * ROWS, t.k + r0 * HS, t.q);
			product_abt<E, HS>(t.dp + r0 * ROWS, t.v + r0 * HS, t.dout);
			__syncthreads();
			probs<E>(t.p, t.ds, t.s, t.dp, t.lse, t.D, i0, j0, T, scale, true);
			__syncthreads();
			product_ab<E, HS>(dv, t.p + r0 * ROWS, t.dout);
			product_ab<E, HS>(dk, t.ds + r0 * ROWS, t.q);
		}
	}
	/* staged over the q and dO tiles */
	add_frags<E, HS>(dqkv, (float *)t.q, dk, r0, b, T, j0, L, nh + kvh);
	add_frags<E, HS>(dqkv, (float *)t.q, dv, r0, b, T, j0, L, nh + nkv + kvh);
#else
	__trap();
#endif
}

/* grid (query tiles, nh, B): a warp 16 query rows; over the key tiles up
 * to the query tile's: S = q k^T, dP = dO v^T, dQ += dS k in fragments.
 * Adds dq into dqkv. */
template <class E, int HS>
__global__ void __launch_bounds__(THREADS)
flash_tc_dq_kernel(int64_t T, int64_t nh, int64_t nkv, float scale, const E *qkv,
		   const float *lse, const float *D, const E *dout, E *dqkv)
{
#if FLASH_TC_DEVICE
	__shared__ __align__(32) unsigned char raw[BWD_BYTES(HS)];
	bwd_tiles<E> t = bwd_carve<E, HS>(raw);
	int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (nh / nkv);
	int64_t L = (nh + 2 * nkv) * HS, C = nh * HS;
	int64_t i0 = (int64_t)blockIdx.x * ROWS, kend = i0 + ROWS < T ? i0 + ROWS : T;
	int r0 = threadIdx.x / 32 * 16;
	frag_acc dq[HS / 16];

	for (int d = 0; d < HS / 16; d++)
		wmma::fill_fragment(dq[d], 0.0f);
	stage<E, HS>(t.q, qkv, b, T, i0, L, h);
	stage<E, HS>(t.dout, dout, b, T, i0, C, h);
	stage_stats(t.lse, t.D, lse, D, b, nh, h, T, i0);
	for (int64_t j0 = 0; j0 < kend; j0 += ROWS) {
		__syncthreads(); /* the previous K and V are read */
		stage<E, HS>(t.k, qkv, b, T, j0, L, nh + kvh);
		stage<E, HS>(t.v, qkv, b, T, j0, L, nh + nkv + kvh);
		__syncthreads();
		/* S and dP: this warp's queries by the tile's keys */
		product_abt<E, HS>(t.s + r0 * ROWS, t.q + r0 * HS, t.k);
		product_abt<E, HS>(t.dp + r0 * ROWS, t.dout + r0 * HS, t.v);
		__syncthreads();
		probs<E>((E *)NULL, t.ds, t.s, t.dp, t.lse, t.D, i0, j0, T, scale, false);
		__syncthreads();
		product_ab<E, HS>(dq, t.ds + r0 * ROWS, t.k);
	}
	/* staged over the k and v tiles */
	add_frags<E, HS>(dqkv, (float *)t.k, dq, r0, b, T, i0, L, h);
#else
	__trap();
#endif
}

/* ---- host side ---- */

template <class E, int HS>
static weft_status tc_backward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
			       int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
			       const float *lse, const float *D, const void *dout, void *dqkv)
{
	void (*k_flash_tc_bwd_dkdv)(int64_t, int64_t, int64_t, float, const E *, const float *,
				    const float *, const E *, E *) = flash_tc_dkdv_kernel<E, HS>;
	void (*k_flash_tc_bwd_dq)(int64_t, int64_t, int64_t, float, const E *, const float *,
				  const float *, const E *, E *) = flash_tc_dq_kernel<E, HS>;
	unsigned tiles = (unsigned)((T + ROWS - 1) / ROWS);
	float scale = 1.0f / sqrtf((float)HS);
	weft_status ret;

	k_flash_tc_bwd_dkdv<<<dim3(tiles, (unsigned)nkv, (unsigned)B), THREADS, 0, c->stream>>>(
		T, nh, nkv, scale, (const E *)qkv, lse, D, (const E *)dout, (E *)dqkv);
	if ((ret = cuda_launched(c, name, SIZES_FLASH)))
		return ret;
	k_flash_tc_bwd_dq<<<dim3(tiles, (unsigned)nh, (unsigned)B), THREADS, 0, c->stream>>>(
		T, nh, nkv, scale, (const E *)qkv, lse, D, (const E *)dout, (E *)dqkv);
	return cuda_launched(c, name, SIZES_FLASH);
}

weft_status cuda_flash_tc_backward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				   int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				   const float *lse, const float *D, const void *dout, void *dqkv)
{
	if (dt == WEFT_BF16)
		return hs == 64 ? tc_backward<__nv_bfloat16, 64>(c, name, dt, B, T, nh, nkv, hs, qkv,
								 lse, D, dout, dqkv) :
				  tc_backward<__nv_bfloat16, 128>(c, name, dt, B, T, nh, nkv, hs,
								  qkv, lse, D, dout, dqkv);
	return hs == 64 ? tc_backward<__half, 64>(c, name, dt, B, T, nh, nkv, hs, qkv, lse, D, dout,
						  dqkv) :
			  tc_backward<__half, 128>(c, name, dt, B, T, nh, nkv, hs, qkv, lse, D, dout,
						   dqkv);
}
