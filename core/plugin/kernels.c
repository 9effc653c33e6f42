/* Kernel libraries: the kernel tables of devices weft does not build in
 * (weft_kernels_cuda.so), found on the plugin search path and opened by
 * the plugin loader the first time core/tensor needs one
 * (tensor/kernel_loader.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plugin/hooks_impl.h"
#include "plugin/loader_impl.h"
#include "plugin/registry.h"
#include "plugin/registry_impl.h"
#include "weft/log.h"

/* The file that holds each device type's kernels, and what to call them
 * when it is missing. */
static const struct {
	const char *file;
	const char *what;
} libraries[WEFT_DEVICE_TYPE_COUNT] = {
	[WEFT_DEVICE_CUDA] = { "weft_kernels_cuda.so", "CUDA kernels" },
};

const weft_kernel_table *weft_plugin_load_kernels(weft_device_type type, char *why,
						  size_t whylen)
{
	const weft_kernel_table *t = NULL;
	const char *const *dirs;
	weft_registry *reg = NULL;
	const char *file;
	size_t ndirs;

	file = (unsigned)type < WEFT_DEVICE_TYPE_COUNT ? libraries[type].file : NULL;
	if (!file) {
		snprintf(why, whylen, "weft has no kernel library for device type %d", (int)type);
		return NULL;
	}
	/* the registry's search path alone, with nothing loaded: the same
	 * directories, in the same order, as a plugin scan without a config */
	if (weft_registry_create(&reg) != WEFT_OK || weft_registry_add_default_paths(reg) != WEFT_OK) {
		snprintf(why, whylen, "cannot list the plugin directories: %s", weft_error_last());
		goto out_free_registry;
	}
	snprintf(why, whylen, "%s was not found (this build has no %s, or WEFT_PLUGIN_PATH does "
		 "not name their directory)", file, libraries[type].what);
	dirs = weft_registry_dirs(reg, &ndirs);
	/* the first file that loads wins; a broken one gives way to the next,
	 * and the last one's reason is reported when none loads */
	for (size_t i = 0; i < ndirs && !t; i++) {
		char path[4096];

		if (snprintf(path, sizeof(path), "%s/%s", dirs[i], file) >= (int)sizeof(path) ||
		    access(path, F_OK) != 0)
			continue;
		if (weft_plugin_place_unsafe(dirs[i], 1, why, whylen) ||
		    weft_plugin_place_unsafe(path, 0, why, whylen)) {
			weft_log(WEFT_LOG_DEBUG, "kernels: skipping %s", why);
			continue;
		}
		if (weft_kernels_open(path, &t) == WEFT_OK) {
			weft_log(WEFT_LOG_DEBUG, "kernels: loaded %s ('%s')", path, t->head.name);
		} else {
			snprintf(why, whylen, "%s", weft_error_last());
			weft_log(WEFT_LOG_DEBUG, "kernels: skipping %s", why);
		}
	}

out_free_registry:
	weft_registry_free(reg);
	return t;
}
