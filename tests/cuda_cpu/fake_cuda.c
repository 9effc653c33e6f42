/* The fake CUDA staging copies (fake_cuda.h): the extras table's
 * host_alloc, host_free and copy_sync over plain host memory. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "weft/cuda_extras.h"
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

/* ---- the kernel table's context and memory members ---- */

static int fake_kctx_tag; /* the address of this is every fake context */

static void note_bad(void)
{
	pthread_mutex_lock(&mu);
	stats.bad_calls++;
	pthread_mutex_unlock(&mu);
}

static void *untag(const void *p)
{
	return (void *)((uintptr_t)p & ~TAG);
}

static weft_status fake_ctx_create(int32_t index, void **kctx)
{
	(void)index;
	*kctx = &fake_kctx_tag;
	return WEFT_OK;
}

static void fake_ctx_destroy(void *kctx)
{
	if (kctx && kctx != &fake_kctx_tag)
		note_bad();
}

/* device bytes on the host's device counters (ABI 1.5), as the real
 * library counts them */
static void account_device(weft_mem_category cat, int64_t delta)
{
	if (WEFT_HAS_MEMBER(host, weft_host, mem_account_device) && host->mem_account_device)
		host->mem_account_device(cat, delta);
	else
		host->mem_account(cat, delta);
}

static weft_status fake_mem_alloc(int32_t index, weft_mem_category cat, size_t bytes, void **out)
{
	char *p = calloc(1, bytes ? bytes : 1);

	(void)index;
	if (!p)
		return host->error_set(WEFT_ERR_NOMEM, "fake cuda: no room for %zu device bytes",
				       bytes);
	account_device(cat, (int64_t)bytes);
	pthread_mutex_lock(&mu);
	stats.dev_live++;
	pthread_mutex_unlock(&mu);
	*out = (void *)((uintptr_t)p | TAG);
	return WEFT_OK;
}

static void fake_mem_free(int32_t index, weft_mem_category cat, void *ptr, size_t bytes)
{
	(void)index;
	if (!ptr)
		return;
	if (!is_dev(ptr)) {
		note_bad();
		return;
	}
	account_device(cat, -(int64_t)bytes);
	pthread_mutex_lock(&mu);
	stats.dev_live--;
	pthread_mutex_unlock(&mu);
	free(untag(ptr));
}

static weft_status fake_copy(void *kctx, void *dst, const void *src, size_t bytes,
			     weft_copy_kind kind)
{
	int ok = kind == WEFT_COPY_HOST_TO_DEVICE ? is_dev(dst) && !is_dev(src) :
		 kind == WEFT_COPY_DEVICE_TO_HOST ? !is_dev(dst) && is_dev(src) :
		 is_dev(dst) && is_dev(src);

	pthread_mutex_lock(&mu);
	stats.table_copies++;
	if (!ok || (kctx && kctx != &fake_kctx_tag))
		stats.bad_calls++;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return host->error_set(WEFT_ERR_INVALID_ARG, "fake cuda: table copy of %zu bytes "
				       "with the wrong sides", bytes);
	if (bytes)
		memcpy(untag(dst), untag(src), bytes);
	return WEFT_OK;
}

static weft_status fake_zero(void *kctx, void *dst, size_t bytes)
{
	if (!is_dev(dst) || (kctx && kctx != &fake_kctx_tag)) {
		note_bad();
		return host->error_set(WEFT_ERR_INVALID_ARG, "fake cuda: zero of host memory");
	}
	memset(untag(dst), 0, bytes);
	return WEFT_OK;
}

static weft_status fake_fill(void *kctx, weft_dtype dt, int64_t n, float value, void *out)
{
	float *x = untag(out);

	if (!is_dev(out) || dt != WEFT_F32 || (kctx && kctx != &fake_kctx_tag)) {
		note_bad();
		return host->error_set(WEFT_ERR_INVALID_ARG, "fake cuda: fill of host memory or "
				       "not f32");
	}
	for (int64_t i = 0; i < n; i++)
		x[i] = value;
	return WEFT_OK;
}

static weft_status fake_synchronize(void *kctx)
{
	(void)kctx;
	return WEFT_OK;
}

static const weft_kernel_table fake_table = {
	.head = WEFT_PLUGIN_HEAD(weft_kernel_table, "cuda"),
	.float_dtypes = WEFT_DTYPE_BIT(WEFT_F32),
	.ctx_create = fake_ctx_create,
	.ctx_destroy = fake_ctx_destroy,
	.mem_alloc = fake_mem_alloc,
	.mem_free = fake_mem_free,
	.copy = fake_copy,
	.zero = fake_zero,
	.synchronize = fake_synchronize,
	.fill = fake_fill,
};

/* ---- the optimizer extras, on the host behind the fake addresses ---- */

/* kernels/cuda/cuda_optim.cu's k_adamw, operation by operation (this file
 * builds with C11's default -ffp-contract=off: nothing is fused). */
static weft_status fake_adamw_step(void *kctx, const weft_cuda_adamw_coef *coef, int64_t n,
				   float *param, weft_dtype grad_dt, const void *grad,
				   float *exp_avg, float *exp_avg_sq, weft_dtype copy_dt,
				   void *param_copy)
{
	const weft_cuda_adamw_coef c = *coef;
	float *p = untag(param), *m = untag(exp_avg), *v = untag(exp_avg_sq);
	const float *g = untag(grad);

	(void)copy_dt;
	if (kctx != &fake_kctx_tag || !is_dev(param) || !is_dev(grad) || !is_dev(exp_avg) ||
	    !is_dev(exp_avg_sq) || grad_dt != WEFT_F32 || param_copy) {
		note_bad();
		return host->error_set(WEFT_ERR_INVALID_ARG, "fake cuda: adamw_step needs the "
				       "fake context, device memory and f32 gradients");
	}
	for (int64_t i = 0; i < n; i++) {
		float gi = g[i] * c.grad_scale;
		float pi = p[i];
		float mi, vi, denom;

		if (c.decay_factor != 1.0f)
			pi = pi * c.decay_factor;
		mi = m[i] * c.beta1 + c.one_minus_beta1 * gi;
		vi = v[i] * c.beta2 + (c.one_minus_beta2 * gi) * gi;
		m[i] = mi;
		v[i] = vi;
		denom = sqrtf(vi) / c.bias_correction2_sqrt + c.eps;
		p[i] = pi + (c.neg_step_size * mi) / denom;
	}
	pthread_mutex_lock(&mu);
	stats.adamw_launches++;
	stats.adamw_elements += n;
	pthread_mutex_unlock(&mu);
	return WEFT_OK;
}

static weft_status fake_sum_squares(void *kctx, int64_t n, const float *x, double *out)
{
	const float *h = untag(x);
	double s = 0.0;

	*out = 0.0;
	if (kctx != &fake_kctx_tag || !is_dev(x) || is_dev(out)) {
		note_bad();
		return host->error_set(WEFT_ERR_INVALID_ARG, "fake cuda: sum_squares needs the "
				       "fake context and device memory");
	}
	for (int64_t i = 0; i < n; i++)
		s += (double)h[i] * (double)h[i];
	pthread_mutex_lock(&mu);
	stats.sumsq_calls++;
	pthread_mutex_unlock(&mu);
	*out = s;
	return WEFT_OK;
}

static weft_cuda_extras fake_extras = {
	.head = WEFT_PLUGIN_HEAD(weft_cuda_extras, "cuda-extras"),
	.adamw_step = fake_adamw_step,
	.unscale_check = NULL,
	.host_alloc = fake_host_alloc,
	.host_free = fake_host_free,
	.copy_sync = fake_copy_sync,
	.sum_squares = fake_sum_squares,
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

EXPORT const weft_kernel_table *fake_cuda_kernels(void)
{
	return &fake_table;
}

EXPORT void fake_cuda_offer_fused(int on)
{
	fake_extras.adamw_step = on ? fake_adamw_step : NULL;
	fake_extras.sum_squares = on ? fake_sum_squares : NULL;
}
