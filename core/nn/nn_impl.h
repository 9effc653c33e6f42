/* Internals shared by core/nn's files: the model object, the tree builder,
 * initialisation, and the forward helpers. */
#ifndef WEFT_NN_IMPL_H
#define WEFT_NN_IMPL_H

#include "nn/act_ckpt.h"
#include "weft/device.h"
#include "weft/module.h"
#include "weft/ops.h"
#include "weft/trainer.h"

#define NN_LN_EPS 1e-5f
#define NN_MAX_SCOPE 16

/* A Linear or LayerNorm: its module and parameters (bias may be NULL). */
typedef struct nn_affine {
	weft_module *mod;
	weft_tensor *w, *b;
} nn_affine;

typedef struct gpt_block {
	weft_module *mod, *attn, *mlp;
	nn_affine ln_1, c_attn, attn_proj, ln_2, c_fc, mlp_proj;
	int32_t tp_attn, tp_mlp; /* tensor parallelism: ranks the attention / MLP is
				  * split over (1: whole), from the plan (gpt_tp.c) */
} gpt_block;

/* The choices of the one decoder-only transformer beyond weft_gpt_config
 * (model_config.c fills it from model.norm, model.position, model.mlp,
 * model.n_kv_head, model.tie_embeddings or a model.preset). All zero is
 * nanoGPT's GPT-2: LayerNorm (eps 1e-5), learned positions (wpe), a
 * GELU-tanh MLP of 4 x n_embd, multi-head attention, a tied head, biases as
 * model.bias says. */
typedef enum nn_norm { NN_NORM_LAYERNORM = 0, NN_NORM_RMSNORM = 1 } nn_norm;
typedef enum nn_position { NN_POS_LEARNED = 0, NN_POS_ROPE = 1 } nn_position;
/* the MLP: GELU's tanh form (GPT-2's), SwiGLU (Llama's), or GELU's exact
 * erf form (nanoGPT's nn.GELU(), transformers' "gelu") */
typedef enum nn_mlp_kind { NN_MLP_GELU_TANH = 0, NN_MLP_SWIGLU = 1, NN_MLP_GELU = 2 } nn_mlp_kind;

typedef struct nn_arch {
	nn_norm norm;
	double norm_eps;        /* 0: 1e-5 */
	nn_position position;
	weft_rope rope;         /* NN_POS_ROPE: theta and scaling */
	nn_mlp_kind mlp;
	int64_t intermediate;   /* the MLP's inner size; 0: 4 x n_embd */
	int64_t n_kv_head;      /* key/value heads; 0: n_head (MHA) */
	int untied;             /* lm_head.weight its own parameter */
	int qkv_bias;           /* a bias on c_attn (q, k, v) alone, as Qwen2's,
				 * when model.bias is off */
} nn_arch;

/* Whether the arch is nanoGPT's (all defaults), which every strategy
 * splits and stages; the others are for whole models on one stage. */
static inline int nn_arch_is_gpt(const nn_arch *a)
{
	return a->norm == NN_NORM_LAYERNORM &&
	       (a->norm_eps == 0.0 || (float)a->norm_eps == NN_LN_EPS) &&
	       a->position == NN_POS_LEARNED && a->mlp == NN_MLP_GELU_TANH &&
	       a->intermediate == 0 && a->n_kv_head == 0 && !a->untied && !a->qkv_bias;
}

/* Builds the transformer of cfg with the choices `arch` (NULL: GPT-2's):
 * weft_model_create_gpt with them. */
weft_status nn_model_create_transformer(const weft_gpt_config *cfg, const nn_arch *arch,
					const weft_model_options *opt, weft_model **out);

/* What a model class provides. model.c is the base every class builds on
 * and calls a class only through its ops, set by the class's create
 * function, so no class file is called back by the base. */
typedef struct nn_class_ops {
	/* The forward: logits of input x (on the context's device or the
	 * host) in the context's arena. Required. */
	weft_status (*forward)(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out);
	/* (optional) Loads a safetensors file into the model; NULL: by
	 * parameter names and shapes (nn_model_load_file). */
	weft_status (*load)(weft_model *m, const char *path);
	/* (optional) Whether the logits are split by vocabulary over m->tp
	 * (loss and accuracy then go through weft_tp_vocab_*); NULL: never. */
	int (*vocab_split)(const weft_model *m);
	/* (optional) The target id the loss skips; NULL: -100. */
	int64_t (*ignore_index)(const weft_model *m);
	/* (optional) The forward with the head and its loss in one op
	 * (weft_op_linear_cross_entropy): the loss of input x against
	 * targets (on the context's device) in *loss, no logits. Only for a
	 * model with the head, no tensor parallelism; NULL: the class has
	 * none (weft_model_loss takes the forward and the loss apart). */
	weft_status (*forward_loss)(weft_model *m, weft_ctx *ctx, weft_tensor *x,
				    weft_tensor *targets, int64_t ignore_index,
				    weft_tensor **loss);
} nn_class_ops;

struct weft_model {
	weft_model_class cls;
	const nn_class_ops *ops;
	weft_gpt_config gpt;
	nn_arch arch;            /* GPT: the transformer's choices (all zero: GPT-2's) */
	weft_mlp_config mlp;
	weft_model_options opt;
	weft_params *params;
	weft_module *mods;       /* pre-order; capacity fixed at creation */
	size_t n_mods, cap_mods;

	/* GPT */
	uint32_t stage;          /* WEFT_STAGE_* bits actually built */
	int64_t layer_begin, layer_end;
	weft_module *root, *wte_mod, *wpe_mod, *head_mod;
	weft_tensor *wte, *wpe;  /* wte: also the head's weight when tied; wpe:
				  * NULL with rotary positions */
	weft_tensor *head_w;     /* lm_head.weight of an untied head; else NULL */
	nn_affine ln_f;
	gpt_block *blocks;       /* layer_end - layer_begin */
	int32_t *positions;      /* host, 0 .. block_size - 1 */
	weft_act_ckpt act_ckpt;  /* what the blocks keep for backward (act_ckpt.h) */

	/* MLP */
	nn_affine layers[WEFT_MLP_MAX_HIDDEN + 1];

	/* GPT under tensor parallelism (gpt_tp.c); NULL for whole layers */
	struct weft_tp_group *tp;
	float *kv_select;        /* 1 < n_kv_head < tp: (out, in) 0/1 matrix picking this
				  * rank's key/value head (host); else NULL */
	int64_t kv_select_shape[2];

	/* a model plugin (plugin_model.c) */
	const weft_module_ops *plugin_ops;
	void *plugin;

	/* how it was built (nn/shapes.h): NN_BUILD_SHAPES declares the
	 * parameters (names, shapes, tp splits) with no storage;
	 * NN_BUILD_UNINIT allocates them (zeroed) and initialises nothing */
	int build;
};

/* ---- model plugins (plugin_model.c) ---- */

/* Builds the model plugin `ops` from the model section. */
weft_status nn_plugin_model_create(const weft_module_ops *ops, const weft_cfg *sec,
				   const weft_model_options *opt, weft_model **out);

/* ---- building (model.c) ---- */

/* How the models nn_model_alloc makes on this thread are built: set by
 * the builders of nn/shapes.h around a build, else NN_BUILD_FULL. */
enum { NN_BUILD_FULL = 0, NN_BUILD_SHAPES = 1, NN_BUILD_UNINIT = 2 };
extern _Thread_local int nn_build_mode;

/* A new, empty model of class cls (calls through ops, static storage)
 * with room for cap modules. */
weft_status nn_model_alloc(weft_model_class cls, const nn_class_ops *ops,
			   const weft_model_options *opt, size_t cap, weft_model **out);

/* Appends a module (name formatted; depth from parent, -1 for the root)
 * whose parameter range starts at the current parameter count. */
weft_status nn_module_push(weft_model *m, int32_t parent, const char *type, weft_module **out,
			   const char *fmt, ...) WEFT_PRINTF(5, 6);

/* Closes module `mod`'s parameter range at the current parameter count
 * (call after its subtree is declared). */
void nn_module_close(weft_model *m, weft_module *mod);

/* Declares parameter "<module name>.<leaf>" (F32). */
weft_status nn_param(weft_model *m, const weft_module *mod, const char *leaf, int32_t ndim,
		     const int64_t *shape, weft_tensor **out);

/* Finalizes the parameter set and fills every module's n_params. */
weft_status nn_model_finalize(weft_model *m);

/* ---- initialisation (init.c) ---- */

/* Fills parameter t with N(0, std) / U(-bound, bound) / a constant, drawn
 * from (seed, t->name, element index). Blocking (copies to the device). */
weft_status nn_init_normal(weft_tensor *t, uint64_t seed, float std);
weft_status nn_init_uniform(weft_tensor *t, uint64_t seed, float bound);
weft_status nn_init_const(weft_tensor *t, float value);

/* ---- forward helpers (model.c) ---- */

/* A stack of open modules, so a failing forward closes what it opened. */
typedef struct nn_scope {
	weft_ctx *ctx;
	weft_module *open[NN_MAX_SCOPE];
	int depth;
} nn_scope;

weft_status nn_enter(nn_scope *s, weft_module *mod);
weft_status nn_leave(nn_scope *s);
/* Closes every module still open (after an error; keeps the error). */
void nn_unwind(nn_scope *s);

/* x itself when on ctx's device, else a copy in ctx's arena. */
weft_status nn_stage_input(weft_ctx *ctx, weft_tensor *x, const char *role, weft_tensor **out);

/* Linear / LayerNorm wrapped in their module's begin/end. */
weft_status nn_linear(nn_scope *s, const nn_affine *l, weft_tensor *x, weft_tensor **out);
weft_status nn_layernorm(nn_scope *s, const nn_affine *l, weft_tensor *x, weft_tensor **out);

/* ---- classes (gpt.c, mlp.c) ---- */

/* The checks weft_model_create_* make, as messages naming the field. */
weft_status nn_gpt_check(const weft_gpt_config *c);
weft_status nn_mlp_check(const weft_mlp_config *c);

/* ---- tensor parallelism (gpt_tp.c) ---- */

/* opt->tp_size when > 1, else 1. */
int32_t nn_tp_size(const weft_model_options *opt);
/* The tp checks (n_head / n_embd / intermediate size divisible, n_kv_head
 * a multiple or a divisor of tp, rank in range, no sequence-parallel
 * stages), each naming the sizes. */
weft_status nn_gpt_tp_check(const weft_gpt_config *c, const nn_arch *a,
			    const weft_model_options *opt);
/* c_attn's rows on each of `split` ranks (split 1: whole): q, k and v
 * divided, or with fewer key/value heads than ranks this rank's q and
 * every k and v. */
int64_t nn_gpt_tp_qkv_rows(const weft_model *m, int32_t split);
/* Before declaring: each block's tp_attn / tp_mlp from opt.tp_plan. */
weft_status nn_gpt_tp_plan(weft_model *m);
/* After finalize: creates m->tp and records every split parameter. */
weft_status nn_gpt_tp_setup(weft_model *m);
/* N(0, std) of the whole parameter, this rank's shard kept. */
weft_status nn_gpt_tp_init_normal(weft_model *m, weft_tensor *p, float std);
/* The causal attention of a block over qkv: weft_op_attention, or under
 * selective checkpointing the same recomputed in backward (gpt.c). */
weft_status nn_gpt_attention(weft_model *m, weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
			     weft_tensor **out);
/* Grouped-query attention of a block over a packed q | k | v
 * (weft_op_attention_gqa), recomputed in backward under selective
 * checkpointing as nn_gpt_attention is. */
weft_status nn_gqa_attention(weft_model *m, weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
			     int64_t n_kv_head, weft_tensor **out);
/* A block's norm (LayerNorm or RMSNorm, in its module's begin/end); its
 * attention over a packed q | k | v of nh query and kv key/value heads
 * (GPT-2's, or rotary positions and grouped-query attention); its MLP's
 * activation (GELU-tanh, or SwiGLU over a packed gate | up). gpt_layers.c,
 * for gpt.c's block and gpt_tp.c's. */
weft_status nn_block_norm(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
			  weft_tensor **out);
weft_status nn_attend(weft_model *m, weft_ctx *ctx, weft_tensor *y, int64_t nh, int64_t kv,
		      weft_tensor **out);
weft_status nn_activation(weft_model *m, weft_ctx *ctx, weft_tensor *y, weft_tensor **out);
/* The residual add x + r and the norm l after it: *sum and the norm's
 * *out (weft_op_add_layernorm: one pass under 16-bit activations). */
weft_status nn_add_norm(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
			weft_tensor *r, weft_tensor **sum, weft_tensor **out);
/* The MLP's first linear layer l and its activation (GELU-tanh through
 * weft_op_linear_gelu, inside l's module: one fused product under 16-bit
 * activations). */
weft_status nn_mlp_in(weft_model *m, nn_scope *s, const nn_affine *l, weft_tensor *x,
		      weft_tensor **out);
/* A block with column/row-parallel attention and MLP. */
weft_status nn_gpt_tp_block_forward(weft_model *m, nn_scope *s, gpt_block *b, weft_tensor *x,
				    weft_tensor **out);
/* Sequence parallelism: after the embedding keep this rank's positions;
 * before the head gather them again. Identity without it. */
weft_status nn_gpt_tp_seq_enter(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out);
weft_status nn_gpt_tp_seq_leave(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out);
/* Vocabulary parallelism (WEFT_TP_VOCAB_PARALLEL): whether the model's
 * wte and logits are split by vocabulary; wte's rows on this rank; the
 * token lookup (weft_op_embedding, or the split lookup summed over the
 * group). The loss and accuracy of split logits: weft_tp_vocab_*. */
int nn_gpt_tp_vocab(const weft_model *m);
int64_t nn_gpt_tp_wte_rows(const weft_model *m);
weft_status nn_gpt_tp_embed(weft_model *m, weft_ctx *ctx, weft_tensor *ids, weft_tensor **out);
/* Copies this rank's shard of every parameter of the whole model w (same
 * config, loaded from `path`, named in errors) into m. */
weft_status nn_gpt_tp_take_shards(weft_model *m, const weft_model *w, const char *path);
/* Gathers every parameter of m from the tp group into the whole model w. */
weft_status nn_gpt_tp_gather(weft_model *m, weft_model *w);

/* ---- safetensors (model_io.c) ---- */

/* Loads the file into m's parameters by name, every name, shape and dtype
 * checked first: what weft_model_load_safetensors does for a class without
 * its own load. */
weft_status nn_model_load_file(weft_model *m, const char *path);

#endif /* WEFT_NN_IMPL_H */
