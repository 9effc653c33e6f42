/* GPT (nanoGPT's model): construction with nanoGPT's names and GPT-2
 * initialisation, pipeline stages, and forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gpt_decode.h"
#include "nn/nn_impl.h"
#include "nn/transformer.h"
#include "tensor/checkpoint.h"

weft_status nn_gpt_check(const weft_gpt_config *c)
{
	if (c->n_layer < 1 || c->n_layer > 100000)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: n_layer is %lld; it must be in "
				      "[1, 100000]", (long long)c->n_layer);
	if (c->n_head < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: n_head is %lld; it must be >= 1",
				      (long long)c->n_head);
	if (c->n_embd < 1 || c->n_embd % c->n_head)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: n_embd %lld must be a positive "
				      "multiple of n_head %lld (each head gets n_embd / n_head "
				      "channels)", (long long)c->n_embd, (long long)c->n_head);
	if (c->vocab_size < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: vocab_size is %lld; it must be "
				      ">= 1", (long long)c->vocab_size);
	if (c->block_size < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: block_size is %lld; it must be "
				      ">= 1", (long long)c->block_size);
	if (!(c->dropout >= 0.0 && c->dropout < 1.0))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: dropout is %g; it must be in "
				      "[0, 1)", c->dropout);
	return WEFT_OK;
}

static int64_t kv_heads(const weft_model *m)
{
	return m->arch.n_kv_head ? m->arch.n_kv_head : m->gpt.n_head;
}

static int64_t inner(const weft_model *m)
{
	return m->arch.intermediate ? m->arch.intermediate : 4 * m->gpt.n_embd;
}

static const char *norm_type(const weft_model *m)
{
	return m->arch.norm == NN_NORM_RMSNORM ? "RMSNorm" : "LayerNorm";
}

static weft_status arch_check(const weft_gpt_config *c, const nn_arch *a)
{
	int64_t kv = a->n_kv_head ? a->n_kv_head : c->n_head;

	if (a->norm_eps < 0.0 || !(a->norm_eps < 1.0))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: norm eps is %g; it must be in "
				      "(0, 1)", a->norm_eps);
	if (kv < 1 || c->n_head % kv)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: n_kv_head %lld must divide "
				      "n_head %lld (each key/value head serves n_head / n_kv_head "
				      "query heads)", (long long)kv, (long long)c->n_head);
	if (a->intermediate < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: intermediate_size is %lld; it "
				      "must be >= 1", (long long)a->intermediate);
	if (a->position == NN_POS_ROPE && (c->n_embd / c->n_head) % 2)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: rotary positions rotate pairs "
				      "of channels, but the head size n_embd / n_head = %lld is "
				      "odd; choose n_embd and n_head with an even quotient",
				      (long long)(c->n_embd / c->n_head));
	return WEFT_OK;
}

/* A Linear (weight [out, in]), a LayerNorm (weight [in]) with an
 * optional bias, or an RMSNorm (weight [in], never a bias). */
static weft_status affine_b(weft_model *m, weft_module *parent, const char *type,
			    const char *name, int64_t out_f, int64_t in_f, int bias, nn_affine *a)
{
	int is_linear = !strcmp(type, "Linear");
	int64_t wshape[2] = { out_f, in_f };
	weft_status st;

	memset(a, 0, sizeof(*a));
	st = nn_module_push(m, (int32_t)(parent - m->mods), type, &a->mod, "%s", name);
	if (!st && is_linear)
		st = nn_param(m, a->mod, "weight", 2, wshape, &a->w);
	else if (!st)
		st = nn_param(m, a->mod, "weight", 1, &in_f, &a->w);
	if (!st && bias && strcmp(type, "RMSNorm"))
		st = nn_param(m, a->mod, "bias", 1, is_linear ? &out_f : &in_f, &a->b);
	if (!st)
		nn_module_close(m, a->mod);
	return st;
}

/* affine with a bias when model.bias is on. */
static weft_status affine(weft_model *m, weft_module *parent, const char *type,
			  const char *name, int64_t out_f, int64_t in_f, nn_affine *a)
{
	return affine_b(m, parent, type, name, out_f, in_f, m->gpt.bias, a);
}

static weft_status declare_block(weft_model *m, weft_module *h, int64_t i, gpt_block *b)
{
	int64_t C = m->gpt.n_embd, ta = b->tp_attn, tm = b->tp_mlp;
	int64_t I = inner(m), fc = m->arch.mlp == NN_MLP_SWIGLU ? 2 * I : I;
	int32_t hi = (int32_t)(h - m->mods), bi, ai, mi;
	char p[64], n[96];
	weft_status st;

	snprintf(p, sizeof(p), "transformer.h.%lld", (long long)i);
	if ((st = nn_module_push(m, hi, "Block", &b->mod, "%s", p)))
		return st;
	bi = (int32_t)(b->mod - m->mods);
	snprintf(n, sizeof(n), "%s.ln_1", p);
	if ((st = affine(m, b->mod, norm_type(m), n, 0, C, &b->ln_1)) ||
	    (st = nn_module_push(m, bi, "CausalSelfAttention", &b->attn, "%s.attn", p)))
		return st;
	ai = (int32_t)(b->attn - m->mods);
	snprintf(n, sizeof(n), "%s.attn.c_attn", p);
	if ((st = affine_b(m, &m->mods[ai], "Linear", n, nn_gpt_tp_qkv_rows(m, (int32_t)ta), C,
			   m->gpt.bias || m->arch.qkv_bias, &b->c_attn)))
		return st;
	snprintf(n, sizeof(n), "%s.attn.c_proj", p);
	if ((st = affine(m, &m->mods[ai], "Linear", n, C, C / ta, &b->attn_proj)))
		return st;
	nn_module_close(m, b->attn);
	snprintf(n, sizeof(n), "%s.ln_2", p);
	if ((st = affine(m, &m->mods[bi], norm_type(m), n, 0, C, &b->ln_2)) ||
	    (st = nn_module_push(m, bi, "MLP", &b->mlp, "%s.mlp", p)))
		return st;
	mi = (int32_t)(b->mlp - m->mods);
	snprintf(n, sizeof(n), "%s.mlp.c_fc", p);
	if ((st = affine(m, &m->mods[mi], "Linear", n, fc / tm, C, &b->c_fc)))
		return st;
	snprintf(n, sizeof(n), "%s.mlp.c_proj", p);
	if ((st = affine(m, &m->mods[mi], "Linear", n, C, I / tm, &b->mlp_proj)))
		return st;
	nn_module_close(m, b->mlp);
	nn_module_close(m, b->mod);
	return WEFT_OK;
}

static weft_status declare(weft_model *m)
{
	const weft_gpt_config *c = &m->gpt;
	int64_t C = c->n_embd, wte_shape[2] = { nn_gpt_tp_wte_rows(m), C };
	int64_t wpe_shape[2] = { c->block_size, C };
	weft_module *tr = NULL, *h;
	weft_status st;

	if ((st = nn_module_push(m, -1, "GPT", &m->root, "%s", "")))
		return st;
	if ((st = nn_module_push(m, 0, "ModuleDict", &tr, "transformer")))
		return st;
	if (m->stage & WEFT_STAGE_EMBED) {
		if ((st = nn_module_push(m, 1, "Embedding", &m->wte_mod, "transformer.wte")) ||
		    (st = nn_param(m, m->wte_mod, "weight", 2, wte_shape, &m->wte)))
			return st;
		nn_module_close(m, m->wte_mod);
	}
	if ((m->stage & WEFT_STAGE_EMBED) && m->arch.position == NN_POS_LEARNED) {
		if ((st = nn_module_push(m, 1, "Embedding", &m->wpe_mod, "transformer.wpe")) ||
		    (st = nn_param(m, m->wpe_mod, "weight", 2, wpe_shape, &m->wpe)))
			return st;
		nn_module_close(m, m->wpe_mod);
	}
	if (m->layer_end > m->layer_begin) {
		if ((st = nn_module_push(m, 1, "ModuleList", &h, "transformer.h")))
			return st;
		for (int64_t i = m->layer_begin; i < m->layer_end; i++)
			if ((st = declare_block(m, h, i, &m->blocks[i - m->layer_begin])))
				return st;
		nn_module_close(m, h);
	}
	if (m->stage & WEFT_STAGE_HEAD) {
		if ((st = affine(m, tr, norm_type(m), "transformer.ln_f", 0, C, &m->ln_f)))
			return st;
	}
	nn_module_close(m, tr);
	if (m->stage & WEFT_STAGE_HEAD) {
		if ((st = nn_module_push(m, 0, "Linear", &m->head_mod, "lm_head")))
			return st;
		if (m->arch.untied) {
			if ((st = nn_param(m, m->head_mod, "weight", 2, wte_shape, &m->head_w)))
				return st;
			nn_module_close(m, m->head_mod);
			nn_module_close(m, m->root);
			return WEFT_OK;
		}
		m->head_mod->tied_to = "transformer.wte.weight";
		/* a head without the embedding keeps its own copy of wte */
		if (!(m->stage & WEFT_STAGE_EMBED) &&
		    (st = weft_params_add(m->params, "transformer.wte.weight", WEFT_F32, 2,
					  wte_shape, &m->wte)))
			return st;
		nn_module_close(m, m->head_mod);
	}
	nn_module_close(m, m->root);
	return WEFT_OK;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* GPT-2's initialisation (nanoGPT's _init_weights and its c_proj rule). */
static weft_status init_weights(weft_model *m)
{
	float std = 0.02f, proj_std = (float)(0.02 / sqrt(2.0 * (double)m->gpt.n_layer));
	weft_status st = WEFT_OK;

	for (size_t i = 0; i < weft_params_count(m->params) && !st; i++) {
		weft_tensor *p = weft_params_at(m->params, i);

		if (ends_with(p->name, ".bias"))
			continue; /* zero from finalize */
		if (strstr(p->name, ".ln_"))
			st = nn_init_const(p, 1.0f);
		else if (ends_with(p->name, "c_proj.weight"))
			st = nn_gpt_tp_init_normal(m, p, proj_std);
		else
			st = nn_gpt_tp_init_normal(m, p, std);
	}
	return st;
}

static weft_status gpt_forward(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out);
static weft_status gpt_forward_loss(weft_model *m, weft_ctx *ctx, weft_tensor *x,
				    weft_tensor *targets, int64_t ignore_index, weft_tensor **loss);
static weft_status gpt_load(weft_model *m, const char *path);

static int64_t gpt_ignore_index(const weft_model *m)
{
	(void)m;
	return -1;
}

static const nn_class_ops gpt_ops = {
	.forward = gpt_forward,
	.load = gpt_load,
	.vocab_split = nn_gpt_tp_vocab,
	.ignore_index = gpt_ignore_index,
	.forward_loss = gpt_forward_loss,
};

weft_status weft_model_create_gpt(const weft_gpt_config *cfg, const weft_model_options *opt,
				  weft_model **out)
{
	return nn_model_create_transformer(cfg, NULL, opt, out);
}

weft_status nn_model_create_like(const weft_model *like, const weft_model_options *opt,
				 weft_model **out)
{
	return nn_model_create_transformer(&like->gpt, &like->arch, opt, out);
}

weft_status nn_model_create_transformer(const weft_gpt_config *cfg, const nn_arch *arch,
					const weft_model_options *opt, weft_model **out)
{
	static const nn_arch gpt2 = { 0 };
	weft_model *m;
	int64_t begin = 0, end, nblocks;
	uint32_t stage = WEFT_STAGE_EMBED | WEFT_STAGE_HEAD;
	weft_status st;

	*out = NULL;
	if (!arch)
		arch = &gpt2;
	if ((st = nn_gpt_check(cfg)) || (st = arch_check(cfg, arch)) ||
	    (st = nn_gpt_tp_check(cfg, arch, opt)))
		return st;
	end = cfg->n_layer;
	if (opt && opt->stage) {
		stage = opt->stage;
		begin = opt->layer_begin;
		end = opt->layer_end ? opt->layer_end : cfg->n_layer;
		if (stage & ~(uint32_t)(WEFT_STAGE_EMBED | WEFT_STAGE_HEAD | WEFT_STAGE_BLOCKS))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: stage 0x%x has unknown "
					      "bits (WEFT_STAGE_EMBED | WEFT_STAGE_HEAD | "
					      "WEFT_STAGE_BLOCKS)", stage);
		if (begin < 0 || begin > end || end > cfg->n_layer)
			return weft_error_set(WEFT_ERR_INVALID_ARG, "gpt: stage layers [%lld, %lld) "
					      "do not fit n_layer %lld", (long long)begin,
					      (long long)end, (long long)cfg->n_layer);
	}
	nblocks = end - begin;
	if ((st = nn_model_alloc(WEFT_MODEL_GPT, &gpt_ops, opt, 8 + 9 * (size_t)nblocks, &m)))
		return st;
	m->gpt = *cfg;
	m->arch = *arch;
	if (m->arch.norm_eps == 0.0)
		m->arch.norm_eps = NN_LN_EPS;
	m->stage = stage;
	m->layer_begin = begin;
	m->layer_end = end;
	m->blocks = calloc((size_t)(nblocks ? nblocks : 1), sizeof(*m->blocks));
	m->positions = malloc((size_t)cfg->block_size * sizeof(int32_t));
	if (!m->blocks || !m->positions) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory creating a GPT");
		goto out_free;
	}
	for (int64_t i = 0; i < cfg->block_size; i++)
		m->positions[i] = (int32_t)i;
	if ((st = nn_gpt_tp_plan(m)) || (st = declare(m)) || (st = nn_model_finalize(m)) ||
	    (st = nn_gpt_tp_setup(m)) ||
	    (m->build == NN_BUILD_FULL && (st = init_weights(m))))
		goto out_free;
	*out = m;
	return WEFT_OK;
out_free:
	weft_model_free(m);
	return st;
}

/* ---- forward ---- */

static weft_status check_input(const weft_model *m, const weft_tensor *x)
{
	char sh[160];

	if (m->stage & WEFT_STAGE_EMBED) {
		if (x->ndim != 2 || (x->dtype != WEFT_I32 && x->dtype != WEFT_I64))
			return weft_error_set(WEFT_ERR_SHAPE, "gpt forward: the input %s %s must be "
					      "token ids (batch, time) of dtype I32 or I64",
					      weft_shape_str(x, sh, sizeof(sh)),
					      weft_dtype_name((weft_dtype)x->dtype));
		if (x->shape[1] < 1 || x->shape[1] > m->gpt.block_size)
			return weft_error_set(WEFT_ERR_SHAPE, "gpt forward: the input %s has %lld "
					      "positions; block_size allows 1 to %lld",
					      weft_shape_str(x, sh, sizeof(sh)),
					      (long long)x->shape[1], (long long)m->gpt.block_size);
		return WEFT_OK;
	}
	if (x->ndim != 3 || x->shape[2] != m->gpt.n_embd || x->dtype != WEFT_F32)
		return weft_error_set(WEFT_ERR_SHAPE, "gpt forward: this stage (from block %lld) "
				      "takes the hidden state (batch, time, %lld) F32, got %s %s",
				      (long long)m->layer_begin, (long long)m->gpt.n_embd,
				      weft_shape_str(x, sh, sizeof(sh)),
				      weft_dtype_name((weft_dtype)x->dtype));
	return WEFT_OK;
}

static weft_status embed(weft_model *m, nn_scope *s, weft_tensor *ids, weft_tensor **out)
{
	weft_ctx *ctx = s->ctx;
	int64_t T = ids->shape[1];
	weft_tensor *pos, *tok, *pe, *x;
	weft_status st;

	if ((st = nn_enter(s, m->wte_mod)) || (st = nn_gpt_tp_embed(m, ctx, ids, &tok)) ||
	    (st = nn_leave(s)))
		return st;
	/* the embedding's output is cast once to the activations' dtype */
	if (!m->wpe)
		return (st = weft_op_cast(ctx, tok, weft_ctx_lowp_activations(ctx), &x)) ? st :
			weft_op_dropout(ctx, x, (float)m->gpt.dropout, out);
	if ((st = weft_ctx_tensor(ctx, "positions", WEFT_I32, 1, &T, &pos)) ||
	    (st = weft_tensor_copy_from_host(pos, m->positions, (size_t)T * sizeof(int32_t))))
		return st;
	if ((st = nn_enter(s, m->wpe_mod)) || (st = weft_op_embedding(ctx, pos, m->wpe, &pe)) ||
	    (st = nn_leave(s)))
		return st;
	if ((st = weft_op_add(ctx, tok, pe, &x)) ||
	    (st = weft_op_cast(ctx, x, weft_ctx_lowp_activations(ctx), &x)))
		return st;
	return weft_op_dropout(ctx, x, (float)m->gpt.dropout, out);
}

/* ---- blocks, each through weft_checkpoint under full checkpointing ---- */

static weft_status block_forward(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *x,
				 weft_tensor *r, weft_tensor **out, weft_tensor **out_r);

/* The tensor-parallel block or the whole one, adding its MLP's residual
 * itself (a checkpointed block's one output). */
static weft_status block_whole(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *x,
			       weft_tensor **out)
{
	return m->tp ? nn_gpt_tp_block_forward(m, s, b, x, out) :
		       block_forward(m, s, b, x, NULL, out, NULL);
}

typedef struct block_args {
	weft_model *m;
	gpt_block *b;
} block_args;

/* One block in its own module scope (a checkpoint's function). */
static weft_status block_fn(weft_ctx *ctx, void *user, weft_tensor *x, weft_tensor **out)
{
	const block_args *a = user;
	nn_scope s = { .ctx = ctx };
	weft_status st = block_whole(a->m, &s, a->b, x, out);

	if (st)
		nn_unwind(&s);
	return st;
}

/* Block b on the residual stream x + r (r NULL: x alone). The whole,
 * uncheckpointed block leaves its MLP's residual add to the next norm:
 * *out and *out_r are the stream and the branch still to add. A
 * checkpointed or tensor-parallel block adds it itself (*out_r NULL); as
 * every block of a model runs the same way, it is never handed an r. */
static weft_status run_block(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *x,
			     weft_tensor *r, weft_tensor **out, weft_tensor **out_r)
{
	block_args a = { .m = m, .b = b };

	if (!m->tp && m->act_ckpt != WEFT_ACT_CKPT_FULL)
		return block_forward(m, s, b, x, r, out, out_r);
	*out_r = NULL;
	if (m->act_ckpt != WEFT_ACT_CKPT_FULL)
		return nn_gpt_tp_block_forward(m, s, b, x, out);
	return weft_checkpoint(s->ctx, "block (recomputed)", block_fn, &a, sizeof(a), x, x->ndim,
			       x->shape, out);
}

/* The norm in front of a block or the head, over x + r when the previous
 * block left its residual add pending (one pass: add_layernorm). */
static weft_status norm_in(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
			   weft_tensor *r, weft_tensor **sum, weft_tensor **out)
{
	*sum = x;
	return r ? nn_add_norm(m, s, l, x, r, sum, out) : nn_block_norm(m, s, l, x, out);
}

static weft_status block_forward(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *x,
				 weft_tensor *r, weft_tensor **out, weft_tensor **out_r)
{
	weft_ctx *ctx = s->ctx;
	float p = (float)m->gpt.dropout;
	weft_tensor *h, *y;
	weft_status st;

	if ((st = nn_enter(s, b->mod)) || (st = norm_in(m, s, &b->ln_1, x, r, &x, &h)) ||
	    (st = nn_enter(s, b->attn)) || (st = nn_linear(s, &b->c_attn, h, &y)) ||
	    (st = nn_attend(m, ctx, y, m->gpt.n_head, kv_heads(m), &y)) ||
	    (st = nn_linear(s, &b->attn_proj, y, &y)) || (st = weft_op_dropout(ctx, y, p, &y)) ||
	    (st = nn_leave(s)) || (st = nn_add_norm(m, s, &b->ln_2, x, y, &x, &h)))
		return st;
	if ((st = nn_enter(s, b->mlp)) || (st = nn_mlp_in(m, s, &b->c_fc, h, &y)) ||
	    (st = nn_linear(s, &b->mlp_proj, y, &y)) || (st = weft_op_dropout(ctx, y, p, &y)) ||
	    (st = nn_leave(s)))
		return st;
	if (out_r) {
		*out_r = y;
	} else if ((st = weft_op_add(ctx, x, y, &x))) {
		return st;
	}
	if ((st = nn_leave(s)))
		return st;
	*out = x;
	return WEFT_OK;
}

/* The targets of the loss the head computes in one op. */
typedef struct nn_head_targets {
	weft_tensor *targets;
	int64_t ignore_index;
} nn_head_targets;

/* The head of the last stage: the logits, or with targets the loss of
 * them in one op (no logits made). */
static weft_status head_forward(weft_model *m, nn_scope *s, weft_tensor *h,
				const nn_head_targets *t, weft_tensor **out)
{
	nn_affine head = { .mod = m->head_mod, .w = m->head_w ? m->head_w : m->wte };
	weft_status st;

	if (!t)
		return nn_linear(s, &head, h, out);
	if (!(st = nn_enter(s, head.mod)) &&
	    !(st = weft_op_linear_cross_entropy(s->ctx, h, head.w, t->targets, t->ignore_index,
						out)))
		st = nn_leave(s);
	return st;
}

/* The forward: the logits (t NULL), the loss against t's targets, or a
 * stage's F32 hidden state. */
static weft_status gpt_run(weft_model *m, weft_ctx *ctx, weft_tensor *x,
			   const nn_head_targets *t, weft_tensor **out)
{
	nn_scope s = { .ctx = ctx };
	weft_tensor *h, *r = NULL, *sum;
	weft_status st;

	if ((st = nn_stage_input(ctx, x, "input", &h)) || (st = check_input(m, h)))
		return st;
	if ((st = nn_enter(&s, m->root)))
		goto out_unwind;
	if ((m->stage & WEFT_STAGE_EMBED) && (st = embed(m, &s, h, &h)))
		goto out_unwind;
	if (m->tp && (st = nn_gpt_tp_seq_enter(m, ctx, h, &h)))
		goto out_unwind;
	for (int64_t i = 0; i < m->layer_end - m->layer_begin; i++)
		if ((st = run_block(m, &s, &m->blocks[i], h, r, &h, &r)))
			goto out_unwind;
	/* the last block's residual add: in ln_f's pass, or alone before a
	 * stage hands on its hidden state */
	if (!(m->stage & WEFT_STAGE_HEAD) && r && (st = weft_op_add(ctx, h, r, &h)))
		goto out_unwind;
	if (m->stage & WEFT_STAGE_HEAD) {
		if ((st = norm_in(m, &s, &m->ln_f, h, r, &sum, &h)) ||
		    (m->tp && (st = nn_gpt_tp_seq_leave(m, ctx, h, &h))) ||
		    (st = head_forward(m, &s, h, t, &h)))
			goto out_unwind;
	}
	/* a stage hands the next one its hidden state in F32 */
	if (!(m->stage & WEFT_STAGE_HEAD) && (st = weft_op_cast(ctx, h, WEFT_F32, &h)))
		goto out_unwind;
	if ((st = nn_leave(&s)))
		goto out_unwind;
	*out = h;
	return WEFT_OK;
out_unwind:
	nn_unwind(&s);
	return st;
}

static weft_status gpt_forward(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	return gpt_run(m, ctx, x, NULL, out);
}

static weft_status gpt_forward_loss(weft_model *m, weft_ctx *ctx, weft_tensor *x,
				    weft_tensor *targets, int64_t ignore_index, weft_tensor **loss)
{
	nn_head_targets t = { .targets = targets, .ignore_index = ignore_index };

	if (!(m->stage & WEFT_STAGE_HEAD) || m->tp)
		return weft_error_set(WEFT_ERR_INTERNAL, "gpt forward_loss: needs the head and "
				      "whole layers (stage %u, tensor parallel %s)",
				      (unsigned)m->stage, m->tp ? "yes" : "no");
	return gpt_run(m, ctx, x, &t, loss);
}

/* ---- the whole model of a tensor-parallel one ---- */

/* A whole model of m's config (no gradients) for gathering or loading. */
static weft_status whole_like(const weft_model *m, weft_model **out)
{
	weft_model_options o = m->opt;

	o.tp_size = 0;
	o.tp_rank = 0;
	o.tp_flags = 0;
	o.no_grads = 1;
	return nn_model_create_transformer(&m->gpt, &m->arch, &o, out);
}

weft_status weft_model_gather_whole(weft_model *m, weft_model **out)
{
	weft_model *w = NULL;
	weft_status st;

	*out = NULL;
	if (!m->tp)
		return WEFT_OK;
	if ((st = whole_like(m, &w)))
		return st;
	if ((st = nn_gpt_tp_gather(m, w))) {
		weft_model_free(w);
		return st;
	}
	*out = w;
	return WEFT_OK;
}

/* weft_model_load_safetensors of a GPT: under tensor parallelism the whole
 * tensors of the file are read into a whole model and this rank's shards
 * kept. */
static weft_status gpt_load(weft_model *m, const char *path)
{
	weft_model *w = NULL;
	weft_status st;

	if (!m->tp)
		return nn_model_load_file(m, path);
	st = whole_like(m, &w);
	if (!st)
		st = nn_model_load_file(w, path);
	if (!st)
		st = nn_gpt_tp_take_shards(m, w, path);
	weft_model_free(w);
	return st;
}

