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

#endif /* WEFT_KERNELS_CPU_H */
