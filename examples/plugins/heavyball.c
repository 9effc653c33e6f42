/* optimizer "heavyball": Polyak's heavy-ball method in displacement form.
 *
 * Per element, with g the gradient (times info->grad_scale), p the
 * parameter, d the previous step's displacement (slot "displacement",
 * zero before the first step), lr the step's learning rate:
 *
 *     g' = g + weight_decay * p        (only where the segment decays)
 *     d  = beta * d - lr * g'
 *     p  = p + d
 *
 * i.e. p_{t+1} = p_t - lr_t g_t + beta (p_t - p_{t-1}). With a constant lr
 * this is SGD with momentum (dampening 0); unlike torch.optim.SGD, whose
 * velocity is scaled by the *current* lr (p -= lr_t * b_t), here each
 * gradient keeps the lr of the step it was taken at, so a learning-rate
 * schedule does not rescale the momentum already built up. Example:
 * p = 1, g = 0.5, beta = 0.9, lr 0.1 then 0.2 gives p = 0.95 then
 * 0.805 (torch's SGD gives 0.95 then 0.76).
 *
 *     optimizer: {name: heavyball, lr: 0.05, beta: 0.9, weight_decay: 0.0}
 *
 * Keys: beta (default 0.9, in [0, 1)), weight_decay (default 0, >= 0).
 * `name`, `lr` and `no_decay` belong to the host (weft/optim.h). */
#include <math.h>
#include <stdlib.h>

#include <weft/optim.h>

static const weft_host *g_host;

typedef struct heavyball {
	float beta;
	float weight_decay;
} heavyball;

/* Reads `key` as a finite number in [lo, hi) (hi < 0: no upper bound). */
static weft_status read_range(const weft_cfg *section, const char *key, double def, double lo,
			      double hi, const char *advice, float *out)
{
	double v = def;
	weft_status st = g_host->cfg_float(section, key, def, &v);

	if (st)
		return st;
	if (!isfinite(v) || v < lo || (hi >= 0 && v >= hi)) {
		if (hi >= 0)
			return g_host->cfg_error(g_host->cfg_get(section, key),
						 "must be in [%g, %g), got %g; %s", lo, hi, v, advice);
		return g_host->cfg_error(g_host->cfg_get(section, key),
					 "must be a finite number >= %g, got %g; %s", lo, v, advice);
	}
	*out = (float)v;
	return WEFT_OK;
}

static weft_status heavyball_create(const weft_cfg *section, void **state_out)
{
	heavyball o = { 0 };
	heavyball *h;
	weft_status st;

	st = read_range(section, "beta", 0.9, 0.0, 1.0,
			"beta is the fraction of the last displacement kept (typical 0.9)",
			&o.beta);
	if (!st)
		st = read_range(section, "weight_decay", 0.0, 0.0, -1.0,
				"weight_decay adds weight_decay * p to the gradient (0: off)",
				&o.weight_decay);
	if (st)
		return st;
	h = malloc(sizeof(*h));
	if (!h)
		return g_host->error_set(WEFT_ERR_NOMEM, "optimizer 'heavyball': out of memory");
	*h = o;
	*state_out = h;
	return WEFT_OK;
}

static void heavyball_destroy(void *state)
{
	free(state);
}

static size_t heavyball_state_slots(const void *state)
{
	(void)state;
	return 1;
}

static const char *heavyball_slot_name(const void *state, size_t slot)
{
	(void)state;
	return slot == 0 ? "displacement" : NULL;
}

static weft_status heavyball_step(const void *state, const weft_optim_segment *segs, size_t nseg,
				  float *params, const float *grads, float *const *slots,
				  int64_t begin, int64_t end, const weft_optim_step_info *info)
{
	const heavyball *h = state;
	const float lr = (float)info->lr, scale = (float)info->grad_scale;
	float *d;

	if (begin > end || info->step < 1 || !(info->lr >= 0) || !isfinite(info->lr) || !slots)
		return g_host->error_set(WEFT_ERR_INVALID_ARG,
					 "optimizer 'heavyball': bad step arguments (range [%lld, "
					 "%lld), step %lld, lr %g, slots %s)", (long long)begin,
					 (long long)end, (long long)info->step, info->lr,
					 slots ? "set" : "NULL");
	for (size_t s = 1; s < nseg; s++)
		if (segs[s].offset < segs[s - 1].offset + segs[s - 1].numel)
			return g_host->error_set(WEFT_ERR_INVALID_ARG,
						 "optimizer 'heavyball': segments %zu and %zu overlap "
						 "or are not sorted by offset", s - 1, s);
	d = slots[0];
	for (size_t s = 0; s < nseg; s++) {
		int64_t lo = segs[s].offset > begin ? segs[s].offset : begin;
		int64_t hi = segs[s].offset + segs[s].numel < end ? segs[s].offset + segs[s].numel :
								    end;
		const float wd = segs[s].decay ? h->weight_decay : 0.0f;

		for (int64_t i = lo - begin; i < hi - begin; i++) {
			float g = grads[i] * scale + wd * params[i];

			d[i] = h->beta * d[i] - lr * g;
			params[i] += d[i];
		}
	}
	return WEFT_OK;
}

static const weft_optim_ops heavyball_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_optim_ops, "heavyball"),
	.create = heavyball_create,
	.destroy = heavyball_destroy,
	.state_slots = heavyball_state_slots,
	.slot_name = heavyball_slot_name,
	.step = heavyball_step,
};

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_OPTIM, .vtable = &heavyball_ops },
};

#ifdef WEFT_PLUGIN_NAMES /* since ABI 1.3: lets weft index this file without loading it */
WEFT_PLUGIN_NAMES("optim:heavyball");
#endif

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "example: heavy-ball optimizer"),
	.count = sizeof(items) / sizeof(items[0]),
	.items = items,
};

WEFT_PLUGIN_ENTRY(host)
{
	g_host = host;
	return &desc;
}
