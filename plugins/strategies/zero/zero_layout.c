/* ZeRO, the bottom layer: the flat buffers and how they are cut. The
 * buffer pools, the unit layout (with the checkpoint ranges), pointing the
 * model's parameters and gradients into unit buffers, and the shard memory
 * (zero.h has the layout). The collectives over them are zero_comm.c's,
 * the strategy's members zero_step.c's; nothing here calls either. Memory
 * is allocated, copied and freed through zero_dev.c's services, so it may
 * live on any device. */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

weft_comm_buf zero_buf(const zero *z, float *data, int64_t count)
{
	return (weft_comm_buf){
		.data = data,
		.count = count,
		.dtype = WEFT_COMM_F32,
		.device = z->on_cpu ? WEFT_COMM_DEVICE_CPU : WEFT_COMM_DEVICE_CUDA,
		.device_index = z->env->device.index,
	};
}

/* ---- pools ------------------------------------------------------------ */

static zpool_class *pool_class(zpool *pool, int64_t elems)
{
	if (pool->uniform)
		return pool->n_cls && elems <= pool->cls[0].elems ? &pool->cls[0] : NULL;
	for (size_t i = 0; i < pool->n_cls; i++)
		if (pool->cls[i].elems == elems)
			return &pool->cls[i];
	return NULL;
}

weft_status zero_pool_init(zero *z, zpool *pool, weft_mem_category cat, int64_t uniform)
{
	memset(pool, 0, sizeof(*pool));
	pool->cat = cat;
	pool->uniform = uniform > 0;
	pool->cls = calloc(z->n_units + 1, sizeof(*pool->cls));
	if (!pool->cls)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory", z->label);
	for (size_t k = 0; k < z->n_units; k++) {
		int64_t elems = uniform > 0 ? uniform : z->world * z->units[k].chunk;
		zpool_class *c = pool_class(pool, elems);

		if (!c) {
			c = &pool->cls[pool->n_cls++];
			c->elems = elems;
		}
		c->n_total++; /* capacity: every unit of this size at once */
	}
	for (size_t i = 0; i < pool->n_cls; i++) {
		pool->cls[i].free_list = calloc(pool->cls[i].n_total, sizeof(float *));
		if (!pool->cls[i].free_list)
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory",
						 z->label);
		pool->cls[i].n_total = 0;
	}
	return WEFT_OK;
}

float *zero_pool_get(zero *z, zpool *pool, int64_t elems)
{
	zpool_class *c = pool_class(pool, elems);
	float *b;

	if (!c) {
		g_host->error_set(WEFT_ERR_INTERNAL, "strategy '%s': no pool class of %lld elements",
				  z->label, (long long)elems);
		return NULL;
	}
	if (c->n_free)
		return c->free_list[--c->n_free];
	b = zero_dalloc(z, pool->cat, c->elems, 0, "a unit buffer");
	if (!b)
		return NULL;
	c->n_total++;
	pool->bytes_total += c->elems * (int64_t)sizeof(float);
	return b;
}

weft_status zero_pool_reserve(zero *z, zpool *pool, int64_t count)
{
	zpool_class *c = pool->uniform ? pool_class(pool, 1) : NULL;

	/* the free list holds one buffer per unit */
	if (count > (int64_t)z->n_units)
		count = (int64_t)z->n_units;
	if (!c || count <= 0)
		return WEFT_OK;
	while (c->n_total < (size_t)count) {
		float *b = zero_dalloc(z, pool->cat, c->elems, 0, "a unit buffer");

		if (!b)
			return WEFT_ERR_NOMEM;
		c->free_list[c->n_free++] = b;
		c->n_total++;
		pool->bytes_total += c->elems * (int64_t)sizeof(float);
	}
	pool->reserved = (size_t)count;
	return WEFT_OK;
}

float *zero_pool_try(zpool *pool, int64_t elems, size_t keep)
{
	zpool_class *c = pool_class(pool, elems);

	return c && c->n_free > keep ? c->free_list[--c->n_free] : NULL;
}

void zero_pool_put(zpool *pool, float *buf, int64_t elems)
{
	zpool_class *c = buf ? pool_class(pool, elems) : NULL;

	if (c)
		c->free_list[c->n_free++] = buf;
}

void zero_pool_fini(zero *z, zpool *pool)
{
	for (size_t i = 0; i < pool->n_cls; i++) {
		for (size_t k = 0; k < pool->cls[i].n_free; k++)
			zero_dfree(z, pool->cat, pool->cls[i].free_list[k], pool->cls[i].elems);
		free(pool->cls[i].free_list);
	}
	free(pool->cls);
	memset(pool, 0, sizeof(*pool));
}

/* ---- units ------------------------------------------------------------ */

weft_status zero_build_units(zero *z)
{
	const weft_params *ps = z->env->params;
	int64_t expect = 0, packed = 0;
	zunit *u = NULL;

	z->n_params = g_host->params_count(ps);
	z->units = calloc(z->n_params + 1, sizeof(*z->units));
	z->unit_of = calloc(z->n_params + 1, sizeof(*z->unit_of));
	z->param_off = calloc(z->n_params + 1, sizeof(*z->param_off));
	z->ranges = calloc(2 * (z->n_params + 1), sizeof(*z->ranges));
	if (!z->units || !z->unit_of || !z->param_off || !z->ranges)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory for the "
					 "layout of %zu parameters", z->label, z->n_params);
	for (size_t i = 0; i < z->n_params; i++) {
		weft_tensor *p = g_host->params_at(ps, i);
		int64_t off = (const float *)p->data - z->full_params;
		int64_t n = g_host->tensor_numel(p);
		int split;

		if (p->dtype != WEFT_F32 || !p->grad)
			return g_host->error_set(WEFT_ERR_UNSUPPORTED,
						 "strategy '%s': parameter '%s' is not a float32 "
						 "parameter with a gradient; ZeRO shards float32 "
						 "master weights only", z->label, p->name);
		if (off != expect)
			return g_host->error_set(WEFT_ERR_INTERNAL,
						 "strategy '%s': parameter '%s' is not adjacent to "
						 "the previous one in the flat buffer", z->label,
						 p->name);
		z->param_off[i] = off;
		expect = off + n;
		split = zero_unit_starts(z, u ? g_host->params_at(ps, u->p_first)->name : NULL,
					 u ? u->hi - u->lo : 0, p->name, n);
		if (split) {
			u = &z->units[z->n_units++];
			u->lo = u->hi = off;
			u->p_first = i;
		}
		u->hi += n;
		u->p_count++;
		z->unit_of[i] = (int32_t)(u - z->units);
	}
	if (expect != z->numel)
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy '%s': parameters cover %lld "
					 "of %lld flat elements", z->label, (long long)expect,
					 (long long)z->numel);
	for (size_t k = 0; k < z->n_units; k++) {
		zunit *v = &z->units[k];

		zero_unit_split(z, v, z->rank);
		v->packed = packed;
		packed += v->mine_hi - v->mine_lo;
		if (v->chunk > z->max_chunk)
			z->max_chunk = v->chunk;
		if (z->stage == 3 && !v->persist) {
			z->n_gathered++;
			if (z->world * v->chunk > z->gather_elems)
				z->gather_elems = z->world * v->chunk;
		}
		if (v->mine_hi > v->mine_lo) {
			z->ranges[2 * z->n_ranges] = v->mine_lo;
			z->ranges[2 * z->n_ranges + 1] = v->mine_hi;
			z->n_ranges++;
		}
	}
	z->shard_numel = packed;
	return WEFT_OK;
}

void zero_point_params(zero *z, const zunit *u, float *buf)
{
	for (size_t i = 0; i < u->p_count; i++) {
		weft_tensor *p = g_host->params_at(z->env->params, u->p_first + i);

		p->data = buf ? (void *)(buf + (z->param_off[u->p_first + i] - u->lo)) : NULL;
		p->base = p->data;
		p->offset = 0;
	}
}

void zero_point_grads(zero *z, const zunit *u, float *buf)
{
	for (size_t i = 0; i < u->p_count; i++) {
		weft_tensor *g = g_host->params_at(z->env->params, u->p_first + i)->grad;

		g->data = buf ? (void *)(buf + (z->param_off[u->p_first + i] - u->lo)) : NULL;
		g->base = g->data;
		g->offset = 0;
	}
}

/* Frees one of the model's flat F32 buffers (the strategy holds shards
 * instead): the model allocated it on its device under `cat`, numel
 * floats, which the device allocator's accounting needs back. */
void zero_drop_flat(zero *z, weft_tensor *flat, weft_mem_category cat)
{
	if (!flat || !flat->base)
		return;
	zero_dfree(z, cat, flat->base, g_host->tensor_numel(flat));
	flat->base = flat->data = NULL;
}

float *zero_alloc_f32(zero *z, weft_mem_category cat, int64_t n, const char *what)
{
	return zero_dalloc(z, cat, n, 1, what);
}

/* Stage 3: copies this rank's pieces of the parameters out of `full`, in
 * one many-range copy. */
weft_status zero_take_shard(zero *z, const float *full)
{
	weft_copy_range *r = calloc(z->n_units + 1, sizeof(*r));
	size_t n = 0;
	weft_status st;

	if (!r)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory", z->label);
	for (size_t k = 0; k < z->n_units; k++) {
		const zunit *u = &z->units[k];

		if (u->mine_hi > u->mine_lo)
			r[n++] = (weft_copy_range){ .dst = u->packed, .src = u->mine_lo,
						    .count = u->mine_hi - u->mine_lo };
	}
	st = z->k->copy_ranges(z->kctx, sizeof(float), r, n, z->pshard, full);
	free(r);
	if (st)
		return g_host->error_wrap(st, "strategy '%s': taking this rank's parameter shard",
					  z->label);
	return WEFT_OK;
}

/* Stage 3: persistent units get their resident buffer, filled from `full`. */
weft_status zero_place_persistent(zero *z, const float *full)
{
	weft_status st;

	for (size_t k = 0; k < z->n_units; k++) {
		zunit *u = &z->units[k];

		if (!u->persist)
			continue;
		if (!u->pbuf) {
			u->pbuf = zero_alloc_f32(z, WEFT_MEM_PARAMS, z->world * u->chunk,
						 "a persistent parameter unit");
			if (!u->pbuf)
				return WEFT_ERR_NOMEM;
			z->persist_bytes += z->world * u->chunk * (int64_t)sizeof(float);
		}
		st = zero_dcopy(z, u->pbuf, full + u->lo, u->hi - u->lo);
		if (st)
			return st;
		u->ag = 2;
		zero_point_params(z, u, u->pbuf);
	}
	return WEFT_OK;
}
