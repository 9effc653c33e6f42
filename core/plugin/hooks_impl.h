/* plugin/hooks_impl.h - what core/plugin hands the layers below it
 * (hooks.c): the kernel-library loader (kernels.c) for core/tensor and the
 * registry lookup for the host services table. Internal to core/plugin. */
#ifndef WEFT_PLUGIN_HOOKS_IMPL_H
#define WEFT_PLUGIN_HOOKS_IMPL_H

#include <stddef.h>

#include "weft/device.h"

/* The kernel loader of tensor/kernel_loader.h: looks for the library of
 * `type` (weft_kernels_cuda.so for CUDA) in each directory of the default
 * plugin search path (weft_registry_add_default_paths: WEFT_PLUGIN_PATH,
 * then weft/plugins beside libweft, else the build and install plugin
 * directories) and opens it with weft_kernels_open. The first file that
 * loads wins. NULL with the reason in why when none does: the file was
 * not found anywhere, or the last one found failed (its message). */
const weft_kernel_table *weft_plugin_load_kernels(weft_device_type type, char *why,
						  size_t whylen);

/* Sets the hooks: weft_kernels_set_loader(weft_plugin_load_kernels) and
 * weft_host_set_plugin_finder (a lookup in weft_registry_active()).
 * Idempotent. Runs by itself when libweft or a program linking core/plugin
 * is loaded (a constructor in hooks.c; weft_plugin's CMake target keeps
 * that file in static links); callable again, e.g. after a test reset a
 * hook. */
void weft_plugin_hooks_install(void);

#endif /* WEFT_PLUGIN_HOOKS_IMPL_H */
