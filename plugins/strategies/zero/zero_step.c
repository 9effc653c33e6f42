/* ZeRO, the top layer: the strategy's members (entry.c's vtables): the
 * options and create, setup, train_step and eval_step, the checkpoint
 * view, gather_params and destroy, over the collectives of zero_comm.c and
 * the layout and buffers of zero_layout.c.
 *
 * Stage 1: backward accumulates into the model's whole gradient buffer;
 * after the last micro-batch each unit is reduce-scattered (averaged), this
 * rank steps the optimizer over its pieces, and each unit is all-gathered
 * back into the whole parameters.
 * Stage 2: parameter gradients live in pooled unit buckets from their first
 * contribution until the bucket's reduce-scatter, launched from the
 * gradient-final hook as soon as the unit is complete (units go out from
 * the last to the first, the order backward finishes them, identical on
 * every rank); the averaged piece is added to this rank's gradient shard.
 * Every micro-batch reduces, so a rank never holds whole gradients.
 * Stage 3: as stage 2 for gradients; parameters exist as shards. The
 * pre-use hook gathers a parameter's unit (waiting for a prefetch when one
 * is in flight) and prefetches the next units in the pass's direction up to
 * stage3_prefetch_bucket_size elements; a unit is released when the module
 * it was gathered in ends (forward or backward), and gathered again when
 * backward needs it. Units under stage3_param_persistence_threshold
 * elements stay whole. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "zero.h"

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

/* A count of elements; DeepSpeed configs write them as 5e8 or 500000000.
 * *given: whether the config has the key (else *out = def, which setup and
 * the plan may size to the model: zero_auto_sizes). */
static weft_status opt_count(const weft_cfg *section, const weft_cfg *zo, const char *key,
			     int64_t def, int64_t min, int64_t *out, int *given)
{
	const weft_cfg *map, *node;
	double v;
	weft_status st = find_key(section, zo, key, &map, &node);

	*out = def;
	*given = map != NULL;
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

/* offload_optimizer / offload_param. {device: none} (or no key) leaves the
 * state in the device's memory; {device: cpu}, for offload_optimizer only
 * (cpu_ok), sets *cpu: the optimizer state and its step move to the host.
 * The other keys of the block (pin_memory, buffer_count, ratio, ...) tune
 * DeepSpeed's transfers and change nothing here. In the strategy mapping
 * or in zero_optimization, as the other keys. */
static weft_status check_offload(const weft_cfg *section, const weft_cfg *zo, const char *key,
				 int cpu_ok, int *cpu)
{
	const weft_cfg *map, *n, *dev;
	const char *d = NULL;
	weft_status st = find_key(section, zo, key, &map, &n);

	if (st || !n)
		return st;
	dev = g_host->cfg_kind_of(n) == WEFT_CFG_MAP ? g_host->cfg_get(n, "device") : NULL;
	if (dev && !g_host->cfg_as_str(dev, &d) &&
	    (!strcmp(d, "none") || (cpu_ok && !strcmp(d, "cpu")))) {
		g_host->cfg_mark_used(n);
		for (size_t i = 0; i < g_host->cfg_size(n); i++)
			g_host->cfg_mark_used(g_host->cfg_at(n, i));
		if (cpu)
			*cpu = !strcmp(d, "cpu");
		return WEFT_OK;
	}
	if (cpu_ok)
		return g_host->cfg_error(n, "%s must be {device: cpu} (the optimizer state and its "
					 "step in host memory) or {device: none}; got %s%s (nvme is "
					 "not supported)", key, d ? "device " : "no device", d ? d : "");
	return g_host->cfg_error(n, "%s is not supported by weft's zero (parameters stay in this "
				 "device's memory); remove it or set {device: none} (offload_optimizer: "
				 "{device: cpu} moves the optimizer state instead)", key);
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
	/* the defaults are DeepSpeed's, each an upper bound: a key left out
	 * is sized to the model at setup (zero_auto_sizes) */
	if (!st)
		st = opt_count(section, zo, "reduce_bucket_size", ZERO_DEF_BUCKET, 1,
			       &z->reduce_bucket_size, &z->given.reduce_bucket);
	if (!st)
		st = opt_count(section, zo, "allgather_bucket_size", ZERO_DEF_BUCKET, 1,
			       &z->allgather_bucket_size, &z->given.allgather_bucket);
	if (!st)
		st = opt_count(section, zo, "stage3_prefetch_bucket_size", ZERO_DEF_PREFETCH, 0,
			       &z->prefetch_bucket_size, &z->given.prefetch);
	if (!st)
		st = opt_count(section, zo, "stage3_param_persistence_threshold", ZERO_DEF_PERSIST,
			       0, &z->persistence_threshold, &z->given.persist);
	if (!st)
		st = opt_count(section, zo, "stage3_max_live_parameters", ZERO_DEF_LIVE, 0,
			       &z->max_live_parameters, &z->given.live);
	if (!st)
		st = check_offload(section, zo, "offload_optimizer", 1, &z->offload_asked);
	if (!st)
		st = check_offload(section, zo, "offload_param", 0, NULL);
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
	st = zero_dev_check(env, z->label);
	if (st)
		goto out_free;
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

weft_status zero_build_plan_stage(const weft_cfg *section, int stage, weft_model_options *mo)
{
	zero *z = calloc(1, sizeof(*z));
	weft_status st;

	if (!z)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'zero': out of memory");
	st = read_options(z, section, stage);
	/* stages 2 and 3 keep gradients in their own buckets and shard: the
	 * model's whole gradient buffer would only raise the setup peak */
	if (!st && z->stage >= 2)
		mo->no_grads = 1;
	free(z);
	return st;
}

/* Stages 2, 3 on a model built without gradients (the build plan's
 * no_grads): each float32 parameter gets a gradient tensor with no data,
 * which the hooks point at a bucket while its unit reduces. */
static weft_status attach_grads(zero *z)
{
	weft_params *ps = z->env->params;
	size_t n = g_host->params_count(ps);

	z->own_grads = calloc(n ? n : 1, sizeof(*z->own_grads));
	if (!z->own_grads)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory", z->label);
	z->n_own_grads = n;
	for (size_t i = 0; i < n; i++) {
		weft_tensor *t = g_host->params_at(ps, i), *g = &z->own_grads[i];

		if (t->dtype != WEFT_F32 || t->grad)
			continue;
		*g = *t;
		g->flags = 0;
		g->mem_category = WEFT_MEM_GRADS;
		g->param_index = -1;
		g->data = g->base = NULL;
		g->offset = 0;
		g->grad = NULL;
		t->grad = g;
		t->flags |= WEFT_TENSOR_REQUIRES_GRAD;
	}
	return WEFT_OK;
}

/* Undoes attach_grads (destroy: the model outlives the strategy). */
static void detach_grads(zero *z)
{
	for (size_t i = 0; i < z->n_own_grads; i++) {
		weft_tensor *t = g_host->params_at(z->env->params, i);

		if (t->grad == &z->own_grads[i]) {
			t->grad = NULL;
			t->flags &= ~(uint32_t)WEFT_TENSOR_REQUIRES_GRAD;
		}
	}
	free(z->own_grads);
	z->own_grads = NULL;
	z->n_own_grads = 0;
}

weft_status zero_setup(void *p)
{
	zero *z = p;
	const weft_strategy_env *env = z->env;
	weft_tensor *flat = NULL, *flat_grad = NULL;
	weft_status st;

	g_host->params_flat(env->params, WEFT_F32, &flat, &flat_grad);
	if (!flat || (!flat_grad && z->stage < 2))
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy '%s': the model has no float32 parameters with "
					 "gradients; only float32 master weights are supported",
					 z->label);
	z->flat = flat;
	z->full_params = flat->data;
	z->full_grads = flat_grad ? flat_grad->data : NULL;
	z->numel = g_host->tensor_numel(flat);
	z->n_slots = env->optim_ops->state_slots(env->optim);
	st = flat_grad ? WEFT_OK : attach_grads(z);
	if (!st)
		st = zero_dev_init(z);
	if (st)
		return st;
	if (z->n_slots > ZERO_MAX_SLOTS)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy '%s': optimizer '%s' wants %zu state slots per "
					 "element; at most %d are supported", z->label,
					 env->optim_ops->head.name, z->n_slots, ZERO_MAX_SLOTS);
	zero_auto_sizes(z, z->numel);
	st = zero_build_units(z);
	if (!st)
		st = zero_dev_layout(z);
	if (st)
		return st;
	zero_auto_prefetch(z, z->gather_elems);
	/* Setup's peak: what the model holds goes before what the strategy
	 * makes. Stages 2 and 3 keep no whole gradients (the model built
	 * without them, or they are freed now) and stage 3 takes its
	 * parameter shard and frees the whole parameters before the
	 * optimizer slots and the working set are made (zero_memory_plan
	 * counts what remains: the whole parameters beside the shard). */
	if (z->stage >= 2) {
		for (size_t k = 0; k < z->n_units; k++)
			zero_point_grads(z, &z->units[k], NULL);
		zero_drop_flat(z, flat_grad, WEFT_MEM_GRADS);
		z->full_grads = NULL;
	}
	if (z->world > 1) {
		weft_comm_buf all = zero_buf(z, z->full_params, z->numel);

		st = z->ops->broadcast(z->comm, &all, 0, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': broadcasting rank 0's %lld "
						  "parameters at setup", z->label,
						  (long long)z->numel);
	}
	/* offload fills its host master from the whole parameters */
	if (z->offload) {
		st = zero_offload_setup(z);
		if (st)
			return st;
	}
	if (z->stage == 3) {
		z->pshard = zero_alloc_f32(z, WEFT_MEM_PARAMS, z->shard_numel,
					   "the parameter shard");
		if (!z->pshard)
			return WEFT_ERR_NOMEM;
		st = zero_take_shard(z, z->full_params);
		if (st)
			return st;
		for (size_t k = 0; k < z->n_units; k++)
			zero_point_params(z, &z->units[k], NULL);
		st = zero_place_persistent(z, z->full_params);
		if (st)
			return st;
		zero_drop_flat(z, flat, WEFT_MEM_PARAMS);
		z->full_params = NULL;
	}
	if (!z->offload && z->n_slots) {
		z->slot_mem = zero_alloc_f32(z, WEFT_MEM_OPTIM,
					     (int64_t)z->n_slots * z->shard_numel,
					     "the optimizer state shard");
		if (!z->slot_mem)
			return WEFT_ERR_NOMEM;
		for (size_t k = 0; k < z->n_slots; k++)
			z->slots[k] = z->slot_mem + k * (size_t)z->shard_numel;
	}
	/* the working set, made now: the steps allocate nothing */
	st = zero_pool_init(z, &z->ppool, WEFT_MEM_PARAMS, z->gather_elems);
	if (!st)
		st = zero_pool_init(z, &z->gpool, WEFT_MEM_GRADS, z->world * z->max_chunk);
	if (!st)
		st = zero_pool_reserve(z, &z->ppool,
				       zero_gather_buffers(z, z->gather_elems, z->n_gathered));
	if (!st)
		st = zero_pool_reserve(z, &z->gpool, zero_grad_buffers(z, (int64_t)z->n_units));
	if (st)
		return st;
	if (z->stage <= 2) {
		z->staging = zero_alloc_f32(z, WEFT_MEM_COMM, z->world * z->max_chunk,
					    "the communication staging buffer");
		if (!z->staging)
			return WEFT_ERR_NOMEM;
	}
	if (z->stage >= 2) {
		z->gshard = zero_alloc_f32(z, WEFT_MEM_GRADS, z->shard_numel,
					   "the gradient shard");
		if (!z->gshard)
			return WEFT_ERR_NOMEM;
	}
	st = zero_hooks_add(z);
	if (st)
		return st;
	if (g_host->log_enabled(WEFT_LOG_DEBUG))
		g_host->log(WEFT_LOG_DEBUG, "%s: %zu units over %lld parameters, %lld in this "
			    "rank's shard; optimizer %s steps %s on %s", z->label, z->n_units,
			    (long long)z->numel, (long long)z->shard_numel,
			    env->optim_ops->head.name,
			    z->fused ? "as the kernel table's optim_step" : "with its plugin's step()",
			    z->k->head.name);
	return WEFT_OK;
}

weft_status zero_state(void *p, weft_strategy_state *out)
{
	zero *z = p;
	float *const *slots;
	weft_status st = zero_dev_state(z, &slots);

	if (st)
		return st;
	out->n_slots = (uint32_t)z->n_slots;
	out->slots = slots;
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
		float *full = zero_alloc_f32(z, WEFT_MEM_PARAMS, z->numel,
					     "the gathered parameters");

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
			st = zero_dcopy(z, full + u->lo, u->pbuf, u->hi - u->lo);
			if (st)
				return g_host->error_wrap(st, "strategy '%s': gathering unit %zu into "
							  "the whole parameters", z->label, k);
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
	st = zero_take_shard(z, z->full_params);
	if (st)
		return st;
	z->master_stale = 1; /* the whole parameters may have been loaded */
	for (size_t k = 0; k < z->n_units; k++)
		if (!z->units[k].persist)
			zero_point_params(z, &z->units[k], NULL);
	st = zero_place_persistent(z, z->full_params);
	zero_drop_flat(z, flat, WEFT_MEM_PARAMS);
	z->full_params = NULL;
	z->gathered_whole = 0;
	return st;
}

weft_status zero_params_visit(void *p, weft_status (*fn)(void *user, size_t index,
						       const weft_tensor *t),
			      void *user)
{
	zero *z = p;
	weft_status st;

	if (z->gathered_whole)
		return g_host->error_set(WEFT_ERR_INVALID_ARG, "strategy '%s': params_visit "
					 "between gather_params(1) and gather_params(0)", z->label);
	if (z->stage < 3) {
		for (size_t i = 0; i < z->n_params; i++) {
			st = fn(user, i, g_host->params_at(z->env->params, i));
			if (st)
				return st;
		}
		return WEFT_OK;
	}
	st = zero_drain(z);
	if (st)
		return st;
	zero_release_all(z);
	/* unit by unit, in flat order: one gathered unit at a time */
	for (size_t k = 0; k < z->n_units; k++) {
		zunit *u = &z->units[k];

		if (!u->persist) {
			st = zero_gather_unit(z, k);
			if (st)
				return g_host->error_wrap(st, "strategy '%s': gathering unit %zu of "
							  "%zu to visit its parameters", z->label, k,
							  z->n_units);
		}
		for (size_t i = 0; !st && i < u->p_count; i++)
			st = fn(user, u->p_first + i,
				g_host->params_at(z->env->params, u->p_first + i));
		zero_release_all(z);
		if (st)
			return st;
	}
	return WEFT_OK;
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
			zero_dfree(z, WEFT_MEM_PARAMS, u->pbuf, z->world * u->chunk);
		} else if (u->pbuf) {
			zero_pool_put(&z->ppool, u->pbuf, z->world * u->chunk);
		}
		if (u->gbuf)
			zero_pool_put(&z->gpool, u->gbuf, z->world * u->chunk);
		u->pbuf = u->gbuf = NULL;
	}
	if (z->k) {
		zero_pool_fini(z, &z->ppool);
		zero_pool_fini(z, &z->gpool);
		zero_dfree(z, WEFT_MEM_COMM, z->staging, z->world * z->max_chunk);
		zero_dfree(z, WEFT_MEM_GRADS, z->gshard, z->shard_numel);
		zero_dfree(z, WEFT_MEM_PARAMS, z->pshard, z->shard_numel);
		if (!z->offload)
			zero_dfree(z, WEFT_MEM_OPTIM, z->slot_mem,
				   (int64_t)z->n_slots * z->shard_numel);
	}
	zero_offload_fini(z);
	zero_dev_fini(z);
	detach_grads(z);
	free(z->q);
	free(z->units);
	free(z->unit_of);
	free(z->param_off);
	free(z->ranges);
	free(z);
}

/* ---- the step ------------------------------------------------------------ */

static void reset_step(zero *z)
{
	z->busy_ns = z->last_done_ns = z->exposed_ns = z->bytes = z->elements = z->calls = 0;
	z->gathers = 0;
	z->grads_down = 0;
}

/* One micro-batch's forward and backward (weft_micro_fn); stages 2 and 3
 * reduce its gradients into the shard before returning. */
static weft_status micro(void *user, size_t i, const weft_micro_batch *b, double scale,
			 double *loss)
{
	zero *z = user;
	const weft_strategy_env *env = z->env;
	weft_status st;

	z->last_micro = i + 1 == z->n_micro;
	z->depth = 0;
	z->reducing = z->stage >= 2;
	z->next_rs = 0;
	for (size_t k = 0; k < z->n_units; k++) {
		z->units[k].ready = 0;
		z->units[k].rs_launched = 0;
	}
	st = env->forward_backward(env->trainer, b, scale, loss);
	if (!st && z->stage >= 2) {
		st = g_host->autograd_flush(env->ctx);
		/* parameters no loss reached: their gradient is zero */
		for (size_t k = 0; !st && k < z->n_units; k++)
			z->units[k].ready = z->units[k].p_count;
		if (!st)
			st = zero_launch_ready(z);
	}
	z->reducing = 0;
	{
		weft_status d = zero_drain(z);

		if (!st)
			st = d;
	}
	if (z->stage == 3)
		zero_release_all(z);
	for (size_t k = 0; z->stage >= 2 && k < z->n_units; k++) {
		zunit *u = &z->units[k];

		if (u->gbuf) {
			zero_point_grads(z, u, NULL);
			zero_pool_put(&z->gpool, u->gbuf, z->world * u->chunk);
			u->gbuf = NULL;
		}
	}
	return st;
}

static int64_t working_set(const zero *z)
{
	return z->ppool.bytes_total + z->gpool.bytes_total + z->persist_bytes;
}

weft_status zero_train_step(void *p, const weft_step_input *in, weft_step_report *out)
{
	zero *z = p;
	const weft_strategy_env *env = z->env;
	weft_accumulate acc = weft_accumulate_env(g_host, env);
	double loss_sum, red[3] = { 0 }, clip = env->gradient_clip_val;
	int64_t rows = weft_step_rows(in->micro, in->n_micro);
	weft_optim_step_info info = in->optim;
	int n_red = clip > 0 ? 3 : 2;
	weft_step_clock clock;
	weft_status st;

	if (z->gathered_whole)
		return g_host->error_set(WEFT_ERR_INVALID_ARG, "strategy '%s': train_step between "
					 "gather_params(1) and gather_params(0)", z->label);
	weft_step_clock_start(&clock);
	reset_step(z);
	/* stage 1 accumulates into the model's gradients; 2 and 3 into the shard */
	if (z->stage >= 2) {
		acc.zero = NULL;
		st = zero_dzero(z, z->gshard, z->shard_numel);
		if (st)
			return st;
	}
	acc.run = micro;
	acc.user = z;
	z->n_micro = in->n_micro;
	st = weft_step_accumulate(&acc, in->micro, in->n_micro, rows, &loss_sum);
	if (st)
		return st;
	for (size_t k = 0; z->stage == 1 && k < z->n_units; k++) {
		st = zero_staged(z, k, 1);
		if (st)
			return st;
	}
	red[0] = loss_sum;
	red[1] = (double)rows;
	if (clip > 0) {
		st = zero_dev_sumsq(z, &red[2]);
		if (st)
			return st;
	}
	if (z->world > 1) {
		weft_comm_buf b = { .data = red, .count = n_red, .dtype = WEFT_COMM_F64,
				    .device = WEFT_COMM_DEVICE_CPU };

		st = z->ops->all_reduce(z->comm, &b, &b, WEFT_COMM_SUM, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': all-reduce of the loss%s",
						  z->label, clip > 0 ? " and gradient norm" : "");
		z->calls++;
		out->metric_comm_bytes = n_red * 8;
		if (red[1] != (double)rows * z->world)
			return g_host->error_set(WEFT_ERR_INVALID_ARG,
						 "strategy '%s': rank %d had %lld rows in this step "
						 "but all ranks together had %.0f, not %d x %lld; ZeRO "
						 "averages per-rank gradients, so every rank needs the "
						 "same rows per step (use the distributed sampler)",
						 z->label, z->rank, (long long)rows, red[1], z->world,
						 (long long)rows);
	}
	out->grad_norm = -1.0;
	/* 16-mixed: agree over the world whether the gradients overflowed. Stage
	 * 1 checks its whole gradient buffer: an inf or NaN in any rank's local
	 * part makes the reduced piece that owns it non-finite too. */
	if (env->struct_size >= offsetof(weft_strategy_env, grads_check) +
				sizeof(env->grads_check) && env->grads_check) {
		const float *arr = z->stage == 1 ? z->full_grads : z->gshard;
		int64_t len = z->stage == 1 ? z->numel : z->shard_numel;
		int skip = 0;

		st = env->grads_check(env->trainer, &arr, &len, 1, &skip);
		if (st)
			return st;
		out->skipped = skip;
	}
	if (clip > 0 && !out->skipped)
		info.grad_scale *= g_host->clip_coef(red[2] * info.grad_scale * info.grad_scale, clip,
						     &out->grad_norm);
	st = out->skipped ? WEFT_OK : zero_dev_step(z, &info);
	for (size_t k = 0; !st && z->stage <= 2 && k < z->n_units; k++)
		st = zero_staged(z, k, 0);
	if (!st && z->stage == 3)
		st = zero_refresh_persistent(z);
	if (st)
		return st;
	out->loss = red[0] / red[1];
	out->comm_bytes = z->bytes + out->metric_comm_bytes;
	out->comm_elements = z->elements + (z->world > 1 ? n_red : 0);
	out->comm_calls = z->calls;
	out->comm_ns = z->busy_ns;
	out->exposed_comm_ns = z->exposed_ns;
	if (out->struct_size >= offsetof(weft_step_report, working_set_bytes) + sizeof(int64_t))
		out->working_set_bytes = working_set(z);
	weft_step_clock_finish(&clock, out);
	return WEFT_OK;
}

weft_status zero_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	zero *z = p;
	weft_eval_report mine = { .struct_size = sizeof(mine) };
	double red[4];
	weft_comm_buf buf = { .data = red, .count = 4, .dtype = WEFT_COMM_F64,
			      .device = WEFT_COMM_DEVICE_CPU };
	weft_status st, d;

	g_host->ctx_step_begin(z->env->ctx);
	z->depth = 0;
	st = z->env->evaluate(z->env->trainer, b, &mine);
	d = zero_drain(z);
	if (z->stage == 3 && !z->gathered_whole)
		zero_release_all(z);
	if (st || d)
		return st ? st : d;
	red[0] = mine.loss_sum;
	red[1] = (double)mine.rows;
	red[2] = (double)mine.correct;
	red[3] = (double)mine.counted;
	if (z->world > 1) {
		st = z->ops->all_reduce(z->comm, &buf, &buf, WEFT_COMM_SUM, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': all-reduce of eval metrics",
						  z->label);
	}
	out->loss_sum += red[0];
	out->rows += (int64_t)red[1];
	out->correct += (int64_t)red[2];
	out->counted += (int64_t)red[3];
	return WEFT_OK;
}
