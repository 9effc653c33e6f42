/* strategy tp, dp_strategy zero_1: optimizer state sharded over the dp
 * replicas of a tensor-parallel shard (contract in tp_zero.h). */
#include <string.h>

#include "tp_zero.h"

static weft_comm_buf fbuf(const tp_dpz *z, float *data, int64_t n)
{
	return tp_dev_buf(z->dev, data, n, WEFT_COMM_F32);
}

/* Appends the part of local run [lb, le) that lies in [b, e), mapped
 * through the global run starting at g, merging touching runs. */
static void add_mapped(tp_dpz *z, int64_t lb, int64_t le, int64_t g, int64_t b, int64_t e)
{
	int64_t s = lb > b ? lb : b, t = le < e ? le : e;

	if (s >= t)
		return;
	if (z->n_ranges && z->ranges[2 * z->n_ranges - 1] == g + (s - lb)) {
		z->ranges[2 * z->n_ranges - 1] = g + (t - lb);
		return;
	}
	z->ranges[2 * z->n_ranges] = g + (s - lb);
	z->ranges[2 * z->n_ranges + 1] = g + (t - lb);
	z->n_ranges++;
}

weft_status tp_dpz_setup(tp_dpz *z, const tp_dev *dev, const weft_comm_ops *ops,
			 weft_comm *dp, int32_t size, int32_t rank, int64_t numel, size_t n_slots,
			 const int64_t *tp_ranges, uint32_t n_tp_ranges)
{
	const weft_host *host = dev->host;
	int64_t tail, len, at = 0;

	memset(z, 0, sizeof(*z));
	z->host = host;
	z->dev = dev;
	z->ops = ops;
	z->dp = dp;
	z->size = size;
	z->rank = rank;
	z->numel = numel;
	z->per = numel / size;
	z->prefix = z->per * size;
	z->begin = (int64_t)rank * z->per;
	z->end = z->begin + z->per;
	z->n_slots = n_slots;
	tail = numel - z->prefix;
	len = z->per + tail;
	if (n_slots) {
		z->slot_mem = tp_dev_alloc(dev, WEFT_MEM_OPTIM, (int64_t)n_slots * (len ? len : 1),
					   "the zero_1 optimizer state");
		if (!z->slot_mem)
			return WEFT_ERR_NOMEM;
		for (size_t k = 0; k < n_slots; k++) {
			z->slots[k] = z->slot_mem + k * (size_t)len;
			z->tail_slots[k] = z->slots[k] + z->per;
		}
	}
	if (!dev->on_cpu) {
		const weft_strategy_env *env = dev->env;

		z->opt = host->mem_alloc(WEFT_MEM_OTHER, 2 * (env->nseg + 1) * sizeof(*z->opt));
		if (!z->opt)
			return host->error_set(WEFT_ERR_NOMEM, "strategy tp: zero_1 optimizer ranges");
		tp_dev_cut(dev, z->begin, z->end, 0, z->opt, &z->n_opt);
		tp_dev_cut(dev, z->prefix, numel, z->per, z->opt, &z->n_opt);
	}
	/* each tp run may split in two pieces (slice, tail): 2 per run */
	z->ranges = host->mem_alloc(WEFT_MEM_OTHER, (size_t)(4 * (n_tp_ranges + 1)) *
						    sizeof(int64_t));
	if (!z->ranges)
		return host->error_set(WEFT_ERR_NOMEM, "strategy tp: out of memory for ranges");
	for (uint32_t i = 0; i < n_tp_ranges; i++) {
		int64_t g = tp_ranges[2 * i], n = tp_ranges[2 * i + 1] - g;

		add_mapped(z, at, at + n, g, z->begin, z->end);
		add_mapped(z, at, at + n, g, z->prefix, numel);
		at += n;
	}
	return WEFT_OK;
}

weft_status tp_dpz_reduce(tp_dpz *z, float *grads, int64_t *bytes, int64_t *calls)
{
	weft_comm_buf send = fbuf(z, grads, z->prefix), recv = fbuf(z, grads + z->begin, z->per);
	weft_status st = WEFT_OK;

	if (z->per) {
		st = z->ops->reduce_scatter(z->dp, &send, &recv, WEFT_COMM_AVG, NULL);
		*bytes += z->prefix * (int64_t)sizeof(float);
		*calls += 1;
	}
	if (!st && z->numel > z->prefix) {
		weft_comm_buf t = fbuf(z, grads + z->prefix, z->numel - z->prefix);

		st = z->ops->all_reduce(z->dp, &t, &t, WEFT_COMM_AVG, NULL);
		*bytes += (z->numel - z->prefix) * (int64_t)sizeof(float);
		*calls += 1;
	}
	return st ? z->host->error_wrap(st, "strategy tp: zero_1 gradient reduce-scatter over "
					"dp (rank %d of %d)", (int)z->rank, (int)z->size) : WEFT_OK;
}

weft_status tp_dpz_step(tp_dpz *z, const weft_strategy_env *env, float *params,
			const float *grads, const weft_optim_step_info *info)
{
	weft_status st = WEFT_OK;

	if (!z->dev->on_cpu)
		return tp_dev_step(z->dev, info, z->opt, z->n_opt, params, grads, z->slots,
				   &z->mirror, z->slot_mem, z->n_slots, z->per + (z->numel - z->prefix));
	if (z->per)
		st = env->optim_ops->step(env->optim, env->segs, env->nseg, params + z->begin,
					  grads + z->begin, z->slots, z->begin, z->end, info);
	if (!st && z->numel > z->prefix)
		st = env->optim_ops->step(env->optim, env->segs, env->nseg, params + z->prefix,
					  grads + z->prefix, z->tail_slots, z->prefix, z->numel,
					  info);
	return st;
}

weft_status tp_dpz_gather(tp_dpz *z, float *params, int64_t *bytes, int64_t *calls)
{
	weft_comm_buf send = fbuf(z, params + z->begin, z->per), recv = fbuf(z, params, z->prefix);
	weft_status st;

	if (!z->per)
		return WEFT_OK;
	st = z->ops->all_gather(z->dp, &send, &recv, NULL);
	if (st)
		return z->host->error_wrap(st, "strategy tp: zero_1 parameter all-gather over dp "
					   "(rank %d of %d)", (int)z->rank, (int)z->size);
	*bytes += z->per * (int64_t)sizeof(float);
	*calls += 1;
	return WEFT_OK;
}

weft_status tp_dpz_state(tp_dpz *z, weft_strategy_state *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->n_slots = (uint32_t)z->n_slots;
	out->n_ranges = z->n_ranges;
	out->ranges = z->ranges;
	out->begin = z->n_ranges ? z->ranges[0] : 0;
	out->end = z->n_ranges ? z->ranges[2 * z->n_ranges - 1] : 0;
	return tp_dev_state(z->dev, z->slots, &z->mirror, z->slot_mem, z->n_slots,
			    z->per + (z->numel - z->prefix), &out->slots);
}

void tp_dpz_free(tp_dpz *z)
{
	if (!z->host) /* never set up: destroy right after create */
		return;
	tp_dev_free(z->dev, WEFT_MEM_OPTIM, z->slot_mem,
		    (int64_t)z->n_slots * (z->per + z->numel - z->prefix ?
					    z->per + z->numel - z->prefix : 1));
	tp_dev_mirror_free(z->dev, &z->mirror);
	z->host->mem_free(z->opt);
	z->host->mem_free(z->ranges);
	memset(z, 0, sizeof(*z));
}
