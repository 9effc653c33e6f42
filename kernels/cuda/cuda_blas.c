/* Matrix products through cuBLAS (cublasGemmStridedBatchedEx, fp32
 * accumulation; F32 without TF32), the GEMM helper attention uses, and the
 * low-precision product of mixed precision (16-bit A and B, F32 C). */
#include "cuda_impl.h"

static cudaDataType_t blas_type(weft_dtype dt)
{
	switch (dt) {
	case WEFT_BF16: return CUDA_R_16BF;
	case WEFT_F16: return CUDA_R_16F;
	default: return CUDA_R_32F;
	}
}

static int fits_int(int64_t v)
{
	return v >= 0 && v <= 0x7fffffff;
}

weft_status cuda_gemm_ex(cuda_ctx *c, const char *kernel, weft_dtype in_dt, weft_dtype out_dt,
			 int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
			 const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
			 int64_t stride_b, float beta, void *cm, int64_t ldc, int64_t stride_c,
			 int64_t batch)
{
	cublasStatus_t bst = CUBLAS_STATUS_SUCCESS;
	int64_t calls = 1, per_call = batch;

	if (m <= 0 || n <= 0 || batch <= 0)
		return WEFT_OK;
	if (k <= 0 && stride_c == 0 && batch > 1) {
		/* one shared C scaled once per product, as the CPU does; a single
		 * launch over the batch would have its threads race on C */
		weft_status st = WEFT_OK;

		for (int64_t i = 0; i < batch && !st; i++)
			st = cuda_scale_matrix(c, out_dt, m, n, ldc, 0, 1, beta, cm);
		return st;
	}
	if (k <= 0) /* C = beta * C */
		return cuda_scale_matrix(c, out_dt, m, n, ldc, stride_c, batch, beta, cm);
	if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) ||
	    !fits_int(ldc) || !fits_int(batch))
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED,
					    "cuda:%d kernel %s: %lld x %lld x %lld (batch %lld, "
					    "lda %lld, ldb %lld, ldc %lld) exceeds cuBLAS's 32-bit "
					    "sizes: split the operation", (int)c->index, kernel,
					    (long long)m, (long long)n, (long long)k, (long long)batch,
					    (long long)lda, (long long)ldb, (long long)ldc);
	/* one shared C accumulated over the batch: run the products in turn */
	if (stride_c == 0 && batch > 1) {
		calls = batch;
		per_call = 1;
	}
	/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
	 * swap the operands and m, n. */
	for (int64_t i = 0; i < calls && bst == CUBLAS_STATUS_SUCCESS; i++) {
		const char *ai = (const char *)a + i * stride_a * (int64_t)cuda_dt_size(in_dt);
		const char *bi = (const char *)b + i * stride_b * (int64_t)cuda_dt_size(in_dt);

		bst = cublasGemmStridedBatchedEx(c->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
						 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
						 (int)k, &alpha, bi, blas_type(in_dt), (int)ldb,
						 stride_b, ai, blas_type(in_dt), (int)lda, stride_a,
						 &beta, cm, blas_type(out_dt), (int)ldc, stride_c,
						 (int)per_call, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	}
	if (bst != CUBLAS_STATUS_SUCCESS)
		return cuda_blas_fail(kernel, c->index, bst,
				      "%s %s%s %lld x %lld x %lld, batch %lld, lda %lld ldb %lld "
				      "ldc %lld", cuda_dt_name(in_dt), trans_a ? "T" : "N",
				      trans_b ? "T" : "N", (long long)m, (long long)n, (long long)k,
				      (long long)batch, (long long)lda, (long long)ldb,
				      (long long)ldc);
	return cuda_launched(c, kernel, "%lld x %lld x %lld, batch %lld", (long long)m,
			     (long long)n, (long long)k, (long long)batch);
}

weft_status cuda_gemm(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m, int64_t n,
		      int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
		      const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
		      int64_t ldc, int64_t stride_c, int64_t batch)
{
	weft_status st = cuda_need_ctx(kctx, "gemm");

	if (st)
		return st;
	return cuda_gemm_ex(kctx, "gemm", dt, dt, trans_a, trans_b, m, n, k, alpha, a, lda,
			    stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

/* Mixed precision's product: BF16 or F16 A and B, F32 C, CUBLAS_COMPUTE_32F
 * (the tensor-core path); needs no scratch. */
weft_status cuda_gemm_lowp(void *kctx, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
			   int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			   int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
			   float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch,
			   void *scratch)
{
	weft_status st = cuda_need_ctx(kctx, "gemm_lowp");

	(void)scratch;
	if (st)
		return st;
	if (in_dt != WEFT_F32 && in_dt != WEFT_F16 && in_dt != WEFT_BF16)
		return cuda_host->error_set(WEFT_ERR_DTYPE, "cuda kernel gemm_lowp: inputs of dtype "
					    "%d; it takes F32, F16 or BF16", (int)in_dt);
	return cuda_gemm_ex(kctx, "gemm_lowp", in_dt, WEFT_F32, trans_a, trans_b, m, n, k, alpha,
			    a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}
