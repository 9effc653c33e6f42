/* Devices: names, the per-device kernel tables (the CPU one built in, the
 * others loaded on first use through the loader the plugin layer sets),
 * device memory, CPU thread settings. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/device.h"
#include "cpu/kernels_cpu.h"
#include "tensor/kernel_loader.h"

weft_status weft_device_parse(const char *text, weft_device *out)
{
	char *end = NULL;
	long idx;

	if (text && !strcmp(text, "cpu")) {
		*out = WEFT_CPU;
		return WEFT_OK;
	}
	if (text && !strcmp(text, "cuda")) {
		*out = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
		return WEFT_OK;
	}
	if (text && !strncmp(text, "cuda:", 5) && isdigit((unsigned char)text[5])) {
		idx = strtol(text + 5, &end, 10);
		if (*end == '\0' && idx <= 0x7fffffffL) {
			*out = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = (int32_t)idx };
			return WEFT_OK;
		}
	}
	return weft_error_set(WEFT_ERR_INVALID_ARG,
			      "unknown device '%s': use 'cpu', 'cuda' or 'cuda:N' (N a GPU number)",
			      text ? text : "(null)");
}

const char *weft_device_str(weft_device dev, char *buf, size_t len)
{
	if (dev.type == WEFT_DEVICE_CPU)
		snprintf(buf, len, "cpu");
	else if (dev.type == WEFT_DEVICE_CUDA)
		snprintf(buf, len, "cuda:%d", (int)dev.index);
	else
		snprintf(buf, len, "device-type-%d:%d", (int)dev.type, (int)dev.index);
	return buf;
}

/* ---- kernel registry ---- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static const weft_kernel_table *registry[WEFT_DEVICE_TYPE_COUNT];

weft_status weft_kernels_register(weft_device_type type, const weft_kernel_table *table)
{
	if ((unsigned)type >= WEFT_DEVICE_TYPE_COUNT || !table)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "kernels_register: device type %d or table is invalid",
				      (int)type);
	if (WEFT_ABI_VERSION_MAJOR(table->head.abi_version) != WEFT_ABI_MAJOR ||
	    table->head.struct_size < offsetof(weft_kernel_table, set_threads))
		return weft_error_set(WEFT_ERR_ABI,
				      "kernel table '%s' was built for ABI %u.%u (%u bytes); "
				      "this weft is ABI %d.%d: rebuild the kernels against it",
				      table->head.name ? table->head.name : "?",
				      WEFT_ABI_VERSION_MAJOR(table->head.abi_version),
				      WEFT_ABI_VERSION_MINOR(table->head.abi_version),
				      table->head.struct_size, WEFT_ABI_MAJOR, WEFT_ABI_MINOR);
	pthread_mutex_lock(&registry_lock);
	registry[type] = table;
	pthread_mutex_unlock(&registry_lock);
	return WEFT_OK;
}

/* Set by the layer above (core/plugin/kernels.c) when it is linked in:
 * core/tensor finds no files itself (tensor/kernel_loader.h). */
static weft_kernels_loader_fn kernels_loader;

void weft_kernels_set_loader(weft_kernels_loader_fn fn)
{
	pthread_mutex_lock(&registry_lock);
	kernels_loader = fn;
	pthread_mutex_unlock(&registry_lock);
}

const weft_kernel_table *weft_kernels_registered(weft_device_type type)
{
	const weft_kernel_table *t = NULL;

	if ((unsigned)type >= WEFT_DEVICE_TYPE_COUNT)
		return NULL;
	pthread_mutex_lock(&registry_lock);
	t = registry[type];
	pthread_mutex_unlock(&registry_lock);
	return t;
}

weft_status weft_kernels_get(weft_device dev, const weft_kernel_table **out)
{
	const weft_kernel_table *t;
	char why[1024] = "";
	char name[32];
	weft_status st = WEFT_OK;

	*out = NULL;
	if ((unsigned)dev.type >= WEFT_DEVICE_TYPE_COUNT)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "no kernels for %s: unknown device type",
				      weft_device_str(dev, name, sizeof(name)));
	pthread_mutex_lock(&registry_lock);
	t = registry[dev.type];
	if (!t && dev.type == WEFT_DEVICE_CPU)
		t = registry[dev.type] = weft_kernels_cpu_table();
	if (!t && dev.type != WEFT_DEVICE_CPU) {
		if (kernels_loader)
			t = kernels_loader(dev.type, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "this program cannot load kernel libraries (it "
				 "links core/tensor without core/plugin; link libweft)");
		registry[dev.type] = t;
	}
	pthread_mutex_unlock(&registry_lock);
	if (!t)
		st = weft_error_set(WEFT_ERR_UNSUPPORTED, "no kernels for device %s: %s; use "
				    "accelerator: cpu, or a build with CUDA",
				    weft_device_str(dev, name, sizeof(name)), why);
	*out = t;
	return st;
}

weft_status weft_device_alloc(weft_device dev, weft_mem_category cat, size_t bytes, void **out)
{
	const weft_kernel_table *k;
	weft_status st;

	*out = NULL;
	st = weft_kernels_get(dev, &k);
	if (st)
		return st;
	return k->mem_alloc(dev.index, cat, bytes, out);
}

void weft_device_free(weft_device dev, weft_mem_category cat, void *ptr, size_t bytes)
{
	const weft_kernel_table *k;

	if (!ptr || weft_kernels_get(dev, &k) != WEFT_OK)
		return;
	k->mem_free(dev.index, cat, ptr, bytes);
}

/* ---- CPU threads ---- */

static int64_t positive_env(const char *name)
{
	const char *v = getenv(name);
	char *end = NULL;
	long long n;

	if (!v || !*v)
		return 0;
	n = strtoll(v, &end, 10);
	return (*end == '\0' && n > 0) ? (int64_t)n : 0;
}

int64_t weft_cpu_threads_resolve(int64_t configured, int64_t local_ranks)
{
	static const char *const vars[] = { "WEFT_NUM_THREADS", "OPENBLAS_NUM_THREADS",
					    "OMP_NUM_THREADS" };
	long cores;
	int64_t n;

	if (configured > 0)
		return configured;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		n = positive_env(vars[i]);
		if (n > 0)
			return n;
	}
	cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (cores < 1)
		cores = 1;
	if (local_ranks < 1)
		local_ranks = 1;
	n = (int64_t)cores / local_ranks;
	return n < 1 ? 1 : n;
}

void weft_cpu_set_threads(int64_t n)
{
	weft_kernels_cpu_set_threads(n < 1 ? 1 : n);
}

int64_t weft_cpu_get_threads(void)
{
	return weft_kernels_cpu_get_threads();
}

void weft_cpu_parallel_for(int64_t n, int64_t grain,
			   void (*fn)(void *arg, int64_t begin, int64_t end), void *arg)
{
	weft_kernels_cpu_parallel_for(n, grain, fn, arg);
}
