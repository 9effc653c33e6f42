/* plugin/loader_impl.h - opening and checking one plugin file or kernel
 * library (internal to core/plugin; the registry and kernels.c are the
 * interfaces the rest of weft uses). */
#ifndef WEFT_PLUGIN_LOADER_IMPL_H
#define WEFT_PLUGIN_LOADER_IMPL_H

#include "weft/device.h"
#include "weft/plugin.h"

/* dlopens `path` (RTLD_NOW | RTLD_LOCAL), calls its entry symbol with
 * weft_host_services() and checks the descriptor and every vtable in it:
 * ABI major, struct_size against weft_plugin_min_struct_size, a non-empty
 * name, a known kind. On success *handle (close with dlclose) and *desc
 * (static storage in the plugin, valid while the handle is open) are set.
 * On failure nothing stays open and the last error names the file:
 * WEFT_ERR_PLUGIN (cannot load, no entry symbol, entry returned NULL, no
 * name, unknown kind, malformed descriptor) or WEFT_ERR_ABI (other ABI
 * major, struct_size below the minimum). Blocks on file I/O and on the
 * plugin's entry function. */
weft_status weft_plugin_open(const char *path, void **handle, const weft_plugin_desc **desc);

/* dlopens the kernel library at `path` (RTLD_NOW | RTLD_LOCAL), calls its
 * WEFT_KERNELS_ENTRY_SYMBOL with weft_host_services() and checks the table
 * it returns: ABI major, and struct_size at least ABI 1.0's table. On
 * success *table is set and the library stays loaded for the life of the
 * process (the table is its static storage). On failure nothing stays open,
 * *table is NULL, and the last error says why: WEFT_ERR_PLUGIN with
 * dlopen's message (which names the file), "PATH lacks weft_kernels_entry",
 * or "PATH: <what the entry said>" when the entry refused (no GPU, say);
 * WEFT_ERR_ABI naming the file and both ABI majors. Blocks on file I/O and
 * on the library's entry. */
weft_status weft_kernels_open(const char *path, const weft_kernel_table **table);

#endif /* WEFT_PLUGIN_LOADER_IMPL_H */
