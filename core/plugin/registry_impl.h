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

/* A plugin file found in a directory and not loaded at the scan: one that
 * declares its names (its entries are in the registry with a NULL vtable
 * until a lookup loads it) or one without a names section (loaded only
 * when a lookup finds its name nowhere else, or for a listing). */
struct reg_pending {
	char *path;
	int declared;
	int tried;          /* loaded, or failed: never tried twice */
	weft_status status; /* of the load, once tried */
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

	struct reg_pending *pending;
	size_t npending, cap_pending;
	char **strings; /* the declared names, which entries point at */
	size_t nstrings, cap_strings;

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

/* Orders entries by kind, then name (qsort). */
int weft_registry_cmp_entry(const void *a, const void *b);

/* Loads what is pending: with `declared_path`, the one declaring file of
 * that path; else every file without a names section (legacy) when
 * `legacy`, plus every declaring file when `all`. A file that fails is
 * recorded as a failure; for declared_path its status is returned. Two
 * files providing one name stay a fatal clash. Errors: those; NOMEM. */
weft_status weft_registry_load_pending(weft_registry *reg, const char *declared_path, int legacy,
				       int all);

/* ---- names.c: knowing a file without running it ---- */

/* Reads the ".weft_plugins" section of the ELF file at path (its declared
 * names, WEFT_PLUGIN_NAMES) into *text (malloc'd, NUL-terminated). Returns
 * 1 when found, 0 when the file has no such section, -1 when it cannot be
 * read as a 64-bit ELF file (then loading it says why). Runs no code of
 * the file. */
int weft_plugin_read_names(const char *path, char **text);

/* Takes the next "kind:name" word of a names text at *cursor (advanced
 * past it). Returns 1 with *kind and name[0..len) set, 0 at the end, -1
 * for a malformed word (unknown kind, no colon, name too long). */
int weft_plugin_next_name(const char **cursor, weft_plugin_kind *kind, char *name, size_t len);

/* Whether path (a plugin file, or with is_dir a directory searched for
 * them) must not be loaded from, as ssh judges its files: writable by
 * every user, or owned by someone other than root and this user. Returns
 * 1 with the reason and the fix in why, else 0. */
int weft_plugin_place_unsafe(const char *path, int is_dir, char *why, size_t len);

#endif /* WEFT_PLUGIN_REGISTRY_IMPL_H */
