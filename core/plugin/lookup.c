/* Looking plugins up by kind and name, with a did-you-mean, and listing
 * what a scan found (plugin/registry.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/edit_distance.h"
#include "plugin/registry_impl.h"

/* ---- lookup -------------------------------------------------------- */

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
		d = weft_edit_distance(name, e->name);
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
	e = weft_registry_find_entry(reg, kind, name);
	if (!e) {
		/* files without a names section may hold it: load them now */
		st = weft_registry_load_pending(reg, NULL, 1, 0);
		if (st != WEFT_OK)
			return st;
		e = weft_registry_find_entry(reg, kind, name);
	}
	if (!e)
		return not_found(reg, kind, name);
	if (!e->vtable) {
		const char *path = e->file;

		st = weft_registry_load_pending(reg, path, 0, 0);
		if (st != WEFT_OK)
			return weft_error_wrap(st, "loading the %s plugin '%s' from %s",
					       weft_plugin_kind_name(kind), name, path);
		e = weft_registry_find_entry(reg, kind, name);
		if (!e || !e->vtable)
			return weft_error_set(WEFT_ERR_PLUGIN, "plugin file %s did not provide the "
					      "%s plugin '%s' it declares", path,
					      weft_plugin_kind_name(kind), name);
	}
	*vtable = e->vtable;
	if (file)
		*file = e->file;
	return WEFT_OK;
}

weft_status weft_registry_list(weft_registry *reg, const weft_registry_entry **entries,
			       size_t *count)
{
	weft_status st = weft_registry_scan(reg);

	/* a listing shows everything: load every file not loaded yet, and
	 * drop the names of declaring files that failed (they are listed
	 * among the failures) */
	if (st == WEFT_OK)
		st = weft_registry_load_pending(reg, NULL, 1, 1);
	if (st == WEFT_OK) {
		size_t k = 0;

		for (size_t i = 0; i < reg->nentries; i++)
			if (reg->entries[i].vtable)
				reg->entries[k++] = reg->entries[i];
		reg->nentries = k;
		if (k > 1)
			qsort(reg->entries, k, sizeof(*reg->entries), weft_registry_cmp_entry);
	}
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

