/* 16-mixed's overflow test where the gradients live: host memory on the
 * CPU; device memory on CUDA, through the CUDA kernel library's fused
 * unscale_check (weft/cuda_extras.h, found by tensor/cuda_extras.h) with
 * factor 1, so only the one flag crosses to the host. */
#include <stdint.h>

#include "tensor/cuda_extras.h"
#include "train/precision.h"
#include "weft/autograd.h"

/* The extras with an unscale_check, or NULL with the last error set. */
static const weft_cuda_extras *cuda_extras(const weft_kernel_table *k)
{
	const weft_cuda_extras *ex = NULL;
	const char *file = NULL;

	if (weft_cuda_extras_find(&ex, &file) != WEFT_OK) {
		weft_error_wrap(WEFT_ERR_UNSUPPORTED, "16-mixed on %s", k->head.name);
		return NULL;
	}
	if (!WEFT_HAS_MEMBER(ex, weft_cuda_extras, unscale_check) || !ex->unscale_check) {
		weft_error_set(WEFT_ERR_UNSUPPORTED, "16-mixed on %s: %s has no %s with an "
			       "unscale_check; rebuild the CUDA kernels with this weft",
			       k->head.name, file, WEFT_CUDA_EXTRAS_SYMBOL);
		return NULL;
	}
	return ex;
}

weft_status weft_grads_nonfinite_on(weft_ctx *ctx, const float *const *arrays, const int64_t *lens,
				    size_t n, int *found)
{
	const weft_kernel_table *k = weft_ctx_kernels(ctx);
	void *kctx = weft_ctx_kctx(ctx);
	const weft_cuda_extras *ex;
	float *flag = NULL, host = 0.0f;
	weft_status st;

	*found = 0;
	if (weft_ctx_device(ctx).type == WEFT_DEVICE_CPU) {
		*found = weft_grads_nonfinite(arrays, lens, n);
		return WEFT_OK;
	}
	ex = cuda_extras(k);
	if (!ex)
		return weft_error_last_status();
	st = weft_arena_alloc(weft_ctx_arena(ctx), sizeof(float), 0, (void **)&flag);
	if (!st)
		st = k->zero(kctx, flag, sizeof(float));
	/* factor 1: the gradients are rewritten unchanged (x * 1 is exact) */
	for (size_t i = 0; !st && i < n; i++)
		if (lens[i] > 0)
			st = ex->unscale_check(kctx, WEFT_F32, lens[i], (void *)(uintptr_t)arrays[i],
					       1.0f, flag);
	if (!st)
		st = k->copy(kctx, &host, flag, sizeof(float), WEFT_COPY_DEVICE_TO_HOST);
	if (st)
		return weft_error_wrap(st, "16-mixed: checking %zu gradient arrays for overflow", n);
	*found = host != 0.0f;
	return WEFT_OK;
}
