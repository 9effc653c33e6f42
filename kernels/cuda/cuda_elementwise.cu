/* Elementwise kernels (add, mul, scale, axpy, fill, convert, relu, gelu,
 * dropout) and column sums (sum_rows, the db of mul_backward). Every one
 * computes in float and stores in the operand dtype. */
#include "cuda_dev.cuh"

#define THREADS 256

#define SIZES_N "%s n %lld", cuda_dt_name(dt), (long long)n

/* ---- kernels ---- */

__global__ void k_add(int64_t n, int dt, const void *a, int64_t nb, const void *b, void *out)
{
	GRID_STRIDE(i, n)
		st(out, i, dt, ld(a, i, dt) + ld(b, i % nb, dt));
}

__global__ void k_mul(int64_t n, int dt, const void *a, int64_t nb, const void *b, void *out)
{
	GRID_STRIDE(i, n)
		st(out, i, dt, ld(a, i, dt) * ld(b, i % nb, dt));
}

__global__ void k_mul_da(int64_t n, int dt, int64_t nb, const void *b, const void *dy, void *da)
{
	GRID_STRIDE(i, n)
		st(da, i, dt, ld(da, i, dt) + ld(dy, i, dt) * ld(b, i % nb, dt));
}

/* y[j] += sum_r x[r, j] * (w ? w[r, j] : 1): 32 columns per block, the
 * block's 32 rows of threads stride over the rows, then a shared-memory
 * sum in a fixed order (deterministic). */
__global__ void k_col_sum(int64_t rows, int64_t cols, int dt, const void *x, const void *w,
			  void *y)
{
	__shared__ float sh[32][33];
	int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
	float acc = 0.0f;

	if (j < cols)
		for (int64_t r = threadIdx.y; r < rows; r += 32)
			acc += ld(x, r * cols + j, dt) * (w ? ld(w, r * cols + j, dt) : 1.0f);
	sh[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y == 0 && j < cols) {
		float s = 0.0f;

		for (int t = 0; t < 32; t++)
			s += sh[t][threadIdx.x];
		st(y, j, dt, ld(y, j, dt) + s);
	}
}

__global__ void k_scale(int64_t n, int dt, float alpha, const void *x, void *out)
{
	GRID_STRIDE(i, n)
		st(out, i, dt, alpha * ld(x, i, dt));
}

__global__ void k_axpy(int64_t n, int dt, float alpha, const void *x, void *y)
{
	GRID_STRIDE(i, n)
		st(y, i, dt, ld(y, i, dt) + (alpha == 1.0f ? ld(x, i, dt) : alpha * ld(x, i, dt)));
}

__global__ void k_fill(int64_t n, int dt, float value, void *out)
{
	GRID_STRIDE(i, n)
		st(out, i, dt, value);
}

__global__ void k_convert(int64_t n, int sdt, const void *src, int ddt, void *dst)
{
	GRID_STRIDE(i, n)
		st(dst, i, ddt, ld(src, i, sdt));
}

__global__ void k_scale_matrix(int64_t m, int64_t n, int64_t ldc, int64_t stride_c, int64_t batch,
			       int dt, float beta, void *c)
{
	GRID_STRIDE(i, m * n * batch) {
		int64_t bidx = i / (m * n), r = (i / n) % m, j = i % n;
		int64_t at = bidx * stride_c + r * ldc + j;

		st(c, at, dt, beta == 0.0f ? 0.0f : beta * ld(c, at, dt));
	}
}

__global__ void k_relu_fwd(int64_t n, int dt, const void *x, void *out)
{
	GRID_STRIDE(i, n) {
		float v = ld(x, i, dt);

		st(out, i, dt, v > 0.0f ? v : 0.0f);
	}
}

__global__ void k_relu_bwd(int64_t n, int dt, const void *x, const void *dy, void *dx)
{
	GRID_STRIDE(i, n)
		if (ld(x, i, dt) > 0.0f)
			st(dx, i, dt, ld(dx, i, dt) + ld(dy, i, dt));
}

__global__ void k_gelu_fwd(int64_t n, int dt, const void *x, void *out)
{
	GRID_STRIDE(i, n)
		st(out, i, dt, dev_gelu_tanh(ld(x, i, dt)));
}

__global__ void k_gelu_bwd(int64_t n, int dt, const void *x, const void *dy, void *dx)
{
	GRID_STRIDE(i, n)
		st(dx, i, dt, ld(dx, i, dt) + ld(dy, i, dt) * dev_gelu_tanh_grad(ld(x, i, dt)));
}

__global__ void k_dropout_fwd(int64_t n, int dt, float p, float scale, uint64_t key,
			      int64_t first, const void *x, void *out)
{
	GRID_STRIDE(i, n)
		st(out, i, dt, dev_dropout_keep(key, (uint64_t)(first + i), p) ?
				       ld(x, i, dt) * scale : 0.0f);
}

__global__ void k_dropout_bwd(int64_t n, int dt, float p, float scale, uint64_t key,
			      int64_t first, const void *dy, void *dx)
{
	GRID_STRIDE(i, n)
		if (dev_dropout_keep(key, (uint64_t)(first + i), p))
			st(dx, i, dt, ld(dx, i, dt) + ld(dy, i, dt) * scale);
}

/* ---- table members ---- */

static weft_status col_sum(cuda_ctx *c, const char *name, weft_dtype dt, int64_t rows,
			   int64_t cols, const void *x, const void *w, void *y)
{
	dim3 block(32, 32);
	int64_t nblk = (cols + 31) / 32;

	if (rows <= 0 || cols <= 0)
		return WEFT_OK;
	if (nblk > 0x7fffffff)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda kernel %s: %lld columns "
					    "exceed the grid", name, (long long)cols);
	k_col_sum<<<(unsigned int)nblk, block, 0, c->stream>>>(rows, cols, dt, x, w, y);
	return cuda_launched(c, name, "%s rows %lld cols %lld", cuda_dt_name(dt), (long long)rows,
			     (long long)cols);
}

extern "C" weft_status cuda_sum_rows(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				     const void *x, void *y)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "sum_rows");

	if (ret)
		return ret;
	return col_sum(c, "sum_rows", dt, rows, cols, x, NULL, y);
}

extern "C" weft_status cuda_add(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
				const void *b, void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "add");

	if (ret)
		return ret;
	if (n <= 0 || nb <= 0)
		return WEFT_OK;
	k_add<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, a, nb, b, out);
	return cuda_launched(c, "add", SIZES_N);
}

extern "C" weft_status cuda_mul(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
				const void *b, void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "mul");

	if (ret)
		return ret;
	if (n <= 0 || nb <= 0)
		return WEFT_OK;
	k_mul<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, a, nb, b, out);
	return cuda_launched(c, "mul", SIZES_N);
}

extern "C" weft_status cuda_mul_backward(void *kctx, weft_dtype dt, int64_t n, const void *a,
					 int64_t nb, const void *b, const void *dy, void *da,
					 void *db)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "mul_backward");

	if (ret)
		return ret;
	if (n <= 0 || nb <= 0)
		return WEFT_OK;
	if (da) {
		k_mul_da<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, nb, b, dy, da);
		if ((ret = cuda_launched(c, "mul_backward", SIZES_N)))
			return ret;
	}
	return db ? col_sum(c, "mul_backward", dt, n / nb, nb, dy, a, db) : WEFT_OK;
}

extern "C" weft_status cuda_scale(void *kctx, weft_dtype dt, int64_t n, float alpha,
				  const void *x, void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "scale");

	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	k_scale<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, alpha, x, out);
	return cuda_launched(c, "scale", SIZES_N);
}

extern "C" weft_status cuda_axpy(void *kctx, weft_dtype dt, int64_t n, float alpha,
				 const void *x, void *y)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "axpy");

	if (ret)
		return ret;
	if (n <= 0 || !y)
		return WEFT_OK;
	k_axpy<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, alpha, x, y);
	return cuda_launched(c, "axpy", SIZES_N);
}

/* fill also takes kctx == NULL (weft/device.h): then it runs on the legacy
 * default stream of the device that holds `out` and returns when done. */
extern "C" weft_status cuda_fill(void *kctx, weft_dtype dt, int64_t n, float value, void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	struct cudaPointerAttributes pa;
	cudaError_t err;
	weft_status ret;

	if (n <= 0)
		return WEFT_OK;
	if (c) {
		if ((ret = cuda_need_ctx(c, "fill")))
			return ret;
		k_fill<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, value, out);
		return cuda_launched(c, "fill", SIZES_N);
	}
	err = cudaPointerGetAttributes(&pa, out);
	if (err == cudaSuccess && pa.type == cudaMemoryTypeDevice)
		err = cudaSetDevice(pa.device);
	else if (err == cudaSuccess)
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda kernel fill: %p is not "
					    "device memory", out);
	if (err == cudaSuccess) {
		k_fill<<<grid_for(n, THREADS), THREADS, 0, cudaStreamLegacy>>>(n, dt, value, out);
		err = cudaGetLastError();
	}
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(cudaStreamLegacy);
	return err == cudaSuccess ? WEFT_OK : cuda_fail("fill", -1, err, SIZES_N);
}

extern "C" weft_status cuda_convert(void *kctx, int64_t n, weft_dtype src_dt, const void *src,
				    weft_dtype dretdt, void *dst)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "convert");

	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	if (src_dt == dretdt) {
		cudaError_t err = cudaMemcpyAsync(dst, src, (size_t)n * cuda_dt_size(src_dt),
						  cudaMemcpyDeviceToDevice, c->stream);

		return err == cudaSuccess ? WEFT_OK :
		       cuda_fail("convert", c->index, err, "%s n %lld", cuda_dt_name(src_dt),
				 (long long)n);
	}
	k_convert<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, src_dt, src, dretdt, dst);
	return cuda_launched(c, "convert", "%s to %s n %lld", cuda_dt_name(src_dt),
			     cuda_dt_name(dretdt), (long long)n);
}

extern "C" weft_status cuda_scale_matrix(cuda_ctx *c, weft_dtype dt, int64_t m, int64_t n,
					 int64_t ldc, int64_t stride_c, int64_t batch, float beta,
					 void *cm)
{
	int64_t total = m * n * batch;

	if (total <= 0)
		return WEFT_OK;
	k_scale_matrix<<<grid_for(total, THREADS), THREADS, 0, c->stream>>>(m, n, ldc, stride_c,
									     batch, dt, beta, cm);
	return cuda_launched(c, "gemm", "%s %lld x %lld with k = 0, batch %lld",
			     cuda_dt_name(dt), (long long)m, (long long)n, (long long)batch);
}

extern "C" weft_status cuda_relu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x,
					 void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "relu_forward");

	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	k_relu_fwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, x, out);
	return cuda_launched(c, "relu_forward", SIZES_N);
}

extern "C" weft_status cuda_relu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
					  const void *dy, void *dx)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "relu_backward");

	if (ret)
		return ret;
	if (n <= 0 || !dx)
		return WEFT_OK;
	k_relu_bwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, x, dy, dx);
	return cuda_launched(c, "relu_backward", SIZES_N);
}

extern "C" weft_status cuda_gelu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x,
					 void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "gelu_forward");

	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	k_gelu_fwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, x, out);
	return cuda_launched(c, "gelu_forward", SIZES_N);
}

extern "C" weft_status cuda_gelu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
					  const void *dy, void *dx)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "gelu_backward");

	if (ret)
		return ret;
	if (n <= 0 || !dx)
		return WEFT_OK;
	k_gelu_bwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, x, dy, dx);
	return cuda_launched(c, "gelu_backward", SIZES_N);
}

#define GELU_RSQRT2 0.7071067811865476f  /* 1 / sqrt(2) */
#define GELU_RSQRT2PI 0.3989422804014327f /* 1 / sqrt(2 pi) */

__global__ void k_gelu_erf_fwd(int64_t n, int dt, const void *x, void *out)
{
	GRID_STRIDE(i, n) {
		float v = ld(x, i, dt);

		st(out, i, dt, 0.5f * v * (1.0f + erff(v * GELU_RSQRT2)));
	}
}

__global__ void k_gelu_erf_bwd(int64_t n, int dt, const void *x, const void *dy, void *dx)
{
	GRID_STRIDE(i, n) {
		float v = ld(x, i, dt);
		float cdf = 0.5f * (1.0f + erff(v * GELU_RSQRT2));

		st(dx, i, dt, ld(dx, i, dt) +
			      ld(dy, i, dt) * (cdf + v * GELU_RSQRT2PI * expf(-0.5f * v * v)));
	}
}

extern "C" weft_status cuda_gelu_erf_forward(void *kctx, weft_dtype dt, int64_t n,
					     const void *x, void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "gelu_erf_forward");

	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	k_gelu_erf_fwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, x, out);
	return cuda_launched(c, "gelu_erf_forward", SIZES_N);
}

extern "C" weft_status cuda_gelu_erf_backward(void *kctx, weft_dtype dt, int64_t n,
					      const void *x, const void *dy, void *dx)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "gelu_erf_backward");

	if (ret)
		return ret;
	if (n <= 0 || !dx)
		return WEFT_OK;
	k_gelu_erf_bwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, x, dy, dx);
	return cuda_launched(c, "gelu_erf_backward", SIZES_N);
}

extern "C" weft_status cuda_dropout_forward(void *kctx, weft_dtype dt, int64_t n, float p,
					    uint64_t key, int64_t first, const void *x, void *out)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "dropout_forward");

	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	k_dropout_fwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, p, 1.0f / (1.0f - p),
									 key, first, x, out);
	return cuda_launched(c, "dropout_forward", SIZES_N);
}

extern "C" weft_status cuda_dropout_backward(void *kctx, weft_dtype dt, int64_t n, float p,
					     uint64_t key, int64_t first, const void *dy,
					     void *dx)
{
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, "dropout_backward");

	if (ret)
		return ret;
	if (n <= 0 || !dx)
		return WEFT_OK;
	k_dropout_bwd<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, p, 1.0f / (1.0f - p),
									 key, first, dy, dx);
	return cuda_launched(c, "dropout_backward", SIZES_N);
}
