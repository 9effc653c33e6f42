/* A weft_kernels_cuda.so as one built before ABI 1.4 looks to the NCCL
 * plugin, for test_nccl_compute_order_emu's `old-kernels` mode: the
 * emulated kernel library's table and extras, copied into this library
 * (so the core finds the extras here, beside the table), the extras'
 * struct_size cut where ABI 1.3 ended (no stream_wait_compute). The
 * emulated library is opened from EMU_KERNELS_SO (set at build). */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/cuda_extras.h"
#include "weft/device.h"

static weft_kernel_table table;
static weft_cuda_extras extras;

WEFT_PLUGIN_EXPORT const weft_kernel_table *weft_kernels_entry(const weft_host *host)
{
	void *h = dlopen(EMU_KERNELS_SO, RTLD_NOW | RTLD_LOCAL);
	weft_kernels_entry_fn entry;
	weft_cuda_extras_fn ex;
	const weft_kernel_table *t;

	if (!h) {
		host->error_set(WEFT_ERR_PLUGIN, "fake_old_kernels: cannot open %s: %s",
				EMU_KERNELS_SO, dlerror());
		return NULL;
	}
	entry = (weft_kernels_entry_fn)(uintptr_t)dlsym(h, WEFT_KERNELS_ENTRY_SYMBOL);
	ex = (weft_cuda_extras_fn)(uintptr_t)dlsym(h, WEFT_CUDA_EXTRAS_SYMBOL);
	if (!entry || !ex) {
		host->error_set(WEFT_ERR_PLUGIN, "fake_old_kernels: %s lacks its symbols",
				EMU_KERNELS_SO);
		return NULL;
	}
	t = entry(host);
	if (!t)
		return NULL;
	table = *t;
	extras = *ex();
	extras.head.struct_size = (uint32_t)offsetof(weft_cuda_extras, stream_wait_compute);
	extras.stream_wait_compute = NULL;
	return &table;
}

WEFT_PLUGIN_EXPORT const weft_cuda_extras *weft_kernels_cuda_extras(void)
{
	return &extras;
}
