/* emu_blas_impl.h - what the cuBLAS stand-in (emu_blas.cpp) and the
 * cuBLASLt stand-in (emu_blaslt.cpp) share: element loads and stores of
 * the 16-bit and F32 types, and a column-major product's operands gathered
 * as floats with each dot product summed in double. */
#ifndef WEFT_EMU_BLAS_IMPL_H
#define WEFT_EMU_BLAS_IMPL_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <vector>

static inline float load(const void *p, cudaDataType t, long long i)
{
	switch (t) {
	case CUDA_R_16BF: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
	case CUDA_R_16F: return __half2float(((const __half *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

static inline void store(void *p, cudaDataType t, long long i, float v)
{
	switch (t) {
	case CUDA_R_16BF: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
	case CUDA_R_16F: ((__half *)p)[i] = __float2half_rn(v); break;
	default: ((float *)p)[i] = v; break;
	}
}

static inline size_t tsize(cudaDataType t)
{
	return t == CUDA_R_32F ? 4 : 2;
}

static inline const char *type_name(cudaDataType t)
{
	return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "f16" : "f32";
}

/* op(A) (m x k) row by row into a_rows and op(B) (k x n) column by column
 * into b_cols, as floats, from column-major A (lda) and B (ldb). */
static inline void emu_blas_gather(cublasOperation_t ta, cublasOperation_t tb, int m, int n,
				   int k, const void *a, cudaDataType At, long long lda,
				   const void *b, cudaDataType Bt, long long ldb,
				   std::vector<float> &a_rows, std::vector<float> &b_cols)
{
	a_rows.resize((size_t)m * k);
	b_cols.resize((size_t)n * k);
	for (int i = 0; i < m; i++)
		for (int p = 0; p < k; p++)
			a_rows[(size_t)i * k + p] = ta == CUBLAS_OP_N ? load(a, At, i + p * lda) :
									load(a, At, p + i * lda);
	for (int j = 0; j < n; j++)
		for (int p = 0; p < k; p++)
			b_cols[(size_t)j * k + p] = tb == CUBLAS_OP_N ? load(b, Bt, p + j * ldb) :
									load(b, Bt, j + p * ldb);
}

/* Element (i, j) of op(A) op(B), summed in double. */
static inline double emu_blas_dot(const std::vector<float> &a_rows,
				  const std::vector<float> &b_cols, int i, int j, int k)
{
	const float *x = &a_rows[(size_t)i * k], *y = &b_cols[(size_t)j * k];
	double s = 0.0;

	for (int p = 0; p < k; p++)
		s += (double)x[p] * (double)y[p];
	return s;
}

#endif /* WEFT_EMU_BLAS_IMPL_H */
