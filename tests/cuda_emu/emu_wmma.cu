/* emu_wmma - the emulated warp matrix API (cuda_emu_wmma.h):
 *   (no argument) a block of two warps, each computing a 16x16 tile of
 *     C = A B + C0 over K = 32 (two mma_sync) from bf16 A (row-major) and
 *     B (column-major) and F32 C0 loaded row-major, stored row-major and
 *     again column-major, equals the host's product exactly (small
 *     integers: every product and sum is exact in F32); fill_fragment
 *     fills every element; under EMU_COUNTS the launch counts
 *     2 warps x 2 mma x 2 x 16^3 FLOPs of class tc16 (once per warp, not
 *     per lane), and a kernel without mma counts none ("-");
 *   misaligned: a load from a pointer 2 bytes past a 32-byte boundary
 *     fails, naming the kernel and wmma::load_matrix_sync;
 *   ldm: a load with ldm 12 (not a multiple of 8 bf16 elements) fails;
 *   lane-exit, last-lane-exit: an mma_sync after lane 5 has returned, or
 *     while lane 31 returns, fails, saying every lane of the warp must
 *     take part.
 * Exits 0 when every check holds (the failing modes are run by
 * emu_expect_fail). */
#include <mma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace wmma = nvcuda::wmma;

#define M 32 /* rows of A and C: two warps of 16 */
#define K 32
#define N 16

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> frag_b;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

/* a (M x K row-major), b (K x N column-major: b[n K + k]), c0 (M x N
 * row-major); c_row and c_col get A B + C0 row- and column-major. */
__global__ void k_wmma_gemm(const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c0,
			    float *c_row, float *c_col, float *filled)
{
	int r0 = threadIdx.x / 32 * 16;
	frag_a fa;
	frag_b fb;
	frag_c acc;

	wmma::fill_fragment(acc, 3.0f);
	if (r0 == 0)
		wmma::store_matrix_sync(filled, acc, N, wmma::mem_row_major);
	wmma::load_matrix_sync(acc, c0 + r0 * N, N, wmma::mem_row_major);
	for (int k0 = 0; k0 < K; k0 += 16) {
		wmma::load_matrix_sync(fa, a + r0 * K + k0, K);
		wmma::load_matrix_sync(fb, b + k0, K);
		wmma::mma_sync(acc, fa, fb, acc);
	}
	wmma::store_matrix_sync(c_row + r0 * N, acc, N, wmma::mem_row_major);
	wmma::store_matrix_sync(c_col + r0, acc, M, wmma::mem_col_major);
}

/* mode 1: a misaligned pointer; 2: ldm 12; 3: lane 5 returns first, 4:
 * the warp's last lane returns first (after the others have arrived) */
__global__ void k_wmma_wrong(const __nv_bfloat16 *a, float *c, int mode)
{
	frag_a fa;
	frag_b fb;
	frag_c acc;

	wmma::fill_fragment(acc, 0.0f);
	wmma::fill_fragment(fb, 1.0f);
	if (mode == 1)
		wmma::load_matrix_sync(fa, a + 1, K);
	else if (mode == 2)
		wmma::load_matrix_sync(fa, a, 12);
	else
		wmma::load_matrix_sync(fa, a, K);
	if ((mode == 3 && threadIdx.x == 5) || (mode == 4 && threadIdx.x == 31))
		return;
	wmma::mma_sync(acc, fa, fb, acc);
	wmma::store_matrix_sync(c, acc, N, wmma::mem_row_major);
}

__global__ void k_no_mma(float *c)
{
	c[threadIdx.x] = 1.0f;
}

static int failures;

static void expect(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

/* The kernel records of the counts file: name, FLOPs and class. */
static int read_kernels(const char *path, char names[][64], double *flops, char cls[][16],
			int max)
{
	FILE *f = fopen(path, "r");
	char line[512], kind;
	double rd, wr;
	int n = 0;

	if (!f)
		return -1;
	while (n < max && fgets(line, sizeof(line), f))
		if (sscanf(line, "%c\t%63[^\t]\t%lf\t%lf\t%lf\t%15s", &kind, names[n], &rd, &wr,
			   &flops[n], cls[n]) == 6 && kind == 'K')
			n++;
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	char path[] = "/tmp/emu_wmma_XXXXXX", names[4][64], cls[4][16];
	static __nv_bfloat16 ha[M * K], hb[K * N];
	static float hc0[M * N], row[M * N], col[M * N], filled[16 * N];
	__nv_bfloat16 *a, *b;
	float *c0, *c_row, *c_col, *c_fill;
	double flops[4];
	int fd = mkstemp(path), n;

	if (fd < 0) {
		perror("emu_wmma: mkstemp");
		return 1;
	}
	close(fd);
	setenv("EMU_COUNTS", path, 1);
	for (int i = 0; i < M * K; i++)
		ha[i] = __float2bfloat16_rn((float)(i % 7) - 3.0f);
	for (int i = 0; i < K * N; i++)
		hb[i] = __float2bfloat16_rn((float)(i % 5) - 2.0f);
	for (int i = 0; i < M * N; i++)
		hc0[i] = (float)(i % 11);
	if (cudaMalloc((void **)&a, sizeof(ha)) || cudaMalloc((void **)&b, sizeof(hb)) ||
	    cudaMalloc((void **)&c0, sizeof(hc0)) || cudaMalloc((void **)&c_row, sizeof(row)) ||
	    cudaMalloc((void **)&c_col, sizeof(col)) || cudaMalloc((void **)&c_fill, sizeof(filled))) {
		printf("FAIL: setting up\n");
		return 1;
	}
	cudaMemcpy(a, ha, sizeof(ha), cudaMemcpyHostToDevice);
	cudaMemcpy(b, hb, sizeof(hb), cudaMemcpyHostToDevice);
	cudaMemcpy(c0, hc0, sizeof(hc0), cudaMemcpyHostToDevice);
	if (*mode) {
		int m = !strcmp(mode, "misaligned") ? 1 : !strcmp(mode, "ldm") ? 2 :
			!strcmp(mode, "lane-exit") ? 3 : !strcmp(mode, "last-lane-exit") ? 4 : 0;

		unlink(path);
		if (!m) {
			printf("usage: emu_wmma [misaligned|ldm|lane-exit|last-lane-exit]\n");
			return 2;
		}
		k_wmma_wrong<<<1, 32>>>(a, c_row, m);
		cudaDeviceSynchronize();
		printf("emu_wmma %s: the kernel ran to its end\n", mode);
		return 0;
	}
	k_wmma_gemm<<<1, 64>>>(a, b, c0, c_row, c_col, c_fill);
	k_no_mma<<<1, 32>>>(c0);
	cudaMemcpy(row, c_row, sizeof(row), cudaMemcpyDeviceToHost);
	cudaMemcpy(col, c_col, sizeof(col), cudaMemcpyDeviceToHost);
	cudaMemcpy(filled, c_fill, sizeof(filled), cudaMemcpyDeviceToHost);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float want = hc0[i * N + j];

			for (int k = 0; k < K; k++)
				want += __bfloat162float(ha[i * K + k]) * __bfloat162float(hb[j * K + k]);
			if (row[i * N + j] != want || col[j * M + i] != want) {
				printf("FAIL: C[%d][%d]: row-major %g, column-major %g, want %g\n", i, j,
				       row[i * N + j], col[j * M + i], want);
				failures++;
				i = M;
				break;
			}
		}
	for (int i = 0; i < 16; i++)
		expect(filled[i * N] == 3.0f && filled[i * N + 15] == 3.0f,
		       "fill_fragment fills every element");
	n = read_kernels(path, names, flops, cls, 4);
	unlink(path);
	expect(n == 2, "two kernel records in the counts file");
	if (n == 2) {
		expect(strstr(names[0], "k_wmma_gemm") && flops[0] == 2 * 2 * 2.0 * 16 * 16 * 16 &&
			       !strcmp(cls[0], "tc16"),
		       "2 warps x 2 mma_sync count 2 x 2 x 2 x 16^3 FLOPs of class tc16");
		expect(flops[1] == 0 && !strcmp(cls[1], "-"), "a kernel without mma counts no FLOPs");
	}
	if (!failures)
		printf("emu_wmma: the product, layouts, fill and counts are right (%g FLOPs "
		       "counted)\n", flops[0]);
	return failures ? 1 : 0;
}
