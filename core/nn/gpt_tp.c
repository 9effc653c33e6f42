/* The transformer under Megatron tensor parallelism
 * (weft_model_options.tp_size > 1), GPT-2's and the Llama-style choices
 * alike: the checks, the split bookkeeping and shard initialisation, and
 * the block forward with the f / g (or sequence-parallel) communication
 * ops. Shapes are declared by gpt.c's declare_block (the split ones from
 * nn_gpt_tp_qkv_rows and tp_size).
 *
 * Attention is split by heads: c_attn's q rows (and k, v rows when the
 * key/value heads are at least as many as the ranks) column-parallel,
 * c_proj row-parallel. With fewer key/value heads than ranks every rank
 * holds the whole k and v projection, uses the one key/value head its
 * query heads share, and its gradient of them is partial (the strategy
 * sums it over the group: core/tp's shared parts). SwiGLU's packed gate |
 * up is split part by part, so each rank's gate and up halves match; the
 * down projection is row-parallel. RMSNorm weights are replicated (partial
 * gradients under sequence parallelism, as LayerNorm's); rotary positions
 * are applied per local head on whole sequences (the attention's input is
 * gathered first under sequence parallelism), so a token's position is
 * its place in the whole sequence. An untied lm_head is split by
 * vocabulary like wte under vocabulary parallelism. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "tp/tp.h"

int32_t nn_tp_size(const weft_model_options *opt)
{
	return opt && opt->tp_size > 1 ? opt->tp_size : 1;
}

weft_status nn_gpt_tp_check(const weft_gpt_config *c, const nn_arch *a,
			    const weft_model_options *opt)
{
	int32_t T = nn_tp_size(opt);
	int64_t kv = a->n_kv_head ? a->n_kv_head : c->n_head;
	int64_t inner = a->intermediate ? a->intermediate : 4 * c->n_embd;

	if (T == 1)
		return WEFT_OK;
	if (opt->tp_rank < 0 || opt->tp_rank >= T)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: tp_rank %d is outside [0, %d) "
				      "(tp_size %d)", (int)opt->tp_rank, (int)T, (int)T);
	/* n_embd first: n_head | n_embd, so n_embd % T != 0 implies n_head % T != 0 */
	if (c->n_embd % T)
		return weft_error_set(WEFT_ERR_CONFIG, "gpt: model.n_embd %lld is not divisible by "
				      "the tensor-parallel size %d (trainer.strategy.size, or tp "
				      "under strategy hybrid; c_attn, c_fc and c_proj are split "
				      "along it); pick a size that divides %lld", (long long)c->n_embd, (int)T,
				      (long long)c->n_embd);
	if (c->n_head % T)
		return weft_error_set(WEFT_ERR_CONFIG, "gpt: model.n_head %lld is not divisible by "
				      "the tensor-parallel size %d (trainer.strategy.size, or tp "
				      "under strategy hybrid; attention is split by heads); pick a "
				      "size that divides %lld",
				      (long long)c->n_head, (int)T, (long long)c->n_head);
	if (kv >= T ? kv % T : T % kv)
		return weft_error_set(WEFT_ERR_CONFIG, "gpt: model.n_kv_head %lld is neither a "
				      "multiple nor a divisor of the tensor-parallel size %d "
				      "(trainer.strategy.size, or tp under strategy hybrid): key/value "
				      "heads are split over the ranks when n_kv_head is a multiple of "
				      "it and replicated when it divides it; pick a size that divides "
				      "%lld or is a multiple of it", (long long)kv, (int)T,
				      (long long)kv);
	if (inner % T)
		return weft_error_set(WEFT_ERR_CONFIG, "gpt: model.intermediate_size %lld is not "
				      "divisible by the tensor-parallel size %d (trainer.strategy.size, "
				      "or tp under strategy hybrid; the MLP's %s split along "
				      "it); pick a size that divides %lld, or an intermediate_size that "
				      "is a multiple of %d", (long long)inner, (int)T,
				      a->mlp == NN_MLP_SWIGLU ? "gate, up and down projections are" :
								"c_fc and c_proj are",
				      (long long)inner, (int)T);
	/* a stage's boundary tensors are whole sequences (the pipeline sends
	 * [rows, T, n_embd]): sequence parallelism would split them */
	if (opt->stage && (opt->tp_flags & WEFT_TP_SEQUENCE_PARALLEL))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: pipeline stages of a "
				      "tensor-parallel GPT (tp %d) exchange whole sequences; build "
				      "them without sequence parallelism (tp_flags bit 1)", (int)T);
	if (opt->tp_flags & ~(uint32_t)(WEFT_TP_SEQUENCE_PARALLEL | WEFT_TP_VOCAB_PARALLEL))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: tp_flags 0x%x has unknown bits",
				      opt->tp_flags);
	if ((opt->tp_flags & WEFT_TP_VOCAB_PARALLEL) && c->vocab_size % T)
		return weft_error_set(WEFT_ERR_CONFIG, "gpt: model.vocab_size %lld is not divisible "
				      "by the tensor-parallel size %d (trainer.strategy.size; "
				      "vocab_parallel splits the embedding by vocabulary rows); pad "
				      "vocab_size to a multiple of %d (%lld) or set vocab_parallel: "
				      "false", (long long)c->vocab_size, (int)T, (int)T,
				      (long long)((c->vocab_size + T - 1) / T * T));
	return WEFT_OK;
}

int nn_gpt_tp_vocab(const weft_model *m)
{
	return m->tp && (m->opt.tp_flags & WEFT_TP_VOCAB_PARALLEL);
}

int64_t nn_gpt_tp_wte_rows(const weft_model *m)
{
	int32_t T = nn_tp_size(&m->opt);

	return (m->opt.tp_flags & WEFT_TP_VOCAB_PARALLEL) && T > 1 ? m->gpt.vocab_size / T :
								      m->gpt.vocab_size;
}

static int64_t kv_heads(const weft_model *m)
{
	return m->arch.n_kv_head ? m->arch.n_kv_head : m->gpt.n_head;
}

static int64_t inner(const weft_model *m)
{
	return m->arch.intermediate ? m->arch.intermediate : 4 * m->gpt.n_embd;
}

/* Whether the key/value heads are replicated: fewer than the ranks. */
static int kv_shared(const weft_model *m, int32_t split)
{
	return split > 1 && kv_heads(m) < split;
}

int64_t nn_gpt_tp_qkv_rows(const weft_model *m, int32_t split)
{
	int64_t nh = m->gpt.n_head, kv = kv_heads(m), hs = m->gpt.n_embd / nh;

	if (kv_shared(m, split))
		return (nh / split + 2 * kv) * hs;
	return (nh + 2 * kv) * hs / split;
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

/* c_attn's weight (ndim 2) or bias (1) over `split` ranks: GPT-2's q | k |
 * v of equal parts (WEFT_TP_ROWS3), else the parts of grouped-query
 * attention, k and v split with q or shared by every rank. */
static weft_status mark_qkv(weft_model *m, const weft_tensor *p, int32_t split, int32_t ndim)
{
	int64_t C = m->gpt.n_embd, hs = C / m->gpt.n_head, kv = kv_heads(m) * hs;
	int64_t rows[3] = { C, kv, kv }, full[2] = { C + 2 * kv, ndim > 1 ? C : 0 };
	int32_t parts[3] = { 1, !kv_shared(m, split), !kv_shared(m, split) };

	if (!p)
		return WEFT_OK;
	if (kv == C)
		return mark(m, p, WEFT_TP_ROWS3, ndim, 3 * C, full[1]);
	return weft_tp_group_set_parts(m->tp, index_of(p), 3, rows, parts, ndim, full);
}

/* c_fc's weight or bias: GELU's rows split, SwiGLU's gate | up split part
 * by part (rank r holds block r of each, so its halves match). */
static weft_status mark_fc(weft_model *m, const weft_tensor *p, int32_t ndim)
{
	int64_t C = m->gpt.n_embd, I = inner(m), rows[2] = { I, I };
	int64_t full[2] = { 2 * I, ndim > 1 ? C : 0 };
	int32_t parts[2] = { 1, 1 };

	if (!p)
		return WEFT_OK;
	if (m->arch.mlp != NN_MLP_SWIGLU)
		return mark(m, p, WEFT_TP_ROWS, ndim, I, full[1]);
	return weft_tp_group_set_parts(m->tp, index_of(p), 2, rows, parts, ndim, full);
}

/* With 1 < n_kv_head < tp each rank holds every key/value head but needs
 * one: a 0/1 matrix (out, in) picking its q | k_j | v_j out of c_attn's
 * q | k | v, applied as a Linear (exact: one product by 1 per output, the
 * backward scatters the gradient back, zeros elsewhere). Kept on the host,
 * copied into the step's context like the positions. */
static weft_status kv_select_setup(weft_model *m)
{
	int64_t nh = m->gpt.n_head, kv = kv_heads(m), hs = m->gpt.n_embd / nh;
	int32_t T = nn_tp_size(&m->opt);
	int64_t q = nh / T * hs, in, out, j;

	if (!kv_shared(m, T) || kv == 1)
		return WEFT_OK;
	in = q + 2 * kv * hs;
	out = q + 2 * hs;
	j = (int64_t)m->opt.tp_rank * kv / T; /* the head of this rank's query heads */
	m->kv_select = calloc((size_t)(in * out), sizeof(float));
	if (!m->kv_select)
		return weft_error_set(WEFT_ERR_NOMEM, "gpt: out of memory for the key/value head "
				      "selection (%lld x %lld)", (long long)out, (long long)in);
	m->kv_select_shape[0] = out;
	m->kv_select_shape[1] = in;
	for (int64_t o = 0; o < out; o++) {
		int64_t src = o < q ? o :
			      o < q + hs ? q + j * hs + (o - q) :
					   q + kv * hs + j * hs + (o - q - hs);

		m->kv_select[o * in + src] = 1.0f;
	}
	return WEFT_OK;
}

/* ---- the plan ---- */

enum { STYLE_REPLICATE = 0, STYLE_COLWISE = 1, STYLE_ROWWISE = 2 };

static const char *const style_names[] = { "replicate", "colwise", "rowwise" };

/* The style the plan gives module `name` (STYLE_REPLICATE when no line
 * matches); counts the lines that matched in used[]. */
static int plan_style(const char *plan, const char *name, int *used, int *line_out)
{
	const char *p = plan;
	int line = 0;

	while (p && *p) {
		const char *nl = strchr(p, '\n'), *eq = strchr(p, '=');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char pat[256], style[32];

		if (eq && (size_t)(eq - p) < len && (size_t)(eq - p) < sizeof(pat)) {
			snprintf(pat, sizeof(pat), "%.*s", (int)(eq - p), p);
			snprintf(style, sizeof(style), "%.*s", (int)(len - (size_t)(eq - p) - 1),
				 eq + 1);
			if (fnmatch(pat, name, 0) == 0) {
				if (line < 64)
					used[line] = 1;
				*line_out = line;
				for (int s = 0; s < 3; s++)
					if (!strcmp(style, style_names[s]))
						return s;
				return -1;
			}
		}
		line++;
		p = nl ? nl + 1 : NULL;
	}
	*line_out = -1;
	return STYLE_REPLICATE;
}

/* One attention or MLP: (first, second) must be colwise + rowwise or
 * both replicate; *split gets T or 1. */
static weft_status plan_pair(const weft_model *m, const char *first, const char *second,
			     int *used, int32_t *split)
{
	int l1, l2, a = plan_style(m->opt.tp_plan, first, used, &l1);
	int b = plan_style(m->opt.tp_plan, second, used, &l2);

	if (a < 0 || b < 0)
		return weft_error_set(WEFT_ERR_CONFIG, "tp plan: %s: the style must be colwise, "
				      "rowwise or replicate", a < 0 ? first : second);
	if (a == STYLE_COLWISE && b == STYLE_ROWWISE) {
		*split = m->opt.tp_size;
		return WEFT_OK;
	}
	if (a == STYLE_REPLICATE && b == STYLE_REPLICATE) {
		*split = 1;
		return WEFT_OK;
	}
	return weft_error_set(WEFT_ERR_CONFIG, "tp plan: %s is %s but %s is %s; the first "
			      "Linear's split output feeds the second, so make them colwise and "
			      "rowwise, or both replicate", first, style_names[a], second,
			      style_names[b]);
}

weft_status nn_gpt_tp_plan(weft_model *m)
{
	int used[64] = { 0 };
	char a[96], b[96];
	int32_t T = nn_tp_size(&m->opt);
	weft_status st = WEFT_OK;

	for (int64_t i = m->layer_begin; i < m->layer_end; i++) {
		gpt_block *blk = &m->blocks[i - m->layer_begin];

		blk->tp_attn = blk->tp_mlp = T;
		if (T == 1 || !m->opt.tp_plan)
			continue;
		snprintf(a, sizeof(a), "transformer.h.%lld.attn.c_attn", (long long)i);
		snprintf(b, sizeof(b), "transformer.h.%lld.attn.c_proj", (long long)i);
		if ((st = plan_pair(m, a, b, used, &blk->tp_attn)))
			return st;
		snprintf(a, sizeof(a), "transformer.h.%lld.mlp.c_fc", (long long)i);
		snprintf(b, sizeof(b), "transformer.h.%lld.mlp.c_proj", (long long)i);
		if ((st = plan_pair(m, a, b, used, &blk->tp_mlp)))
			return st;
	}
	if (T > 1 && m->opt.tp_plan) {
		const char *p = m->opt.tp_plan;

		for (int line = 0; p && *p; line++) {
			const char *nl = strchr(p, '\n');
			int len = nl ? (int)(nl - p) : (int)strlen(p);

			if (line < 64 && !used[line])
				return weft_error_set(WEFT_ERR_CONFIG, "tp plan: '%.*s' matches no "
						      "Linear that can be split; the GPT's are the "
						      "blocks' attn.c_attn, attn.c_proj, mlp.c_fc and "
						      "mlp.c_proj (transformer.h.0.attn.c_attn ...)",
						      len, p);
			p = nl ? nl + 1 : NULL;
		}
	}
	return WEFT_OK;
}

weft_status nn_gpt_tp_setup(weft_model *m)
{
	int64_t C = m->gpt.n_embd, I = inner(m);
	int sp = m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL;
	weft_status st;

	if (nn_tp_size(&m->opt) == 1)
		return WEFT_OK;
	st = weft_tp_group_create(m->opt.tp_size, m->opt.tp_rank, m->opt.tp_flags, m->params,
				  &m->tp);
	for (int64_t i = 0; !st && i < m->layer_end - m->layer_begin; i++) {
		const gpt_block *b = &m->blocks[i];

		if (b->tp_attn > 1 &&
		    ((st = mark_qkv(m, b->c_attn.w, b->tp_attn, 2)) ||
		     (st = mark_qkv(m, b->c_attn.b, b->tp_attn, 1)) ||
		     (st = mark(m, b->attn_proj.w, WEFT_TP_COLS, 2, C, C))))
			break;
		if (b->tp_mlp > 1 &&
		    ((st = mark_fc(m, b->c_fc.w, 2)) || (st = mark_fc(m, b->c_fc.b, 1)) ||
		     (st = mark(m, b->mlp_proj.w, WEFT_TP_COLS, 2, C, I))))
			break;
		if (sp) {
			/* row-parallel biases are added on this rank's positions */
			const weft_tensor *seq[] = { b->ln_1.w, b->ln_1.b, b->ln_2.w, b->ln_2.b,
						     b->tp_attn > 1 ? b->attn_proj.b : NULL,
						     b->tp_mlp > 1 ? b->mlp_proj.b : NULL };

			for (size_t k = 0; k < sizeof(seq) / sizeof(seq[0]) && !st; k++)
				if (seq[k])
					st = weft_tp_group_set_partial(m->tp, index_of(seq[k]));
		}
	}
	/* vocabulary parallelism: this rank's block of wte rows (and logits),
	 * and of an untied head's */
	if (!st && (m->opt.tp_flags & WEFT_TP_VOCAB_PARALLEL) && m->wte)
		st = mark(m, m->wte, WEFT_TP_ROWS, 2, m->gpt.vocab_size, C);
	if (!st && (m->opt.tp_flags & WEFT_TP_VOCAB_PARALLEL) && m->head_w)
		st = mark(m, m->head_w, WEFT_TP_ROWS, 2, m->gpt.vocab_size, C);
	if (!st)
		st = kv_select_setup(m);
	/* ln_f runs on this rank's positions too */
	if (!st && sp && m->ln_f.w)
		st = weft_tp_group_set_partial(m->tp, index_of(m->ln_f.w));
	if (!st && sp && m->ln_f.b)
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
		weft_tp_group_take_shard(m->tp, index_of(p), m->opt.tp_rank, tmp->data, shard);
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

/* A sub-layer the plan keeps whole: every rank computes all of it; under
 * sequence parallelism on all positions (gathered, the gradient being
 * whole on every rank, then this rank's positions kept). */
static weft_status whole_in(weft_model *m, weft_ctx *ctx, weft_tensor *h, weft_tensor **out)
{
	if (m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL)
		return weft_tp_seq_gather(ctx, m->tp, h, WEFT_TP_BW_SPLIT, out);
	*out = h;
	return WEFT_OK;
}

static weft_status whole_out(weft_model *m, weft_ctx *ctx, weft_tensor *y, weft_tensor **out)
{
	if (m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL)
		return weft_tp_seq_split(ctx, m->tp, y, out);
	*out = y;
	return WEFT_OK;
}

/* This rank's q | k | v down to the key/value head its query heads use
 * (kv_select_setup); y itself when there is nothing to pick. */
static weft_status kv_select(weft_model *m, weft_ctx *ctx, weft_tensor *y, weft_tensor **out)
{
	weft_tensor *sel;
	weft_status st;

	if (!m->kv_select) {
		*out = y;
		return WEFT_OK;
	}
	if ((st = weft_ctx_tensor(ctx, "kv head selection", WEFT_F32, 2, m->kv_select_shape,
				  &sel)) ||
	    (st = weft_tensor_copy_from_host(sel, m->kv_select, weft_tensor_nbytes(sel))))
		return st;
	return weft_op_linear(ctx, y, sel, NULL, out);
}

static weft_status attn_forward(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *h,
				weft_tensor **out)
{
	weft_ctx *ctx = s->ctx;
	int64_t nh = m->gpt.n_head, kv = kv_heads(m), T = b->tp_attn;
	weft_tensor *y;
	weft_status st;

	if (T == 1) {
		if ((st = whole_in(m, ctx, h, &h)) || (st = nn_linear(s, &b->c_attn, h, &y)) ||
		    (st = nn_attend(m, ctx, y, nh, kv, &y)) ||
		    (st = nn_linear(s, &b->attn_proj, y, &y)))
			return st;
		return whole_out(m, ctx, y, out);
	}
	if ((st = col_input(m, ctx, h, &h)) || (st = nn_linear(s, &b->c_attn, h, &y)) ||
	    (st = kv_select(m, ctx, y, &y)) ||
	    (st = nn_attend(m, ctx, y, nh / T, kv_shared(m, (int32_t)T) ? 1 : kv / T, &y)))
		return st;
	return row_linear(m, s, &b->attn_proj, y, out);
}

static weft_status mlp_forward(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *h,
			       weft_tensor **out)
{
	weft_ctx *ctx = s->ctx;
	weft_tensor *y;
	weft_status st;

	if (b->tp_mlp == 1) {
		if ((st = whole_in(m, ctx, h, &h)) || (st = nn_linear(s, &b->c_fc, h, &y)) ||
		    (st = nn_activation(m, ctx, y, &y)) || (st = nn_linear(s, &b->mlp_proj, y, &y)))
			return st;
		return whole_out(m, ctx, y, out);
	}
	if ((st = col_input(m, ctx, h, &h)) || (st = nn_linear(s, &b->c_fc, h, &y)) ||
	    (st = nn_activation(m, ctx, y, &y)))
		return st;
	return row_linear(m, s, &b->mlp_proj, y, out);
}

weft_status nn_gpt_tp_block_forward(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *x,
				    weft_tensor **out)
{
	weft_ctx *ctx = s->ctx;
	float p = (float)m->gpt.dropout;
	weft_tensor *h, *y;
	weft_status st;

	if ((st = nn_enter(s, b->mod)) || (st = nn_block_norm(m, s, &b->ln_1, x, &h)) ||
	    (st = nn_enter(s, b->attn)) || (st = attn_forward(m, s, b, h, &y)) ||
	    (st = weft_op_dropout(ctx, y, p, &y)) || (st = nn_leave(s)) ||
	    (st = weft_op_add(ctx, x, y, &x)))
		return st;
	if ((st = nn_block_norm(m, s, &b->ln_2, x, &h)) || (st = nn_enter(s, b->mlp)) ||
	    (st = mlp_forward(m, s, b, h, &y)) || (st = weft_op_dropout(ctx, y, p, &y)) ||
	    (st = nn_leave(s)) || (st = weft_op_add(ctx, x, y, &x)) || (st = nn_leave(s)))
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
	int sp = m->tp && (m->opt.tp_flags & WEFT_TP_SEQUENCE_PARALLEL);

	/* a vocabulary-parallel head is column-parallel: f (or the gather whose
	 * backward sums the ranks' partial gradients) before it */
	if (nn_gpt_tp_vocab(m))
		return sp ? weft_tp_seq_gather(ctx, m->tp, x, WEFT_TP_BW_REDUCE_SCATTER, out) :
			    weft_tp_copy(ctx, m->tp, x, out);
	if (!sp) {
		*out = x;
		return WEFT_OK;
	}
	/* the head is replicated: every rank's gradient is whole, keep our part */
	return weft_tp_seq_gather(ctx, m->tp, x, WEFT_TP_BW_SPLIT, out);
}

weft_status nn_gpt_tp_embed(weft_model *m, weft_ctx *ctx, weft_tensor *ids, weft_tensor **out)
{
	weft_tensor *part;
	weft_status st;

	if (!nn_gpt_tp_vocab(m))
		return weft_op_embedding(ctx, ids, m->wte, out);
	/* Megatron's vocab-parallel embedding: this rank's rows, summed */
	if ((st = weft_tp_vocab_embedding(ctx, m->tp, ids, m->wte, &part)))
		return st;
	return weft_tp_reduce(ctx, m->tp, part, out);
}

weft_status nn_gpt_tp_gather(weft_model *m, weft_model *w)
{
	float *host = NULL;
	size_t n = weft_params_count(m->params);
	weft_status st = WEFT_OK;

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
	return st;
}

weft_status nn_gpt_tp_take_shards(weft_model *m, const weft_model *w, const char *path)
{
	float *full = NULL, *shard = NULL;
	size_t n = weft_params_count(m->params);
	weft_status st = WEFT_OK;

	for (size_t i = 0; i < n && !st; i++) {
		weft_tensor *p = weft_params_at(m->params, i), *q = weft_params_at(w->params, i);
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
		weft_tp_group_take_shard(m->tp, i, m->opt.tp_rank, full, shard);
		st = weft_tensor_copy_from_host(p, shard, weft_tensor_nbytes(p));
	}
	free(full);
	free(shard);
	return st;
}
