/* sgd - stochastic gradient descent with momentum, dampening, Nesterov
 * momentum and L2 weight decay, step for step as torch.optim.SGD
 * (single-tensor path, maximize=False):
 *
 *   d = g + weight_decay * p                    (tensors with decay only)
 *   b = d                                       (step 1)
 *   b = momentum * b + (1 - dampening) * d      (later steps)
 *   d = nesterov ? d + momentum * b : b         (when momentum != 0)
 *   p = p - lr * d
 *
 * Every product and sum is rounded to float in that order, as PyTorch's
 * float kernels do. Keys: momentum (0), dampening (0), nesterov (false),
 * weight_decay (0). One slot ("momentum_buffer") when momentum != 0.
 */
#include <math.h>
#include <stdlib.h>
#include "builtin_impl.h"

struct sgd {
	double momentum;
	double dampening;
	double weight_decay;
	int nesterov;
};

struct sgd_coef {
	float grad_scale;
	float weight_decay;
	float momentum;
	float one_minus_dampening;
	float neg_lr;
};

static weft_status sgd_create(const weft_cfg *section, void **state_out)
{
	const weft_host *h = optim_host;
	struct sgd o = { 0 };
	struct sgd *obj;
	weft_status st;

	st = optim_read_float(section, "momentum", 0.0, 0.0, 1.0, 0,
			      "momentum is the decay of the velocity (typical 0.9; 0 turns it off)",
			      &o.momentum);
	if (st != WEFT_OK)
		return st;
	st = optim_read_float(section, "dampening", 0.0, 0.0, 1.0, 0,
			      "dampening scales new gradients into the velocity by 1 - dampening "
			      "(usually 0)",
			      &o.dampening);
	if (st != WEFT_OK)
		return st;
	st = optim_read_float(section, "weight_decay", 0.0, 0.0, INFINITY, 0,
			      "weight_decay is an L2 penalty coefficient (typical 1e-4 to 5e-4)",
			      &o.weight_decay);
	if (st != WEFT_OK)
		return st;
	st = h->cfg_bool(section, "nesterov", 0, &o.nesterov);
	if (st != WEFT_OK)
		return st;
	if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0))
		return h->cfg_error(h->cfg_get(section, "nesterov"),
				    "needs momentum > 0 and dampening 0 (got momentum %g, dampening "
				    "%g); set momentum: 0.9 and leave dampening out, or set "
				    "nesterov: false",
				    o.momentum, o.dampening);

	obj = malloc(sizeof(*obj));
	if (!obj)
		return h->error_set(WEFT_ERR_NOMEM, "sgd: out of memory creating the optimizer");
	*obj = o;
	*state_out = obj;
	return WEFT_OK;
}

static void sgd_destroy(void *state)
{
	free(state);
}

static size_t sgd_state_slots(const void *state)
{
	const struct sgd *o = state;

	return o->momentum != 0.0 ? 1 : 0;
}

static const char *sgd_slot_name(const void *state, size_t slot)
{
	return slot < sgd_state_slots(state) ? "momentum_buffer" : NULL;
}

/* The update of n elements; the int flags are constants at every call
 * site, so each combination compiles to its own branch-free loop. */
static inline __attribute__((always_inline)) void
sgd_run(float *restrict p, const float *restrict g, float *restrict buf, int64_t n,
	const struct sgd_coef *c, const int use_wd, const int use_momentum, const int first,
	const int nesterov)
{
	const float gs = c->grad_scale, wd = c->weight_decay, mom = c->momentum;
	const float damp1 = c->one_minus_dampening, neg_lr = c->neg_lr;

	for (int64_t i = 0; i < n; i++) {
		float d = g[i] * gs;

		if (use_wd)
			d = d + wd * p[i];
		if (use_momentum) {
			float b = first ? d : buf[i] * mom + damp1 * d;

			buf[i] = b;
			d = nesterov ? d + mom * b : b;
		}
		p[i] = p[i] + neg_lr * d;
	}
}

OPTIM_HOT
static void sgd_span(const struct sgd *o, float *p, const float *g, float *buf, int64_t n,
		     const struct sgd_coef *c, int use_wd, int first)
{
	if (o->momentum == 0.0) {
		if (use_wd)
			sgd_run(p, g, buf, n, c, 1, 0, 0, 0);
		else
			sgd_run(p, g, buf, n, c, 0, 0, 0, 0);
		return;
	}
	switch ((use_wd << 2) | (first << 1) | (o->nesterov != 0)) {
	case 0: sgd_run(p, g, buf, n, c, 0, 1, 0, 0); break;
	case 1: sgd_run(p, g, buf, n, c, 0, 1, 0, 1); break;
	case 2: sgd_run(p, g, buf, n, c, 0, 1, 1, 0); break;
	case 3: sgd_run(p, g, buf, n, c, 0, 1, 1, 1); break;
	case 4: sgd_run(p, g, buf, n, c, 1, 1, 0, 0); break;
	case 5: sgd_run(p, g, buf, n, c, 1, 1, 0, 1); break;
	case 6: sgd_run(p, g, buf, n, c, 1, 1, 1, 0); break;
	default: sgd_run(p, g, buf, n, c, 1, 1, 1, 1); break;
	}
}

static weft_status sgd_step(const void *state, const weft_optim_segment *segs, size_t nseg,
			    float *params, const float *grads, float *const *slots,
			    int64_t begin, int64_t end, const weft_optim_step_info *info)
{
	const struct sgd *o = state;
	size_t nslots = sgd_state_slots(o);
	struct sgd_coef c;
	weft_status st;

	st = optim_check_step("sgd", segs, nseg, params, grads, slots, nslots, begin, end, info);
	if (st != WEFT_OK)
		return st;
	c = (struct sgd_coef){
		.grad_scale = (float)info->grad_scale,
		.weight_decay = (float)o->weight_decay,
		.momentum = (float)o->momentum,
		.one_minus_dampening = (float)(1.0 - o->dampening),
		.neg_lr = (float)-info->lr,
	};
	for (size_t s = optim_first_segment(segs, nseg, begin); s < nseg && segs[s].offset < end;
	     s++) {
		int64_t lo, hi;

		if (!optim_clip_segment(&segs[s], begin, end, &lo, &hi))
			continue;
		sgd_span(o, params + lo, grads + lo, nslots ? slots[0] + lo : NULL, hi - lo, &c,
			 segs[s].decay && o->weight_decay != 0.0, info->step == 1);
	}
	return WEFT_OK;
}

/* sgd_params (weft/optim.h): sgd is exactly that update. */
static int sgd_describe(const void *state, weft_optim_sgd_params *out)
{
	const struct sgd *o = state;

	out->nesterov = o->nesterov;
	out->momentum = o->momentum;
	out->dampening = o->dampening;
	out->weight_decay = o->weight_decay;
	return 1;
}

const weft_optim_ops optim_sgd_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_optim_ops, "sgd"),
	.create = sgd_create,
	.destroy = sgd_destroy,
	.state_slots = sgd_state_slots,
	.slot_name = sgd_slot_name,
	.step = sgd_step,
	.sgd_params = sgd_describe,
};
