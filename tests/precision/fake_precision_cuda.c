/* A stand-in for weft_kernels_cuda.so's loss-scale check, so that the
 * trainer's CUDA overflow test (core/train/precision_device.c) runs, and
 * is tested, without a GPU: a kernel table named "cuda" whose "device
 * memory" is host memory (context and memory members only), and the
 * extras symbol with an unscale_check that computes on the host as the
 * CUDA kernel does (grad *= factor; the flag set to 1.0 when any value
 * before scaling is an inf or a NaN). Counts its calls. Built as a module
 * of its own, like the real library, so precision_device.c finds the
 * extras from the table's address exactly as it finds the real ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "weft/cuda_extras.h"

#define EXPORT __attribute__((visibility("default")))

static const weft_host *host;
static int64_t checks, elements;

static weft_status fake_alloc(int32_t index, weft_mem_category cat, size_t bytes, void **out)
{
	(void)index;
	(void)cat;
	*out = calloc(1, bytes ? bytes : 1);
	return *out ? WEFT_OK : host->error_set(WEFT_ERR_NOMEM, "fake cuda: %zu bytes", bytes);
}

static void fake_free(int32_t index, weft_mem_category cat, void *ptr, size_t bytes)
{
	(void)index;
	(void)cat;
	(void)bytes;
	free(ptr);
}

static weft_status fake_copy(void *kctx, void *dst, const void *src, size_t bytes,
			     weft_copy_kind kind)
{
	(void)kctx;
	(void)kind;
	memmove(dst, src, bytes);
	return WEFT_OK;
}

static weft_status fake_zero(void *kctx, void *dst, size_t bytes)
{
	(void)kctx;
	memset(dst, 0, bytes);
	return WEFT_OK;
}

static weft_status fake_sync(void *kctx)
{
	(void)kctx;
	return WEFT_OK;
}

static const weft_kernel_table fake_table = {
	.head = WEFT_PLUGIN_HEAD(weft_kernel_table, "cuda"),
	.float_dtypes = WEFT_DTYPE_BIT(WEFT_F32),
	.mem_alloc = fake_alloc,
	.mem_free = fake_free,
	.copy = fake_copy,
	.zero = fake_zero,
	.synchronize = fake_sync,
};

static weft_status fake_unscale_check(void *kctx, weft_dtype dt, int64_t n, void *grad,
				      float factor, float *found_nonfinite)
{
	float *g = grad;

	(void)kctx;
	if (dt != WEFT_F32)
		return host->error_set(WEFT_ERR_DTYPE, "fake unscale_check: F32 only");
	for (int64_t i = 0; i < n; i++) {
		if (!isfinite(g[i]))
			*found_nonfinite = 1.0f;
		g[i] *= factor;
	}
	checks++;
	elements += n;
	return WEFT_OK;
}

static weft_cuda_extras fake_extras = {
	.head = WEFT_PLUGIN_HEAD(weft_cuda_extras, "cuda-extras"),
	.unscale_check = fake_unscale_check,
};

EXPORT const weft_kernel_table *weft_kernels_entry(const weft_host *h)
{
	host = h;
	return &fake_table;
}

EXPORT const weft_cuda_extras *weft_kernels_cuda_extras(void)
{
	return &fake_extras;
}

/* on = 0: the extras lack unscale_check (a library built for an older weft) */
EXPORT void fake_precision_enable(int on)
{
	fake_extras.unscale_check = on ? fake_unscale_check : NULL;
}

/* unscale_check calls and the elements they read so far */
EXPORT void fake_precision_counts(int64_t *calls, int64_t *n)
{
	*calls = checks;
	*n = elements;
}
