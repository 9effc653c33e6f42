/* Row kernels: softmax, layernorm, and the causal softmax of attention.
 * A row is reduced by one block (softmax) or one warp (layernorm); column
 * sums (layernorm's dw, db) use a fixed-order shared-memory reduction, so
 * every result is deterministic. */
#include "cuda_dev.cuh"

#define ROW_THREADS 256
#define LN_ROWS 8 /* rows (warps) per layernorm block */

static unsigned int row_grid(int64_t rows)
{
	return rows > 0x7fffffff ? 0x7fffffffu : (unsigned int)rows;
}

__global__ void k_softmax_fwd(int64_t rows, int64_t cols, int dt, const void *x, void *y)
{
	__shared__ float sh[32];

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t off = r * cols;
		float mx = -INFINITY, sum = 0.0f, inv;

		for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
			mx = fmaxf(mx, ld(x, off + j, dt));
		mx = block_max(mx, sh);
		for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
			sum += expf(ld(x, off + j, dt) - mx);
		sum = block_sum(sum, sh);
		inv = 1.0f / sum;
		for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
			st(y, off + j, dt, expf(ld(x, off + j, dt) - mx) * inv);
	}
}

__global__ void k_softmax_bwd(int64_t rows, int64_t cols, int dt, const void *y, const void *dy,
			      void *dx)
{
	__shared__ float sh[32];

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t off = r * cols;
		float dot = 0.0f;

		for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
			dot += ld(y, off + j, dt) * ld(dy, off + j, dt);
		dot = block_sum(dot, sh);
		for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
			st(dx, off + j, dt, ld(dx, off + j, dt) +
					    ld(y, off + j, dt) * (ld(dy, off + j, dt) - dot));
	}
}

__global__ void k_layernorm_fwd(int64_t rows, int64_t cols, float eps, int dt, const void *x,
				const void *w, const void *b, void *out, float *mean, float *rstd)
{
	int lane = threadIdx.x & 31;
	int64_t r = (int64_t)blockIdx.x * LN_ROWS + (threadIdx.x >> 5);
	int64_t off = r * cols;
	float m = 0.0f, v = 0.0f, s;

	if (r >= rows)
		return;
	for (int64_t j = lane; j < cols; j += 32)
		m += ld(x, off + j, dt);
	m = warp_sum(m) / (float)cols;
	for (int64_t j = lane; j < cols; j += 32) {
		float d = ld(x, off + j, dt) - m;

		v += d * d;
	}
	v = warp_sum(v) / (float)cols;
	s = 1.0f / sqrtf(v + eps);
	for (int64_t j = lane; j < cols; j += 32) {
		float nrm = (ld(x, off + j, dt) - m) * s;

		st(out, off + j, dt, nrm * (w ? ld(w, j, dt) : 1.0f) + (b ? ld(b, j, dt) : 0.0f));
	}
	if (lane == 0) {
		mean[r] = m;
		rstd[r] = s;
	}
}

__global__ void k_layernorm_bwd_dx(int64_t rows, int64_t cols, int dt, const void *x,
				   const void *w, const float *mean, const float *rstd,
				   const void *dy, void *dx)
{
	int lane = threadIdx.x & 31;
	int64_t r = (int64_t)blockIdx.x * LN_ROWS + (threadIdx.x >> 5);
	int64_t off = r * cols;
	float m, s, dmean = 0.0f, dnorm_mean = 0.0f;

	if (r >= rows)
		return;
	m = mean[r];
	s = rstd[r];
	for (int64_t j = lane; j < cols; j += 32) {
		float nrm = (ld(x, off + j, dt) - m) * s;
		float dn = ld(dy, off + j, dt) * (w ? ld(w, j, dt) : 1.0f);

		dmean += dn;
		dnorm_mean += dn * nrm;
	}
	dmean = warp_sum(dmean) / (float)cols;
	dnorm_mean = warp_sum(dnorm_mean) / (float)cols;
	for (int64_t j = lane; j < cols; j += 32) {
		float nrm = (ld(x, off + j, dt) - m) * s;
		float dn = ld(dy, off + j, dt) * (w ? ld(w, j, dt) : 1.0f);

		st(dx, off + j, dt, ld(dx, off + j, dt) + (dn - dmean - nrm * dnorm_mean) * s);
	}
}

/* dw[j] += sum_r dy[r, j] * norm[r, j];  db[j] += sum_r dy[r, j] */
__global__ void k_layernorm_bwd_dwdb(int64_t rows, int64_t cols, int dt, const void *x,
				     const float *mean, const float *rstd, const void *dy,
				     void *dw, void *db)
{
	__shared__ float shw[32][33], shb[32][33];
	int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
	float aw = 0.0f, ab = 0.0f;

	if (j < cols)
		for (int64_t r = threadIdx.y; r < rows; r += 32) {
			float g = ld(dy, r * cols + j, dt);

			aw += g * ((ld(x, r * cols + j, dt) - mean[r]) * rstd[r]);
			ab += g;
		}
	shw[threadIdx.y][threadIdx.x] = aw;
	shb[threadIdx.y][threadIdx.x] = ab;
	__syncthreads();
	if (threadIdx.y == 0 && j < cols) {
		float sw = 0.0f, sb = 0.0f;

		for (int t = 0; t < 32; t++) {
			sw += shw[t][threadIdx.x];
			sb += shb[t][threadIdx.x];
		}
		if (dw)
			st(dw, j, dt, ld(dw, j, dt) + sw);
		if (db)
			st(db, j, dt, ld(db, j, dt) + sb);
	}
}

/* Row r of heads * T rows is query i = r % T: keys j <= i only. */
__global__ void k_causal_softmax(int64_t nrows, int64_t T, int dt, const float *src, void *dst)
{
	__shared__ float sh[32];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		int64_t i = r % T, off = r * T;
		float mx = -INFINITY, sum = 0.0f, inv;

		for (int64_t j = threadIdx.x; j <= i; j += blockDim.x)
			mx = fmaxf(mx, src[off + j]);
		mx = block_max(mx, sh);
		for (int64_t j = threadIdx.x; j <= i; j += blockDim.x)
			sum += expf(src[off + j] - mx);
		sum = block_sum(sum, sh);
		inv = 1.0f / sum;
		for (int64_t j = threadIdx.x; j < T; j += blockDim.x)
			st(dst, off + j, dt, j <= i ? expf(src[off + j] - mx) * inv : 0.0f);
	}
}

__global__ void k_causal_softmax_bwd(int64_t nrows, int64_t T, float scale, int dt,
				     const void *att, const float *da, void *ds)
{
	__shared__ float sh[32];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		int64_t i = r % T, off = r * T;
		float dot = 0.0f;

		for (int64_t j = threadIdx.x; j <= i; j += blockDim.x)
			dot += ld(att, off + j, dt) * da[off + j];
		dot = block_sum(dot, sh);
		for (int64_t j = threadIdx.x; j < T; j += blockDim.x)
			st(ds, off + j, dt,
			   j <= i ? ld(att, off + j, dt) * (da[off + j] - dot) * scale : 0.0f);
	}
}

/* ---- table members ---- */

#define SIZES_RC "%s rows %lld cols %lld", cuda_dt_name(dt), (long long)rows, (long long)cols

extern "C" weft_status cuda_softmax_forward(void *kctx, weft_dtype dt, int64_t rows,
					    int64_t cols, const void *x, void *y)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "softmax_forward");

	if (ret)
		return ret;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	k_softmax_fwd<<<row_grid(rows), ROW_THREADS, 0, c->stream>>>(rows, cols, dt, x, y);
	return cuda_launched(c, "softmax_forward", SIZES_RC);
}

extern "C" weft_status cuda_softmax_backward(void *kctx, weft_dtype dt, int64_t rows,
					     int64_t cols, const void *y, const void *dy, void *dx)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "softmax_backward");

	if (ret)
		return ret;
	if (rows <= 0 || cols <= 0 || !dx)
		return WEFT_OK;
	k_softmax_bwd<<<row_grid(rows), ROW_THREADS, 0, c->stream>>>(rows, cols, dt, y, dy, dx);
	return cuda_launched(c, "softmax_backward", SIZES_RC);
}

extern "C" weft_status cuda_layernorm_forward(void *kctx, weft_dtype dt, int64_t rows,
					      int64_t cols, float eps, const void *x,
					      const void *w, const void *b, void *out, float *mean,
					      float *rstd)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "layernorm_forward");
	int64_t blocks = (rows + LN_ROWS - 1) / LN_ROWS;

	if (ret)
		return ret;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	k_layernorm_fwd<<<row_grid(blocks), LN_ROWS * 32, 0, c->stream>>>(rows, cols, eps, dt, x, w,
									  b, out, mean, rstd);
	return cuda_launched(c, "layernorm_forward", SIZES_RC);
}

extern "C" weft_status cuda_layernorm_backward(void *kctx, weft_dtype dt, int64_t rows,
					       int64_t cols, const void *x, const void *w,
					       const float *mean, const float *rstd,
					       const void *dy, void *dx, void *dw, void *db)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "layernorm_backward");
	int64_t blocks = (rows + LN_ROWS - 1) / LN_ROWS;

	if (ret)
		return ret;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	if (dx) {
		k_layernorm_bwd_dx<<<row_grid(blocks), LN_ROWS * 32, 0, c->stream>>>(
			rows, cols, dt, x, w, mean, rstd, dy, dx);
		if ((ret = cuda_launched(c, "layernorm_backward", SIZES_RC)))
			return ret;
	}
	if (dw || db) {
		k_layernorm_bwd_dwdb<<<row_grid((cols + 31) / 32), dim3(32, 32), 0, c->stream>>>(
			rows, cols, dt, x, mean, rstd, dy, dw, db);
		return cuda_launched(c, "layernorm_backward", SIZES_RC);
	}
	return WEFT_OK;
}

extern "C" weft_status cuda_causal_softmax(cuda_ctx *c, weft_dtype dt, int64_t heads, int64_t T,
					   const float *src, void *dst)
{
	int64_t rows = heads * T, cols = T;

	k_causal_softmax<<<row_grid(rows), ROW_THREADS, 0, c->stream>>>(rows, T, dt, src, dst);
	return cuda_launched(c, "attention_forward", SIZES_RC);
}

extern "C" weft_status cuda_causal_softmax_backward(cuda_ctx *c, weft_dtype dt, int64_t heads,
						    int64_t T, float scale, const void *att,
						    const float *da, void *ds)
{
	int64_t rows = heads * T, cols = T;

	k_causal_softmax_bwd<<<row_grid(rows), ROW_THREADS, 0, c->stream>>>(rows, T, scale, dt,
									       att, da, ds);
	return cuda_launched(c, "attention_backward", SIZES_RC);
}
