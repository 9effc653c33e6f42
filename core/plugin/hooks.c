/* What the plugin layer tells the layers below it, once, when it is
 * loaded: core/tensor gets the kernel-library loader (kernels.c) and the
 * host services table gets the lookup behind host->find_plugin. Neither
 * layer calls up into this one; it calls them. */
#include "host/host.h"
#include "plugin/hooks_impl.h"
#include "plugin/registry.h"
#include "tensor/kernel_loader.h"

/* host->find_plugin: a lookup in the active registry (ABI 1.1). */
static weft_status find_in_active(weft_plugin_kind kind, const char *name, const void **vtable)
{
	weft_registry *reg = weft_registry_active();

	if (!reg)
		return weft_host_no_registry(name);
	return weft_registry_find(reg, kind, name, vtable, NULL);
}

void weft_plugin_hooks_install(void)
{
	weft_kernels_set_loader(weft_plugin_load_kernels);
	weft_host_set_plugin_finder(find_in_active);
}

/* Runs when libweft (or a program linking core/plugin statically; its
 * CMake target makes the linker keep this file) is loaded, before main. */
__attribute__((constructor)) static void plugin_hooks_init(void)
{
	weft_plugin_hooks_install();
}
