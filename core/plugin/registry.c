/* The plugin registry: creating, freeing, the scan that indexes every
 * file on the path by the names it declares without loading it, and the
 * loading of a file when a lookup needs it (plugin/registry.h). */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plugin/loader_impl.h"
#include "plugin/registry_impl.h"
#include "weft/log.h"

/* The registry that last scanned (or looked up) and is not freed yet:
 * the one host->find_plugin answers from (plugin/registry.h). */
static weft_registry *g_active;

weft_registry *weft_registry_active(void)
{
	return g_active;
}

/* One file to look at during the scan. */
struct reg_candidate {
	char *path;
	int must_load; /* an explicit plugins.load file: failure is fatal */
};

void *weft_registry_grow(void *arr, size_t *cap, size_t n, size_t size)
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

weft_status weft_registry_nomem(const char *what)
{
	return weft_error_set(WEFT_ERR_NOMEM, "out of memory while %s", what);
}

weft_status weft_registry_create(weft_registry **out)
{
	weft_registry *reg = calloc(1, sizeof(*reg));

	if (!reg)
		return weft_registry_nomem("creating the plugin registry");
	*out = reg;
	return WEFT_OK;
}

void weft_registry_free(weft_registry *reg)
{
	if (!reg)
		return;
	if (g_active == reg)
		g_active = NULL;
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
	for (size_t i = 0; i < reg->npending; i++)
		free(reg->pending[i].path);
	free(reg->pending);
	for (size_t i = 0; i < reg->nstrings; i++)
		free(reg->strings[i]);
	free(reg->strings);
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

/* ---- scan ---------------------------------------------------------- */

static int ends_with_so(const char *name)
{
	size_t n = strlen(name);

	return n > 3 && !strcmp(name + n - 3, ".so");
}

/* Kernel libraries (weft_kernels_cuda.so) share the plugin directory but
 * are kernel tables, loaded by kernels.c when their device is first used:
 * a directory scan leaves them alone. */
static int is_kernel_library(const char *name)
{
	return !strncmp(name, "weft_kernels_", 13);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int weft_registry_cmp_entry(const void *a, const void *b)
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
	struct reg_candidate *p = weft_registry_grow(*c, cap, *n, sizeof(**c));

	if (!p) {
		free(path);
		return weft_registry_nomem("listing plugin files");
	}
	*c = p;
	p[(*n)++] = (struct reg_candidate){ .path = path, .must_load = must_load };
	return WEFT_OK;
}

static weft_status record_failure(weft_registry *reg, const char *file, weft_status status,
				  const char *reason)
{
	weft_registry_failure *p;
	char *f, *r;

	p = weft_registry_grow(reg->failures, &reg->cap_failures, reg->nfailures, sizeof(*p));
	if (!p)
		return weft_registry_nomem("recording a plugin failure");
	reg->failures = p;
	f = strdup(file);
	r = strdup(reason);
	if (!f || !r) {
		free(f);
		free(r);
		return weft_registry_nomem("recording a plugin failure");
	}
	reg->failures[reg->nfailures++] = (weft_registry_failure){
		.file = f, .status = status, .reason = r };
	weft_log(WEFT_LOG_DEBUG, "plugins: skipping %s", r);
	return WEFT_OK;
}

/* Appends the `*.so` files of `dir`, in name order. A directory that
 * cannot be read is recorded as a failure. */
static weft_status list_dir(weft_registry *reg, const char *dir, struct reg_candidate **c,
			    size_t *n, size_t *cap)
{
	char **names = NULL;
	size_t nnames = 0, cap_names = 0;
	struct dirent *de;
	weft_status st = WEFT_OK;
	DIR *d;

	{
		char why[1024];

		if (weft_plugin_place_unsafe(dir, 1, why, sizeof(why)))
			return record_failure(reg, dir, WEFT_ERR_PLUGIN, why);
	}
	d = opendir(dir);
	if (!d) {
		char why[1024];

		snprintf(why, sizeof(why), "cannot read plugin directory %s: %s", dir,
			 strerror(errno));
		return record_failure(reg, dir, WEFT_ERR_PLUGIN, why);
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !ends_with_so(de->d_name) ||
		    is_kernel_library(de->d_name))
			continue;
		char **p = weft_registry_grow(names, &cap_names, nnames, sizeof(*names));

		if (!p) {
			st = weft_registry_nomem("listing a plugin directory");
			goto out_free_names;
		}
		names = p;
		names[nnames] = strdup(de->d_name);
		if (!names[nnames]) {
			st = weft_registry_nomem("listing a plugin directory");
			goto out_free_names;
		}
		nnames++;
	}
	if (nnames > 1)
		qsort(names, nnames, sizeof(*names), cmp_str);
	for (size_t i = 0; i < nnames; i++) {
		char *path;

		if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
			st = weft_registry_nomem("listing a plugin directory");
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

const weft_registry_entry *weft_registry_find_entry(const weft_registry *reg,
						    weft_plugin_kind kind, const char *name)
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

/* Records an opened lib (the registry owns handle from here on); *copy
 * (optional) is the registry's copy of path. Errors: NOMEM. */
static weft_status keep_lib(weft_registry *reg, const char *path, void *handle,
			    const char **copy)
{
	struct reg_lib *libs = weft_registry_grow(reg->libs, &reg->cap_libs, reg->nlibs,
						  sizeof(*libs));
	char *dup;

	if (!libs)
		return weft_registry_nomem("recording a loaded plugin");
	reg->libs = libs;
	dup = strdup(path);
	if (!dup)
		return weft_registry_nomem("recording a loaded plugin");
	libs[reg->nlibs++] = (struct reg_lib){ .path = dup, .handle = handle };
	if (copy)
		*copy = dup;
	return WEFT_OK;
}

/* Records every plugin of a checked descriptor, or none when one clashes.
 * On success the registry owns `handle`; on failure the caller closes it. */
static weft_status add_lib(weft_registry *reg, const char *path, void *handle,
			   const weft_plugin_desc *desc)
{
	weft_registry_entry *entries;
	const char *copy;

	for (size_t i = 0; i < desc->count; i++) {
		const weft_plugin_entry_item *it = &desc->items[i];
		const char *name = ((const weft_plugin_head *)it->vtable)->name;
		const weft_registry_entry *old = weft_registry_find_entry(reg, it->kind, name);

		if (old)
			return clash(it->kind, name, old->file, path);
		for (size_t j = 0; j < i; j++) {
			const weft_plugin_head *h = desc->items[j].vtable;

			if (desc->items[j].kind == it->kind && !strcmp(h->name, name))
				return clash(it->kind, name, path, path);
		}
	}
	/* every allocation first, so nothing below can fail half-way */
	entries = weft_registry_grow(reg->entries, &reg->cap_entries, reg->nentries + desc->count - 1,
		       sizeof(*entries));
	if (!entries)
		return weft_registry_nomem("recording a loaded plugin");
	reg->entries = entries;
	if (keep_lib(reg, path, handle, &copy) != WEFT_OK)
		return WEFT_ERR_NOMEM;
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

/* A declaring file, loaded: its entry must return exactly what its names
 * section declared; the declared entries get their vtables. On failure
 * nothing is filled and the caller closes handle. */
static weft_status fill_declared(weft_registry *reg, const struct reg_pending *p, void *handle,
				 const weft_plugin_desc *desc)
{
	size_t declared = 0;
	weft_status st;

	for (size_t i = 0; i < reg->nentries; i++)
		declared += reg->entries[i].file == p->path;
	for (size_t i = 0; i < desc->count; i++) {
		const weft_plugin_entry_item *it = &desc->items[i];
		const char *name = ((const weft_plugin_head *)it->vtable)->name;
		const weft_registry_entry *e = weft_registry_find_entry(reg, it->kind, name);

		if (!e || e->file != p->path)
			return weft_error_set(WEFT_ERR_PLUGIN, "plugin file %s returns the %s plugin "
					      "'%s', which its names section (WEFT_PLUGIN_NAMES) "
					      "does not declare; add it there and rebuild the "
					      "plugin", p->path, weft_plugin_kind_name(it->kind),
					      name);
	}
	if (desc->count != declared)
		return weft_error_set(WEFT_ERR_PLUGIN, "plugin file %s declares %zu plugins in its "
				      "names section (WEFT_PLUGIN_NAMES) but its entry returns %zu; "
				      "make them agree and rebuild the plugin", p->path, declared,
				      desc->count);
	st = keep_lib(reg, p->path, handle, NULL);
	if (st)
		return st;
	for (size_t i = 0; i < desc->count; i++) {
		const weft_plugin_head *h = desc->items[i].vtable;

		for (size_t j = 0; j < reg->nentries; j++) {
			weft_registry_entry *e = &reg->entries[j];

			if (e->file == p->path && e->kind == desc->items[i].kind &&
			    !strcmp(e->name, h->name)) {
				e->name = h->name;
				e->abi_version = h->abi_version;
				e->vtable = h;
				e->package = desc->head.name ? desc->head.name : "";
			}
		}
	}
	weft_log(WEFT_LOG_DEBUG, "plugins: loaded %s (%zu plugins)", p->path, desc->count);
	return WEFT_OK;
}

/* Keeps str (malloc'd) until the registry is freed; 0 when out of memory
 * (str is then still the caller's). */
static int keep_string(weft_registry *reg, char *str)
{
	char **p = weft_registry_grow(reg->strings, &reg->cap_strings, reg->nstrings, sizeof(*p));

	if (!p)
		return 0;
	reg->strings = p;
	p[reg->nstrings++] = str;
	return 1;
}

/* Indexes a file that declares its names: one entry per name, vtable NULL
 * until the file is loaded. */
static weft_status declare_file(weft_registry *reg, struct reg_pending *p, const char *text)
{
	const char *cur = text;
	weft_plugin_kind kind;
	char name[128];
	int r;

	while ((r = weft_plugin_next_name(&cur, &kind, name, sizeof(name))) == 1) {
		const weft_registry_entry *old = weft_registry_find_entry(reg, kind, name);
		weft_registry_entry *entries;
		char *copy;

		if (old)
			return clash(kind, name, old->file, p->path);
		entries = weft_registry_grow(reg->entries, &reg->cap_entries, reg->nentries,
					     sizeof(*entries));
		if (!entries)
			return weft_registry_nomem("indexing plugin names");
		reg->entries = entries;
		copy = strdup(name);
		if (!copy || !keep_string(reg, copy)) {
			free(copy);
			return weft_registry_nomem("indexing plugin names");
		}
		entries[reg->nentries++] = (weft_registry_entry){
			.kind = kind, .name = copy, .file = p->path, .package = "" };
	}
	if (r < 0) {
		char why[1024];

		snprintf(why, sizeof(why), "plugin file %s has a malformed names section "
			 "(WEFT_PLUGIN_NAMES wants \"kind:name\" words, kind one of comm, strategy, "
			 "optim, callback, model); rebuild it", p->path);
		return record_failure(reg, p->path, WEFT_ERR_PLUGIN, why);
	}
	p->declared = 1;
	return WEFT_OK;
}

/* A file found in a directory: checked for ownership and mode, then
 * indexed by its names section, or kept for a load on demand. */
static weft_status index_file(weft_registry *reg, const char *path)
{
	struct reg_pending *p;
	char why[1024], *text = NULL;
	weft_status st;
	int r;

	if (weft_plugin_place_unsafe(path, 0, why, sizeof(why)))
		return record_failure(reg, path, WEFT_ERR_PLUGIN, why);
	p = weft_registry_grow(reg->pending, &reg->cap_pending, reg->npending, sizeof(*p));
	if (!p)
		return weft_registry_nomem("indexing plugin files");
	reg->pending = p;
	p = &reg->pending[reg->npending];
	*p = (struct reg_pending){ .path = strdup(path) };
	if (!p->path)
		return weft_registry_nomem("indexing plugin files");
	reg->npending++;
	r = weft_plugin_read_names(path, &text);
	if (r != 1)
		return WEFT_OK; /* loaded on demand; a broken file says why then */
	st = declare_file(reg, p, text);
	free(text);
	return st;
}

static struct reg_pending *pending_of(weft_registry *reg, const char *path)
{
	for (size_t i = 0; i < reg->npending; i++)
		if (reg->pending[i].path == path || !strcmp(reg->pending[i].path, path))
			return &reg->pending[i];
	return NULL;
}

/* Loads one pending file once; a failure is recorded and returned. */
static weft_status load_one(weft_registry *reg, struct reg_pending *p)
{
	const weft_plugin_desc *desc;
	void *handle;
	weft_status st;

	if (p->tried)
		return p->status;
	p->tried = 1;
	st = weft_plugin_open(p->path, &handle, &desc);
	if (st == WEFT_OK) {
		st = p->declared ? fill_declared(reg, p, handle, desc) :
				   add_lib(reg, p->path, handle, desc);
		if (st != WEFT_OK)
			dlclose(handle);
	}
	p->status = st;
	if (st != WEFT_OK && st != WEFT_ERR_NOMEM) {
		char why[2048];

		snprintf(why, sizeof(why), "%s", weft_error_last());
		if (record_failure(reg, p->path, st, why) != WEFT_OK)
			return WEFT_ERR_NOMEM;
		weft_error_set(st, "%s", why);
	}
	return st;
}

weft_status weft_registry_load_pending(weft_registry *reg, const char *declared_path, int legacy,
				       int all)
{
	weft_status st;

	if (declared_path) {
		struct reg_pending *p = pending_of(reg, declared_path);

		return p ? load_one(reg, p) : WEFT_OK;
	}
	for (size_t i = 0; i < reg->npending; i++) {
		struct reg_pending *p = &reg->pending[i];

		if (p->tried || (p->declared ? !all : !legacy))
			continue;
		st = load_one(reg, p);
		/* a file that does not load is skipped; two files claiming one
		 * name, or no memory, end the scan */
		if (st == WEFT_ERR_NOMEM || (st != WEFT_OK && strstr(weft_error_last(),
								      "two files provide")))
			return st;
	}
	return WEFT_OK;
}

static weft_status record_shadowed(weft_registry *reg, const char *file, const char *by)
{
	weft_registry_shadowed *p;
	char *f, *b;

	p = weft_registry_grow(reg->shadowed, &reg->cap_shadowed, reg->nshadowed, sizeof(*p));
	if (!p)
		return weft_registry_nomem("recording a shadowed plugin file");
	reg->shadowed = p;
	f = strdup(file);
	b = strdup(by);
	if (!f || !b) {
		free(f);
		free(b);
		return weft_registry_nomem("recording a shadowed plugin file");
	}
	reg->shadowed[reg->nshadowed++] = (weft_registry_shadowed){ .file = f, .by = b };
	weft_log(WEFT_LOG_DEBUG, "plugins: %s is shadowed by %s", file, by);
	return WEFT_OK;
}

/* Takes one candidate unless an earlier one was the same file or had the
 * same file name: an explicit file is loaded now, a file found in a
 * directory only indexed. */
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
	if (!c[ci].must_load)
		return index_file(reg, c[ci].path);
	{
		char why[1024];

		if (weft_plugin_place_unsafe(c[ci].path, 0, why, sizeof(why)))
			return weft_error_set(WEFT_ERR_PLUGIN, "%s", why);
	}
	st = weft_plugin_open(c[ci].path, &handle, &desc);
	if (st != WEFT_OK)
		return st;
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

		st = path ? add_candidate(&c, &n, &cap, path, 1) : weft_registry_nomem("listing plugin files");
	}
	for (size_t i = 0; i < reg->ndirs && st == WEFT_OK; i++)
		st = list_dir(reg, reg->dirs[i].path, &c, &n, &cap);
	if (st != WEFT_OK)
		goto out_free_candidates;
	ids = calloc(n ? n : 1, sizeof(*ids));
	if (!ids) {
		st = weft_registry_nomem("scanning plugin files");
		goto out_free_candidates;
	}
	for (size_t i = 0; i < n; i++) {
		/* A file that vanished keeps zeroed ids; dlopen then says why. */
		stat(c[i].path, &ids[i]);
	}
	for (size_t i = 0; i < n && st == WEFT_OK; i++)
		st = scan_one(reg, c, i, ids);
	if (st == WEFT_OK && reg->nentries > 1)
		qsort(reg->entries, reg->nentries, sizeof(*reg->entries), weft_registry_cmp_entry);
	free(ids);

out_free_candidates:
	free_candidates(c, n);
	return st;
}

weft_status weft_registry_scan(weft_registry *reg)
{
	g_active = reg;
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

