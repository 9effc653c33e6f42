/* The fake CUDA staging copies (fake_cuda.h): the extras table's
 * host_alloc, host_free and copy_sync over plain host memory. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels_cuda.h"
#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))
#define TAG ((uintptr_t)1 << 55)
#define MAX_BLOCKS 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const weft_host *host;
static fake_cuda_stats stats;
static int fail_next;
static struct block {
	char *p;
	size_t n;
} blocks[MAX_BLOCKS];

static int is_dev(const void *p)
{
	return ((uintptr_t)p & TAG) != 0;
}

/* Whether [p, p + n) lies in a live pinned block. Holds mu. */
static int in_pinned(const void *p, size_t n)
{
	for (int i = 0; i < MAX_BLOCKS; i++)
		if (blocks[i].p && (const char *)p >= blocks[i].p &&
		    (const char *)p + n <= blocks[i].p + blocks[i].n)
			return 1;
	return 0;
}

static weft_status fake_host_alloc(weft_mem_category cat, size_t bytes, void **out)
{
	char *p = calloc(1, bytes ? bytes : 1);
	int slot = -1;

	(void)cat;
	*out = NULL;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_BLOCKS && slot < 0; i++)
		if (!blocks[i].p)
			slot = i;
	if (p && slot >= 0) {
		blocks[slot] = (struct block){ .p = p, .n = bytes ? bytes : 1 };
		stats.pinned_allocs++;
		stats.pinned_live++;
		stats.pinned_bytes += (int64_t)bytes;
		*out = p;
	}
	pthread_mutex_unlock(&mu);
	if (!*out) {
		free(p);
		return host->error_set(WEFT_ERR_NOMEM, "fake cuda: no room for %zu pinned bytes",
				       bytes);
	}
	return WEFT_OK;
}

static void fake_host_free(weft_mem_category cat, void *ptr, size_t bytes)
{
	(void)cat;
	if (!ptr)
		return;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_BLOCKS; i++) {
		if (blocks[i].p == ptr) {
			blocks[i].p = NULL;
			stats.pinned_frees++;
			stats.pinned_live--;
			stats.pinned_bytes -= (int64_t)bytes;
			free(ptr);
			break;
		}
	}
	pthread_mutex_unlock(&mu);
}

static weft_status fake_copy_sync(int32_t index, void *dst, const void *src, size_t bytes,
				  weft_copy_kind kind)
{
	int ok, fail;

	if (!bytes)
		return WEFT_OK;
	pthread_mutex_lock(&mu);
	fail = fail_next > 0;
	if (fail)
		fail_next--;
	stats.last_index = index;
	if (kind == WEFT_COPY_DEVICE_TO_HOST) {
		ok = is_dev(src) && !is_dev(dst) && in_pinned(dst, bytes);
		stats.copies_to_host++;
	} else if (kind == WEFT_COPY_HOST_TO_DEVICE) {
		ok = is_dev(dst) && !is_dev(src) && in_pinned(src, bytes);
		stats.copies_to_device++;
	} else {
		ok = 0;
	}
	if (!ok)
		stats.bad_copies++;
	pthread_mutex_unlock(&mu);
	if (fail)
		return host->error_set(WEFT_ERR_INTERNAL, "cuda:%d kernel copy_sync failed: "
				       "injected copy failure", (int)index);
	if (!ok)
		return host->error_set(WEFT_ERR_INVALID_ARG, "fake cuda: copy of %zu bytes with "
				       "the wrong sides or outside pinned memory", bytes);
	memcpy((void *)((uintptr_t)dst & ~TAG), (const void *)((uintptr_t)src & ~TAG), bytes);
	return WEFT_OK;
}

static const weft_cuda_extras fake_extras = {
	.head = WEFT_PLUGIN_HEAD(weft_cuda_extras, "cuda-extras"),
	.adamw_step = NULL,
	.unscale_check = NULL,
	.host_alloc = fake_host_alloc,
	.host_free = fake_host_free,
	.copy_sync = fake_copy_sync,
};

EXPORT const weft_cuda_extras *weft_kernels_cuda_extras(void)
{
	return &fake_extras;
}

EXPORT void fake_cuda_setup(const weft_host *h)
{
	host = h;
}

EXPORT void *fake_cuda_dev_alloc(size_t bytes)
{
	void *p = calloc(1, bytes ? bytes : 1);

	return p ? (void *)((uintptr_t)p | TAG) : NULL;
}

EXPORT void fake_cuda_dev_free(void *dev)
{
	if (dev)
		free((void *)((uintptr_t)dev & ~TAG));
}

EXPORT void *fake_cuda_dev_host(void *dev)
{
	return (void *)((uintptr_t)dev & ~TAG);
}

EXPORT void fake_cuda_get_stats(fake_cuda_stats *out)
{
	pthread_mutex_lock(&mu);
	*out = stats;
	pthread_mutex_unlock(&mu);
}

EXPORT void fake_cuda_fail_copies(int n)
{
	pthread_mutex_lock(&mu);
	fail_next = n;
	pthread_mutex_unlock(&mu);
}
