/* sgemm throughput, the yardstick of the CPU training benchmarks: a GPT
 * step "at N% of sgemm" divides its achieved matrix-product FLOP/s by
 * weft_bench_sgemm_gflops of its main GEMM shape, measured in the same run:
 * the faster of weft's own kernel and OpenBLAS at that shape. */
#ifndef WEFT_BENCH_SGEMM_H
#define WEFT_BENCH_SGEMM_H

#include <stdint.h>

/* Monotonic seconds. */
double weft_bench_now(void);

/* sgemm GFLOP/s of C = A @ B^T as a linear layer does (A m x k, B n x k,
 * row-major): through the CPU kernel table's gemm (weft's AVX-512 kernel
 * where the CPU has it, else OpenBLAS) and through OpenBLAS's cblas_sgemm
 * directly, each the best single call after a warm-up, calls repeated for
 * half of min_seconds (at least 3). Returns the higher of the two (the
 * machine's best sgemm at this shape), and each in *table_gflops and
 * *openblas_gflops when not NULL; negative when the buffers cannot be
 * allocated. Uses the current thread counts. */
double weft_bench_sgemm_gflops(int64_t m, int64_t n, int64_t k, double min_seconds,
			       double *table_gflops, double *openblas_gflops);

#endif /* WEFT_BENCH_SGEMM_H */
