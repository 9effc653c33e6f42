/* emu_counts - EMU_COUNTS counts what known work moves and computes
 * (emu_count.cpp), the numbers the roofline estimate (bench/roofline)
 * is built from:
 *   - a kernel copying N floats reads 4N bytes and writes 4N bytes, each
 *     within one page at either end of its buffer (the counts are whole
 *     pages: at most 2 pages over, never under);
 *   - a kernel that only reads writes nothing, one that only writes reads
 *     nothing (loads and stores are told apart);
 *   - two launches over the same buffer count it twice (per launch);
 *   - a GEMM counts 2 m n k FLOPs per batch exactly, classed tc16 for
 *     bf16 inputs, tf32 for F32 under CUBLAS_TF32_TENSOR_OP_MATH, fp32
 *     otherwise, and reads A, B (C when beta is not 0) and writes C;
 *   - host-to-device and device-to-host copies are counted as such;
 *   - emu_count_mark writes its label after the work queued before it.
 * Exits 0 when every count is right; prints each wrong one. */
#include <cublas_v2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N (1 << 20) /* 4 MiB of floats: 1024 pages of 4 KiB */

extern "C" void emu_count_mark(const char *label);

__global__ void k_copy(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = x[i];
}

__global__ void k_sum(const float *x, int n, float *partial)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n && x[i] != 0.0f)
		partial[0] += 0.0f; /* never taken: x is zero */
}

__global__ void k_fill(float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = 1.0f;
}

struct rec {
	char kind;
	char name[128];
	double rd, wr, flops;
	char cls[16];
};

static int failures;

static void expect(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

/* The counts file's records, marks as kind 'M' with the label in name. */
static int read_counts(const char *path, rec *r, int max)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (n < max && fgets(line, sizeof(line), f)) {
		rec *x = &r[n];

		memset(x, 0, sizeof(*x));
		x->kind = line[0];
		if (x->kind == 'M') {
			snprintf(x->name, sizeof(x->name), "%s", line + 2);
			x->name[strcspn(x->name, "\n")] = 0;
		} else if (sscanf(line, "%c\t%127[^\t]\t%lf\t%lf\t%lf\t%15s", &x->kind, x->name, &x->rd,
				  &x->wr, &x->flops, x->cls) != 6) {
			printf("FAIL: unreadable counts line: %s", line);
			failures++;
			continue;
		}
		n++;
	}
	fclose(f);
	return n;
}

/* counted bytes within [exact, exact + 2 pages] */
static int near(double counted, double exact)
{
	double page = (double)sysconf(_SC_PAGESIZE);

	return counted >= exact && counted <= exact + 2 * page;
}

int main(void)
{
	char path[] = "/tmp/emu_counts_XXXXXX";
	int fd = mkstemp(path);
	float *x, *y, *part, *a32, *b32, *c32;
	__nv_bfloat16 *a16, *b16, *c16;
	float one = 1.0f, zero = 0.0f, *host;
	cublasHandle_t h;
	rec r[64];
	int n, grid = (N + 255) / 256;
	const int m = 64, nn = 48, k = 32;

	if (fd < 0) {
		perror("emu_counts: mkstemp");
		return 1;
	}
	close(fd);
	setenv("EMU_COUNTS", path, 1);
	host = (float *)calloc(N, sizeof(float));
	if (!host || cudaMalloc((void **)&x, N * 4) || cudaMalloc((void **)&y, N * 4) ||
	    cudaMalloc((void **)&part, 4) || cudaMalloc((void **)&a32, m * k * 4) ||
	    cudaMalloc((void **)&b32, k * nn * 4) || cudaMalloc((void **)&c32, m * nn * 4) ||
	    cudaMalloc((void **)&a16, m * k * 2) || cudaMalloc((void **)&b16, k * nn * 2) ||
	    cudaMalloc((void **)&c16, m * nn * 2) || cublasCreate(&h)) {
		printf("FAIL: setting up\n");
		return 1;
	}
	cudaMemcpy(x, host, N * 4, cudaMemcpyHostToDevice);               /* 0 */
	k_copy<<<grid, 256>>>(x, y, N);                                    /* 1 */
	k_sum<<<grid, 256>>>(x, N, part);                                  /* 2 */
	k_fill<<<grid, 256>>>(y, N);                                       /* 3 */
	k_copy<<<grid, 256>>>(x, y, N);                                    /* 4 */
	cudaMemset(a16, 0, m * k * 2);                                     /* 5 */
	cudaMemset(b16, 0, k * nn * 2);                                    /* 6 */
	emu_count_mark("gemms");                                           /* 7 */
	cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, nn, k, &one, a16, CUDA_R_16BF, m,
				   0, b16, CUDA_R_16BF, k, 0, &zero, c16, CUDA_R_16BF, m, 0, 1,
				   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);            /* 8 */
	cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, &one, a32, CUDA_R_32F, k,
				   0, b32, CUDA_R_32F, k, 0, &one, c32, CUDA_R_32F, m, 0, 1,
				   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);            /* 9 */
	cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
	cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, m, nn, k, &one, a32, CUDA_R_32F, m,
				   0, b32, CUDA_R_32F, nn, 0, &zero, c32, CUDA_R_32F, m, 0, 1,
				   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);            /* 10 */
	cudaMemcpy(host, y, N * 4, cudaMemcpyDeviceToHost);               /* 11 */
	n = read_counts(path, r, 64);
	unlink(path);
	if (n != 12) {
		printf("FAIL: %d records in the counts file, expected 12\n", n);
		free(host);
		return 1;
	}
	expect(r[0].kind == 'C' && !strcmp(r[0].cls, "h2d") && r[0].wr == N * 4.0 && r[0].rd == 0,
	       "a host-to-device copy of 4N bytes writes 4N device bytes over h2d");
	expect(r[1].kind == 'K' && strstr(r[1].name, "k_copy") != NULL, "launch 1 is k_copy");
	expect(near(r[1].rd, N * 4.0), "a copy of N floats reads 4N bytes (within 2 pages)");
	expect(near(r[1].wr, N * 4.0), "a copy of N floats writes 4N bytes (within 2 pages)");
	expect(near(r[2].rd, N * 4.0) && r[2].wr == 0,
	       "a kernel that only reads N floats reads 4N bytes and writes none");
	expect(r[3].rd == 0 && near(r[3].wr, N * 4.0),
	       "a kernel that only writes N floats writes 4N bytes and reads none");
	expect(near(r[4].rd, N * 4.0) && near(r[4].wr, N * 4.0),
	       "a second launch over the same buffers counts them again");
	expect(r[5].kind == 'C' && r[5].wr == m * k * 2.0, "a memset writes its bytes");
	expect(r[7].kind == 'M' && !strcmp(r[7].name, "gemms"),
	       "the mark comes after the work queued before it");
	expect(r[8].kind == 'G' && r[8].flops == 2.0 * m * nn * k && !strcmp(r[8].cls, "tc16"),
	       "a bf16 GEMM counts 2mnk FLOPs on tensor cores");
	expect(r[8].rd == 2.0 * (m * k + k * nn) && r[8].wr == 2.0 * m * nn,
	       "a bf16 GEMM with beta 0 reads A and B and writes C");
	expect(r[9].flops == 2.0 * m * nn * k && !strcmp(r[9].cls, "fp32"),
	       "an F32 GEMM in the default math mode counts 2mnk FLOPs on the CUDA cores");
	expect(r[9].rd == 4.0 * (m * k + k * nn + m * nn), "a GEMM with beta 1 reads C too");
	expect(r[10].flops == 2.0 * m * nn * k && !strcmp(r[10].cls, "tf32"),
	       "an F32 GEMM under CUBLAS_TF32_TENSOR_OP_MATH counts as TF32");
	expect(r[11].kind == 'C' && !strcmp(r[11].cls, "d2h") && r[11].rd == N * 4.0,
	       "a device-to-host copy reads its bytes over d2h");
	if (!failures)
		printf("emu_counts: %d records, every count right (copy of %d floats: read %.0f, "
		       "wrote %.0f bytes)\n", n, N, r[1].rd, r[1].wr);
	cublasDestroy(h);
	cudaFree(x);
	cudaFree(y);
	cudaFree(part);
	cudaFree(a32);
	cudaFree(b32);
	cudaFree(c32);
	cudaFree(a16);
	cudaFree(b16);
	cudaFree(c16);
	free(host);
	return failures ? 1 : 0;
}
