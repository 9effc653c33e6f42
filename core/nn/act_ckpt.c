/* Activation checkpointing of a model (act_ckpt.h): the mode, and the
 * attention that selective recomputes (used by gpt.c and gpt_tp.c). */
#include "nn/nn_impl.h"
#include "tensor/checkpoint.h"

const char *weft_act_ckpt_name(weft_act_ckpt mode)
{
	switch (mode) {
	case WEFT_ACT_CKPT_NONE: return "none";
	case WEFT_ACT_CKPT_FULL: return "full";
	case WEFT_ACT_CKPT_SELECTIVE: return "selective";
	}
	return "?";
}

weft_status weft_model_set_activation_checkpointing(weft_model *m, weft_act_ckpt mode)
{
	if (mode != WEFT_ACT_CKPT_NONE && mode != WEFT_ACT_CKPT_FULL &&
	    mode != WEFT_ACT_CKPT_SELECTIVE)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "activation checkpointing mode %d is "
				      "unknown (none, full, selective)", (int)mode);
	if (mode != WEFT_ACT_CKPT_NONE && m->cls != WEFT_MODEL_GPT)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "activation checkpointing '%s' "
				      "recomputes transformer blocks, and a model of class "
				      "%s has none; use it with model.class gpt, or set it to none",
				      weft_act_ckpt_name(mode),
				      m->cls == WEFT_MODEL_MLP ? "mlp" : "plugin");
	m->act_ckpt = mode;
	return WEFT_OK;
}

weft_act_ckpt weft_model_activation_checkpointing(const weft_model *m)
{
	return m->act_ckpt;
}

typedef struct attn_args {
	int64_t n_head;
	int64_t n_kv_head; /* 0: weft_op_attention; else weft_op_attention_gqa */
} attn_args;

static weft_status attn_fn(weft_ctx *ctx, void *user, weft_tensor *qkv, weft_tensor **out)
{
	const attn_args *a = user;

	if (a->n_kv_head)
		return weft_op_attention_gqa(ctx, qkv, a->n_head, a->n_kv_head, out);
	return weft_op_attention(ctx, qkv, a->n_head, out);
}

weft_status nn_gpt_attention(weft_model *m, weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
			     weft_tensor **out)
{
	attn_args a = { .n_head = n_head };
	int64_t shape[3];

	if (m->act_ckpt != WEFT_ACT_CKPT_SELECTIVE || qkv->ndim != 3)
		return weft_op_attention(ctx, qkv, n_head, out);
	shape[0] = qkv->shape[0];
	shape[1] = qkv->shape[1];
	shape[2] = qkv->shape[2] / 3;
	return weft_checkpoint(ctx, "attention (recomputed)", attn_fn, &a, sizeof(a), qkv, 3,
			       shape, out);
}

weft_status nn_gqa_attention(weft_model *m, weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
			     int64_t n_kv_head, weft_tensor **out)
{
	attn_args a = { .n_head = n_head, .n_kv_head = n_kv_head };
	int64_t shape[3];

	if (m->act_ckpt != WEFT_ACT_CKPT_SELECTIVE || qkv->ndim != 3)
		return weft_op_attention_gqa(ctx, qkv, n_head, n_kv_head, out);
	shape[0] = qkv->shape[0];
	shape[1] = qkv->shape[1];
	shape[2] = qkv->shape[2] / (n_head + 2 * n_kv_head) * n_head;
	return weft_checkpoint(ctx, "attention (recomputed)", attn_fn, &a, sizeof(a), qkv, 3,
			       shape, out);
}
