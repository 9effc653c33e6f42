/* strategy tp's step (tp_impl.h): after backward, the partial gradients
 * summed over tp, every gradient averaged over dp (or reduce-scattered
 * under zero_1), the clipping norm, the optimizer, the loss over dp; and
 * the evaluation's sums over dp. */
#include <stddef.h>

#include "weft/step.h"
#include "tp_impl.h"

static weft_comm_buf buf(void *data, int64_t n, weft_comm_dtype dt)
{
	return (weft_comm_buf){ .data = data, .count = n, .dtype = dt };
}

/* Sums the partial gradients over the tp group (sequence parallelism):
 * packed into one buffer, all-reduced, unpacked. */
static weft_status sum_partial(tp_strategy *s, int64_t *bytes, int64_t *calls)
{
	const weft_strategy_env *env = s->env;
	const tp_dev *d = &s->dev;
	weft_comm_buf b;
	weft_status st;

	if (!s->partial_numel)
		return WEFT_OK;
	st = d->k->copy_ranges(d->kctx, sizeof(float), s->pack, s->n_partial, s->partial_buf,
			       s->grads);
	if (!st) {
		b = tp_dev_buf(d, s->partial_buf, s->partial_numel, WEFT_COMM_F32);
		st = env->comm_ops->all_reduce(s->tp_comm, &b, &b, WEFT_COMM_SUM, NULL);
	}
	if (!st)
		st = d->k->copy_ranges(d->kctx, sizeof(float), s->unpack, s->n_partial, s->grads,
				       s->partial_buf);
	if (st)
		return g_host->error_wrap(st, "strategy tp: summing sequence-parallel gradients");
	*bytes += s->partial_numel * (int64_t)sizeof(float);
	*calls += 1;
	return WEFT_OK;
}

/* The squares of this rank's gradient ranges (s->sq): whole parameters'
 * in part[0], split ones' in part[1]. One wait per part. */
static weft_status local_sumsq(tp_strategy *s, double *part)
{
	const tp_dev *d = &s->dev;

	for (int k = 0; k < 2; k++) {
		weft_status st = s->n_sq[k] ? d->k->sum_squares_ranges(d->kctx, s->grads, s->sq[k],
									s->n_sq[k], &part[k]) :
					     WEFT_OK;

		if (st)
			return g_host->error_wrap(st, "strategy tp: the gradient norm over %zu "
						  "ranges", s->n_sq[k]);
	}
	return WEFT_OK;
}

/* The global squared norm: split parameters' squares summed over the tp
 * group, whole ones once (every tp rank holds the same copy). */
static weft_status global_sumsq(tp_strategy *s, double *out, int64_t *bytes, int64_t *calls)
{
	const weft_strategy_env *env = s->env;
	double part[2] = { 0.0, 0.0 };
	weft_status st;

	if ((st = local_sumsq(s, part)))
		return st;
	if (s->tp_comm) {
		weft_comm_buf b = buf(&part[1], 1, WEFT_COMM_F64);

		st = env->comm_ops->all_reduce(s->tp_comm, &b, &b, WEFT_COMM_SUM, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy tp: gradient norm");
		*bytes += (int64_t)sizeof(double);
		*calls += 1;
	}
	*out = part[0] + part[1];
	return WEFT_OK;
}

/* zero_1: the global squared norm from each dp rank's slice (the tail,
 * which every dp rank holds, counted by dp rank 0): summed over dp, the
 * split parameters' part then over tp. */
static weft_status zero_sumsq(tp_strategy *s, double *out, int64_t *bytes, int64_t *calls)
{
	const weft_strategy_env *env = s->env;
	double part[2] = { 0.0, 0.0 };
	weft_comm_buf b = buf(part, 2, WEFT_COMM_F64), b1 = buf(&part[1], 1, WEFT_COMM_F64);
	weft_status st;

	if ((st = local_sumsq(s, part)))
		return st;
	st = env->comm_ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_SUM, NULL);
	if (!st && s->tp_comm)
		st = env->comm_ops->all_reduce(s->tp_comm, &b1, &b1, WEFT_COMM_SUM, NULL);
	if (st)
		return g_host->error_wrap(st, "strategy tp: gradient norm (zero_1)");
	*bytes += 2 * (int64_t)sizeof(double) + (s->tp_comm ? (int64_t)sizeof(double) : 0);
	*calls += s->tp_comm ? 2 : 1;
	*out = part[0] + part[1];
	return WEFT_OK;
}

weft_status tp_train_step(void *p, const weft_step_input *in, weft_step_report *out)
{
	tp_strategy *s = p;
	const weft_strategy_env *env = s->env;
	weft_optim_step_info info = in->optim;
	weft_accumulate acc = weft_accumulate_env(g_host, env);
	int64_t rows = weft_step_rows(in->micro, in->n_micro);
	double loss_sum, metric[2];
	int64_t comm_ns = 0, bytes = 0, calls = 0, c0;
	int64_t tc[6], te[6], tb[6];
	weft_step_clock clock;
	weft_status st;

	weft_step_clock_start(&clock);
	g_host->tp_stats(env->params, 1, tc, te, tb);
	if ((st = weft_step_accumulate(&acc, in->micro, in->n_micro, rows, &loss_sum)))
		return st;
	c0 = weft_clock_ns();
	if ((st = sum_partial(s, &bytes, &calls)))
		return st;
	if (s->zero) {
		if ((st = tp_dpz_reduce(&s->z, s->grads, &bytes, &calls)))
			return st;
	} else if (s->dp_comm) {
		weft_comm_buf b = tp_dev_buf(&s->dev, s->grads, s->numel, WEFT_COMM_F32);

		st = env->comm_ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_AVG, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy tp: averaging gradients over dp");
		bytes += s->numel * (int64_t)sizeof(float);
		calls++;
	}
	out->grad_norm = -1.0;
	/* 16-mixed: agree over the world whether the gradients overflowed (a
	 * local inf or NaN makes the reduced value non-finite too) */
	if (env->struct_size >= offsetof(weft_strategy_env, grads_check) +
				sizeof(env->grads_check) && env->grads_check) {
		const float *arr = s->grads;
		int64_t len = s->numel;
		int skip = 0;

		st = env->grads_check(env->trainer, &arr, &len, 1, &skip);
		if (st)
			return st;
		out->skipped = skip;
	}
	if (env->gradient_clip_val > 0 && !out->skipped) {
		double sumsq = 0.0;

		st = s->zero ? zero_sumsq(s, &sumsq, &bytes, &calls) :
			       global_sumsq(s, &sumsq, &bytes, &calls);
		if (st)
			return st;
		sumsq *= info.grad_scale * info.grad_scale;
		info.grad_scale *= g_host->clip_coef(sumsq, env->gradient_clip_val,
						     &out->grad_norm);
	}
	comm_ns += weft_clock_ns() - c0;
	if (s->zero) {
		st = out->skipped ? WEFT_OK : tp_dpz_step(&s->z, env, s->params, s->grads, &info);
		c0 = weft_clock_ns();
		if (!st)
			st = tp_dpz_gather(&s->z, s->params, &bytes, &calls);
		comm_ns += weft_clock_ns() - c0;
	} else if (!out->skipped && s->dev.on_cpu) {
		st = env->optim_ops->step(env->optim, env->segs, env->nseg, s->params, s->grads,
					  s->slots, 0, s->numel, &info);
	} else if (!out->skipped) {
		st = tp_dev_step(&s->dev, &info, s->opt, s->n_opt, s->params, s->grads, s->slots,
				 &s->mirror, s->slot_mem, s->n_slots, s->numel);
	}
	if (st)
		return st;
	/* the global batch's mean loss: tp ranks agree, dp ranks hold parts */
	metric[0] = loss_sum;
	metric[1] = (double)rows;
	if (s->dp_comm) {
		weft_comm_buf b = buf(metric, 2, WEFT_COMM_F64);

		c0 = weft_clock_ns();
		st = env->comm_ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_SUM, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy tp: loss over dp");
		comm_ns += weft_clock_ns() - c0;
		out->metric_comm_bytes = 2 * (int64_t)sizeof(double);
		bytes += out->metric_comm_bytes;
		calls++;
	}
	out->loss = metric[0] / metric[1];
	g_host->tp_stats(env->params, 0, tc, te, tb);
	for (int k = 0; k < 6; k++) {
		bytes += tb[k];
		calls += tc[k];
	}
	out->comm_bytes = bytes;
	out->comm_elements = bytes / (int64_t)sizeof(float);
	out->comm_calls = calls;
	out->comm_ns = comm_ns;
	out->exposed_comm_ns = comm_ns;
	weft_step_clock_finish(&clock, out);
	return WEFT_OK;
}

weft_status tp_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	tp_strategy *s = p;
	double v[4];
	weft_comm_buf cb = buf(v, 4, WEFT_COMM_F64);
	weft_status st;

	g_host->ctx_step_begin(s->env->ctx);
	st = s->env->evaluate(s->env->trainer, b, out);
	if (st || !s->dp_comm)
		return st;
	v[0] = out->loss_sum;
	v[1] = (double)out->rows;
	v[2] = (double)out->correct;
	v[3] = (double)out->counted;
	st = s->env->comm_ops->all_reduce(s->dp_comm, &cb, &cb, WEFT_COMM_SUM, NULL);
	if (st)
		return g_host->error_wrap(st, "strategy tp: evaluation over dp");
	out->loss_sum = v[0];
	out->rows = (int64_t)v[1];
	out->correct = (int64_t)v[2];
	out->counted = (int64_t)v[3];
	return WEFT_OK;
}
