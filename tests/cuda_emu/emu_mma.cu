/* emu_mma - the warp-level tensor-core instructions of
 * kernels/cuda/cuda_mma.cuh (mma.sync m16n8k16, ldmatrix) under the
 * emulator:
 *   (no argument) a block of two warps, each computing a 16 x 16 tile of
 *     D = A B + C0 over K = 32 (A 32 x 32, B 32 x 16, C0 32 x 16), for bf16
 *     and f16: A from shared memory by ldmatrix.x4, B three ways (.x4.trans
 *     and .x2.trans of the row-major k x n tile, .x2 of the n x k tile),
 *     C0 loaded and D stored by the accumulator layout; each equals the
 *     host's product exactly (integers, |A| <= 8, |B| <= 6, |C0| <= 4: every
 *     |D| < 2^11, so each product and sum is exact in F32). Then each warp
 *     packs its two D tiles (mma_pack) into the A fragment of a second
 *     product with a 16 x 8 B2 (|B2| <= 5), which equals the host's product
 *     of D rounded to the 16-bit type (exact in F32: the rounded D are
 *     integers below 2^11, the sums below 2^17). The shared
 *     rows are padded (pitches of 80 and 48 bytes), so a layout that
 *     assumed contiguous rows would read the wrong elements. Under
 *     EMU_COUNTS each launch counts 2 warps x 13 mma x 2 x 16 x 8 x 16 FLOPs
 *     of class tc16 (once per warp, not per lane);
 *   misaligned: an ldmatrix.x4 whose lane 9 gives a row address 8 bytes
 *     past a 16-byte boundary fails, naming the call and the lane;
 *   lane-exit, last-lane-exit: an mma after lane 5 has returned, or while
 *     lane 31 returns, fails, naming the call;
 *   partial-warp: an mma in a block of 48 threads (warp 1 has 16 lanes)
 *     fails, naming the call;
 *   divergent: lanes 0-15 at an mma while lanes 16-31 are at an ldmatrix
 *     fails, naming both.
 * Exits 0 when every check holds (the failing modes are run by
 * emu_expect_fail). */
#include "cuda_mma.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define M 32 /* rows of A and D: two warps of 16 */
#define K 32
#define N 16
#define LDA 40  /* shared pitches in elements: 80 bytes */
#define LDB 24  /* 48 bytes */
#define LDBT 40 /* 80 bytes */
#define VARIANTS 3 /* B by x4.trans, x2.trans, x2 of the transposed tile */
#define MMAS_PER_WARP (2 * (2 + 2 + 2) + 1)

/* This lane's accumulator element i of the n-tile at column n0 of a tile
 * with rows r0.., in a row-major matrix of pitch ld. */
static __device__ int acc_index(int r0, int n0, int ld, int i)
{
	int lane = threadIdx.x % 32;

	return (r0 + lane / 4 + 8 * (i / 2)) * ld + n0 + 2 * (lane % 4) + (i & 1);
}

/* a (M x K), b (K x N), b2 (16 x 8), c0 (M x N) row-major; d gets
 * VARIANTS copies of C0 + A B (M x N each), e the second product (M x 8). */
template <class E> static __device__ void mma_tiles(const E *a, const E *b, const E *b2,
						    const float *c0, float *d, float *e)
{
	__shared__ __align__(16) E sa[M * LDA];
	__shared__ __align__(16) E sb[K * LDB];
	__shared__ __align__(16) E sbt[N * LDBT];
	__shared__ __align__(16) E sb2[16 * LDB];
	int tid = threadIdx.x, lane = tid % 32, r0 = tid / 32 * 16;
	float c[VARIANTS][2][4], ce[4] = { 0, 0, 0, 0 };
	uint32_t af[4], af2[4], bf[4];

	for (int i = tid; i < M * K; i += blockDim.x)
		sa[i / K * LDA + i % K] = a[i];
	for (int i = tid; i < K * N; i += blockDim.x) {
		sb[i / N * LDB + i % N] = b[i];
		sbt[i % N * LDBT + i / N] = b[i];
	}
	for (int i = tid; i < 16 * 8; i += blockDim.x)
		sb2[i / 8 * LDB + i % 8] = b2[i];
	__syncthreads();
	for (int v = 0; v < VARIANTS; v++)
		for (int j = 0; j < 2; j++)
			for (int i = 0; i < 4; i++)
				c[v][j][i] = c0[acc_index(r0, 8 * j, N, i)];
	for (int k0 = 0; k0 < K; k0 += 16) {
		/* A: lanes 0-15 rows 0-15 at column k0, lanes 16-31 at k0 + 8 */
		ldmatrix_x4(af, &sa[(r0 + lane % 16) * LDA + k0 + lane / 16 * 8]);
		/* B, .x4.trans: matrices (k0, n 0), (k0 + 8, n 0), (k0, n 8),
		 * (k0 + 8, n 8): both n-tiles' fragments at once */
		ldmatrix_x4_trans(bf, &sb[(k0 + lane % 16) * LDB + lane / 16 * 8]);
		mma_16816<E>(c[0][0], af, bf);
		mma_16816<E>(c[0][1], af, bf + 2);
		for (int j = 0; j < 2; j++) {
			/* .x2.trans: rows k0..k0+15 of the n-tile (lanes 16-31
			 * repeat lanes 0-15's addresses) */
			ldmatrix_x2_trans(bf, &sb[(k0 + lane % 16) * LDB + 8 * j]);
			mma_16816<E>(c[1][j], af, bf);
			/* .x2 of B transposed (n x k): rows n of the tile, columns
			 * k0 (lanes 0-7) and k0 + 8 (lanes 8-15) */
			ldmatrix_x2(bf, &sbt[(8 * j + lane % 8) * LDBT + k0 + lane / 8 % 2 * 8]);
			mma_16816<E>(c[2][j], af, bf);
		}
	}
	for (int v = 0; v < VARIANTS; v++)
		for (int j = 0; j < 2; j++)
			for (int i = 0; i < 4; i++)
				d[v * M * N + acc_index(r0, 8 * j, N, i)] = c[v][j][i];
	/* the D tiles, rounded, are the A fragment of the next product:
	 * columns 0-7 the first n-tile's, 8-15 the second's */
	for (int j = 0; j < 2; j++) {
		af2[2 * j] = mma_pack<E>(c[0][j][0], c[0][j][1]);
		af2[2 * j + 1] = mma_pack<E>(c[0][j][2], c[0][j][3]);
	}
	ldmatrix_x2_trans(bf, &sb2[lane % 16 * LDB]);
	mma_16816<E>(ce, af2, bf);
	for (int i = 0; i < 4; i++)
		e[acc_index(r0, 0, 8, i)] = ce[i];
}

__global__ void k_mma_bf16(const __nv_bfloat16 *a, const __nv_bfloat16 *b,
			   const __nv_bfloat16 *b2, const float *c0, float *d, float *e)
{
	mma_tiles<__nv_bfloat16>(a, b, b2, c0, d, e);
}

__global__ void k_mma_f16(const __half *a, const __half *b, const __half *b2, const float *c0,
			  float *d, float *e)
{
	mma_tiles<__half>(a, b, b2, c0, d, e);
}

enum { WRONG_MISALIGNED = 1, WRONG_LANE_EXIT, WRONG_LAST_LANE_EXIT, WRONG_PARTIAL_WARP,
       WRONG_DIVERGENT };

/* One product done wrong the way `mode` says. */
__global__ void k_mma_wrong(float *out, int mode)
{
	__shared__ __align__(16) __nv_bfloat16 s[16 * 16 + 8];
	int lane = threadIdx.x % 32, off = 0;
	uint32_t a[4] = { 0, 0, 0, 0 }, b[2] = { 0, 0 };
	float c[4] = { 0, 0, 0, 0 };

	/* no barrier before the mma in these two: lane 31 must return after
	 * the others have passed the mma's entry (a barrier's last lane runs
	 * on first) */
	if (mode != WRONG_PARTIAL_WARP && mode != WRONG_LAST_LANE_EXIT) {
		for (int i = threadIdx.x; i < 16 * 16 + 8; i += blockDim.x)
			s[i] = __float2bfloat16_rn(1.0f);
		__syncthreads();
		if (mode == WRONG_MISALIGNED && lane == 9)
			off = 4; /* 8 bytes */
		ldmatrix_x4(a, &s[lane % 16 * 16 + lane / 16 * 8 + off]);
		ldmatrix_x2_trans(b, &s[lane % 16 * 16]);
	}
	if ((mode == WRONG_LANE_EXIT && lane == 5) || (mode == WRONG_LAST_LANE_EXIT && lane == 31))
		return;
	if (mode == WRONG_DIVERGENT && lane >= 16)
		ldmatrix_x4(a, &s[lane % 16 * 16]);
	else
		mma_16816<__nv_bfloat16>(c, a, b);
	out[threadIdx.x] = c[0];
}

static int failures;

static void expect(int ok, const char *what)
{
	if (!ok) {
		printf("FAIL: %s\n", what);
		failures++;
	}
}

/* The kernel records of the counts file: FLOPs and class. */
static int read_kernels(const char *path, double *flops, char cls[][16], int max)
{
	FILE *f = fopen(path, "r");
	char line[512], name[64], kind;
	double rd, wr;
	int n = 0;

	if (!f)
		return -1;
	while (n < max && fgets(line, sizeof(line), f))
		if (sscanf(line, "%c\t%63[^\t]\t%lf\t%lf\t%lf\t%15s", &kind, name, &rd, &wr, &flops[n],
			   cls[n]) == 6 && kind == 'K')
			n++;
	fclose(f);
	return n;
}

static int run_wrong(const char *mode)
{
	static const char *const names[] = { "", "misaligned", "lane-exit", "last-lane-exit",
					     "partial-warp", "divergent" };
	float *out;
	int m = 0;

	for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (!strcmp(mode, names[i]))
			m = i;
	if (!m) {
		printf("usage: emu_mma [misaligned|lane-exit|last-lane-exit|partial-warp|"
		       "divergent]\n");
		return 2;
	}
	if (cudaMalloc((void **)&out, 64 * sizeof(float))) {
		printf("FAIL: setting up\n");
		return 1;
	}
	k_mma_wrong<<<1, m == WRONG_PARTIAL_WARP ? 48 : 32>>>(out, m);
	cudaDeviceSynchronize();
	printf("emu_mma %s: the kernel ran to its end\n", mode);
	return 0;
}

/* The host's values of the test (small integers, exact in both types). */
static float val_a(int i) { return (float)(i * 7 % 17 - 8); }
static float val_b(int i) { return (float)(i * 5 % 13 - 6); }
static float val_b2(int i) { return (float)(i * 3 % 11 - 5); }
static float val_c0(int i) { return (float)(i % 9 - 4); }

/* Runs one dtype's kernel and checks D and E; E's rounding by `round`. */
template <class E> static void check_dtype(const char *dtype,
					   void (*kernel)(const E *, const E *, const E *,
							  const float *, float *, float *),
					   E (*to_e)(float), float (*from_e)(E))
{
	static E ha[M * K], hb[K * N], hb2[16 * 8];
	static float hc0[M * N], hd[VARIANTS * M * N], he[M * 8], want[M * N];
	static const char *const variant[] = { "x4.trans", "x2.trans", "x2 of B transposed" };
	E *a, *b, *b2;
	float *c0, *d, *e;
	char what[160];

	for (int i = 0; i < M * K; i++)
		ha[i] = to_e(val_a(i));
	for (int i = 0; i < K * N; i++)
		hb[i] = to_e(val_b(i));
	for (int i = 0; i < 16 * 8; i++)
		hb2[i] = to_e(val_b2(i));
	for (int i = 0; i < M * N; i++)
		hc0[i] = val_c0(i);
	if (cudaMalloc((void **)&a, sizeof(ha)) || cudaMalloc((void **)&b, sizeof(hb)) ||
	    cudaMalloc((void **)&b2, sizeof(hb2)) || cudaMalloc((void **)&c0, sizeof(hc0)) ||
	    cudaMalloc((void **)&d, sizeof(hd)) || cudaMalloc((void **)&e, sizeof(he))) {
		printf("FAIL: setting up\n");
		exit(1);
	}
	cudaMemcpy(a, ha, sizeof(ha), cudaMemcpyHostToDevice);
	cudaMemcpy(b, hb, sizeof(hb), cudaMemcpyHostToDevice);
	cudaMemcpy(b2, hb2, sizeof(hb2), cudaMemcpyHostToDevice);
	cudaMemcpy(c0, hc0, sizeof(hc0), cudaMemcpyHostToDevice);
	kernel<<<1, 64>>>(a, b, b2, c0, d, e);
	cudaMemcpy(hd, d, sizeof(hd), cudaMemcpyDeviceToHost);
	cudaMemcpy(he, e, sizeof(he), cudaMemcpyDeviceToHost);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float s = hc0[i * N + j];

			for (int k = 0; k < K; k++)
				s += from_e(ha[i * K + k]) * from_e(hb[k * N + j]);
			want[i * N + j] = s;
		}
	for (int v = 0; v < VARIANTS; v++)
		for (int i = 0; i < M * N; i++)
			if (hd[v * M * N + i] != want[i]) {
				snprintf(what, sizeof what, "%s, B by %s: D[%d][%d] = %g, want %g", dtype,
					 variant[v], i / N, i % N, hd[v * M * N + i], want[i]);
				expect(0, what);
				break;
			}
	for (int i = 0; i < M; i++)
		for (int j = 0; j < 8; j++) {
			float s = 0.0f;

			for (int k = 0; k < 16; k++)
				s += from_e(to_e(want[i * N + k])) * from_e(hb2[k * 8 + j]);
			if (he[i * 8 + j] != s) {
				snprintf(what, sizeof what, "%s, D packed into an A fragment: E[%d][%d] "
					 "= %g, want %g", dtype, i, j, he[i * 8 + j], s);
				expect(0, what);
				i = M;
				break;
			}
		}
	cudaFree(a);
	cudaFree(b);
	cudaFree(b2);
	cudaFree(c0);
	cudaFree(d);
	cudaFree(e);
}

static __nv_bfloat16 to_bf16(float x) { return __float2bfloat16_rn(x); }
static float from_bf16(__nv_bfloat16 x) { return __bfloat162float(x); }
static __half to_f16(float x) { return __float2half_rn(x); }
static float from_f16(__half x) { return __half2float(x); }

int main(int argc, char **argv)
{
	char path[] = "/tmp/emu_mma_XXXXXX", cls[4][16];
	double flops[4], want = 2.0 * MMAS_PER_WARP * 2 * 16 * 8 * 16;
	int fd, n;

	if (argc > 1)
		return run_wrong(argv[1]);
	fd = mkstemp(path);
	if (fd < 0) {
		perror("emu_mma: mkstemp");
		return 1;
	}
	close(fd);
	setenv("EMU_COUNTS", path, 1);
	check_dtype<__nv_bfloat16>("bf16", k_mma_bf16, to_bf16, from_bf16);
	check_dtype<__half>("f16", k_mma_f16, to_f16, from_f16);
	n = read_kernels(path, flops, cls, 4);
	unlink(path);
	expect(n == 2, "two kernel records in the counts file");
	for (int i = 0; i < n && i < 2; i++)
		expect(flops[i] == want && !strcmp(cls[i], "tc16"),
		       "2 warps x 13 mma count 2 x 13 x 2 x 16 x 8 x 16 FLOPs of class tc16");
	if (!failures)
		printf("emu_mma: ldmatrix (x4, x4.trans, x2, x2.trans), mma.m16n8k16 (bf16, f16) "
		       "and the D-to-A reuse equal the host's; %g FLOPs counted per launch\n",
		       flops[0]);
	return failures ? 1 : 0;
}
