/* Fused causal attention (weft/device.h's flash_attention_*, since ABI
 * 1.4) on the packed q | k | v projection with grouped-query heads: the
 * T x T probabilities are never stored. Forward keeps, per query row, a
 * running maximum and sum of exponentials over tiles of keys (online
 * softmax) and saves the row's log-sum-exp; backward recomputes each
 * probability from it. F32, BF16 or F16 storage, F32 compute and
 * statistics; the dtype is a run-time argument, one kernel per pass.
 *
 * Layout: a block of TILE threads owns TILE consecutive rows of one head
 * (thread = row), and walks tiles of TILE rows of the other operand held
 * in shared memory as F32. Causal block skipping: a query tile reads only
 * the key tiles up to its last row; a key tile only the query tiles from
 * its first row on.
 *
 * Backward is three passes, each deterministic (no atomics, every sum in
 * a fixed order): D = rowsum(dO * O); dK and dV by key tile, a thread
 * summing over every query head of its kv head's group in turn; dQ by
 * query tile. The passes of dK/dV and dQ each recompute the scores.
 *
 * BF16 and F16 at head sizes 64 and 128 go to the tensor-core kernels
 * (where the device's code is sm_80 or later): the forward of
 * cuda_flash_mma_fwd.cu (when qkv and out are 16-byte aligned), and the
 * backward of cuda_flash_mma_bwd.cu, which computes D in its dQ pass (when
 * qkv, out, dout and dqkv are 16-byte aligned, as its 128-bit loads need).
 * These kernels serve every other call. */
#include <math.h>

#include "cuda_dev.cuh"
#include "cuda_flash.cuh"

#define TILE 32 /* rows a block owns, and rows of a shared-memory tile */
#define HS_MAX WEFT_FLASH_MAX_HEAD_DIM

/* Element d of row t of head `head` (of hs elements) in batch row b of a
 * packed tensor whose rows hold `width` elements. */
__device__ __forceinline__ int64_t at(int64_t b, int64_t T, int64_t t, int64_t width,
				      int64_t head, int64_t hs)
{
	return (b * T + t) * width + head * hs;
}

/* Loads rows r0.. r0 + TILE - 1 (those below T) of head `head` into
 * tile[TILE][HS_MAX] as F32, every thread of the block taking part. */
__device__ __forceinline__ void load_tile(float (*tile)[HS_MAX], const void *src, int dt,
					  int64_t b, int64_t T, int64_t r0, int64_t width,
					  int64_t head, int64_t hs)
{
	for (int64_t e = threadIdx.x; e < TILE * hs; e += blockDim.x) {
		int64_t r = e / hs, d = e % hs;

		if (r0 + r < T)
			tile[r][d] = ld(src, at(b, T, r0 + r, width, head, hs) + d, dt);
	}
}

/* grid (query tiles, nh, B). out = softmax(q k^T scale + causal mask) v;
 * lse[b][h][t] = max + log(sum of exp(score - max)). */
__global__ void k_flash_fwd(int64_t T, int64_t nh, int64_t nkv, int64_t hs, float scale, int dt,
			    const void *qkv, void *out, float *lse)
{
	__shared__ float ks[TILE][HS_MAX], vs[TILE][HS_MAX];
	int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (nh / nkv);
	int64_t L = (nh + 2 * nkv) * hs, C = nh * hs;
	int64_t t0 = (int64_t)blockIdx.x * TILE, t = t0 + threadIdx.x;
	int64_t kend = t0 + TILE < T ? t0 + TILE : T; /* causal: keys < kend */
	float q[HS_MAX], o[HS_MAX], s[TILE], m = -INFINITY, l = 0.0f;
	bool row = t < T;

	for (int64_t d = 0; d < hs; d++) {
		q[d] = row ? ld(qkv, at(b, T, t, L, h, hs) + d, dt) : 0.0f;
		o[d] = 0.0f;
	}
	for (int64_t j0 = 0; j0 < kend; j0 += TILE) {
		__syncthreads(); /* the previous tile is no longer read */
		load_tile(ks, qkv, dt, b, T, j0, L, nh + kvh, hs);
		load_tile(vs, qkv, dt, b, T, j0, L, nh + nkv + kvh, hs);
		__syncthreads();
		if (!row)
			continue;
		int64_t n = t + 1 - j0 < TILE ? t + 1 - j0 : TILE; /* keys j0..j0+n-1 <= t */
		float mt = m;

		for (int64_t j = 0; j < n; j++) {
			float acc = 0.0f;

			for (int64_t d = 0; d < hs; d++)
				acc += q[d] * ks[j][d];
			s[j] = acc * scale;
			mt = fmaxf(mt, s[j]);
		}
		if (n <= 0)
			continue;
		float corr = expf(m - mt); /* 0 on the first tile (m = -inf) */

		l *= corr;
		for (int64_t d = 0; d < hs; d++)
			o[d] *= corr;
		for (int64_t j = 0; j < n; j++) {
			float p = expf(s[j] - mt);

			l += p;
			for (int64_t d = 0; d < hs; d++)
				o[d] += p * vs[j][d];
		}
		m = mt;
	}
	if (!row)
		return;
	for (int64_t d = 0; d < hs; d++)
		st(out, (b * T + t) * C + h * hs + d, dt, o[d] / l);
	lse[(b * nh + h) * T + t] = m + logf(l);
}

/* D[b][h][t] = sum_d dout * out (F32), a thread a row. */
__global__ void k_flash_bwd_dot(int64_t rows, int64_t T, int64_t nh, int64_t hs, int dt,
				const void *out, const void *dout, float *D)
{
	GRID_STRIDE(r, rows) {
		int64_t t = r % T, h = (r / T) % nh, b = r / (T * nh);
		int64_t off = (b * T + t) * nh * hs + h * hs;
		float acc = 0.0f;

		for (int64_t d = 0; d < hs; d++)
			acc += ld(dout, off + d, dt) * ld(out, off + d, dt);
		D[r] = acc;
	}
}

/* grid (key tiles, nkv, B): a thread a key row j of kv head kvh; over the
 * group's query heads in turn and the query tiles from j's tile on:
 * p = exp(q k_j scale - lse), dv += p dO, ds = p (dO v_j - D),
 * dk += ds scale q. Adds dk and dv into dqkv. */
__global__ void k_flash_bwd_dkdv(int64_t T, int64_t nh, int64_t nkv, int64_t hs, float scale,
				 int dt, const void *qkv, const float *lse, const float *D,
				 const void *dout, void *dqkv)
{
	__shared__ float qs[TILE][HS_MAX], dos[TILE][HS_MAX], ls[TILE], ds_[TILE];
	int64_t b = blockIdx.z, kvh = blockIdx.y, g = nh / nkv;
	int64_t L = (nh + 2 * nkv) * hs, C = nh * hs;
	int64_t j0 = (int64_t)blockIdx.x * TILE, j = j0 + threadIdx.x;
	float k[HS_MAX], v[HS_MAX], dk[HS_MAX], dv[HS_MAX];
	bool row = j < T;

	for (int64_t d = 0; d < hs; d++) {
		k[d] = row ? ld(qkv, at(b, T, j, L, nh + kvh, hs) + d, dt) : 0.0f;
		v[d] = row ? ld(qkv, at(b, T, j, L, nh + nkv + kvh, hs) + d, dt) : 0.0f;
		dk[d] = 0.0f;
		dv[d] = 0.0f;
	}
	for (int64_t m = 0; m < g; m++) {
		int64_t h = kvh * g + m;

		for (int64_t i0 = j0; i0 < T; i0 += TILE) {
			__syncthreads();
			load_tile(qs, qkv, dt, b, T, i0, L, h, hs);
			load_tile(dos, dout, dt, b, T, i0, C, h, hs);
			if (threadIdx.x < TILE && i0 + threadIdx.x < T) {
				ls[threadIdx.x] = lse[(b * nh + h) * T + i0 + threadIdx.x];
				ds_[threadIdx.x] = D[(b * nh + h) * T + i0 + threadIdx.x];
			}
			__syncthreads();
			if (!row)
				continue;
			for (int64_t i = 0; i < TILE && i0 + i < T; i++) {
				float s = 0.0f, dp = 0.0f, p, dsc;

				if (i0 + i < j)
					continue; /* causal: query i0 + i does not see key j */
				for (int64_t d = 0; d < hs; d++) {
					s += qs[i][d] * k[d];
					dp += dos[i][d] * v[d];
				}
				p = expf(s * scale - ls[i]);
				dsc = p * (dp - ds_[i]) * scale;
				for (int64_t d = 0; d < hs; d++) {
					dv[d] += p * dos[i][d];
					dk[d] += dsc * qs[i][d];
				}
			}
		}
	}
	if (!row)
		return;
	for (int64_t d = 0; d < hs; d++) {
		int64_t ik = at(b, T, j, L, nh + kvh, hs) + d;
		int64_t iv = at(b, T, j, L, nh + nkv + kvh, hs) + d;

		st(dqkv, ik, dt, ld(dqkv, ik, dt) + dk[d]);
		st(dqkv, iv, dt, ld(dqkv, iv, dt) + dv[d]);
	}
}

/* grid (query tiles, nh, B): a thread a query row i; over the key tiles up
 * to i's: dq += p (dO v_j - D) scale k_j. Adds dq into dqkv. */
__global__ void k_flash_bwd_dq(int64_t T, int64_t nh, int64_t nkv, int64_t hs, float scale,
			       int dt, const void *qkv, const float *lse, const float *D,
			       const void *dout, void *dqkv)
{
	__shared__ float ks[TILE][HS_MAX], vs[TILE][HS_MAX];
	int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (nh / nkv);
	int64_t L = (nh + 2 * nkv) * hs, C = nh * hs;
	int64_t i0 = (int64_t)blockIdx.x * TILE, i = i0 + threadIdx.x;
	int64_t kend = i0 + TILE < T ? i0 + TILE : T;
	float q[HS_MAX], dO[HS_MAX], dq[HS_MAX], li = 0.0f, Di = 0.0f;
	bool row = i < T;

	for (int64_t d = 0; d < hs; d++) {
		q[d] = row ? ld(qkv, at(b, T, i, L, h, hs) + d, dt) : 0.0f;
		dO[d] = row ? ld(dout, at(b, T, i, C, h, hs) + d, dt) : 0.0f;
		dq[d] = 0.0f;
	}
	if (row) {
		li = lse[(b * nh + h) * T + i];
		Di = D[(b * nh + h) * T + i];
	}
	for (int64_t j0 = 0; j0 < kend; j0 += TILE) {
		__syncthreads();
		load_tile(ks, qkv, dt, b, T, j0, L, nh + kvh, hs);
		load_tile(vs, qkv, dt, b, T, j0, L, nh + nkv + kvh, hs);
		__syncthreads();
		if (!row)
			continue;
		for (int64_t j = 0; j < TILE && j0 + j <= i; j++) {
			float s = 0.0f, dp = 0.0f, dsc;

			for (int64_t d = 0; d < hs; d++) {
				s += q[d] * ks[j][d];
				dp += dO[d] * vs[j][d];
			}
			dsc = expf(s * scale - li) * (dp - Di) * scale;
			for (int64_t d = 0; d < hs; d++)
				dq[d] += dsc * ks[j][d];
		}
	}
	if (!row)
		return;
	for (int64_t d = 0; d < hs; d++) {
		int64_t iq = at(b, T, i, L, h, hs) + d;

		st(dqkv, iq, dt, ld(dqkv, iq, dt) + dq[d]);
	}
}

/* ---- table members ---- */

/* The sizes these kernels take, or an error naming them and what to use. */
static weft_status flash_check(const char *name, weft_dtype dt, int64_t B, int64_t T, int64_t nh,
			       int64_t nkv, int64_t hs)
{
	if (nkv <= 0 || nh % nkv)
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda kernel %s: " FLASH_FMT
					    ": n_kv_head must divide n_head", name, FLASH_ARGS);
	if (hs > HS_MAX)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda kernel %s: " FLASH_FMT
					    ": head_dim %lld is above the %d these kernels hold; "
					    "use attention_gqa_forward/backward for larger heads",
					    name, FLASH_ARGS, (long long)hs, HS_MAX);
	if (B > 65535 || nh > 65535 || (T + TILE - 1) / TILE > 0x7fffffff)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda kernel %s: " FLASH_FMT
					    ": at most 65535 batch rows and heads; split the batch",
					    name, FLASH_ARGS);
	return WEFT_OK;
}

extern "C" weft_status cuda_flash_attention_forward(void *kctx, weft_dtype dt, int64_t B,
						    int64_t T, int64_t nh, int64_t nkv,
						    int64_t hs, const void *qkv, void *out,
						    float *lse)
{
	const char *name = "flash_attention_forward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret)
		return ret;
	if (B <= 0 || T <= 0 || nh <= 0 || hs <= 0)
		return WEFT_OK;
	if ((ret = flash_check(name, dt, B, T, nh, nkv, hs)))
		return ret;
	/* the tensor-core forward moves 16-byte pieces of qkv and out */
	if (cuda_flash_tc_takes(c, dt, hs) && ((uintptr_t)qkv | (uintptr_t)out) % 16 == 0)
		return cuda_flash_tc_forward(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse);
	k_flash_fwd<<<dim3((unsigned)((T + TILE - 1) / TILE), (unsigned)nh, (unsigned)B), TILE, 0,
		      c->stream>>>(T, nh, nkv, hs, 1.0f / sqrtf((float)hs), dt, qkv, out, lse);
	return cuda_launched(c, name, SIZES_FLASH);
}

/* flash_attention_backward (write 0: dqkv += ...) and _backward_write
 * (write 1: dqkv = ..., its contents not read). */
static weft_status flash_backward(void *kctx, const char *name, weft_dtype dt, int64_t B,
				  int64_t T, int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				  const void *out, const float *lse, const void *dout, void *dqkv,
				  int write)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);
	int64_t rows = B * nh * T;
	unsigned tiles = (unsigned)((T + TILE - 1) / TILE);
	float scale = 1.0f / sqrtf((float)hs);

	if (ret)
		return ret;
	if (B <= 0 || T <= 0 || nh <= 0 || hs <= 0 || !dqkv)
		return WEFT_OK;
	if ((ret = flash_check(name, dt, B, T, nh, nkv, hs)) ||
	    (ret = cuda_rows_reserve(c, name, (size_t)rows * sizeof(float))))
		return ret;
	/* the tensor-core backward moves 16-byte pieces of qkv, out, dout, dqkv */
	if (cuda_flash_tc_takes(c, dt, hs) &&
	    ((uintptr_t)qkv | (uintptr_t)out | (uintptr_t)dout | (uintptr_t)dqkv) % 16 == 0)
		return cuda_flash_tc_backward(c, name, dt, B, T, nh, nkv, hs, qkv, out, lse, c->rows,
					      dout, dqkv, write);
	/* the scalar kernels add: writing is adding into zeros */
	if (write) {
		size_t bytes = (size_t)(B * T * (nh + 2 * nkv) * hs) * cuda_dt_size(dt);
		cudaError_t err = cudaMemsetAsync(dqkv, 0, bytes, c->stream);

		if (err != cudaSuccess)
			return cuda_fail(name, c->index, err, "zeroing dqkv (%zu bytes)", bytes);
	}
	k_flash_bwd_dot<<<grid_for(rows, 256), 256, 0, c->stream>>>(rows, T, nh, hs, dt, out, dout,
								   c->rows);
	if ((ret = cuda_launched(c, name, SIZES_FLASH)))
		return ret;
	k_flash_bwd_dkdv<<<dim3(tiles, (unsigned)nkv, (unsigned)B), TILE, 0, c->stream>>>(
		T, nh, nkv, hs, scale, dt, qkv, lse, c->rows, dout, dqkv);
	if ((ret = cuda_launched(c, name, SIZES_FLASH)))
		return ret;
	k_flash_bwd_dq<<<dim3(tiles, (unsigned)nh, (unsigned)B), TILE, 0, c->stream>>>(
		T, nh, nkv, hs, scale, dt, qkv, lse, c->rows, dout, dqkv);
	return cuda_launched(c, name, SIZES_FLASH);
}

extern "C" weft_status cuda_flash_attention_backward(void *kctx, weft_dtype dt, int64_t B,
						     int64_t T, int64_t nh, int64_t nkv,
						     int64_t hs, const void *qkv, const void *out,
						     const float *lse, const void *dout,
						     void *dqkv)
{
	return flash_backward(kctx, "flash_attention_backward", dt, B, T, nh, nkv, hs, qkv, out,
			      lse, dout, dqkv, 0);
}

extern "C" weft_status cuda_flash_attention_backward_write(void *kctx, weft_dtype dt, int64_t B,
							   int64_t T, int64_t nh, int64_t nkv,
							   int64_t hs, const void *qkv,
							   const void *out, const float *lse,
							   const void *dout, void *dqkv)
{
	return flash_backward(kctx, "flash_attention_backward_write", dt, B, T, nh, nkv, hs, qkv,
			      out, lse, dout, dqkv, 1);
}
