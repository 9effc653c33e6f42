/* The transformer block's layers that the whole block (gpt.c) and the
 * tensor-parallel block (gpt_tp.c) both run: its norm, its attention over
 * a packed q | k | v, its MLP's activation. */
#include "nn/nn_impl.h"

/* LayerNorm (GPT-2's eps 1e-5 exactly as before) or RMSNorm, in its
 * module's begin/end. */
weft_status nn_block_norm(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
			  weft_tensor **out)
{
	weft_status st;

	if (m->arch.norm == NN_NORM_LAYERNORM && m->arch.norm_eps == (double)NN_LN_EPS)
		return nn_layernorm(s, l, x, out);
	if ((st = nn_enter(s, l->mod)))
		return st;
	if (m->arch.norm == NN_NORM_RMSNORM)
		st = weft_op_rmsnorm(s->ctx, x, l->w, (float)m->arch.norm_eps, out);
	else
		st = weft_op_layernorm(s->ctx, x, l->w, l->b, (float)m->arch.norm_eps, out);
	return st ? st : nn_leave(s);
}

/* Attention over the packed projection y of nh query and kv key/value
 * heads: GPT-2's multi-head attention, or rotary positions on q and k and
 * grouped-query attention (a tp shard's local heads, or all of them). */
weft_status nn_attend(weft_model *m, weft_ctx *ctx, weft_tensor *y, int64_t nh, int64_t kv,
		      weft_tensor **out)
{
	int64_t hs = m->gpt.n_embd / m->gpt.n_head;
	weft_status st;

	if (m->arch.position == NN_POS_LEARNED && kv == nh)
		return nn_gpt_attention(m, ctx, y, nh, out);
	if (m->arch.position == NN_POS_ROPE &&
	    (st = weft_op_rope(ctx, y, &m->arch.rope, nh + kv, hs, 0, &y)))
		return st;
	return nn_gqa_attention(m, ctx, y, nh, kv, out);
}

weft_status nn_add_norm(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
			weft_tensor *r, weft_tensor **sum, weft_tensor **out)
{
	weft_status st;

	if (m->arch.norm == NN_NORM_RMSNORM)
		return (st = weft_op_add(s->ctx, x, r, sum)) ? st :
							       nn_block_norm(m, s, l, *sum, out);
	if ((st = nn_enter(s, l->mod)) ||
	    (st = weft_op_add_layernorm(s->ctx, x, r, l->w, l->b, (float)m->arch.norm_eps, sum,
					out)))
		return st;
	return nn_leave(s);
}

weft_status nn_mlp_in(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
		      weft_tensor **out)
{
	weft_status st;

	if (m->arch.mlp != NN_MLP_GELU_TANH)
		return (st = nn_linear(s, l, x, out)) ? st : nn_activation(m, s->ctx, *out, out);
	if ((st = nn_enter(s, l->mod)) || (st = weft_op_linear_gelu(s->ctx, x, l->w, l->b, out)))
		return st;
	return nn_leave(s);
}

weft_status nn_activation(weft_model *m, weft_ctx *ctx, weft_tensor *y, weft_tensor **out)
{
	if (m->arch.mlp == NN_MLP_SWIGLU)
		return weft_op_swiglu(ctx, y, NULL, out);
	if (m->arch.mlp == NN_MLP_GELU)
		return weft_op_gelu_erf(ctx, y, out);
	return weft_op_gelu(ctx, y, out);
}
