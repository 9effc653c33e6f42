/* Config reading and argument checks shared by the built-in optimizers. */
#include <math.h>
#include "builtin_impl.h"

const weft_host *optim_host;

weft_status optim_read_float(const weft_cfg *section, const char *key, double def, double lo,
			     double hi, int hi_open, const char *advice, double *out)
{
	const weft_host *h = optim_host;
	const weft_cfg *node = h->cfg_get(section, key);
	double v = def;
	weft_status st;

	if (node && h->cfg_kind_of(node) != WEFT_CFG_NULL) {
		st = h->cfg_as_float(node, &v);
		if (st != WEFT_OK)
			return st;
	}
	if (!isfinite(v) || v < lo || (hi_open ? v >= hi : v > hi)) {
		if (!node)
			return h->error_set(WEFT_ERR_INTERNAL, "default %s = %g is out of range", key, v);
		if (isinf(hi))
			return h->cfg_error(node, "must be a finite number >= %g, got %g; %s", lo, v,
					    advice);
		return h->cfg_error(node, "must be in [%g, %g%c, got %g; %s", lo, hi,
				    hi_open ? ')' : ']', v, advice);
	}
	*out = v;
	return WEFT_OK;
}

weft_status optim_read_betas(const weft_cfg *section, double def1, double def2, double out[2])
{
	static const char *const which[2] = {
		"beta1 is the decay of the gradient average (typical 0.9)",
		"beta2 is the decay of the squared-gradient average (typical 0.999 for Adam, 0.99 for Lion)",
	};
	const weft_host *h = optim_host;
	const weft_cfg *node = h->cfg_get(section, "betas");
	weft_status st;

	out[0] = def1;
	out[1] = def2;
	if (!node || h->cfg_kind_of(node) == WEFT_CFG_NULL)
		return WEFT_OK;
	if (h->cfg_kind_of(node) != WEFT_CFG_SEQ || h->cfg_size(node) != 2)
		return h->cfg_error(node, "must be a list of two numbers, like betas: [%g, %g]",
				    def1, def2);
	for (size_t i = 0; i < 2; i++) {
		const weft_cfg *item = h->cfg_at(node, i);
		double v;

		st = h->cfg_as_float(item, &v);
		if (st != WEFT_OK)
			return st;
		if (!(v >= 0.0 && v < 1.0))
			return h->cfg_error(item, "must be in [0, 1), got %g; %s", v, which[i]);
		out[i] = v;
	}
	return WEFT_OK;
}

size_t optim_first_segment(const weft_optim_segment *segs, size_t nseg, int64_t begin)
{
	size_t lo = 0, hi = nseg;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (segs[mid].offset + segs[mid].numel <= begin)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

weft_status optim_check_step(const char *who, const weft_optim_segment *segs, size_t nseg,
			     const float *params, const float *grads, float *const *slots,
			     size_t nslots, int64_t begin, int64_t end,
			     const weft_optim_step_info *info)
{
	const weft_host *h = optim_host;
	int64_t prev_end = INT64_MIN;

	if (!info || info->struct_size < offsetof(weft_optim_step_info, grad_scale) + sizeof(double))
		return h->error_set(WEFT_ERR_INVALID_ARG,
				    "%s step: step info is missing or too small (struct_size %u)", who,
				    info ? info->struct_size : 0u);
	if (begin < 0 || begin > end)
		return h->error_set(WEFT_ERR_INVALID_ARG,
				    "%s step: bad element range [%lld, %lld)", who, (long long)begin,
				    (long long)end);
	if (begin < end && (!params || !grads))
		return h->error_set(WEFT_ERR_INVALID_ARG,
				    "%s step: params or grads is NULL for [%lld, %lld)", who,
				    (long long)begin, (long long)end);
	if (nseg && !segs)
		return h->error_set(WEFT_ERR_INVALID_ARG, "%s step: segs is NULL but nseg is %zu", who,
				    nseg);
	for (size_t k = 0; k < nslots && begin < end; k++) {
		if (!slots || !slots[k])
			return h->error_set(WEFT_ERR_INVALID_ARG,
					    "%s step: state slot %zu of %zu is NULL", who, k, nslots);
	}
	if (info->step < 1)
		return h->error_set(WEFT_ERR_INVALID_ARG,
				    "%s step: step count must start at 1, got %lld", who,
				    (long long)info->step);
	if (!isfinite(info->lr) || info->lr < 0)
		return h->error_set(WEFT_ERR_INVALID_ARG,
				    "%s step %lld: learning rate must be finite and >= 0, got %g", who,
				    (long long)info->step, info->lr);
	if (!isfinite(info->grad_scale))
		return h->error_set(WEFT_ERR_INVALID_ARG,
				    "%s step %lld: grad_scale must be finite, got %g", who,
				    (long long)info->step, info->grad_scale);
	for (size_t s = 0; s < nseg; s++) {
		if (segs[s].numel < 0 || segs[s].offset < prev_end)
			return h->error_set(WEFT_ERR_INVALID_ARG,
					    "%s step: segment %zu ('%s', offset %lld, numel %lld) "
					    "overlaps the previous one or is out of order; segments "
					    "must be sorted by offset and disjoint",
					    who, s, segs[s].name ? segs[s].name : "?",
					    (long long)segs[s].offset, (long long)segs[s].numel);
		prev_end = segs[s].offset + segs[s].numel;
	}
	return WEFT_OK;
}
