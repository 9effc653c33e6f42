/* Optimizer state, clipping and the optimizer step for replicated
 * strategies. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "replicated.h"

weft_status replicated_init(replicated *r, const weft_strategy_env *env)
{
	weft_tensor *flat = NULL, *flat_grad = NULL;

	memset(r, 0, sizeof(*r));
	r->env = env;
	g_host->params_flat(env->params, WEFT_F32, &flat, &flat_grad);
	if (!flat || !flat_grad)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy: the model has no float32 parameters with "
					 "gradients; only float32 master weights are supported");
	r->params = flat->data;
	r->grads = flat_grad->data;
	if (env->struct_size >= offsetof(weft_strategy_env, params_copy_dtype) +
				sizeof(env->params_copy_dtype) && env->params_copy) {
		r->copy = env->params_copy;
		r->copy_dt = (weft_dtype)env->params_copy_dtype;
	}
	r->numel = g_host->tensor_numel(flat);
	r->n_slots = env->optim_ops->state_slots(env->optim);
	if (r->n_slots > sizeof(r->slots) / sizeof(r->slots[0]))
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy: optimizer '%s' wants %zu state slots per element; "
					 "at most 8 are supported",
					 env->optim_ops->head.name, r->n_slots);
	if (env->device.type != WEFT_DEVICE_CPU)
		return replicated_dev_init(r);
	if (r->n_slots) {
		r->slot_mem = g_host->mem_calloc(WEFT_MEM_OPTIM,
						 r->n_slots * (size_t)r->numel * sizeof(float));
		if (!r->slot_mem)
			return WEFT_ERR_NOMEM;
		for (size_t k = 0; k < r->n_slots; k++)
			r->slots[k] = r->slot_mem + k * (size_t)r->numel;
	}
	return WEFT_OK;
}

void replicated_fini(replicated *r)
{
	replicated_dev_fini(r);
	g_host->mem_free(r->slot_mem);
	r->slot_mem = NULL;
}

/* The optimizer step over parts of the flat buffers, one a CPU thread
 * (the plugin's step takes disjoint ranges concurrently; every element is
 * updated as in one call, so the result is the same bit for bit). */
typedef struct step_job {
	replicated *r;
	const weft_optim_step_info *in;
	atomic_int st; /* the first failing part's error */
	char msg[1024]; /* and its message (errors are per thread) */
} step_job;

/* Elements a part steps at least: below, a thread costs more than it saves. */
#define STEP_GRAIN ((int64_t)1 << 16)
#define STEP_MAX_SLOTS 8

/* The step's arrays start at global element `begin` (weft/optim.h). */
static void step_part(void *arg, int64_t begin, int64_t end)
{
	step_job *j = arg;
	replicated *r = j->r;
	float *slots[STEP_MAX_SLOTS];
	int ok = WEFT_OK;
	weft_status st;

	for (size_t k = 0; k < r->n_slots; k++)
		slots[k] = r->slots[k] + begin;
	st = r->env->optim_ops->step(r->env->optim, r->env->segs, r->env->nseg,
				     r->params + begin, r->grads + begin,
				     r->n_slots ? slots : NULL, begin, end, j->in);
	if (st && atomic_compare_exchange_strong(&j->st, &ok, (int)st))
		snprintf(j->msg, sizeof(j->msg), "%s", g_host->error_last());
}

static weft_status step_parts(replicated *r, const weft_optim_step_info *in)
{
	step_job j = { .r = r, .in = in };

	if (!WEFT_HAS_MEMBER(g_host, weft_host, parallel_for) || !g_host->parallel_for ||
	    r->numel < 2 * STEP_GRAIN || r->n_slots > STEP_MAX_SLOTS)
		return r->env->optim_ops->step(r->env->optim, r->env->segs, r->env->nseg,
					       r->params, r->grads, r->slots, 0, r->numel, in);
	atomic_init(&j.st, WEFT_OK);
	g_host->parallel_for(r->numel, STEP_GRAIN, step_part, &j);
	if (atomic_load(&j.st))
		return g_host->error_set((weft_status)atomic_load(&j.st), "%s", j.msg);
	return WEFT_OK;
}

weft_status replicated_step(replicated *r, const weft_optim_step_info *info, double grad_scale,
			    double *grad_norm)
{
	weft_optim_step_info in = *info;
	double clip = r->env->gradient_clip_val;
	const weft_strategy_env *env = r->env;

	*grad_norm = -1.0;
	r->last_skipped = 0;
	r->copy_written = 0;
	/* 16-mixed: every rank agrees whether the scaled gradients overflowed */
	if (env->struct_size >= offsetof(weft_strategy_env, grads_check) + sizeof(env->grads_check) &&
	    env->grads_check) {
		const float *arr = r->grads;
		int64_t len = r->numel;
		weft_status st = env->grads_check(env->trainer, &arr, &len, 1, &r->last_skipped);

		if (st || r->last_skipped)
			return st;
	}
	in.grad_scale = info->grad_scale * grad_scale;
	if (r->dev)
		return replicated_dev_step(r, &in, grad_norm);
	if (clip > 0) {
		const float *arr = r->grads;
		int64_t len = r->numel;
		double sumsq = g_host->clip_sum_squares(&arr, &len, 1) * in.grad_scale * in.grad_scale;

		in.grad_scale *= g_host->clip_coef(sumsq, clip, grad_norm);
	}
	return step_parts(r, &in);
}

void replicated_report(const replicated *r, weft_step_report *out)
{
	out->skipped = r->last_skipped;
	if (out->struct_size >= offsetof(weft_step_report, copy_refreshed) +
				sizeof(out->copy_refreshed))
		out->copy_refreshed = r->copy_written;
}

weft_status replicated_state(replicated *r, weft_strategy_state *out)
{
	if (r->dev)
		return replicated_dev_state(r, out);
	out->struct_size = sizeof(*out);
	out->n_slots = (uint32_t)r->n_slots;
	out->begin = 0;
	out->end = r->numel;
	out->slots = r->slots;
	return WEFT_OK;
}
