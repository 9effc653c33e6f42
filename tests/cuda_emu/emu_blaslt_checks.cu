/* emu_blaslt_checks - the cuBLASLt stand-in (emu_blaslt.cpp) on known work,
 * and the calls it must refuse.
 *
 *   emu_blaslt_checks            (no argument) computes, refuses and counts:
 *     - GELU_AUX_BIAS with BF16 A and B, an F32 bias and F32 D: D and aux
 *       equal a host computation in double within 1e-5 relative + 1e-6
 *       (the stand-in rounds the dot product to F32 once, then works in
 *       F32);
 *     - DGELU with BF16 D reading that aux (rounded to BF16 here): within
 *       one BF16 rounding, 2^-8 relative, + 1e-6;
 *     - BGRADB with F32 D: D as the plain product (same bound as above),
 *       and at the bias pointer each column of B summed, exactly the F32
 *       rounding of the double sum (the stand-in sums in double, in the
 *       order this test does; the values are k/11 steps, so the sums are
 *       exact anyway);
 *     - the heuristic answers CUBLAS_STATUS_NOT_SUPPORTED, and no
 *       algorithm, for BF16 D with an F32 bias (cublasLt.h: the bias has
 *       D's type), for BGRADB's output typed F32 beside a BF16 D (the
 *       header: the bias gradient has the output's type), for a bias
 *       gradient pointer 4 bytes off 16-byte alignment, and for A one
 *       element (2 bytes) off 16-byte alignment;
 *     - EMU_COUNTS has one G line per matmul, 2 m n k FLOPs in class tc16,
 *       reading A, B, the bias (GELU_AUX_BIAS) or aux (DGELU) and writing
 *       D and aux (GELU_AUX_BIAS) or D (DGELU) or D and N bias gradient
 *       floats (BGRADB), to the byte.
 *   emu_blaslt_checks host-pointer | small-workspace | aux-ld | no-bias |
 *                     bgrad-no-pointer
 *     makes that mistake and exits 1 when the call fails (the ctest
 *     driver, emu_expect_fail, checks the stand-in's message). */
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { M = 24, N = 16, K = 32 }; /* D is M x N, column-major */

static int failures;

static void expect(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

static double gelu(double v)
{
	return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

static double gelu_grad(double v)
{
	double t = tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
	double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v);

	return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du;
}

struct lt_call {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulHeuristicResult_t res;
	int found;
	cublasStatus_t heur;
};

/* D (M x N, type dt) = A (M x K) B (K x N) with `epi`; bias and aux as
 * given (aux_ld N/A when aux is NULL); the heuristic's answer kept. */
static void lt_plan(cublasLtHandle_t h, lt_call *c, cudaDataType_t dt, uint32_t epi,
		    const void *bias, int32_t bias_type, void *aux, int64_t aux_ld,
		    uint32_t align_a)
{
	uint64_t ws = 32u << 20;

	memset(c, 0, sizeof(*c));
	cublasLtMatmulDescCreate(&c->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
	cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
	if (bias) {
		cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
					       sizeof(bias));
		cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
					       &bias_type, sizeof(bias_type));
	}
	if (aux) {
		cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
					       &aux, sizeof(aux));
		cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
					       sizeof(aux_ld));
	}
	cublasLtMatrixLayoutCreate(&c->a, CUDA_R_16BF, M, K, M);
	cublasLtMatrixLayoutCreate(&c->b, CUDA_R_16BF, K, N, K);
	cublasLtMatrixLayoutCreate(&c->d, dt, M, N, M);
	cublasLtMatmulPreferenceCreate(&c->pref);
	cublasLtMatmulPreferenceSetAttribute(c->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
					     sizeof(ws));
	cublasLtMatmulPreferenceSetAttribute(c->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
					     &align_a, sizeof(align_a));
	c->heur = cublasLtMatmulAlgoGetHeuristic(h, c->op, c->a, c->b, c->d, c->d, c->pref, 1,
						 &c->res, &c->found);
}

static void lt_free(lt_call *c)
{
	cublasLtMatmulPreferenceDestroy(c->pref);
	cublasLtMatrixLayoutDestroy(c->a);
	cublasLtMatrixLayoutDestroy(c->b);
	cublasLtMatrixLayoutDestroy(c->d);
	cublasLtMatmulDescDestroy(c->op);
}

struct rec {
	char name[128];
	double rd, wr, flops;
	char cls[16];
};

/* The counts file's G lines. */
static int read_gemms(const char *path, rec *r, int max)
{
	FILE *f = fopen(path, "r");
	char line[512], kind;
	int n = 0;

	if (!f)
		return -1;
	while (n < max && fgets(line, sizeof(line), f))
		if (line[0] == 'G' &&
		    sscanf(line, "%c\t%127[^\t]\t%lf\t%lf\t%lf\t%15s", &kind, r[n].name, &r[n].rd,
			   &r[n].wr, &r[n].flops, r[n].cls) == 6)
			n++;
	fclose(f);
	return n;
}

/* A mistake, made on purpose: 1 when the call failed. */
static int misuse(cublasLtHandle_t h, const char *what, __nv_bfloat16 *a, __nv_bfloat16 *b,
		  float *d, float *bias, float *aux, void *ws)
{
	float one = 1.0f, zero = 0.0f;
	const void *A = a, *none = NULL;
	size_t ws_bytes = 32u << 20;
	int64_t aux_ld = M;
	lt_call c;
	cublasStatus_t st;

	if (!strcmp(what, "host-pointer"))
		A = aligned_alloc(256, M * K * 2); /* aligned as the plan says: only its place is wrong */
	else if (!strcmp(what, "small-workspace"))
		ws_bytes = 1024;
	else if (!strcmp(what, "aux-ld"))
		aux_ld = M + 4;
	else if (strcmp(what, "no-bias") && strcmp(what, "bgrad-no-pointer")) {
		printf("emu_blaslt_checks: unknown mode %s\n", what);
		return 2;
	}
	if (!strcmp(what, "bgrad-no-pointer")) /* BGRADB's output: the N floats at aux */
		lt_plan(h, &c, CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, aux, -1, NULL, 0, 256);
	else
		lt_plan(h, &c, CUDA_R_32F, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, CUDA_R_32F, aux,
			aux_ld, 256);
	if (c.heur != CUBLAS_STATUS_SUCCESS) {
		printf("cublasLtMatmulAlgoGetHeuristic: status %d\n", (int)c.heur);
		return 1;
	}
	if (!strcmp(what, "no-bias") || !strcmp(what, "bgrad-no-pointer"))
		/* the descriptor loses its bias (gradient) pointer after the plan */
		cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &none,
					       sizeof(none));
	st = cublasLtMatmul(h, c.op, &one, A, c.a, b, c.b, &zero, d, c.d, d, c.d, &c.res.algo, ws,
			    ws_bytes, 0);
	printf("cublasLtMatmul: status %d\n", (int)st);
	return st != CUBLAS_STATUS_SUCCESS;
}

int main(int argc, char **argv)
{
	char path[] = "/tmp/emu_blaslt_XXXXXX";
	int fd = mkstemp(path);
	__nv_bfloat16 ha[M * K], hb[K * N], *a, *b, hd16[M * N], haux16[M * N], *d16, *aux16;
	float hbias[M], hd[M * N], haux[M * N], hbg[N], *bias, *d, *aux, one = 1.0f, zero = 0.0f;
	double dot[M * N];
	void *ws;
	cublasLtHandle_t h;
	lt_call g, dg, bg, no;
	rec r[8];
	int n;

	if (fd < 0) {
		perror("emu_blaslt_checks: mkstemp");
		return 1;
	}
	close(fd);
	setenv("EMU_COUNTS", path, 1);
	for (int i = 0; i < M * K; i++)
		ha[i] = __float2bfloat16_rn((float)((i * 37) % 19 - 9) / 9.0f);
	for (int i = 0; i < K * N; i++)
		hb[i] = __float2bfloat16_rn((float)((i * 11) % 23 - 11) / 11.0f);
	for (int i = 0; i < M; i++)
		hbias[i] = (float)(i % 5) / 4.0f - 0.5f;
	if (cudaMalloc((void **)&a, sizeof(ha)) || cudaMalloc((void **)&b, sizeof(hb)) ||
	    cudaMalloc((void **)&bias, sizeof(hbias)) || cudaMalloc((void **)&d, sizeof(hd)) ||
	    cudaMalloc((void **)&aux, sizeof(haux)) || cudaMalloc((void **)&d16, sizeof(hd16)) ||
	    cudaMalloc((void **)&aux16, sizeof(haux16)) || cudaMalloc(&ws, 32u << 20) ||
	    cublasLtCreate(&h)) {
		printf("FAIL: setting up\n");
		return 1;
	}
	cudaMemcpy(a, ha, sizeof(ha), cudaMemcpyHostToDevice);
	cudaMemcpy(b, hb, sizeof(hb), cudaMemcpyHostToDevice);
	cudaMemcpy(bias, hbias, sizeof(hbias), cudaMemcpyHostToDevice);
	if (argc > 1) {
		unlink(path);
		return misuse(h, argv[1], a, b, d, bias, aux, ws);
	}
	for (int j = 0; j < N; j++)
		for (int i = 0; i < M; i++) {
			double s = 0.0;

			for (int l = 0; l < K; l++)
				s += (double)__bfloat162float(ha[i + l * M]) *
				     __bfloat162float(hb[l + j * K]);
			dot[i + j * M] = s;
		}

	/* GELU_AUX_BIAS, F32 D and aux */
	lt_plan(h, &g, CUDA_R_32F, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, CUDA_R_32F, aux, M, 256);
	expect(g.heur == CUBLAS_STATUS_SUCCESS && g.found == 1, "a heuristic for GELU_AUX_BIAS");
	expect(cublasLtMatmul(h, g.op, &one, a, g.a, b, g.b, &zero, d, g.d, d, g.d, &g.res.algo,
			      ws, 32u << 20, 0) == CUBLAS_STATUS_SUCCESS, "GELU_AUX_BIAS runs");
	cudaMemcpy(hd, d, sizeof(hd), cudaMemcpyDeviceToHost);
	cudaMemcpy(haux, aux, sizeof(haux), cudaMemcpyDeviceToHost);
	for (int i = 0; i < M * N; i++) {
		double v = dot[i] + hbias[i % M];

		expect(fabs(haux[i] - v) <= 1e-5 * fabs(v) + 1e-6, "aux = A B + bias");
		expect(fabs(hd[i] - gelu(v)) <= 1e-5 * fabs(gelu(v)) + 1e-6, "D = gelu(A B + bias)");
	}

	/* DGELU, BF16 D reading a BF16 aux */
	for (int i = 0; i < M * N; i++)
		haux16[i] = __float2bfloat16_rn(haux[i]);
	cudaMemcpy(aux16, haux16, sizeof(haux16), cudaMemcpyHostToDevice);
	lt_plan(h, &dg, CUDA_R_16BF, CUBLASLT_EPILOGUE_DGELU, NULL, 0, aux16, M, 256);
	expect(dg.heur == CUBLAS_STATUS_SUCCESS && dg.found == 1, "a heuristic for DGELU");
	expect(cublasLtMatmul(h, dg.op, &one, a, dg.a, b, dg.b, &zero, d16, dg.d, d16, dg.d,
			      &dg.res.algo, ws, 32u << 20, 0) == CUBLAS_STATUS_SUCCESS,
	       "DGELU runs");
	cudaMemcpy(hd16, d16, sizeof(hd16), cudaMemcpyDeviceToHost);
	for (int i = 0; i < M * N; i++) {
		double want = dot[i] * gelu_grad(__bfloat162float(haux16[i]));

		expect(fabs(__bfloat162float(hd16[i]) - want) <= ldexp(fabs(want), -8) + 1e-6,
		       "D = A B gelu'(aux), rounded once to BF16");
	}

	/* BGRADB, F32 D: the product, and B's columns summed at the bias pointer
	 * (aux's first N floats; its 4-byte offset below is not 16-aligned) */
	lt_plan(h, &bg, CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, aux, -1, NULL, 0, 256);
	expect(bg.heur == CUBLAS_STATUS_SUCCESS && bg.found == 1, "a heuristic for BGRADB");
	expect(cublasLtMatmul(h, bg.op, &one, a, bg.a, b, bg.b, &zero, d, bg.d, d, bg.d,
			      &bg.res.algo, ws, 32u << 20, 0) == CUBLAS_STATUS_SUCCESS,
	       "BGRADB runs");
	cudaMemcpy(hd, d, sizeof(hd), cudaMemcpyDeviceToHost);
	cudaMemcpy(hbg, aux, sizeof(hbg), cudaMemcpyDeviceToHost);
	for (int i = 0; i < M * N; i++)
		expect(fabs(hd[i] - dot[i]) <= 1e-5 * fabs(dot[i]) + 1e-6, "BGRADB: D = A B");
	for (int j = 0; j < N; j++) {
		double s = 0.0;

		for (int l = 0; l < K; l++)
			s += __bfloat162float(hb[l + j * K]);
		expect(hbg[j] == (float)s, "BGRADB: bias gradient = B's column sums");
	}

	/* what the heuristic does not take */
	lt_plan(h, &no, CUDA_R_16BF, CUBLASLT_EPILOGUE_BGRADB, aux, CUDA_R_32F, NULL, 0, 256);
	expect(no.heur == CUBLAS_STATUS_NOT_SUPPORTED && no.found == 0,
	       "BF16 D with an F32 bias gradient: not supported");
	lt_free(&no);
	lt_plan(h, &no, CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, aux + 1, -1, NULL, 0, 256);
	expect(no.heur == CUBLAS_STATUS_NOT_SUPPORTED && no.found == 0,
	       "a bias gradient aligned to 4 bytes: not supported");
	lt_free(&no);
	lt_plan(h, &no, CUDA_R_16BF, CUBLASLT_EPILOGUE_BIAS, bias, CUDA_R_32F, NULL, 0, 256);
	expect(no.heur == CUBLAS_STATUS_NOT_SUPPORTED && no.found == 0,
	       "BF16 D with an F32 bias: not supported");
	lt_free(&no);
	lt_plan(h, &no, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, NULL, 0, NULL, 0, 2);
	expect(no.heur == CUBLAS_STATUS_NOT_SUPPORTED && no.found == 0,
	       "A aligned to 2 bytes: not supported");
	lt_free(&no);

	/* the counts, to the byte */
	n = read_gemms(path, r, 8);
	unlink(path);
	expect(n == 3, "three G lines in the counts file");
	if (n == 3) {
		double ab = M * K * 2.0 + K * N * 2.0;

		expect(strstr(r[0].name, "gelu_aux_bias") && r[0].rd == ab + M * 4.0 &&
			       r[0].wr == 2.0 * M * N * 4.0 && r[0].flops == 2.0 * M * N * K &&
			       !strcmp(r[0].cls, "tc16"),
		       "GELU_AUX_BIAS reads A, B and the bias, writes D and aux, 2 m n k tc16");
		expect(strstr(r[1].name, "dgelu") && r[1].rd == ab + M * N * 2.0 &&
			       r[1].wr == M * N * 2.0 && r[1].flops == 2.0 * M * N * K &&
			       !strcmp(r[1].cls, "tc16"),
		       "DGELU reads A, B and aux, writes D, 2 m n k tc16");
		expect(strstr(r[2].name, "bgradb") && r[2].rd == ab &&
			       r[2].wr == M * N * 4.0 + N * 4.0 && r[2].flops == 2.0 * M * N * K &&
			       !strcmp(r[2].cls, "tc16"),
		       "BGRADB reads A and B, writes D and the bias gradient, 2 m n k tc16");
	}
	lt_free(&g);
	lt_free(&dg);
	lt_free(&bg);
	cublasLtDestroy(h);
	if (failures)
		return 1;
	printf("emu_blaslt_checks: all checks passed\n");
	return 0;
}
