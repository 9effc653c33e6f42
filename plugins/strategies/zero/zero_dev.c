/* ZeRO, the lowest layer: every touch of parameter, gradient, optimizer
 * and message memory, through the kernel table of the model's context
 * (weft/device.h: mem_alloc / mem_free counted by category, copy_ranges,
 * zero, axpy, sum_squares_ranges, optim_step; since ABI 1.3). The strategy
 * never dereferences that memory itself, so the same code runs on the CPU
 * (the CPU table's members are loops over host memory, bit for bit what
 * this plugin computed before it used them) and on CUDA (stream-ordered on
 * the context's compute stream, so the collectives' staging copies and the
 * next forward see their results).
 *
 * The optimizer. When the optimizer describes an update the table computes
 * (weft_optim_ops.adam_params: adam, adamw; sgd_params: sgd) its step runs
 * as optim_step over this rank's pieces, cut where weight decay starts or
 * stops, on the device, with the state slots on the device. Any other
 * optimizer (lion, a third party's) steps through its plugin's step() on
 * host memory, which only the CPU has: on other devices create refuses
 * it, naming the optimizers that run.
 *
 * Optimizer offload (offload_optimizer: {device: cpu}, ZeRO-Offload). On a
 * device other than the CPU the optimizer state slots, a master copy of
 * this rank's parameter pieces and a copy of its gradient pieces are host
 * memory, packed as the shard is; the step runs there as the CPU kernel
 * table's optim_step (its threaded loop, the same bits as the device
 * kernel and the plugin). Gradients go down and updated parameters come
 * up through the device table's copy. Stages 2 and 3 send each unit's
 * reduced piece down as soon as the step's last micro-batch has reduced
 * it (retire, in zero_comm.c), while the backward of the units before it
 * continues; stage 1's gradients are reduced after the backward, so they
 * go down at the step. The step itself waits for the global gradient
 * norm and the overflow check, so it follows the backward; the
 * parameters go up after it, before the all-gathers. On the CPU the
 * state is host memory already: the option changes nothing (a log line
 * says so). */
#include <stdlib.h>
#include <string.h>

#include "weft/autograd.h"

#include "zero.h"

static size_t f32_bytes(int64_t n)
{
	return (size_t)(n > 0 ? n : 1) * sizeof(float);
}

/* Whether the optimizer's update is one optim_step computes (z->kind);
 * *why says what rules it out. */
static int optim_fits(zero *z, const char **why)
{
	const weft_optim_ops *ops = z->env->optim_ops;
	const void *o = z->env->optim;

	z->ap = (weft_optim_adam_params){ .struct_size = sizeof(z->ap) };
	z->sp = (weft_optim_sgd_params){ .struct_size = sizeof(z->sp) };
	if (WEFT_HAS_MEMBER(ops, weft_optim_ops, adam_params) && ops->adam_params &&
	    ops->adam_params(o, &z->ap)) {
		z->kind = WEFT_OPTIM_KERNEL_ADAM;
		if (z->ap.amsgrad ? z->n_slots != 3 : z->n_slots != 2) {
			*why = "its state slots are not exp_avg, exp_avg_sq (and max_exp_avg_sq)";
			return 0;
		}
		return 1;
	}
	if (WEFT_HAS_MEMBER(ops, weft_optim_ops, sgd_params) && ops->sgd_params &&
	    ops->sgd_params(o, &z->sp)) {
		z->kind = WEFT_OPTIM_KERNEL_SGD;
		if (z->n_slots != (z->sp.momentum != 0.0 ? 1u : 0u)) {
			*why = "its state slots are not sgd's momentum_buffer";
			return 0;
		}
		return 1;
	}
	*why = "it describes no update a device kernel computes (adam, adamw and sgd do)";
	return 0;
}

weft_status zero_dev_check(const weft_strategy_env *env, const char *label)
{
	const char *why = NULL;
	zero probe = { .env = env };

	if (env->device.type == WEFT_DEVICE_CPU)
		return WEFT_OK;
	probe.n_slots = env->optim_ops->state_slots(env->optim);
	if (optim_fits(&probe, &why))
		return WEFT_OK;
	return g_host->error_set(WEFT_ERR_UNSUPPORTED,
				 "strategy '%s' on accelerator: cuda steps the optimizer on the "
				 "device, and optimizer '%s' has no device kernel (%s); use "
				 "optimizer adam, adamw or sgd, or accelerator: cpu", label,
				 env->optim_ops->head.name, why);
}

weft_status zero_dev_init(zero *z)
{
	const weft_strategy_env *env = z->env;
	const char *why = NULL;

	z->dev_index = env->device.index;
	z->on_cpu = env->device.type == WEFT_DEVICE_CPU;
	if (!WEFT_HAS_MEMBER(g_host, weft_host, ctx_kernels) || !g_host->ctx_kernels)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': this weft's host "
					 "table has no ctx_kernels (an older weft); rebuild the "
					 "plugin and weft together", z->label);
	g_host->ctx_kernels(env->ctx, &z->k, &z->kctx);
	if (!z->k || !WEFT_HAS_MEMBER(z->k, weft_kernel_table, optim_step) ||
	    !z->k->copy_ranges || !z->k->sum_squares_ranges || !z->k->optim_step)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': the '%s' kernel "
					 "table has no device services for strategies (copy_ranges, "
					 "sum_squares_ranges, optim_step: weft ABI 1.3); rebuild it "
					 "with this weft", z->label, z->k ? z->k->head.name : "?");
	z->fused = optim_fits(z, &why);
	if (!z->fused && !z->on_cpu)
		return zero_dev_check(env, z->label);
	if (z->offload_asked && z->on_cpu) {
		g_host->log(WEFT_LOG_INFO, "%s: offload_optimizer {device: cpu} changes nothing on "
			    "accelerator: cpu (the optimizer state is host memory already)",
			    z->label);
	} else if (z->offload_asked) {
		weft_ctx_options o = { .device = { .type = WEFT_DEVICE_CPU } };
		void *hkctx = NULL;
		weft_status st;

		if (!WEFT_HAS_MEMBER(g_host, weft_host, backward_from) || !g_host->ctx_create)
			return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': "
						 "offload_optimizer needs a weft host table with "
						 "ctx_create (ABI 1.1); rebuild the plugin and weft "
						 "together", z->label);
		st = g_host->ctx_create(&o, &z->hctx);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': offload_optimizer: making a "
						  "CPU context for the optimizer step", z->label);
		g_host->ctx_kernels(z->hctx, &z->hk, &hkctx);
		if (!z->hk || !WEFT_HAS_MEMBER(z->hk, weft_kernel_table, optim_step) ||
		    !z->hk->optim_step)
			return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': "
						 "offload_optimizer: the CPU kernel table has no "
						 "optim_step (weft ABI 1.3); rebuild weft", z->label);
		z->offload = 1;
	}
	return WEFT_OK;
}

float *zero_dalloc(zero *z, weft_mem_category cat, int64_t n, int zeroed, const char *what)
{
	void *b = NULL;
	weft_status st = z->k->mem_alloc(z->dev_index, cat, f32_bytes(n), &b);

	if (!st && zeroed) {
		st = z->k->zero(z->kctx, b, f32_bytes(n));
		if (st) {
			z->k->mem_free(z->dev_index, cat, b, f32_bytes(n));
			b = NULL;
		}
	}
	if (st) {
		g_host->error_wrap(st, "strategy '%s' (rank %d): allocating %s (%lld bytes)",
				   z->label, z->rank, what, (long long)n * 4);
		return NULL;
	}
	return b;
}

void zero_dfree(zero *z, weft_mem_category cat, float *p, int64_t n)
{
	if (p)
		z->k->mem_free(z->dev_index, cat, p, f32_bytes(n));
}

weft_status zero_dcopy(zero *z, float *dst, const float *src, int64_t n)
{
	weft_copy_range r = { .dst = 0, .src = 0, .count = n };

	return n > 0 ? z->k->copy_ranges(z->kctx, sizeof(float), &r, 1, dst, src) : WEFT_OK;
}

weft_status zero_dzero(zero *z, float *dst, int64_t n)
{
	return n > 0 ? z->k->zero(z->kctx, dst, (size_t)n * sizeof(float)) : WEFT_OK;
}

weft_status zero_dadd(zero *z, float *dst, const float *src, int64_t n)
{
	return n > 0 ? z->k->axpy(z->kctx, WEFT_F32, n, 1.0f, src, dst) : WEFT_OK;
}

/* The gradients of unit u's piece: stage 1 reads them in the model's whole
 * gradient buffer, stages 2 and 3 in the packed shard. */
static int64_t grad_offset(const zero *z, const zunit *u)
{
	return z->stage == 1 ? u->mine_lo : u->packed;
}

weft_status zero_dev_layout(zero *z)
{
	const weft_strategy_env *env = z->env;
	/* the pieces and the segments are two cuts of the flat buffer: their
	 * intersections number fewer than the pieces and segments together */
	size_t cap = z->n_units + env->nseg + 1;

	z->sq_ranges = calloc(z->n_units + 1, sizeof(*z->sq_ranges));
	z->opt_ranges = calloc(cap, sizeof(*z->opt_ranges));
	if (z->offload)
		z->h_ranges = calloc(cap, sizeof(*z->h_ranges));
	if (!z->sq_ranges || !z->opt_ranges || (z->offload && !z->h_ranges))
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory for the "
					 "ranges of %zu units", z->label, z->n_units);
	for (size_t k = 0; k < z->n_units; k++) {
		const zunit *u = &z->units[k];
		int64_t n = u->mine_hi - u->mine_lo;

		if (n <= 0)
			continue;
		z->sq_ranges[z->n_sq_ranges++] = (weft_elem_range){ .offset = grad_offset(z, u),
								    .count = n };
		/* the piece cut by the segments: one range per decay stretch */
		for (size_t s = 0; s < env->nseg; s++) {
			const weft_optim_segment *g = &env->segs[s];
			int64_t lo = g->offset > u->mine_lo ? g->offset : u->mine_lo;
			int64_t hi = g->offset + g->numel < u->mine_hi ? g->offset + g->numel :
									 u->mine_hi;
			double wd = z->kind == WEFT_OPTIM_KERNEL_SGD ? z->sp.weight_decay :
								       z->ap.weight_decay;
			int decay = g->decay && wd != 0.0;
			weft_optim_range *last;

			if (lo >= hi)
				continue;
			last = z->n_opt_ranges ? &z->opt_ranges[z->n_opt_ranges - 1] : NULL;
			if (last && last->decay == decay && last->param + last->count ==
			    (z->stage == 3 ? u->packed : u->mine_lo) + (lo - u->mine_lo) &&
			    last->grad + last->count == grad_offset(z, u) + (lo - u->mine_lo) &&
			    last->state + last->count == u->packed + (lo - u->mine_lo)) {
				last->count += hi - lo;
				continue;
			}
			z->opt_ranges[z->n_opt_ranges++] = (weft_optim_range){
				.param = (z->stage == 3 ? u->packed : u->mine_lo) + (lo - u->mine_lo),
				.grad = grad_offset(z, u) + (lo - u->mine_lo),
				.state = u->packed + (lo - u->mine_lo),
				.count = hi - lo,
				.decay = decay,
			};
		}
	}
	/* the host arrays are packed as the state is */
	for (size_t i = 0; z->offload && i < z->n_opt_ranges; i++) {
		z->h_ranges[i] = z->opt_ranges[i];
		z->h_ranges[i].param = z->h_ranges[i].grad = z->opt_ranges[i].state;
	}
	return WEFT_OK;
}

weft_status zero_dev_sumsq(zero *z, double *out)
{
	const float *base = z->stage == 1 ? z->full_grads : z->gshard;
	weft_status st = z->k->sum_squares_ranges(z->kctx, base, z->sq_ranges, z->n_sq_ranges,
						  out);

	if (st)
		return g_host->error_wrap(st, "strategy '%s': the gradient norm over this rank's "
					  "%zu pieces", z->label, z->n_sq_ranges);
	return WEFT_OK;
}

/* A checkpoint's host copy of the slots was handed out: it may hold a
 * loaded checkpoint, so it goes back to the device before the step. */
static weft_status mirror_upload(zero *z)
{
	size_t bytes = z->n_slots * f32_bytes(z->shard_numel);
	weft_status st;

	if (!z->mirror)
		return WEFT_OK;
	st = z->k->copy(z->kctx, z->slot_mem, z->mirror, bytes, WEFT_COPY_HOST_TO_DEVICE);
	if (st)
		return g_host->error_wrap(st, "strategy '%s': copying the optimizer state (%zu "
					  "bytes) back to the device", z->label, bytes);
	st = z->k->synchronize(z->kctx);
	if (st)
		return st;
	g_host->mem_free(z->mirror);
	z->mirror = NULL;
	return WEFT_OK;
}

/* Steps the pieces with the plugin's step() on host memory (the CPU). */
static weft_status host_step(zero *z, const weft_optim_step_info *in)
{
	const weft_strategy_env *env = z->env;

	for (size_t k = 0; k < z->n_units; k++) {
		const zunit *u = &z->units[k];
		float *slots[ZERO_MAX_SLOTS];
		float *params = z->stage == 3 ? z->pshard + u->packed : z->full_params + u->mine_lo;
		const float *grads = z->stage == 1 ? z->full_grads + u->mine_lo :
						     z->gshard + u->packed;
		weft_status st;

		if (u->mine_hi <= u->mine_lo)
			continue;
		for (size_t s = 0; s < z->n_slots; s++)
			slots[s] = z->slots[s] + u->packed;
		st = env->optim_ops->step(env->optim, env->segs, env->nseg, params, grads,
					  z->n_slots ? slots : NULL, u->mine_lo, u->mine_hi, in);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': optimizer step over elements "
						  "%lld..%lld", z->label, (long long)u->mine_lo,
						  (long long)u->mine_hi);
	}
	return WEFT_OK;
}

/* ---- optimizer offload ---------------------------------------------------- */

/* Copies this rank's pieces between the device array of kind `dev` (params
 * or grads: whole for stage 1 and 2 parameters and stage 1 gradients,
 * packed otherwise) and the packed host array. down = 1: to the host. */
static weft_status offload_copy(zero *z, float *dev, int packed, float *host, int down,
				const char *what)
{
	weft_copy_kind kind = down ? WEFT_COPY_DEVICE_TO_HOST : WEFT_COPY_HOST_TO_DEVICE;
	weft_status st = WEFT_OK;

	if (packed) {
		if (z->shard_numel > 0)
			st = z->k->copy(z->kctx, down ? (void *)host : dev, down ? dev : host,
					(size_t)z->shard_numel * sizeof(float), kind);
	} else {
		for (size_t k = 0; !st && k < z->n_units; k++) {
			const zunit *u = &z->units[k];
			int64_t n = u->mine_hi - u->mine_lo;

			if (n > 0)
				st = z->k->copy(z->kctx, down ? (void *)(host + u->packed) :
							       dev + u->mine_lo,
						down ? dev + u->mine_lo : host + u->packed,
						(size_t)n * sizeof(float), kind);
		}
	}
	if (st)
		return g_host->error_wrap(st, "strategy '%s' (rank %d): offload_optimizer: copying "
					  "this rank's %lld %s %s the host", z->label, z->rank,
					  (long long)z->shard_numel, what, down ? "to" : "from");
	return WEFT_OK;
}

static weft_status master_down(zero *z)
{
	weft_status st = z->stage == 3 ? offload_copy(z, z->pshard, 1, z->h_master, 1, "parameters")
				       : offload_copy(z, z->full_params, 0, z->h_master, 1,
						      "parameters");

	if (!st)
		z->master_stale = 0;
	return st;
}

weft_status zero_offload_setup(zero *z)
{
	size_t bytes = f32_bytes(z->shard_numel);

	z->slot_mem = g_host->mem_calloc(WEFT_MEM_OPTIM, z->n_slots * bytes);
	z->h_master = g_host->mem_alloc(WEFT_MEM_OPTIM, bytes);
	z->h_grads = g_host->mem_alloc(WEFT_MEM_GRADS, bytes);
	if (!z->slot_mem || !z->h_master || !z->h_grads)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s' (rank %d): "
					 "offload_optimizer: no host memory for the optimizer "
					 "state, master parameters and gradients of this rank's "
					 "shard (%zu bytes)", z->label, z->rank,
					 (z->n_slots + 2) * bytes);
	for (size_t k = 0; k < z->n_slots; k++)
		z->slots[k] = z->slot_mem + k * (size_t)z->shard_numel;
	/* the whole parameters are still there, in every stage */
	return offload_copy(z, z->full_params, 0, z->h_master, 1, "parameters");
}

weft_status zero_offload_grads_down(zero *z, const zunit *u)
{
	int64_t n = u->mine_hi - u->mine_lo;
	weft_status st;

	if (!z->offload || !z->last_micro || n <= 0)
		return WEFT_OK;
	st = z->k->copy(z->kctx, z->h_grads + u->packed, z->gshard + u->packed,
			(size_t)n * sizeof(float), WEFT_COPY_DEVICE_TO_HOST);
	if (st)
		return g_host->error_wrap(st, "strategy '%s' (rank %d): offload_optimizer: copying "
					  "%lld reduced gradients (elements %lld..%lld) to the host",
					  z->label, z->rank, (long long)n, (long long)u->mine_lo,
					  (long long)u->mine_hi);
	z->grads_down += n;
	return WEFT_OK;
}

/* The step on the host: the gradients not yet down go down, the CPU
 * table steps the master and the slots, the master goes up. */
static weft_status offload_step(zero *z, const weft_optim_step_info *in)
{
	weft_optim_kernel ok;
	weft_status st = WEFT_OK;

	if (z->master_stale)
		st = master_down(z);
	if (!st && z->grads_down != z->shard_numel)
		st = z->stage == 1 ? offload_copy(z, z->full_grads, 0, z->h_grads, 1, "gradients")
				   : offload_copy(z, z->gshard, 1, z->h_grads, 1, "gradients");
	if (st)
		return st;
	if (z->kind == WEFT_OPTIM_KERNEL_SGD)
		weft_optim_kernel_sgd(&ok, z->sp.momentum, z->sp.dampening, z->sp.nesterov,
				      z->sp.weight_decay, in->lr, in->step, in->grad_scale);
	else
		weft_optim_kernel_adam(&ok, z->ap.decoupled, z->ap.amsgrad, z->ap.beta1,
				       z->ap.beta2, z->ap.eps, z->ap.weight_decay, in->lr, in->step,
				       in->grad_scale);
	st = z->hk->optim_step(NULL, &ok, z->h_ranges, z->n_opt_ranges, z->h_master, z->h_grads,
			       z->slots);
	if (st)
		return g_host->error_wrap(st, "strategy '%s': offloaded %s step over this rank's "
					  "%zu ranges on the CPU", z->label,
					  z->env->optim_ops->head.name, z->n_opt_ranges);
	return z->stage == 3 ? offload_copy(z, z->pshard, 1, z->h_master, 0, "parameters")
			     : offload_copy(z, z->full_params, 0, z->h_master, 0, "parameters");
}

void zero_offload_fini(zero *z)
{
	if (z->offload) {
		g_host->mem_free(z->slot_mem);
		z->slot_mem = NULL;
	}
	g_host->mem_free(z->h_master);
	g_host->mem_free(z->h_grads);
	z->h_master = z->h_grads = NULL;
	if (z->hctx)
		g_host->ctx_free(z->hctx);
	z->hctx = NULL;
}

weft_status zero_dev_step(zero *z, const weft_optim_step_info *in)
{
	const char *name = z->env->optim_ops->head.name;
	float *params = z->stage == 3 ? z->pshard : z->full_params;
	const float *grads = z->stage == 1 ? z->full_grads : z->gshard;
	weft_optim_kernel ok;
	weft_status st;

	if (!z->fused)
		return host_step(z, in);
	/* what the plugin's step refuses, the device step refuses too */
	if (in->step < 1 || !(in->lr >= 0 && in->lr <= 1e300))
		return g_host->error_set(WEFT_ERR_INVALID_ARG, "%s: step %lld with lr %g: the step "
					 "must be >= 1 and lr a finite number >= 0", name,
					 (long long)in->step, in->lr);
	st = mirror_upload(z);
	if (st)
		return st;
	if (z->offload)
		return offload_step(z, in);
	if (z->kind == WEFT_OPTIM_KERNEL_SGD)
		weft_optim_kernel_sgd(&ok, z->sp.momentum, z->sp.dampening, z->sp.nesterov,
				      z->sp.weight_decay, in->lr, in->step, in->grad_scale);
	else
		weft_optim_kernel_adam(&ok, z->ap.decoupled, z->ap.amsgrad, z->ap.beta1,
				       z->ap.beta2, z->ap.eps, z->ap.weight_decay, in->lr, in->step,
				       in->grad_scale);
	st = z->k->optim_step(z->kctx, &ok, z->opt_ranges, z->n_opt_ranges, params, grads,
			      z->slots);
	if (st)
		return g_host->error_wrap(st, "strategy '%s': %s step over this rank's %zu ranges "
					  "on %s", z->label, name, z->n_opt_ranges,
					  z->k->head.name);
	return WEFT_OK;
}

weft_status zero_dev_state(zero *z, float *const **slots)
{
	size_t bytes = z->n_slots * f32_bytes(z->shard_numel);
	weft_status st;

	*slots = z->slots;
	/* a checkpoint may be loaded into the parameters as well: the master
	 * is taken from the device again before the next step */
	z->master_stale = 1;
	if (z->on_cpu || z->offload || !z->n_slots)
		return WEFT_OK;
	/* a mirror that exists already holds the truth: no step ran since
	 * it was made, and a checkpoint may have been loaded into it. It is
	 * host staging for the checkpoint's file, counted as "other": the
	 * optimizer category is the device's state, what the plan predicts */
	if (!z->mirror) {
		z->mirror = g_host->mem_alloc(WEFT_MEM_OTHER, bytes);
		if (!z->mirror)
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': no host memory for "
						 "a copy of the optimizer state (%zu bytes) for a "
						 "checkpoint", z->label, bytes);
		st = z->k->copy(z->kctx, z->mirror, z->slot_mem, bytes, WEFT_COPY_DEVICE_TO_HOST);
		if (st) {
			g_host->mem_free(z->mirror);
			z->mirror = NULL;
			return g_host->error_wrap(st, "strategy '%s': copying the optimizer state "
						  "to the host for a checkpoint", z->label);
		}
		for (size_t k = 0; k < z->n_slots; k++)
			z->mirror_slots[k] = z->mirror + k * (size_t)z->shard_numel;
	}
	*slots = z->mirror_slots;
	return WEFT_OK;
}

void zero_dev_fini(zero *z)
{
	g_host->mem_free(z->mirror);
	z->mirror = NULL;
	free(z->sq_ranges);
	free(z->opt_ranges);
	free(z->h_ranges);
}
