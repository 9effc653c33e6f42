/* The model object: the module tree, accessors, and the task-level calls
 * (forward, loss, eval) shared by every model class. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "tp/tp.h"

/* ---- building ---- */

_Thread_local int nn_build_mode;

weft_status nn_model_alloc(weft_model_class cls, const nn_class_ops *ops,
			   const weft_model_options *opt, size_t cap, weft_model **out)
{
	static const weft_model_options defaults = { .device = { .type = WEFT_DEVICE_CPU } };
	weft_model *m;
	weft_status st;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory creating a model");
	m->cls = cls;
	m->ops = ops;
	m->build = nn_build_mode;
	m->opt = opt ? *opt : defaults;
	m->mods = calloc(cap, sizeof(*m->mods));
	m->cap_mods = cap;
	if (!m->mods) {
		free(m);
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory creating a model");
	}
	st = weft_params_create(m->opt.device, &m->params);
	if (st) {
		weft_model_free(m);
		return st;
	}
	*out = m;
	return WEFT_OK;
}

weft_status nn_module_push(weft_model *m, int32_t parent, const char *type, weft_module **out,
			   const char *fmt, ...)
{
	weft_module *mod;
	char name[512];
	va_list ap;

	*out = NULL;
	if (m->n_mods == m->cap_mods)
		return weft_error_set(WEFT_ERR_INTERNAL, "model: more modules than the %zu planned",
				      m->cap_mods);
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	mod = &m->mods[m->n_mods];
	mod->name = strdup(name);
	if (!mod->name)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory naming module '%s'", name);
	mod->type = type;
	mod->parent = parent;
	mod->depth = parent < 0 ? 0 : m->mods[parent].depth + 1;
	mod->first_param = weft_params_count(m->params);
	m->n_mods++;
	*out = mod;
	return WEFT_OK;
}

void nn_module_close(weft_model *m, weft_module *mod)
{
	mod->n_param_tensors = weft_params_count(m->params) - mod->first_param;
}

weft_status nn_param(weft_model *m, const weft_module *mod, const char *leaf, int32_t ndim,
		     const int64_t *shape, weft_tensor **out)
{
	char name[600];

	if (mod->name[0])
		snprintf(name, sizeof(name), "%s.%s", mod->name, leaf);
	else
		snprintf(name, sizeof(name), "%s", leaf);
	return weft_params_add(m->params, name, WEFT_F32, ndim, shape, out);
}

weft_status nn_model_finalize(weft_model *m)
{
	/* a shapes-only model keeps its parameters unfinalized: declared,
	 * with offsets, and no storage */
	weft_status st = m->build == NN_BUILD_SHAPES ? WEFT_OK :
					  weft_params_finalize(m->params, !m->opt.no_grads);

	if (st)
		return weft_error_wrap(st, "allocating the model's parameters");
	for (size_t i = 0; i < m->n_mods; i++) {
		weft_module *mod = &m->mods[i];

		mod->n_params = 0;
		for (size_t j = 0; j < mod->n_param_tensors; j++)
			mod->n_params += weft_tensor_numel(weft_params_at(m->params,
									  mod->first_param + j));
	}
	return WEFT_OK;
}

void weft_model_free(weft_model *m)
{
	if (!m)
		return;
	if (m->plugin_ops && m->plugin)
		m->plugin_ops->destroy(m->plugin);
	for (size_t i = 0; i < m->n_mods; i++)
		free((char *)m->mods[i].name);
	free(m->mods);
	free(m->blocks);
	free(m->positions);
	free(m->kv_select);
	weft_tp_group_free(m->tp);
	weft_params_free(m->params);
	free(m);
}

/* ---- accessors ---- */

weft_model_class weft_model_get_class(const weft_model *m)
{
	return m->cls;
}

const weft_gpt_config *weft_model_gpt_config(const weft_model *m)
{
	return m->cls == WEFT_MODEL_GPT ? &m->gpt : NULL;
}

const weft_mlp_config *weft_model_mlp_config(const weft_model *m)
{
	return m->cls == WEFT_MODEL_MLP ? &m->mlp : NULL;
}

weft_params *weft_model_params(const weft_model *m)
{
	return m->params;
}

size_t weft_model_module_count(const weft_model *m)
{
	return m->n_mods;
}

const weft_module *weft_model_module_at(const weft_model *m, size_t i)
{
	return i < m->n_mods ? &m->mods[i] : NULL;
}

const weft_module *weft_model_module_find(const weft_model *m, const char *name)
{
	for (size_t i = 0; i < m->n_mods; i++)
		if (!strcmp(m->mods[i].name, name))
			return &m->mods[i];
	return NULL;
}

int64_t weft_model_num_params(const weft_model *m)
{
	return weft_params_numel(m->params, WEFT_F32);
}

int64_t weft_model_ignore_index(const weft_model *m)
{
	return m->ops->ignore_index ? m->ops->ignore_index(m) : -100;
}

double weft_model_flops_per_token(const weft_model *m, int64_t T)
{
	double n = 0;

	if (m->cls != WEFT_MODEL_GPT)
		return 6.0 * (double)weft_model_num_params(m);
	/* parameters a token passes through: every block, ln_f and the head
	 * (wte used as the head's weight); wpe and wte lookups are not FLOPs */
	for (size_t i = 0; i < weft_params_count(m->params); i++) {
		const weft_tensor *p = weft_params_at(m->params, i);

		if (strcmp(p->name, "transformer.wte.weight") &&
		    strcmp(p->name, "transformer.wpe.weight"))
			n += (double)weft_tensor_numel(p);
	}
	if (m->stage & WEFT_STAGE_HEAD)
		n += (double)(m->gpt.vocab_size * m->gpt.n_embd);
	return 6.0 * n + 12.0 * (double)(m->layer_end - m->layer_begin) *
	       (double)m->gpt.n_embd * (double)T;
}

/* ---- forward helpers ---- */

weft_status nn_enter(nn_scope *s, weft_module *mod)
{
	weft_status st;

	if (s->depth == NN_MAX_SCOPE)
		return weft_error_set(WEFT_ERR_INTERNAL, "model forward: modules nest deeper than "
				      "%d", NN_MAX_SCOPE);
	st = weft_module_begin(s->ctx, mod->name, mod);
	if (!st)
		s->open[s->depth++] = mod;
	return st;
}

weft_status nn_leave(nn_scope *s)
{
	weft_module *mod = s->open[--s->depth];

	return weft_module_end(s->ctx, mod->name, mod);
}

void nn_unwind(nn_scope *s)
{
	char saved[1024];
	weft_status st = weft_error_last_status();

	snprintf(saved, sizeof(saved), "%s", weft_error_last());
	while (s->depth > 0)
		(void)nn_leave(s);
	weft_error_set(st, "%s", saved);
}

weft_status nn_stage_input(weft_ctx *ctx, weft_tensor *x, const char *role, weft_tensor **out)
{
	weft_tensor *t;
	weft_status st;

	*out = NULL;
	if (!x)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "model: the %s tensor is NULL", role);
	if (weft_device_equal(x->device, weft_ctx_device(ctx))) {
		*out = x;
		return WEFT_OK;
	}
	st = weft_ctx_tensor(ctx, role, (weft_dtype)x->dtype, x->ndim, x->shape, &t);
	if (!st)
		st = weft_tensor_copy(t, x);
	if (st)
		return weft_error_wrap(st, "model: moving the %s to the device", role);
	*out = t;
	return WEFT_OK;
}

weft_status nn_linear(nn_scope *s, const nn_affine *l, weft_tensor *x, weft_tensor **out)
{
	weft_status st = nn_enter(s, l->mod);

	if (!st)
		st = weft_op_linear(s->ctx, x, l->w, l->b, out);
	if (!st)
		st = nn_leave(s);
	return st;
}

weft_status nn_layernorm(nn_scope *s, const nn_affine *l, weft_tensor *x, weft_tensor **out)
{
	weft_status st = nn_enter(s, l->mod);

	if (!st)
		st = weft_op_layernorm(s->ctx, x, l->w, l->b, NN_LN_EPS, out);
	if (!st)
		st = nn_leave(s);
	return st;
}

/* ---- task-level calls ---- */

static int vocab_split(const weft_model *m)
{
	return m->ops->vocab_split && m->ops->vocab_split(m);
}

/* Whether weft_model_loss takes the head and its loss in one op: with
 * gradients on (training needs no logits; evaluation keeps them), 16-bit
 * activations (where the op pads the logits' rows), a class that has it,
 * the head on this stage and no tensor parallelism (no vocabulary split). */
static int head_loss_fused(const weft_model *m, weft_ctx *ctx)
{
	return m->ops->forward_loss && weft_ctx_grad_enabled(ctx) &&
	       weft_ctx_lowp_activations(ctx) != WEFT_F32 && m->cls == WEFT_MODEL_GPT &&
	       (m->stage & WEFT_STAGE_HEAD) && !m->tp;
}

/* What every forward of m on ctx needs: parameter storage, the same
 * device. */
static weft_status forward_check(const weft_model *m, weft_ctx *ctx)
{
	char a[32], b[32];

	if (m->build == NN_BUILD_SHAPES)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "model forward: this model was built "
				      "as shapes only (for a plan: names and sizes, no parameter "
				      "storage) and cannot run; build it with "
				      "weft_model_from_config to run it");
	if (!weft_device_equal(weft_ctx_device(ctx), m->opt.device))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "model forward: the model is on %s but "
				      "the context runs on %s; make the context on the model's "
				      "device", weft_device_str(m->opt.device, a, sizeof(a)),
				      weft_device_str(weft_ctx_device(ctx), b, sizeof(b)));
	return WEFT_OK;
}

weft_status weft_model_forward(weft_model *m, weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "model forward: out is NULL");
	*out = NULL;
	if ((st = forward_check(m, ctx)))
		return st;
	return m->ops->forward(m, ctx, x, out);
}

weft_status weft_model_loss(weft_model *m, weft_ctx *ctx, const weft_batch *batch,
			    weft_model_output *out)
{
	weft_tensor *logits, *targets, *loss;
	weft_status st;

	if (!out || !batch)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "model loss: batch or out is NULL");
	out->loss = out->logits = NULL;
	if (m->cls == WEFT_MODEL_GPT && !(m->stage & WEFT_STAGE_HEAD))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "model loss: this pipeline stage has no "
				      "head (blocks %lld..%lld); only the last stage computes the "
				      "loss", (long long)m->layer_begin, (long long)m->layer_end - 1);
	if (m->cls == WEFT_MODEL_PLUGIN && m->plugin_ops->training_step &&
	    weft_ctx_grad_enabled(ctx)) {
		weft_tensor *x;

		/* Lightning's training_step gives the loss itself (no logits);
		 * evaluation takes the forward + cross-entropy path below */
		if ((st = nn_stage_input(ctx, batch->inputs, "inputs", &x)) ||
		    (st = nn_stage_input(ctx, batch->targets, "targets", &targets)))
			return st;
		st = m->plugin_ops->training_step(m->plugin, ctx, x, targets, &loss);
		if (st)
			return weft_error_wrap(st, "model '%s' training_step",
					       m->plugin_ops->head.name);
		out->loss = loss;
		return WEFT_OK;
	}
	if (head_loss_fused(m, ctx)) {
		/* the head's logits stay inside the op (training needs only the loss) */
		if ((st = forward_check(m, ctx)) ||
		    (st = nn_stage_input(ctx, batch->targets, "targets", &targets)) ||
		    (st = m->ops->forward_loss(m, ctx, batch->inputs, targets,
					       weft_model_ignore_index(m), &loss)))
			return st;
		out->loss = loss;
		return WEFT_OK;
	}
	if ((st = weft_model_forward(m, ctx, batch->inputs, &logits)) ||
	    (st = nn_stage_input(ctx, batch->targets, "targets", &targets)))
		return st;
	st = vocab_split(m) ? weft_tp_vocab_cross_entropy(ctx, m->tp, logits, targets,
							      weft_model_ignore_index(m), &loss) :
				  weft_op_cross_entropy(ctx, logits, targets,
							weft_model_ignore_index(m), &loss);
	if (st)
		return weft_error_wrap(st, "model loss");
	out->loss = loss;
	out->logits = logits;
	return WEFT_OK;
}

weft_status weft_model_eval(weft_model *m, weft_ctx *ctx, const weft_batch *batch,
			    weft_eval_result *out)
{
	int grad = weft_ctx_set_grad_enabled(ctx, 0);
	int training = weft_ctx_set_training(ctx, 0);
	weft_model_output o;
	weft_tensor *targets;
	float loss;
	weft_status st;

	memset(out, 0, sizeof(*out));
	st = weft_model_loss(m, ctx, batch, &o);
	if (!st)
		st = weft_tensor_copy_to_host(o.loss, &loss, sizeof(loss));
	if (!st)
		st = nn_stage_input(ctx, batch->targets, "targets", &targets);
	if (!st)
		st = vocab_split(m) ?
			     weft_tp_vocab_accuracy(ctx, m->tp, o.logits, targets,
						    weft_model_ignore_index(m), &out->correct,
						    &out->counted) :
			     weft_op_accuracy(ctx, o.logits, targets, weft_model_ignore_index(m),
					      &out->correct, &out->counted);
	if (!st)
		out->loss = loss;
	weft_ctx_set_grad_enabled(ctx, grad);
	weft_ctx_set_training(ctx, training);
	return st;
}
