/* plugin/registry.h - finding, loading and checking plugins (internal).
 *
 * A registry holds an ordered search path and a list of explicit plugin
 * files. Nothing happens until the first lookup (or weft_registry_scan):
 * then every explicit file is dlopen'ed (RTLD_NOW | RTLD_LOCAL), its
 * `weft_plugin_entry` called with weft_host_services() and each plugin it
 * describes checked (ABI major, struct_size, name, kind) and recorded
 * under (kind, name); every `*.so` in the search directories is only
 * indexed: the names its ".weft_plugins" section declares
 * (WEFT_PLUGIN_NAMES) are read from the ELF file without running any of
 * its code, and the file is loaded the same way when a lookup names one of
 * them. Files without the section (built before ABI 1.3) are loaded when a
 * lookup finds its name in no declaring file, and by weft_registry_list.
 * A directory or file writable by every user, or owned by someone other
 * than root and this user, is refused (recorded as a failure with the
 * reason; fatal for an explicit file), as ssh refuses such files.
 *
 * Search order: explicit files first, then the directories in the order
 * they were added. add_default_paths appends WEFT_PLUGIN_PATH
 * (colon-separated), then weft/plugins beside libweft, else the build
 * tree's plugin directory and the install directory, so directories from
 * the config (added before it) come first. Kernel libraries are looked for
 * on that default path too (plugin/hooks_impl.h), never scanned here.
 * Within a directory files are read in name order.
 *
 * Precedence works like PATH: the first file with a given file name wins,
 * and a later file with the same name (for example the installed copy of a
 * plugin also present in the build tree) is skipped and listed as
 * shadowed. Two *different* file names providing the same kind and name are
 * a clash: always an error naming both files.
 *
 * Robustness: a file found by scanning a directory that fails to load or
 * to validate is recorded (weft_registry_failures) and skipped, so a CUDA
 * plugin that cannot load on a CPU machine never breaks a CPU run; the
 * failures are shown by `weft plugins` and appended to the "no plugin
 * named" error. An explicit file that fails is fatal.
 *
 * Loaded shared objects stay open until weft_registry_free, so vtables
 * and names returned here are valid until then. A registry is not
 * thread-safe: build it and look plugins up during setup, from one thread.
 */
#ifndef WEFT_PLUGIN_REGISTRY_H
#define WEFT_PLUGIN_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "weft/config.h"
#include "weft/plugin.h"
#include "weft/status.h"

typedef struct weft_registry weft_registry;

/* One plugin the registry found. All pointers are borrowed from the
 * registry (or from the loaded plugin) and valid until weft_registry_free. */
typedef struct weft_registry_entry {
	weft_plugin_kind kind;
	const char *name;     /* as the config selects it ("ddp") */
	uint32_t abi_version; /* the vtable's WEFT_ABI_MAKE(major, minor) */
	const void *vtable;   /* starts with weft_plugin_head */
	const char *file;     /* the shared object it came from */
	const char *package;  /* the descriptor's name (the .so's package) */
} weft_registry_entry;

/* A file found while scanning that could not be used, and why. */
typedef struct weft_registry_failure {
	const char *file;
	weft_status status;  /* WEFT_ERR_PLUGIN or WEFT_ERR_ABI */
	const char *reason;  /* the full message, naming the file */
} weft_registry_failure;

/* A file skipped because an earlier one had the same file name. */
typedef struct weft_registry_shadowed {
	const char *file;
	const char *by;      /* the file that took precedence */
} weft_registry_shadowed;

/* The smallest struct_size this weft accepts for a vtable of `kind`: the
 * size of that vtable in the first version of the current ABI major, i.e.
 * every member the host may call without a WEFT_HAS_MEMBER check. 0 for an
 * unknown kind. */
size_t weft_plugin_min_struct_size(weft_plugin_kind kind);

/* Makes an empty registry (no directories, nothing loaded); free it with
 * weft_registry_free. Errors: WEFT_ERR_NOMEM. */
weft_status weft_registry_create(weft_registry **out);

/* Closes every loaded plugin and frees the registry. Every vtable, name
 * and entry obtained from it becomes invalid. NULL is ignored. */
void weft_registry_free(weft_registry *reg);

/* Appends a directory to the search path. The directory must exist:
 * WEFT_ERR_NOT_FOUND naming it otherwise. Adding a directory that is
 * already on the path (the same directory, by device and inode) does
 * nothing. Errors: WEFT_ERR_INVALID_ARG after the registry was scanned;
 * WEFT_ERR_NOMEM. */
weft_status weft_registry_add_dir(weft_registry *reg, const char *dir);

/* Adds one plugin file that must load: unlike a file found in a
 * directory, its failure to load or validate makes the scan fail.
 * WEFT_ERR_NOT_FOUND naming the path when it does not exist;
 * WEFT_ERR_INVALID_ARG after the scan; WEFT_ERR_NOMEM. */
weft_status weft_registry_add_file(weft_registry *reg, const char *path);

/* Appends each directory of a colon-separated list (WEFT_PLUGIN_PATH's
 * form). Empty items and directories that do not exist are skipped (as
 * PATH does), with a debug log line. `origin` names where the list came
 * from, for that line. Errors: as weft_registry_add_dir. */
weft_status weft_registry_add_path_list(weft_registry *reg, const char *list, const char *origin);

/* Appends the default search path, after whatever was added so far:
 * WEFT_PLUGIN_PATH, then the directory weft/plugins next to the shared
 * object that holds this code (an installed PREFIX/LIBDIR/libweft.so finds
 * PREFIX/LIBDIR/weft/plugins even after the prefix moved) when it exists;
 * otherwise the build tree's plugin directory (if it exists), then the
 * configure-time install directory (if it exists). Errors: as add_dir. */
weft_status weft_registry_add_default_paths(weft_registry *reg);

/* For a program that has the core built in rather than running libweft.so
 * (the weft command: libweft exports the SDK alone): `dir` is the plugin
 * directory that belongs to it (PREFIX/LIBDIR/weft/plugins beside its
 * bin/), which the default search path then takes for the directory next
 * to libweft. NULL or "" goes back to asking the dynamic linker. Call it
 * before the first scan; not thread-safe. */
void weft_registry_set_program_dir(const char *dir);

/* Reads the config's `plugins:` mapping (NULL: nothing to do):
 *   paths: [DIR, ...]   directories searched before the defaults
 *   load:  [FILE, ...]  plugin files that must load
 * Each may also be a single string. Relative paths are resolved against
 * `config_dir` (the directory of the config file; NULL: the current
 * directory). Keys are read through weft_cfg_get, so an unknown key under
 * `plugins:` is reported by weft_config_check_unused. Errors:
 * WEFT_ERR_CONFIG with file:line:col for a wrong type; WEFT_ERR_NOT_FOUND
 * with file:line:col and the resolved path for a missing dir or file. */
weft_status weft_registry_configure_from_config(weft_registry *reg, const weft_cfg *plugins,
						const char *config_dir);

/* Loads the explicit files and indexes the directories, once; later calls
 * return the first call's result (and set the same message again on
 * failure). Blocks on file I/O and on the explicit plugins' entry
 * functions. Errors (fatal):
 * WEFT_ERR_PLUGIN / WEFT_ERR_ABI for an explicit file that fails, naming
 * it and the reason; WEFT_ERR_PLUGIN for two files providing the same kind
 * and name, naming both. Failures of scanned files are recorded instead. */
weft_status weft_registry_scan(weft_registry *reg);

/* Finds the plugin of `kind` named `name`, scanning first if needed.
 * On success *vtable (the plugin's static vtable) and, when `file` is not
 * NULL, *file (its shared object) are borrowed until weft_registry_free.
 * Errors: those of weft_registry_scan; WEFT_ERR_NOT_FOUND as
 *   "no strategy plugin named 'dpp' (did you mean 'ddp'?); available: ddp,
 *    dp, zero; searched: DIR, DIR; also, 1 file failed to load: F: WHY"
 * WEFT_ERR_INVALID_ARG for a NULL name or an unknown kind. */
weft_status weft_registry_find(weft_registry *reg, weft_plugin_kind kind, const char *name,
			       const void **vtable, const char **file);

/* Every plugin found, sorted by kind then name, scanning first if needed.
 * *entries is borrowed until weft_registry_free. Errors: those of
 * weft_registry_scan (then *count is 0). */
weft_status weft_registry_list(weft_registry *reg, const weft_registry_entry **entries,
			       size_t *count);

/* Files that failed to load while scanning directories, in scan order;
 * empty before a scan. Borrowed until weft_registry_free. */
const weft_registry_failure *weft_registry_failures(const weft_registry *reg, size_t *count);

/* Files skipped because an earlier file had the same file name. */
const weft_registry_shadowed *weft_registry_shadowed_files(const weft_registry *reg,
							     size_t *count);

/* The search directories in order, as they were given (config paths
 * already resolved). Borrowed until weft_registry_free. */
const char *const *weft_registry_dirs(const weft_registry *reg, size_t *count);

/* The registry that most recently scanned or looked a plugin up and has
 * not been freed, or NULL: the registry host->find_plugin (weft/plugin.h)
 * searches. A process normally has one (the trainer's); with several, the
 * one used last wins. Borrowed. */
weft_registry *weft_registry_active(void);

#endif /* WEFT_PLUGIN_REGISTRY_H */
