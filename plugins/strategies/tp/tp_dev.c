/* strategy tp's device layer (contract in tp_dev.h). */
#include <string.h>

#include "tp_dev.h"

/* Whether the optimizer's update is one optim_step computes (d->okind);
 * *why says what rules it out. */
static int optim_fits(tp_dev *d, const weft_strategy_env *env, const char **why)
{
	const weft_optim_ops *ops = env->optim_ops;
	size_t n_slots = ops->state_slots(env->optim);

	d->ap = (weft_optim_adam_params){ .struct_size = sizeof(d->ap) };
	d->sp = (weft_optim_sgd_params){ .struct_size = sizeof(d->sp) };
	if (WEFT_HAS_MEMBER(ops, weft_optim_ops, adam_params) && ops->adam_params &&
	    ops->adam_params(env->optim, &d->ap)) {
		d->okind = WEFT_OPTIM_KERNEL_ADAM;
		if (d->ap.amsgrad ? n_slots != 3 : n_slots != 2) {
			*why = "its state slots are not exp_avg, exp_avg_sq (and max_exp_avg_sq)";
			return 0;
		}
		return 1;
	}
	if (WEFT_HAS_MEMBER(ops, weft_optim_ops, sgd_params) && ops->sgd_params &&
	    ops->sgd_params(env->optim, &d->sp)) {
		d->okind = WEFT_OPTIM_KERNEL_SGD;
		if (n_slots != (d->sp.momentum != 0.0 ? 1u : 0u)) {
			*why = "its state slots are not sgd's momentum_buffer";
			return 0;
		}
		return 1;
	}
	*why = "it describes no update a device kernel computes (adam, adamw and sgd do)";
	return 0;
}

weft_status tp_dev_check(const weft_host *host, const weft_strategy_env *env)
{
	tp_dev probe = { .host = host };
	const char *why = NULL;

	if (env->device.type == WEFT_DEVICE_CPU || optim_fits(&probe, env, &why))
		return WEFT_OK;
	return host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'tp' on accelerator: cuda steps "
			       "the optimizer on the device, and optimizer '%s' has no device "
			       "kernel (%s); use optimizer adam, adamw or sgd, or accelerator: "
			       "cpu", env->optim_ops->head.name, why);
}

weft_status tp_dev_init(tp_dev *d, const weft_host *host, const weft_strategy_env *env)
{
	const char *why = NULL;

	memset(d, 0, sizeof(*d));
	d->host = host;
	d->env = env;
	d->index = env->device.index;
	d->on_cpu = env->device.type == WEFT_DEVICE_CPU;
	if (!WEFT_HAS_MEMBER(host, weft_host, ctx_kernels) || !host->ctx_kernels)
		return host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'tp': this weft's host "
				       "table has no ctx_kernels (an older weft); rebuild the "
				       "plugin and weft together");
	host->ctx_kernels(env->ctx, &d->k, &d->kctx);
	if (!d->k || !WEFT_HAS_MEMBER(d->k, weft_kernel_table, optim_step) ||
	    !d->k->copy_ranges || !d->k->sum_squares_ranges || !d->k->optim_step)
		return host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'tp': the '%s' kernel "
				       "table has no device services for strategies (copy_ranges, "
				       "sum_squares_ranges, optim_step: weft ABI 1.3); rebuild it "
				       "with this weft", d->k ? d->k->head.name : "?");
	if (d->on_cpu || optim_fits(d, env, &why))
		return WEFT_OK;
	return tp_dev_check(host, env);
}

weft_comm_buf tp_dev_buf(const tp_dev *d, void *data, int64_t n, weft_comm_dtype dt)
{
	return (weft_comm_buf){
		.data = data,
		.count = n,
		.dtype = dt,
		.device = d->on_cpu ? WEFT_COMM_DEVICE_CPU : WEFT_COMM_DEVICE_CUDA,
		.device_index = d->on_cpu ? 0 : d->index,
	};
}

static size_t f32_bytes(int64_t n)
{
	return (size_t)(n > 0 ? n : 1) * sizeof(float);
}

float *tp_dev_alloc(const tp_dev *d, weft_mem_category cat, int64_t n, const char *what)
{
	void *b = NULL;
	weft_status st;

	if (d->on_cpu) {
		b = d->host->mem_calloc(cat, f32_bytes(n));
		if (!b)
			d->host->error_set(WEFT_ERR_NOMEM, "strategy 'tp' (rank %d): out of memory "
					   "for %s (%zu bytes)", (int)d->env->rank, what,
					   f32_bytes(n));
		return b;
	}
	st = d->k->mem_alloc(d->index, cat, f32_bytes(n), &b);
	if (!st) {
		st = d->k->zero(d->kctx, b, f32_bytes(n));
		if (st) {
			d->k->mem_free(d->index, cat, b, f32_bytes(n));
			b = NULL;
		}
	}
	if (st) {
		d->host->error_wrap(st, "strategy 'tp' (rank %d): allocating %s (%zu bytes) on %s",
				    (int)d->env->rank, what, f32_bytes(n), d->k->head.name);
		return NULL;
	}
	return b;
}

void tp_dev_free(const tp_dev *d, weft_mem_category cat, float *p, int64_t n)
{
	if (!p)
		return;
	if (d->on_cpu)
		d->host->mem_free(p);
	else
		d->k->mem_free(d->index, cat, p, f32_bytes(n));
}

void tp_dev_cut(const tp_dev *d, int64_t lo, int64_t hi, int64_t state_at, weft_optim_range *r,
		size_t *n)
{
	const weft_strategy_env *env = d->env;
	double wd = d->okind == WEFT_OPTIM_KERNEL_SGD ? d->sp.weight_decay : d->ap.weight_decay;
	size_t first = *n;

	for (size_t g = 0; g < env->nseg; g++) {
		const weft_optim_segment *sg = &env->segs[g];
		int64_t b = sg->offset > lo ? sg->offset : lo;
		int64_t e = sg->offset + sg->numel < hi ? sg->offset + sg->numel : hi;
		int decay = sg->decay && wd != 0.0;
		weft_optim_range x;

		if (b >= e)
			continue;
		x = (weft_optim_range){ .param = b, .grad = b, .state = state_at + (b - lo),
					.count = e - b, .decay = decay };
		if (*n > first) {
			weft_optim_range *l = &r[*n - 1];

			if (l->decay == decay && l->param + l->count == x.param &&
			    l->state + l->count == x.state) {
				l->count += x.count;
				continue;
			}
		}
		r[(*n)++] = x;
	}
}

/* A checkpoint's mirror goes back to the device before the step (it may
 * hold a loaded checkpoint). */
static weft_status mirror_upload(const tp_dev *d, tp_mirror *m, float *slot_mem,
				 size_t n_slots, int64_t len)
{
	size_t bytes = n_slots * f32_bytes(len);
	weft_status st;

	if (!m->mem)
		return WEFT_OK;
	st = d->k->copy(d->kctx, slot_mem, m->mem, bytes, WEFT_COPY_HOST_TO_DEVICE);
	if (!st)
		st = d->k->synchronize(d->kctx);
	if (st)
		return d->host->error_wrap(st, "strategy 'tp': copying the optimizer state (%zu "
					   "bytes) back to the device", bytes);
	tp_dev_mirror_free(d, m);
	return WEFT_OK;
}

weft_status tp_dev_step(const tp_dev *d, const weft_optim_step_info *in,
			const weft_optim_range *r, size_t n, float *params, const float *grads,
			float *const *slots, tp_mirror *m, float *slot_mem, size_t n_slots,
			int64_t len)
{
	const char *name = d->env->optim_ops->head.name;
	weft_optim_kernel ok;
	weft_status st;

	/* what the plugin's step refuses, the device step refuses too */
	if (in->step < 1 || !(in->lr >= 0 && in->lr <= 1e300))
		return d->host->error_set(WEFT_ERR_INVALID_ARG, "%s: step %lld with lr %g: the "
					  "step must be >= 1 and lr a finite number >= 0", name,
					  (long long)in->step, in->lr);
	if ((st = mirror_upload(d, m, slot_mem, n_slots, len)))
		return st;
	if (!n)
		return WEFT_OK;
	if (d->okind == WEFT_OPTIM_KERNEL_SGD)
		weft_optim_kernel_sgd(&ok, d->sp.momentum, d->sp.dampening, d->sp.nesterov,
				      d->sp.weight_decay, in->lr, in->step, in->grad_scale);
	else
		weft_optim_kernel_adam(&ok, d->ap.decoupled, d->ap.amsgrad, d->ap.beta1,
				       d->ap.beta2, d->ap.eps, d->ap.weight_decay, in->lr, in->step,
				       in->grad_scale);
	st = d->k->optim_step(d->kctx, &ok, r, n, params, grads, slots);
	if (st)
		return d->host->error_wrap(st, "strategy 'tp': %s step over this rank's %zu ranges "
					   "on %s", name, n, d->k->head.name);
	return WEFT_OK;
}

weft_status tp_dev_state(const tp_dev *d, float *const *slots, tp_mirror *m,
			 const float *slot_mem, size_t n_slots, int64_t len, float *const **out)
{
	size_t bytes = n_slots * f32_bytes(len);
	weft_status st;

	*out = slots;
	if (d->on_cpu || !n_slots)
		return WEFT_OK;
	/* a mirror that exists already holds the truth: no step ran since it
	 * was made, and a checkpoint may have been loaded into it */
	if (!m->mem) {
		m->mem = d->host->mem_alloc(WEFT_MEM_OPTIM, bytes);
		if (!m->mem)
			return d->host->error_set(WEFT_ERR_NOMEM, "strategy 'tp': no host memory "
						  "for a copy of the optimizer state (%zu bytes) "
						  "for a checkpoint", bytes);
		st = d->k->copy(d->kctx, m->mem, slot_mem, bytes, WEFT_COPY_DEVICE_TO_HOST);
		if (st) {
			tp_dev_mirror_free(d, m);
			return d->host->error_wrap(st, "strategy 'tp': copying the optimizer state "
						   "to the host for a checkpoint");
		}
		for (size_t k = 0; k < n_slots; k++)
			m->slots[k] = m->mem + k * (size_t)(len > 0 ? len : 1);
	}
	*out = m->slots;
	return WEFT_OK;
}

void tp_dev_mirror_free(const tp_dev *d, tp_mirror *m)
{
	if (m->mem)
		d->host->mem_free(m->mem);
	memset(m, 0, sizeof(*m));
}
