/* The model object: nanoGPT's parameter names, shapes and order, the
 * module tree, module hooks in forward and backward, deterministic
 * initialisation with GPT-2's / PyTorch's statistics, pipeline stages that
 * reproduce the whole model, dropout, and input errors. */
#include <math.h>

#include "nn_test_util.h"

static const weft_gpt_config fixture_gpt = { .n_layer = 2, .n_head = 4, .n_embd = 32,
					     .vocab_size = 64, .block_size = 16, .bias = 1 };

/* Names, shapes and order equal torch's named_parameters(): the golden
 * file's grad.* entries are written in that order. */
static void test_names(void)
{
	char path[1024], line[512];
	weft_model *m = fixture_model("gpt", NULL);
	weft_params *ps = weft_model_params(m);
	weft_st_file *g;
	size_t k = 0;
	FILE *fp;

	WT_OK(weft_st_open(fixture("gpt_golden.safetensors", path, sizeof(path)), &g));
	for (size_t i = 0; i < g->count; i++) {
		const weft_st_tensor *t = &g->tensors[i];
		const weft_tensor *p;

		if (strncmp(t->name, "grad.", 5))
			continue;
		p = weft_params_at(ps, k++);
		WT_REQUIRE(p != NULL);
		WT_CHECK(!strcmp(p->name, t->name + 5));
		WT_CHECK(p->ndim == t->ndim && !memcmp(p->shape, t->shape, sizeof(int64_t) * (size_t)p->ndim));
	}
	WT_CHECK(k == weft_params_count(ps) && k == 4 + 12 * 2);
	WT_CHECK(!strcmp(weft_params_at(ps, 4)->name, "transformer.h.0.attn.c_attn.weight"));
	WT_CHECK(weft_params_at(ps, 4)->shape[0] == 96 && weft_params_at(ps, 4)->shape[1] == 32);
	weft_st_close(g);
	weft_model_free(m);

	/* bias: false drops every .bias, as nanoGPT does */
	{
		weft_gpt_config c = fixture_gpt;

		c.bias = 0;
		WT_OK(weft_model_create_gpt(&c, NULL, &m));
	}
	ps = weft_model_params(m);
	fp = fopen(fixture("gpt_nobias_names.txt", path, sizeof(path)), "r");
	WT_REQUIRE(fp != NULL);
	k = 0;
	while (fgets(line, sizeof(line), fp)) {
		char name[256];
		long long d0 = 0, d1 = 0;
		int n = sscanf(line, "%255s %lld %lld", name, &d0, &d1);
		const weft_tensor *p = weft_params_at(ps, k++);

		WT_REQUIRE(p != NULL);
		WT_CHECK(!strcmp(p->name, name));
		WT_CHECK(p->ndim == n - 1 && p->shape[0] == d0 && (n < 3 || p->shape[1] == d1));
	}
	fclose(fp);
	WT_CHECK(k == weft_params_count(ps));
	weft_model_free(m);
}

static void test_tree(void)
{
	weft_model *m;
	const weft_module *root, *attn, *blk, *head;
	weft_params *ps;
	int64_t C = 32;

	WT_OK(weft_model_create_gpt(&fixture_gpt, NULL, &m));
	ps = weft_model_params(m);
	WT_CHECK(weft_model_module_count(m) == 7 + 9 * 2);
	root = weft_model_module_at(m, 0);
	WT_CHECK(!strcmp(root->name, "") && !strcmp(root->type, "GPT") && root->parent == -1);
	WT_CHECK(root->n_params == weft_model_num_params(m));
	WT_CHECK(weft_model_num_params(m) == weft_params_numel(ps, WEFT_F32));
	blk = weft_model_module_find(m, "transformer.h.1");
	attn = weft_model_module_find(m, "transformer.h.1.attn");
	WT_REQUIRE(blk && attn);
	WT_CHECK(!strcmp(blk->type, "Block") && !strcmp(attn->type, "CausalSelfAttention"));
	WT_CHECK(weft_model_module_at(m, (size_t)attn->parent) == blk);
	WT_CHECK(blk->n_params == 12 * C * C + 13 * C);
	WT_CHECK(!strcmp(weft_model_module_find(m, "transformer.h.0.mlp")->type, "MLP"));
	WT_CHECK(!strcmp(weft_model_module_find(m, "transformer.ln_f")->type, "LayerNorm"));
	WT_CHECK(!strcmp(weft_model_module_find(m, "transformer.wte")->type, "Embedding"));
	head = weft_model_module_find(m, "lm_head");
	WT_REQUIRE(head != NULL);
	WT_CHECK(head->n_params == 0 && head->tied_to && !strcmp(head->tied_to, "transformer.wte.weight"));
	WT_CHECK(weft_model_module_find(m, "nope") == NULL);
	/* every module's parameters are a contiguous range named under it, and
	 * lie inside its parent's range */
	for (size_t i = 0; i < weft_model_module_count(m); i++) {
		const weft_module *mod = weft_model_module_at(m, i);
		size_t len = strlen(mod->name);

		size_t at = 0;

		for (size_t j = 0; j < mod->n_param_tensors; j++) {
			const weft_tensor *p = weft_params_at(ps, mod->first_param + j);
			const weft_tensor *p0 = weft_params_at(ps, mod->first_param);

			WT_CHECK(!len || (!strncmp(p->name, mod->name, len) && p->name[len] == '.'));
			WT_CHECK((char *)p->data == (char *)p0->data + at); /* no gaps */
			at += weft_tensor_nbytes(p);
		}
		if (mod->parent >= 0) {
			const weft_module *par = weft_model_module_at(m, (size_t)mod->parent);

			WT_CHECK(mod->depth == par->depth + 1);
			WT_CHECK(!mod->n_param_tensors || (mod->first_param >= par->first_param &&
				 mod->first_param + mod->n_param_tensors <=
				 par->first_param + par->n_param_tensors));
		}
	}
	/* 6 N + 12 L C T with N = parameters a token passes through */
	{
		double N = (double)(weft_model_num_params(m) - 64 * 32 - 16 * 32 + 64 * 32);

		WT_CLOSE(weft_model_flops_per_token(m, 16), 6 * N + 12.0 * 2 * 32 * 16, 1e-12, 0);
	}
	weft_model_free(m);
}

typedef struct hook_log {
	int n_fwd, n_bwd_begin, n_bwd_end;
	const void *first_ptr;
	char first_names[4][64];
} hook_log;

static weft_status on_module(weft_ctx *ctx, const weft_hook_event *ev, void *user)
{
	hook_log *h = user;

	(void)ctx;
	if (ev->kind == WEFT_HOOK_MODULE_FORWARD_BEGIN) {
		if (h->n_fwd < 4)
			snprintf(h->first_names[h->n_fwd], 64, "%s", ev->module);
		if (!h->n_fwd)
			h->first_ptr = ev->module_ptr;
		h->n_fwd++;
	} else if (ev->kind == WEFT_HOOK_MODULE_BACKWARD_BEGIN) {
		h->n_bwd_begin++;
	} else {
		h->n_bwd_end++;
	}
	return WEFT_OK;
}

static void test_hooks(void)
{
	hook_log h = { 0 };
	weft_model *m = fixture_model("gpt", NULL);
	weft_ctx_options copt = { 0 };
	weft_ctx *ctx;
	weft_tensor *ids, *tg;
	weft_model_output o;
	int64_t shape[2] = { 2, 8 };
	int expect = 5 + 9 * 2; /* GPT, wte, wpe, ln_f, lm_head; 9 per block */

	WT_OK(weft_ctx_create(&copt, &ctx));
	WT_OK(weft_ctx_add_hook(ctx, WEFT_HOOK_MODULE_FORWARD_BEGIN, on_module, &h, NULL));
	WT_OK(weft_ctx_add_hook(ctx, WEFT_HOOK_MODULE_BACKWARD_BEGIN, on_module, &h, NULL));
	WT_OK(weft_ctx_add_hook(ctx, WEFT_HOOK_MODULE_BACKWARD_END, on_module, &h, NULL));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I64, 2, shape, &ids));
	WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 2, shape, &tg));
	WT_OK(weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &o));
	WT_CHECK(h.n_fwd == expect);
	WT_CHECK(h.first_ptr == weft_model_module_at(m, 0));
	WT_CHECK(!strcmp(h.first_names[0], "") && !strcmp(h.first_names[1], "transformer.wte") &&
		 !strcmp(h.first_names[2], "transformer.wpe") &&
		 !strcmp(h.first_names[3], "transformer.h.0"));
	WT_OK(weft_backward(ctx, o.loss));
	WT_CHECK(h.n_bwd_begin == expect && h.n_bwd_end == expect);
	weft_ctx_free(ctx);
	weft_model_free(m);
}

static void moments(const weft_tensor *t, double *mean, double *sd, double *absmax)
{
	int64_t n = weft_tensor_numel(t);
	const float *v = t->data;
	double s = 0, s2 = 0, mx = 0;

	for (int64_t i = 0; i < n; i++) {
		s += v[i];
		s2 += (double)v[i] * v[i];
		mx = fmax(mx, fabs(v[i]));
	}
	*mean = s / (double)n;
	*sd = sqrt(s2 / (double)n - *mean * *mean);
	*absmax = mx;
}

/* Statistics bounds are ~4 standard errors: for n samples the sample sd
 * has relative error 1/sqrt(2n) (n >= 2048: < 1.6%, bound 7%), the mean
 * sd/sqrt(n). A wrong scale (0.02 vs 0.01) or a constant fails. */
static void test_init(void)
{
	weft_model_options o1 = { .seed = 11 }, o2 = { .seed = 12 };
	weft_model *a, *b, *c;
	weft_params *pa;
	double mean, sd, mx;
	weft_mlp_config mc = { .in_features = 300, .hidden = { 64 }, .n_hidden = 1,
			       .out_features = 10 };

	WT_OK(weft_model_create_gpt(&fixture_gpt, &o1, &a));
	WT_OK(weft_model_create_gpt(&fixture_gpt, &o1, &b));
	WT_OK(weft_model_create_gpt(&fixture_gpt, &o2, &c));
	pa = weft_model_params(a);
	WT_CHECK(!memcmp(weft_params_at(pa, 0)->data, weft_params_at(weft_model_params(b), 0)->data,
			 (size_t)weft_params_numel(pa, WEFT_F32) * 4));
	WT_CHECK(memcmp(weft_params_at(pa, 0)->data, weft_params_at(weft_model_params(c), 0)->data,
			(size_t)weft_params_numel(pa, WEFT_F32) * 4));
	moments(weft_params_find(pa, "transformer.wte.weight"), &mean, &sd, &mx);
	WT_CLOSE(sd, 0.02, 0.07, 0);
	WT_CHECK(fabs(mean) < 4 * 0.02 / sqrt(2048.0));
	moments(weft_params_find(pa, "transformer.h.1.mlp.c_fc.weight"), &mean, &sd, &mx);
	WT_CLOSE(sd, 0.02, 0.07, 0);
	moments(weft_params_find(pa, "transformer.h.1.mlp.c_proj.weight"), &mean, &sd, &mx);
	WT_CLOSE(sd, 0.02 / sqrt(4.0), 0.07, 0);
	moments(weft_params_find(pa, "transformer.h.0.ln_1.weight"), &mean, &sd, &mx);
	WT_CHECK(mean == 1.0 && sd == 0.0);
	moments(weft_params_find(pa, "transformer.h.0.attn.c_attn.bias"), &mean, &sd, &mx);
	WT_CHECK(mx == 0.0);
	weft_model_free(a);
	weft_model_free(b);
	weft_model_free(c);

	/* MLP: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias; a
	 * uniform's sd is bound / sqrt(3) */
	WT_OK(weft_model_create_mlp(&mc, &o1, &a));
	pa = weft_model_params(a);
	moments(weft_params_find(pa, "layers.0.weight"), &mean, &sd, &mx);
	WT_CHECK(mx <= 1.0 / sqrt(300.0) && mx > 0.99 / sqrt(300.0));
	WT_CLOSE(sd, 1.0 / sqrt(300.0) / sqrt(3.0), 0.07, 0);
	moments(weft_params_find(pa, "layers.1.bias"), &mean, &sd, &mx);
	WT_CHECK(mx <= 1.0 / sqrt(64.0) && mx > 0.5 / sqrt(64.0));
	weft_model_free(a);
}

static void copy_by_name(weft_model *dst, const weft_model *src)
{
	weft_params *pd = weft_model_params(dst);

	for (size_t i = 0; i < weft_params_count(pd); i++) {
		weft_tensor *p = weft_params_at(pd, i);

		WT_OK(weft_tensor_copy(p, weft_params_find(weft_model_params(src), p->name)));
	}
}

/* Two pipeline stages, each in its own context, joined the way a
 * pipeline strategy joins them (hidden state forward, its gradient
 * backward), give the whole model's loss and gradients; the two copies of
 * wte get gradients that sum to the whole model's. Tolerance 1e-6
 * relative: the same ops in the same order, only split. */
static void test_stages(void)
{
	char path[1024];
	weft_model *full = fixture_model("gpt", NULL), *s0, *s1, *w_bad;
	weft_model_options o0 = { .seed = 3, .stage = WEFT_STAGE_EMBED, .layer_begin = 0,
				  .layer_end = 1 };
	weft_model_options o1 = { .seed = 3, .stage = WEFT_STAGE_HEAD, .layer_begin = 1 };
	weft_ctx_options copt = { 0 };
	weft_ctx *c0, *c1, *cf;
	weft_st_file *g;
	weft_tensor *x, *tg, *h, *recv;
	weft_model_output of, o;
	float lf, ls;
	weft_params *pf;

	WT_OK(weft_model_create_gpt(&fixture_gpt, &o0, &s0));
	WT_OK(weft_model_create_gpt(&fixture_gpt, &o1, &s1));
	WT_CHECK(weft_model_module_find(s0, "transformer.h.1") == NULL);
	WT_CHECK(weft_model_module_find(s1, "transformer.h.0") == NULL);
	WT_CHECK(weft_params_find(weft_model_params(s1), "transformer.h.1.ln_1.weight") != NULL);
	WT_CHECK(weft_params_find(weft_model_params(s1), "transformer.wpe.weight") == NULL);
	WT_CHECK(weft_params_count(weft_model_params(s0)) + weft_params_count(weft_model_params(s1)) ==
		 weft_params_count(weft_model_params(full)) + 1); /* + the head's wte copy */
	/* same seed, same name: same initial values in the stage and a whole model */
	{
		weft_model *w;
		weft_model_options ow = { .seed = 3 };
		const char *n = "transformer.h.1.attn.c_attn.weight";

		WT_OK(weft_model_create_gpt(&fixture_gpt, &ow, &w));
		WT_CHECK(!memcmp(weft_params_find(weft_model_params(w), n)->data,
				 weft_params_find(weft_model_params(s1), n)->data, 96 * 32 * 4));
		weft_model_free(w);
	}
	copy_by_name(s0, full);
	copy_by_name(s1, full);

	WT_OK(weft_st_open(fixture("gpt_golden.safetensors", path, sizeof(path)), &g));
	x = golden_tensor(g, "x");
	tg = golden_tensor(g, "targets");
	WT_OK(weft_ctx_create(&copt, &cf));
	WT_OK(weft_ctx_create(&copt, &c0));
	WT_OK(weft_ctx_create(&copt, &c1));
	weft_ctx_step_begin(cf);
	weft_ctx_step_begin(c0);
	weft_ctx_step_begin(c1);
	WT_OK(weft_model_loss(full, cf, &(weft_batch){ .inputs = x, .targets = tg }, &of));
	WT_OK(weft_backward(cf, of.loss));

	WT_FAILS(weft_model_loss(s0, c0, &(weft_batch){ .inputs = x, .targets = tg }, &o),
		 WEFT_ERR_INVALID_ARG, "only the last stage computes the loss");
	WT_OK(weft_model_forward(s0, c0, x, &h));
	WT_CHECK(h->ndim == 3 && h->shape[2] == 32);
	WT_OK(weft_ctx_tensor(c1, "recv", WEFT_F32, 3, h->shape, &recv));
	WT_OK(weft_tensor_copy(recv, h));
	weft_tensor_requires_grad(recv, 1);
	WT_FAILS(weft_model_forward(s1, c1, x, &o.logits), WEFT_ERR_SHAPE, "hidden state (batch, time, 32)");
	WT_OK(weft_model_loss(s1, c1, &(weft_batch){ .inputs = recv, .targets = tg }, &o));
	WT_OK(weft_backward(c1, o.loss));
	WT_REQUIRE(recv->grad != NULL);
	WT_OK(weft_backward_from(c0, h, recv->grad));

	WT_OK(weft_tensor_copy_to_host(of.loss, &lf, 4));
	WT_OK(weft_tensor_copy_to_host(o.loss, &ls, 4));
	WT_CLOSE(ls, lf, 1e-6, 0);
	pf = weft_model_params(full);
	for (int s = 0; s < 2; s++) {
		weft_params *ps = weft_model_params(s ? s1 : s0);

		for (size_t i = 0; i < weft_params_count(ps); i++) {
			weft_tensor *p = weft_params_at(ps, i);

			if (strcmp(p->name, "transformer.wte.weight"))
				CHECK_ALL_CLOSE(p->name, (float *)p->grad->data,
						(float *)weft_params_find(pf, p->name)->grad->data,
						weft_tensor_numel(p), 1e-5, 1e-8);
		}
	}
	{
		weft_tensor *w0 = weft_params_find(weft_model_params(s0), "transformer.wte.weight");
		weft_tensor *w1 = weft_params_find(weft_model_params(s1), "transformer.wte.weight");
		int64_t n = weft_tensor_numel(w0);
		float *sum = malloc((size_t)n * 4);

		for (int64_t i = 0; i < n; i++)
			sum[i] = ((float *)w0->grad->data)[i] + ((float *)w1->grad->data)[i];
		CHECK_ALL_CLOSE("wte grad (sum of stages)", sum,
				(float *)weft_params_find(pf, "transformer.wte.weight")->grad->data,
				n, 1e-5, 1e-8);
		free(sum);
	}
	WT_FAILS(weft_model_create_gpt(&fixture_gpt, &(weft_model_options){
		.stage = WEFT_STAGE_HEAD, .layer_begin = 1, .layer_end = 3 }, &w_bad),
		WEFT_ERR_INVALID_ARG, "stage layers [1, 3) do not fit n_layer 2");
	weft_tensor_free(x);
	weft_tensor_free(tg);
	weft_st_close(g);
	weft_ctx_free(c0);
	weft_ctx_free(c1);
	weft_ctx_free(cf);
	weft_model_free(s0);
	weft_model_free(s1);
	weft_model_free(full);
}

/* Dropout: training mode changes the loss, eval mode does not; the same
 * seed and step give the same mask. */
static void test_dropout_and_inputs(void)
{
	weft_gpt_config c = fixture_gpt;
	weft_ctx_options copt = { .seed = 5 };
	weft_model *m;
	weft_ctx *ctx;
	weft_tensor *ids, *tg, *out;
	weft_model_output o;
	weft_eval_result ev;
	int64_t shape[2] = { 2, 8 }, big[2] = { 1, 17 };
	float l_train, l_train2;

	c.dropout = 0.5;
	WT_OK(weft_model_create_gpt(&c, NULL, &m));
	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I32, 2, shape, &ids));
	WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I32, 2, shape, &tg));
	for (int i = 0; i < 16; i++) {
		((int32_t *)ids->data)[i] = (i * 7) % 64;
		((int32_t *)tg->data)[i] = (i * 5 + 1) % 64;
	}
	WT_OK(weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &o));
	l_train = *(float *)o.loss->data;
	WT_OK(weft_model_eval(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &ev));
	WT_CHECK(fabs(ev.loss - l_train) > 1e-4); /* dropout 0.5 moves the loss */
	WT_CHECK(ev.counted == 16);
	{
		weft_eval_result ev2;

		WT_OK(weft_model_eval(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &ev2));
		WT_CHECK(ev2.loss == ev.loss);
	}
	WT_OK(weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &o));
	l_train2 = *(float *)o.loss->data;
	WT_CHECK(l_train2 != l_train); /* the next dropout calls draw new masks */

	/* bad inputs name what is wrong */
	WT_FAILS(weft_model_forward(m, ctx, tg->ndim == 2 ? o.logits : NULL, &out), WEFT_ERR_SHAPE,
		 "token ids (batch, time)");
	WT_OK(weft_ctx_tensor(ctx, "long", WEFT_I32, 2, big, &ids));
	WT_FAILS(weft_model_forward(m, ctx, ids, &out), WEFT_ERR_SHAPE, "17 positions",
		 "block_size allows 1 to 16");
	big[1] = 4;
	WT_OK(weft_ctx_tensor(ctx, "ids2", WEFT_I32, 2, big, &ids));
	((int32_t *)ids->data)[2] = 64;
	WT_FAILS(weft_model_forward(m, ctx, ids, &out), WEFT_ERR_INVALID_ARG, "64");
	/* the failed forward closed its modules: the next one works */
	((int32_t *)ids->data)[2] = 63;
	WT_OK(weft_model_forward(m, ctx, ids, &out));
	weft_ctx_free(ctx);
	weft_model_free(m);

	{
		weft_mlp_config mc = { .in_features = 20, .n_hidden = 0, .out_features = 3 };
		int64_t s3[3] = { 4, 3, 7 };

		WT_OK(weft_model_create_mlp(&mc, NULL, &m));
		WT_OK(weft_ctx_create(&copt, &ctx));
		weft_ctx_step_begin(ctx);
		WT_OK(weft_ctx_tensor(ctx, "x", WEFT_F32, 3, s3, &ids));
		WT_FAILS(weft_model_forward(m, ctx, ids, &out), WEFT_ERR_SHAPE, "[4, 3, 7]",
			 "20 features per sample");
		weft_ctx_free(ctx);
		weft_model_free(m);
	}
}

/* Out of memory at every accounted allocation of model creation: a
 * NOMEM status, no model, nothing leaked (LeakSanitizer checks), never a
 * crash; and once allocations succeed, a working model. */
static void test_out_of_memory(void)
{
	int built = 0;

	for (int64_t n = 1; n < 64 && !built; n++) {
		weft_model *m = NULL;
		weft_status st;

		weft_mem_fail_after(n);
		st = weft_model_create_gpt(&fixture_gpt, NULL, &m);
		weft_mem_fail_after(0);
		if (st) {
			WT_CHECK(st == WEFT_ERR_NOMEM && m == NULL);
			continue;
		}
		built = 1;
		WT_CHECK(n > 1); /* the first allocation did fail */
		weft_model_free(m);
	}
	WT_CHECK(built);
}

int main(void)
{
	test_out_of_memory();
	test_names();
	test_tree();
	test_hooks();
	test_init();
	test_stages();
	test_dropout_and_inputs();
	return wt_done("test_nn_model");
}
