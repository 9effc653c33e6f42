/* Opening one plugin file or kernel library and checking what it
 * describes against this weft's ABI (weft/plugin.h, weft/device.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "plugin/loader_impl.h"
#include "plugin/registry.h"

#include "weft/comm.h"
#include "weft/device.h"
#include "weft/optim.h"
#include "weft/strategy.h"
#include "weft/trainer.h"

/* Every member of a vtable that the host calls without a WEFT_HAS_MEMBER
 * check must lie inside struct_size, so each vtable header defines
 * WEFT_<KIND>_OPS_MIN_SIZE: the struct_size of the first version of the
 * current ABI major. Members appended later lie beyond it. */
size_t weft_plugin_min_struct_size(weft_plugin_kind kind)
{
	switch (kind) {
	case WEFT_PLUGIN_COMM: return WEFT_COMM_OPS_MIN_SIZE;
	case WEFT_PLUGIN_STRATEGY: return WEFT_STRATEGY_OPS_MIN_SIZE;
	case WEFT_PLUGIN_OPTIM: return WEFT_OPTIM_OPS_MIN_SIZE;
	case WEFT_PLUGIN_CALLBACK: return WEFT_CALLBACK_OPS_MIN_SIZE;
	case WEFT_PLUGIN_MODEL: return WEFT_MODULE_OPS_MIN_SIZE;
	}
	return 0;
}

static int kind_known(weft_plugin_kind kind)
{
	return weft_plugin_min_struct_size(kind) != 0;
}

static weft_status abi_mismatch(const char *path, const char *what, uint32_t version)
{
	return weft_error_set(WEFT_ERR_ABI,
			      "plugin %s%s was built for weft plugin ABI %u.%u, this weft has ABI "
			      "%u.%u; rebuild it against this weft's SDK",
			      path, what, WEFT_ABI_VERSION_MAJOR(version),
			      WEFT_ABI_VERSION_MINOR(version), WEFT_ABI_MAJOR, WEFT_ABI_MINOR);
}

/* Checks one item of a descriptor: kind, ABI major, name, struct_size. */
static weft_status check_item(const char *path, size_t i, const weft_plugin_entry_item *item)
{
	const weft_plugin_head *head = item->vtable;
	const char *kind = weft_plugin_kind_name(item->kind);
	char what[256];
	size_t need;

	if (!kind_known(item->kind))
		return weft_error_set(WEFT_ERR_PLUGIN,
				      "plugin file %s: item %zu has unknown kind %d; this weft knows "
				      "comm (%d), strategy (%d), optim (%d), callback (%d) and model "
				      "(%d); if the plugin was built for a newer weft, use that weft "
				      "or rebuild it",
				      path, i, (int)item->kind, WEFT_PLUGIN_COMM,
				      WEFT_PLUGIN_STRATEGY, WEFT_PLUGIN_OPTIM, WEFT_PLUGIN_CALLBACK,
				      WEFT_PLUGIN_MODEL);
	if (!head)
		return weft_error_set(WEFT_ERR_PLUGIN,
				      "plugin file %s: item %zu (%s) has a NULL vtable; point it at "
				      "the plugin's static const ops struct",
				      path, i, kind);
	snprintf(what, sizeof(what), " (%s plugin '%s')", kind,
		 head->name ? head->name : "(no name)");
	if (WEFT_ABI_VERSION_MAJOR(head->abi_version) != WEFT_ABI_MAJOR)
		return abi_mismatch(path, what, head->abi_version);
	if (!head->name || !head->name[0])
		return weft_error_set(WEFT_ERR_PLUGIN,
				      "plugin file %s: the %s plugin at item %zu has no name "
				      "(head.name is %s); set it with WEFT_PLUGIN_HEAD(type, \"name\")",
				      path, kind, i, head->name ? "empty" : "NULL");
	need = weft_plugin_min_struct_size(item->kind);
	if (head->struct_size < need)
		return weft_error_set(WEFT_ERR_ABI,
				      "%s plugin '%s' in %s has struct_size %u, but this weft needs "
				      "at least %zu bytes for a %s vtable (ABI %u.%u); rebuild it "
				      "against this weft's SDK and set the head with "
				      "WEFT_PLUGIN_HEAD(type, name)",
				      kind, head->name, path, head->struct_size, need, kind,
				      WEFT_ABI_MAJOR, WEFT_ABI_MINOR);
	return WEFT_OK;
}

static weft_status check_desc(const char *path, const weft_plugin_desc *desc)
{
	weft_status st;

	if (WEFT_ABI_VERSION_MAJOR(desc->head.abi_version) != WEFT_ABI_MAJOR)
		return abi_mismatch(path, "", desc->head.abi_version);
	if (desc->head.struct_size < sizeof(weft_plugin_desc))
		return weft_error_set(WEFT_ERR_ABI,
				      "plugin %s has a descriptor of struct_size %u, but this weft "
				      "needs at least %zu bytes; rebuild it against this weft's SDK",
				      path, desc->head.struct_size, sizeof(weft_plugin_desc));
	if (desc->count == 0 || !desc->items)
		return weft_error_set(WEFT_ERR_PLUGIN,
				      "plugin file %s describes no plugins (count %zu, items %s); "
				      "list at least one {kind, vtable} item in its descriptor",
				      path, desc->count, desc->items ? "set" : "NULL");
	for (size_t i = 0; i < desc->count; i++) {
		st = check_item(path, i, &desc->items[i]);
		if (st != WEFT_OK)
			return st;
	}
	return WEFT_OK;
}

weft_status weft_plugin_open(const char *path, void **handle, const weft_plugin_desc **desc)
{
	const char *open_path = path;
	weft_plugin_entry_fn entry;
	const weft_plugin_desc *d;
	char local[4096];
	const char *why;
	void *h;
	weft_status st;

	/* without a slash dlopen would search the library path, not the file */
	if (!strchr(path, '/')) {
		snprintf(local, sizeof(local), "./%s", path);
		open_path = local;
	}
	dlerror();
	h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		why = dlerror();
		if (why && !strncmp(why, open_path, strlen(open_path)) &&
		    !strncmp(why + strlen(open_path), ": ", 2))
			why += strlen(open_path) + 2; /* the path is named already */
		return weft_error_set(WEFT_ERR_PLUGIN,
				      "cannot load plugin file %s: %s; if it needs a library that "
				      "this machine lacks (e.g. CUDA on a CPU-only machine), install "
				      "it or take the file off the plugin path",
				      path, why ? why : "unknown dlopen error");
	}
	dlerror();
	entry = (weft_plugin_entry_fn)dlsym(h, WEFT_PLUGIN_ENTRY_SYMBOL);
	if (!entry) {
		st = weft_error_set(WEFT_ERR_PLUGIN,
				    "plugin file %s does not export the entry symbol '%s'; define it "
				    "with WEFT_PLUGIN_ENTRY(host) from <weft/plugin.h>, which gives it "
				    "default visibility (in C++ also declare it extern \"C\")",
				    path, WEFT_PLUGIN_ENTRY_SYMBOL);
		goto out_close;
	}
	weft_error_clear();
	d = entry(weft_host_services());
	if (!d) {
		char said[1024];

		/* copied: the message below is written over the last error */
		snprintf(said, sizeof(said), "%s", weft_error_last());
		st = weft_error_set(WEFT_ERR_PLUGIN,
				    "plugin file %s: %s() returned NULL, so the plugin refused to "
				    "load%s%s",
				    path, WEFT_PLUGIN_ENTRY_SYMBOL,
				    said[0] ? "; it said: " : " (it gave no reason)", said);
		goto out_close;
	}
	st = check_desc(path, d);
	if (st != WEFT_OK)
		goto out_close;
	*handle = h;
	*desc = d;
	return WEFT_OK;

out_close:
	dlclose(h);
	return st;
}

weft_status weft_kernels_open(const char *path, const weft_kernel_table **table)
{
	weft_kernels_entry_fn entry;
	const weft_kernel_table *t;
	char said[1024];
	const char *why;
	void *h;

	*table = NULL;
	dlerror();
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		why = dlerror();
		return weft_error_set(WEFT_ERR_PLUGIN, "%s", why ? why : path);
	}
	entry = (weft_kernels_entry_fn)(uintptr_t)dlsym(h, WEFT_KERNELS_ENTRY_SYMBOL);
	if (!entry) {
		dlclose(h);
		return weft_error_set(WEFT_ERR_PLUGIN, "%s lacks %s", path, WEFT_KERNELS_ENTRY_SYMBOL);
	}
	weft_error_clear();
	t = entry(weft_host_services());
	if (!t) {
		/* copied: the message below is written over the last error */
		snprintf(said, sizeof(said), "%s", weft_error_last());
		dlclose(h);
		return weft_error_set(WEFT_ERR_PLUGIN, "%s: %s", path,
				      said[0] ? said : "its entry refused (it gave no reason)");
	}
	if (WEFT_ABI_VERSION_MAJOR(t->head.abi_version) != WEFT_ABI_MAJOR ||
	    t->head.struct_size < offsetof(weft_kernel_table, set_threads)) {
		dlclose(h);
		return weft_error_set(WEFT_ERR_ABI,
				      "%s: its kernel table is ABI %u.x (%u bytes), weft is ABI %d.x; "
				      "rebuild the kernels against this weft",
				      path, WEFT_ABI_VERSION_MAJOR(t->head.abi_version),
				      t->head.struct_size, WEFT_ABI_MAJOR);
	}
	*table = t; /* the library stays loaded for the life of the process */
	return WEFT_OK;
}
