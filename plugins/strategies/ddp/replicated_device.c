/* The optimizer step of the replicated strategies (single, ddp) when the
 * model's flat parameters and gradients live on a CUDA device.
 *
 * The optimizer plugin ABI (weft/optim.h) works on host memory: step()
 * reads and writes plain float arrays, and a third-party optimizer knows
 * nothing else. So there are two paths, chosen once at setup:
 *
 *   fused kernel  when the optimizer says it is exactly the Adam family's
 *                 update (weft_optim_ops.adam_params: built-in adam and
 *                 adamw) in a form the CUDA library's adamw_step computes
 *                 (no amsgrad; decoupled decay, or no decay at all), and the
 *                 library has the kernel. The optimizer state lives on the
 *                 device; clipping takes the norm with the library's
 *                 sum_squares and folds the factor into grad_scale, as the
 *                 CPU path does. adamw_step rounds every operation as the
 *                 CPU plugin does, so a step is bit-identical to the CPU
 *                 one on the same inputs (only the clipping norm is summed
 *                 in another order). With the trainer's 16-bit weight
 *                 copy (env->params_copy, ABI 1.7) each launch also
 *                 writes the new weights' rounding into it, and the step
 *                 reports copy_refreshed.
 *   host-staged   for every other optimizer. The optimizer state lives in
 *                 host memory; each step copies the gradients and the
 *                 parameters into pinned host buffers, clips and runs the
 *                 plugin's step() there (the very code of the CPU path, on
 *                 the same values: bit-identical), and copies the new
 *                 parameters back (the trainer then rounds them into its
 *                 weight copy). The parameters are read back every step
 *                 rather than kept on the host between steps, so weights
 *                 written on the device by anyone else (a checkpoint
 *                 loaded, the start-up broadcast) are always the ones
 *                 stepped.
 *
 * How the CUDA library is reached: this plugin links no CUDA. The library
 * (weft_kernels_cuda.so) is already loaded when a tensor lives on a CUDA
 * device; the host hands out its extras table (weft/cuda_extras.h:
 * pinned host memory, copy_sync, adamw_step and sum_squares) through
 * host->cuda_extras, the core's one lookup. The fused path also needs the
 * kernel table and the device context env->ctx computes on, from the
 * host's ctx_kernels, to allocate its state and to launch on the compute
 * stream.
 *
 * Ordering: copy_sync runs on the device's legacy default stream, which
 * waits for the work issued before on every compute stream (they are
 * blocking streams), so the gradients are read once backward and the
 * gradient all-reduce have written them. The fused kernels run on env->ctx's
 * stream, after backward and before the next forward.
 *
 * Checkpoints see host memory in both paths: the host-staged state is host
 * memory already; the fused state is copied to a host mirror when the
 * trainer asks for the state, and the mirror is copied back before the
 * next step (the trainer may have loaded a checkpoint into it). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/cuda_extras.h"
#include "replicated.h"

/* A stretch of consecutive parameters with the same decay flag: one fused
 * kernel launch. */
typedef struct fused_run {
	int64_t begin, end;
	int decay;
} fused_run;

struct replicated_dev {
	const weft_cuda_extras *ex;
	int32_t index;          /* the CUDA device */
	int fused;
	/* host-staged */
	float *h_params, *h_grads; /* pinned copies of the flat buffers */
	size_t h_bytes;            /* bytes of each */
	/* fused */
	const weft_kernel_table *k;
	void *kctx;
	weft_optim_adam_params ap;
	float *d_slots;            /* n_slots * numel floats of device memory */
	fused_run *runs;
	size_t n_runs;
	int runs_cover;            /* the runs hold every element (the copy is written whole) */
	float *mirror;             /* host copy of d_slots for checkpoints, or NULL */
	float *mirror_slots[8];
};

/* The extras of the loaded CUDA kernel library with the staging copies, or
 * NULL with the last error set (WEFT_ERR_UNSUPPORTED). */
static const weft_cuda_extras *find_extras(const weft_strategy_env *env)
{
	const weft_cuda_extras *ex = NULL;
	const char *file = NULL;

	if (!WEFT_HAS_MEMBER(g_host, weft_host, cuda_extras) || !g_host->cuda_extras) {
		g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy: the parameters are on cuda:%d "
				  "but this weft's host has no cuda_extras (ABI %u.%u, 1.3 needed); "
				  "use the weft this plugin was built with, or accelerator: cpu",
				  (int)env->device.index,
				  WEFT_ABI_VERSION_MAJOR(g_host->head.abi_version),
				  WEFT_ABI_VERSION_MINOR(g_host->head.abi_version));
		return NULL;
	}
	if (g_host->cuda_extras(&ex, &file) != WEFT_OK) {
		char why[512];

		/* copied: the message below is written over the last error */
		snprintf(why, sizeof(why), "%s", g_host->error_last());
		g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy: the parameters are on cuda:%d "
				  "but %s; use accelerator: cpu, or a build with CUDA",
				  (int)env->device.index, why);
		return NULL;
	}
	if (!WEFT_HAS_MEMBER(ex, weft_cuda_extras, copy_sync) || !ex->host_alloc ||
	    !ex->host_free || !ex->copy_sync) {
		g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy: %s has no staging copies (%s's "
				  "copy_sync): it was built for an older weft; rebuild it with "
				  "this one", file, WEFT_CUDA_EXTRAS_SYMBOL);
		return NULL;
	}
	return ex;
}

/* Whether the fused kernel computes this optimizer's update; when not,
 * *why says what rules it out (for the log line). */
static int fused_fits(replicated *r, replicated_dev *d, const char **why)
{
	const weft_strategy_env *env = r->env;
	const weft_optim_ops *ops = env->optim_ops;

	d->ap = (weft_optim_adam_params){ .struct_size = sizeof(d->ap) };
	*why = NULL;
	if (env->device.type != WEFT_DEVICE_CUDA) {
		*why = "not a CUDA device";
		return 0;
	}
	if (!WEFT_HAS_MEMBER(ops, weft_optim_ops, adam_params) || !ops->adam_params ||
	    !ops->adam_params(env->optim, &d->ap)) {
		*why = "no fused kernel for this optimizer";
		return 0;
	}
	if (d->ap.amsgrad) {
		*why = "amsgrad has no fused kernel";
		return 0;
	}
	if (!d->ap.decoupled && d->ap.weight_decay != 0.0) {
		*why = "adam's L2 weight decay has no fused kernel (adamw's decoupled decay has)";
		return 0;
	}
	if (r->n_slots != 2) {
		*why = "the optimizer does not keep exactly exp_avg and exp_avg_sq";
		return 0;
	}
	if (!d->ex->adamw_step ||
	    (env->gradient_clip_val > 0 &&
	     (!WEFT_HAS_MEMBER(d->ex, weft_cuda_extras, sum_squares) || !d->ex->sum_squares))) {
		*why = "the CUDA kernel library lacks adamw_step or sum_squares (an older build)";
		return 0;
	}
	if (!WEFT_HAS_MEMBER(g_host, weft_host, ctx_kernels) || !g_host->ctx_kernels) {
		*why = "the host has no ctx_kernels (an older weft)";
		return 0;
	}
	g_host->ctx_kernels(env->ctx, &d->k, &d->kctx);
	if (!d->k || strcmp(d->k->head.name, "cuda") != 0 || !d->kctx) {
		*why = "the model's context does not compute with the CUDA kernels";
		return 0;
	}
	return 1;
}

/* The stretches of parameters with one decay flag, from the segments. */
static weft_status make_runs(replicated *r, replicated_dev *d)
{
	const weft_strategy_env *env = r->env;
	int64_t covered = 0;

	d->runs = calloc(env->nseg ? env->nseg : 1, sizeof(*d->runs));
	if (!d->runs)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy: out of memory for %zu "
					 "optimizer runs", env->nseg);
	for (size_t i = 0; i < env->nseg; i++) {
		const weft_optim_segment *s = &env->segs[i];
		int decay = s->decay && d->ap.weight_decay != 0.0;
		fused_run *last = d->n_runs ? &d->runs[d->n_runs - 1] : NULL;

		if (s->numel <= 0 || s->offset < 0 || s->offset + s->numel > r->numel)
			return g_host->error_set(WEFT_ERR_INVALID_ARG, "strategy: segment '%s' "
						 "[%lld, +%lld) is outside the %lld flat parameters",
						 s->name ? s->name : "?", (long long)s->offset,
						 (long long)s->numel, (long long)r->numel);
		if (last && last->end == s->offset && last->decay == decay) {
			last->end += s->numel;
			continue;
		}
		d->runs[d->n_runs++] = (fused_run){ .begin = s->offset,
						    .end = s->offset + s->numel,
						    .decay = decay };
	}
	/* sorted and disjoint (weft/optim.h): as many elements as the buffer
	 * means every one */
	for (size_t i = 0; i < d->n_runs; i++)
		covered += d->runs[i].end - d->runs[i].begin;
	d->runs_cover = covered == r->numel;
	return WEFT_OK;
}

static weft_status fused_init(replicated *r, replicated_dev *d)
{
	size_t bytes = r->n_slots * (size_t)r->numel * sizeof(float);
	weft_status st = make_runs(r, d);

	if (!st)
		st = d->k->mem_alloc(d->index, WEFT_MEM_OPTIM, bytes, (void **)&d->d_slots);
	if (!st)
		st = d->k->zero(d->kctx, d->d_slots, bytes);
	return st;
}

static weft_status staged_init(replicated *r, replicated_dev *d)
{
	weft_status st;

	d->h_bytes = (size_t)r->numel * sizeof(float);
	st = d->ex->host_alloc(WEFT_MEM_PARAMS, d->h_bytes, (void **)&d->h_params);
	if (!st)
		st = d->ex->host_alloc(WEFT_MEM_GRADS, d->h_bytes, (void **)&d->h_grads);
	if (st)
		return st;
	if (r->n_slots) {
		r->slot_mem = g_host->mem_calloc(WEFT_MEM_OPTIM,
						 r->n_slots * (size_t)r->numel * sizeof(float));
		if (!r->slot_mem)
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy: no room for %zu "
						 "optimizer state slots of %lld floats",
						 r->n_slots, (long long)r->numel);
		for (size_t k = 0; k < r->n_slots; k++)
			r->slots[k] = r->slot_mem + k * (size_t)r->numel;
	}
	return WEFT_OK;
}

weft_status replicated_dev_init(replicated *r)
{
	const weft_strategy_env *env = r->env;
	const char *why = NULL;
	replicated_dev *d;
	weft_status st;

	d = calloc(1, sizeof(*d));
	if (!d)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy: out of memory");
	r->dev = d;
	d->index = env->device.index;
	d->ex = find_extras(env);
	if (!d->ex)
		return WEFT_ERR_UNSUPPORTED;
	d->fused = fused_fits(r, d, &why);
	st = d->fused ? fused_init(r, d) : staged_init(r, d);
	if (st)
		return g_host->error_wrap(st, "strategy: optimizer state for %lld parameters on "
					  "cuda:%d", (long long)r->numel, (int)d->index);
	if (env->rank == 0) {
		if (d->fused)
			g_host->log(WEFT_LOG_INFO, "optimizer %s on cuda:%d (fused kernel)",
				    env->optim_ops->head.name, (int)d->index);
		else
			g_host->log(WEFT_LOG_INFO, "optimizer %s on cuda:%d (host-staged: %s)",
				    env->optim_ops->head.name, (int)d->index, why);
	}
	return WEFT_OK;
}

static void mirror_free(replicated *r)
{
	replicated_dev *d = r->dev;

	if (!d->mirror)
		return;
	d->ex->host_free(WEFT_MEM_OPTIM, d->mirror, r->n_slots * (size_t)r->numel * sizeof(float));
	d->mirror = NULL;
}

void replicated_dev_fini(replicated *r)
{
	replicated_dev *d = r->dev;

	if (!d)
		return;
	mirror_free(r);
	if (d->d_slots)
		d->k->mem_free(d->index, WEFT_MEM_OPTIM, d->d_slots,
			       r->n_slots * (size_t)r->numel * sizeof(float));
	if (d->ex) {
		d->ex->host_free(WEFT_MEM_PARAMS, d->h_params, d->h_bytes);
		d->ex->host_free(WEFT_MEM_GRADS, d->h_grads, d->h_bytes);
	}
	free(d->runs);
	free(d);
	r->dev = NULL;
}

static weft_status copy(replicated *r, void *dst, const void *src, size_t bytes,
			weft_copy_kind kind, const char *what)
{
	replicated_dev *d = r->dev;
	weft_status st = d->ex->copy_sync(d->index, dst, src, bytes, kind);

	if (st)
		return g_host->error_wrap(st, "strategy: copying %s (%zu bytes) %s cuda:%d", what,
					  bytes, kind == WEFT_COPY_HOST_TO_DEVICE ? "to" : "from",
					  (int)d->index);
	return WEFT_OK;
}

static weft_status staged_step(replicated *r, const weft_optim_step_info *info,
			       double *grad_norm)
{
	const weft_strategy_env *env = r->env;
	replicated_dev *d = r->dev;
	weft_optim_step_info in = *info;
	weft_status st;

	st = copy(r, d->h_grads, r->grads, d->h_bytes, WEFT_COPY_DEVICE_TO_HOST, "the gradients");
	if (!st)
		st = copy(r, d->h_params, r->params, d->h_bytes, WEFT_COPY_DEVICE_TO_HOST,
			  "the parameters");
	if (st)
		return st;
	/* from here on, exactly the CPU path of replicated_step */
	if (env->gradient_clip_val > 0) {
		const float *arr = d->h_grads;
		int64_t len = r->numel;
		double sumsq = g_host->clip_sum_squares(&arr, &len, 1) * in.grad_scale * in.grad_scale;

		in.grad_scale *= g_host->clip_coef(sumsq, env->gradient_clip_val, grad_norm);
	}
	st = env->optim_ops->step(env->optim, env->segs, env->nseg, d->h_params, d->h_grads,
				  r->slots, 0, r->numel, &in);
	if (st)
		return st;
	return copy(r, r->params, d->h_params, d->h_bytes, WEFT_COPY_HOST_TO_DEVICE,
		    "the updated parameters");
}

/* A checkpoint's state view was handed out: copy it back to the device
 * (it may hold a loaded checkpoint) and drop it. */
static weft_status mirror_upload(replicated *r)
{
	replicated_dev *d = r->dev;
	weft_status st;

	if (!d->mirror)
		return WEFT_OK;
	st = copy(r, d->d_slots, d->mirror, r->n_slots * (size_t)r->numel * sizeof(float),
		  WEFT_COPY_HOST_TO_DEVICE, "the optimizer state");
	if (!st)
		mirror_free(r);
	return st;
}

static weft_status fused_step(replicated *r, const weft_optim_step_info *info, double *grad_norm)
{
	const weft_strategy_env *env = r->env;
	replicated_dev *d = r->dev;
	const char *name = env->optim_ops->head.name;
	double grad_scale = info->grad_scale;
	float *m = d->d_slots, *v = d->d_slots + r->numel;
	/* the 16-bit weight copy, written by the same kernel as the weights */
	uint16_t *copy = d->runs_cover ? r->copy : NULL; /* BF16 or F16 */
	weft_status st;

	/* what the plugin's step refuses, the fused step refuses too */
	if (info->step < 1 || !isfinite(info->lr) || info->lr < 0)
		return g_host->error_set(WEFT_ERR_INVALID_ARG, "%s: step %lld with lr %g: the step "
					 "must be >= 1 and lr a finite number >= 0", name,
					 (long long)info->step, info->lr);
	st = mirror_upload(r);
	if (st)
		return st;
	if (env->gradient_clip_val > 0) {
		double sumsq = 0.0;

		st = d->ex->sum_squares(d->kctx, r->numel, r->grads, &sumsq);
		if (st)
			return g_host->error_wrap(st, "strategy: gradient norm on cuda:%d",
						  (int)d->index);
		sumsq *= grad_scale * grad_scale;
		grad_scale *= g_host->clip_coef(sumsq, env->gradient_clip_val, grad_norm);
	}
	for (size_t i = 0; i < d->n_runs; i++) {
		const fused_run *u = &d->runs[i];
		weft_cuda_adamw_coef c;

		weft_cuda_adamw_coef_make(d->ap.beta1, d->ap.beta2, d->ap.eps, d->ap.weight_decay,
					  info->lr, info->step, grad_scale, u->decay, &c);
		st = d->ex->adamw_step(d->kctx, &c, u->end - u->begin, r->params + u->begin,
				       WEFT_F32, r->grads + u->begin, m + u->begin, v + u->begin,
				       copy ? r->copy_dt : WEFT_F32,
				       copy ? copy + u->begin : NULL);
		if (st)
			return g_host->error_wrap(st, "strategy: %s step on cuda:%d, elements "
						  "[%lld, %lld)", name, (int)d->index,
						  (long long)u->begin, (long long)u->end);
	}
	r->copy_written = copy != NULL;
	return WEFT_OK;
}

weft_status replicated_dev_step(replicated *r, const weft_optim_step_info *in, double *grad_norm)
{
	return r->dev->fused ? fused_step(r, in, grad_norm) : staged_step(r, in, grad_norm);
}

weft_status replicated_dev_state(replicated *r, weft_strategy_state *out)
{
	replicated_dev *d = r->dev;
	size_t bytes = r->n_slots * (size_t)r->numel * sizeof(float);
	float *const *slots = r->slots;
	weft_status st;

	/* A mirror that exists already holds the truth: no fused step ran
	 * since it was made (the next one uploads it first), and it may hold
	 * a checkpoint loaded since (a skipped 16-mixed step leaves it). */
	if (d->fused && !d->mirror) {
		st = d->ex->host_alloc(WEFT_MEM_OPTIM, bytes, (void **)&d->mirror);
		if (st)
			return g_host->error_wrap(st, "strategy: a host copy of the optimizer state "
						  "for a checkpoint");
		for (size_t k = 0; k < r->n_slots; k++)
			d->mirror_slots[k] = d->mirror + k * (size_t)r->numel;
		/* the state as the last step left it (copy_sync waits for it) */
		st = copy(r, d->mirror, d->d_slots, bytes, WEFT_COPY_DEVICE_TO_HOST,
			  "the optimizer state");
		if (st) {
			mirror_free(r);
			return st;
		}
	}
	if (d->fused)
		slots = d->mirror_slots;
	*out = (weft_strategy_state){
		.struct_size = sizeof(*out),
		.n_slots = (uint32_t)r->n_slots,
		.begin = 0,
		.end = r->numel,
		.slots = slots,
	};
	return WEFT_OK;
}
