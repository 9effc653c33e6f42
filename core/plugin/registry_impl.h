/* plugin/registry_impl.h - the registry's state, shared by registry.c
 * (create, free, scan), paths.c (search path and config) and lookup.c
 * (find, list, the not-found message). Internal to core/plugin. */
#ifndef WEFT_PLUGIN_REGISTRY_IMPL_H
#define WEFT_PLUGIN_REGISTRY_IMPL_H

#include <sys/types.h>

#include "plugin/registry.h"

/* A file or directory on the path, with its identity for de-duplication. */
struct reg_place {
	char *path;
	dev_t dev;
	ino_t ino;
};

/* A shared object that loaded and passed every check. */
struct reg_lib {
	char *path;
	void *handle;
};

struct weft_registry {
	struct reg_place *dirs;
	size_t ndirs, cap_dirs;
	const char **dir_names; /* dirs[i].path, for weft_registry_dirs */
	size_t cap_dir_names;

	struct reg_place *files;
	size_t nfiles, cap_files;

	struct reg_lib *libs;
	size_t nlibs, cap_libs;

	weft_registry_entry *entries;
	size_t nentries, cap_entries;

	weft_registry_failure *failures;
	size_t nfailures, cap_failures;

	weft_registry_shadowed *shadowed;
	size_t nshadowed, cap_shadowed;

	int scanned;
	weft_status scan_status;
	char *scan_message; /* the fatal scan error, repeated on later calls */
};

/* Makes room for element n of an array of *cap elements of `size` bytes at
 * `arr`. Returns the (possibly moved) array, or NULL when out of memory
 * (then `arr` is unchanged and still owned by the caller). */
void *weft_registry_grow(void *arr, size_t *cap, size_t n, size_t size);

/* Sets WEFT_ERR_NOMEM with "out of memory while <what>" and returns it. */
weft_status weft_registry_nomem(const char *what);

/* The entry of `kind` named `name`, or NULL. */
const weft_registry_entry *weft_registry_find_entry(const weft_registry *reg,
						    weft_plugin_kind kind, const char *name);

#endif /* WEFT_PLUGIN_REGISTRY_IMPL_H */
