/* emu_blas.cpp - the cuBLAS stand-in of the emulated runtime:
 * cublasGemmStridedBatchedEx as a column-major reference that accumulates
 * in double, checks its arguments as cuBLAS documents them (m, n, k >= 0,
 * lda >= max(1, rows of op(A) as stored), ..., the type combination) and
 * that every element of every batch lies inside one device allocation,
 * and is queued on the handle's stream like any other device work. */
#include "emu_impl.h"
#include "emu_blas_impl.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdio.h>
#include <stdlib.h>

#include <vector>

struct emu_blas_handle {
	cudaStream_t stream;
	cublasMath_t math;
};

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
	emu_blas_handle *e = (emu_blas_handle *)calloc(1, sizeof(*e));

	if (!e)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*h = (cublasHandle_t)e;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
	((emu_blas_handle *)h)->stream = s;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s)
{
	*s = ((emu_blas_handle *)h)->stream;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
	((emu_blas_handle *)h)->math = m;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	default: return "CUBLAS_STATUS_?";
	}
}

const char *cublasGetStatusString(cublasStatus_t s)
{
	return cublasGetStatusName(s);
}

} /* extern "C" */

struct gemm_args {
	cublasOperation_t ta, tb;
	int m, n, k;
	float alpha, beta;
	const void *A, *B;
	void *C;
	cudaDataType At, Bt, Ct;
	int lda, ldb, ldc;
	long long sA, sB, sC;
	int batch;
	cublasMath_t math;
};

/* EMU_COUNTS: a GEMM's traffic and FLOPs from its arguments, classed by
 * the GPU units that run it (emu_count.cpp). */
static void gemm_count(const gemm_args &g)
{
	double batch = (double)g.batch, m = (double)g.m, n = (double)g.n, k = (double)g.k;
	double rd = batch * (m * k * (double)tsize(g.At) + k * n * (double)tsize(g.Bt) +
			     (g.beta != 0.0f ? m * n * (double)tsize(g.Ct) : 0.0));
	double wr = batch * m * n * (double)tsize(g.Ct);
	const char *cls = g.At != CUDA_R_32F ? "tc16" :
			  ((int)g.math & 0xf) == (int)CUBLAS_TF32_TENSOR_OP_MATH ? "tf32" : "fp32";
	char name[96];

	snprintf(name, sizeof(name), "cublasGemm %c%c %s->%s%s", g.ta == CUBLAS_OP_N ? 'N' : 'T',
		 g.tb == CUBLAS_OP_N ? 'N' : 'T', type_name(g.At), type_name(g.Ct),
		 g.batch > 1 ? " batched" : "");
	emu_count_record('G', name, rd, wr, 2.0 * batch * m * n * k, cls);
}

/* op(A) row by row and op(B) column by column as floats, then each
 * element of C as a double sum over k. */
static void gemm_run(const gemm_args &g)
{
	std::vector<float> a_rows, b_cols;

	if (emu_counting())
		gemm_count(g);

	for (int bi = 0; bi < g.batch; bi++) {
		const void *a = (const char *)g.A + (size_t)(bi * g.sA) * tsize(g.At);
		const void *b = (const char *)g.B + (size_t)(bi * g.sB) * tsize(g.Bt);
		void *c = (char *)g.C + (size_t)(bi * g.sC) * tsize(g.Ct);

		emu_blas_gather(g.ta, g.tb, g.m, g.n, g.k, a, g.At, g.lda, b, g.Bt, g.ldb, a_rows,
				b_cols);
		for (int j = 0; j < g.n; j++) {
			for (int i = 0; i < g.m; i++) {
				long long at = i + (long long)j * g.ldc;
				double s = emu_blas_dot(a_rows, b_cols, i, j, g.k), old;

				old = g.beta == 0.0f ? 0.0 : (double)g.beta * load(c, g.Ct, at);
				store(c, g.Ct, at, (float)(g.alpha * s + old));
			}
		}
	}
}

extern "C" cublasStatus_t cublasGemmStridedBatchedEx(
	cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
	const void *alpha, const void *A, cudaDataType At, int lda, long long sA, const void *B,
	cudaDataType Bt, int ldb, long long sB, const void *beta, void *C, cudaDataType Ct, int ldc,
	long long sC, int batch, cublasComputeType_t ct, cublasGemmAlgo_t algo)
{
	int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m; /* A as stored */
	int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
	char opa = ta == CUBLAS_OP_N ? 'N' : 'T', opb = tb == CUBLAS_OP_N ? 'N' : 'T';
	gemm_args g;

	(void)algo;
	emu_gemms++;
	if (emu_tracing())
		fprintf(stderr, "emu: gemm %c%c m %d n %d k %d lda %d ldb %d ldc %d sA %lld sB %lld "
			"sC %lld batch %d types %d %d %d\n", opa, opb, m, n, k, lda, ldb, ldc, sA, sB,
			sC, batch, (int)At, (int)Bt, (int)Ct);
	if (!h) {
		emu_report("cublasGemmStridedBatchedEx: the handle is NULL (cublasCreate first)");
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (ra > 1 ? ra : 1) ||
	    ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1)) {
		emu_report("cublasGemmStridedBatchedEx: invalid value: %c%c m %d n %d k %d lda %d "
			   "(needs >= %d) ldb %d (needs >= %d) ldc %d (needs >= %d) batch %d", opa, opb,
			   m, n, k, lda, ra, ldb, rb, ldc, m, batch);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (ct != CUBLAS_COMPUTE_32F || At != Bt ||
	    !((At == CUDA_R_32F && Ct == CUDA_R_32F) ||
	      ((At == CUDA_R_16BF || At == CUDA_R_16F) && (Ct == At || Ct == CUDA_R_32F)))) {
		emu_report("cublasGemmStridedBatchedEx: type combination A %d B %d C %d compute %d "
			   "is not one cuBLAS supports", (int)At, (int)Bt, (int)Ct, (int)ct);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	if (m == 0 || n == 0 || batch == 0)
		return CUBLAS_STATUS_SUCCESS;
	for (int bi = 0; bi < batch; bi++) {
		const char *a = (const char *)A + (size_t)(bi * sA) * tsize(At);
		const char *b = (const char *)B + (size_t)(bi * sB) * tsize(Bt);
		char *c = (char *)C + (size_t)(bi * sC) * tsize(Ct);
		size_t span_a = k ? ((size_t)(ca - 1) * lda + ra) * tsize(At) : 0;
		size_t span_b = k ? ((size_t)(cb - 1) * ldb + rb) * tsize(Bt) : 0;
		size_t span_c = ((size_t)(n - 1) * ldc + m) * tsize(Ct);
		int bad_a = k && !emu_dev_range_ok(a, span_a), bad_b = k && !emu_dev_range_ok(b, span_b);
		int bad_c = !emu_dev_range_ok(c, span_c);

		if (bad_a || bad_b || bad_c) {
			emu_report("cublasGemmStridedBatchedEx: batch %d reads or writes outside a "
				   "device allocation (A %s, B %s, C %s; %c%c m %d n %d k %d lda %d "
				   "ldb %d ldc %d)", bi, bad_a ? "BAD" : "ok", bad_b ? "BAD" : "ok",
				   bad_c ? "BAD" : "ok", opa, opb, m, n, k, lda, ldb, ldc);
			return CUBLAS_STATUS_EXECUTION_FAILED;
		}
	}
	/* host pointer mode: alpha and beta are read now, as cuBLAS does */
	g = gemm_args{ ta, tb, m, n, k, *(const float *)alpha, *(const float *)beta, A, B, C,
		       At, Bt, Ct, lda, ldb, ldc, sA, sB, sC, batch,
		       ((emu_blas_handle *)h)->math };
	if (emu_enqueue(((emu_blas_handle *)h)->stream, "cublasGemmStridedBatchedEx",
			[g] { gemm_run(g); }) != cudaSuccess)
		return CUBLAS_STATUS_EXECUTION_FAILED;
	return CUBLAS_STATUS_SUCCESS;
}
