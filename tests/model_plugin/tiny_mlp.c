/* Test fixture (never installed): a model plugin "tiny_mlp", one hidden
 * layer written with the host's ops. Its parameters are named, shaped and
 * initialised exactly as the built-in mlp's with one hidden layer, so the
 * two must train bit-identically: the test compares them. */
#include <math.h>
#include <stdlib.h>

#include "weft/autograd.h"
#include "weft/tensor.h"
#include "weft/trainer.h"

static const weft_host *host;

typedef struct tiny {
	int64_t in, hidden, out;
	weft_tensor *w0, *b0, *w1, *b1;
} tiny;

static weft_status tiny_create(const weft_cfg *sec, const weft_model_build *b, void **out)
{
	tiny *m = calloc(1, sizeof(*m));
	weft_status st;

	if (!m)
		return host->error_set(WEFT_ERR_NOMEM, "tiny_mlp: out of memory");
	st = host->cfg_int(sec, "in_features", 784, &m->in);
	if (!st)
		st = host->cfg_int(sec, "hidden", 16, &m->hidden);
	if (!st)
		st = host->cfg_int(sec, "out_features", 10, &m->out);
	if (!st && m->hidden < 1)
		st = host->cfg_error(host->cfg_get(sec, "hidden"), "must be >= 1, got %lld",
				     (long long)m->hidden);
	if (!st)
		st = host->params_add(b->params, "layers.0.weight", WEFT_F32, 2,
				      (int64_t[]){ m->hidden, m->in }, &m->w0);
	if (!st)
		st = host->params_add(b->params, "layers.0.bias", WEFT_F32, 1,
				      (int64_t[]){ m->hidden }, &m->b0);
	if (!st)
		st = host->params_add(b->params, "layers.1.weight", WEFT_F32, 2,
				      (int64_t[]){ m->out, m->hidden }, &m->w1);
	if (!st)
		st = host->params_add(b->params, "layers.1.bias", WEFT_F32, 1,
				      (int64_t[]){ m->out }, &m->b1);
	if (st) {
		free(m);
		return st;
	}
	*out = m;
	return WEFT_OK;
}

static void tiny_destroy(void *p)
{
	free(p);
}

/* nn.Linear's default: U(+-1/sqrt(fan_in)) for weight and bias. */
static weft_status tiny_init(void *p, uint64_t seed)
{
	tiny *m = p;
	float b0 = 1.0f / sqrtf((float)m->in), b1 = 1.0f / sqrtf((float)m->hidden);
	weft_status st = host->param_init_uniform(m->w0, seed, b0);

	if (!st)
		st = host->param_init_uniform(m->b0, seed, b0);
	if (!st)
		st = host->param_init_uniform(m->w1, seed, b1);
	if (!st)
		st = host->param_init_uniform(m->b1, seed, b1);
	return st;
}

static weft_status tiny_forward(void *p, weft_ctx *ctx, weft_tensor *x, weft_tensor **logits)
{
	tiny *m = p;
	weft_tensor *h = x;
	weft_status st = WEFT_OK;

	if (x->ndim != 2)
		st = host->op_reshape(ctx, x, 2, (int64_t[]){ x->shape[0], m->in }, &h);
	if (!st)
		st = host->op_linear(ctx, h, m->w0, m->b0, &h);
	if (!st)
		st = host->op_relu(ctx, h, &h);
	if (!st)
		st = host->op_linear(ctx, h, m->w1, m->b1, &h);
	if (!st)
		*logits = h;
	return st;
}

static const weft_module_ops tiny_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_module_ops, "tiny_mlp"),
	.create = tiny_create,
	.destroy = tiny_destroy,
	.init = tiny_init,
	.forward = tiny_forward,
};

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_MODEL, .vtable = &tiny_ops },
};

WEFT_PLUGIN_NAMES("model:tiny_mlp");

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "test model"),
	.count = 1,
	.items = items,
};

WEFT_PLUGIN_ENTRY(h)
{
	host = h;
	return &desc;
}
