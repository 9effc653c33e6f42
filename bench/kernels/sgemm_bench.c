/* sgemm throughput through the CPU kernel table. */
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

double weft_bench_sgemm_gflops(int64_t m, int64_t n, int64_t k, double min_seconds)
{
	const weft_kernel_table *kt;
	float *a, *b, *c;
	double best = 0.0, start, t0, dt;
	int runs = 0;

	if (weft_kernels_get(WEFT_CPU, &kt))
		return -1.0;
	a = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)(m * k) * sizeof(float));
	b = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)(n * k) * sizeof(float));
	c = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)(m * n) * sizeof(float));
	if (!a || !b || !c) {
		best = -1.0;
		goto out_free;
	}
	for (int64_t i = 0; i < m * k; i++)
		a[i] = (float)((i * 7) % 13) * 0.01f;
	for (int64_t i = 0; i < n * k; i++)
		b[i] = (float)((i * 5) % 11) * 0.01f;
	kt->gemm(NULL, WEFT_F32, 0, 1, m, n, k, 1.0f, a, k, 0, b, k, 0, 0.0f, c, n, 0, 1);
	start = weft_bench_now();
	while (runs < 3 || weft_bench_now() - start < min_seconds) {
		t0 = weft_bench_now();
		kt->gemm(NULL, WEFT_F32, 0, 1, m, n, k, 1.0f, a, k, 0, b, k, 0, 0.0f, c, n, 0, 1);
		dt = weft_bench_now() - t0;
		if (dt > 0 && 2.0 * (double)m * (double)n * (double)k / dt / 1e9 > best)
			best = 2.0 * (double)m * (double)n * (double)k / dt / 1e9;
		runs++;
	}
out_free:
	weft_mem_free(a);
	weft_mem_free(b);
	weft_mem_free(c);
	return best;
}
