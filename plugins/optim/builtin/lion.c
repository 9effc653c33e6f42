/* lion - EvoLved Sign Momentum (Chen et al. 2023, "Symbolic Discovery of
 * Optimization Algorithms", Algorithm 2), with decoupled weight decay:
 *
 *   c = beta1 * m + (1 - beta1) * g
 *   p = p * (1 - lr * weight_decay)           (tensors with decay)
 *   p = p - lr * sign(c)                      (sign(0) = 0)
 *   m = beta2 * m + (1 - beta2) * g
 *
 * Keys: betas ([0.9, 0.99]), weight_decay (0). One slot ("exp_avg").
 * The paper suggests an lr 3-10x smaller than AdamW's and a weight decay
 * 3-10x larger, to keep lr * weight_decay about the same.
 */
#include <math.h>
#include <stdlib.h>
#include "builtin_impl.h"

struct lion {
	double beta1;
	double beta2;
	double weight_decay;
};

struct lion_coef {
	float grad_scale;
	float decay_factor; /* 1 - lr * weight_decay */
	float beta1, one_minus_beta1;
	float beta2, one_minus_beta2;
	float lr;
};

static weft_status lion_create(const weft_cfg *section, void **state_out)
{
	const weft_host *h = optim_host;
	struct lion o = { 0 };
	double betas[2];
	struct lion *obj;
	weft_status st;

	st = optim_read_betas(section, 0.9, 0.99, betas);
	if (st != WEFT_OK)
		return st;
	o.beta1 = betas[0];
	o.beta2 = betas[1];
	st = optim_read_float(section, "weight_decay", 0.0, 0.0, INFINITY, 0,
			      "weight_decay is the decoupled decay rate (for Lion typically 3-10x "
			      "AdamW's)",
			      &o.weight_decay);
	if (st != WEFT_OK)
		return st;

	obj = malloc(sizeof(*obj));
	if (!obj)
		return h->error_set(WEFT_ERR_NOMEM, "lion: out of memory creating the optimizer");
	*obj = o;
	*state_out = obj;
	return WEFT_OK;
}

static void lion_destroy(void *state)
{
	free(state);
}

static size_t lion_state_slots(const void *state)
{
	(void)state;
	return 1;
}

static const char *lion_slot_name(const void *state, size_t slot)
{
	(void)state;
	return slot == 0 ? "exp_avg" : NULL;
}

static inline __attribute__((always_inline)) void
lion_run(float *restrict p, const float *restrict g, float *restrict m, int64_t n,
	 const struct lion_coef *c, const int decay)
{
	const float gs = c->grad_scale, keep = c->decay_factor, lr = c->lr;
	const float b1 = c->beta1, b1c = c->one_minus_beta1;
	const float b2 = c->beta2, b2c = c->one_minus_beta2;

	for (int64_t i = 0; i < n; i++) {
		float gi = g[i] * gs;
		float mi = m[i];
		float ci = b1 * mi + b1c * gi;
		float sign = (float)(ci > 0.0f) - (float)(ci < 0.0f);
		float pi = p[i];

		if (decay)
			pi = pi * keep;
		p[i] = pi - lr * sign;
		m[i] = b2 * mi + b2c * gi;
	}
}

OPTIM_HOT
static void lion_span(float *p, const float *g, float *m, int64_t n, const struct lion_coef *c,
		      int decay)
{
	if (decay)
		lion_run(p, g, m, n, c, 1);
	else
		lion_run(p, g, m, n, c, 0);
}

static weft_status lion_step(const void *state, const weft_optim_segment *segs, size_t nseg,
			     float *params, const float *grads, float *const *slots,
			     int64_t begin, int64_t end, const weft_optim_step_info *info)
{
	const struct lion *o = state;
	struct lion_coef c;
	weft_status st;

	st = optim_check_step("lion", segs, nseg, params, grads, slots, 1, begin, end, info);
	if (st != WEFT_OK)
		return st;
	c = (struct lion_coef){
		.grad_scale = (float)info->grad_scale,
		.decay_factor = (float)(1.0 - info->lr * o->weight_decay),
		.beta1 = (float)o->beta1,
		.one_minus_beta1 = (float)(1.0 - o->beta1),
		.beta2 = (float)o->beta2,
		.one_minus_beta2 = (float)(1.0 - o->beta2),
		.lr = (float)info->lr,
	};
	for (size_t s = optim_first_segment(segs, nseg, begin); s < nseg && segs[s].offset < end;
	     s++) {
		int64_t lo, hi;

		if (!optim_clip_segment(&segs[s], begin, end, &lo, &hi))
			continue;
		lion_span(params + lo, grads + lo, slots[0] + lo, hi - lo, &c,
			  segs[s].decay && o->weight_decay != 0.0);
	}
	return WEFT_OK;
}

const weft_optim_ops optim_lion_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_optim_ops, "lion"),
	.create = lion_create,
	.destroy = lion_destroy,
	.state_slots = lion_state_slots,
	.slot_name = lion_slot_name,
	.step = lion_step,
};
