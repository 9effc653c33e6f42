/* Fused causal attention on tensor cores: flash_attention_forward
 * (weft/kernels.h) for BF16 and F16 storage at head sizes 64 and 128,
 * through the CUDA C++ warp matrix API (nvcuda::wmma: 16x16x16 tiles of
 * the 16-bit inputs, F32 accumulators). cuda_flash.cu sends every other
 * call (F32, other head sizes, a build without sm_80 code) to its scalar
 * kernels, which these match: the same packed layout, grouped-query
 * heads and log-sum-exp. The backward on tensor cores is
 * cuda_flash_mma_bwd.cu's.
 *
 * Layout: a block of two warps (64 threads) owns R = 32 rows of one head,
 * each warp 16 of them, and walks tiles of R rows of the other operand
 * staged in shared memory in the storage dtype (zeros past T). Products
 * of two 16-bit matrices run on tensor cores: scores S = Q K^T (K read as
 * a column-major B operand) and O += P V. Everything else is F32: the
 * softmax statistics (running max and sum per row, kept in shared
 * memory), the output accumulator, P computed from the F32 scores; P is
 * rounded to the storage dtype only as the operand of the next product
 * (the sum l is of the unrounded P, so lse is the F32 one). Causal block
 * skipping as the scalar kernels: a query tile reads the key tiles up to
 * its own.
 *
 * Portable WMMA: the code relies only on fill, load, store and mma; which
 * lane holds which element is never used. Row-wise work (the online
 * softmax, rescaling O, the masks) goes through shared memory: a fragment
 * is stored, a thread per row (or per element) works on it, and the next
 * product loads it back. Tiles start on 32-byte boundaries and every ldm
 * is a multiple of 16 bytes, as the API requires.
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

/* grid (query tiles, nh, B). out = softmax(q k^T scale + causal mask) v;
 * lse[b][h][t] = max + log(sum of exp(score - max)). Shared: K and V
 * tiles, O (F32), S (F32), P, and per row the max, sum and correction. */
template <class E, int HS>
__global__ void __launch_bounds__(THREADS)
flash_tc_fwd_kernel(int64_t T, int64_t nh, int64_t nkv, float scale, const E *qkv, E *out,
		    float *lse)
{
#if FLASH_TC_DEVICE
	__shared__ __align__(32) unsigned char raw[8 * ROWS * HS + 6 * ROWS * ROWS + 8 * ROWS];
	E *ks = (E *)raw, *vs = ks + ROWS * HS;
	float *os = (float *)(vs + ROWS * HS), *ss = os + ROWS * HS;
	E *ps = (E *)(ss + ROWS * ROWS);
	float *rm = (float *)(ps + ROWS * ROWS), *rl = rm + ROWS;
	int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (nh / nkv);
	int64_t L = (nh + 2 * nkv) * HS, C = nh * HS;
	int64_t i0 = (int64_t)blockIdx.x * ROWS, kend = i0 + ROWS < T ? i0 + ROWS : T;
	int tid = threadIdx.x, r0 = tid / 32 * 16;
	frag_a<E> qa[HS / 16];
	frag_acc acc[HS / 16];

	stage<E, HS>(ks, qkv, b, T, i0, L, h);
	for (int e = tid; e < ROWS * HS; e += THREADS)
		os[e] = 0.0f;
	if (tid < ROWS) {
		rm[tid] = -INFINITY;
		rl[tid] = 0.0f;
	}
	__syncthreads();
	for (int kk = 0; kk < HS / 16; kk++)
		wmma::load_matrix_sync(qa[kk], ks + r0 * HS + kk * 16, HS);
	for (int64_t j0 = 0; j0 < kend; j0 += ROWS) {
		__syncthreads(); /* Q's fragments and the previous K and V are read */
		stage<E, HS>(ks, qkv, b, T, j0, L, nh + kvh);
		stage<E, HS>(vs, qkv, b, T, j0, L, nh + nkv + kvh);
		__syncthreads();
		/* S = q k^T, this warp's rows by the tile's keys */
		for (int n = 0; n < ROWS / 16; n++) {
			frag_bt<E> kb;

			wmma::fill_fragment(acc[0], 0.0f);
			for (int kk = 0; kk < HS / 16; kk++) {
				wmma::load_matrix_sync(kb, ks + n * 16 * HS + kk * 16, HS);
				wmma::mma_sync(acc[0], qa[kk], kb, acc[0]);
			}
			wmma::store_matrix_sync(ss + r0 * ROWS + n * 16, acc[0], ROWS, wmma::mem_row_major);
		}
		__syncthreads();
		if (tid < ROWS) { /* a thread a row: the online softmax */
			int64_t t = i0 + tid;
			int n = t >= T ? 0 : t + 1 - j0 < ROWS ? (int)(t + 1 - j0) : ROWS; /* keys <= t */
			float m = rm[tid], mt = m, l, corr;

			for (int j = 0; j < n; j++)
				mt = fmaxf(mt, ss[tid * ROWS + j] * scale);
			corr = n ? expf(m - mt) : 1.0f; /* 0 on the first tile (m = -inf) */
			l = rl[tid] * corr;
			for (int j = 0; j < ROWS; j++) {
				float p = j < n ? expf(ss[tid * ROWS + j] * scale - mt) : 0.0f;

				l += p;
				ps[tid * ROWS + j] = from_f<E>(p);
			}
			rm[tid] = n ? mt : m;
			rl[tid] = l;
			for (int d = 0; d < HS; d++)
				os[tid * HS + d] *= corr;
		}
		__syncthreads();
		/* O += P V */
		for (int d = 0; d < HS / 16; d++)
			wmma::load_matrix_sync(acc[d], os + r0 * HS + d * 16, HS, wmma::mem_row_major);
		product_ab<E, HS>(acc, ps + r0 * ROWS, vs);
		for (int d = 0; d < HS / 16; d++)
			wmma::store_matrix_sync(os + r0 * HS + d * 16, acc[d], HS, wmma::mem_row_major);
	}
	__syncthreads();
	for (int e = tid; e < ROWS * HS; e += THREADS) {
		int r = e / HS, d = e % HS;

		if (i0 + r < T)
			out[(b * T + i0 + r) * C + h * HS + d] = from_f<E>(os[e] / rl[r]);
	}
	if (tid < ROWS && i0 + tid < T)
		lse[(b * nh + h) * T + i0 + tid] = rm[tid] + logf(rl[tid]);
#else
	__trap();
#endif
}

/* ---- host side ---- */

int cuda_flash_tc_takes(weft_dtype dt, int64_t hs)
{
	cudaFuncAttributes a;

	if ((dt != WEFT_BF16 && dt != WEFT_F16) || (hs != 64 && hs != 128))
		return 0;
	/* the PTX version the device's code of this library was built from */
	if (cudaFuncGetAttributes(&a, (const void *)flash_tc_fwd_kernel<__nv_bfloat16, 64>) !=
	    cudaSuccess) {
		cudaGetLastError(); /* no code for this device: not the next launch's error */
		return 0;
	}
	return a.ptxVersion >= 80;
}

template <class E, int HS>
static weft_status tc_forward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B, int64_t T,
			      int64_t nh, int64_t nkv, int64_t hs, const void *qkv, void *out,
			      float *lse)
{
	void (*k_flash_tc_fwd)(int64_t, int64_t, int64_t, float, const E *, E *, float *) =
		flash_tc_fwd_kernel<E, HS>;
	dim3 grid((unsigned)((T + ROWS - 1) / ROWS), (unsigned)nh, (unsigned)B);

	k_flash_tc_fwd<<<grid, THREADS, 0, c->stream>>>(T, nh, nkv, 1.0f / sqrtf((float)HS),
							(const E *)qkv, (E *)out, lse);
	return cuda_launched(c, name, SIZES_FLASH);
}

weft_status cuda_flash_tc_forward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t B,
				  int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				  void *out, float *lse)
{
	if (dt == WEFT_BF16)
		return hs == 64 ? tc_forward<__nv_bfloat16, 64>(c, name, dt, B, T, nh, nkv, hs, qkv,
								out, lse) :
				  tc_forward<__nv_bfloat16, 128>(c, name, dt, B, T, nh, nkv, hs,
								 qkv, out, lse);
	return hs == 64 ? tc_forward<__half, 64>(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse) :
			  tc_forward<__half, 128>(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse);
}
