/* The CUDA kernel library's extras, found once (tensor/cuda_extras.h). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tensor/cuda_extras.h"
#include "tensor/kernel_loader.h"

#define KERNELS_FILE "weft_kernels_cuda.so"

static pthread_mutex_t extras_lock = PTHREAD_MUTEX_INITIALIZER;
static const weft_cuda_extras *extras_found; /* under extras_lock */
static char extras_file[4096];

/* dl_iterate_phdr callback: the path of a loaded weft_kernels_cuda.so. */
static int find_by_name(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *name = info->dlpi_name, *base;

	(void)size;
	if (!name || !*name)
		return 0;
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strcmp(base, KERNELS_FILE) != 0)
		return 0;
	snprintf(data, sizeof(extras_file), "%s", name);
	return 1;
}

/* The extras symbol's table in the loaded object `path`, or NULL. */
static const weft_cuda_extras *extras_in(const char *path)
{
	weft_cuda_extras_fn fn = NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		return NULL;
	fn = (weft_cuda_extras_fn)(uintptr_t)dlsym(h, WEFT_CUDA_EXTRAS_SYMBOL);
	dlclose(h); /* the kernel registry keeps the library loaded */
	return fn ? fn() : NULL;
}

/* Looks the table up; called with extras_lock held. */
static weft_status lookup(void)
{
	const weft_kernel_table *t = weft_kernels_registered(WEFT_DEVICE_CUDA);
	const weft_cuda_extras *ex = NULL;
	char path[sizeof(extras_file)] = "";
	Dl_info info;

	/* the object that holds the CUDA table the process computes with */
	if (t && dladdr((const void *)t, &info) && info.dli_fname && info.dli_fname[0]) {
		snprintf(path, sizeof(path), "%s", info.dli_fname);
		ex = extras_in(path);
	}
	/* a library loaded by file name (a table not registered yet) */
	if (!ex) {
		char named[sizeof(extras_file)] = "";

		dl_iterate_phdr(find_by_name, named);
		if (named[0]) {
			snprintf(path, sizeof(path), "%s", named);
			ex = extras_in(path);
		}
	}
	if (!path[0])
		return weft_error_set(WEFT_ERR_UNSUPPORTED, KERNELS_FILE " is not loaded in this "
				      "process (device memory comes from a tensor on a cuda device, "
				      "which loads it)");
	if (!ex)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "the CUDA kernel library %s has no %s: "
				      "it was built for an older weft; rebuild the CUDA kernels "
				      "with this one", path, WEFT_CUDA_EXTRAS_SYMBOL);
	if (WEFT_ABI_VERSION_MAJOR(ex->head.abi_version) != WEFT_ABI_MAJOR)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "the CUDA kernel library %s: its %s is "
				      "ABI %u.x, this weft is ABI %d.x; rebuild the CUDA kernels "
				      "with this weft", path, WEFT_CUDA_EXTRAS_SYMBOL,
				      WEFT_ABI_VERSION_MAJOR(ex->head.abi_version), WEFT_ABI_MAJOR);
	snprintf(extras_file, sizeof(extras_file), "%s", path);
	extras_found = ex;
	return WEFT_OK;
}

weft_status weft_cuda_extras_find(const weft_cuda_extras **out, const char **file)
{
	weft_status st = WEFT_OK;

	pthread_mutex_lock(&extras_lock);
	if (!extras_found)
		st = lookup();
	*out = extras_found;
	if (file)
		*file = extras_found ? extras_file : NULL;
	pthread_mutex_unlock(&extras_lock);
	return st;
}
