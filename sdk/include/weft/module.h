/* weft/module.h - models: a module tree over one flat parameter set.
 *
 * A weft_model is what the trainer and the strategies hold:
 * - its parameters, one weft_params (flat buffer per dtype, each parameter
 *   a named view, gradients mirroring it), named exactly as PyTorch names
 *   them, so weights move to and from PyTorch unchanged:
 *     GPT (nanoGPT):  transformer.wte.weight [V, C], transformer.wpe.weight
 *                     [block_size, C], transformer.h.<i>.ln_1.{weight,bias},
 *                     transformer.h.<i>.attn.c_attn.{weight [3C, C], bias},
 *                     transformer.h.<i>.attn.c_proj.*, .ln_2.*,
 *                     transformer.h.<i>.mlp.c_fc.{weight [4C, C], bias},
 *                     transformer.h.<i>.mlp.c_proj.*, transformer.ln_f.*
 *                     (no ".bias" entries with bias: false). lm_head.weight
 *                     is tied to transformer.wte.weight and is not a
 *                     parameter of its own (as in nanoGPT's parameters()).
 *     MLP classifier: layers.<i>.weight [out, in], layers.<i>.bias [out],
 *                     one Linear per hidden layer plus the output layer
 *                     (a torch.nn.ModuleList of nn.Linear).
 *   Parameters are declared in module pre-order (PyTorch's
 *   named_parameters() order), so every module's parameters are one
 *   contiguous range of the flat buffer (weft_module.first_param ..).
 * - the module tree, in pre-order: each module with its dotted name
 *   ("transformer.h.0.attn.c_attn"; "" for the root), its PyTorch type name
 *   ("GPT", "Block", "CausalSelfAttention", "MLP", "LayerNorm", "Linear",
 *   "Embedding", "ModuleDict", "ModuleList") and its parameter count. The
 *   trainer prints Lightning's summary from it.
 * - forward, which brackets every module it calls with weft_module_begin /
 *   weft_module_end (weft/autograd.h), `module_ptr` being the module's
 *   `const weft_module *`: pipeline and ZeRO-3 strategies hook there.
 *
 * Numerics. GELU is the tanh form (GPT-2's; PyTorch's
 * nn.GELU(approximate="tanh")); nanoGPT's nn.GELU() is the erf form, which
 * differs by < 1e-3 per activation: weights are interchangeable, outputs
 * are close, not identical. LayerNorm eps is 1e-5. Dropout applies to the
 * embedding sum, to each residual branch's output (attn.c_proj and
 * mlp.c_proj, nanoGPT's resid_dropout) and, in the classifier, after every
 * hidden activation; attention probabilities are not dropped (the fused
 * attention kernel has no dropout), unlike nanoGPT's attn_dropout. The loss
 * is the mean cross-entropy; GPT targets equal to -1 are ignored
 * (nanoGPT's ignore_index), classifier targets equal to -100 (PyTorch's).
 *
 * Initialisation is deterministic from a seed and independent of devices,
 * stages and shards: element j of parameter P is drawn from weft's
 * counter-based RNG (weft_rng_hash in weft/device.h) keyed by (seed, P's
 * name, j). GPT: GPT-2's rule, N(0, 0.02) for Linear and Embedding weights,
 * N(0, 0.02 / sqrt(2 * n_layer)) for the residual projections
 * (attn.c_proj.weight, mlp.c_proj.weight), zero biases, LayerNorm weight 1
 * and bias 0. MLP: PyTorch nn.Linear's default, weight and bias uniform in
 * +-1/sqrt(fan_in) (kaiming_uniform with a = sqrt(5)). The distributions
 * match PyTorch's; the values do not (a different RNG): to start from
 * PyTorch's exact weights, load them (model.init_from).
 *
 * Pipeline stages. A GPT can be built as one stage of a pipeline
 * (weft_model_options.stage): blocks [layer_begin, layer_end) plus the
 * embeddings (wte, wpe, drop) on the stage with WEFT_STAGE_EMBED and ln_f
 * and the head on the stage with WEFT_STAGE_HEAD. Parameter names keep the
 * global block index ("transformer.h.5..." on the stage holding block 5),
 * so stage checkpoints merge by name. A HEAD stage without EMBED holds its
 * own copy of transformer.wte.weight for the tied head, initialised to the
 * same values (same name, same seed); the pipeline strategy keeps the two
 * copies equal by summing their gradients across the first and last stage
 * (as Megatron does). A stage's forward takes token ids (EMBED) or the
 * previous stage's hidden state (B, T, n_embd) and returns logits (HEAD)
 * or its hidden state.
 */
#ifndef WEFT_MODULE_H
#define WEFT_MODULE_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"
#include "weft/config.h"
#include "weft/tensor.h"
#include "weft/autograd.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_model weft_model; /* opaque */

/* Model classes. Values are part of the ABI: only ever appended. */
typedef enum weft_model_class {
	WEFT_MODEL_GPT = 0,
	WEFT_MODEL_MLP = 1,
	WEFT_MODEL_PLUGIN = 2  /* since ABI 1.1: a model plugin (weft/trainer.h) named by
				* model.class */
} weft_model_class;

/* Activations of the MLP classifier. */
typedef enum weft_activation {
	WEFT_ACT_RELU = 0,
	WEFT_ACT_GELU = 1
} weft_activation;

/* A GPT's shape (nanoGPT's GPTConfig). */
typedef struct weft_gpt_config {
	int64_t n_layer;
	int64_t n_head;
	int64_t n_embd;       /* divisible by n_head */
	int64_t vocab_size;
	int64_t block_size;   /* longest sequence; wpe has this many rows */
	int bias;             /* Linear and LayerNorm biases */
	double dropout;       /* [0, 1) */
} weft_gpt_config;

#define WEFT_MLP_MAX_HIDDEN 16

/* An MLP classifier: in_features -> hidden[0] -> ... -> out_features. */
typedef struct weft_mlp_config {
	int64_t in_features;
	int64_t hidden[WEFT_MLP_MAX_HIDDEN];
	size_t n_hidden;      /* 0 .. WEFT_MLP_MAX_HIDDEN */
	int64_t out_features; /* the number of classes */
	weft_activation activation;
	double dropout;       /* after every hidden activation; [0, 1) */
} weft_mlp_config;

/* weft_model_options.stage bits. */
enum {
	WEFT_STAGE_EMBED = 1u << 0, /* this stage holds wte, wpe and takes token ids */
	WEFT_STAGE_HEAD = 1u << 1,  /* this stage holds ln_f and the head, gives logits */
	WEFT_STAGE_BLOCKS = 1u << 2 /* since ABI 1.1: a stage of blocks only; set alone,
				     * it makes a middle stage (stage 0 is the whole model) */
};

/* How to build a model. Zero-initialise, then set what you need. */
typedef struct weft_model_options {
	weft_device device;   /* where parameters live (zero: cpu) */
	uint64_t seed;        /* initialisation seed */
	int no_grads;         /* 1: no gradient buffers (inference only) */
	/* GPT pipeline stage; stage == 0 builds the whole model (layer_begin
	 * and layer_end are then ignored). Otherwise blocks [layer_begin,
	 * layer_end) (layer_end 0: n_layer) and the parts the bits name. */
	uint32_t stage;
	int64_t layer_begin;
	int64_t layer_end;
	/* ---- since ABI 1.1: Megatron tensor parallelism of a GPT ----
	 * tp_size 0 or 1 builds whole layers. tp_size T > 1 builds tp rank
	 * tp_rank's shard: c_attn and mlp.c_fc split by output rows
	 * (c_attn by heads: this rank's rows of q, of k and of v, packed),
	 * attn.c_proj and mlp.c_proj split by input columns (their biases
	 * whole), everything else whole; parameter names stay nanoGPT's, the
	 * shapes are the shards'. Values are those the whole model would hold
	 * (initialisation is shard-independent). Forward needs a communicator
	 * bound to the model's tp group (core/tp, strategy tp). n_head and
	 * n_embd must be divisible by T (an error naming both numbers).
	 * tp_flags: WEFT_TP_* of core/tp/tp.h (1: sequence parallelism;
	 * 2: vocabulary parallelism - wte split by rows, the tied head's
	 * logits and the loss split by vocabulary; vocab_size must then be
	 * divisible by T, an error naming both numbers). */
	int32_t tp_size;
	int32_t tp_rank;
	uint32_t tp_flags;
	uint32_t tp_reserved;
	/* The tensor-parallel plan, or NULL for Megatron's (every block's
	 * attention and MLP split): lines "PATTERN=STYLE", PATTERN a glob
	 * (fnmatch) over module names, STYLE colwise, rowwise or replicate;
	 * the first matching line gives a Linear's style, unmatched ones are
	 * replicated. Only the blocks' c_attn, c_fc (colwise) and c_proj
	 * (rowwise) can be split, pairwise: each attention and each MLP is
	 * colwise + rowwise or wholly replicated. Borrowed during creation.
	 * Errors (WEFT_ERR_CONFIG): a pattern matching no Linear, a style a
	 * layer cannot take, a pair that does not fit, naming them. */
	const char *tp_plan;
} weft_model_options;

/* One module of the tree. Owned by the model; valid for its life. */
typedef struct weft_module {
	const char *name;     /* dotted, PyTorch's; "" for the root */
	const char *type;     /* PyTorch's class name: "GPT", "Linear", ... */
	int32_t depth;        /* 0 for the root */
	int32_t parent;       /* index of the parent module; -1 for the root */
	int64_t n_params;     /* elements of the parameters in this subtree */
	size_t first_param;   /* its parameters are weft_params_at(first_param + i) */
	size_t n_param_tensors; /* for i < n_param_tensors: contiguous in the flat buffer */
	const char *tied_to;  /* lm_head: "transformer.wte.weight" (its weight
				 is that parameter); else NULL */
} weft_module;

/* ---- construction ---------------------------------------------------- */

/* Builds the model a config's `model:` section describes:
 *   {class: gpt, n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50304,
 *    block_size: 1024, bias: true, dropout: 0.0, init_from: PATH}
 *   {class: mlp, in_features: 784, hidden: [256, 256], out_features: 10
 *    (or num_classes: 10), activation: relu, dropout: 0.0, init_from: PATH}
 * (the values shown are the defaults; `class` is required). Parameters are
 * initialised from opt->seed, then, with init_from, loaded from that
 * safetensors file (weft_model_load_safetensors's checks). Returns a new
 * model in *out; free with weft_model_free. Blocking.
 * Errors: WEFT_ERR_CONFIG with file:line:col for a missing or unknown
 * class, a value out of range (n_embd not divisible by n_head names both
 * numbers), a wrong type; those of weft_model_create and of loading. */
WEFT_API weft_status weft_model_from_config(const weft_cfg *model_section,
					    const weft_model_options *opt, weft_model **out);

/* Builds and initialises a GPT / an MLP classifier from a filled struct.
 * *out is a new model; free with weft_model_free.
 * Errors: WEFT_ERR_INVALID_ARG naming the field and value out of range
 * (or a stage that does not fit n_layer, or a stage on an MLP);
 * WEFT_ERR_NOMEM; weft_kernels_get's for the device. */
WEFT_API weft_status weft_model_create_gpt(const weft_gpt_config *cfg,
					   const weft_model_options *opt, weft_model **out);
WEFT_API weft_status weft_model_create_mlp(const weft_mlp_config *cfg,
					   const weft_model_options *opt, weft_model **out);

/* Frees the model, its parameters and gradients. NULL is ignored. */
WEFT_API void weft_model_free(weft_model *m);

/* ---- what it is ------------------------------------------------------ */

WEFT_API weft_model_class weft_model_get_class(const weft_model *m);

/* The GPT / MLP shape; NULL when the model is of the other class.
 * Borrowed, valid for the model's life. */
WEFT_API const weft_gpt_config *weft_model_gpt_config(const weft_model *m);
WEFT_API const weft_mlp_config *weft_model_mlp_config(const weft_model *m);

/* The parameter set (borrowed; the model owns it). */
WEFT_API weft_params *weft_model_params(const weft_model *m);

/* Modules in pre-order; index 0 is the root. NULL past the end. */
WEFT_API size_t weft_model_module_count(const weft_model *m);
WEFT_API const weft_module *weft_model_module_at(const weft_model *m, size_t i);

/* The module called `name` ("" is the root), or NULL. */
WEFT_API const weft_module *weft_model_module_find(const weft_model *m, const char *name);

/* Trainable parameter elements (each parameter once; the tied head
 * counts nothing of its own). */
WEFT_API int64_t weft_model_num_params(const weft_model *m);

/* The target value the loss skips: -1 for GPT, -100 for the MLP. */
WEFT_API int64_t weft_model_ignore_index(const weft_model *m);

/* Training FLOPs per token of one forward+backward (for throughput
 * reports): 6 * (parameters used per token, the tied head counted once as
 * the head) + 12 * n_layer * n_embd * T (attention scores and values,
 * causal mask not discounted, as PaLM's appendix counts) for sequence
 * length T; the MLP's FLOPs per sample with T ignored. */
WEFT_API double weft_model_flops_per_token(const weft_model *m, int64_t T);

/* ---- running it --------------------------------------------------- */

/* Runs forward on `x`: GPT token ids (B, T) I32/I64 with T <= block_size
 * (an EMBED stage), or a hidden state (B, T, n_embd) from the previous
 * stage; MLP features (B, ...) whose trailing dims hold in_features
 * elements (Fashion-MNIST's (B, 1, 28, 28) works as it is). *out is the
 * logits (GPT (B, T, V), MLP (B, classes)) or, on a stage without HEAD, the
 * hidden state; borrowed from ctx's arena until the next step_begin.
 * Records the tape when ctx's grad is on; dropout follows ctx's training
 * switch. x may be on the host or on ctx's device (copied over when they
 * differ). Errors: WEFT_ERR_SHAPE / WEFT_ERR_DTYPE naming the input and
 * the shape expected; ops' errors (an id outside the vocabulary names it);
 * WEFT_ERR_INVALID_ARG when ctx's device is not the model's. */
WEFT_API weft_status weft_model_forward(weft_model *m, weft_ctx *ctx, weft_tensor *x,
					weft_tensor **out);

/* A batch: inputs as weft_model_forward takes them and targets, class
 * ids (I32/I64) of the logits' shape without the class dim. Either may be
 * host tensors or on ctx's device. Borrowed. */
typedef struct weft_batch {
	weft_tensor *inputs;
	weft_tensor *targets;
} weft_batch;

/* What weft_model_loss gives back; tensors borrowed from ctx's arena. */
typedef struct weft_model_output {
	weft_tensor *loss;    /* F32 scalar; recorded when grad is on, so
				 weft_backward(ctx, loss) trains */
	weft_tensor *logits;  /* the forward output; NULL (since ABI 1.6) when
				 the head and its loss ran as one op
				 (weft_op_linear_cross_entropy): a GPT
				 with gradients on under 16-bit activations
				 and no tensor parallelism */
} weft_model_output;

/* The task-level step: forward, then the mean cross-entropy of the logits
 * against the targets. The model must have its head (no stage, or HEAD).
 * Errors: as weft_model_forward; WEFT_ERR_SHAPE when targets do not fit
 * the logits (naming both); WEFT_ERR_INVALID_ARG naming the row and target
 * outside [0, classes). */
WEFT_API weft_status weft_model_loss(weft_model *m, weft_ctx *ctx, const weft_batch *batch,
				     weft_model_output *out);

/* Evaluation of one batch. */
typedef struct weft_eval_result {
	double loss;          /* mean over counted targets (0 when none) */
	int64_t correct;      /* targets whose arg-max logit equals them */
	int64_t counted;      /* targets not ignored */
} weft_eval_result;

/* Runs forward with grad and training off (restored afterwards) and
 * computes loss and accuracy counts. Blocks until the numbers are on the
 * host. Errors: as weft_model_loss. */
WEFT_API weft_status weft_model_eval(weft_model *m, weft_ctx *ctx, const weft_batch *batch,
				     weft_eval_result *out);

/* ---- weights in safetensors ---------------------------------------- */

/* Writes every parameter to `path` in the safetensors format: a header
 * with {"__metadata__":{"format":"pt"}} (a GPT's also records its shape:
 * "weft.n_layer", "weft.n_head", ...) and the tensors in declaration
 * order, names as documented above, the header padded with spaces to a
 * multiple of 8 bytes, data offsets contiguous. The file is written in
 * place (callers wanting atomicity write into a temporary directory).
 * Blocking. Errors: WEFT_ERR_IO naming the path and the reason. */
WEFT_API weft_status weft_model_save_safetensors(const weft_model *m, const char *path);

/* Loads every parameter from a safetensors file, a directory holding
 * model.safetensors (a weft checkpoint), or, for a GPT, a Hugging Face
 * GPT2LMHeadModel directory (config.json with model.safetensors or a
 * sharded model.safetensors.index.json: its config must match the model,
 * its Conv1D weights are transposed). The file must hold exactly the
 * model's parameters, with the same shapes and dtypes; a GPT file may also
 * hold lm_head.weight when it equals transformer.wte.weight (as torch's
 * state_dict() saves it), or in its place (safetensors' save_model keeps
 * one name of a tied pair). Tensors are read one at a time, and nothing is
 * changed unless every check passes. Blocking.
 * Errors: WEFT_ERR_NOT_FOUND / WEFT_ERR_IO naming the path;
 * WEFT_ERR_CORRUPT for a malformed file (truncated, bad header JSON,
 * offsets out of range), saying what and where; WEFT_ERR_SHAPE naming the
 * tensor and both shapes; WEFT_ERR_DTYPE naming the tensor and both
 * dtypes; WEFT_ERR_NOT_FOUND naming a parameter the file lacks;
 * WEFT_ERR_INVALID_ARG naming a tensor the model does not have, or the
 * config.json key whose value differs from the model's (both named). */
WEFT_API weft_status weft_model_load_safetensors(weft_model *m, const char *path);

/* ---- since ABI 1.1: tensor-parallel models and whole checkpoints ----
 * A model built with weft_model_options.tp_size > 1 loads the same whole
 * safetensors files (nanoGPT's names and full shapes; each rank keeps its
 * shards), so a checkpoint saved at one tp size loads at any other or
 * whole. Saving one directly is refused (it holds only shards); save the
 * model this returns instead.
 *
 * For a tensor-parallel GPT: a new whole model (no gradients, same config
 * and seed) holding every parameter assembled from the shards of all tp
 * ranks. Collective over the communicator bound to the model's tp group:
 * every rank of the group calls it. For a whole model *out is NULL and
 * nothing happens. Free with weft_model_free. Blocking. Errors:
 * WEFT_ERR_INVALID_ARG when no communicator is bound; the communicator's;
 * NOMEM. */
WEFT_API weft_status weft_model_gather_whole(weft_model *m, weft_model **out);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_MODULE_H */
