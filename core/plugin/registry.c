/* The plugin registry: search path, lazy scan, lookup by kind and name
 * (plugin/registry.h). */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plugin/loader_impl.h"
#include "plugin/registry.h"
#include "weft/log.h"

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

/* One file to look at during the scan. */
struct reg_candidate {
	char *path;
	int must_load; /* an explicit plugins.load file: failure is fatal */
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
static void *grow(void *arr, size_t *cap, size_t n, size_t size)
{
	size_t want;
	void *p;

	if (n < *cap)
		return arr;
	want = *cap ? *cap * 2 : 8;
	while (want <= n)
		want *= 2;
	p = realloc(arr, want * size);
	if (p)
		*cap = want;
	return p;
}

static weft_status nomem(const char *what)
{
	return weft_error_set(WEFT_ERR_NOMEM, "out of memory while %s", what);
}

weft_status weft_registry_create(weft_registry **out)
{
	weft_registry *reg = calloc(1, sizeof(*reg));

	if (!reg)
		return nomem("creating the plugin registry");
	*out = reg;
	return WEFT_OK;
}

void weft_registry_free(weft_registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->nlibs; i++) {
		dlclose(reg->libs[i].handle);
		free(reg->libs[i].path);
	}
	for (size_t i = 0; i < reg->nfailures; i++) {
		free((char *)reg->failures[i].file);
		free((char *)reg->failures[i].reason);
	}
	for (size_t i = 0; i < reg->nshadowed; i++) {
		free((char *)reg->shadowed[i].file);
		free((char *)reg->shadowed[i].by);
	}
	for (size_t i = 0; i < reg->ndirs; i++)
		free(reg->dirs[i].path);
	for (size_t i = 0; i < reg->nfiles; i++)
		free(reg->files[i].path);
	free(reg->libs);
	free(reg->entries);
	free(reg->failures);
	free(reg->shadowed);
	free(reg->dirs);
	free(reg->dir_names);
	free(reg->files);
	free(reg->scan_message);
	free(reg);
}

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
	struct reg_place *p = grow(*arr, cap, *n, sizeof(**arr));
	char *copy;

	if (!p)
		return nomem("adding to the plugin search path");
	*arr = p;
	copy = strdup(path);
	if (!copy)
		return nomem("adding to the plugin search path");
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
	names = grow(reg->dir_names, &reg->cap_dir_names, reg->ndirs, sizeof(*names));
	if (!names)
		return nomem("adding to the plugin search path");
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

weft_status weft_registry_add_path_list(weft_registry *reg, const char *list, const char *origin)
{
	const char *p = list;
	struct stat sb;
	weft_status st;

	while (p && *p) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		char *dir;

		if (len > 0) {
			dir = strndup(p, len);
			if (!dir)
				return nomem("reading a plugin path list");
			if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
				weft_log(WEFT_LOG_DEBUG, "plugins: skipping %s from %s: not a directory",
					 dir, origin);
				st = WEFT_OK;
			} else {
				st = weft_registry_add_dir(reg, dir);
			}
			free(dir);
			if (st != WEFT_OK)
				return st;
		}
		p = colon ? colon + 1 : NULL;
	}
	return WEFT_OK;
}

weft_status weft_registry_add_default_paths(weft_registry *reg)
{
	const char *env = getenv("WEFT_PLUGIN_PATH");
	weft_status st;

	if (env) {
		st = weft_registry_add_path_list(reg, env, "WEFT_PLUGIN_PATH");
		if (st != WEFT_OK)
			return st;
	}
#ifdef WEFT_BUILD_PLUGIN_DIR
	st = weft_registry_add_path_list(reg, WEFT_BUILD_PLUGIN_DIR, "the build tree");
	if (st != WEFT_OK)
		return st;
#endif
#ifdef WEFT_INSTALL_PLUGIN_DIR
	st = weft_registry_add_path_list(reg, WEFT_INSTALL_PLUGIN_DIR, "the install prefix");
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
			return nomem("resolving a plugin path");
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

/* ---- scan ---------------------------------------------------------- */

static int ends_with_so(const char *name)
{
	size_t n = strlen(name);

	return n > 3 && !strcmp(name + n - 3, ".so");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_entry(const void *a, const void *b)
{
	const weft_registry_entry *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static void free_candidates(struct reg_candidate *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].path);
	free(c);
}

static weft_status add_candidate(struct reg_candidate **c, size_t *n, size_t *cap, char *path,
				 int must_load)
{
	struct reg_candidate *p = grow(*c, cap, *n, sizeof(**c));

	if (!p) {
		free(path);
		return nomem("listing plugin files");
	}
	*c = p;
	p[(*n)++] = (struct reg_candidate){ .path = path, .must_load = must_load };
	return WEFT_OK;
}

/* Appends the `*.so` files of `dir`, in name order. A directory that
 * cannot be read is recorded as a failure. */
static weft_status list_dir(weft_registry *reg, const char *dir, struct reg_candidate **c,
			    size_t *n, size_t *cap);

static weft_status record_failure(weft_registry *reg, const char *file, weft_status status,
				  const char *reason)
{
	weft_registry_failure *p;
	char *f, *r;

	p = grow(reg->failures, &reg->cap_failures, reg->nfailures, sizeof(*p));
	if (!p)
		return nomem("recording a plugin failure");
	reg->failures = p;
	f = strdup(file);
	r = strdup(reason);
	if (!f || !r) {
		free(f);
		free(r);
		return nomem("recording a plugin failure");
	}
	reg->failures[reg->nfailures++] = (weft_registry_failure){
		.file = f, .status = status, .reason = r };
	weft_log(WEFT_LOG_DEBUG, "plugins: skipping %s", r);
	return WEFT_OK;
}

static weft_status list_dir(weft_registry *reg, const char *dir, struct reg_candidate **c,
			    size_t *n, size_t *cap)
{
	char **names = NULL;
	size_t nnames = 0, cap_names = 0;
	struct dirent *de;
	weft_status st = WEFT_OK;
	DIR *d;

	d = opendir(dir);
	if (!d) {
		char why[1024];

		snprintf(why, sizeof(why), "cannot read plugin directory %s: %s", dir,
			 strerror(errno));
		return record_failure(reg, dir, WEFT_ERR_PLUGIN, why);
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !ends_with_so(de->d_name))
			continue;
		char **p = grow(names, &cap_names, nnames, sizeof(*names));

		if (!p) {
			st = nomem("listing a plugin directory");
			goto out_free_names;
		}
		names = p;
		names[nnames] = strdup(de->d_name);
		if (!names[nnames]) {
			st = nomem("listing a plugin directory");
			goto out_free_names;
		}
		nnames++;
	}
	if (nnames > 1)
		qsort(names, nnames, sizeof(*names), cmp_str);
	for (size_t i = 0; i < nnames; i++) {
		char *path;

		if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
			st = nomem("listing a plugin directory");
			goto out_free_names;
		}
		st = add_candidate(c, n, cap, path, 0);
		if (st != WEFT_OK)
			goto out_free_names;
	}

out_free_names:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return st;
}

static const weft_registry_entry *find_entry(const weft_registry *reg, weft_plugin_kind kind,
					     const char *name)
{
	for (size_t i = 0; i < reg->nentries; i++) {
		if (reg->entries[i].kind == kind && !strcmp(reg->entries[i].name, name))
			return &reg->entries[i];
	}
	return NULL;
}

static weft_status clash(weft_plugin_kind kind, const char *name, const char *first,
			 const char *second)
{
	if (!strcmp(first, second))
		return weft_error_set(WEFT_ERR_PLUGIN,
				      "plugin file %s provides two %s plugins named '%s'; names "
				      "must be unique per kind",
				      first, weft_plugin_kind_name(kind), name);
	return weft_error_set(WEFT_ERR_PLUGIN,
			      "two files provide the %s plugin '%s': %s and %s; remove one of "
			      "them or take its directory off the plugin path",
			      weft_plugin_kind_name(kind), name, first, second);
}

/* Records every plugin of a checked descriptor, or none when one clashes.
 * On success the registry owns `handle`; on failure the caller closes it. */
static weft_status add_lib(weft_registry *reg, const char *path, void *handle,
			   const weft_plugin_desc *desc)
{
	weft_registry_entry *entries;
	struct reg_lib *libs;
	char *copy;

	for (size_t i = 0; i < desc->count; i++) {
		const weft_plugin_entry_item *it = &desc->items[i];
		const char *name = ((const weft_plugin_head *)it->vtable)->name;
		const weft_registry_entry *old = find_entry(reg, it->kind, name);

		if (old)
			return clash(it->kind, name, old->file, path);
		for (size_t j = 0; j < i; j++) {
			const weft_plugin_head *h = desc->items[j].vtable;

			if (desc->items[j].kind == it->kind && !strcmp(h->name, name))
				return clash(it->kind, name, path, path);
		}
	}
	/* every allocation first, so nothing below can fail half-way */
	entries = grow(reg->entries, &reg->cap_entries, reg->nentries + desc->count - 1,
		       sizeof(*entries));
	if (!entries)
		return nomem("recording a loaded plugin");
	reg->entries = entries;
	libs = grow(reg->libs, &reg->cap_libs, reg->nlibs, sizeof(*libs));
	if (!libs)
		return nomem("recording a loaded plugin");
	reg->libs = libs;
	copy = strdup(path);
	if (!copy)
		return nomem("recording a loaded plugin");
	libs[reg->nlibs++] = (struct reg_lib){ .path = copy, .handle = handle };
	for (size_t i = 0; i < desc->count; i++) {
		const weft_plugin_head *h = desc->items[i].vtable;

		entries[reg->nentries++] = (weft_registry_entry){
			.kind = desc->items[i].kind,
			.name = h->name,
			.abi_version = h->abi_version,
			.vtable = h,
			.file = copy,
			.package = desc->head.name ? desc->head.name : "",
		};
	}
	weft_log(WEFT_LOG_DEBUG, "plugins: loaded %s (%zu plugins)", path, desc->count);
	return WEFT_OK;
}

static weft_status record_shadowed(weft_registry *reg, const char *file, const char *by)
{
	weft_registry_shadowed *p;
	char *f, *b;

	p = grow(reg->shadowed, &reg->cap_shadowed, reg->nshadowed, sizeof(*p));
	if (!p)
		return nomem("recording a shadowed plugin file");
	reg->shadowed = p;
	f = strdup(file);
	b = strdup(by);
	if (!f || !b) {
		free(f);
		free(b);
		return nomem("recording a shadowed plugin file");
	}
	reg->shadowed[reg->nshadowed++] = (weft_registry_shadowed){ .file = f, .by = b };
	weft_log(WEFT_LOG_DEBUG, "plugins: %s is shadowed by %s", file, by);
	return WEFT_OK;
}

/* Loads one candidate unless an earlier one was the same file or had the
 * same file name. */
static weft_status scan_one(weft_registry *reg, struct reg_candidate *c, size_t ci,
			    struct stat *ids)
{
	const weft_plugin_desc *desc;
	void *handle;
	weft_status st;

	for (size_t j = 0; j < ci; j++) {
		if (ids[j].st_ino == ids[ci].st_ino && ids[j].st_dev == ids[ci].st_dev &&
		    ids[ci].st_ino != 0)
			return WEFT_OK; /* the same file reached twice */
	}
	for (size_t j = 0; j < ci; j++) {
		if (!strcmp(base_name(c[j].path), base_name(c[ci].path)))
			return record_shadowed(reg, c[ci].path, c[j].path);
	}
	st = weft_plugin_open(c[ci].path, &handle, &desc);
	if (st != WEFT_OK)
		return c[ci].must_load ? st : record_failure(reg, c[ci].path, st, weft_error_last());
	st = add_lib(reg, c[ci].path, handle, desc);
	if (st != WEFT_OK)
		dlclose(handle);
	return st;
}

static weft_status scan_all(weft_registry *reg)
{
	struct reg_candidate *c = NULL;
	size_t n = 0, cap = 0;
	struct stat *ids = NULL;
	weft_status st = WEFT_OK;

	for (size_t i = 0; i < reg->nfiles && st == WEFT_OK; i++) {
		char *path = strdup(reg->files[i].path);

		st = path ? add_candidate(&c, &n, &cap, path, 1) : nomem("listing plugin files");
	}
	for (size_t i = 0; i < reg->ndirs && st == WEFT_OK; i++)
		st = list_dir(reg, reg->dirs[i].path, &c, &n, &cap);
	if (st != WEFT_OK)
		goto out_free_candidates;
	ids = calloc(n ? n : 1, sizeof(*ids));
	if (!ids) {
		st = nomem("scanning plugin files");
		goto out_free_candidates;
	}
	for (size_t i = 0; i < n; i++) {
		/* A file that vanished keeps zeroed ids; dlopen then says why. */
		stat(c[i].path, &ids[i]);
	}
	for (size_t i = 0; i < n && st == WEFT_OK; i++)
		st = scan_one(reg, c, i, ids);
	if (st == WEFT_OK && reg->nentries > 1)
		qsort(reg->entries, reg->nentries, sizeof(*reg->entries), cmp_entry);
	free(ids);

out_free_candidates:
	free_candidates(c, n);
	return st;
}

weft_status weft_registry_scan(weft_registry *reg)
{
	if (!reg->scanned) {
		reg->scanned = 1;
		reg->scan_status = scan_all(reg);
		if (reg->scan_status != WEFT_OK)
			reg->scan_message = strdup(weft_error_last());
	}
	if (reg->scan_status != WEFT_OK)
		return weft_error_set(reg->scan_status, "%s",
				      reg->scan_message ? reg->scan_message : "plugin scan failed");
	return WEFT_OK;
}

/* ---- lookup -------------------------------------------------------- */

/* Optimal string alignment distance (edits and adjacent swaps). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t d[3][64];
	size_t *prev2 = d[0], *prev = d[1], *cur = d[2];

	if (la >= 63 || lb >= 63)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *t;

		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t v = prev[j - 1] + cost;

			if (prev[j] + 1 < v)
				v = prev[j] + 1;
			if (cur[j - 1] + 1 < v)
				v = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < v)
				v = prev2[j - 2] + 1;
			cur[j] = v;
		}
		t = prev2;
		prev2 = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

/* Appends to a fixed buffer, truncating at its end. */
static void buf_add(char *buf, size_t cap, size_t *len, const char *fmt, ...) WEFT_PRINTF(4, 5);
static void buf_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*len + 1 >= cap)
		return;
	va_start(ap, fmt);
	k = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (k > 0)
		*len = *len + (size_t)k < cap ? *len + (size_t)k : cap - 1;
}

static weft_status not_found(const weft_registry *reg, weft_plugin_kind kind, const char *name)
{
	const char *kname = weft_plugin_kind_name(kind);
	const char *best = NULL, *other_kind = NULL;
	size_t best_d = (size_t)-1, limit = strlen(name) / 3 + 1;
	size_t len = 0, navail = 0;
	char msg[4096];

	for (size_t i = 0; i < reg->nentries; i++) {
		const weft_registry_entry *e = &reg->entries[i];
		size_t d;

		if (e->kind != kind) {
			if (!strcmp(e->name, name))
				other_kind = weft_plugin_kind_name(e->kind);
			continue;
		}
		d = edit_distance(name, e->name);
		if (d <= limit && d < best_d) {
			best_d = d;
			best = e->name;
		}
	}
	buf_add(msg, sizeof(msg), &len, "no %s plugin named '%s'", kname, name);
	if (best)
		buf_add(msg, sizeof(msg), &len, " (did you mean '%s'?)", best);
	else if (other_kind)
		buf_add(msg, sizeof(msg), &len, " (there is a %s plugin of that name)", other_kind);
	buf_add(msg, sizeof(msg), &len, "; available:");
	for (size_t i = 0; i < reg->nentries; i++) {
		if (reg->entries[i].kind != kind)
			continue;
		buf_add(msg, sizeof(msg), &len, "%s %s", navail ? "," : "", reg->entries[i].name);
		navail++;
	}
	if (!navail)
		buf_add(msg, sizeof(msg), &len, " none");
	buf_add(msg, sizeof(msg), &len, "; searched:");
	for (size_t i = 0; i < reg->nfiles; i++)
		buf_add(msg, sizeof(msg), &len, "%s %s", i ? "," : "", reg->files[i].path);
	for (size_t i = 0; i < reg->ndirs; i++)
		buf_add(msg, sizeof(msg), &len, "%s %s", i || reg->nfiles ? "," : "",
			reg->dirs[i].path);
	if (!reg->nfiles && !reg->ndirs)
		buf_add(msg, sizeof(msg), &len,
			" no directories (add some with plugins.paths in the config or "
			"WEFT_PLUGIN_PATH)");
	if (reg->nfailures) {
		buf_add(msg, sizeof(msg), &len, "; also, %zu file%s failed to load:",
			reg->nfailures, reg->nfailures == 1 ? "" : "s");
		for (size_t i = 0; i < reg->nfailures; i++)
			buf_add(msg, sizeof(msg), &len, "%s %s: %s", i ? ";" : "",
				reg->failures[i].file, reg->failures[i].reason);
	}
	return weft_error_set(WEFT_ERR_NOT_FOUND, "%s", msg);
}

weft_status weft_registry_find(weft_registry *reg, weft_plugin_kind kind, const char *name,
			       const void **vtable, const char **file)
{
	const weft_registry_entry *e;
	weft_status st;

	if (!name)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "plugin lookup without a name");
	if (!weft_plugin_min_struct_size(kind))
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "plugin lookup of '%s' with unknown kind %d", name, (int)kind);
	st = weft_registry_scan(reg);
	if (st != WEFT_OK)
		return st;
	e = find_entry(reg, kind, name);
	if (!e)
		return not_found(reg, kind, name);
	*vtable = e->vtable;
	if (file)
		*file = e->file;
	return WEFT_OK;
}

weft_status weft_registry_list(weft_registry *reg, const weft_registry_entry **entries,
			       size_t *count)
{
	weft_status st = weft_registry_scan(reg);

	*entries = st == WEFT_OK ? reg->entries : NULL;
	*count = st == WEFT_OK ? reg->nentries : 0;
	return st;
}

const weft_registry_failure *weft_registry_failures(const weft_registry *reg, size_t *count)
{
	*count = reg->nfailures;
	return reg->failures;
}

const weft_registry_shadowed *weft_registry_shadowed_files(const weft_registry *reg,
							     size_t *count)
{
	*count = reg->nshadowed;
	return reg->shadowed;
}

const char *const *weft_registry_dirs(const weft_registry *reg, size_t *count)
{
	*count = reg->ndirs;
	return reg->dir_names;
}
