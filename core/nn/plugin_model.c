/* Models written as plugins (weft/trainer.h, kind model): the host owns
 * their parameters like any model's; the plugin declares, initialises and
 * runs them. */
#include <string.h>

#include "nn/nn_impl.h"

/* The plugin's forward, bracketed by the root module's begin/end. */
static weft_status plugin_forward(weft_model *m, weft_ctx *ctx, weft_tensor *x,
				  weft_tensor **out)
{
	weft_module *root = &m->mods[0];
	weft_tensor *in;
	weft_status st;

	st = nn_stage_input(ctx, x, "inputs", &in);
	if (st)
		return st;
	st = weft_module_begin(ctx, root->name, root);
	if (st)
		return st;
	st = m->plugin_ops->forward(m->plugin, ctx, in, out);
	if (st) {
		weft_module_end(ctx, root->name, root);
		return weft_error_wrap(st, "model '%s' forward", m->plugin_ops->head.name);
	}
	return weft_module_end(ctx, root->name, root);
}

static int64_t plugin_ignore_index(const weft_model *m)
{
	return m->plugin_ops->ignore_index ? m->plugin_ops->ignore_index(m->plugin) : -100;
}

static const nn_class_ops plugin_class_ops = {
	.forward = plugin_forward,
	.ignore_index = plugin_ignore_index,
};


weft_status nn_plugin_model_create(const weft_module_ops *ops, const weft_cfg *sec,
				   const weft_model_options *opt, weft_model **out)
{
	weft_model_build b = { .struct_size = sizeof(b) };
	weft_module *root;
	weft_model *m;
	weft_status st;

	*out = NULL;
	if (opt && (opt->stage || opt->tp_size > 1))
		return weft_error_set(WEFT_ERR_UNSUPPORTED,
				      "model '%s' is a plugin: pipeline stages and tensor "
				      "parallelism need the built-in gpt", ops->head.name);
	st = nn_model_alloc(WEFT_MODEL_PLUGIN, &plugin_class_ops, opt, 1, &m);
	if (st)
		return st;
	m->plugin_ops = ops;
	st = nn_module_push(m, -1, ops->head.name, &root, "%s", "");
	if (st)
		goto fail;
	b.params = m->params;
	b.seed = m->opt.seed;
	st = ops->create(sec, &b, &m->plugin);
	if (st)
		goto fail;
	if (weft_params_count(m->params) == 0) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG,
				    "model plugin '%s' declared no parameters in create "
				    "(host->params_add)", ops->head.name);
		goto fail;
	}
	nn_module_close(m, root);
	st = nn_model_finalize(m);
	if (!st && ops->init && m->build == NN_BUILD_FULL)
		st = ops->init(m->plugin, m->opt.seed);
	if (st)
		goto fail;
	*out = m;
	return WEFT_OK;
fail:
	weft_model_free(m);
	return st;
}
