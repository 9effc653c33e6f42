/* GPT under Megatron tensor parallelism (weft_model_options.tp_size > 1):
 * the checks, the split bookkeeping and shard initialisation, and the
 * block forward with the f / g (or sequence-parallel) communication ops.
 * Shapes are declared by gpt.c's declare_block (divided by tp_size). */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "tp/tp.h"

int32_t nn_tp_size(const weft_model_options *opt)
{
	return opt && opt->tp_size > 1 ? opt->tp_size : 1;
}

weft_status nn_gpt_tp_check(const weft_gpt_config *c, const weft_model_options *opt)
{
	int32_t T = nn_tp_size(opt);

	if (T == 1)
		return WEFT_OK;
	if (opt->tp_rank < 0 || opt->tp_rank >= T)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: tp_rank %d is outside [0, %d) "
				      "(tp_size %d)", (int)opt->tp_rank, (int)T, (int)T);
	/* n_embd first: n_head | n_embd, so n_embd % T != 0 implies n_head % T != 0 */
	if (c->n_embd % T)
		return weft_error_set(WEFT_ERR_CONFIG, "gpt: model.n_embd %lld is not divisible by "
				      "the tensor-parallel size %d (trainer.strategy.size; c_attn, "
				      "c_fc and c_proj are split along it); pick a size that "
				      "divides %lld", (long long)c->n_embd, (int)T,
				      (long long)c->n_embd);
	if (c->n_head % T)
		return weft_error_set(WEFT_ERR_CONFIG, "gpt: model.n_head %lld is not divisible by "
				      "the tensor-parallel size %d (trainer.strategy.size; "
				      "attention is split by heads); pick a size that divides %lld",
				      (long long)c->n_head, (int)T, (long long)c->n_head);
	if (opt->stage)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: pipeline stages with tensor "
				      "parallelism (tp %d) are not supported; build whole stages "
				      "or a whole tensor-parallel model", (int)T);
	if (opt->tp_flags & ~(uint32_t)WEFT_TP_SEQUENCE_PARALLEL)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: tp_flags 0x%x has unknown bits",
				      opt->tp_flags);
	return WEFT_OK;
}

static size_t index_of(const weft_tensor *p)
{
	return (size_t)p->param_index;
}

static weft_status mark(weft_model *m, const weft_tensor *p, weft_tp_split split, int32_t ndim,
			int64_t d0, int64_t d1)
{
	int64_t shape[2] = { d0, d1 };

	return p ? weft_tp_group_set_split(m->tp, index_of(p), split, ndim, shape) : WEFT_OK;
}

weft_status nn_gpt_tp_setup(weft_model *m)
{
	int64_t C = m->gpt.n_embd;
	weft_status st;

	if (nn_tp_size(&m->opt) == 1)
		return WEFT_OK;
	st = weft_tp_group_create(m->opt.tp_size, m->opt.tp_rank, m->opt.tp_flags, m->params,
				  &m->tp);
	for (int64_t i = 0; !st && i < m->layer_end - m->layer_begin; i++) {
		const gpt_block *b = &m->blocks[i];

		if ((st = mark(m, b->c_attn.w, WEFT_TP_ROWS3, 2, 3 * C, C)) ||
		    (st = mark(m, b->c_attn.b, WEFT_TP_ROWS3, 1, 3 * C, 0)) ||
		    (st = mark(m, b->attn_proj.w, WEFT_TP_COLS, 2, C, C)) ||
		    (st = mark(m, b->c_fc.w, WEFT_TP_ROWS, 2, 4 * C, C)) ||
		    (st = mark(m, b->c_fc.b, WEFT_TP_ROWS, 1, 4 * C, 0)))
			break;
		st = mark(m, b->mlp_proj.w, WEFT_TP_COLS, 2, C, 4 * C);
		if (!st && (m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL)) {
			const weft_tensor *seq[] = { b->ln_1.w, b->ln_1.b, b->ln_2.w, b->ln_2.b,
						     b->attn_proj.b, b->mlp_proj.b };

			for (size_t k = 0; k < sizeof(seq) / sizeof(seq[0]) && !st; k++)
				if (seq[k])
					st = weft_tp_group_set_partial(m->tp, index_of(seq[k]));
		}
	}
	/* ln_f runs on this rank's positions too */
	if (!st && (m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL) && m->ln_f.w)
		st = weft_tp_group_set_partial(m->tp, index_of(m->ln_f.w));
	if (!st && (m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL) && m->ln_f.b)
		st = weft_tp_group_set_partial(m->tp, index_of(m->ln_f.b));
	return st;
}

weft_status nn_gpt_tp_init_normal(weft_model *m, weft_tensor *p, float std)
{
	weft_tp_split split;
	int64_t full[2];
	int32_t ndim;
	weft_tensor *tmp = NULL;
	float *shard = NULL;
	weft_status st;

	if (!m->tp)
		return nn_init_normal(p, m->opt.seed, std);
	split = weft_tp_group_split(m->tp, index_of(p), &ndim, full);
	if (split == WEFT_TP_REPLICATE)
		return nn_init_normal(p, m->opt.seed, std);
	/* the whole tensor's values, drawn by its name, then this rank's part */
	st = weft_tensor_alloc(p->name, WEFT_F32, ndim, full, WEFT_CPU, WEFT_MEM_OTHER, &tmp);
	if (!st)
		st = nn_init_normal(tmp, m->opt.seed, std);
	if (!st && !(shard = malloc(weft_tensor_nbytes(p) + 1)))
		st = weft_error_set(WEFT_ERR_NOMEM, "gpt: out of memory initialising '%s'",
				    p->name);
	if (!st) {
		weft_tp_take_shard(split, full, m->opt.tp_size, m->opt.tp_rank, tmp->data, shard);
		st = weft_tensor_copy_from_host(p, shard, weft_tensor_nbytes(p));
	}
	free(shard);
	weft_tensor_free(tmp);
	return st;
}

/* A row-parallel Linear inside its module: partial product without the
 * bias, the sum over the group (all-reduce, or reduce-scatter along T
 * under sequence parallelism), then the bias once. */
static weft_status row_linear(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
			      weft_tensor **out)
{
	weft_ctx *ctx = s->ctx;
	int sp = m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL;
	weft_tensor *y;
	weft_status st;

	if ((st = nn_enter(s, l->mod)) || (st = weft_op_linear(ctx, x, l->w, NULL, &y)))
		return st;
	st = sp ? weft_tp_seq_reduce_scatter(ctx, m->tp, y, &y) : weft_tp_reduce(ctx, m->tp, y, &y);
	if (!st && l->b)
		st = weft_op_bias(ctx, y, l->b, &y);
	if (!st)
		st = nn_leave(s);
	if (!st)
		*out = y;
	return st;
}

/* The input of a column-parallel Linear: f (identity forward, all-reduce
 * backward), or under sequence parallelism the all-gather along T whose
 * backward reduce-scatters. */
static weft_status col_input(weft_model *m, weft_ctx *ctx, weft_tensor *h, weft_tensor **out)
{
	if (m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL)
		return weft_tp_seq_gather(ctx, m->tp, h, WEFT_TP_BW_REDUCE_SCATTER, out);
	return weft_tp_copy(ctx, m->tp, h, out);
}

weft_status nn_gpt_tp_block_forward(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *x,
				    weft_tensor **out)
{
	weft_ctx *ctx = s->ctx;
	float p = (float)m->gpt.dropout;
	int64_t heads = m->gpt.n_head / m->opt.tp_size;
	weft_tensor *h, *y;
	weft_status st;

	if ((st = nn_enter(s, b->mod)) || (st = nn_layernorm(s, &b->ln_1, x, &h)) ||
	    (st = nn_enter(s, b->attn)) || (st = col_input(m, ctx, h, &h)) ||
	    (st = nn_linear(s, &b->c_attn, h, &y)) ||
	    (st = weft_op_attention(ctx, y, heads, &y)) ||
	    (st = row_linear(m, s, &b->attn_proj, y, &y)) || (st = weft_op_dropout(ctx, y, p, &y)) ||
	    (st = nn_leave(s)) || (st = weft_op_add(ctx, x, y, &x)))
		return st;
	if ((st = nn_layernorm(s, &b->ln_2, x, &h)) || (st = nn_enter(s, b->mlp)) ||
	    (st = col_input(m, ctx, h, &h)) || (st = nn_linear(s, &b->c_fc, h, &y)) ||
	    (st = weft_op_gelu(ctx, y, &y)) || (st = row_linear(m, s, &b->mlp_proj, y, &y)) ||
	    (st = weft_op_dropout(ctx, y, p, &y)) || (st = nn_leave(s)) ||
	    (st = weft_op_add(ctx, x, y, &x)) || (st = nn_leave(s)))
		return st;
	*out = x;
	return WEFT_OK;
}

weft_status nn_gpt_tp_seq_enter(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	if (!m->tp || !(m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL)) {
		*out = x;
		return WEFT_OK;
	}
	return weft_tp_seq_split(ctx, m->tp, x, out);
}

weft_status nn_gpt_tp_seq_leave(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	if (!m->tp || !(m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL)) {
		*out = x;
		return WEFT_OK;
	}
	/* the head is replicated: every rank's gradient is whole, keep our part */
	return weft_tp_seq_gather(ctx, m->tp, x, WEFT_TP_BW_SPLIT, out);
}

/* A whole model of m's config (no gradients) for gathering or loading. */
static weft_status whole_like(const weft_model *m, weft_model **out)
{
	weft_model_options o = m->opt;

	o.tp_size = 0;
	o.tp_rank = 0;
	o.tp_flags = 0;
	o.no_grads = 1;
	return weft_model_create_gpt(&m->gpt, &o, out);
}

weft_status weft_model_gather_whole(weft_model *m, weft_model **out)
{
	weft_model *w = NULL;
	float *host = NULL;
	size_t n = weft_params_count(m->params);
	weft_status st;

	*out = NULL;
	if (!m->tp)
		return WEFT_OK;
	if ((st = whole_like(m, &w)))
		return st;
	for (size_t i = 0; i < n && !st; i++) {
		weft_tensor *p = weft_params_at(w->params, i);

		free(host);
		host = malloc(weft_tensor_nbytes(p) + 1);
		if (!host) {
			st = weft_error_set(WEFT_ERR_NOMEM, "gather whole: out of memory for '%s'",
					    p->name);
			break;
		}
		st = weft_tp_gather_param(m->tp, m->params, i, 0, host);
		if (!st)
			st = weft_tensor_copy_from_host(p, host, weft_tensor_nbytes(p));
	}
	free(host);
	if (st) {
		weft_model_free(w);
		return st;
	}
	*out = w;
	return WEFT_OK;
}

weft_status nn_gpt_tp_load(weft_model *m, const char *path)
{
	weft_model *w = NULL;
	float *full = NULL, *shard = NULL;
	size_t n = weft_params_count(m->params);
	weft_status st;

	if ((st = whole_like(m, &w)) || (st = weft_model_load_safetensors(w, path)))
		goto out_free;
	for (size_t i = 0; i < n && !st; i++) {
		weft_tensor *p = weft_params_at(m->params, i), *q = weft_params_at(w->params, i);
		int64_t full_shape[2];
		weft_tp_split split = weft_tp_group_split(m->tp, i, NULL, full_shape);

		free(full);
		free(shard);
		full = malloc(weft_tensor_nbytes(q) + 1);
		shard = malloc(weft_tensor_nbytes(p) + 1);
		if (!full || !shard) {
			st = weft_error_set(WEFT_ERR_NOMEM, "load %s: out of memory for '%s'", path,
					    p->name);
			break;
		}
		st = weft_tensor_copy_to_host(q, full, weft_tensor_nbytes(q));
		if (st)
			break;
		weft_tp_take_shard(split, full_shape, m->opt.tp_size, m->opt.tp_rank, full, shard);
		st = weft_tensor_copy_from_host(p, shard, weft_tensor_nbytes(p));
	}
out_free:
	free(full);
	free(shard);
	weft_model_free(w);
	return st;
}
