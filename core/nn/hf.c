/* Hugging Face checkpoints read: the family tables and names, config.json
 * read and checked against the model, and the weight files of a directory
 * (see hf.h; hf_export.c writes config.json and the weft.* metadata). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json.h"
#include "nn/hf.h"

/* GPT-2's Conv1D stores [in, out]; nanoGPT's (and weft's) Linear [out, in]. */
static const nn_hf_rule gpt2_rules[] = {
	{ "transformer.h.{i}.attn.c_attn.weight", "transformer.h.{i}.attn.c_attn.weight",
	  NN_HF_TRANSPOSE, 0, 0 },
	{ "transformer.h.{i}.attn.c_proj.weight", "transformer.h.{i}.attn.c_proj.weight",
	  NN_HF_TRANSPOSE, 0, 0 },
	{ "transformer.h.{i}.mlp.c_fc.weight", "transformer.h.{i}.mlp.c_fc.weight",
	  NN_HF_TRANSPOSE, 0, 0 },
	{ "transformer.h.{i}.mlp.c_proj.weight", "transformer.h.{i}.mlp.c_proj.weight",
	  NN_HF_TRANSPOSE, 0, 0 },
};

/* the causal mask (and its fill value) that transformers before 4.36 and
 * nanoGPT without flash attention keep in their state dicts */
static const char *const gpt2_buffers[] = { ".attn.bias", ".attn.masked_bias", NULL };

const nn_hf_family nn_hf_gpt2 = {
	.architecture = "GPT2LMHeadModel",
	.model_type = "gpt2",
	.base_prefix = "transformer.",
	.rules = gpt2_rules,
	.n_rules = sizeof(gpt2_rules) / sizeof(gpt2_rules[0]),
	.buffers = gpt2_buffers,
	.head = "lm_head.weight",
	.embedding = "transformer.wte.weight",
};

/* Llama's names (and, last, Qwen2's q/k/v biases); q | k | v and gate | up
 * are stacked by rows into weft's packed c_attn and c_fc. */
#define QWEN2_EXTRA 3
static const nn_hf_rule llama_rules[] = {
	{ "model.embed_tokens.weight", "transformer.wte.weight", NN_HF_COPY, 0, 0 },
	{ "model.layers.{i}.input_layernorm.weight", "transformer.h.{i}.ln_1.weight",
	  NN_HF_COPY, 0, 0 },
	{ "model.layers.{i}.self_attn.q_proj.weight", "transformer.h.{i}.attn.c_attn.weight",
	  NN_HF_ROWS, 0, NN_HF_ROWS_EMBD },
	{ "model.layers.{i}.self_attn.k_proj.weight", "transformer.h.{i}.attn.c_attn.weight",
	  NN_HF_ROWS, 1, NN_HF_ROWS_KV },
	{ "model.layers.{i}.self_attn.v_proj.weight", "transformer.h.{i}.attn.c_attn.weight",
	  NN_HF_ROWS, 2, NN_HF_ROWS_KV },
	{ "model.layers.{i}.self_attn.o_proj.weight", "transformer.h.{i}.attn.c_proj.weight",
	  NN_HF_COPY, 0, 0 },
	{ "model.layers.{i}.post_attention_layernorm.weight", "transformer.h.{i}.ln_2.weight",
	  NN_HF_COPY, 0, 0 },
	{ "model.layers.{i}.mlp.gate_proj.weight", "transformer.h.{i}.mlp.c_fc.weight",
	  NN_HF_ROWS, 0, NN_HF_ROWS_INNER },
	{ "model.layers.{i}.mlp.up_proj.weight", "transformer.h.{i}.mlp.c_fc.weight",
	  NN_HF_ROWS, 1, NN_HF_ROWS_INNER },
	{ "model.layers.{i}.mlp.down_proj.weight", "transformer.h.{i}.mlp.c_proj.weight",
	  NN_HF_COPY, 0, 0 },
	{ "model.norm.weight", "transformer.ln_f.weight", NN_HF_COPY, 0, 0 },
	/* Qwen2's alone (nn_hf_qwen2): the biases of q, k and v, stacked into
	 * c_attn's bias; Llama's family leaves these last QWEN2_EXTRA rules out */
	{ "model.layers.{i}.self_attn.q_proj.bias", "transformer.h.{i}.attn.c_attn.bias",
	  NN_HF_ROWS, 0, NN_HF_ROWS_EMBD },
	{ "model.layers.{i}.self_attn.k_proj.bias", "transformer.h.{i}.attn.c_attn.bias",
	  NN_HF_ROWS, 1, NN_HF_ROWS_KV },
	{ "model.layers.{i}.self_attn.v_proj.bias", "transformer.h.{i}.attn.c_attn.bias",
	  NN_HF_ROWS, 2, NN_HF_ROWS_KV },
};

/* the rotary frequencies that transformers before 4.31 saved */
static const char *const llama_buffers[] = { ".rotary_emb.inv_freq", NULL };

const nn_hf_family nn_hf_llama = {
	.architecture = "LlamaForCausalLM",
	.model_type = "llama",
	.base_prefix = "model.",
	.rules = llama_rules,
	.n_rules = sizeof(llama_rules) / sizeof(llama_rules[0]) - QWEN2_EXTRA,
	.buffers = llama_buffers,
	.head = "lm_head.weight",
	.embedding = "transformer.wte.weight",
};

const nn_hf_family nn_hf_qwen2 = {
	.architecture = "Qwen2ForCausalLM",
	.model_type = "qwen2",
	.base_prefix = "model.",
	.rules = llama_rules, /* Llama's names and the q/k/v biases */
	.n_rules = sizeof(llama_rules) / sizeof(llama_rules[0]),
	.buffers = llama_buffers,
	.head = "lm_head.weight",
	.embedding = "transformer.wte.weight",
};

static const nn_hf_family *const families[] = { &nn_hf_gpt2, &nn_hf_llama, &nn_hf_qwen2 };
#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

int nn_hf_is_dir(const char *dir)
{
	char path[4096];
	struct stat sb;

	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return 0;
	snprintf(path, sizeof(path), "%s/%s", dir, NN_HF_CONFIG);
	return stat(path, &sb) == 0;
}

/* ---- names ---- */

/* Whether `name` matches `pattern` ("{i}" one decimal layer index, kept
 * in *layer). */
static int match(const char *pattern, const char *name, long *layer)
{
	const char *brace = strstr(pattern, "{i}");
	size_t pre;
	char *end;

	if (!brace)
		return !strcmp(pattern, name);
	pre = (size_t)(brace - pattern);
	if (strncmp(pattern, name, pre) || name[pre] < '0' || name[pre] > '9')
		return 0;
	errno = 0;
	*layer = strtol(name + pre, &end, 10);
	if (errno || (name[pre] == '0' && end != name + pre + 1))
		return 0;
	return !strcmp(brace + 3, end);
}

static const char *fill(const char *pattern, long layer, char *buf, size_t len)
{
	const char *brace = strstr(pattern, "{i}");

	if (!brace)
		snprintf(buf, len, "%s", pattern);
	else
		snprintf(buf, len, "%.*s%ld%s", (int)(brace - pattern), pattern, layer, brace + 3);
	return buf;
}

int nn_hf_is_buffer(const nn_hf_family *f, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; f->buffers && f->buffers[i]; i++) {
		size_t b = strlen(f->buffers[i]);

		if (n >= b && !strcmp(name + n - b, f->buffers[i]))
			return 1;
	}
	return 0;
}

const char *nn_hf_to_weft(const nn_hf_family *f, const char *hf, char *buf, size_t len,
			  nn_hf_how *how)
{
	return nn_hf_to_weft_part(f, hf, buf, len, how, NULL);
}

const char *nn_hf_to_weft_part(const nn_hf_family *f, const char *hf, char *buf, size_t len,
			       nn_hf_how *how, int *part)
{
	char full[512];
	long layer = 0;

	*how = NN_HF_COPY;
	if (part)
		*part = 0;
	if (nn_hf_is_buffer(f, hf))
		return NULL;
	/* the base model's own save: "h.0.ln_1.weight" for
	 * "transformer.h.0.ln_1.weight" */
	if (f->base_prefix && strncmp(hf, f->base_prefix, strlen(f->base_prefix)) &&
	    strcmp(hf, f->head)) {
		snprintf(full, sizeof(full), "%s%s", f->base_prefix, hf);
		hf = full;
	}
	for (size_t r = 0; r < f->n_rules; r++)
		if (match(f->rules[r].hf, hf, &layer)) {
			*how = f->rules[r].how;
			if (part)
				*part = f->rules[r].part;
			return fill(f->rules[r].weft, layer, buf, len);
		}
	snprintf(buf, len, "%s", hf);
	return buf;
}

const char *nn_hf_from_weft(const nn_hf_family *f, const char *weft, char *buf, size_t len,
			    nn_hf_how *how)
{
	long layer = 0;

	*how = NN_HF_COPY;
	for (size_t r = 0; r < f->n_rules; r++)
		if (match(f->rules[r].weft, weft, &layer)) {
			*how = f->rules[r].how;
			return fill(f->rules[r].hf, layer, buf, len);
		}
	snprintf(buf, len, "%s", weft);
	return buf;
}

const char *nn_hf_from_weft_part(const nn_hf_family *f, const char *weft, int part,
				 const weft_gpt_config *c, const nn_arch *a, char *buf,
				 size_t len, nn_hf_how *how, int64_t *rows)
{
	int64_t hd = c->n_embd / c->n_head, kv = a->n_kv_head ? a->n_kv_head : c->n_head;
	long layer = 0;

	*how = NN_HF_COPY;
	*rows = 0;
	for (size_t r = 0; r < f->n_rules; r++) {
		const nn_hf_rule *u = &f->rules[r];

		if (!match(u->weft, weft, &layer) || (u->how == NN_HF_ROWS && u->part != part))
			continue;
		if (u->how != NN_HF_ROWS && part)
			return NULL;
		*how = u->how;
		if (u->how == NN_HF_ROWS)
			*rows = u->rows == NN_HF_ROWS_EMBD ? c->n_embd :
				u->rows == NN_HF_ROWS_KV ? kv * hd :
				a->intermediate ? a->intermediate : 4 * c->n_embd;
		return fill(u->hf, layer, buf, len);
	}
	if (part)
		return NULL;
	snprintf(buf, len, "%s", weft);
	return buf;
}

/* Whether the choices are GPT-2's, with GELU in either form. */
static int arch_is_gpt2(const nn_arch *a)
{
	nn_arch t = *a;

	if (t.mlp == NN_MLP_GELU)
		t.mlp = NN_MLP_GELU_TANH;
	return nn_arch_is_gpt(&t);
}

/* Whether the choices are Llama's (every one but sizes and RoPE's). */
static int arch_is_llama(const weft_gpt_config *c, const nn_arch *a)
{
	return a->norm == NN_NORM_RMSNORM && a->position == NN_POS_ROPE &&
	       a->mlp == NN_MLP_SWIGLU && !c->bias;
}

weft_status nn_hf_family_for(const weft_gpt_config *c, const nn_arch *a, const char *what,
			     const nn_hf_family **out)
{
	static const char *const norms[] = { "layernorm", "rmsnorm" };
	static const char *const positions[] = { "learned", "rope" };
	static const char *const mlps[] = { "gelu_tanh", "swiglu", "gelu" };

	*out = NULL;
	if (arch_is_gpt2(a) && c->bias) {
		*out = &nn_hf_gpt2;
		return WEFT_OK;
	}
	if (arch_is_llama(c, a)) {
		*out = a->qkv_bias ? &nn_hf_qwen2 : &nn_hf_llama;
		return WEFT_OK;
	}
	if (arch_is_gpt2(a))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the model has no biases (bias: "
				      "false) but GPT2LMHeadModel always has them; export it in "
				      "the safetensors format (nanoGPT's names) instead", what);
	return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the model's choices (norm %s, position "
			      "%s, mlp %s, bias %s) are neither GPT-2's (layernorm, learned, "
			      "gelu_tanh or gelu, 4 x n_embd, one head per key/value, tied, biases) nor "
			      "Llama's (rmsnorm, rope, swiglu, no biases but Qwen2's on q, k, v), "
			      "so no transformers "
			      "class computes this model; export it in the safetensors format "
			      "(weft's names) instead", what, norms[a->norm],
			      positions[a->position], mlps[a->mlp], c->bias ? "true" : "false");
}

/* ---- config.json ---- */

static weft_status bad_key(const char *path, const char *key, const char *fmt, ...)
	WEFT_PRINTF(3, 4);

static weft_status bad_key(const char *path, const char *key, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: \"%s\" %s", path, key, msg);
}

/* An integer key >= 1, or def when absent (transformers' GPT2Config
 * default, which is what from_pretrained uses then). */
static weft_status cfg_int(const char *path, const weft_json_value *js, const char *key,
			   int64_t def, int64_t *out)
{
	const weft_json_value *v = weft_json_get(js, key);

	*out = def;
	if (!v)
		return WEFT_OK;
	if (v->kind != WEFT_JSON_NUMBER || !v->is_integer || v->integer < 1)
		return bad_key(path, key, "must be an integer >= 1");
	*out = v->integer;
	return WEFT_OK;
}

static weft_status cfg_bool(const char *path, const weft_json_value *js, const char *key,
			    int def, int *out)
{
	const weft_json_value *v = weft_json_get(js, key);

	*out = def;
	if (!v)
		return WEFT_OK;
	if (v->kind != WEFT_JSON_BOOL)
		return bad_key(path, key, "must be true or false");
	*out = v->boolean;
	return WEFT_OK;
}

/* The family of config.json: by its first architecture, else its
 * model_type. */
static weft_status family_of(const char *path, const weft_json_value *js,
			     const nn_hf_family **out)
{
	const weft_json_value *arch = weft_json_get(js, "architectures");
	const weft_json_value *type = weft_json_get(js, "model_type");
	const char *name = NULL;

	if (arch && arch->kind == WEFT_JSON_ARRAY && arch->count &&
	    arch->items[0].kind == WEFT_JSON_STRING)
		name = arch->items[0].string;
	for (size_t i = 0; i < N_FAMILIES; i++)
		if (name ? !strcmp(name, families[i]->architecture) :
		    type && type->kind == WEFT_JSON_STRING &&
		    !strcmp(type->string, families[i]->model_type)) {
			*out = families[i];
			return WEFT_OK;
		}
	return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the checkpoint's %s is \"%s\", which "
			      "weft does not read yet (it reads architectures GPT2LMHeadModel, "
			      "LlamaForCausalLM and Qwen2ForCausalLM, model_type gpt2, llama and "
			      "qwen2); give a GPT-2, Llama or Qwen2 checkpoint", path,
			      name ? "architecture" : "model_type",
			      name ? name : type && type->kind == WEFT_JSON_STRING ? type->string :
			      "(none given)");
}

static weft_status gpt2_read(const char *path, const weft_json_value *js, nn_hf_config *c)
{
	const weft_json_value *v;
	int scale = 1, by_layer = 0, cross = 0;
	weft_status st;

	if ((st = cfg_int(path, js, "n_embd", 768, &c->gpt.n_embd)) ||
	    (st = cfg_int(path, js, "n_layer", 12, &c->gpt.n_layer)) ||
	    (st = cfg_int(path, js, "n_head", 12, &c->gpt.n_head)) ||
	    (st = cfg_int(path, js, "vocab_size", 50257, &c->gpt.vocab_size)) ||
	    (st = cfg_int(path, js, "n_positions", 1024, &c->gpt.block_size)) ||
	    (st = cfg_bool(path, js, "tie_word_embeddings", 1, &c->tied)) ||
	    (st = cfg_bool(path, js, "scale_attn_weights", 1, &scale)) ||
	    (st = cfg_bool(path, js, "scale_attn_by_inverse_layer_idx", 0, &by_layer)) ||
	    (st = cfg_bool(path, js, "add_cross_attention", 0, &cross)))
		return st;
	c->gpt.bias = 1;
	if (c->gpt.n_embd % c->gpt.n_head)
		return bad_key(path, "n_embd", "is %lld, not a multiple of n_head %lld; the file "
			       "is not a GPT-2 config", (long long)c->gpt.n_embd,
			       (long long)c->gpt.n_head);
	c->ln_eps = 1e-5;
	if ((v = weft_json_get(js, "layer_norm_epsilon"))) {
		if (v->kind != WEFT_JSON_NUMBER)
			return bad_key(path, "layer_norm_epsilon", "must be a number");
		c->ln_eps = v->number;
	}
	snprintf(c->activation, sizeof(c->activation), "gelu_new");
	if ((v = weft_json_get(js, "activation_function"))) {
		if (v->kind != WEFT_JSON_STRING)
			return bad_key(path, "activation_function", "must be a string");
		snprintf(c->activation, sizeof(c->activation), "%s", v->string);
	}
	if (!strcmp(c->activation, "gelu"))
		c->arch.mlp = NN_MLP_GELU;
	if ((v = weft_json_get(js, "n_inner")) && v->kind != WEFT_JSON_NULL &&
	    (v->kind != WEFT_JSON_NUMBER || !v->is_integer || v->integer != 4 * c->gpt.n_embd))
		return bad_key(path, "n_inner", "is not null or 4 x n_embd (%lld): weft's GPT has "
			       "an MLP of 4 x n_embd", (long long)(4 * c->gpt.n_embd));
	if (!scale || by_layer)
		return bad_key(path, scale ? "scale_attn_by_inverse_layer_idx" :
			       "scale_attn_weights", "is %s: weft's GPT scales attention by "
			       "1/sqrt(head size) alone", scale ? "true" : "false");
	if (cross)
		return bad_key(path, "add_cross_attention", "is true: weft's GPT has no "
			       "cross-attention");
	return WEFT_OK;
}

static weft_status cfg_number(const char *path, const weft_json_value *js, const char *key,
			      double def, double *out)
{
	const weft_json_value *v = weft_json_get(js, key);

	*out = def;
	if (!v || v->kind == WEFT_JSON_NULL)
		return WEFT_OK;
	if (v->kind != WEFT_JSON_NUMBER)
		return bad_key(path, key, "must be a number");
	*out = v->number;
	return WEFT_OK;
}

static weft_status cfg_false(const char *path, const weft_json_value *js, const char *key,
			     const char *what)
{
	int on = 0;
	weft_status st = cfg_bool(path, js, key, 0, &on);

	if (!st && on)
		return bad_key(path, key, "is true: %s", what);
	return st;
}

/* rope_parameters (transformers 5) or rope_theta with rope_scaling (4.x):
 * "default" or "llama3" frequencies. */
static weft_status llama_rope(const char *path, const weft_json_value *js, weft_rope *r)
{
	const weft_json_value *p = weft_json_get(js, "rope_parameters");
	const weft_json_value *sc = weft_json_get(js, "rope_scaling"), *type;
	const char *key = p ? "rope_parameters" : "rope_scaling";
	weft_status st;

	memset(r, 0, sizeof(*r));
	r->struct_size = sizeof(*r);
	if (p && p->kind != WEFT_JSON_OBJECT)
		return bad_key(path, "rope_parameters", "must be an object");
	if ((st = cfg_number(path, p ? p : js, "rope_theta", 10000.0, &r->theta)))
		return st;
	if (!p)
		p = sc && sc->kind != WEFT_JSON_NULL ? sc : NULL;
	if (p && p->kind != WEFT_JSON_OBJECT)
		return bad_key(path, key, "must be an object or null");
	type = p ? weft_json_get(p, "rope_type") : NULL;
	if (p && !type)
		type = weft_json_get(p, "type");
	if (!type || (type->kind == WEFT_JSON_STRING && !strcmp(type->string, "default"))) {
		r->scaling = WEFT_ROPE_PLAIN;
		r->factor = 8.0;
		r->low_freq_factor = 1.0;
		r->high_freq_factor = 4.0;
		r->original_max_positions = 8192.0;
		return WEFT_OK;
	}
	if (type->kind != WEFT_JSON_STRING || strcmp(type->string, "llama3"))
		return bad_key(path, key, "has rope_type %s%s%s, which weft does not compute "
			       "(it computes \"default\" and \"llama3\")",
			       type->kind == WEFT_JSON_STRING ? "\"" : "",
			       type->kind == WEFT_JSON_STRING ? type->string : "(not a string)",
			       type->kind == WEFT_JSON_STRING ? "\"" : "");
	r->scaling = WEFT_ROPE_LLAMA3;
	if ((st = cfg_number(path, p, "factor", 8.0, &r->factor)) ||
	    (st = cfg_number(path, p, "low_freq_factor", 1.0, &r->low_freq_factor)) ||
	    (st = cfg_number(path, p, "high_freq_factor", 4.0, &r->high_freq_factor)) ||
	    (st = cfg_number(path, p, "original_max_position_embeddings", 8192.0,
			     &r->original_max_positions)))
		return st;
	return WEFT_OK;
}

static weft_status llama_read(const char *path, const weft_json_value *js, nn_hf_config *c)
{
	const weft_json_value *v;
	int64_t kv, head_dim;
	weft_status st;

	if ((st = cfg_int(path, js, "hidden_size", 4096, &c->gpt.n_embd)) ||
	    (st = cfg_int(path, js, "num_hidden_layers", 32, &c->gpt.n_layer)) ||
	    (st = cfg_int(path, js, "num_attention_heads", 32, &c->gpt.n_head)) ||
	    (st = cfg_int(path, js, "num_key_value_heads", c->gpt.n_head, &kv)) ||
	    (st = cfg_int(path, js, "intermediate_size", 11008, &c->arch.intermediate)) ||
	    (st = cfg_int(path, js, "vocab_size", 32000, &c->gpt.vocab_size)) ||
	    (st = cfg_int(path, js, "max_position_embeddings", 2048, &c->gpt.block_size)) ||
	    (st = cfg_bool(path, js, "tie_word_embeddings", 0, &c->tied)) ||
	    (st = cfg_number(path, js, "rms_norm_eps", 1e-6, &c->arch.norm_eps)) ||
	    (st = cfg_false(path, js, "attention_bias", "weft's Llama has no biases")) ||
	    (st = cfg_false(path, js, "mlp_bias", "weft's Llama has no biases")) ||
	    (st = llama_rope(path, js, &c->arch.rope)))
		return st;
	c->gpt.bias = 0;
	c->arch.norm = NN_NORM_RMSNORM;
	c->arch.position = NN_POS_ROPE;
	c->arch.mlp = NN_MLP_SWIGLU;
	c->arch.n_kv_head = kv;
	c->arch.untied = !c->tied;
	c->ln_eps = c->arch.norm_eps;
	snprintf(c->activation, sizeof(c->activation), "silu");
	if ((v = weft_json_get(js, "hidden_act"))) {
		if (v->kind != WEFT_JSON_STRING)
			return bad_key(path, "hidden_act", "must be a string");
		snprintf(c->activation, sizeof(c->activation), "%s", v->string);
	}
	if (strcmp(c->activation, "silu"))
		return bad_key(path, "hidden_act", "is \"%s\": weft's Llama MLP is SwiGLU "
			       "(\"silu\")", c->activation);
	if (c->gpt.n_embd % c->gpt.n_head || c->gpt.n_head % kv)
		return bad_key(path, "num_attention_heads", "is %lld with hidden_size %lld and "
			       "num_key_value_heads %lld: weft needs hidden_size a multiple of it "
			       "and it a multiple of num_key_value_heads", (long long)c->gpt.n_head,
			       (long long)c->gpt.n_embd, (long long)kv);
	if ((st = cfg_int(path, js, "head_dim", c->gpt.n_embd / c->gpt.n_head, &head_dim)))
		return st;
	if (head_dim != c->gpt.n_embd / c->gpt.n_head)
		return bad_key(path, "head_dim", "is %lld, not hidden_size / num_attention_heads "
			       "(%lld), which weft's attention assumes", (long long)head_dim,
			       (long long)(c->gpt.n_embd / c->gpt.n_head));
	return WEFT_OK;
}

/* Qwen2 is Llama's config with a bias on q, k and v always (no key says
 * so) and a sliding window weft does not compute. */
static weft_status qwen2_read(const char *path, const weft_json_value *js, nn_hf_config *c)
{
	weft_status st;

	if ((st = llama_read(path, js, c)) ||
	    (st = cfg_false(path, js, "use_sliding_window", "weft's attention is causal over "
			    "the whole block (no sliding window); set it false in a copy of "
			    "config.json if the model's context fits max_window_layers' window")))
		return st;
	c->arch.qkv_bias = 1;
	return WEFT_OK;
}

weft_status nn_hf_config_read(const char *dir, nn_hf_config *out)
{
	char path[4096];
	weft_json_value *js = NULL;
	weft_status st;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/%s", dir, NN_HF_CONFIG);
	if ((st = weft_json_parse_file(path, &js)))
		return st;
	if (js->kind != WEFT_JSON_OBJECT)
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "%s: not a JSON object; give the "
				    "config.json transformers' save_pretrained wrote", path);
	else if (!(st = family_of(path, js, &out->family)))
		st = out->family == &nn_hf_llama ? llama_read(path, js, out) :
		     out->family == &nn_hf_qwen2 ? qwen2_read(path, js, out) :
						   gpt2_read(path, js, out);
	weft_json_free(js);
	return st;
}

/* transformers' names for GELU's tanh form (all the same function) */
static int is_gelu_tanh(const char *act)
{
	return !strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh") ||
	       !strcmp(act, "gelu_fast");
}

weft_status nn_hf_config_check(const nn_hf_config *hf, const char *dir,
			       const weft_gpt_config *model)
{
	static const struct {
		const char *hf, *weft;
		size_t at;
	} gpt2_keys[] = {
		{ "n_embd", "n_embd", offsetof(weft_gpt_config, n_embd) },
		{ "n_layer", "n_layer", offsetof(weft_gpt_config, n_layer) },
		{ "n_head", "n_head", offsetof(weft_gpt_config, n_head) },
		{ "vocab_size", "vocab_size", offsetof(weft_gpt_config, vocab_size) },
		{ "n_positions", "block_size", offsetof(weft_gpt_config, block_size) },
	}, llama_keys[] = {
		{ "hidden_size", "n_embd", offsetof(weft_gpt_config, n_embd) },
		{ "num_hidden_layers", "n_layer", offsetof(weft_gpt_config, n_layer) },
		{ "num_attention_heads", "n_head", offsetof(weft_gpt_config, n_head) },
		{ "vocab_size", "vocab_size", offsetof(weft_gpt_config, vocab_size) },
	};
	int llama = hf->family != &nn_hf_gpt2; /* Llama's keys: Llama and Qwen2 */
	__typeof__(&gpt2_keys[0]) keys = llama ? llama_keys : gpt2_keys;
	size_t n_keys = llama ? sizeof(llama_keys) / sizeof(llama_keys[0]) :
			sizeof(gpt2_keys) / sizeof(gpt2_keys[0]);
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, NN_HF_CONFIG);
	for (size_t i = 0; i < n_keys; i++) {
		int64_t want = *(const int64_t *)((const char *)&hf->gpt + keys[i].at);
		int64_t have = *(const int64_t *)((const char *)model + keys[i].at);

		if (want == have)
			continue;
		/* fewer positions: the first rows of wpe (nanoGPT's crop_block_size) */
		if (!strcmp(keys[i].hf, "n_positions") && have < want)
			continue;
		if (!strcmp(keys[i].hf, "n_positions"))
			return bad_key(path, keys[i].hf, "is %lld but the model's block_size is %lld: "
				       "the checkpoint has learned %lld positions; set model.block_size "
				       "to at most %lld, or leave it out", (long long)want,
				       (long long)have, (long long)want, (long long)want);
		return bad_key(path, keys[i].hf, "is %lld but the model's %s is %lld; leave "
				       "model.%s out of the config (the checkpoint's value is then "
				       "used) or set it to %lld", (long long)want, keys[i].weft,
				       (long long)have, keys[i].weft, (long long)want);
	}
	if (llama && model->bias)
		return bad_key(path, "model.bias", "is true in the run's config, but this Llama has "
			       "no biases; leave model.bias out (false)");
	if (llama)
		return WEFT_OK; /* its numerics: nn_hf_arch_check */
	if (!model->bias)
		return bad_key(path, "model.bias", "is false in the run's config, but GPT-2 has "
			       "biases on every Linear and LayerNorm; leave model.bias out (true)");
	if (fabs(hf->ln_eps - 1e-5) > 1e-12)
		return bad_key(path, "layer_norm_epsilon", "is %g but weft's LayerNorm uses 1e-5; "
			       "the logits would differ, so the checkpoint is refused", hf->ln_eps);
	if (!is_gelu_tanh(hf->activation) && strcmp(hf->activation, "gelu"))
		return bad_key(path, "activation_function", "is \"%s\" but weft's GPT computes "
			       "GELU's tanh form (transformers' \"gelu_new\", "
			       "\"gelu_pytorch_tanh\", \"gelu_fast\") or its exact erf form "
			       "(\"gelu\", nanoGPT's nn.GELU()) only, so the logits would not be "
			       "the checkpoint's", hf->activation);
	return WEFT_OK;
}

/* ---- weight files ---- */

void nn_hf_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

static weft_status add_path(char ***paths, size_t *n, const char *dir, const char *file)
{
	size_t len = strlen(dir) + strlen(file) + 2;
	char **grown;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*paths)[i] + strlen(dir) + 1, file))
			return WEFT_OK;
	grown = realloc(*paths, (*n + 1) * sizeof(**paths));
	if (!grown)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", dir);
	*paths = grown;
	if (!(grown[*n] = malloc(len)))
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", dir);
	snprintf(grown[(*n)++], len, "%s/%s", dir, file);
	return WEFT_OK;
}

weft_status nn_hf_weight_files(const char *dir, char ***paths, size_t *n)
{
	char path[4096];
	weft_json_value *js = NULL;
	const weft_json_value *map;
	struct stat sb;
	weft_status st = WEFT_OK;

	*paths = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, NN_HF_INDEX);
	if (stat(path, &sb) != 0) {
		snprintf(path, sizeof(path), "%s/%s", dir, NN_HF_WEIGHTS);
		if (stat(path, &sb) != 0)
			return weft_error_set(WEFT_ERR_NOT_FOUND, "%s holds neither %s nor %s; give "
					      "the directory transformers' save_pretrained wrote "
					      "(safetensors weights; a pytorch_model.bin is not "
					      "read: save it again with safe_serialization=True)",
					      dir, NN_HF_WEIGHTS, NN_HF_INDEX);
		return add_path(paths, n, dir, NN_HF_WEIGHTS);
	}
	if ((st = weft_json_parse_file(path, &js)))
		return st;
	map = js->kind == WEFT_JSON_OBJECT ? weft_json_get(js, "weight_map") : NULL;
	if (!map || map->kind != WEFT_JSON_OBJECT || !map->count) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "%s: expected {\"weight_map\": {tensor: "
				    "file, ...}}; the index is damaged", path);
		goto out_free;
	}
	for (size_t i = 0; i < map->count && !st; i++) {
		const weft_json_value *v = &map->items[i];

		if (v->kind != WEFT_JSON_STRING || !v->string[0] || strchr(v->string, '/') ||
		    !strcmp(v->string, "..") || !strcmp(v->string, "."))
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "%s: tensor '%s' maps to %s%s%s, "
					    "not a file name in the same directory; the index is "
					    "damaged", path, map->keys[i],
					    v->kind == WEFT_JSON_STRING ? "'" : "",
					    v->kind == WEFT_JSON_STRING ? v->string : "a non-string",
					    v->kind == WEFT_JSON_STRING ? "'" : "");
		else
			st = add_path(paths, n, dir, v->string);
	}
out_free:
	weft_json_free(js);
	if (st) {
		nn_hf_paths_free(*paths, *n);
		*paths = NULL;
		*n = 0;
	}
	return st;
}

/* ---- the model's choices against config.json's ---- */

/* The model's value of one choice against the checkpoint's. */
static weft_status arch_key(const char *path, const char *hf_key, const char *weft_key,
			    const char *have, const char *want)
{
	return bad_key(path, hf_key, "gives %s but the model has %s; leave model.%s out of "
		       "the config (the checkpoint's value is then used) or set it to match",
		       want, have, weft_key);
}

weft_status nn_hf_arch_check(const nn_hf_config *hf, const char *dir, const nn_arch *model)
{
	const nn_arch *a = &hf->arch;
	char path[4096], x[64], y[64];
	int64_t n = hf->gpt.n_head;
	int64_t kv_a = a->n_kv_head ? a->n_kv_head : n, kv_m = model->n_kv_head ? model->n_kv_head : n;

	snprintf(path, sizeof(path), "%s/%s", dir, NN_HF_CONFIG);
	if (hf->family == &nn_hf_gpt2) {
		if (!arch_is_gpt2(model))
			return bad_key(path, "architectures", "is GPT2LMHeadModel, but the run's "
				       "model sets norm, position, mlp, n_kv_head, "
				       "intermediate_size or tie_embeddings away from GPT-2's; leave "
				       "them out");
		if (model->mlp != a->mlp)
			return arch_key(path, "activation_function", "mlp",
					model->mlp == NN_MLP_GELU ? "gelu" : "gelu_tanh",
					a->mlp == NN_MLP_GELU ? "gelu" : "gelu_tanh");
		return WEFT_OK;
	}
	if (model->norm != NN_NORM_RMSNORM)
		return arch_key(path, "architectures", "norm", "layernorm", "rmsnorm");
	if ((float)model->norm_eps != (float)a->norm_eps) {
		snprintf(x, sizeof(x), "%g", model->norm_eps);
		snprintf(y, sizeof(y), "%g", a->norm_eps);
		return arch_key(path, "rms_norm_eps", "norm_eps", x, y);
	}
	if (model->mlp != NN_MLP_SWIGLU)
		return arch_key(path, "hidden_act", "mlp", "gelu_tanh", "swiglu");
	if (model->intermediate != a->intermediate) {
		snprintf(x, sizeof(x), "%lld", (long long)model->intermediate);
		snprintf(y, sizeof(y), "%lld", (long long)a->intermediate);
		return arch_key(path, "intermediate_size", "intermediate_size", x, y);
	}
	if (kv_m != kv_a) {
		snprintf(x, sizeof(x), "%lld", (long long)kv_m);
		snprintf(y, sizeof(y), "%lld", (long long)kv_a);
		return arch_key(path, "num_key_value_heads", "n_kv_head", x, y);
	}
	if (model->untied != a->untied)
		return arch_key(path, "tie_word_embeddings", "tie_embeddings",
				model->untied ? "false" : "true", a->untied ? "false" : "true");
	if (model->qkv_bias != a->qkv_bias)
		return arch_key(path, "architectures", "qkv_bias",
				model->qkv_bias ? "true" : "false", a->qkv_bias ? "true" : "false");
	if (model->position != NN_POS_ROPE)
		return arch_key(path, "rope_theta", "position", "learned", "rope");
	if (model->rope.scaling != a->rope.scaling || model->rope.theta != a->rope.theta ||
	    (a->rope.scaling == WEFT_ROPE_LLAMA3 &&
	     (model->rope.factor != a->rope.factor ||
	      model->rope.low_freq_factor != a->rope.low_freq_factor ||
	      model->rope.high_freq_factor != a->rope.high_freq_factor ||
	      model->rope.original_max_positions != a->rope.original_max_positions))) {
		snprintf(x, sizeof(x), "theta %g, %s", model->rope.theta,
			 model->rope.scaling ? "llama3" : "none");
		snprintf(y, sizeof(y), "theta %g, %s", a->rope.theta,
			 a->rope.scaling ? "llama3" : "none");
		return arch_key(path, "rope_parameters", "rope_*", x, y);
	}
	return WEFT_OK;
}
