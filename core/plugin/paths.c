/* The registry's search path: directories, explicit files, the default
 * path and the config's `plugins:` section (plugin/registry.h). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plugin/registry_impl.h"
#include "weft/log.h"

static weft_status refuse_after_scan(const weft_registry *reg, const char *what, const char *path)
{
	if (!reg->scanned)
		return WEFT_OK;
	return weft_error_set(WEFT_ERR_INVALID_ARG,
			      "cannot add the plugin %s %s: the registry was already scanned; add "
			      "every directory and file before the first lookup",
			      what, path);
}

static int same_place(const struct reg_place *places, size_t n, const struct stat *sb)
{
	for (size_t i = 0; i < n; i++) {
		if (places[i].dev == sb->st_dev && places[i].ino == sb->st_ino)
			return 1;
	}
	return 0;
}

static weft_status add_place(struct reg_place **arr, size_t *n, size_t *cap, const char *path,
			     const struct stat *sb)
{
	struct reg_place *p = weft_registry_grow(*arr, cap, *n, sizeof(**arr));
	char *copy;

	if (!p)
		return weft_registry_nomem("adding to the plugin search path");
	*arr = p;
	copy = strdup(path);
	if (!copy)
		return weft_registry_nomem("adding to the plugin search path");
	p[*n] = (struct reg_place){ .path = copy, .dev = sb->st_dev, .ino = sb->st_ino };
	(*n)++;
	return WEFT_OK;
}

weft_status weft_registry_add_dir(weft_registry *reg, const char *dir)
{
	const char **names;
	struct stat sb;
	weft_status st;

	st = refuse_after_scan(reg, "directory", dir);
	if (st != WEFT_OK)
		return st;
	if (stat(dir, &sb) != 0)
		return weft_error_set(WEFT_ERR_NOT_FOUND,
				      "plugin directory %s cannot be read: %s; check the path "
				      "(plugins.paths, WEFT_PLUGIN_PATH or --path)",
				      dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return weft_error_set(WEFT_ERR_NOT_FOUND,
				      "plugin directory %s is not a directory; list directories "
				      "under plugins.paths and single .so files under plugins.load",
				      dir);
	if (same_place(reg->dirs, reg->ndirs, &sb))
		return WEFT_OK;
	names = weft_registry_grow(reg->dir_names, &reg->cap_dir_names, reg->ndirs, sizeof(*names));
	if (!names)
		return weft_registry_nomem("adding to the plugin search path");
	reg->dir_names = names;
	st = add_place(&reg->dirs, &reg->ndirs, &reg->cap_dirs, dir, &sb);
	if (st == WEFT_OK)
		names[reg->ndirs - 1] = reg->dirs[reg->ndirs - 1].path;
	return st;
}

weft_status weft_registry_add_file(weft_registry *reg, const char *path)
{
	struct stat sb;
	weft_status st;

	st = refuse_after_scan(reg, "file", path);
	if (st != WEFT_OK)
		return st;
	if (stat(path, &sb) != 0)
		return weft_error_set(WEFT_ERR_NOT_FOUND,
				      "plugin file %s cannot be read: %s; check the path "
				      "(plugins.load)",
				      path, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return weft_error_set(WEFT_ERR_NOT_FOUND,
				      "plugin file %s is not a regular file; list single .so files "
				      "under plugins.load and directories under plugins.paths",
				      path);
	if (same_place(reg->files, reg->nfiles, &sb))
		return WEFT_OK;
	return add_place(&reg->files, &reg->nfiles, &reg->cap_files, path, &sb);
}

/* Adds `dir` when it is a directory; skips it (with a debug line) when not. */
static weft_status add_if_dir(weft_registry *reg, const char *dir, const char *origin)
{
	struct stat sb;

	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		weft_log(WEFT_LOG_DEBUG, "plugins: skipping %s from %s: not a directory", dir,
			 origin);
		return WEFT_OK;
	}
	return weft_registry_add_dir(reg, dir);
}

weft_status weft_registry_add_path_list(weft_registry *reg, const char *list, const char *origin)
{
	const char *p = list;
	weft_status st;

	while (p && *p) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		char *dir;

		if (len > 0) {
			dir = strndup(p, len);
			if (!dir)
				return weft_registry_nomem("reading a plugin path list");
			st = add_if_dir(reg, dir, origin);
			free(dir);
			if (st != WEFT_OK)
				return st;
		}
		p = colon ? colon + 1 : NULL;
	}
	return WEFT_OK;
}

/* Set by a program that has the core built in (weft_registry_set_program_dir). */
static char program_dir[4096];

void weft_registry_set_program_dir(const char *dir)
{
	snprintf(program_dir, sizeof(program_dir), "%s", dir ? dir : "");
}

/* "<directory of the shared object holding this code>/weft/plugins" into
 * buf: for an installed libweft (PREFIX/LIBDIR/libweft.so) that is the
 * install's plugin directory wherever the prefix was installed or moved to
 * (`cmake --install --prefix`, a copied tree); for the build tree's
 * libweft it is the build's plugin directory. A program that has the core
 * built in gives its own (weft_registry_set_program_dir). 0 when it cannot
 * be told. */
static int self_relative_dir(char *buf, size_t len)
{
	char *real = NULL;
	const char *slash;
	Dl_info info;
	int ok;

	if (program_dir[0])
		return snprintf(buf, len, "%s", program_dir) < (int)len;
	if (!dladdr((void *)self_relative_dir, &info) || !info.dli_fname)
		return 0;
	/* "PREFIX/bin/../lib/libweft.so" (found through $ORIGIN) reads better
	 * resolved */
	real = realpath(info.dli_fname, NULL);
	slash = strrchr(real ? real : info.dli_fname, '/');
	ok = slash && snprintf(buf, len, "%.*s/weft/plugins",
			       (int)(slash - (real ? real : info.dli_fname)),
			       real ? real : info.dli_fname) < (int)len;
	free(real);
	return ok;
}

weft_status weft_registry_add_default_paths(weft_registry *reg)
{
	const char *env = getenv("WEFT_PLUGIN_PATH");
	char self[4096];
	struct stat sb;
	weft_status st;

	if (env) {
		st = weft_registry_add_path_list(reg, env, "WEFT_PLUGIN_PATH");
		if (st != WEFT_OK)
			return st;
	}
	/* Next to the libweft that runs: then the compiled-in directories
	 * (the build tree, the configure-time prefix) belong to another
	 * copy of weft and are not searched. */
	if (self_relative_dir(self, sizeof(self)) && stat(self, &sb) == 0 && S_ISDIR(sb.st_mode))
		return weft_registry_add_dir(reg, self);
#ifdef WEFT_BUILD_PLUGIN_DIR
	st = add_if_dir(reg, WEFT_BUILD_PLUGIN_DIR, "the build tree");
	if (st != WEFT_OK)
		return st;
#endif
#ifdef WEFT_INSTALL_PLUGIN_DIR
	st = add_if_dir(reg, WEFT_INSTALL_PLUGIN_DIR, "the install prefix");
	if (st != WEFT_OK)
		return st;
#endif
	return WEFT_OK;
}

/* ---- config -------------------------------------------------------- */

/* `base`/`path` unless `path` is absolute or base is NULL or empty. */
static char *resolve(const char *base, const char *path)
{
	char *out;

	if (path[0] == '/' || !base || !base[0])
		return strdup(path);
	if (asprintf(&out, "%s/%s", base, path) < 0)
		return NULL;
	return out;
}

typedef weft_status (*add_fn)(weft_registry *reg, const char *path);

/* Reads `key` (a string or a list of strings) and adds each resolved path. */
static weft_status configure_list(weft_registry *reg, const weft_cfg *plugins, const char *key,
				  const char *config_dir, add_fn add)
{
	const weft_cfg *node = weft_cfg_get(plugins, key);
	weft_cfg_kind kind = weft_cfg_kind_of(node);
	size_t n;

	if (kind == WEFT_CFG_NULL)
		return WEFT_OK;
	if (kind != WEFT_CFG_SEQ && kind != WEFT_CFG_SCALAR)
		return weft_cfg_error(node, "must be a path or a list of paths");
	n = kind == WEFT_CFG_SEQ ? weft_cfg_size(node) : 1;
	for (size_t i = 0; i < n; i++) {
		const weft_cfg *item = kind == WEFT_CFG_SEQ ? weft_cfg_at(node, i) : node;
		const char *text;
		char where[512];
		char *path;
		weft_status st;

		st = weft_cfg_as_str(item, &text);
		if (st != WEFT_OK)
			return st;
		if (!text[0])
			return weft_cfg_error(item, "is an empty path");
		path = resolve(config_dir, text);
		if (!path)
			return weft_registry_nomem("resolving a plugin path");
		st = add(reg, path);
		free(path);
		if (st != WEFT_OK) {
			weft_cfg_where(item, where, sizeof(where));
			if (config_dir && text[0] != '/')
				return weft_error_wrap(st, "%s: '%s' (relative to %s)", where, text,
						       config_dir);
			return weft_error_wrap(st, "%s: '%s'", where, text);
		}
	}
	return WEFT_OK;
}

weft_status weft_registry_configure_from_config(weft_registry *reg, const weft_cfg *plugins,
						const char *config_dir)
{
	weft_status st;

	if (!plugins || weft_cfg_kind_of(plugins) == WEFT_CFG_NULL)
		return WEFT_OK;
	if (weft_cfg_kind_of(plugins) != WEFT_CFG_MAP)
		return weft_cfg_error(plugins, "must be a mapping with 'paths' (directories) "
					       "and/or 'load' (plugin files)");
	st = configure_list(reg, plugins, "paths", config_dir, weft_registry_add_dir);
	if (st != WEFT_OK)
		return st;
	return configure_list(reg, plugins, "load", config_dir, weft_registry_add_file);
}

