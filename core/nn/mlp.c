/* The MLP classifier: Linear layers in a ModuleList ("layers.<i>"),
 * an activation and dropout after every hidden layer, PyTorch's default
 * nn.Linear initialisation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_impl.h"

weft_status nn_mlp_check(const weft_mlp_config *c)
{
	if (c->in_features < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "mlp: in_features is %lld; it must be "
				      ">= 1", (long long)c->in_features);
	if (c->n_hidden > WEFT_MLP_MAX_HIDDEN)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "mlp: %zu hidden layers; at most %d",
				      c->n_hidden, WEFT_MLP_MAX_HIDDEN);
	for (size_t i = 0; i < c->n_hidden; i++)
		if (c->hidden[i] < 1)
			return weft_error_set(WEFT_ERR_INVALID_ARG, "mlp: hidden[%zu] is %lld; every "
					      "hidden size must be >= 1", i,
					      (long long)c->hidden[i]);
	if (c->out_features < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "mlp: out_features is %lld; it must be "
				      ">= 1", (long long)c->out_features);
	if (c->activation != WEFT_ACT_RELU && c->activation != WEFT_ACT_GELU)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "mlp: unknown activation %d (relu or "
				      "gelu)", (int)c->activation);
	if (!(c->dropout >= 0.0 && c->dropout < 1.0))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "mlp: dropout is %g; it must be in "
				      "[0, 1)", c->dropout);
	return WEFT_OK;
}

static weft_status mlp_forward(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out);

static const nn_class_ops mlp_ops = {
	.forward = mlp_forward,
};

weft_status weft_model_create_mlp(const weft_mlp_config *cfg, const weft_model_options *opt,
				  weft_model **out)
{
	size_t n_lin;
	weft_module *root, *list;
	weft_model *m;
	weft_status st;

	*out = NULL;
	if ((st = nn_mlp_check(cfg)))
		return st;
	if (opt && opt->stage)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "mlp: pipeline stages are for GPT "
				      "models only");
	n_lin = cfg->n_hidden + 1;
	if ((st = nn_model_alloc(WEFT_MODEL_MLP, &mlp_ops, opt, 2 + n_lin, &m)))
		return st;
	m->mlp = *cfg;
	if ((st = nn_module_push(m, -1, "MLP", &root, "%s", "")) ||
	    (st = nn_module_push(m, 0, "ModuleList", &list, "layers")))
		goto out_free;
	for (size_t i = 0; i < n_lin; i++) {
		int64_t in_f = i ? cfg->hidden[i - 1] : cfg->in_features;
		int64_t out_f = i < cfg->n_hidden ? cfg->hidden[i] : cfg->out_features;
		int64_t wshape[2] = { out_f, in_f };
		nn_affine *l = &m->layers[i];

		if ((st = nn_module_push(m, 1, "Linear", &l->mod, "layers.%zu", i)) ||
		    (st = nn_param(m, l->mod, "weight", 2, wshape, &l->w)) ||
		    (st = nn_param(m, l->mod, "bias", 1, &out_f, &l->b)))
			goto out_free;
		nn_module_close(m, l->mod);
	}
	nn_module_close(m, list);
	nn_module_close(m, root);
	if ((st = nn_model_finalize(m)))
		goto out_free;
	/* nn.Linear.reset_parameters: kaiming_uniform(a = sqrt(5)) gives a
	 * bound of 1 / sqrt(fan_in) for the weight, and the bias uses the same */
	for (size_t i = 0; i < n_lin && !st && m->build == NN_BUILD_FULL; i++) {
		float bound = 1.0f / sqrtf((float)m->layers[i].w->shape[1]);

		st = nn_init_uniform(m->layers[i].w, m->opt.seed, bound);
		if (!st)
			st = nn_init_uniform(m->layers[i].b, m->opt.seed, bound);
	}
	if (st)
		goto out_free;
	*out = m;
	return WEFT_OK;
out_free:
	weft_model_free(m);
	return st;
}

static weft_status mlp_forward(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	const weft_mlp_config *c = &m->mlp;
	nn_scope s = { .ctx = ctx };
	int64_t shape[2];
	weft_tensor *h;
	char sh[160];
	weft_status st;

	if ((st = nn_stage_input(ctx, x, "input", &h)))
		return st;
	if (h->ndim < 1 || h->dtype != WEFT_F32 || !h->shape[0] ||
	    weft_tensor_numel(h) != h->shape[0] * c->in_features)
		return weft_error_set(WEFT_ERR_SHAPE, "mlp forward: the input %s %s must be F32 "
				      "(batch, ...) with %lld features per sample (in_features)",
				      weft_shape_str(h, sh, sizeof(sh)),
				      weft_dtype_name((weft_dtype)h->dtype),
				      (long long)c->in_features);
	shape[0] = h->shape[0];
	shape[1] = c->in_features;
	if (h->ndim != 2 && (st = weft_op_reshape(ctx, h, 2, shape, &h)))
		return st;
	if ((st = nn_enter(&s, &m->mods[0])))
		goto out_unwind;
	for (size_t i = 0; i <= c->n_hidden; i++) {
		if ((st = nn_linear(&s, &m->layers[i], h, &h)))
			goto out_unwind;
		if (i == c->n_hidden)
			break;
		st = c->activation == WEFT_ACT_GELU ? weft_op_gelu(ctx, h, &h) :
						      weft_op_relu(ctx, h, &h);
		if (st || (st = weft_op_dropout(ctx, h, (float)c->dropout, &h)))
			goto out_unwind;
	}
	if ((st = nn_leave(&s)))
		goto out_unwind;
	*out = h;
	return WEFT_OK;
out_unwind:
	nn_unwind(&s);
	return st;
}
