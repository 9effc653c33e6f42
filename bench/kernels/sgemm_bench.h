/* sgemm throughput, the yardstick of the CPU training benchmarks: a GPT
 * step "at N% of sgemm" divides its achieved matrix-product FLOP/s by
 * weft_bench_sgemm_gflops of its main GEMM shape, measured in the same run. */
#ifndef WEFT_BENCH_SGEMM_H
#define WEFT_BENCH_SGEMM_H

#include <stdint.h>

/* Monotonic seconds. */
double weft_bench_now(void);

/* GFLOP/s of the CPU kernel table's gemm (OpenBLAS sgemm, row-major,
 * C = A @ B^T as a linear layer does) for A m x k, B n x k: one warm-up
 * call, then calls until min_seconds have passed (at least 3), and the best
 * single call's rate (2 m n k flops). Returns a negative value when the
 * buffers cannot be allocated. Uses the current OpenBLAS thread count. */
double weft_bench_sgemm_gflops(int64_t m, int64_t n, int64_t k, double min_seconds);

#endif /* WEFT_BENCH_SGEMM_H */
