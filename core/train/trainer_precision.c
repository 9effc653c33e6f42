/* The trainer's side of mixed precision (train/precision.h): the banner
 * lines, 16-mixed's agreement on an overflow (weft_strategy_env.grads_check)
 * and the scaler's update after each step. */
#include <stdio.h>

#include "train/trainer_impl.h"
#include "weft/log.h"

void weft_trainer_print_precision(const weft_trainer *t, FILE *out)
{
	if (t->tc.autocast != WEFT_F32)
		fprintf(out, "precision %s: linear layers multiply %s inputs with float32 "
			"accumulation; parameters, gradients and optimizer state are float32%s\n",
			t->tc.precision, weft_dtype_name(t->tc.autocast),
			t->tc.loss_scale.enabled ? "; dynamic loss scaling" : "");
	if (t->ctx && weft_ctx_lowp_activations(t->ctx) != WEFT_F32)
		fprintf(out, "activations between layers and their gradients are %s "
			"(trainer.lowp_activations)\n",
			weft_dtype_name(weft_ctx_lowp_activations(t->ctx)));
	if (t->env.params_copy)
		fprintf(out, "the linear layers read a %s copy of the weights, refreshed by each "
			"optimizer step (trainer.weight_copy)\n",
			weft_dtype_name((weft_dtype)t->env.params_copy_dtype));
	if (t->tc.loss_scale.enabled)
		fprintf(out, "loss scale %g (halves after %lld consecutive overflows, not below "
			"%g; doubles after %lld clean steps)\n", t->scaler.scale,
			(long long)t->tc.loss_scale.hysteresis, t->tc.loss_scale.min_scale,
			(long long)t->tc.loss_scale.window);
}

weft_status weft_trainer_copy_setup(weft_trainer *t)
{
	weft_params *ps = weft_model_params(t->model);
	weft_dtype lo = weft_ctx_lowp_activations(t->ctx);
	weft_tensor *copy;
	weft_status st;

	t->env.params_copy = NULL;
	t->env.params_copy_dtype = WEFT_F32;
	if (!t->tc.weight_copy || lo == WEFT_F32 || !weft_strategy_whole_params(t->strat_ops) ||
	    (t->tc.device.type != WEFT_DEVICE_CPU && t->tc.device.type != WEFT_DEVICE_CUDA) ||
	    !weft_params_numel(ps, WEFT_F32))
		return WEFT_OK;
	if ((st = weft_params_copy_enable(ps, lo)) || (st = weft_ctx_use_params_copy(t->ctx, ps)))
		return st;
	copy = weft_params_copy(ps);
	t->env.params_copy = copy->data;
	t->env.params_copy_dtype = (int32_t)lo;
	return WEFT_OK;
}

weft_status weft_trainer_copy_refresh(weft_trainer *t)
{
	weft_params *ps = t->model ? weft_model_params(t->model) : NULL;

	if (!t->env.params_copy || !ps)
		return WEFT_OK;
	return weft_params_copy_refresh(ps, t->ctx);
}

/* 16-mixed: the strategy's gradients, final and about to be stepped on;
 * every rank learns whether any rank's hold an inf or a NaN. */
weft_status weft_trainer_grads_check(void *p, const float *const *arrays, const int64_t *lens,
				     size_t n, int *skip)
{
	weft_trainer *t = p;
	int found = 0;
	int32_t flag;
	weft_comm_buf b = { .data = &flag, .count = 1, .dtype = WEFT_COMM_I32,
			    .device = WEFT_COMM_DEVICE_CPU };
	weft_status st;

	st = weft_grads_nonfinite_on(t->ctx, arrays, lens, n, &found);
	if (st)
		return st;
	flag = found;
	if (t->pg && t->world > 1) {
		st = weft_pg_all_reduce(t->pg, &b, &b, WEFT_COMM_MAX, NULL);
		if (st)
			return weft_error_wrap(st, "16-mixed: agreeing on a gradient overflow at "
					       "step %lld", (long long)t->global_step + 1);
	}
	t->step_grad_checks++;
	t->step_overflow = flag != 0;
	*skip = t->step_overflow;
	return WEFT_OK;
}

/* 16-mixed, after a train_step: the strategy must have checked the
 * gradients (weft_strategy_env.grads_check); the scaler learns whether
 * they overflowed, and a skipped step is logged with the new scale. */
weft_status weft_trainer_scaler_step(weft_trainer *t)
{
	double old = t->scaler.scale;
	int64_t step = t->global_step + 1;

	if (t->step_grad_checks == 0)
		return weft_cfg_error(weft_cfg_get(t->tc.section, "precision"),
				      "16-mixed needs the strategy to check the gradients for "
				      "overflow before its optimizer step, and strategy '%s' does "
				      "not (weft_strategy_env.grads_check); use precision "
				      "bf16-mixed (no loss scaling) or 32-true with it",
				      t->tc.strategy_name);
	weft_loss_scaler_update(&t->scaler, t->step_overflow);
	if (t->step_overflow && t->rank == 0) /* every rank agreed: one line */
		weft_log(WEFT_LOG_WARN, "step %lld: gradient overflow (inf or NaN) at loss scale "
			 "%g: optimizer step skipped (%lld so far); loss scale now %g",
			 (long long)step, old, (long long)t->scaler.skipped, t->scaler.scale);
	else if (t->scaler.scale != old && t->rank == 0)
		weft_log(WEFT_LOG_INFO, "step %lld: %lld steps without overflow: loss scale "
			 "raised from %g to %g", (long long)step,
			 (long long)t->tc.loss_scale.window, old, t->scaler.scale);
	return WEFT_OK;
}
