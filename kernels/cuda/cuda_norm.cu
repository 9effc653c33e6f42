/* Gradient clipping's sum of squares on the device (kernels_cuda.h,
 * sum_squares). Two kernels with fixed launch sizes, so the order of every
 * addition depends only on n: each of NB blocks sums a grid-stride share in
 * double and reduces it in shared memory as a fixed tree, then one block
 * adds the NB partial sums the same way. The result crosses to the host
 * with the stream's copy, waited for. */
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

__global__ void k_sumsq_final(double *partial)
{
	__shared__ double sh[SQ_BLOCKS];
	double total = block_tree(sh, partial[threadIdx.x]);

	if (threadIdx.x == 0)
		partial[SQ_BLOCKS] = total;
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
	k_sumsq_final<<<1, SQ_BLOCKS, 0, c->stream>>>(partial);
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
