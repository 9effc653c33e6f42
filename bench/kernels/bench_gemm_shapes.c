/* Every GEMM of a gpt-small-cpu training step (B T = 1024 rows, width 384,
 * vocab 256) through cblas_sgemm, with the layout weft uses and the same
 * m x n x k with each of NN, NT, TN, TT: whether another transposition
 * (another layout for weights or activations) would be faster; and, in
 * the layout weft uses, through the CPU kernel table's gemm ("weft": its
 * AVX-512 kernel where the CPU has one), warm and cold (after 64 MB of
 * other writes, as in a training step, where the operands come from L3
 * or memory). GFLOP/s from the thread's CPU time, best of 5 calls after
 * one warm-up.
 *
 *     bench_gemm_shapes      (1 thread)
 */
#include <cblas.h>
#include <string.h>

#include "kernels_cpu.h"
#include "weft/device.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct gemm_shape {
	const char *name;
	int m, n, k;
	int ta, tb; /* the layout weft uses */
} gemm_shape;

static const gemm_shape shapes[] = {
	{ "c_attn fwd", 1024, 1152, 384, 0, 1 },  { "attn proj fwd", 1024, 384, 384, 0, 1 },
	{ "c_fc fwd", 1024, 1536, 384, 0, 1 },    { "mlp proj fwd", 1024, 384, 1536, 0, 1 },
	{ "lm head fwd", 1024, 256, 384, 0, 1 },  { "c_attn dx", 1024, 384, 1152, 0, 0 },
	{ "attn proj dx", 1024, 384, 384, 0, 0 }, { "c_fc dx", 1024, 384, 1536, 0, 0 },
	{ "mlp proj dx", 1024, 1536, 384, 0, 0 }, { "lm head dx", 1024, 384, 256, 0, 0 },
	{ "c_attn dw", 1152, 384, 1024, 1, 0 },   { "attn proj dw", 384, 384, 1024, 1, 0 },
	{ "c_fc dw", 1536, 384, 1024, 1, 0 },     { "mlp proj dw", 384, 1536, 1024, 1, 0 },
	{ "lm head dw", 256, 384, 1024, 1, 0 },
};

static double thread_cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n)
{
	float *p = malloc(n * sizeof(float));

	for (size_t i = 0; p && i < n; i++)
		p[i] = (float)(i % 13) * 0.01f;
	return p;
}

static char *junk;

/* Writes 64 MB elsewhere, so the next call finds its operands cold. */
static void evict(void)
{
	if (junk)
		for (size_t i = 0; i < (64u << 20); i += 64)
			junk[i]++;
}

/* GFLOP/s of C (m x n) += op(A) op(B) through OpenBLAS (kt NULL) or the
 * kernel table's gemm, each call cold when asked; -1 when out of memory. */
static double rate_with(const weft_kernel_table *kt, int cold, int ta, int tb, int m, int n,
			int k)
{
	float *a = filled((size_t)m * k), *b = filled((size_t)k * n), *c = filled((size_t)m * n);
	double best = 1e30;

	if (!a || !b || !c) {
		best = -1.0;
		goto out_free;
	}
	for (int r = 0; r < 6; r++) {
		double t0, dt;

		if (cold)
			evict();
		t0 = thread_cpu_now();
		if (kt)
			kt->gemm(NULL, WEFT_F32, ta, tb, m, n, k, 1.0f, a, ta ? m : k, 0, b,
				 tb ? k : n, 0, 1.0f, c, n, 0, 1);
		else
			cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
				    tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, ta ? m : k, b,
				    tb ? k : n, 1.0f, c, n);
		dt = thread_cpu_now() - t0;
		if (r > 0 && dt > 0 && dt < best)
			best = dt;
	}
	best = 2.0 * m * n * (double)k / best / 1e9;
out_free:
	free(a);
	free(b);
	free(c);
	return best;
}

static double rate(int ta, int tb, int m, int n, int k)
{
	return rate_with(NULL, 0, ta, tb, m, n, k);
}

int main(void)
{
	const weft_kernel_table *kt = NULL;

	openblas_set_num_threads(1);
	weft_kernels_cpu_set_threads(1);
	if (weft_kernels_get(WEFT_CPU, &kt))
		kt = NULL;
	junk = malloc(64u << 20);
	if (junk)
		memset(junk, 1, 64u << 20);
	printf("OpenBLAS %s, 1 thread; GFLOP/s (thread CPU time, best of 5)\n",
	       openblas_get_corename());
	printf("%-14s %5s %5s %5s %7s %7s %7s %7s %7s | %7s %7s %7s\n", "gemm", "m", "n", "k",
	       "used", "NN", "NT", "TN", "TT", "cold", "weft", "cold");
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		const gemm_shape *s = &shapes[i];

		printf("%-14s %5d %5d %5d %7.1f", s->name, s->m, s->n, s->k,
		       rate(s->ta, s->tb, s->m, s->n, s->k));
		for (int t = 0; t < 4; t++)
			printf(" %7.1f", rate(t >> 1, t & 1, s->m, s->n, s->k));
		printf(" | %7.1f", rate_with(NULL, 1, s->ta, s->tb, s->m, s->n, s->k));
		if (kt)
			printf(" %7.1f %7.1f", rate_with(kt, 0, s->ta, s->tb, s->m, s->n, s->k),
			       rate_with(kt, 1, s->ta, s->tb, s->m, s->n, s->k));
		printf("\n");
	}
	free(junk);
	return 0;
}
