/* weft sets how long OpenBLAS's idle workers spin before they sleep
 * (kernels/cpu/cpu_table.c, at load time): after a 2-thread product, the
 * process must be idle while it sleeps.
 * OpenBLAS's own default keeps its worker spinning for ~0.1 s (103 ms of
 * CPU measured in a 300 ms sleep on the 2-core CI machine); with weft's
 * setting it is 0.2 ms. Bound: 20 ms of CPU over the 300 ms sleep.
 *
 *   test_blas_spin            the variable was unset: OpenBLAS runs with
 *                             weft's spin, and the workers sleep
 *   test_blas_spin VALUE      the user set it to VALUE: OpenBLAS runs with
 *                             VALUE, and the environment is unchanged */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels_cpu.h"
#include "weft/device.h"
#include "weft_test.h"

enum { N = 384 }; /* big enough for OpenBLAS to use both threads */

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *v = getenv("OPENBLAS_THREAD_TIMEOUT");
	const weft_kernel_table *k;
	float *a, *b, *c;
	double c0, idle_ms;

	if (argc > 1) {
		WT_REQUIRE(v != NULL);
		WT_CHECK(!strcmp(v, argv[1]));
		WT_CHECK(weft_kernels_cpu_blas_spin() == atoi(argv[1]));
		return wt_done("test_blas_spin");
	}
	WT_CHECK(v == NULL); /* set for OpenBLAS only, not left behind */
	WT_CHECK(weft_kernels_cpu_blas_spin() == atoi(WEFT_BLAS_THREAD_TIMEOUT));
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("SKIP: one core, so OpenBLAS has no worker thread to spin\n");
		return 77;
	}
	WT_OK(weft_kernels_get(WEFT_CPU, &k)); /* loads the CPU table: its settings */
	(void)k;
	weft_kernels_cpu_set_threads(2);
	a = calloc(N * N, sizeof(float));
	b = calloc(N * N, sizeof(float));
	c = calloc(N * N, sizeof(float));
	WT_REQUIRE(a && b && c);
	for (int i = 0; i < 3; i++)
		/* OpenBLAS itself: the table's gemm runs products of this size on
		 * weft's own kernel (cpu_sgemm.c), and attention's calls OpenBLAS */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N,
			    0.0f, c, N);
	c0 = cpu_now();
	nanosleep(&(struct timespec){ .tv_nsec = 300000000 }, NULL);
	idle_ms = (cpu_now() - c0) * 1e3;
	printf("CPU time during a 300 ms sleep after a 2-thread product: %.1f ms (bound 20)\n",
	       idle_ms);
	WT_CHECK(idle_ms < 20.0);
	free(a);
	free(b);
	free(c);
	return wt_done("test_blas_spin");
}
