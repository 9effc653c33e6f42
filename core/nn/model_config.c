/* Building a model from the config's `model:` section, with range checks
 * reported at the value's file:line:col. */
#include <string.h>

#include "nn/hf.h"
#include "nn/nn_impl.h"
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

/* `def` holds the defaults: weft's, or a Hugging Face checkpoint's shape
 * when init_from names one (so a config need not repeat it). */
static weft_status gpt_from(const weft_cfg *sec, const weft_gpt_config *def, weft_gpt_config *c)
{
	weft_status st;

	if ((st = get_int(sec, "n_layer", def->n_layer, 1, &c->n_layer)) ||
	    (st = get_int(sec, "n_head", def->n_head, 1, &c->n_head)) ||
	    (st = get_int(sec, "n_embd", def->n_embd, 1, &c->n_embd)) ||
	    (st = get_int(sec, "vocab_size", def->vocab_size, 1, &c->vocab_size)) ||
	    (st = get_int(sec, "block_size", def->block_size, 1, &c->block_size)) ||
	    (st = weft_cfg_bool(sec, "bias", 1, &c->bias)) || (st = get_dropout(sec, &c->dropout)))
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
				    .vocab_size = 50304, .block_size = 1024 };
	weft_mlp_config mlp = { 0 };
	const weft_module_ops *plugin = NULL;
	weft_model *m = NULL;
	char where[512];
	int cls;
	weft_status st;

	*out = NULL;
	if (!sec)
		return weft_error_set(WEFT_ERR_CONFIG, "the config has no 'model' section; add one, "
				      "e.g. model: {class: mlp, hidden: [256, 256]}");
	if (weft_cfg_kind_of(sec) != WEFT_CFG_MAP)
		return weft_cfg_error(sec, "must be a mapping such as {class: mlp, hidden: [256, "
				      "256]} or {class: gpt, n_layer: 6, n_head: 6, n_embd: 384}");
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
	if (cls == 0 && init_from && nn_hf_is_dir(init_from)) {
		nn_hf_config hf;

		if ((st = nn_hf_config_read(init_from, &hf)))
			return weft_error_wrap(st, "%s: model.init_from",
					       weft_cfg_where(weft_cfg_get(sec, "init_from"), where,
							      sizeof(where)));
		gpt_def = hf.gpt;
	}
	st = cls == 0 ? gpt_from(sec, &gpt_def, &gpt) : mlp_from(sec, &mlp);
	if (st)
		return st;
	st = cls == 0 ? weft_model_create_gpt(&gpt, opt, &m) : weft_model_create_mlp(&mlp, opt, &m);
	if (st)
		return st;
loaded:
	if (init_from && (st = weft_model_load_safetensors(m, init_from))) {
		weft_error_wrap(st, "%s: model.init_from",
				weft_cfg_where(weft_cfg_get(sec, "init_from"), where, sizeof(where)));
		weft_model_free(m);
		return st;
	}
	*out = m;
	return WEFT_OK;
}
