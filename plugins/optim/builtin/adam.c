/* adam, adamw - Adam (Kingma & Ba) with L2 weight decay, and AdamW
 * (Loshchilov & Hutter) with decoupled weight decay, with the amsgrad
 * option, step for step as torch.optim.Adam / AdamW (single-tensor path):
 *
 *   g = g + weight_decay * p                  (adam, tensors with decay)
 *   p = p * (1 - lr * weight_decay)           (adamw, tensors with decay)
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g * g
 *   vmax = max(vmax, v); use vmax for v       (amsgrad)
 *   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
 *   p = p - (lr / (1 - beta1^t)) * m / denom
 *
 * The bias corrections and step size are computed in double once per
 * step, as PyTorch does in Python, then rounded to float; the per-element
 * arithmetic is float, in PyTorch's order. Keys: betas ([0.9, 0.999]),
 * eps (1e-8), weight_decay (adam 0, adamw 0.01), amsgrad (false). Slots:
 * exp_avg, exp_avg_sq, and max_exp_avg_sq with amsgrad.
 */
#include <math.h>
#include <stdlib.h>
#include "builtin_impl.h"

struct adam {
	const char *who;
	double beta1;
	double beta2;
	double eps;
	double weight_decay;
	int amsgrad;
	int decoupled; /* adamw */
};

struct adam_coef {
	float grad_scale;
	float weight_decay;  /* adam: L2 coefficient */
	float decay_factor;  /* adamw: 1 - lr * weight_decay */
	float beta1, one_minus_beta1;
	float beta2, one_minus_beta2;
	float bias_correction2_sqrt;
	float eps;
	float neg_step_size; /* -lr / (1 - beta1^t) */
};

static weft_status adam_create_common(const weft_cfg *section, int decoupled, void **state_out)
{
	const weft_host *h = optim_host;
	struct adam o = {
		.who = decoupled ? "adamw" : "adam",
		.decoupled = decoupled,
	};
	double betas[2];
	struct adam *obj;
	weft_status st;

	st = optim_read_betas(section, 0.9, 0.999, betas);
	if (st != WEFT_OK)
		return st;
	o.beta1 = betas[0];
	o.beta2 = betas[1];
	st = optim_read_float(section, "eps", 1e-8, 0.0, INFINITY, 0,
			      "eps keeps the denominator away from zero (typical 1e-8)", &o.eps);
	if (st != WEFT_OK)
		return st;
	st = optim_read_float(section, "weight_decay", decoupled ? 0.01 : 0.0, 0.0, INFINITY, 0,
			      decoupled ? "weight_decay is the decoupled decay rate (typical 0.01 to 0.1)"
					: "weight_decay is an L2 penalty coefficient; for decoupled "
					  "decay use name: adamw",
			      &o.weight_decay);
	if (st != WEFT_OK)
		return st;
	st = h->cfg_bool(section, "amsgrad", 0, &o.amsgrad);
	if (st != WEFT_OK)
		return st;

	obj = malloc(sizeof(*obj));
	if (!obj)
		return h->error_set(WEFT_ERR_NOMEM, "%s: out of memory creating the optimizer", o.who);
	*obj = o;
	*state_out = obj;
	return WEFT_OK;
}

static weft_status adam_create(const weft_cfg *section, void **state_out)
{
	return adam_create_common(section, 0, state_out);
}

static weft_status adamw_create(const weft_cfg *section, void **state_out)
{
	return adam_create_common(section, 1, state_out);
}

static void adam_destroy(void *state)
{
	free(state);
}

static size_t adam_state_slots(const void *state)
{
	const struct adam *o = state;

	return o->amsgrad ? 3 : 2;
}

static const char *adam_slot_name(const void *state, size_t slot)
{
	static const char *const names[] = { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" };

	return slot < adam_state_slots(state) ? names[slot] : NULL;
}

/* The update of n elements; flags are constants at every call site. */
static inline __attribute__((always_inline)) void
adam_run(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
	 float *restrict vmax, int64_t n, const struct adam_coef *c, const int l2,
	 const int decoupled, const int amsgrad)
{
	const float gs = c->grad_scale, wd = c->weight_decay, keep = c->decay_factor;
	const float b1 = c->beta1, b1c = c->one_minus_beta1;
	const float b2 = c->beta2, b2c = c->one_minus_beta2;
	const float bc2 = c->bias_correction2_sqrt, eps = c->eps, nss = c->neg_step_size;

	for (int64_t i = 0; i < n; i++) {
		float gi = g[i] * gs;
		float pi = p[i];
		float mi, vi, denom;

		if (l2)
			gi = gi + wd * pi;
		if (decoupled)
			pi = pi * keep;
		mi = m[i] * b1 + b1c * gi;
		vi = v[i] * b2 + b2c * gi * gi;
		m[i] = mi;
		v[i] = vi;
		if (amsgrad) {
			vi = vmax[i] > vi ? vmax[i] : vi;
			vmax[i] = vi;
		}
		denom = sqrtf(vi) / bc2 + eps;
		p[i] = pi + nss * mi / denom;
	}
}

OPTIM_HOT
static void adam_span(const struct adam *o, float *p, const float *g, float *const *slots,
		      int64_t lo, int64_t n, const struct adam_coef *c, int decay)
{
	float *m = slots[0] + lo, *v = slots[1] + lo;
	float *vmax = o->amsgrad ? slots[2] + lo : NULL;
	int l2 = decay && !o->decoupled, dec = decay && o->decoupled;

	switch ((l2 << 2) | (dec << 1) | (o->amsgrad != 0)) {
	case 0: adam_run(p, g, m, v, vmax, n, c, 0, 0, 0); break;
	case 1: adam_run(p, g, m, v, vmax, n, c, 0, 0, 1); break;
	case 2: adam_run(p, g, m, v, vmax, n, c, 0, 1, 0); break;
	case 3: adam_run(p, g, m, v, vmax, n, c, 0, 1, 1); break;
	case 4: adam_run(p, g, m, v, vmax, n, c, 1, 0, 0); break;
	default: adam_run(p, g, m, v, vmax, n, c, 1, 0, 1); break;
	}
}

static weft_status adam_step(const void *state, const weft_optim_segment *segs, size_t nseg,
			     float *params, const float *grads, float *const *slots,
			     int64_t begin, int64_t end, const weft_optim_step_info *info)
{
	const struct adam *o = state;
	double t, bc1, bc2;
	struct adam_coef c;
	weft_status st;

	st = optim_check_step(o->who, segs, nseg, params, grads, slots, adam_state_slots(o), begin,
			      end, info);
	if (st != WEFT_OK)
		return st;
	t = (double)info->step;
	bc1 = 1.0 - pow(o->beta1, t);
	bc2 = 1.0 - pow(o->beta2, t);
	c = (struct adam_coef){
		.grad_scale = (float)info->grad_scale,
		.weight_decay = (float)o->weight_decay,
		.decay_factor = (float)(1.0 - info->lr * o->weight_decay),
		.beta1 = (float)o->beta1,
		.one_minus_beta1 = (float)(1.0 - o->beta1),
		.beta2 = (float)o->beta2,
		.one_minus_beta2 = (float)(1.0 - o->beta2),
		.bias_correction2_sqrt = (float)sqrt(bc2),
		.eps = (float)o->eps,
		.neg_step_size = (float)-(info->lr / bc1),
	};
	for (size_t s = optim_first_segment(segs, nseg, begin); s < nseg && segs[s].offset < end;
	     s++) {
		int64_t lo, hi;

		if (!optim_clip_segment(&segs[s], begin, end, &lo, &hi))
			continue;
		adam_span(o, params + lo, grads + lo, slots, lo, hi - lo, &c,
			  segs[s].decay && o->weight_decay != 0.0);
	}
	return WEFT_OK;
}

/* adam_params (weft/optim.h): adam and adamw are exactly that update. */
static int adam_describe(const void *state, weft_optim_adam_params *out)
{
	const struct adam *o = state;

	out->decoupled = o->decoupled;
	out->amsgrad = o->amsgrad;
	out->beta1 = o->beta1;
	out->beta2 = o->beta2;
	out->eps = o->eps;
	out->weight_decay = o->weight_decay;
	return 1;
}

const weft_optim_ops optim_adam_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_optim_ops, "adam"),
	.create = adam_create,
	.destroy = adam_destroy,
	.state_slots = adam_state_slots,
	.slot_name = adam_slot_name,
	.step = adam_step,
	.adam_params = adam_describe,
};

const weft_optim_ops optim_adamw_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_optim_ops, "adamw"),
	.create = adamw_create,
	.destroy = adam_destroy,
	.state_slots = adam_state_slots,
	.slot_name = adam_slot_name,
	.step = adam_step,
	.adam_params = adam_describe,
};
