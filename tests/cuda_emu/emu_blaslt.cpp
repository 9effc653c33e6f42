/* emu_blaslt.cpp - the cuBLASLt stand-in of the emulated runtime: the
 * subset gemm_lowp_ex uses (handle, matmul descriptor and its attributes,
 * matrix layouts, preference, heuristic, matmul). cublasLtMatmul is a
 * column-major reference: each dot product summed in double, rounded to
 * F32, then alpha, beta C and the epilogue in F32 as NVIDIA's cublasLt.h
 * documents them (BIAS: bias[row] added; GELU_AUX(_BIAS): the GELU input
 * written to aux, then GELU; DGELU: the result times GELU's derivative at
 * aux; BGRADB: D as DEFAULT, and at the bias pointer, per column j of D,
 * the sum over k of op(B)'s column j, in double, rounded once to the bias
 * gradient's type, which is D's), GELU in its tanh form, and D rounded
 * once to its type. Queued on the given stream like any other device
 * work.
 *
 * It refuses what real cuBLASLt rejects or leaves undefined, with an
 * "EMU DEFECT" report and the status cuBLASLt gives (INVALID_VALUE):
 * layouts that disagree with the descriptor's transposes or with each
 * other, a leading dimension below the rows, a missing bias or aux pointer
 * for an epilogue that uses it (BGRADB's output included), an aux leading dimension that is not a
 * multiple of 8 or below D's rows (cublasLt.h: "must be divisible by 8"),
 * pointers that are not device memory or whose extents leave their
 * allocation, pointers less aligned than the heuristic was told, a
 * workspace smaller than the algorithm's or not device memory, an
 * algorithm that did not come from the heuristic. The heuristic answers
 * CUBLAS_STATUS_NOT_SUPPORTED, without a report, for what cuBLASLt's
 * kernels do not take: types other than 16-bit A and B with C = D of
 * their type or F32 under CUBLAS_COMPUTE_32F, a bias type other than D's
 * (the header's rule; for BGRADB's output, "the same type as the output
 * elements (Ctype)"), and, standing for the tensor-core kernels, an
 * alignment below 16 bytes (of the bias or bias gradient pointer too,
 * whose alignment the header says the heuristic reads) or a leading
 * dimension that is not a multiple of 16 bytes. */
#include "emu_impl.h"
#include "emu_blas_impl.h"

#include <cublasLt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#define LT_MAGIC 0x454d554c54ull /* "EMULT": an algorithm of this heuristic */
#define LT_ALGO_WORKSPACE ((size_t)1 << 20)

struct lt_desc {
	cublasComputeType_t compute;
	cudaDataType_t scale;
	int32_t ta, tb;
	uint32_t epi;
	const void *bias;
	int32_t bias_type; /* -1: D's */
	void *aux;
	int64_t aux_ld;
};

struct lt_layout {
	cudaDataType_t type;
	uint64_t rows, cols;
	int64_t ld;
};

struct lt_pref {
	uint64_t max_ws;
	uint32_t align[4]; /* A, B, C, D */
};

static int uses_bias(uint32_t e)
{
	return (e & CUBLASLT_EPILOGUE_BIAS) != 0 && e != CUBLASLT_EPILOGUE_DEFAULT;
}

/* The bias gradient epilogue gemm_lowp_ex uses: per column of D, written
 * to the bias pointer. */
static int bgrad_b(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_BGRADB;
}

static int writes_aux(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

static const char *epi_name(uint32_t e)
{
	switch (e) {
	case CUBLASLT_EPILOGUE_DEFAULT: return "default";
	case CUBLASLT_EPILOGUE_BIAS: return "bias";
	case CUBLASLT_EPILOGUE_GELU_AUX: return "gelu_aux";
	case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "gelu_aux_bias";
	case CUBLASLT_EPILOGUE_DGELU: return "dgelu";
	case CUBLASLT_EPILOGUE_BGRADB: return "bgradb";
	default: return "?";
	}
}

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
	void *e = calloc(1, 64);

	if (!e)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*h = (cublasLtHandle_t)e;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
					cudaDataType_t scale)
{
	lt_desc *e = (lt_desc *)calloc(1, sizeof(lt_desc));

	if (!e)
		return CUBLAS_STATUS_ALLOC_FAILED;
	e->compute = compute;
	e->scale = scale;
	e->bias_type = -1;
	*d = (cublasLtMatmulDesc_t)e;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
	free(d);
	return CUBLAS_STATUS_SUCCESS;
}

/* Copies an attribute of the size the header gives it, else INVALID_VALUE. */
static cublasStatus_t set_attr(void *dst, size_t want, const void *buf, size_t size,
			       const char *what)
{
	if (size != want || !buf) {
		emu_report("%s: %zu bytes given for an attribute of %zu", what, size, want);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	memcpy(dst, buf, size);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
					      cublasLtMatmulDescAttributes_t attr,
					      const void *buf, size_t size)
{
	lt_desc *e = (lt_desc *)d;
	const char *w = "cublasLtMatmulDescSetAttribute";

	switch (attr) {
	case CUBLASLT_MATMUL_DESC_TRANSA: return set_attr(&e->ta, 4, buf, size, w);
	case CUBLASLT_MATMUL_DESC_TRANSB: return set_attr(&e->tb, 4, buf, size, w);
	case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_attr(&e->epi, 4, buf, size, w);
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_attr(&e->bias, 8, buf, size, w);
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_attr(&e->bias_type, 4, buf, size, w);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set_attr(&e->aux, 8, buf, size, w);
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set_attr(&e->aux_ld, 8, buf, size, w);
	default:
		emu_report("%s: attribute %d is not emulated", w, (int)attr);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
					  uint64_t rows, uint64_t cols, int64_t ld)
{
	lt_layout *e;

	if (ld < (int64_t)(rows > 1 ? rows : 1)) {
		emu_report("cublasLtMatrixLayoutCreate: ld %lld below the %llu rows (column-major)",
			   (long long)ld, (unsigned long long)rows);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	e = (lt_layout *)calloc(1, sizeof(lt_layout));
	if (!e)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*e = lt_layout{ type, rows, cols, ld };
	*l = (cublasLtMatrixLayout_t)e;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
	free(l);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
	lt_pref *e = (lt_pref *)calloc(1, sizeof(lt_pref));

	if (!e)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*e = lt_pref{ 0, { 256, 256, 256, 256 } }; /* the header's defaults */
	*p = (cublasLtMatmulPreference_t)e;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
	free(p);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
						    cublasLtMatmulPreferenceAttributes_t attr,
						    const void *buf, size_t size)
{
	lt_pref *e = (lt_pref *)p;
	const char *w = "cublasLtMatmulPreferenceSetAttribute";
	uint32_t scheme;

	switch (attr) {
	case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set_attr(&e->max_ws, 8, buf, size, w);
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
		return set_attr(&e->align[0], 4, buf, size, w);
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
		return set_attr(&e->align[1], 4, buf, size, w);
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
		return set_attr(&e->align[2], 4, buf, size, w);
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
		return set_attr(&e->align[3], 4, buf, size, w);
	case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: /* this reference never splits k */
		return set_attr(&scheme, 4, buf, size, w);
	default:
		emu_report("%s: attribute %d is not emulated", w, (int)attr);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
}

} /* extern "C" */

/* The problem a descriptor and its layouts describe, checked. */
struct lt_problem {
	lt_desc d; /* a copy: the matmul reads the descriptor at its call, as cuBLASLt does */
	lt_layout a, b, c;
	int m, n, k; /* D is m x n (column-major), op(A) m x k */
};

static cublasStatus_t problem_check(const char *w, cublasLtMatmulDesc_t op,
				    cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
				    cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
				    lt_problem *pr)
{
	const lt_desc *d = (const lt_desc *)op;
	uint64_t am, ak, bk, bn;

	if (!op || !A || !B || !C || !D) {
		emu_report("%s: a descriptor or layout is NULL", w);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	pr->d = *d;
	pr->a = *(const lt_layout *)A;
	pr->b = *(const lt_layout *)B;
	pr->c = *(const lt_layout *)C;
	am = d->ta == CUBLAS_OP_N ? pr->a.rows : pr->a.cols;
	ak = d->ta == CUBLAS_OP_N ? pr->a.cols : pr->a.rows;
	bk = d->tb == CUBLAS_OP_N ? pr->b.rows : pr->b.cols;
	bn = d->tb == CUBLAS_OP_N ? pr->b.cols : pr->b.rows;
	if (ak != bk || am != pr->c.rows || bn != pr->c.cols ||
	    memcmp(C, D, sizeof(lt_layout)) || am > 0x7fffffff || bn > 0x7fffffff ||
	    ak > 0x7fffffff) {
		emu_report("%s: layouts disagree with the descriptor: op(A) %llu x %llu, op(B) "
			   "%llu x %llu, C %llu x %llu%s", w, (unsigned long long)am,
			   (unsigned long long)ak, (unsigned long long)bk, (unsigned long long)bn,
			   (unsigned long long)pr->c.rows, (unsigned long long)pr->c.cols,
			   memcmp(C, D, sizeof(lt_layout)) ? ", C and D differ" : "");
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	pr->m = (int)am;
	pr->n = (int)bn;
	pr->k = (int)ak;
	if ((uses_bias(d->epi) || bgrad_b(d->epi)) && !d->bias) {
		emu_report("%s: epilogue %s without CUBLASLT_MATMUL_DESC_BIAS_POINTER", w,
			   epi_name(d->epi));
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (d->epi & 128) { /* the epilogues with an aux matrix */
		if (!d->aux || d->aux_ld < pr->m || d->aux_ld % 8) {
			emu_report("%s: epilogue %s needs EPILOGUE_AUX_POINTER (%s) and an "
				   "EPILOGUE_AUX_LD that is a multiple of 8 and at least D's %d "
				   "rows (got %lld)", w, epi_name(d->epi), d->aux ? "set" : "NULL",
				   pr->m, (long long)d->aux_ld);
			return CUBLAS_STATUS_INVALID_VALUE;
		}
	}
	return CUBLAS_STATUS_SUCCESS;
}

static uint32_t align_of(const void *p)
{
	uint32_t a = 256;

	while (a > 1 && ((uintptr_t)p & (a - 1)))
		a >>= 1;
	return a;
}

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
	cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t A,
	cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
	cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
	int *returned)
{
	const char *w = "cublasLtMatmulAlgoGetHeuristic";
	const lt_pref *p = (const lt_pref *)pref;
	cublasStatus_t st;
	lt_problem pr;
	cudaDataType_t in;
	const char *why = NULL;

	if (!h || !pref || requested < 1 || !results || !returned) {
		emu_report("%s: NULL handle, preference or results, or requested %d", w, requested);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	*returned = 0;
	if ((st = problem_check(w, op, A, B, C, D, &pr)) != CUBLAS_STATUS_SUCCESS)
		return st;
	in = pr.a.type;
	if (pr.d.compute != CUBLAS_COMPUTE_32F || pr.d.scale != CUDA_R_32F ||
	    pr.b.type != in || (in != CUDA_R_16BF && in != CUDA_R_16F) ||
	    (pr.c.type != in && pr.c.type != CUDA_R_32F))
		why = "type combination";
	else if ((uses_bias(pr.d.epi) || bgrad_b(pr.d.epi)) && pr.d.bias_type != -1 &&
		 pr.d.bias_type != (int32_t)pr.c.type)
		why = "bias type other than D's";
	else if (p->align[0] < 16 || p->align[1] < 16 || p->align[2] < 16 || p->align[3] < 16 ||
		 ((uses_bias(pr.d.epi) || bgrad_b(pr.d.epi)) && align_of(pr.d.bias) < 16) ||
		 ((pr.d.epi & 128) && align_of(pr.d.aux) < 16))
		why = "alignment below 16 bytes";
	else if ((pr.a.ld * (int64_t)tsize(pr.a.type)) % 16 ||
		 (pr.b.ld * (int64_t)tsize(pr.b.type)) % 16 ||
		 (pr.c.ld * (int64_t)tsize(pr.c.type)) % 16)
		why = "leading dimension not a multiple of 16 bytes";
	if (why) {
		if (emu_tracing())
			fprintf(stderr, "emu: %s: no algorithm (%s)\n", w, why);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	memset(&results[0], 0, sizeof(results[0]));
	results[0].algo.data[0] = LT_MAGIC;
	results[0].algo.data[1] = p->max_ws < LT_ALGO_WORKSPACE ? p->max_ws : LT_ALGO_WORKSPACE;
	for (int i = 0; i < 4; i++)
		results[0].algo.data[2 + i] = p->align[i];
	results[0].workspaceSize = results[0].algo.data[1];
	results[0].state = CUBLAS_STATUS_SUCCESS;
	results[0].wavesCount = 1.0f;
	*returned = 1;
	return CUBLAS_STATUS_SUCCESS;
}

struct lt_args {
	lt_problem pr;
	float alpha, beta;
	const void *A, *B, *C;
	void *D;
};

static double gelu_tanh(double v)
{
	return 0.5 * v * (1.0 + tanhf((float)(0.7978845608028654 * (v + 0.044715 * v * v * v))));
}

/* EMU_COUNTS: bytes and FLOPs from the arguments (emu_count.cpp). */
static void lt_count(const lt_args &g)
{
	const lt_problem &p = g.pr;
	double m = p.m, n = p.n, k = p.k, cs = (double)tsize(p.c.type);
	double rd = m * k * (double)tsize(p.a.type) + k * n * (double)tsize(p.b.type) +
		    (g.beta != 0.0f ? m * n * cs : 0.0) +
		    (uses_bias(p.d.epi) ? m * (p.d.bias_type == CUDA_R_32F ? 4.0 : cs) : 0.0) +
		    (p.d.epi == CUBLASLT_EPILOGUE_DGELU ? m * n * cs : 0.0);
	double wr = m * n * cs * (writes_aux(p.d.epi) ? 2.0 : 1.0) +
		    (bgrad_b(p.d.epi) ? n * cs : 0.0); /* the bias gradient, of D's type */
	char name[96];

	snprintf(name, sizeof(name), "cublasLtMatmul %c%c %s->%s %s",
		 p.d.ta == CUBLAS_OP_N ? 'N' : 'T', p.d.tb == CUBLAS_OP_N ? 'N' : 'T',
		 type_name(p.a.type), type_name(p.c.type), epi_name(p.d.epi));
	emu_count_record('G', name, rd, wr, 2.0 * m * n * k, "tc16");
}

static void lt_exec(const lt_args &g)
{
	const lt_problem &p = g.pr;
	const lt_desc *d = &p.d;
	cudaDataType_t ct = p.c.type;
	cudaDataType_t bt = d->bias_type == -1 ? ct : (cudaDataType_t)d->bias_type;
	std::vector<float> a_rows, b_cols;

	if (emu_counting())
		lt_count(g);
	emu_blas_gather((cublasOperation_t)d->ta, (cublasOperation_t)d->tb, p.m, p.n, p.k, g.A,
			p.a.type, p.a.ld, g.B, p.b.type, p.b.ld, a_rows, b_cols);
	for (int j = 0; j < p.n; j++) {
		for (int i = 0; i < p.m; i++) {
			long long at = i + (long long)j * p.c.ld, xt = i + (long long)j * d->aux_ld;
			float v = g.alpha * (float)emu_blas_dot(a_rows, b_cols, i, j, p.k);

			if (g.beta != 0.0f)
				v += g.beta * load(g.C, ct, at);
			if (uses_bias(d->epi))
				v += load(d->bias, bt, i);
			if (writes_aux(d->epi)) {
				store(d->aux, ct, xt, v);
				v = (float)gelu_tanh(v);
			} else if (d->epi == CUBLASLT_EPILOGUE_DGELU) {
				double x = load(d->aux, ct, xt);
				double t = tanhf((float)(0.7978845608028654 * (x + 0.044715 * x * x * x)));
				double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);

				v = (float)(v * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du));
			}
			store(g.D, ct, at, v);
		}
	}
	for (int j = 0; j < p.n && bgrad_b(d->epi); j++) {
		const float *y = &b_cols[(size_t)j * p.k];
		double s = 0.0;

		for (int q = 0; q < p.k; q++)
			s += y[q];
		store((void *)d->bias, bt, j, (float)s);
	}
}

/* [p, p + bytes) lies in one device allocation; reports `what` otherwise. */
static int dev_ok(const char *what, const void *p, size_t bytes)
{
	if (!bytes || emu_dev_range_ok(p, bytes))
		return 1;
	emu_report("cublasLtMatmul: %s %p (%zu bytes) is not inside one device allocation%s", what,
		   p, bytes, emu_is_dev(p) ? "" : " (not device memory)");
	return 0;
}

static size_t span(const lt_layout &l, uint64_t rows, uint64_t cols)
{
	return rows && cols ? ((size_t)(cols - 1) * (size_t)l.ld + rows) * tsize(l.type) : 0;
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
					 const void *alpha, const void *A,
					 cublasLtMatrixLayout_t Adesc, const void *B,
					 cublasLtMatrixLayout_t Bdesc, const void *beta,
					 const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
					 cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
					 void *workspace, size_t ws_bytes, cudaStream_t stream)
{
	const char *w = "cublasLtMatmul";
	cublasStatus_t st;
	lt_problem pr;
	lt_args g;
	int ok;

	emu_gemms++;
	if (!h || !alpha || !beta) {
		emu_report("%s: NULL handle, alpha or beta", w);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if ((st = problem_check(w, op, Adesc, Bdesc, Cdesc, Ddesc, &pr)) != CUBLAS_STATUS_SUCCESS)
		return st;
	if (emu_tracing())
		fprintf(stderr, "emu: cublasLtMatmul m %d n %d k %d epilogue %s\n", pr.m, pr.n, pr.k,
			epi_name(pr.d.epi));
	if (!algo || algo->data[0] != LT_MAGIC) {
		emu_report("%s: the algorithm did not come from cublasLtMatmulAlgoGetHeuristic", w);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (ws_bytes < algo->data[1] || (algo->data[1] && !dev_ok("workspace", workspace, ws_bytes))) {
		emu_report("%s: workspace of %zu bytes at %p; the algorithm needs %llu bytes of "
			   "device memory", w, ws_bytes, workspace, (unsigned long long)algo->data[1]);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	g = lt_args{ pr, *(const float *)alpha, *(const float *)beta, A, B, C, D };
	if (pr.m == 0 || pr.n == 0)
		return CUBLAS_STATUS_SUCCESS;
	ok = dev_ok("A", A, span(pr.a, pr.a.rows, pr.a.cols)) &&
	     dev_ok("B", B, span(pr.b, pr.b.rows, pr.b.cols)) &&
	     dev_ok("D", D, span(pr.c, pr.c.rows, pr.c.cols)) &&
	     (g.beta == 0.0f || dev_ok("C", C, span(pr.c, pr.c.rows, pr.c.cols))) &&
	     (!uses_bias(pr.d.epi) ||
	      dev_ok("bias", pr.d.bias, (size_t)pr.m * (pr.d.bias_type == CUDA_R_32F ? 4 :
							     tsize(pr.c.type)))) &&
	     (!bgrad_b(pr.d.epi) ||
	      dev_ok("bias gradient", pr.d.bias, (size_t)pr.n * tsize(pr.c.type))) &&
	     (!(pr.d.epi & 128) ||
	      dev_ok("aux", pr.d.aux, ((size_t)(pr.n - 1) * (size_t)pr.d.aux_ld + pr.m) *
					       tsize(pr.c.type)));
	if (!ok)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (align_of(A) < algo->data[2] || align_of(B) < algo->data[3] ||
	    align_of(C) < algo->data[4] || align_of(D) < algo->data[5]) {
		emu_report("%s: A %p, B %p, C %p or D %p is less aligned than the heuristic was told "
			   "(%llu, %llu, %llu, %llu bytes)", w, A, B, C, D,
			   (unsigned long long)algo->data[2], (unsigned long long)algo->data[3],
			   (unsigned long long)algo->data[4], (unsigned long long)algo->data[5]);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (emu_enqueue(stream, "cublasLtMatmul", [g] { lt_exec(g); }) != cudaSuccess)
		return CUBLAS_STATUS_EXECUTION_FAILED;
	return CUBLAS_STATUS_SUCCESS;
}
