/* nn/hf.h - checkpoints in Hugging Face transformers' layout.
 *
 * A directory saved by `save_pretrained`: config.json, and the weights in
 * model.safetensors or, sharded, in the files model.safetensors.index.json
 * maps each tensor to. A model family is a table (nn_hf_family): which
 * config.json it is (architectures / model_type), how its tensor names map
 * to weft's and what each tensor needs on the way (a transpose), which
 * buffers old versions saved that are not weights, and which tensor is the
 * tied head. GPT-2 (GPT2LMHeadModel): its names are nanoGPT's, which weft
 * uses, so only its Conv1D weights (stored [in, out]) are listed, to be
 * transposed. Llama (LlamaForCausalLM) lists every name: its q_proj,
 * k_proj, v_proj are stacked by rows into weft's packed c_attn and its
 * gate_proj, up_proj into c_fc (NN_HF_ROWS); HF's q/k rows are already in
 * the rotate-half order weft's RoPE uses, so no permutation is applied
 * either way (the export splits the rows again as they are).
 */
#ifndef WEFT_NN_HF_H
#define WEFT_NN_HF_H

#include <stddef.h>

#include "nn/nn_impl.h"
#include "weft/module.h"
#include "weft/status.h"

#define NN_HF_CONFIG "config.json"
#define NN_HF_WEIGHTS "model.safetensors"
#define NN_HF_INDEX "model.safetensors.index.json"

/* What a tensor needs between the two layouts (the same either way). */
typedef enum nn_hf_how {
	NN_HF_COPY = 0,
	NN_HF_TRANSPOSE = 1, /* 2-D, [a, b] in one layout is [b, a] in the other */
	NN_HF_ROWS = 2,      /* one of several 2-D tensors whose rows, stacked in
			      * the order of their rules' parts, are weft's one
			      * tensor (Llama's q | k | v, gate | up) */
} nn_hf_how;

/* How many rows a part of NN_HF_ROWS has (for writing, where the stacked
 * tensor is split again): n_embd, n_kv_head x head size, or the MLP's
 * inner size. */
typedef enum nn_hf_rows {
	NN_HF_ROWS_EMBD = 0,
	NN_HF_ROWS_KV = 1,
	NN_HF_ROWS_INNER = 2,
} nn_hf_rows;

/* One name of a family: "{i}" stands for the layer index in both. */
typedef struct nn_hf_rule {
	const char *hf;
	const char *weft;
	nn_hf_how how;
	int part;            /* NN_HF_ROWS: 0, 1, ... in weft's row order */
	nn_hf_rows rows;     /* NN_HF_ROWS: the part's rows */
} nn_hf_rule;

typedef struct nn_hf_family {
	const char *architecture; /* config.json's "architectures"[0] */
	const char *model_type;   /* config.json's "model_type" */
	/* names saved by the base model alone (GPT2Model) lack this prefix */
	const char *base_prefix;
	const nn_hf_rule *rules;  /* names not listed are the same in both */
	size_t n_rules;
	/* tensors old versions saved that are buffers, not weights, by the
	 * end of their name; ignored on reading when the model lacks them */
	const char *const *buffers;
	const char *head;         /* the output head's weight (weft's name) */
	const char *embedding;    /* the token embedding it is tied to */
} nn_hf_family;

/* A config.json read (nn_hf_config_read). */
typedef struct nn_hf_config {
	const nn_hf_family *family;
	weft_gpt_config gpt;      /* dropout 0: set by the run's config */
	nn_arch arch;             /* the transformer's choices (GPT-2: all zero) */
	double ln_eps;
	char activation[64];
	int tied;                 /* tie_word_embeddings */
} nn_hf_config;

/* The GPT-2 family (GPT2LMHeadModel) and the Llama family
 * (LlamaForCausalLM: HF's q/k rows are already in the rotate-half order
 * weft's RoPE uses, so q_proj, k_proj and v_proj are stacked as they are). */
extern const nn_hf_family nn_hf_gpt2;
extern const nn_hf_family nn_hf_llama;
/* Qwen2ForCausalLM: Llama's names and layout, with q_proj, k_proj and
 * v_proj biases stacked into c_attn's bias (nn_arch.qkv_bias). */
extern const nn_hf_family nn_hf_qwen2;

/* Whether `dir` is a directory holding config.json. */
int nn_hf_is_dir(const char *dir);

/* Reads dir/config.json. Errors: WEFT_ERR_NOT_FOUND / WEFT_ERR_IO /
 * WEFT_ERR_PARSE for the file; WEFT_ERR_INVALID_ARG naming the file and the
 * key when it is not a family weft reads, a key is missing or has the
 * wrong type, or the model differs from what weft builds (an inner size
 * other than 4 x n_embd, cross-attention, attention scaling other than
 * 1/sqrt(head size)). */
weft_status nn_hf_config_read(const char *dir, nn_hf_config *out);

/* Checks the config read from `dir` against the model's GPT config and
 * weft's numerics (LayerNorm eps 1e-5, GELU's tanh or exact form, biases on). A
 * block_size below n_positions is accepted: the loader keeps the first
 * block_size rows of wpe.
 * Errors: WEFT_ERR_INVALID_ARG naming config.json, the key and both
 * values, and what to change. */
weft_status nn_hf_config_check(const nn_hf_config *hf, const char *dir,
			       const weft_gpt_config *model);

/* Checks the transformer's choices read from `dir` against the model's
 * (norm, positions and RoPE frequencies, MLP, KV heads, head tying).
 * Errors: WEFT_ERR_INVALID_ARG naming config.json, the key, both values
 * and which model key to change or leave out. */
weft_status nn_hf_arch_check(const nn_hf_config *hf, const char *dir, const nn_arch *model);

/* The weight files of `dir`: the index's files in the order first named,
 * or model.safetensors alone. *paths is a new array of new strings, *n of
 * them; free with nn_hf_paths_free. Errors: WEFT_ERR_NOT_FOUND when there
 * is neither; WEFT_ERR_INVALID_ARG / WEFT_ERR_PARSE naming the index when
 * it is not {"weight_map": {name: file}} or names a file outside dir. */
weft_status nn_hf_weight_files(const char *dir, char ***paths, size_t *n);
void nn_hf_paths_free(char **paths, size_t n);

/* weft's name for the family's tensor `hf` into buf (len bytes) and what
 * it needs (*how; with NN_HF_ROWS its *part, when part is not NULL);
 * NULL for a buffer to ignore. */
const char *nn_hf_to_weft(const nn_hf_family *f, const char *hf, char *buf, size_t len,
			  nn_hf_how *how);
const char *nn_hf_to_weft_part(const nn_hf_family *f, const char *hf, char *buf, size_t len,
			       nn_hf_how *how, int *part);

/* The family's name for weft's tensor `weft` into buf and what it needs. */
const char *nn_hf_from_weft(const nn_hf_family *f, const char *weft, char *buf, size_t len,
			    nn_hf_how *how);

/* The family's name of part `part` of weft's tensor `weft` into buf, what
 * it needs, and with NN_HF_ROWS the part's rows (*rows; c and a give the
 * sizes); NULL when the tensor has no such part (part 0 of a tensor that
 * is not stacked is the tensor itself). */
const char *nn_hf_from_weft_part(const nn_hf_family *f, const char *weft, int part,
				 const weft_gpt_config *c, const nn_arch *a, char *buf,
				 size_t len, nn_hf_how *how, int64_t *rows);

/* The family that holds a transformer of c and a in transformers' layout:
 * GPT2LMHeadModel for GPT-2's choices (biases on), LlamaForCausalLM for
 * RMSNorm, RoPE, SwiGLU without biases, Qwen2ForCausalLM for the same
 * with q, k, v biases. Errors: WEFT_ERR_INVALID_ARG
 * naming `what` and the choice no family has. */
weft_status nn_hf_family_for(const weft_gpt_config *c, const nn_arch *a, const char *what,
			     const nn_hf_family **out);

/* Whether `name` ends in one of the family's buffer names. */
int nn_hf_is_buffer(const nn_hf_family *f, const char *name);

/* Writes a GPT2LMHeadModel config.json of `c` (tied head, GELU's tanh form
 * "gelu_new", or "gelu" when a (may be NULL) has the exact form, LayerNorm
 * eps 1e-5, no dropout) to `path`. Errors: WEFT_ERR_INVALID_ARG when c has
 * no biases (GPT-2 always has them); WEFT_ERR_IO naming the path. */
weft_status nn_hf_gpt2_config_write(const char *path, const weft_gpt_config *c,
				    const nn_arch *a);

/* Writes a LlamaForCausalLM config.json of c and a (nn_hf_family_for
 * gave nn_hf_llama), or a Qwen2ForCausalLM one (a->qkv_bias), to `path`: sizes, heads and KV heads, rms_norm_eps,
 * rope_theta and rope_scaling ("llama3" or null), tie_word_embeddings,
 * float32. Errors: WEFT_ERR_IO naming the path. */
weft_status nn_hf_llama_config_write(const char *path, const weft_gpt_config *c,
				     const nn_arch *a);

/* The transformer's choices in a weights file's __metadata__, so that a
 * checkpoint's model.safetensors says what its tensors do not: put adds
 * weft.norm, weft.norm_eps, weft.position, weft.rope_* , weft.mlp,
 * weft.intermediate_size, weft.n_kv_head and weft.tie_embeddings to m
 * (weft_model_st_meta calls it for any arch but GPT-2's); get reads them
 * back into *a (all zero, GPT-2's, when the file has none; *found says
 * whether it had). Errors (get): WEFT_ERR_CORRUPT naming `what`, the key
 * and its value when one is missing or not a value weft writes. */
struct weft_model_meta;
struct weft_st_file;
void nn_hf_arch_meta_put(const weft_gpt_config *c, const nn_arch *a,
			 struct weft_model_meta *m);
weft_status nn_hf_arch_meta_get(const struct weft_st_file *f, const char *what,
				const weft_gpt_config *c, nn_arch *a, int *found);

#endif /* WEFT_NN_HF_H */
