/* tensor/cuda_extras.h - the one place that finds the CUDA kernel
 * library's extras table (weft/cuda_extras.h). Plugins reach it through
 * host->cuda_extras (core/host), the trainer's 16-mixed check directly.
 * Internal to libweft. */
#ifndef WEFT_TENSOR_CUDA_EXTRAS_H
#define WEFT_TENSOR_CUDA_EXTRAS_H

#include "weft/cuda_extras.h"

/* The extras of the CUDA kernel library this process has loaded, in *out,
 * and the library's path in *file (static storage; file may be NULL).
 * Looks in the object that holds the registered CUDA kernel table
 * (weft_kernels_register, or the one weft_kernels_get loaded), else in a
 * loaded object named weft_kernels_cuda.so; loads nothing (device memory
 * exists only once a CUDA table was loaded). A success is remembered for
 * the life of the process; a failure is not (the library may come later).
 * Checks the table's ABI major, not which members it has: the caller
 * checks those with WEFT_HAS_MEMBER. Thread-safe; does not block beyond
 * the dynamic linker's lock.
 * Errors (*out NULL): WEFT_ERR_UNSUPPORTED naming the reason: the library
 * is not loaded ("weft_kernels_cuda.so is not loaded in this process"), it
 * lacks the extras symbol or returns NULL (built for an older weft:
 * rebuild it), or its extras are of another ABI major. */
weft_status weft_cuda_extras_find(const weft_cuda_extras **out, const char **file);

#endif /* WEFT_TENSOR_CUDA_EXTRAS_H */
