/* host/host.h - the host services table (weft_host_services, declared in
 * weft/plugin.h) and what the layer above it tells it.
 *
 * core/host sits above everything the table wraps (core/tensor, core/tp,
 * core/nn, core/train's clipping) and below core/plugin, which hands the
 * table to every plugin and kernel library it opens. The one service that
 * belongs to the plugin layer, host->find_plugin, reaches the registry
 * through a finder core/plugin sets (plugin/hooks.c). Internal to libweft. */
#ifndef WEFT_HOST_HOST_H
#define WEFT_HOST_HOST_H

#include "weft/plugin.h"

/* Looks up the plugin of `kind` named `name` (both checked non-NULL by
 * the caller) for host->find_plugin: the vtable in *vtable, or an error
 * naming what is missing, as weft_registry_find. */
typedef weft_status (*weft_host_finder_fn)(weft_plugin_kind kind, const char *name,
					   const void **vtable);

/* Sets the finder behind host->find_plugin (NULL: none; then every lookup
 * fails as weft_host_no_registry). Not thread-safe: set it before plugins
 * run. */
void weft_host_set_plugin_finder(weft_host_finder_fn fn);

/* Sets and returns the error of a lookup of `name` made while no plugin
 * registry is active in the process: WEFT_ERR_UNSUPPORTED. */
weft_status weft_host_no_registry(const char *name);

#endif /* WEFT_HOST_HOST_H */
