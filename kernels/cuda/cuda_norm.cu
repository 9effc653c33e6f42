/* Gradient clipping's sum of squares on the device (kernels_cuda.h,
 * sum_squares). Two kernels with fixed launch sizes, so the order of every
 * addition depends only on n: each of NB blocks sums a grid-stride share in
 * double and reduces it in shared memory as a fixed tree, then one block
 * adds the NB partial sums the same way. The result crosses to the host
 * with the stream's copy, waited for. sum_squares_ranges (weft/device.h)
 * runs the same two kernels per range into a slot of its own, adds the
 * slots in range order on the device, and waits once. */
#include "cuda_dev.cuh"

#define SQ_THREADS 256
#define SQ_BLOCKS 512 /* partial sums; also the second kernel's threads */

/* Shared-memory tree over blockDim.x (a power of two) doubles. */
__device__ static double block_tree(double *sh, double v)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			sh[threadIdx.x] = __dadd_rn(sh[threadIdx.x], sh[threadIdx.x + s]);
		__syncthreads();
	}
	return sh[0];
}

__global__ void k_sumsq_partial(int64_t n, const float *x, double *partial)
{
	__shared__ double sh[SQ_THREADS];
	double acc = 0.0;

	GRID_STRIDE(i, n) {
		double v = (double)x[i];

		acc = __dadd_rn(acc, __dmul_rn(v, v));
	}
	acc = block_tree(sh, acc);
	if (threadIdx.x == 0)
		partial[blockIdx.x] = acc;
}

__global__ void k_sumsq_final(const double *partial, double *dst)
{
	__shared__ double sh[SQ_BLOCKS];
	double total = block_tree(sh, partial[threadIdx.x]);

	if (threadIdx.x == 0)
		*dst = total;
}

/* The ranges' sums added in range order, by one thread. */
__global__ void k_sum_in_order(int64_t n, const double *v, double *out)
{
	double s = 0.0;

	if (threadIdx.x != 0 || blockIdx.x != 0)
		return;
	for (int64_t i = 0; i < n; i++)
		s = __dadd_rn(s, v[i]);
	*out = s;
}

extern "C" weft_status cuda_sum_squares(void *kctx, int64_t n, const float *x, double *out)
{
	const char *name = "sum_squares";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);
	double *partial;
	cudaError_t err;

	*out = 0.0;
	if (ret)
		return ret;
	if (n <= 0)
		return WEFT_OK;
	ret = cuda_rows_reserve(c, name, (SQ_BLOCKS + 1) * sizeof(double));
	if (ret)
		return ret;
	partial = (double *)c->rows;
	k_sumsq_partial<<<SQ_BLOCKS, SQ_THREADS, 0, c->stream>>>(n, x, partial);
	ret = cuda_launched(c, name, "n %lld (partial sums)", (long long)n);
	if (ret)
		return ret;
	k_sumsq_final<<<1, SQ_BLOCKS, 0, c->stream>>>(partial, partial + SQ_BLOCKS);
	ret = cuda_launched(c, name, "n %lld (final sum)", (long long)n);
	if (ret)
		return ret;
	err = cudaMemcpyAsync(out, partial + SQ_BLOCKS, sizeof(double), cudaMemcpyDeviceToHost,
			      c->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(c->stream);
	if (err != cudaSuccess)
		return cuda_fail(name, c->index, err, "n %lld: copying the sum to the host",
				 (long long)n);
	return WEFT_OK;
}

extern "C" weft_status cuda_sum_squares_ranges(void *kctx, const float *x,
					       const weft_elem_range *ranges, size_t n, double *out)
{
	const char *name = "sum_squares_ranges";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);
	double *partial, *sums;
	cudaError_t err;

	*out = 0.0;
	if (ret)
		return ret;
	if (n == 0)
		return WEFT_OK;
	for (size_t i = 0; i < n; i++)
		if (ranges[i].offset < 0 || ranges[i].count < 0)
			return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda kernel %s: range %zu "
						    "has a negative offset or count (%lld, %lld)",
						    name, i, (long long)ranges[i].offset,
						    (long long)ranges[i].count);
	/* partial sums, then one slot per range, then the total */
	ret = cuda_rows_reserve(c, name, (SQ_BLOCKS + n + 1) * sizeof(double));
	if (ret)
		return ret;
	partial = (double *)c->rows;
	sums = partial + SQ_BLOCKS;
	for (size_t i = 0; i < n; i++) {
		k_sumsq_partial<<<SQ_BLOCKS, SQ_THREADS, 0, c->stream>>>(
			ranges[i].count, x + ranges[i].offset, partial);
		ret = cuda_launched(c, name, "range %zu of %zu, n %lld (partial sums)", i, n,
				    (long long)ranges[i].count);
		if (ret)
			return ret;
		k_sumsq_final<<<1, SQ_BLOCKS, 0, c->stream>>>(partial, sums + i);
		ret = cuda_launched(c, name, "range %zu of %zu (final sum)", i, n);
		if (ret)
			return ret;
	}
	k_sum_in_order<<<1, 1, 0, c->stream>>>((int64_t)n, sums, sums + n);
	ret = cuda_launched(c, name, "%zu ranges (total)", n);
	if (ret)
		return ret;
	err = cudaMemcpyAsync(out, sums + n, sizeof(double), cudaMemcpyDeviceToHost, c->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(c->stream);
	if (err != cudaSuccess)
		return cuda_fail(name, c->index, err, "%zu ranges: copying the sum to the host", n);
	return WEFT_OK;
}
