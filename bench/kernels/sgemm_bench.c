/* sgemm throughput: the CPU kernel table's gemm and OpenBLAS's sgemm. */
#include <cblas.h>
#include <time.h>

#include "sgemm_bench.h"
#include "weft/device.h"
#include "weft/memory.h"

double weft_bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The best single call's GFLOP/s of C = A B^T, through the kernel table
 * (table) or OpenBLAS directly. */
static double best_rate(const weft_kernel_table *kt, int table, int64_t m, int64_t n, int64_t k,
			const float *a, const float *b, float *c, double min_seconds)
{
	const double flops = 2.0 * (double)m * (double)n * (double)k;
	double best = 0.0, start = weft_bench_now(), t0, dt;

	/* call 0 warms up; then at least 3 timed calls, and more until min_seconds */
	for (int call = 0; call <= 3 || weft_bench_now() - start < min_seconds; call++) {
		t0 = weft_bench_now();
		if (table)
			kt->gemm(NULL, WEFT_F32, 0, 1, m, n, k, 1.0f, a, k, 0, b, k, 0, 0.0f, c, n,
				 0, 1);
		else
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k,
				    1.0f, a, (int)k, b, (int)k, 0.0f, c, (int)n);
		dt = weft_bench_now() - t0;
		if (call > 0 && dt > 0 && flops / dt / 1e9 > best)
			best = flops / dt / 1e9;
	}
	return best;
}

double weft_bench_sgemm_gflops(int64_t m, int64_t n, int64_t k, double min_seconds,
			       double *table_gflops, double *openblas_gflops)
{
	const weft_kernel_table *kt;
	float *a, *b, *c;
	double best = -1.0, t = 0.0, o = 0.0;

	if (weft_kernels_get(WEFT_CPU, &kt))
		return -1.0;
	a = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)(m * k) * sizeof(float));
	b = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)(n * k) * sizeof(float));
	c = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)(m * n) * sizeof(float));
	if (a && b && c) {
		for (int64_t i = 0; i < m * k; i++)
			a[i] = (float)((i * 7) % 13) * 0.01f;
		for (int64_t i = 0; i < n * k; i++)
			b[i] = (float)((i * 5) % 11) * 0.01f;
		t = best_rate(kt, 1, m, n, k, a, b, c, min_seconds / 2);
		o = best_rate(kt, 0, m, n, k, a, b, c, min_seconds / 2);
		best = t > o ? t : o;
	}
	if (table_gflops)
		*table_gflops = t;
	if (openblas_gflops)
		*openblas_gflops = o;
	weft_mem_free(a);
	weft_mem_free(b);
	weft_mem_free(c);
	return best;
}
