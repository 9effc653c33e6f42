/* The CUDA kernel library's extras are part of the SDK now
 * (sdk/include/weft/cuda_extras.h, reached through host->cuda_extras); this
 * header stays for the library's own sources and the CUDA tests. */
#ifndef WEFT_KERNELS_CUDA_H
#define WEFT_KERNELS_CUDA_H

#include "weft/cuda_extras.h"

#endif /* WEFT_KERNELS_CUDA_H */
