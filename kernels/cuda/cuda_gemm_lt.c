/* gemm_lowp_ex on CUDA: the product of 16-bit operands with a fused
 * epilogue (weft_kernel_table; kernels/cpu/cpu_gemm_ex.c is the reference).
 * Two paths, chosen per call:
 *
 *  - fused: one cublasLtMatmul, compute CUBLAS_COMPUTE_32F, scale F32,
 *    A and B BF16 or F16, C = D of C's dtype, the epilogue DEFAULT, BIAS,
 *    GELU_AUX, GELU_AUX_BIAS, DGELU or BGRADB (below), the bias of D's type
 *    (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, as cublasLt.h requires): the
 *    caller's F32 bias for an F32 C; for a 16-bit C the bias rounded to
 *    C's dtype (the contract) by the table's convert kernel into the
 *    context's row scratch (c->rows, grown on demand and kept, so steady
 *    state allocates nothing), stream-ordered before the matmul, which
 *    reads it; aux (C's dtype) at EPILOGUE_AUX_POINTER with
 *    EPILOGUE_AUX_LD = ldc. Row-major C = op(A)
 *    op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B,
 *    its B our A, its D n x m with leading dimension ldc, so the bias runs
 *    along D's rows as cuBLASLt's BIAS epilogue wants. A 16-bit C allows
 *    only the split-K reductions that keep partial sums in F32
 *    (REDUCTION_SCHEME NONE or COMPUTE_TYPE), as the cuBLAS handle's
 *    DISALLOW_REDUCED_PRECISION_REDUCTION does for gemm.
 *  - unfused: cuda_gemm_ex (cublasGemmStridedBatchedEx, F32 compute) into
 *    an F32 product (C itself when C is F32, else the context's row
 *    scratch), then this library's epilogue kernel (cuda_gemm_epi.cu),
 *    which computes what the CPU does (a 16-bit C's bias rounded to its
 *    dtype in the kernel), up to the order of the sums and tanhf's ulps.
 *
 *
 * BGRAD (since ABI 1.7) is cuBLASLt's CUBLASLT_EPILOGUE_BGRADB. cublasLt.h
 * (CUDA 13.0) and the cuBLAS guide's cublasLtEpilogue_t table: BGRADA
 * sums "the input matrix A", its length "the number of rows of the matrix
 * D", BGRADB "the input matrix B", "the number of columns of the matrix
 * D", both reducing "over the GEMM's k dimension" and storing to
 * CUBLASLT_MATMUL_DESC_BIAS_POINTER. Our A is cuBLASLt's B and our m rows
 * are its D's m columns, so the sums over k of op(A)'s rows are BGRADB's.
 * The header's BIAS_POINTER entry: "Bias gradient vector elements are the
 * same type as the output elements (Ctype)" (BIAS_DATA_TYPE's exceptions
 * are IMMA and FP8 kernels), and the heuristic reads the pointer's
 * alignment. So BGRAD is fused with an F32 C only (aux is F32; a 16-bit C
 * would have its sums rounded), the pointer is aux itself for beta 0; for
 * beta 1, since cuBLASLt writes the bias gradient and never adds, it is
 * the context's row scratch (m floats, kept), then aux += it by the axpy
 * kernel: one launch and 12 m bytes, against a second read of A (2 m k
 * bytes) unfused. Unfused, C is the product and the sums are
 * sum_rows_lowp's column-sum kernels when A is dense and transposed (a
 * linear layer's dy), else cuda_gemm_bgrad (cuda_gemm_epi.cu).
 *
 * The fused path is taken unless: k is 0; the epilogue is GELU or DGELU
 * and ldc is not a multiple of 8 (cuBLASLt's header: the GELU aux leading
 * dimension "must be divisible by 8"); or cuBLASLt's heuristic offers no
 * algorithm for the call (CUBLAS_STATUS_NOT_SUPPORTED or INVALID_VALUE,
 * or none returned; the emulator's stand-in reports an invalid one):
 * the heuristic is told each pointer's actual alignment
 * (MIN_ALIGNMENT_*_BYTES) and the bias and aux pointers, so it refuses
 * what its kernels cannot take, for instance operands that are not 16-byte
 * aligned; or the epilogue is BGRAD and C is 16-bit (above). The rounded bias costs a launch of n elements per fused call
 * with a 16-bit C and a bias; it is not cached across calls, since the
 * kernel table sees only the bias's address, and the optimizer rewrites
 * the bias in place every step.
 *
 * The cuBLASLt handle and a 32 MiB workspace are made at the first call
 * on a context and kept until ctx_destroy; each call shape (dtypes,
 * transposes, sizes, leading dimensions, epilogue, bias or not, pointer
 * alignments) has a plan - its descriptors and the heuristic's algorithm,
 * or the note that it has none - in a cache of LT_PLANS, the least
 * recently used replaced. Steady state allocates nothing.
 */
#include <cublasLt.h>
#include <stdint.h>
#include <string.h>

#include "cuda_impl.h"
#include "weft/gemm_ex.h"

#define LT_WORKSPACE_BYTES ((size_t)32 << 20)
#define LT_PLANS 32
#define LT_IN_DTS (WEFT_DTYPE_BIT(WEFT_BF16) | WEFT_DTYPE_BIT(WEFT_F16))

/* What a plan depends on (compared with memcmp: zeroed before filled). */
typedef struct lt_key {
	int32_t in_dt, c_dt, trans_a, trans_b, epilogue, has_bias;
	int64_t m, n, k, lda, ldb, ldc;
	uint32_t align[5]; /* of a, b, c, bias, aux in bytes, at most 256 */
} lt_key;

typedef struct lt_plan {
	lt_key key;
	int used, fused; /* fused: cuBLASLt offered an algorithm */
	uint64_t last;   /* lt->calls when last used */
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
} lt_plan;

struct cuda_lt {
	cublasLtHandle_t handle;
	void *workspace;
	uint64_t calls;
	lt_plan plans[LT_PLANS];
};

static cudaDataType_t lt_type(weft_dtype dt)
{
	return dt == WEFT_BF16 ? CUDA_R_16BF : dt == WEFT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* The largest power of two up to 256 that divides p's address. */
static uint32_t lt_align(const void *p)
{
	uintptr_t u = (uintptr_t)p;
	uint32_t a = 256;

	while (a > 1 && (u & (a - 1)))
		a >>= 1;
	return a;
}

static cublasLtEpilogue_t lt_epilogue(int32_t epilogue, int has_bias)
{
	switch (epilogue) {
	case WEFT_EPI_BGRAD: return CUBLASLT_EPILOGUE_BGRADB; /* our A is its B */
	case WEFT_EPI_GELU: return has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS :
					      CUBLASLT_EPILOGUE_GELU_AUX;
	case WEFT_EPI_DGELU: return CUBLASLT_EPILOGUE_DGELU;
	default: return has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
	}
}

static void plan_clear(lt_plan *p)
{
	if (p->la)
		cublasLtMatrixLayoutDestroy(p->la);
	if (p->lb)
		cublasLtMatrixLayoutDestroy(p->lb);
	if (p->lc)
		cublasLtMatrixLayoutDestroy(p->lc);
	if (p->op)
		cublasLtMatmulDescDestroy(p->op);
	memset(p, 0, sizeof(*p));
}

void cuda_lt_release(cuda_ctx *c)
{
	struct cuda_lt *lt = c->lt;

	if (!lt)
		return;
	for (int i = 0; i < LT_PLANS; i++)
		plan_clear(&lt->plans[i]);
	if (lt->workspace) {
		cudaFree(lt->workspace);
		cuda_account_device(WEFT_MEM_OTHER, -(int64_t)LT_WORKSPACE_BYTES);
	}
	if (lt->handle)
		cublasLtDestroy(lt->handle);
	cuda_host->mem_free(lt);
	c->lt = NULL;
}

/* c->lt, made at the first call. */
static weft_status lt_get(cuda_ctx *c, struct cuda_lt **out)
{
	struct cuda_lt *lt = c->lt;
	cublasStatus_t bst;
	cudaError_t err;

	if (lt) {
		*out = lt;
		return WEFT_OK;
	}
	lt = cuda_host->mem_calloc(WEFT_MEM_OTHER, sizeof(*lt));
	if (!lt)
		return cuda_host->error_set(WEFT_ERR_NOMEM, "cuda:%d kernel gemm_lowp_ex: no host "
					    "memory for its cuBLASLt plans", (int)c->index);
	c->lt = lt;
	bst = cublasLtCreate(&lt->handle);
	if (bst != CUBLAS_STATUS_SUCCESS) {
		lt->handle = NULL;
		cuda_lt_release(c);
		return cuda_blas_fail("gemm_lowp_ex", c->index, bst, "cublasLtCreate");
	}
	err = cudaMalloc(&lt->workspace, LT_WORKSPACE_BYTES);
	if (err != cudaSuccess) {
		lt->workspace = NULL;
		cuda_lt_release(c);
		return cuda_fail("gemm_lowp_ex", c->index, err, "%zu bytes of cuBLASLt workspace",
				 LT_WORKSPACE_BYTES);
	}
	cuda_account_device(WEFT_MEM_OTHER, (int64_t)LT_WORKSPACE_BYTES);
	*out = lt;
	return WEFT_OK;
}

#define LT_TRY(call)                                   \
	do {                                           \
		if (st == CUBLAS_STATUS_SUCCESS)       \
			st = (call);                   \
	} while (0)

/* Fills plan p for key (descriptors, the heuristic's algorithm); bias and
 * aux are the call's, whose alignment the heuristic reads. A heuristic
 * that supports nothing leaves p->fused 0 and is not an error. */
static cublasStatus_t plan_build(struct cuda_lt *lt, lt_plan *p, const lt_key *key,
				 const void *bias, void *aux)
{
	cudaDataType_t in = lt_type(key->in_dt), out = lt_type(key->c_dt);
	int32_t opa = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A: our B */
	int32_t opb = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
	uint32_t epi = lt_epilogue(key->epilogue, key->has_bias);
	int32_t bias_type = lt_type(key->c_dt); /* D's: F32, or the rounded copy */
	int64_t aux_ld = key->ldc;
	uint32_t scheme = key->c_dt == WEFT_F32 ? CUBLASLT_REDUCTION_SCHEME_MASK :
			  CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
	uint64_t ws = LT_WORKSPACE_BYTES;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res;
	cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
	int found = 0;

	memset(p, 0, sizeof(*p));
	p->key = *key;
	p->used = 1;
	LT_TRY(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
					      sizeof(opa)));
	LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
					      sizeof(opb)));
	LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
					      sizeof(epi)));
	if (key->has_bias) {
		LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
						      &bias, sizeof(bias)));
		LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
						      &bias_type, sizeof(bias_type)));
	}
	if (key->epilogue == WEFT_EPI_BGRAD) /* the bias gradient's output, of D's type */
		LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
						      &bias, sizeof(bias)));
	if (key->epilogue == WEFT_EPI_GELU || key->epilogue == WEFT_EPI_DGELU) {
		LT_TRY(cublasLtMatmulDescSetAttribute(p->op,
						      CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
						      &aux, sizeof(aux)));
		LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
						      &aux_ld, sizeof(aux_ld)));
	}
	LT_TRY(cublasLtMatrixLayoutCreate(&p->la, in, (uint64_t)(key->trans_b ? key->k : key->n),
					  (uint64_t)(key->trans_b ? key->n : key->k), key->ldb));
	LT_TRY(cublasLtMatrixLayoutCreate(&p->lb, in, (uint64_t)(key->trans_a ? key->m : key->k),
					  (uint64_t)(key->trans_a ? key->k : key->m), key->lda));
	LT_TRY(cublasLtMatrixLayoutCreate(&p->lc, out, (uint64_t)key->n, (uint64_t)key->m,
					  key->ldc));
	LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
	LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
						    &ws, sizeof(ws)));
	LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
						    &key->align[1], sizeof(uint32_t)));
	LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
						    &key->align[0], sizeof(uint32_t)));
	LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
						    &key->align[2], sizeof(uint32_t)));
	LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
						    &key->align[2], sizeof(uint32_t)));
	LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref,
						    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
						    &scheme, sizeof(scheme)));
	LT_TRY(cublasLtMatmulAlgoGetHeuristic(lt->handle, p->op, p->la, p->lb, p->lc, p->lc, pref,
					      1, &res, &found));
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	/* cuBLASLt cannot do this call (NOT_SUPPORTED; INVALID_VALUE for a
	 * combination its heuristic rejects outright): the unfused path */
	if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE ||
	    (st == CUBLAS_STATUS_SUCCESS && found < 1))
		return CUBLAS_STATUS_SUCCESS;
	if (st == CUBLAS_STATUS_SUCCESS) {
		p->fused = 1;
		p->algo = res.algo;
	}
	return st;
}

/* The plan for key: found in the cache, or built in the least recently
 * used slot. */
static weft_status plan_get(cuda_ctx *c, struct cuda_lt *lt, const lt_key *key,
			    const void *bias, void *aux, lt_plan **out)
{
	lt_plan *p = NULL;
	cublasStatus_t bst;

	lt->calls++;
	for (int i = 0; i < LT_PLANS; i++) {
		lt_plan *q = &lt->plans[i];

		if (q->used && !memcmp(&q->key, key, sizeof(*key))) {
			q->last = lt->calls;
			*out = q;
			return WEFT_OK;
		}
		if (!p || !q->used || (p->used && q->last < p->last))
			p = q;
	}
	plan_clear(p);
	bst = plan_build(lt, p, key, bias, aux);
	if (bst != CUBLAS_STATUS_SUCCESS) {
		plan_clear(p);
		return cuda_blas_fail("gemm_lowp_ex", c->index, bst,
				      "cuBLASLt plan for %s%s %lld x %lld x %lld -> %s, epilogue %d",
				      key->trans_a ? "T" : "N", key->trans_b ? "T" : "N",
				      (long long)key->m, (long long)key->n, (long long)key->k,
				      cuda_dt_name((weft_dtype)key->c_dt), (int)key->epilogue);
	}
	p->last = lt->calls;
	*out = p;
	return WEFT_OK;
}

static weft_status lt_run(cuda_ctx *c, struct cuda_lt *lt, lt_plan *p, float alpha,
			  const void *a, const void *b, float beta, void *cm, const void *bias,
			  void *aux)
{
	const lt_key *key = &p->key;
	cublasStatus_t st = CUBLAS_STATUS_SUCCESS;

	/* this call's pointers (the plan's alignments hold for them) */
	if (key->has_bias || key->epilogue == WEFT_EPI_BGRAD)
		LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
						      &bias, sizeof(bias)));
	if (key->epilogue == WEFT_EPI_GELU || key->epilogue == WEFT_EPI_DGELU)
		LT_TRY(cublasLtMatmulDescSetAttribute(p->op,
						      CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
						      &aux, sizeof(aux)));
	LT_TRY(cublasLtMatmul(lt->handle, p->op, &alpha, b, p->la, a, p->lb, &beta, cm, p->lc, cm,
			      p->lc, &p->algo, lt->workspace, LT_WORKSPACE_BYTES, c->stream));
	if (st != CUBLAS_STATUS_SUCCESS)
		return cuda_blas_fail("gemm_lowp_ex", c->index, st,
				      "cublasLtMatmul %s%s %lld x %lld x %lld %s -> %s, epilogue %d, "
				      "lda %lld ldb %lld ldc %lld", key->trans_a ? "T" : "N",
				      key->trans_b ? "T" : "N", (long long)key->m,
				      (long long)key->n, (long long)key->k,
				      cuda_dt_name((weft_dtype)key->in_dt),
				      cuda_dt_name((weft_dtype)key->c_dt), (int)key->epilogue,
				      (long long)key->lda, (long long)key->ldb, (long long)key->ldc);
	return cuda_launched(c, "gemm_lowp_ex", "cublasLtMatmul %lld x %lld x %lld, epilogue %d",
			     (long long)key->m, (long long)key->n, (long long)key->k,
			     (int)key->epilogue);
}

/* BGRAD's bias gradient apart from the product: sum_rows_lowp's column-sum
 * kernels where A is op(A) transposed and dense (a linear layer's dy, k
 * rows of m), into aux zeroed first when beta is 0; else cuda_gemm_bgrad. */
static weft_status bgrad_apart(cuda_ctx *c, weft_dtype in_dt, int trans_a, int64_t m,
			       int64_t k, const void *a, int64_t lda, float beta, float *aux)
{
	cudaError_t err;

	if (!trans_a || lda != m)
		return cuda_gemm_bgrad(c, in_dt, trans_a, m, k, a, lda, beta != 0.0f, aux);
	if (beta == 0.0f) {
		err = cudaMemsetAsync(aux, 0, (size_t)m * sizeof(float), c->stream);
		if (err != cudaSuccess)
			return cuda_fail("gemm_lowp_ex", c->index, err, "zeroing the bias gradient "
					 "(%lld floats)", (long long)m);
	}
	return cuda_sum_rows_lowp(c, in_dt, k, m, a, aux);
}

/* The unfused path: the F32 product, then the epilogue kernel (and BGRAD's
 * sums, bgrad_apart). */
static weft_status unfused(cuda_ctx *c, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
			   int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			   const void *b, int64_t ldb, float beta, weft_dtype c_dt, void *cm,
			   int64_t ldc, const float *bias, int32_t epilogue, void *aux)
{
	float *d = cm;
	int64_t ldd = ldc;
	int bgrad = epilogue == WEFT_EPI_BGRAD;
	weft_status st;

	if (c_dt != WEFT_F32) { /* the F32 product in the row scratch; C added after */
		st = cuda_rows_reserve(c, "gemm_lowp_ex", (size_t)(m * n) * sizeof(float));
		if (st)
			return st;
		d = c->rows;
		ldd = n;
	}
	st = cuda_gemm_ex(c, "gemm_lowp_ex", in_dt, WEFT_F32, trans_a, trans_b, m, n, k, alpha, a,
			  lda, 0, b, ldb, 0, c_dt == WEFT_F32 ? beta : 0.0f, d, ldd, 0, 1);
	if (!st && (c_dt != WEFT_F32 || bias || epilogue == WEFT_EPI_GELU ||
		    epilogue == WEFT_EPI_DGELU))
		st = cuda_gemm_epilogue(c, m, n, d, ldd, c_dt != WEFT_F32 && beta != 0.0f, c_dt, cm,
					ldc, bias, bgrad ? WEFT_EPI_NONE : epilogue,
					bgrad ? NULL : aux);
	if (!st && bgrad)
		st = bgrad_apart(c, in_dt, trans_a, m, k, a, lda, beta, aux);
	return st;
}

weft_status cuda_gemm_lowp_ex(void *kctx, weft_dtype in_dt, int trans_a, int trans_b,
			      int64_t m, int64_t n, int64_t k, float alpha, const void *a,
			      int64_t lda, const void *b, int64_t ldb, float beta, weft_dtype c_dt,
			      void *cm, int64_t ldc, const float *bias, int32_t epilogue, void *aux)
{
	cuda_ctx *c = kctx;
	weft_status st = cuda_need_ctx(c, "gemm_lowp_ex");
	const char *bad;
	struct cuda_lt *lt = NULL;
	lt_plan *p = NULL;
	int bgrad = epilogue == WEFT_EPI_BGRAD;
	/* the bias cuBLASLt reads (of D's type), or BGRAD's output */
	const void *lt_bias = bgrad ? aux : bias;
	lt_key key;

	if (st)
		return st;
	bad = weft_gemm_ex_check(LT_IN_DTS, in_dt, c_dt, alpha, beta, epilogue, bias, aux, &st);
	if (bad)
		return cuda_host->error_set(st, "cuda:%d kernel gemm_lowp_ex: %s (got in_dt %d, "
					    "c_dt %d, alpha %g, beta %g, epilogue %d, bias %s, aux "
					    "%s)", (int)c->index, bad, (int)in_dt, (int)c_dt,
					    (double)alpha, (double)beta, (int)epilogue,
					    bias ? "set" : "NULL", aux ? "set" : "NULL");
	if (m <= 0)
		return WEFT_OK;
	if (n <= 0) /* no product; BGRAD's sums still are */
		return bgrad ? bgrad_apart(c, in_dt, trans_a, m, k, a, lda, beta, aux) : WEFT_OK;
	/* cuBLASLt writes the bias gradient in C's type (cublasLt.h,
	 * CUBLASLT_MATMUL_DESC_BIAS_POINTER): with a 16-bit C it would round
	 * the F32 sums the contract gives aux, so that case goes unfused */
	if (k <= 0 || ((epilogue == WEFT_EPI_GELU || epilogue == WEFT_EPI_DGELU) && ldc % 8 != 0) ||
	    (bgrad && c_dt != WEFT_F32))
		return unfused(c, in_dt, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
			       c_dt, cm, ldc, bias, epilogue, aux);
	if ((st = lt_get(c, &lt)))
		return st;
	if (bgrad && beta != 0.0f) {
		/* cuBLASLt writes the bias gradient: into the row scratch, then
		 * added to aux (one m-element pass) */
		if ((st = cuda_rows_reserve(c, "gemm_lowp_ex", (size_t)m * sizeof(float))))
			return st;
		lt_bias = c->rows;
	}
	if (bias && c_dt != WEFT_F32) {
		/* its place now (the heuristic reads its alignment); written
		 * below, only when the fused path takes the call */
		if ((st = cuda_rows_reserve(c, "gemm_lowp_ex", (size_t)n * cuda_dt_size(c_dt))))
			return st;
		lt_bias = c->rows;
	}
	memset(&key, 0, sizeof(key)); /* padding too: keys are compared with memcmp */
	key.in_dt = in_dt;
	key.c_dt = c_dt;
	key.trans_a = trans_a != 0;
	key.trans_b = trans_b != 0;
	key.epilogue = epilogue;
	key.has_bias = bias != NULL;
	key.m = m;
	key.n = n;
	key.k = k;
	key.lda = lda;
	key.ldb = ldb;
	key.ldc = ldc;
	key.align[0] = lt_align(a);
	key.align[1] = lt_align(b);
	key.align[2] = lt_align(cm);
	key.align[3] = lt_align(lt_bias);
	key.align[4] = lt_align(aux);
	if ((st = plan_get(c, lt, &key, lt_bias, aux, &p)))
		return st;
	if (!p->fused)
		return unfused(c, in_dt, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
			       c_dt, cm, ldc, bias, epilogue, aux);
	if (bias && lt_bias != bias && (st = cuda_convert(c, n, WEFT_F32, bias, c_dt, c->rows)))
		return st;
	st = lt_run(c, lt, p, alpha, a, b, beta, cm, lt_bias, aux);
	if (!st && bgrad && lt_bias != aux)
		st = cuda_axpy(c, WEFT_F32, m, 1.0f, lt_bias, aux);
	return st;
}
