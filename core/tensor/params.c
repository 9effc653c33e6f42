/* Parameter sets: one flat buffer per dtype, each parameter a named view
 * into it, and a flat gradient buffer that mirrors it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "weft/tensor.h"
#include "base/str_index.h"
#include "tensor/tensor_impl.h"

struct weft_params {
	weft_device dev;
	weft_tensor **items;
	size_t count, cap;
	/* the items by name: open addressing, each slot 0 (empty) or an
	 * item's index + 1, at most half full */
	size_t *slots;
	size_t n_slots;
	int finalized;
	int with_grads;
	int64_t numel[WEFT_DTYPE_COUNT];
	weft_tensor flat[WEFT_DTYPE_COUNT];
	weft_tensor flat_grad[WEFT_DTYPE_COUNT];
	weft_tensor copy;       /* the 16-bit copy of flat[F32]; base NULL: none */
};

weft_status weft_params_create(weft_device dev, weft_params **out)
{
	weft_params *ps;
	const weft_kernel_table *k;
	weft_status st;

	*out = NULL;
	st = weft_kernels_get(dev, &k);
	if (st)
		return st;
	ps = weft_mem_calloc(WEFT_MEM_OTHER, sizeof(*ps));
	if (!ps)
		return weft_error_wrap(WEFT_ERR_NOMEM, "creating a parameter set");
	ps->dev = dev;
	*out = ps;
	return WEFT_OK;
}

static void release_buffers(weft_params *ps)
{
	for (int dt = 0; dt < WEFT_DTYPE_COUNT; dt++) {
		if (ps->flat[dt].base)
			weft_device_free(ps->dev, WEFT_MEM_PARAMS, ps->flat[dt].base,
					 weft_tensor_nbytes(&ps->flat[dt]));
		if (ps->flat_grad[dt].base)
			weft_device_free(ps->dev, WEFT_MEM_GRADS, ps->flat_grad[dt].base,
					 weft_tensor_nbytes(&ps->flat_grad[dt]));
		ps->flat[dt].base = ps->flat[dt].data = NULL;
		ps->flat_grad[dt].base = ps->flat_grad[dt].data = NULL;
	}
	if (ps->copy.base)
		weft_device_free(ps->dev, WEFT_MEM_PARAMS, ps->copy.base,
				 weft_tensor_nbytes(&ps->copy));
	ps->copy.base = ps->copy.data = NULL;
}

void weft_params_free(weft_params *ps)
{
	if (!ps)
		return;
	release_buffers(ps);
	for (size_t i = 0; i < ps->count; i++)
		weft_mem_free(ps->items[i]); /* the struct holds its grad and name */
	weft_mem_free(ps->items);
	weft_mem_free(ps->slots);
	weft_mem_free(ps);
}

/* Room in the name index for one more item: grows it (rehashing every
 * item) when it would pass half full. */
static weft_status index_reserve(weft_params *ps)
{
	size_t want = ps->n_slots ? ps->n_slots : 128;
	size_t *slots;

	while (2 * (ps->count + 1) > want)
		want *= 2;
	if (want == ps->n_slots)
		return WEFT_OK;
	slots = weft_mem_calloc(WEFT_MEM_OTHER, want * sizeof(*slots));
	if (!slots)
		return WEFT_ERR_NOMEM;
	for (size_t i = 0; i < ps->count; i++)
		weft_str_index_put(slots, want, ps->items[i]->name, i);
	weft_mem_free(ps->slots);
	ps->slots = slots;
	ps->n_slots = want;
	return WEFT_OK;
}

weft_tensor *weft_params_find(const weft_params *ps, const char *name)
{
	size_t mask = ps->n_slots - 1;

	if (!name || !ps->n_slots)
		return NULL;
	for (size_t s = weft_str_hash(name) & mask; ps->slots[s]; s = (s + 1) & mask) {
		weft_tensor *t = ps->items[ps->slots[s] - 1];

		if (!strcmp(t->name, name))
			return t;
	}
	return NULL;
}

weft_status weft_params_add(weft_params *ps, const char *name, weft_dtype dt, int32_t ndim,
			    const int64_t *shape, weft_tensor **out)
{
	size_t namelen;
	weft_tensor *t;
	weft_status st;

	*out = NULL;
	if (!name || !*name)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "params_add: a parameter needs a name");
	if (ps->finalized)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "params_add: cannot add '%s': the "
				      "parameter set is already finalized", name);
	if (weft_params_find(ps, name))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "params_add: parameter '%s' is declared "
				      "twice; parameter names must be unique", name);
	st = tensor_check_shape(name, dt, ndim, shape);
	if (st)
		return st;
	if (index_reserve(ps))
		return weft_error_wrap(WEFT_ERR_NOMEM, "adding parameter '%s'", name);
	if (ps->count == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		weft_tensor **items = weft_mem_alloc(WEFT_MEM_OTHER, cap * sizeof(*items));

		if (!items)
			return weft_error_wrap(WEFT_ERR_NOMEM, "adding parameter '%s'", name);
		if (ps->count)
			memcpy(items, ps->items, ps->count * sizeof(*items));
		weft_mem_free(ps->items);
		ps->items = items;
		ps->cap = cap;
	}
	namelen = strlen(name) + 1;
	/* one block: the parameter, its gradient view, its name */
	t = weft_mem_calloc(WEFT_MEM_OTHER, 2 * sizeof(*t) + namelen);
	if (!t)
		return weft_error_wrap(WEFT_ERR_NOMEM, "adding parameter '%s'", name);
	weft_tensor_init(t, dt, ndim, shape, ps->dev, NULL);
	memcpy((char *)(t + 2), name, namelen);
	t->name = (const char *)(t + 2);
	t->flags = WEFT_TENSOR_PARAM;
	t->mem_category = WEFT_MEM_PARAMS;
	t->param_index = (int64_t)ps->count;
	t->offset = (size_t)ps->numel[dt] * weft_dtype_size(dt);
	ps->numel[dt] += weft_tensor_numel(t);
	weft_str_index_put(ps->slots, ps->n_slots, t->name, ps->count);
	ps->items[ps->count++] = t;
	*out = t;
	return WEFT_OK;
}

static weft_status alloc_flat(weft_params *ps, weft_tensor *flat, weft_dtype dt,
			      weft_mem_category cat)
{
	int64_t n = ps->numel[dt];
	void *mem = NULL;
	weft_status st;

	weft_tensor_init(flat, dt, 1, &n, ps->dev, NULL);
	st = weft_device_alloc(ps->dev, cat, weft_tensor_nbytes(flat), &mem);
	if (st)
		return weft_error_wrap(st, "allocating the flat %s buffer for %lld %s parameters",
				       weft_mem_category_name(cat), (long long)n, weft_dtype_name(dt));
	flat->data = flat->base = mem;
	flat->mem_category = (uint32_t)cat;
	flat->name = cat == WEFT_MEM_PARAMS ? "params" : "grads";
	return weft_tensor_zero(flat);
}

/* Host memory a new allocation can take without swapping: the kernel's
 * MemAvailable estimate; 0 when unknown. */
static double available_bytes(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	double kb = 0;
	long pages, page;

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
				break;
		fclose(f);
		if (kb > 0)
			return kb * 1024.0;
	}
	pages = sysconf(_SC_AVPHYS_PAGES);
	page = sysconf(_SC_PAGESIZE);
	return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

/* Refuses, before allocating, parameters (and gradients) that cannot fit
 * in the host's available memory. */
static weft_status check_fits(const weft_params *ps, int with_grads)
{
	double need = 0, numel = 0, avail;

	if (ps->dev.type != WEFT_DEVICE_CPU)
		return WEFT_OK;
	for (int dt = 0; dt < WEFT_DTYPE_COUNT; dt++) {
		numel += (double)ps->numel[dt];
		need += (double)ps->numel[dt] * (double)weft_dtype_size((weft_dtype)dt) *
			(with_grads ? 2 : 1);
	}
	avail = available_bytes();
	if (avail <= 0 || need <= avail)
		return WEFT_OK;
	return weft_error_set(WEFT_ERR_NOMEM, "the model's %.4g parameters need %.1f GiB%s "
			      "before any optimizer state or activations, but this machine has "
			      "%.1f GiB of memory available; use a smaller model (fewer or "
			      "narrower layers, a smaller vocabulary) or shard it across more "
			      "processes (strategy zero_3)", numel, need / (1 << 30),
			      with_grads ? " (weights and gradients)" : "", avail / (1 << 30));
}

weft_status weft_params_finalize(weft_params *ps, int with_grads)
{
	weft_status st;

	if (ps->finalized)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "params_finalize: already finalized");
	st = check_fits(ps, with_grads);
	if (st)
		return st;
	for (int dt = 0; dt < WEFT_DTYPE_COUNT; dt++) {
		if (!ps->numel[dt])
			continue;
		st = alloc_flat(ps, &ps->flat[dt], (weft_dtype)dt, WEFT_MEM_PARAMS);
		if (!st && with_grads)
			st = alloc_flat(ps, &ps->flat_grad[dt], (weft_dtype)dt, WEFT_MEM_GRADS);
		if (st)
			goto out_release;
	}
	for (size_t i = 0; i < ps->count; i++) {
		weft_tensor *t = ps->items[i], *g = t + 1;

		t->base = ps->flat[t->dtype].base;
		t->data = (char *)t->base + t->offset;
		if (!with_grads)
			continue;
		*g = *t;
		g->flags = 0;
		g->mem_category = WEFT_MEM_GRADS;
		g->param_index = -1;
		g->base = ps->flat_grad[t->dtype].base;
		g->data = (char *)g->base + g->offset;
		t->grad = g;
		t->flags |= WEFT_TENSOR_REQUIRES_GRAD;
	}
	ps->finalized = 1;
	ps->with_grads = with_grads;
	return WEFT_OK;

out_release:
	release_buffers(ps);
	return st;
}

size_t weft_params_count(const weft_params *ps)
{
	return ps->count;
}

weft_tensor *weft_params_at(const weft_params *ps, size_t i)
{
	return i < ps->count ? ps->items[i] : NULL;
}

void weft_params_flat(const weft_params *ps, weft_dtype dt, weft_tensor **flat,
		      weft_tensor **flat_grad)
{
	int have = (unsigned)dt < WEFT_DTYPE_COUNT && ps->flat[dt].base;
	int have_grad = have && ps->flat_grad[dt].base;

	if (flat)
		*flat = have ? (weft_tensor *)&ps->flat[dt] : NULL;
	if (flat_grad)
		*flat_grad = have_grad ? (weft_tensor *)&ps->flat_grad[dt] : NULL;
}

int64_t weft_params_numel(const weft_params *ps, weft_dtype dt)
{
	return (unsigned)dt < WEFT_DTYPE_COUNT ? ps->numel[dt] : 0;
}

weft_status weft_params_zero_grad(weft_params *ps)
{
	weft_status st;

	for (int dt = 0; dt < WEFT_DTYPE_COUNT; dt++) {
		if (!ps->flat_grad[dt].base)
			continue;
		st = weft_tensor_zero(&ps->flat_grad[dt]);
		if (st)
			return st;
	}
	return WEFT_OK;
}

/* ---- the 16-bit weight copy (since ABI 1.7) ---- */

weft_status weft_params_copy_enable(weft_params *ps, weft_dtype dt)
{
	const weft_tensor *flat = &ps->flat[WEFT_F32];
	int64_t n = ps->numel[WEFT_F32];
	void *mem = NULL;
	weft_status st;

	if (dt != WEFT_BF16 && dt != WEFT_F16)
		return weft_error_set(WEFT_ERR_DTYPE, "params_copy_enable: a %s copy of the "
				      "weights; the copy is BF16 or F16 (the autocast dtype)",
				      weft_dtype_name(dt));
	if (!ps->finalized)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "params_copy_enable: the parameter set "
				      "has not been finalized; call weft_params_finalize first");
	if (!flat->base)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "params_copy_enable: the parameter set "
				      "has no F32 parameters; the copy is made from F32 master "
				      "weights");
	if (ps->copy.base) {
		if (ps->copy.dtype == (int32_t)dt)
			return WEFT_OK;
		return weft_error_set(WEFT_ERR_DTYPE, "params_copy_enable: the set already keeps "
				      "a %s copy, not %s; one copy per set",
				      weft_dtype_name((weft_dtype)ps->copy.dtype), weft_dtype_name(dt));
	}
	weft_tensor_init(&ps->copy, dt, 1, &n, ps->dev, NULL);
	st = weft_device_alloc(ps->dev, WEFT_MEM_PARAMS, weft_tensor_nbytes(&ps->copy), &mem);
	if (st)
		return weft_error_wrap(st, "allocating the %s copy of %lld F32 parameters (%zu "
				       "bytes); set trainer.weight_copy: false to round the weights "
				       "in each forward instead", weft_dtype_name(dt), (long long)n,
				       weft_tensor_nbytes(&ps->copy));
	ps->copy.data = ps->copy.base = mem;
	ps->copy.mem_category = WEFT_MEM_PARAMS;
	ps->copy.name = "params (16-bit copy)";
	return WEFT_OK;
}

weft_tensor *weft_params_copy(const weft_params *ps)
{
	return ps && ps->copy.base ? (weft_tensor *)&ps->copy : NULL;
}
