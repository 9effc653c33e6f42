/* The CPU kernel table (OpenBLAS for matrix products, C loops elsewhere).
 * Built into libweft; core/tensor installs it as the table for `cpu`. */
#ifndef WEFT_KERNELS_CPU_H
#define WEFT_KERNELS_CPU_H

#include "weft/device.h"

/* The table; static storage. F32 only (float_dtypes). */
const weft_kernel_table *weft_kernels_cpu_table(void);

/* Sets / reads the thread count of OpenBLAS (openblas_set_num_threads). */
void weft_kernels_cpu_set_threads(int64_t n);
int64_t weft_kernels_cpu_get_threads(void);

/* cpu_parallel_for (cpu_impl.h) for the rest of the core: the kernels'
 * thread pool. */
void weft_kernels_cpu_parallel_for(int64_t n, int64_t grain,
				   void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

/* log2 of the cycles an idle OpenBLAS worker spins before it sleeps,
 * set at load time unless OPENBLAS_THREAD_TIMEOUT is set (cpu_table.c). */
#define WEFT_BLAS_THREAD_TIMEOUT "16"

/* The spin OpenBLAS runs with (log2 cycles; 0: its default, 2^28), or -1
 * when this OpenBLAS does not say. */
int weft_kernels_cpu_blas_spin(void);

#endif /* WEFT_KERNELS_CPU_H */
