/* Hugging Face checkpoints: the family tables, config.json read and
 * written, and the weight files of a directory (see hf.h). */
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
	  NN_HF_TRANSPOSE },
	{ "transformer.h.{i}.attn.c_proj.weight", "transformer.h.{i}.attn.c_proj.weight",
	  NN_HF_TRANSPOSE },
	{ "transformer.h.{i}.mlp.c_fc.weight", "transformer.h.{i}.mlp.c_fc.weight",
	  NN_HF_TRANSPOSE },
	{ "transformer.h.{i}.mlp.c_proj.weight", "transformer.h.{i}.mlp.c_proj.weight",
	  NN_HF_TRANSPOSE },
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

static const nn_hf_family *const families[] = { &nn_hf_gpt2 };
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
	char full[512];
	long layer = 0;

	*how = NN_HF_COPY;
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
			      "model_type gpt2); give a GPT-2 checkpoint", path,
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
		st = gpt2_read(path, js, out);
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
	} keys[] = {
		{ "n_embd", "n_embd", offsetof(weft_gpt_config, n_embd) },
		{ "n_layer", "n_layer", offsetof(weft_gpt_config, n_layer) },
		{ "n_head", "n_head", offsetof(weft_gpt_config, n_head) },
		{ "vocab_size", "vocab_size", offsetof(weft_gpt_config, vocab_size) },
		{ "n_positions", "block_size", offsetof(weft_gpt_config, block_size) },
	};
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, NN_HF_CONFIG);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
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
	if (!model->bias)
		return bad_key(path, "model.bias", "is false in the run's config, but GPT-2 has "
			       "biases on every Linear and LayerNorm; leave model.bias out (true)");
	if (fabs(hf->ln_eps - 1e-5) > 1e-12)
		return bad_key(path, "layer_norm_epsilon", "is %g but weft's LayerNorm uses 1e-5; "
			       "the logits would differ, so the checkpoint is refused", hf->ln_eps);
	if (!is_gelu_tanh(hf->activation))
		return bad_key(path, "activation_function", "is \"%s\" but weft's GPT uses GELU's "
			       "tanh form (transformers' \"gelu_new\"; \"gelu\" is the exact "
			       "erf form, nanoGPT's nn.GELU()). The two differ by up to 4.7e-4 per "
			       "activation, so the logits would not be the checkpoint's; if that "
			       "is acceptable (fine-tuning adapts), set \"activation_function\": "
			       "\"gelu_new\" in a copy of config.json", hf->activation);
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

/* ---- writing config.json ---- */

weft_status nn_hf_gpt2_config_write(const char *path, const weft_gpt_config *c)
{
	weft_json_writer w;
	char *text = NULL;
	FILE *fp;
	weft_status st;

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
	/* weft's GELU is the tanh form: transformers' gelu_new */
	weft_json_key(&w, "activation_function");
	weft_json_string(&w, "gelu_new");
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
	if ((st = weft_json_finish(&w, &text)))
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
