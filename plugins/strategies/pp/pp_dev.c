/* The pipeline's device side: its buffers, copies, gradient norm and
 * optimizer step through the kernel table of the model's context
 * (weft/device.h, since ABI 1.3: mem_alloc / mem_free by category,
 * copy_ranges, axpy, sum_squares_ranges, optim_step). The strategy never
 * dereferences parameter, gradient, state or message memory itself, so the
 * same code runs on the CPU (loops over host memory, bit for bit the
 * plugin's own) and on CUDA (stream-ordered on the context's stream).
 *
 * The optimizer on the CPU steps with its plugin's step(), as before; off
 * the CPU its update must be one optim_step computes (adam, adamw, sgd:
 * weft_optim_ops.adam_params / sgd_params), stepped over each chunk's
 * pieces cut where weight decay starts or stops.
 *
 * The dp replicas of a hybrid mesh (pp_dp.c) average and gather on the
 * same device buffers. Under tp > 1 (pp_tp.c) the stages are tp shards
 * whose forward and backward collectives run in the model's tp ops on each
 * micro-batch's context; the strategy's own part is the clipping norm, summed with
 * sum_squares_ranges over whole and split parameters apart (hybrid builds
 * its tp shards without sequence parallelism, so the only partial
 * gradients are a grouped-query model's shared key/value parts, which
 * pp_tp_sum_shared sums over the tp group before anything reads them).
 *
 * Contexts: every micro-batch runs on a context of its own, each with its
 * own stream; pp_dev_sync waits for all of them (after the schedule,
 * before the gradients are read on the model's context, and after the
 * step, before the next forwards read the parameters). */
#include <string.h>

#include "pp.h"

/* Whether the optimizer's update is one optim_step computes (s->okind);
 * *why says what rules it out. */
static int optim_fits(const weft_strategy_env *env, size_t n_slots, int *kind,
		      weft_optim_adam_params *ap, weft_optim_sgd_params *sp, const char **why)
{
	const weft_optim_ops *ops = env->optim_ops;

	*ap = (weft_optim_adam_params){ .struct_size = sizeof(*ap) };
	*sp = (weft_optim_sgd_params){ .struct_size = sizeof(*sp) };
	if (WEFT_HAS_MEMBER(ops, weft_optim_ops, adam_params) && ops->adam_params &&
	    ops->adam_params(env->optim, ap)) {
		*kind = WEFT_OPTIM_KERNEL_ADAM;
		if (ap->amsgrad ? n_slots != 3 : n_slots != 2) {
			*why = "its state slots are not exp_avg, exp_avg_sq (and max_exp_avg_sq)";
			return 0;
		}
		return 1;
	}
	if (WEFT_HAS_MEMBER(ops, weft_optim_ops, sgd_params) && ops->sgd_params &&
	    ops->sgd_params(env->optim, sp)) {
		*kind = WEFT_OPTIM_KERNEL_SGD;
		if (n_slots != (sp->momentum != 0.0 ? 1u : 0u)) {
			*why = "its state slots are not sgd's momentum_buffer";
			return 0;
		}
		return 1;
	}
	*why = "it describes no update a device kernel computes (adam, adamw and sgd do)";
	return 0;
}

weft_status pp_dev_check(const char *who, const weft_strategy_env *env, const pp_options *o)
{
	weft_optim_adam_params ap;
	weft_optim_sgd_params sp;
	const char *why = NULL;
	int kind;

	(void)o; /* every mesh runs off the CPU (tp > 1 too: pp_tp.c) */
	if (env->device.type == WEFT_DEVICE_CPU)
		return WEFT_OK;
	if (optim_fits(env, env->optim_ops->state_slots(env->optim), &kind, &ap, &sp, &why))
		return WEFT_OK;
	return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s' on accelerator: cuda steps "
				 "the optimizer on the device, and optimizer '%s' has no device "
				 "kernel (%s); use optimizer adam, adamw or sgd, or accelerator: "
				 "cpu", who, env->optim_ops->head.name, why);
}

weft_status pp_dev_init(pp_strategy *s)
{
	const weft_strategy_env *env = s->env;
	const char *why = NULL;
	const char *who = s->o.hybrid ? "hybrid" : "pp";

	s->on_cpu = env->device.type == WEFT_DEVICE_CPU;
	if (!WEFT_HAS_MEMBER(g_host, weft_host, ctx_kernels) || !g_host->ctx_kernels)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': this weft's host "
					 "table has no ctx_kernels (an older weft); rebuild the "
					 "plugin and weft together", who);
	g_host->ctx_kernels(env->ctx, &s->k, &s->kctx);
	if (!s->k || !WEFT_HAS_MEMBER(s->k, weft_kernel_table, optim_step) ||
	    !s->k->copy_ranges || !s->k->sum_squares_ranges || !s->k->optim_step)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': the '%s' kernel "
					 "table has no device services for strategies (copy_ranges, "
					 "sum_squares_ranges, optim_step: weft ABI 1.3); rebuild it "
					 "with this weft", who, s->k ? s->k->head.name : "?");
	s->msgs.k = s->k;
	s->msgs.dev_index = env->device.index;
	if (s->on_cpu)
		return WEFT_OK;
	s->fused = optim_fits(env, env->optim_ops->state_slots(env->optim), &s->okind, &s->ap,
			      &s->sp, &why);
	return s->fused ? WEFT_OK : pp_dev_check(who, env, &s->o);
}

float *pp_dalloc(pp_strategy *s, weft_mem_category cat, size_t bytes, const char *what)
{
	void *b = NULL;
	weft_status st = s->k->mem_alloc(s->env->device.index, cat, bytes, &b);

	if (!st) {
		st = s->k->zero(s->kctx, b, bytes);
		if (st) {
			s->k->mem_free(s->env->device.index, cat, b, bytes);
			b = NULL;
		}
	}
	if (st) {
		g_host->error_wrap(st, "strategy 'pp' (rank %d): allocating %s (%zu bytes)",
				   (int)s->env->rank, what, bytes);
		return NULL;
	}
	return b;
}

void pp_dfree(pp_strategy *s, weft_mem_category cat, void *p, size_t bytes)
{
	if (p)
		s->k->mem_free(s->env->device.index, cat, p, bytes);
}

weft_status pp_dev_ranges(pp_strategy *s)
{
	const weft_strategy_env *env = s->env;
	double wd = s->okind == WEFT_OPTIM_KERNEL_SGD ? s->sp.weight_decay : s->ap.weight_decay;
	size_t cap = 1, n = 0;
	weft_status st = pp_tp_sq_setup(s);

	if (st || !s->fused)
		return st;
	for (int k = 0; k < s->o.v; k++)
		cap += (size_t)s->chunk[k].n_pieces * (env->nseg + 1);
	s->opt = g_host->mem_alloc(WEFT_MEM_OTHER, cap * sizeof(*s->opt));
	if (!s->opt)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': optimizer ranges");
	for (int k = 0; k < s->o.v; k++) {
		const pp_chunk *c = &s->chunk[k];

		s->opt_at[k] = n;
		for (int i = 0; i < c->n_pieces; i++) {
			const pp_piece *p = &c->piece[i];

			for (size_t g = 0; g < env->nseg; g++) {
				const weft_optim_segment *sg = &env->segs[g];
				int64_t lo = sg->offset > p->sh_lo ? sg->offset : p->sh_lo;
				int64_t hi = sg->offset + sg->numel < p->sh_hi ?
					     sg->offset + sg->numel : p->sh_hi;
				int decay = sg->decay && wd != 0.0;
				weft_optim_range r;

				if (lo >= hi)
					continue;
				r = (weft_optim_range){ .param = p->local + (lo - p->begin),
							.grad = p->local + (lo - p->begin),
							.state = p->state_at + (lo - p->sh_lo),
							.count = hi - lo, .decay = decay };
				if (n > s->opt_at[k]) {
					weft_optim_range *l = &s->opt[n - 1];

					if (l->decay == decay && l->param + l->count == r.param &&
					    l->state + l->count == r.state) {
						l->count += r.count;
						continue;
					}
				}
				s->opt[n++] = r;
			}
		}
	}
	s->opt_at[s->o.v] = n;
	return WEFT_OK;
}

/* A checkpoint's host copy of the slots was handed out: it may hold a
 * loaded checkpoint, so it goes back to the device before the step. */
static weft_status mirror_upload(pp_strategy *s)
{
	size_t bytes = s->n_slots * (size_t)s->state_numel * sizeof(float);
	weft_status st;

	if (!s->mirror)
		return WEFT_OK;
	st = s->k->copy(s->kctx, s->state_mem, s->mirror, bytes, WEFT_COPY_HOST_TO_DEVICE);
	if (!st)
		st = s->k->synchronize(s->kctx);
	if (st)
		return g_host->error_wrap(st, "strategy 'pp': copying the optimizer state (%zu "
					  "bytes) back to the device", bytes);
	g_host->mem_free(s->mirror);
	s->mirror = NULL;
	return WEFT_OK;
}

weft_status pp_dev_step(pp_strategy *s, const weft_optim_step_info *in)
{
	const char *name = s->env->optim_ops->head.name;
	weft_optim_kernel ok;
	weft_status st;

	if (in->step < 1 || !(in->lr >= 0 && in->lr <= 1e300))
		return g_host->error_set(WEFT_ERR_INVALID_ARG, "%s: step %lld with lr %g: the step "
					 "must be >= 1 and lr a finite number >= 0", name,
					 (long long)in->step, in->lr);
	st = mirror_upload(s);
	if (st)
		return st;
	if (s->okind == WEFT_OPTIM_KERNEL_SGD)
		weft_optim_kernel_sgd(&ok, s->sp.momentum, s->sp.dampening, s->sp.nesterov,
				      s->sp.weight_decay, in->lr, in->step, in->grad_scale);
	else
		weft_optim_kernel_adam(&ok, s->ap.decoupled, s->ap.amsgrad, s->ap.beta1,
				       s->ap.beta2, s->ap.eps, s->ap.weight_decay, in->lr, in->step,
				       in->grad_scale);
	for (int k = 0; k < s->o.v; k++) {
		size_t n = s->opt_at[k + 1] - s->opt_at[k];

		if (!n)
			continue;
		st = s->k->optim_step(s->kctx, &ok, s->opt + s->opt_at[k], n, s->chunk[k].flat,
				      s->chunk[k].grad, s->state_slots);
		if (st)
			return g_host->error_wrap(st, "strategy 'pp': %s step over stage %d's %zu "
						  "ranges on %s", name, s->chunk[k].stage, n,
						  s->k->head.name);
	}
	return WEFT_OK;
}

weft_status pp_dev_state(pp_strategy *s, float *const **slots)
{
	size_t bytes = s->n_slots * (size_t)s->state_numel * sizeof(float);
	weft_status st;

	*slots = s->state_slots;
	if (s->on_cpu || !s->n_slots)
		return WEFT_OK;
	/* a mirror that exists already holds the truth: no step ran since it
	 * was made, and a checkpoint may have been loaded into it */
	if (!s->mirror) {
		s->mirror = g_host->mem_alloc(WEFT_MEM_OPTIM, bytes + 1);
		if (!s->mirror)
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': no host memory for "
						 "a copy of the optimizer state (%zu bytes) for a "
						 "checkpoint", bytes);
		st = s->k->copy(s->kctx, s->mirror, s->state_mem, bytes, WEFT_COPY_DEVICE_TO_HOST);
		if (st) {
			g_host->mem_free(s->mirror);
			s->mirror = NULL;
			return g_host->error_wrap(st, "strategy 'pp': copying the optimizer state "
						  "to the host for a checkpoint");
		}
		for (size_t q = 0; q < s->n_slots; q++)
			s->mirror_slots[q] = s->mirror + q * (size_t)s->state_numel;
	}
	*slots = s->mirror_slots;
	return WEFT_OK;
}

weft_status pp_dev_sync(pp_strategy *s)
{
	weft_status st;

	if (s->on_cpu)
		return WEFT_OK;
	for (int i = 0; i < s->n_ctx; i++) {
		const weft_kernel_table *k;
		void *kctx;

		g_host->ctx_kernels(s->all_ctx[i], &k, &kctx);
		st = k->synchronize(kctx);
		if (st)
			return g_host->error_wrap(st, "strategy 'pp': waiting for micro-batch "
						  "context %d", i);
	}
	st = s->k->synchronize(s->kctx);
	return st ? g_host->error_wrap(st, "strategy 'pp': waiting for the model's context") :
		    WEFT_OK;
}

void pp_dev_fini(pp_strategy *s)
{
	g_host->mem_free(s->mirror);
	g_host->mem_free(s->opt);
	pp_tp_free(s);
	s->mirror = NULL;
	s->opt = NULL;
}
