/* The trainer's side of the step: the weft_strategy_env it gives the
 * strategy, whose callbacks (forward_backward, evaluate, replica_*,
 * stage_*) run the model for it, and the strategy's creation with it. */
#include <stdlib.h>

#include "nn/act_ckpt.h"
#include "pipeline/stage.h"
#include "tensor/tensor_impl.h"
#include "tp/tp.h"
#include "train/trainer_impl.h"
#include "weft/ops.h"

/* ---- callbacks the strategy drives ------------------------------------ */

/* Forward, loss scaling and backward of one micro-batch on (model, ctx);
 * `micro` is the micro-batch's index in the optimizer step. */
static weft_status run_forward_backward(weft_trainer *t, weft_model *model, weft_ctx *ctx,
					int64_t micro, const weft_micro_batch *b,
					double loss_scale, double *loss)
{
	weft_model_output out;
	weft_tensor *scaled;
	weft_status st;

	weft_ctx_set_grad_enabled(ctx, 1);
	weft_ctx_set_training(ctx, 1);
	weft_ctx_set_rng(ctx, t->tc.seed, b->row_offset);
	/* The dropout keys come from (global step, micro-batch), never from
	 * how many steps this process's context has seen (validation steps
	 * count there too, and a resumed run starts a new context at 0). */
	weft_ctx_set_step(ctx, (uint64_t)(t->global_step * t->tc.accumulate + micro) + 1);
	loss_scale *= t->scaler.scale; /* 16-mixed; 1 otherwise */
	/* backward below starts from (float)loss_scale: the fused classifier
	 * makes the loss's gradient for it in the forward */
	ctx->loss_grad_hint = (float)loss_scale;
	st = weft_model_loss(model, ctx, &b->data, &out);
	if (st)
		return st;
	/* read now, or left on the device until the trainer uses it */
	st = weft_trainer_loss_keep(t, ctx, out.loss, b->rows, loss);
	if (st)
		return st;
	scaled = out.loss;
	if (loss_scale != 1.0) {
		st = weft_op_scale(ctx, out.loss, (float)loss_scale, &scaled);
		if (st)
			return st;
	}
	return weft_backward(ctx, scaled);
}

static weft_status tr_forward_backward(void *p, const weft_micro_batch *b, double loss_scale,
				       double *loss)
{
	weft_trainer *t = p;

	return run_forward_backward(t, t->model, t->ctx, t->micro_in_step++, b, loss_scale, loss);
}

weft_status weft_trainer_model_act_ckpt(const weft_trainer *t, weft_model *m)
{
	weft_status st = weft_model_set_activation_checkpointing(m, (weft_act_ckpt)t->tc.act_ckpt);
	char why[512];

	if (!st)
		return WEFT_OK;
	snprintf(why, sizeof(why), "%s", weft_error_last());
	return weft_cfg_error(weft_cfg_get(t->tc.section, "activation_checkpointing"), "%s", why);
}

/* Model replicas for one-process, several-device strategies (dp): each
 * replica is a model built from the same config and seed, with its own
 * context, driven by one thread of the strategy. */
typedef struct tr_replica {
	weft_model *model;
	weft_ctx *ctx;
	int64_t step;   /* the optimizer step `micro` counts within */
	int64_t micro;  /* micro-batches this replica ran in that step */
} tr_replica;

static weft_status tr_replica_create(void *p, int32_t index, weft_device dev, void **replica,
				     weft_params **params, weft_ctx **ctx)
{
	weft_trainer *t = p;
	weft_model_options mo = { .device = dev, .seed = t->tc.seed };
	weft_ctx_options co = { .device = dev, .seed = t->tc.seed };
	tr_replica *r = calloc(1, sizeof(*r));
	weft_status st;

	(void)index;
	if (!r)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory making a model replica");
	r->step = -1;
	st = weft_model_from_config(weft_cfg_get(t->root, "model"), &mo, &r->model);
	if (!st)
		st = weft_trainer_model_act_ckpt(t, r->model);
	if (!st)
		st = weft_ctx_create(&co, &r->ctx);
	if (!st)
		st = weft_ctx_set_autocast(r->ctx, t->tc.autocast);
	if (!st)
		st = weft_ctx_set_lowp_activations(r->ctx, (weft_lowp_act)t->tc.lowp_act);
	if (st) {
		weft_model_free(r->model);
		free(r);
		return st;
	}
	*replica = r;
	*params = weft_model_params(r->model);
	*ctx = r->ctx;
	return WEFT_OK;
}

static weft_status tr_replica_forward_backward(void *p, void *replica, const weft_micro_batch *b,
					       double loss_scale, double *loss)
{
	weft_trainer *t = p;
	tr_replica *r = replica;

	if (!r)
		return tr_forward_backward(p, b, loss_scale, loss);
	/* every replica sees each micro-batch of a step once, in order: the
	 * same (step, micro) dropout key as the whole batch would get */
	if (r->step != t->global_step) {
		r->step = t->global_step;
		r->micro = 0;
	}
	return run_forward_backward(t, r->model, r->ctx, r->micro++, b, loss_scale, loss);
}

static void tr_replica_free(void *p, void *replica)
{
	tr_replica *r = replica;

	(void)p;
	if (!r)
		return;
	weft_ctx_free(r->ctx);
	weft_model_free(r->model);
	free(r);
}

static weft_status tr_evaluate(void *p, const weft_micro_batch *b, weft_eval_report *rep)
{
	weft_trainer *t = p;
	weft_eval_result r;
	weft_status st;

	st = weft_model_eval(t->model, t->ctx, &b->data, &r);
	if (st)
		return st;
	rep->loss_sum += r.loss * (double)r.counted;
	rep->rows += r.counted;
	/* accuracy for classifiers: every model but the language model */
	if (weft_model_get_class(t->model) != WEFT_MODEL_GPT) {
		rep->correct += r.correct;
		rep->counted += r.counted;
	}
	return WEFT_OK;
}

/* Pipeline stages of the model (env->stage_*, for pipeline strategies):
 * built with the model's own options, run as core/pipeline/stage.h says. */
static weft_status tr_stage_create(void *p, uint32_t parts, int64_t layer_begin, int64_t layer_end,
				   void **stage, weft_params **params)
{
	weft_trainer *t = p;

	return weft_pp_stage_create(t->model, &t->model_opts, parts, layer_begin, layer_end,
				    (weft_pp_stage **)stage, params);
}

static weft_status tr_stage_forward(void *p, void *stage, weft_ctx *ctx, const weft_micro_batch *b,
				    weft_tensor *x, int train, double loss_scale, weft_tensor **out,
				    double *loss, weft_eval_report *rep)
{
	weft_trainer *t = p;
	uint64_t key = 0;
	weft_status st;

	/* the key tr_forward_backward gives the same micro-batch */
	if (train && t->step_micro && b >= t->step_micro && b < t->step_micro + t->step_n_micro)
		key = (uint64_t)(t->global_step * t->tc.accumulate + (b - t->step_micro)) + 1;
	/* the strategy made ctx: mixed precision and the loss scale apply there too */
	st = weft_ctx_set_autocast(ctx, t->tc.autocast);
	if (!st)
		st = weft_ctx_set_lowp_activations(ctx, (weft_lowp_act)t->tc.lowp_act);
	if (st)
		return st;
	if (train)
		loss_scale *= t->scaler.scale;
	/* the last stage's loss is scaled by it, and backward starts from 1 */
	ctx->loss_grad_hint = (float)loss_scale;
	return weft_pp_stage_forward(stage, ctx, t->tc.seed, key, b, x, train, loss_scale, out,
				     loss, rep);
}

static void tr_stage_free(void *p, void *stage)
{
	(void)p;
	weft_pp_stage_free(stage);
}

/* ---- the strategy ---------------------------------------------------- */

weft_status weft_trainer_setup_strategy(weft_trainer *t)
{
	const weft_cfg *sec = NULL;
	weft_status st;

	if (t->tc.strategy && weft_cfg_kind_of(t->tc.strategy) == WEFT_CFG_MAP)
		sec = t->tc.strategy;
	st = weft_registry_find(t->reg, WEFT_PLUGIN_STRATEGY, t->tc.strategy_name,
				(const void **)&t->strat_ops, &t->strategy_file);
	if (st)
		return weft_error_wrap(st, "trainer.strategy");
	t->env = (weft_strategy_env){
		.struct_size = sizeof(weft_strategy_env),
		.rank = t->rank,
		.world_size = t->world,
		.local_rank = t->denv.local_rank,
		.local_world_size = t->denv.local_world_size > 0 ? t->denv.local_world_size : 1,
		.device = t->tc.device,
		.comm_timeout_ms = t->tc.comm_timeout_ms,
		.comm_ops = t->pg ? weft_tp_ledger_ops(weft_pg_ops(t->pg)) : NULL,
		.world = t->pg ? weft_pg_comm(t->pg) : NULL,
		.ctx = t->ctx,
		.params = weft_model_params(t->model),
		.optim_ops = t->optim_ops,
		.optim = t->optim,
		.segs = t->segs,
		.nseg = t->nseg,
		.gradient_clip_val = t->tc.gradient_clip_val,
		.forward_backward = tr_forward_backward,
		.evaluate = tr_evaluate,
		.trainer = t,
		.replica_create = tr_replica_create,
		.replica_forward_backward = tr_replica_forward_backward,
		.replica_free = tr_replica_free,
		.n_devices = weft_trainer_one_process_strategy(t) ? (int32_t)t->tc.devices : 1,
		.stage_create = tr_stage_create,
		.stage_forward = tr_stage_forward,
		.stage_free = tr_stage_free,
		.grads_check = t->tc.loss_scale.enabled ? weft_trainer_grads_check : NULL,
	};
	st = weft_trainer_copy_setup(t);
	if (st)
		return st;
	return t->strat_ops->create(sec, &t->env, &t->strat);
}
