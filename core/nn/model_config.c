/* Building a model from the config's `model:` section, with range checks
 * reported at the value's file:line:col. */
#include <string.h>

#include "nn/hf.h"
#include "nn/nn_impl.h"
#include "nn/shapes.h"
#include "plugin/registry.h"

/* The node of `key` for messages: the value when given, else the section. */
static const weft_cfg *at(const weft_cfg *sec, const char *key)
{
	const weft_cfg *n = weft_cfg_get(sec, key);

	return n ? n : sec;
}

static weft_status get_int(const weft_cfg *sec, const char *key, int64_t def, int64_t min,
			   int64_t *out)
{
	weft_status st = weft_cfg_int(sec, key, def, out);

	if (st)
		return st;
	if (*out < min)
		return weft_cfg_error(at(sec, key), "must be >= %lld, got %lld", (long long)min,
				      (long long)*out);
	return WEFT_OK;
}

static weft_status get_dropout(const weft_cfg *sec, double *out)
{
	weft_status st = weft_cfg_float(sec, "dropout", 0.0, out);

	if (st)
		return st;
	if (!(*out >= 0.0 && *out < 1.0))
		return weft_cfg_error(at(sec, "dropout"), "must be in [0, 1), got %g", *out);
	return WEFT_OK;
}

/* A named shape (model.preset): the GPT config and the transformer's
 * choices, which the section's own keys then override. The Llama shapes
 * are Hugging Face's config.json of Llama 3.2 1B / 3B and Llama 3.1 8B. */
typedef struct preset {
	const char *name;
	weft_gpt_config gpt;
	nn_arch arch;
} preset;

#define LLAMA3_ROPE(f) { .struct_size = sizeof(weft_rope), .scaling = WEFT_ROPE_LLAMA3, \
			 .theta = 500000.0, .factor = (f), .low_freq_factor = 1.0, \
			 .high_freq_factor = 4.0, .original_max_positions = 8192.0 }
#define LLAMA3_ARCH(kv, inner, f, untie) { .norm = NN_NORM_RMSNORM, .norm_eps = 1e-5, \
				     .position = NN_POS_ROPE, .rope = LLAMA3_ROPE(f), \
				     .mlp = NN_MLP_SWIGLU, .intermediate = (inner), \
				     .n_kv_head = (kv), .untied = (untie) }

/* Qwen2.5's: Llama's choices with RoPE theta 1e6 unscaled, RMSNorm eps
 * 1e-6 and a bias on q, k and v alone */
#define QWEN_ROPE { .struct_size = sizeof(weft_rope), .scaling = WEFT_ROPE_PLAIN, \
		    .theta = 1000000.0, .factor = 8.0, .low_freq_factor = 1.0, \
		    .high_freq_factor = 4.0, .original_max_positions = 8192.0 }
#define QWEN_ARCH(kv, inner, untie) { .norm = NN_NORM_RMSNORM, .norm_eps = 1e-6, \
				      .position = NN_POS_ROPE, .rope = QWEN_ROPE, \
				      .mlp = NN_MLP_SWIGLU, .intermediate = (inner), \
				      .n_kv_head = (kv), .untied = (untie), .qkv_bias = 1 }

static const preset presets[] = {
	{ "gpt2", { 12, 12, 768, 50257, 1024, 1, 0.0 }, { 0 } },
	{ "gpt2-medium", { 24, 16, 1024, 50257, 1024, 1, 0.0 }, { 0 } },
	{ "gpt2-large", { 36, 20, 1280, 50257, 1024, 1, 0.0 }, { 0 } },
	{ "gpt2-xl", { 48, 25, 1600, 50257, 1024, 1, 0.0 }, { 0 } },
	/* a tiny Llama 3 for tests and examples: byte-level vocabulary */
	{ "llama3-tiny", { 2, 4, 64, 256, 256, 0, 0.0 }, LLAMA3_ARCH(2, 160, 8.0, 1) },
	{ "llama3-1b", { 16, 32, 2048, 128256, 131072, 0, 0.0 }, LLAMA3_ARCH(8, 8192, 32.0, 0) },
	{ "llama3-3b", { 28, 24, 3072, 128256, 131072, 0, 0.0 }, LLAMA3_ARCH(8, 8192, 32.0, 0) },
	{ "llama3-8b", { 32, 32, 4096, 128256, 131072, 0, 0.0 }, LLAMA3_ARCH(8, 14336, 8.0, 1) },
	/* Qwen2.5 0.5B / 1.5B (Hugging Face's config.json), and a tiny one */
	{ "qwen2.5-tiny", { 2, 4, 64, 256, 256, 0, 0.0 }, QWEN_ARCH(2, 160, 0) },
	{ "qwen2.5-0.5b", { 24, 14, 896, 151936, 32768, 0, 0.0 }, QWEN_ARCH(2, 4864, 0) },
	{ "qwen2.5-1.5b", { 28, 12, 1536, 151936, 32768, 0, 0.0 }, QWEN_ARCH(2, 8960, 0) },
};
#define N_PRESETS (sizeof(presets) / sizeof(presets[0]))

/* model.preset into *gpt_def and *arch (left as they are without one). */
static weft_status preset_from(const weft_cfg *sec, weft_gpt_config *gpt_def, nn_arch *arch)
{
	static const char *names[N_PRESETS + 1];
	int i;
	weft_status st;

	if (!weft_cfg_get(sec, "preset"))
		return WEFT_OK;
	for (size_t k = 0; k < N_PRESETS; k++)
		names[k] = presets[k].name;
	if ((st = weft_cfg_choice(sec, "preset", names, NULL, &i)))
		return st;
	*gpt_def = presets[i].gpt;
	*arch = presets[i].arch;
	return WEFT_OK;
}

/* The transformer's choices, each key defaulting to the preset's value. */
static weft_status arch_from(const weft_cfg *sec, const weft_gpt_config *c, nn_arch *a)
{
	static const char *const norms[] = { "layernorm", "rmsnorm", NULL };
	static const char *const positions[] = { "learned", "rope", NULL };
	static const char *const mlps[] = { "gelu_tanh", "swiglu", "gelu", NULL };
	static const char *const scalings[] = { "none", "llama3", NULL };
	weft_rope *r = &a->rope;
	int norm, pos, mlp, scaling, tied, qkv_bias;
	weft_status st;

	if ((st = weft_cfg_choice(sec, "norm", norms, norms[a->norm], &norm)) ||
	    (st = weft_cfg_float(sec, "norm_eps", a->norm_eps ? a->norm_eps : 1e-5,
				 &a->norm_eps)) ||
	    (st = weft_cfg_choice(sec, "position", positions, positions[a->position], &pos)) ||
	    (st = weft_cfg_choice(sec, "mlp", mlps, mlps[a->mlp], &mlp)) ||
	    (st = get_int(sec, "intermediate_size", a->intermediate ? a->intermediate :
			  (mlp == NN_MLP_SWIGLU ? 0 : 4 * c->n_embd), 0, &a->intermediate)) ||
	    (st = get_int(sec, "n_kv_head", a->n_kv_head ? a->n_kv_head : c->n_head, 1,
			  &a->n_kv_head)) ||
	    (st = weft_cfg_bool(sec, "tie_embeddings", !a->untied, &tied)) ||
	    (st = weft_cfg_bool(sec, "qkv_bias", a->qkv_bias, &qkv_bias)))
		return st;
	a->qkv_bias = qkv_bias && !c->bias; /* with model.bias every Linear has one */
	a->norm = (nn_norm)norm;
	a->position = (nn_position)pos;
	a->mlp = (nn_mlp_kind)mlp;
	if (!(a->norm_eps > 0.0 && a->norm_eps < 1.0))
		return weft_cfg_error(at(sec, "norm_eps"), "must be in (0, 1), got %g",
				      a->norm_eps);
	if (a->mlp == NN_MLP_SWIGLU && a->intermediate < 1)
		return weft_cfg_error(at(sec, "mlp"), "is swiglu, which needs "
				      "model.intermediate_size (the gate's and up's width, e.g. "
				      "8/3 x n_embd rounded up)");
	if (c->n_head % a->n_kv_head)
		return weft_cfg_error(at(sec, "n_kv_head"), "is %lld, which does not divide n_head "
				      "%lld (each key/value head serves n_head / n_kv_head query "
				      "heads)", (long long)a->n_kv_head, (long long)c->n_head);
	if (a->position == NN_POS_ROPE && (c->n_embd / c->n_head) % 2)
		return weft_cfg_error(at(sec, "position"), "is rope, which rotates channel pairs, "
				      "but the head size n_embd / n_head = %lld is odd",
				      (long long)(c->n_embd / c->n_head));
	a->untied = !tied;
	if (r->struct_size == 0) {
		r->struct_size = sizeof(*r);
		r->theta = 10000.0;
		r->factor = 8.0;
		r->low_freq_factor = 1.0;
		r->high_freq_factor = 4.0;
		r->original_max_positions = 8192.0;
	}
	if ((st = weft_cfg_float(sec, "rope_theta", r->theta, &r->theta)) ||
	    (st = weft_cfg_choice(sec, "rope_scaling", scalings, scalings[r->scaling],
				  &scaling)) ||
	    (st = weft_cfg_float(sec, "rope_factor", r->factor, &r->factor)) ||
	    (st = weft_cfg_float(sec, "rope_low_freq_factor", r->low_freq_factor,
				 &r->low_freq_factor)) ||
	    (st = weft_cfg_float(sec, "rope_high_freq_factor", r->high_freq_factor,
				 &r->high_freq_factor)) ||
	    (st = weft_cfg_float(sec, "rope_original_max_positions", r->original_max_positions,
				 &r->original_max_positions)))
		return st;
	r->scaling = scaling;
	if (!(r->theta > 1.0))
		return weft_cfg_error(at(sec, "rope_theta"), "must be > 1, got %g", r->theta);
	if (scaling && !(r->factor >= 1.0 && r->low_freq_factor > 0.0 &&
			 r->high_freq_factor > r->low_freq_factor &&
			 r->original_max_positions >= 1.0))
		return weft_cfg_error(at(sec, "rope_scaling"), "is llama3, which needs rope_factor "
				      ">= 1, 0 < rope_low_freq_factor < rope_high_freq_factor and "
				      "rope_original_max_positions >= 1 (got %g, %g, %g, %g)",
				      r->factor, r->low_freq_factor, r->high_freq_factor,
				      r->original_max_positions);
	/* the GPT-2 defaults stay all zero, so model.class gpt is GPT-2's */
	if (a->intermediate == 4 * c->n_embd && a->mlp != NN_MLP_SWIGLU)
		a->intermediate = 0;
	if (a->n_kv_head == c->n_head)
		a->n_kv_head = 0;
	if (a->norm == NN_NORM_LAYERNORM && (float)a->norm_eps == NN_LN_EPS)
		a->norm_eps = 0.0;
	if (a->position == NN_POS_LEARNED)
		memset(r, 0, sizeof(*r));
	return WEFT_OK;
}

/* `def` holds the defaults: weft's, a preset's, or a Hugging Face
 * checkpoint's shape when init_from names one (so a config need not
 * repeat it). */
static weft_status gpt_from(const weft_cfg *sec, const weft_gpt_config *def, weft_gpt_config *c)
{
	weft_status st;

	if ((st = get_int(sec, "n_layer", def->n_layer, 1, &c->n_layer)) ||
	    (st = get_int(sec, "n_head", def->n_head, 1, &c->n_head)) ||
	    (st = get_int(sec, "n_embd", def->n_embd, 1, &c->n_embd)) ||
	    (st = get_int(sec, "vocab_size", def->vocab_size, 1, &c->vocab_size)) ||
	    (st = get_int(sec, "block_size", def->block_size, 1, &c->block_size)) ||
	    (st = weft_cfg_bool(sec, "bias", def->bias, &c->bias)) ||
	    (st = get_dropout(sec, &c->dropout)))
		return st;
	if (c->n_layer > 100000)
		return weft_cfg_error(at(sec, "n_layer"), "must be <= 100000, got %lld",
				      (long long)c->n_layer);
	if (c->n_embd % c->n_head)
		return weft_cfg_error(at(sec, "n_embd"), "must be divisible by n_head: n_embd %lld "
				      "is not a multiple of n_head %lld (each head gets n_embd / "
				      "n_head channels)", (long long)c->n_embd,
				      (long long)c->n_head);
	return WEFT_OK;
}

static weft_status mlp_from(const weft_cfg *sec, weft_mlp_config *c)
{
	static const char *const acts[] = { "relu", "gelu", NULL };
	const weft_cfg *hidden, *classes, *outf;
	int64_t n_out = 10, n_cls = 10;
	int act;
	weft_status st;

	if ((st = get_int(sec, "in_features", 784, 1, &c->in_features)))
		return st;
	hidden = weft_cfg_get(sec, "hidden");
	if (!hidden || weft_cfg_kind_of(hidden) == WEFT_CFG_NULL) {
		c->n_hidden = 2;
		c->hidden[0] = c->hidden[1] = 256;
	} else if (weft_cfg_kind_of(hidden) != WEFT_CFG_SEQ) {
		return weft_cfg_error(hidden, "must be a list of hidden layer sizes, e.g. [256, 256]");
	} else if (weft_cfg_size(hidden) > WEFT_MLP_MAX_HIDDEN) {
		return weft_cfg_error(hidden, "has %zu hidden layers; at most %d are supported",
				      weft_cfg_size(hidden), WEFT_MLP_MAX_HIDDEN);
	} else {
		c->n_hidden = weft_cfg_size(hidden);
		for (size_t i = 0; i < c->n_hidden; i++) {
			const weft_cfg *item = weft_cfg_at(hidden, i);

			if ((st = weft_cfg_as_int(item, &c->hidden[i])))
				return st;
			if (c->hidden[i] < 1)
				return weft_cfg_error(item, "must be >= 1, got %lld",
						      (long long)c->hidden[i]);
		}
	}
	outf = weft_cfg_get(sec, "out_features");
	classes = weft_cfg_get(sec, "num_classes");
	if ((st = get_int(sec, "out_features", 10, 1, &n_out)) ||
	    (st = get_int(sec, "num_classes", 10, 1, &n_cls)))
		return st;
	if (outf && classes && n_out != n_cls)
		return weft_cfg_error(classes, "is %lld but out_features is %lld; give one of "
				      "them (they name the same thing)", (long long)n_cls,
				      (long long)n_out);
	c->out_features = classes ? n_cls : n_out;
	if ((st = weft_cfg_choice(sec, "activation", acts, "relu", &act)) ||
	    (st = get_dropout(sec, &c->dropout)))
		return st;
	c->activation = act ? WEFT_ACT_GELU : WEFT_ACT_RELU;
	return WEFT_OK;
}

/* model.class: a built-in (gpt, mlp; *cls its index) or a model plugin
 * found in the registry the run uses (*plugin). */
static weft_status class_of(const weft_cfg *sec, const char *const *classes, int *cls,
			    const weft_module_ops **plugin)
{
	const weft_cfg *node = weft_cfg_get(sec, "class");
	weft_registry *reg = weft_registry_active();
	const char *name = NULL;
	char msg[2048];
	weft_status st;

	*plugin = NULL;
	if (node && weft_cfg_kind_of(node) == WEFT_CFG_SCALAR &&
	    weft_cfg_as_str(node, &name) == WEFT_OK && reg &&
	    strcmp(name, "gpt") != 0 && strcmp(name, "mlp") != 0) {
		st = weft_registry_find(reg, WEFT_PLUGIN_MODEL, name, (const void **)plugin, NULL);
		if (st == WEFT_OK)
			return WEFT_OK;
		snprintf(msg, sizeof(msg), "%s", weft_error_last());
		*plugin = NULL;
		/* the built-in classes' message (with its did-you-mean), then
		 * what the plugin search found */
		st = weft_cfg_choice(sec, "class", classes, NULL, cls);
		if (st) {
			char base[2048];

			snprintf(base, sizeof(base), "%s", weft_error_last());
			return weft_error_set(WEFT_ERR_CONFIG, "%s; nor is it a model plugin: %s",
					      base, msg);
		}
		return WEFT_OK;
	}
	return weft_cfg_choice(sec, "class", classes, NULL, cls);
}

weft_status weft_model_from_config(const weft_cfg *sec, const weft_model_options *opt,
				   weft_model **out)
{
	static const char *const classes[] = { "gpt", "mlp", NULL };
	const char *init_from = NULL;
	weft_gpt_config gpt = { 0 };
	weft_gpt_config gpt_def = { .n_layer = 12, .n_head = 12, .n_embd = 768,
				    .vocab_size = 50304, .block_size = 1024, .bias = 1 };
	nn_arch arch = { 0 };
	weft_mlp_config mlp = { 0 };
	const weft_module_ops *plugin = NULL;
	weft_model *m = NULL;
	char where[512];
	int cls;
	weft_status st = WEFT_OK;

	*out = NULL;
	if (!sec)
		return weft_error_set(WEFT_ERR_CONFIG, "the config has no 'model' section; add one, "
				      "e.g. model: {class: mlp, hidden: [256, 256]}");
	if (weft_cfg_kind_of(sec) != WEFT_CFG_MAP)
		return weft_cfg_error(sec, "must be a mapping such as {class: mlp, hidden: [256, "
				      "256]} or {class: gpt, n_layer: 6, n_head: 6, n_embd: 384}");
	/* a preset names a transformer: model.class may be left out */
	if (weft_cfg_get(sec, "preset") && !weft_cfg_get(sec, "class"))
		cls = 0;
	else
		st = class_of(sec, classes, &cls, &plugin);
	if (st)
		return st;
	if (plugin) {
		st = weft_cfg_str(sec, "init_from", NULL, &init_from);
		if (!st)
			st = nn_plugin_model_create(plugin, sec, opt, &m);
		if (st)
			return st;
		goto loaded;
	}
	if ((st = weft_cfg_str(sec, "init_from", NULL, &init_from)))
		return st;
	if (cls == 0 && (st = preset_from(sec, &gpt_def, &arch)))
		return st;
	if (cls == 1 && weft_cfg_get(sec, "preset"))
		return weft_cfg_error(weft_cfg_get(sec, "preset"), "names a transformer, but "
				      "model.class is mlp; drop one of them");
	if (cls == 0 && init_from && nn_hf_is_dir(init_from)) {
		nn_hf_config hf;

		if ((st = nn_hf_config_read(init_from, &hf)))
			return weft_error_wrap(st, "%s: model.init_from",
					       weft_cfg_where(weft_cfg_get(sec, "init_from"), where,
							      sizeof(where)));
		gpt_def = hf.gpt;
		arch = hf.arch;
	}
	st = cls == 0 ? gpt_from(sec, &gpt_def, &gpt) : mlp_from(sec, &mlp);
	if (!st && cls == 0)
		st = arch_from(sec, &gpt, &arch);
	if (st)
		return st;
	st = cls == 0 ? nn_model_create_transformer(&gpt, &arch, opt, &m) :
			weft_model_create_mlp(&mlp, opt, &m);
	if (st)
		return st;
loaded:
	if (init_from && m->build == NN_BUILD_FULL && (st = weft_model_load_safetensors(m, init_from))) {
		weft_error_wrap(st, "%s: model.init_from",
				weft_cfg_where(weft_cfg_get(sec, "init_from"), where, sizeof(where)));
		weft_model_free(m);
		return st;
	}
	*out = m;
	return WEFT_OK;
}

weft_status nn_model_shapes_from_config(const weft_cfg *sec, const weft_model_options *opt,
					weft_model **out)
{
	weft_status st;

	nn_build_mode = NN_BUILD_SHAPES;
	st = weft_model_from_config(sec, opt, out);
	nn_build_mode = NN_BUILD_FULL;
	return st;
}

weft_status nn_model_create_transformer_uninit(const weft_gpt_config *cfg, const nn_arch *arch,
					       const weft_model_options *opt, weft_model **out)
{
	weft_status st;

	nn_build_mode = NN_BUILD_UNINIT;
	st = nn_model_create_transformer(cfg, arch, opt, out);
	nn_build_mode = NN_BUILD_FULL;
	return st;
}

int nn_model_is_shapes_only(const weft_model *m)
{
	return m && m->build == NN_BUILD_SHAPES;
}
