/* Hugging Face checkpoints written: a model's config.json in transformers'
 * layout, and the transformer's choices as weft.* keys of a weights file's
 * __metadata__ (written, and read back when weft loads its own file; see
 * hf.h, and hf.c for reading a checkpoint). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "nn/hf.h"
#include "nn/safetensors.h"

/* ---- writing config.json ---- */

static weft_status write_json(const char *path, weft_json_writer *w);

weft_status nn_hf_gpt2_config_write(const char *path, const weft_gpt_config *c,
				    const nn_arch *a)
{
	weft_json_writer w;

	if (!c->bias)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the model has no biases (bias: "
				      "false) but GPT2LMHeadModel always has them; export it in "
				      "the safetensors format (nanoGPT's names) instead", path);
	weft_json_writer_string(&w, 1);
	weft_json_begin_object(&w);
	weft_json_key(&w, "architectures");
	weft_json_begin_array(&w);
	weft_json_string(&w, nn_hf_gpt2.architecture);
	weft_json_end_array(&w);
	weft_json_key(&w, "model_type");
	weft_json_string(&w, nn_hf_gpt2.model_type);
	weft_json_key(&w, "vocab_size");
	weft_json_int(&w, c->vocab_size);
	weft_json_key(&w, "n_positions");
	weft_json_int(&w, c->block_size);
	weft_json_key(&w, "n_embd");
	weft_json_int(&w, c->n_embd);
	weft_json_key(&w, "n_layer");
	weft_json_int(&w, c->n_layer);
	weft_json_key(&w, "n_head");
	weft_json_int(&w, c->n_head);
	weft_json_key(&w, "n_inner");
	weft_json_null(&w);
	/* GELU's tanh form is transformers' gelu_new, the exact one its gelu */
	weft_json_key(&w, "activation_function");
	weft_json_string(&w, a && a->mlp == NN_MLP_GELU ? "gelu" : "gelu_new");
	weft_json_key(&w, "layer_norm_epsilon");
	weft_json_number(&w, 1e-5);
	weft_json_key(&w, "resid_pdrop");
	weft_json_number(&w, 0.0);
	weft_json_key(&w, "embd_pdrop");
	weft_json_number(&w, 0.0);
	weft_json_key(&w, "attn_pdrop");
	weft_json_number(&w, 0.0);
	weft_json_key(&w, "initializer_range");
	weft_json_number(&w, 0.02);
	weft_json_key(&w, "scale_attn_weights");
	weft_json_bool(&w, 1);
	weft_json_key(&w, "tie_word_embeddings");
	weft_json_bool(&w, 1);
	/* GPT-2's <|endoftext|>, or the last id of a smaller vocabulary
	 * (transformers warns of ids outside it) */
	weft_json_key(&w, "bos_token_id");
	weft_json_int(&w, c->vocab_size > 50256 ? 50256 : c->vocab_size - 1);
	weft_json_key(&w, "eos_token_id");
	weft_json_int(&w, c->vocab_size > 50256 ? 50256 : c->vocab_size - 1);
	weft_json_key(&w, "torch_dtype");
	weft_json_string(&w, "float32");
	weft_json_end_object(&w);
	return write_json(path, &w);
}

/* Finishes w and writes its text to `path`. */
static weft_status write_json(const char *path, weft_json_writer *w)
{
	char *text = NULL;
	FILE *fp;
	weft_status st;

	if ((st = weft_json_finish(w, &text)))
		return weft_error_wrap(st, "%s: building config.json", path);
	fp = fopen(path, "w");
	if (!fp) {
		st = weft_error_set(WEFT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
		goto out_free;
	}
	if (fputs(text, fp) == EOF || fputc('\n', fp) == EOF) {
		st = weft_error_set(WEFT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
		fclose(fp);
		goto out_free;
	}
	if (fclose(fp))
		st = weft_error_set(WEFT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
out_free:
	free(text);
	return st;
}

weft_status nn_hf_llama_config_write(const char *path, const weft_gpt_config *c,
				     const nn_arch *a)
{
	const nn_hf_family *f = a->qkv_bias ? &nn_hf_qwen2 : &nn_hf_llama;
	const weft_rope *r = &a->rope;
	weft_json_writer w;

	weft_json_writer_string(&w, 1);
	weft_json_begin_object(&w);
	weft_json_key(&w, "architectures");
	weft_json_begin_array(&w);
	weft_json_string(&w, f->architecture);
	weft_json_end_array(&w);
	weft_json_key(&w, "model_type");
	weft_json_string(&w, f->model_type);
	weft_json_key(&w, "vocab_size");
	weft_json_int(&w, c->vocab_size);
	weft_json_key(&w, "max_position_embeddings");
	weft_json_int(&w, c->block_size);
	weft_json_key(&w, "hidden_size");
	weft_json_int(&w, c->n_embd);
	weft_json_key(&w, "intermediate_size");
	weft_json_int(&w, a->intermediate);
	weft_json_key(&w, "num_hidden_layers");
	weft_json_int(&w, c->n_layer);
	weft_json_key(&w, "num_attention_heads");
	weft_json_int(&w, c->n_head);
	weft_json_key(&w, "num_key_value_heads");
	weft_json_int(&w, a->n_kv_head ? a->n_kv_head : c->n_head);
	weft_json_key(&w, "head_dim");
	weft_json_int(&w, c->n_embd / c->n_head);
	weft_json_key(&w, "hidden_act");
	weft_json_string(&w, "silu");
	weft_json_key(&w, "rms_norm_eps");
	weft_json_number(&w, a->norm_eps);
	weft_json_key(&w, "rope_theta");
	weft_json_number(&w, r->theta);
	weft_json_key(&w, "rope_scaling");
	if (r->scaling == WEFT_ROPE_LLAMA3) {
		weft_json_begin_object(&w);
		weft_json_key(&w, "rope_type");
		weft_json_string(&w, "llama3");
		weft_json_key(&w, "factor");
		weft_json_number(&w, r->factor);
		weft_json_key(&w, "low_freq_factor");
		weft_json_number(&w, r->low_freq_factor);
		weft_json_key(&w, "high_freq_factor");
		weft_json_number(&w, r->high_freq_factor);
		weft_json_key(&w, "original_max_position_embeddings");
		weft_json_number(&w, r->original_max_positions);
		weft_json_end_object(&w);
	} else {
		weft_json_null(&w);
	}
	if (f == &nn_hf_qwen2) { /* its q, k, v biases are not a key */
		weft_json_key(&w, "use_sliding_window");
		weft_json_bool(&w, 0);
	} else {
		weft_json_key(&w, "attention_bias");
		weft_json_bool(&w, 0);
		weft_json_key(&w, "mlp_bias");
		weft_json_bool(&w, 0);
	}
	weft_json_key(&w, "attention_dropout");
	weft_json_number(&w, 0.0);
	weft_json_key(&w, "initializer_range");
	weft_json_number(&w, 0.02);
	weft_json_key(&w, "tie_word_embeddings");
	weft_json_bool(&w, !a->untied);
	weft_json_key(&w, "torch_dtype");
	weft_json_string(&w, "float32");
	weft_json_end_object(&w);
	return write_json(path, &w);
}

/* ---- the choices in a weights file's metadata ---- */

static const char *meta_put(weft_model_meta *m, const char *key, const char *fmt, ...)
	WEFT_PRINTF(3, 4);

static const char *meta_put(weft_model_meta *m, const char *key, const char *fmt, ...)
{
	va_list ap;

	if (m->n >= WEFT_MODEL_META_MAX)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(m->v[m->n], sizeof(m->v[m->n]), fmt, ap);
	va_end(ap);
	m->pairs[2 * m->n] = key;
	m->pairs[2 * m->n + 1] = m->v[m->n];
	return m->v[m->n++];
}

static const char *const meta_norms[] = { "layernorm", "rmsnorm", NULL };
static const char *const meta_positions[] = { "learned", "rope", NULL };
static const char *const meta_mlps[] = { "gelu_tanh", "swiglu", "gelu", NULL };
static const char *const meta_scalings[] = { "none", "llama3", NULL };

void nn_hf_arch_meta_put(const weft_gpt_config *c, const nn_arch *a, weft_model_meta *m)
{
	const weft_rope *r = &a->rope;

	meta_put(m, "weft.norm", "%s", meta_norms[a->norm]);
	meta_put(m, "weft.norm_eps", "%.17g", a->norm_eps ? a->norm_eps : (double)NN_LN_EPS);
	meta_put(m, "weft.position", "%s", meta_positions[a->position]);
	meta_put(m, "weft.mlp", "%s", meta_mlps[a->mlp]);
	meta_put(m, "weft.intermediate_size", "%lld", (long long)(a->intermediate ?
		 a->intermediate : 4 * c->n_embd));
	meta_put(m, "weft.n_kv_head", "%lld", (long long)(a->n_kv_head ? a->n_kv_head :
		 c->n_head));
	meta_put(m, "weft.tie_embeddings", "%s", a->untied ? "false" : "true");
	meta_put(m, "weft.qkv_bias", "%s", a->qkv_bias ? "true" : "false");
	if (a->position != NN_POS_ROPE)
		return;
	meta_put(m, "weft.rope_theta", "%.17g", r->theta);
	meta_put(m, "weft.rope_scaling", "%s", meta_scalings[r->scaling]);
	meta_put(m, "weft.rope_factor", "%.17g", r->factor);
	meta_put(m, "weft.rope_low_freq_factor", "%.17g", r->low_freq_factor);
	meta_put(m, "weft.rope_high_freq_factor", "%.17g", r->high_freq_factor);
	meta_put(m, "weft.rope_original_max_positions", "%.17g", r->original_max_positions);
}

static weft_status meta_bad(const char *what, const char *key, const char *v)
{
	return weft_error_set(WEFT_ERR_CORRUPT, "%s: __metadata__ \"%s\" is %s%s%s, not a "
			      "value weft writes; the file was changed after weft saved it",
			      what, key, v ? "\"" : "", v ? v : "missing", v ? "\"" : "");
}

static weft_status meta_choice(const weft_st_file *f, const char *what, const char *key,
			       const char *const *names, int *out)
{
	const char *v = weft_st_meta(f, key);

	for (int i = 0; v && names[i]; i++)
		if (!strcmp(v, names[i])) {
			*out = i;
			return WEFT_OK;
		}
	return meta_bad(what, key, v);
}

static weft_status meta_number(const weft_st_file *f, const char *what, const char *key,
			       double *out)
{
	const char *v = weft_st_meta(f, key);
	char *end = NULL;

	if (v) {
		errno = 0;
		*out = strtod(v, &end);
	}
	if (!v || !*v || *end || errno || !(*out > 0.0))
		return meta_bad(what, key, v);
	return WEFT_OK;
}

static weft_status meta_int(const weft_st_file *f, const char *what, const char *key,
			    int64_t *out)
{
	double d = 0.0;
	weft_status st = meta_number(f, what, key, &d);

	if (st || d != (double)(int64_t)d)
		return st ? st : meta_bad(what, key, weft_st_meta(f, key));
	*out = (int64_t)d;
	return WEFT_OK;
}

weft_status nn_hf_arch_meta_get(const weft_st_file *f, const char *what,
				const weft_gpt_config *c, nn_arch *a, int *found)
{
	weft_rope *r = &a->rope;
	int norm = 0, pos = 0, mlp = 0, tied = 0, scaling = 0;
	weft_status st;

	memset(a, 0, sizeof(*a));
	*found = weft_st_meta(f, "weft.norm") != NULL;
	if (!*found)
		return WEFT_OK;
	if ((st = meta_choice(f, what, "weft.norm", meta_norms, &norm)) ||
	    (st = meta_number(f, what, "weft.norm_eps", &a->norm_eps)) ||
	    (st = meta_choice(f, what, "weft.position", meta_positions, &pos)) ||
	    (st = meta_choice(f, what, "weft.mlp", meta_mlps, &mlp)) ||
	    (st = meta_int(f, what, "weft.intermediate_size", &a->intermediate)) ||
	    (st = meta_int(f, what, "weft.n_kv_head", &a->n_kv_head)) ||
	    (st = meta_choice(f, what, "weft.tie_embeddings",
			      (const char *const[]){ "false", "true", NULL }, &tied)))
		return st;
	a->norm = (nn_norm)norm;
	a->position = (nn_position)pos;
	a->mlp = (nn_mlp_kind)mlp;
	a->untied = !tied;
	/* absent: written before weft recorded it, so none */
	if (weft_st_meta(f, "weft.qkv_bias") &&
	    (st = meta_choice(f, what, "weft.qkv_bias",
			      (const char *const[]){ "false", "true", NULL }, &a->qkv_bias)))
		return st;
	if (a->n_kv_head == c->n_head)
		a->n_kv_head = 0;
	if (a->mlp != NN_MLP_SWIGLU && a->intermediate == 4 * c->n_embd)
		a->intermediate = 0;
	if (a->norm == NN_NORM_LAYERNORM && (float)a->norm_eps == NN_LN_EPS)
		a->norm_eps = 0.0;
	if (a->position != NN_POS_ROPE)
		return WEFT_OK;
	r->struct_size = sizeof(*r);
	if ((st = meta_number(f, what, "weft.rope_theta", &r->theta)) ||
	    (st = meta_choice(f, what, "weft.rope_scaling", meta_scalings, &scaling)) ||
	    (st = meta_number(f, what, "weft.rope_factor", &r->factor)) ||
	    (st = meta_number(f, what, "weft.rope_low_freq_factor", &r->low_freq_factor)) ||
	    (st = meta_number(f, what, "weft.rope_high_freq_factor", &r->high_freq_factor)) ||
	    (st = meta_number(f, what, "weft.rope_original_max_positions",
			      &r->original_max_positions)))
		return st;
	r->scaling = scaling;
	return WEFT_OK;
}

