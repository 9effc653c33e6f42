/* ZeRO: options, the unit layout, shard memory, checkpoint ranges and
 * gather_params (zero.h has the layout). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero.h"

weft_comm_buf zero_buf(const zero *z, float *data, int64_t count)
{
	return (weft_comm_buf){
		.data = data,
		.count = count,
		.dtype = WEFT_COMM_F32,
		.device = WEFT_COMM_DEVICE_CPU,
		.device_index = z->env->device.index,
	};
}

/* ---- options ------------------------------------------------------------ */

/* A key of the strategy mapping or of its zero_optimization block (not
 * both): its node, or NULL. */
static weft_status find_key(const weft_cfg *section, const weft_cfg *zo, const char *key,
			    const weft_cfg **map, const weft_cfg **node)
{
	const weft_cfg *a = section ? g_host->cfg_get(section, key) : NULL;
	const weft_cfg *b = zo ? g_host->cfg_get(zo, key) : NULL;
	char where[160];

	*map = NULL;
	*node = NULL;
	if (a && b)
		return g_host->cfg_error(b, "'%s' is also set at %s; give it once, either in the "
					 "strategy mapping or in zero_optimization", key,
					 g_host->cfg_where(a, where, sizeof(where)));
	*map = a ? section : b ? zo : NULL;
	*node = a ? a : b;
	return WEFT_OK;
}

static weft_status opt_bool(const weft_cfg *section, const weft_cfg *zo, const char *key, int def,
			    int *out)
{
	const weft_cfg *map, *node;
	weft_status st = find_key(section, zo, key, &map, &node);

	if (st)
		return st;
	*out = def;
	return map ? g_host->cfg_bool(map, key, def, out) : WEFT_OK;
}

/* A count of elements; DeepSpeed configs write them as 5e8 or 500000000. */
static weft_status opt_count(const weft_cfg *section, const weft_cfg *zo, const char *key,
			     int64_t def, int64_t min, int64_t *out)
{
	const weft_cfg *map, *node;
	double v;
	weft_status st = find_key(section, zo, key, &map, &node);

	*out = def;
	if (st || !map)
		return st;
	st = g_host->cfg_float(map, key, (double)def, &v);
	if (st)
		return st;
	if (!(v >= (double)min && v <= 9.0e18) || v != (double)(int64_t)v)
		return g_host->cfg_error(node, "'%s' must be a whole number of elements >= %lld "
					 "(DeepSpeed counts elements, not bytes), got %g", key,
					 (long long)min, v);
	*out = (int64_t)v;
	return WEFT_OK;
}

/* DeepSpeed keys that change nothing here; accepted so that a
 * zero_optimization block copied from a DeepSpeed config works as it is. */
static const char *const inert_keys[] = {
	"reduce_scatter", "round_robin_gradients", "load_from_fp32_weights", "elastic_checkpoint",
	"ignore_unused_parameters", "stage3_gather_16bit_weights_on_model_save",
	"stage3_gather_fp16_weights_on_model_save", "sub_group_size", "stage3_max_reuse_distance",
	"legacy_stage1", "allgather_partitions", NULL
};

static weft_status check_offload(const weft_cfg *map, const char *key)
{
	const weft_cfg *n = map ? g_host->cfg_get(map, key) : NULL;
	const weft_cfg *dev;
	const char *d = NULL;

	if (!n)
		return WEFT_OK;
	dev = g_host->cfg_kind_of(n) == WEFT_CFG_MAP ? g_host->cfg_get(n, "device") : NULL;
	if (dev && !g_host->cfg_as_str(dev, &d) && !strcmp(d, "none")) {
		g_host->cfg_mark_used(n);
		for (size_t i = 0; i < g_host->cfg_size(n); i++)
			g_host->cfg_mark_used(g_host->cfg_at(n, i));
		return WEFT_OK;
	}
	return g_host->cfg_error(n, "%s is not supported by weft's zero (state stays in this "
				 "device's memory); remove it or set {device: none}", key);
}

static weft_status read_options(zero *z, const weft_cfg *section, int fixed_stage)
{
	const weft_cfg *zo = section ? g_host->cfg_get(section, "zero_optimization") : NULL;
	const weft_cfg *map, *node;
	int64_t stage = fixed_stage ? fixed_stage : 2;
	weft_status st;

	if (section)
		g_host->cfg_get(section, "name");
	if (zo && g_host->cfg_kind_of(zo) != WEFT_CFG_MAP)
		return g_host->cfg_error(zo, "zero_optimization must be a mapping as DeepSpeed "
					 "writes it: {stage: 2, overlap_comm: true, ...}");
	st = find_key(section, zo, "stage", &map, &node);
	if (!st && map)
		st = g_host->cfg_int(map, "stage", stage, &stage);
	if (st)
		return st;
	if (node && (stage < 1 || stage > 3))
		return g_host->cfg_error(node, "ZeRO stage must be 1, 2 or 3, got %lld (0 is plain "
					 "data parallelism: use strategy: ddp)", (long long)stage);
	if (node && fixed_stage && stage != fixed_stage)
		return g_host->cfg_error(node, "stage %lld contradicts the strategy name zero_%d; "
					 "use name: zero with stage: %lld, or drop stage",
					 (long long)stage, fixed_stage, (long long)stage);
	z->stage = (int)stage;
	st = opt_bool(section, zo, "overlap_comm", 1, &z->overlap_comm);
	if (!st)
		st = opt_bool(section, zo, "contiguous_gradients", 1, &z->contiguous_gradients);
	if (!st)
		st = opt_count(section, zo, "reduce_bucket_size", 500000000, 1,
			       &z->reduce_bucket_size);
	if (!st)
		st = opt_count(section, zo, "allgather_bucket_size", 500000000, 1,
			       &z->allgather_bucket_size);
	if (!st)
		st = opt_count(section, zo, "stage3_prefetch_bucket_size", 50000000, 0,
			       &z->prefetch_bucket_size);
	if (!st)
		st = opt_count(section, zo, "stage3_param_persistence_threshold", 100000, 0,
			       &z->persistence_threshold);
	if (!st)
		st = opt_count(section, zo, "stage3_max_live_parameters", 1000000000, 0,
			       &z->max_live_parameters);
	if (!st)
		st = check_offload(zo, "offload_optimizer");
	if (!st)
		st = check_offload(zo, "offload_param");
	for (size_t i = 0; !st && inert_keys[i]; i++) {
		const weft_cfg *n = zo ? g_host->cfg_get(zo, inert_keys[i]) : NULL;

		if (n)
			g_host->cfg_mark_used(n);
	}
	return st;
}

weft_status zero_create_stage(const weft_cfg *section, const weft_strategy_env *env, int stage,
			      void **out)
{
	static const char *const labels[] = { "zero", "zero_1", "zero_2", "zero_3" };
	zero *z = calloc(1, sizeof(*z));
	weft_status st;

	if (!z)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'zero': out of memory");
	st = read_options(z, section, stage);
	if (st)
		goto out_free;
	z->label = labels[z->stage];
	if (env->device.type != WEFT_DEVICE_CPU) {
		st = g_host->error_set(WEFT_ERR_UNSUPPORTED,
				       "strategy '%s' packs shards in host memory and runs on "
				       "accelerator: cpu only; on GPUs use strategy: ddp",
				       z->label);
		goto out_free;
	}
	if (env->world_size > 1 && (!env->comm_ops || !env->world)) {
		st = g_host->error_set(WEFT_ERR_UNSUPPORTED,
				       "strategy '%s': world size is %d but the trainer gave no "
				       "communicator; set trainer.comm (gloo on CPUs)",
				       z->label, env->world_size);
		goto out_free;
	}
	z->env = env;
	z->ops = env->comm_ops;
	z->comm = env->world;
	z->rank = env->rank;
	z->world = env->world_size;
	*out = z;
	return WEFT_OK;

out_free:
	free(z);
	return st;
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

weft_status zero_pool_init(zero *z, zpool *pool, weft_mem_category cat, int uniform)
{
	memset(pool, 0, sizeof(*pool));
	pool->cat = cat;
	pool->uniform = uniform;
	pool->cls = calloc(z->n_units + 1, sizeof(*pool->cls));
	if (!pool->cls)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory", z->label);
	for (size_t k = 0; k < z->n_units; k++) {
		int64_t elems = z->world * (uniform ? z->max_chunk : z->units[k].chunk);
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
	b = g_host->mem_alloc(pool->cat, (size_t)c->elems * sizeof(float));
	if (!b)
		return NULL;
	c->n_total++;
	pool->bytes_total += c->elems * (int64_t)sizeof(float);
	return b;
}

void zero_pool_put(zpool *pool, float *buf, int64_t elems)
{
	zpool_class *c = buf ? pool_class(pool, elems) : NULL;

	if (c)
		c->free_list[c->n_free++] = buf;
}

static void pool_fini(zpool *pool)
{
	for (size_t i = 0; i < pool->n_cls; i++) {
		for (size_t k = 0; k < pool->cls[i].n_free; k++)
			g_host->mem_free(pool->cls[i].free_list[k]);
		free(pool->cls[i].free_list);
	}
	free(pool->cls);
	memset(pool, 0, sizeof(*pool));
}

/* ---- units ------------------------------------------------------------ */

static weft_status build_units(zero *z)
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
 * instead). CPU only: the model's host buffers come from the accounted
 * allocator, which host->mem_free returns to. */
static void drop_flat(weft_tensor *flat)
{
	if (!flat || !flat->base)
		return;
	g_host->mem_free(flat->base);
	flat->base = flat->data = NULL;
}

static float *alloc_f32(zero *z, weft_mem_category cat, int64_t n, const char *what)
{
	float *b = g_host->mem_calloc(cat, (size_t)(n > 0 ? n : 1) * sizeof(float));

	if (!b)
		g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s' (rank %d): out of memory for %s "
				  "(%lld bytes)", z->label, z->rank, what, (long long)n * 4);
	return b;
}

/* Stage 3: copies this rank's pieces of the parameters out of `full`. */
static void take_shard(zero *z, const float *full)
{
	for (size_t k = 0; k < z->n_units; k++) {
		const zunit *u = &z->units[k];

		memcpy(z->pshard + u->packed, full + u->mine_lo,
		       (size_t)(u->mine_hi - u->mine_lo) * sizeof(float));
	}
}

/* Stage 3: persistent units get their resident buffer, filled from `full`. */
static weft_status place_persistent(zero *z, const float *full)
{
	for (size_t k = 0; k < z->n_units; k++) {
		zunit *u = &z->units[k];

		if (!u->persist)
			continue;
		if (!u->pbuf) {
			u->pbuf = alloc_f32(z, WEFT_MEM_PARAMS, z->world * u->chunk,
					    "a persistent parameter unit");
			if (!u->pbuf)
				return WEFT_ERR_NOMEM;
			z->persist_bytes += z->world * u->chunk * (int64_t)sizeof(float);
		}
		memcpy(u->pbuf, full + u->lo, (size_t)(u->hi - u->lo) * sizeof(float));
		u->ag = 2;
		zero_point_params(z, u, u->pbuf);
	}
	return WEFT_OK;
}

weft_status zero_setup(void *p)
{
	zero *z = p;
	const weft_strategy_env *env = z->env;
	weft_tensor *flat = NULL, *flat_grad = NULL;
	weft_status st;

	g_host->params_flat(env->params, WEFT_F32, &flat, &flat_grad);
	if (!flat || !flat_grad)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy '%s': the model has no float32 parameters with "
					 "gradients; only float32 master weights are supported",
					 z->label);
	z->flat = flat;
	z->full_params = flat->data;
	z->full_grads = flat_grad->data;
	z->numel = g_host->tensor_numel(flat);
	z->n_slots = env->optim_ops->state_slots(env->optim);
	if (z->n_slots > ZERO_MAX_SLOTS)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy '%s': optimizer '%s' wants %zu state slots per "
					 "element; at most %d are supported", z->label,
					 env->optim_ops->head.name, z->n_slots, ZERO_MAX_SLOTS);
	st = build_units(z);
	if (st)
		return st;
	if (z->world > 1) {
		weft_comm_buf all = zero_buf(z, z->full_params, z->numel);

		st = z->ops->broadcast(z->comm, &all, 0, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': broadcasting rank 0's %lld "
						  "parameters at setup", z->label,
						  (long long)z->numel);
	}
	if (z->n_slots) {
		z->slot_mem = alloc_f32(z, WEFT_MEM_OPTIM, (int64_t)z->n_slots * z->shard_numel,
					"the optimizer state shard");
		if (!z->slot_mem)
			return WEFT_ERR_NOMEM;
		for (size_t k = 0; k < z->n_slots; k++)
			z->slots[k] = z->slot_mem + k * (size_t)z->shard_numel;
	}
	st = zero_pool_init(z, &z->ppool, WEFT_MEM_PARAMS, 0);
	if (!st)
		st = zero_pool_init(z, &z->gpool, WEFT_MEM_GRADS, 1);
	if (st)
		return st;
	if (z->stage <= 2) {
		z->staging = alloc_f32(z, WEFT_MEM_COMM, z->world * z->max_chunk,
				       "the communication staging buffer");
		if (!z->staging)
			return WEFT_ERR_NOMEM;
	}
	if (z->stage >= 2) {
		z->gshard = alloc_f32(z, WEFT_MEM_GRADS, z->shard_numel, "the gradient shard");
		if (!z->gshard)
			return WEFT_ERR_NOMEM;
		for (size_t k = 0; k < z->n_units; k++)
			zero_point_grads(z, &z->units[k], NULL);
		drop_flat(flat_grad);
		z->full_grads = NULL;
	}
	if (z->stage == 3) {
		z->pshard = alloc_f32(z, WEFT_MEM_PARAMS, z->shard_numel, "the parameter shard");
		if (!z->pshard)
			return WEFT_ERR_NOMEM;
		take_shard(z, z->full_params);
		for (size_t k = 0; k < z->n_units; k++)
			zero_point_params(z, &z->units[k], NULL);
		st = place_persistent(z, z->full_params);
		if (st)
			return st;
		drop_flat(flat);
		z->full_params = NULL;
	}
	st = zero_hooks_add(z);
	if (st)
		return st;
	if (g_host->log_enabled(WEFT_LOG_DEBUG))
		g_host->log(WEFT_LOG_DEBUG, "%s: %zu units over %lld parameters, %lld in this "
			    "rank's shard", z->label, z->n_units, (long long)z->numel,
			    (long long)z->shard_numel);
	return WEFT_OK;
}

weft_status zero_state(void *p, weft_strategy_state *out)
{
	zero *z = p;

	out->n_slots = (uint32_t)z->n_slots;
	out->slots = z->slots;
	out->begin = z->n_ranges ? z->ranges[0] : 0;
	out->end = z->n_ranges ? z->ranges[2 * z->n_ranges - 1] : 0;
	if (out->struct_size >= offsetof(weft_strategy_state, ranges) + sizeof(out->ranges)) {
		out->n_ranges = (uint32_t)z->n_ranges;
		out->ranges = z->ranges;
		return WEFT_OK;
	}
	if (z->n_ranges > 1)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy '%s': this rank's optimizer state is %zu ranges "
					 "but the caller's weft_strategy_state (%u bytes) predates "
					 "ranges; rebuild the trainer against this SDK", z->label,
					 z->n_ranges, out->struct_size);
	return WEFT_OK;
}

/* gather = 1: a whole flat buffer the model owns (every rank); gather = 0:
 * shards from it, then it is freed. Stages 1 and 2 keep whole parameters
 * all the time: nothing to do. */
weft_status zero_gather_params(void *p, int gather)
{
	zero *z = p;
	weft_tensor *flat = z->flat;
	weft_status st;

	if (z->stage < 3)
		return WEFT_OK;
	if (gather == z->gathered_whole)
		return g_host->error_set(WEFT_ERR_INVALID_ARG,
					 "strategy '%s': gather_params(%d) called twice; calls "
					 "must alternate 1, 0", z->label, gather);
	st = zero_drain(z);
	if (st)
		return st;
	zero_release_all(z);
	if (gather) {
		float *full = alloc_f32(z, WEFT_MEM_PARAMS, z->numel, "the gathered parameters");

		if (!full)
			return WEFT_ERR_NOMEM;
		flat->base = flat->data = full;
		z->full_params = full;
		for (size_t k = 0; k < z->n_units; k++) {
			zunit *u = &z->units[k];

			if (!u->persist) {
				st = zero_gather_unit(z, k);
				if (st)
					return st;
			}
			memcpy(full + u->lo, u->pbuf, (size_t)(u->hi - u->lo) * sizeof(float));
			for (size_t i = 0; i < u->p_count; i++) {
				weft_tensor *t = g_host->params_at(z->env->params, u->p_first + i);

				t->data = full + z->param_off[u->p_first + i];
				t->base = full;
				t->offset = (size_t)z->param_off[u->p_first + i] * sizeof(float);
			}
			if (!u->persist) {
				zero_pool_put(&z->ppool, u->pbuf, z->world * u->chunk);
				z->live_elems -= u->hi - u->lo;
				u->pbuf = NULL;
				u->ag = 0;
			}
		}
		z->gathered_whole = 1;
		return WEFT_OK;
	}
	take_shard(z, z->full_params);
	for (size_t k = 0; k < z->n_units; k++)
		if (!z->units[k].persist)
			zero_point_params(z, &z->units[k], NULL);
	st = place_persistent(z, z->full_params);
	drop_flat(flat);
	z->full_params = NULL;
	z->gathered_whole = 0;
	return st;
}

void zero_destroy(void *p)
{
	zero *z = p;

	if (!z)
		return;
	if (z->ops && z->q_head != z->q_tail)
		zero_drain(z);
	for (size_t i = 0; i < z->n_hooks; i++)
		g_host->ctx_remove_hook(z->env->ctx, z->hooks[i]);
	for (size_t k = 0; k < z->n_units; k++) {
		zunit *u = &z->units[k];

		if (u->persist) {
			g_host->mem_free(u->pbuf);
		} else if (u->pbuf) {
			zero_pool_put(&z->ppool, u->pbuf, z->world * u->chunk);
		}
		if (u->gbuf)
			zero_pool_put(&z->gpool, u->gbuf, z->world * u->chunk);
		u->pbuf = u->gbuf = NULL;
	}
	pool_fini(&z->ppool);
	pool_fini(&z->gpool);
	g_host->mem_free(z->staging);
	g_host->mem_free(z->gshard);
	g_host->mem_free(z->pshard);
	g_host->mem_free(z->slot_mem);
	free(z->q);
	free(z->units);
	free(z->unit_of);
	free(z->param_off);
	free(z->ranges);
	free(z);
}
