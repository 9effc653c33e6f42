/* plugin/loader_impl.h - opening and checking one plugin file (internal to
 * core/plugin; the registry is the interface the rest of weft uses). */
#ifndef WEFT_PLUGIN_LOADER_IMPL_H
#define WEFT_PLUGIN_LOADER_IMPL_H

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

#endif /* WEFT_PLUGIN_LOADER_IMPL_H */
