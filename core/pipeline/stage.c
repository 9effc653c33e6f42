/* GPT pipeline stages for a trainer (stage.h). */
#include <stdlib.h>

#include "nn/act_ckpt.h"
#include "nn/transformer.h"
#include "pipeline/stage.h"
#include "tp/tp.h"
#include "weft/ops.h"

struct weft_pp_stage {
	weft_model *m;
	uint32_t parts;
};

static const char *class_name(weft_model_class c)
{
	switch (c) {
	case WEFT_MODEL_GPT:
		return "gpt";
	case WEFT_MODEL_MLP:
		return "mlp";
	default:
		return "a model plugin";
	}
}

weft_status weft_pp_stage_create(const weft_model *whole, const weft_model_options *opt,
				 uint32_t parts, int64_t layer_begin, int64_t layer_end,
				 weft_pp_stage **out, weft_params **params)
{
	weft_model_options mo = *opt;
	weft_pp_stage *s;
	weft_tp_group *g;
	weft_status st;

	*out = NULL;
	if (weft_model_get_class(whole) != WEFT_MODEL_GPT)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "pipeline stages are built from a GPT's "
				      "blocks, but the model is %s; use model.class: gpt, or a "
				      "strategy without pipeline parallelism",
				      class_name(weft_model_get_class(whole)));
	s = calloc(1, sizeof(*s));
	if (!s)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory building a pipeline stage");
	/* a stage of a tensor-parallel model holds the same shards as the
	 * model (whatever opt says): the strategy copies values between them */
	g = weft_tp_group_find(weft_model_params(whole));
	if (g) {
		mo.tp_size = weft_tp_group_size(g);
		mo.tp_rank = weft_tp_group_rank(g);
		mo.tp_flags = weft_tp_group_flags(g);
	}
	mo.stage = parts;
	mo.layer_begin = layer_begin;
	mo.layer_end = layer_end;
	mo.no_grads = 0;
	st = nn_model_create_like(whole, &mo, &s->m);
	/* the stage's blocks keep what the whole model's would */
	if (!st && (st = weft_model_set_activation_checkpointing(
			    s->m, weft_model_activation_checkpointing(whole))))
		weft_model_free(s->m);
	if (st) {
		free(s);
		return weft_error_wrap(st, "pipeline stage of blocks %lld..%lld",
				       (long long)layer_begin, (long long)layer_end - 1);
	}
	s->parts = parts;
	*out = s;
	*params = weft_model_params(s->m);
	return WEFT_OK;
}

/* The head: the scaled loss when training; evaluation's sums otherwise. */
static weft_status head_forward(weft_pp_stage *s, weft_ctx *ctx, const weft_micro_batch *b,
				weft_tensor *in, int train, double loss_scale, weft_tensor **out,
				double *loss, weft_eval_report *rep)
{
	weft_batch bb = { .inputs = in, .targets = b->data.targets };
	weft_model_output o;
	float value = 0.0f;
	weft_status st;

	if (!train) {
		weft_eval_result r;

		st = weft_model_eval(s->m, ctx, &bb, &r);
		if (st)
			return st;
		*loss = r.loss;
		*out = NULL;
		if (rep) {
			rep->loss_sum += r.loss * (double)r.counted;
			rep->rows += r.counted;
		}
		return WEFT_OK;
	}
	st = weft_model_loss(s->m, ctx, &bb, &o);
	if (!st)
		st = weft_tensor_copy_to_host(o.loss, &value, sizeof(value));
	if (st)
		return st;
	*loss = value;
	*out = o.loss;
	if (loss_scale != 1.0)
		st = weft_op_scale(ctx, o.loss, (float)loss_scale, out);
	return st;
}

weft_status weft_pp_stage_forward(weft_pp_stage *s, weft_ctx *ctx, uint64_t seed,
				  uint64_t step_key, const weft_micro_batch *b, weft_tensor *x,
				  int train, double loss_scale, weft_tensor **out, double *loss,
				  weft_eval_report *rep)
{
	int g = weft_ctx_set_grad_enabled(ctx, train), tm = weft_ctx_set_training(ctx, train);
	weft_tensor *in = x ? x : b->data.inputs;
	weft_status st;

	weft_ctx_set_rng(ctx, seed, b->row_offset);
	if (train && step_key > 0)
		weft_ctx_set_step(ctx, step_key);
	if (s->parts & WEFT_STAGE_HEAD)
		st = head_forward(s, ctx, b, in, train, loss_scale, out, loss, rep);
	else
		st = weft_model_forward(s->m, ctx, in, out);
	weft_ctx_set_grad_enabled(ctx, g);
	weft_ctx_set_training(ctx, tm);
	return st;
}

void weft_pp_stage_free(weft_pp_stage *s)
{
	if (!s)
		return;
	weft_model_free(s->m);
	free(s);
}
