/* The layers of Llama-family models on CUDA (weft/device.h, since ABI 1.4):
 * RMSNorm (a warp a row, the weight gradient in a fixed-order column
 * reduction, as layernorm's), rotary embeddings and SwiGLU (a thread an
 * element). F32, BF16 or F16 storage, F32 compute; the dtype is a run-time
 * argument, one kernel per pass. */
#include "cuda_dev.cuh"

#define RMS_ROWS 8 /* rows (warps) per RMSNorm block */
#define EW_THREADS 256
/* Rotation pairs a rope launch carries by value (head_dim up to 2x). */
#define ROPE_MAX_PAIRS 256

static unsigned int row_grid(int64_t rows)
{
	return rows > 0x7fffffff ? 0x7fffffffu : (unsigned int)rows;
}

/* ---- RMSNorm ---- */

__global__ void k_rmsnorm_fwd(int64_t rows, int64_t cols, float eps, int dt, const void *x,
			      const void *w, void *out, float *rstd)
{
	int lane = threadIdx.x & 31;
	int64_t r = (int64_t)blockIdx.x * RMS_ROWS + (threadIdx.x >> 5), off = r * cols;
	float ss = 0.0f, s;

	if (r >= rows)
		return;
	for (int64_t j = lane; j < cols; j += 32) {
		float v = ld(x, off + j, dt);

		ss += v * v;
	}
	s = 1.0f / sqrtf(warp_sum(ss) / (float)cols + eps);
	for (int64_t j = lane; j < cols; j += 32)
		st(out, off + j, dt, (ld(x, off + j, dt) * s) * (w ? ld(w, j, dt) : 1.0f));
	if (lane == 0)
		rstd[r] = s;
}

/* dx += rstd (g - n mean(g n)) with n = x rstd, g = dy w */
__global__ void k_rmsnorm_bwd_dx(int64_t rows, int64_t cols, int dt, const void *x,
				 const void *w, const float *rstd, const void *dy, void *dx)
{
	int lane = threadIdx.x & 31;
	int64_t r = (int64_t)blockIdx.x * RMS_ROWS + (threadIdx.x >> 5), off = r * cols;
	float s, m = 0.0f;

	if (r >= rows)
		return;
	s = rstd[r];
	for (int64_t j = lane; j < cols; j += 32)
		m += ld(dy, off + j, dt) * (w ? ld(w, j, dt) : 1.0f) * (ld(x, off + j, dt) * s);
	m = warp_sum(m) / (float)cols;
	for (int64_t j = lane; j < cols; j += 32) {
		float g = ld(dy, off + j, dt) * (w ? ld(w, j, dt) : 1.0f);

		st(dx, off + j, dt, ld(dx, off + j, dt) + (g - (ld(x, off + j, dt) * s) * m) * s);
	}
}

/* dw[j] += sum_r dy[r, j] n[r, j]: 32 columns a block, 32 row lanes summed
 * in a fixed order. */
__global__ void k_rmsnorm_bwd_dw(int64_t rows, int64_t cols, int dt, const void *x,
				 const float *rstd, const void *dy, void *dw)
{
	__shared__ float sh[32][33];
	int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
	float acc = 0.0f;

	if (j < cols)
		for (int64_t r = threadIdx.y; r < rows; r += 32)
			acc += ld(dy, r * cols + j, dt) * (ld(x, r * cols + j, dt) * rstd[r]);
	sh[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y == 0 && j < cols) {
		float sum = 0.0f;

		for (int t = 0; t < 32; t++)
			sum += sh[t][threadIdx.x];
		st(dw, j, dt, ld(dw, j, dt) + sum);
	}
}

/* ---- rotary embeddings ---- */

typedef struct rope_freqs {
	float f[ROPE_MAX_PAIRS];
} rope_freqs;

/* One thread an element of (rows, width). Element i of a rotated head
 * (half = hs / 2): i < half gives x[i] c - x[i + half] s, else x[i] c +
 * x[i - half] s, with c, s of (float)pos * f[i % half] (cos and sin in
 * double, rounded once, as the CPU's). Backward: the sine negated, added
 * into dst. Elements past the rotated heads copy (add) through. */
__global__ void k_rope(int64_t n, int64_t T, int64_t width, int64_t rot, int64_t hs,
		       int64_t pos_offset, int backward, int dt, rope_freqs fr, const void *src,
		       void *dst)
{
	int64_t half = hs / 2;

	GRID_STRIDE(e, n) {
		int64_t r = e / width, j = e % width;
		float v;

		if (j < rot) {
			int64_t i = j % hs, p = i < half ? i : i - half;
			float pos = (float)(pos_offset + r % T);
			double ang = (double)__fmul_rn(pos, fr.f[p]);
			float c = (float)cos(ang), s = (float)sin(ang);

			if (backward)
				s = -s;
			v = i < half ? ld(src, e, dt) * c - ld(src, e + half, dt) * s
				     : ld(src, e, dt) * c + ld(src, e - half, dt) * s;
		} else {
			v = ld(src, e, dt);
		}
		st(dst, e, dt, backward ? ld(dst, e, dt) + v : v);
	}
}

/* ---- SwiGLU ---- */

__global__ void k_swiglu_fwd(int64_t n, int64_t cols, int64_t ldi, int dt, const void *gate,
			     const void *up, void *out)
{
	GRID_STRIDE(e, n) {
		int64_t i = (e / cols) * ldi + e % cols;
		float g = ld(gate, i, dt);

		st(out, e, dt, g / (1.0f + expf(-g)) * ld(up, i, dt));
	}
}

__global__ void k_swiglu_bwd(int64_t n, int64_t cols, int64_t ldi, int dt, const void *gate,
			     const void *up, const void *dy, void *dgate, void *dup)
{
	GRID_STRIDE(e, n) {
		int64_t i = (e / cols) * ldi + e % cols;
		float g = ld(gate, i, dt), d = ld(dy, e, dt), sig = 1.0f / (1.0f + expf(-g));

		if (dgate)
			st(dgate, i, dt, ld(dgate, i, dt) +
			   d * ld(up, i, dt) * (sig * (1.0f + g * (1.0f - sig))));
		if (dup)
			st(dup, i, dt, ld(dup, i, dt) + d * (g * sig));
	}
}

/* ---- table members ---- */

#define SIZES_RC "%s rows %lld cols %lld", cuda_dt_name(dt), (long long)rows, (long long)cols

extern "C" weft_status cuda_rmsnorm_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					    float eps, const void *x, const void *w, void *out,
					    float *rstd)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "rmsnorm_forward");

	if (ret)
		return ret;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	k_rmsnorm_fwd<<<row_grid((rows + RMS_ROWS - 1) / RMS_ROWS), RMS_ROWS * 32, 0,
			c->stream>>>(rows, cols, eps, dt, x, w, out, rstd);
	return cuda_launched(c, "rmsnorm_forward", SIZES_RC);
}

extern "C" weft_status cuda_rmsnorm_backward(void *kctx, weft_dtype dt, int64_t rows,
					     int64_t cols, const void *x, const void *w,
					     const float *rstd, const void *dy, void *dx, void *dw)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "rmsnorm_backward");

	if (ret)
		return ret;
	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	if (dx) {
		k_rmsnorm_bwd_dx<<<row_grid((rows + RMS_ROWS - 1) / RMS_ROWS), RMS_ROWS * 32, 0,
				   c->stream>>>(rows, cols, dt, x, w, rstd, dy, dx);
		if ((ret = cuda_launched(c, "rmsnorm_backward", SIZES_RC)))
			return ret;
	}
	if (dw) {
		k_rmsnorm_bwd_dw<<<row_grid((cols + 31) / 32), dim3(32, 32), 0, c->stream>>>(
			rows, cols, dt, x, rstd, dy, dw);
		return cuda_launched(c, "rmsnorm_backward", SIZES_RC);
	}
	return WEFT_OK;
}

static weft_status rope_run(void *kctx, const char *name, weft_dtype dt, const weft_rope *rope,
			    int64_t B, int64_t T, int64_t width, int64_t n_rot, int64_t head_dim,
			    int64_t pos_offset, int backward, const void *src, void *dst)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);
	int64_t n = B * T * width;
	rope_freqs fr;

	if (ret)
		return ret;
	if (head_dim / 2 > ROPE_MAX_PAIRS)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda kernel %s: head_dim %lld "
					    "is above the %d this kernel carries; use head_dim <= "
					    "%d or the cpu device", name, (long long)head_dim,
					    2 * ROPE_MAX_PAIRS, 2 * ROPE_MAX_PAIRS);
	if (n <= 0)
		return WEFT_OK;
	memset(&fr, 0, sizeof(fr));
	for (int64_t i = 0; i < head_dim / 2; i++)
		fr.f[i] = weft_rope_inv_freq(rope, head_dim, i);
	k_rope<<<grid_for(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(
		n, T, width, n_rot * head_dim, head_dim, pos_offset, backward, dt, fr, src, dst);
	return cuda_launched(c, name, "%s B %lld T %lld width %lld heads %lld of %lld",
			     cuda_dt_name(dt), (long long)B, (long long)T, (long long)width,
			     (long long)n_rot, (long long)head_dim);
}

extern "C" weft_status cuda_rope_forward(void *kctx, weft_dtype dt, const weft_rope *rope,
					 int64_t B, int64_t T, int64_t width, int64_t n_rot,
					 int64_t head_dim, int64_t pos_offset, const void *x,
					 void *out)
{
	return rope_run(kctx, "rope_forward", dt, rope, B, T, width, n_rot, head_dim, pos_offset,
			0, x, out);
}

extern "C" weft_status cuda_rope_backward(void *kctx, weft_dtype dt, const weft_rope *rope,
					  int64_t B, int64_t T, int64_t width, int64_t n_rot,
					  int64_t head_dim, int64_t pos_offset, const void *dy,
					  void *dx)
{
	if (!dx)
		return cuda_need_ctx((cuda_ctx *)kctx, "rope_backward");
	return rope_run(kctx, "rope_backward", dt, rope, B, T, width, n_rot, head_dim, pos_offset,
			1, dy, dx);
}

extern "C" weft_status cuda_swiglu_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					   const void *gate, const void *up, int64_t ld_in,
					   void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "swiglu_forward");
	int64_t n = rows * cols;

	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	k_swiglu_fwd<<<grid_for(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(n, cols, ld_in, dt,
									     gate, up, out);
	return cuda_launched(c, "swiglu_forward", SIZES_RC);
}

extern "C" weft_status cuda_swiglu_backward(void *kctx, weft_dtype dt, int64_t rows,
					    int64_t cols, const void *gate, const void *up,
					    int64_t ld_in, const void *dy, void *dgate, void *dup)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "swiglu_backward");
	int64_t n = rows * cols;

	if (ret)
		return ret;
	if (n <= 0 || (!dgate && !dup))
		return WEFT_OK;
	k_swiglu_bwd<<<grid_for(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(
		n, cols, ld_in, dt, gate, up, dy, dgate, dup);
	return cuda_launched(c, "swiglu_backward", SIZES_RC);
}
