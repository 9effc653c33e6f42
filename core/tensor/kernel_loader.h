/* tensor/kernel_loader.h - how core/tensor gets the kernel table of a
 * device it has no built-in table for (CUDA).
 *
 * core/tensor builds in the CPU table and finds no files itself: the
 * kernel libraries (weft_kernels_cuda.so) are found on the plugin search
 * path and opened by the plugin layer above it (core/plugin/kernels.c),
 * which sets its loader here when it is linked in. weft_kernels_get calls
 * the loader on the first use of a device type whose table is not
 * registered yet, and again after a failure. Internal to libweft. */
#ifndef WEFT_TENSOR_KERNEL_LOADER_H
#define WEFT_TENSOR_KERNEL_LOADER_H

#include <stddef.h>

#include "weft/device.h"

/* Finds, opens and checks the kernel library of `type`. Returns its table
 * (ABI major and struct_size checked; the library stays loaded for the
 * life of the process), or NULL with the reason in why (NUL-terminated,
 * at most whylen bytes, naming the file when one was found). Called with
 * core/tensor's kernel registry locked: it must not call
 * weft_kernels_get. Blocks on file I/O and on the library's entry. */
typedef const weft_kernel_table *(*weft_kernels_loader_fn)(weft_device_type type, char *why,
							   size_t whylen);

/* Sets the loader weft_kernels_get uses (NULL: none; then a device
 * without a registered table gives an error saying the program cannot
 * load kernel libraries). Thread-safe. */
void weft_kernels_set_loader(weft_kernels_loader_fn fn);

/* The table registered for `type` (by weft_kernels_register or a loader
 * that succeeded), or NULL: never loads anything. Thread-safe. */
const weft_kernel_table *weft_kernels_registered(weft_device_type type);

#endif /* WEFT_TENSOR_KERNEL_LOADER_H */
