/* Autograd: gradient accumulation, weight tying, hook order, warm steps that
 * allocate nothing, no-grad mode, micro-batches sharing a tape, flush. */
#include "tensor_testutil.h"

/* ---- a tiny model on a parameter set ---- */

typedef struct model {
	weft_params *ps;
	weft_tensor *wte;  /* (V, C): embedding and tied output layer */
	weft_tensor *w1;   /* (C, C) */
	weft_tensor *ln_w; /* (C) */
	weft_tensor *unused_w; /* (C, C): used only in a branch off the loss */
} model;

enum { V = 7, C = 4, N = 6 };

static void model_init(model *m)
{
	int64_t s_wte[2] = { V, C }, s_w1[2] = { C, C }, s_ln[1] = { C };

	WT_OK(weft_params_create(WEFT_CPU, &m->ps));
	WT_OK(weft_params_add(m->ps, "wte.weight", WEFT_F32, 2, s_wte, &m->wte));
	WT_OK(weft_params_add(m->ps, "h.0.mlp.weight", WEFT_F32, 2, s_w1, &m->w1));
	WT_OK(weft_params_add(m->ps, "ln_f.weight", WEFT_F32, 1, s_ln, &m->ln_w));
	WT_OK(weft_params_add(m->ps, "side.weight", WEFT_F32, 2, s_w1, &m->unused_w));
	WT_OK(weft_params_finalize(m->ps, 1));
	for (size_t i = 0; i < weft_params_count(m->ps); i++) {
		weft_tensor *p = weft_params_at(m->ps, i);
		float *d = p->data;

		for (int64_t j = 0; j < weft_tensor_numel(p); j++)
			d[j] = tu_uniform(-0.8f, 0.8f) + (p == m->ln_w ? 1.0f : 0.0f);
	}
}

static weft_tensor *make_ids(weft_ctx *ctx, const char *name, int64_t n, int64_t mod, int64_t add)
{
	weft_tensor *t;

	WT_OK(weft_ctx_tensor(ctx, name, WEFT_I32, 1, &n, &t));
	for (int64_t i = 0; i < n; i++)
		((int32_t *)t->data)[i] = (int32_t)((i * 3 + add) % mod);
	return t;
}

/* loss = CE(linear(layernorm(gelu(linear(emb(ids), w1)) + emb), wte)) */
static weft_status model_forward(weft_ctx *ctx, model *m, int64_t shift, int side_branch,
				 weft_tensor **loss)
{
	weft_tensor *ids = make_ids(ctx, "ids", N, V, shift), *tg = make_ids(ctx, "tg", N, V, shift + 1);
	weft_tensor *e, *h, *g, *r, *n, *logits, *side;
	weft_status st;

	if ((st = weft_module_begin(ctx, "transformer", m)) ||
	    (st = weft_op_embedding(ctx, ids, m->wte, &e)) ||
	    (st = weft_module_begin(ctx, "transformer.h.0", m->w1)) ||
	    (st = weft_op_linear(ctx, e, m->w1, NULL, &h)) || (st = weft_op_gelu(ctx, h, &g)) ||
	    (st = weft_module_end(ctx, "transformer.h.0", m->w1)) ||
	    (st = weft_op_add(ctx, g, e, &r)) ||
	    (st = weft_op_layernorm(ctx, r, m->ln_w, NULL, 1e-5f, &n)) ||
	    (st = weft_module_end(ctx, "transformer", m)) ||
	    (st = weft_op_linear(ctx, n, m->wte, NULL, &logits)))
		return st;
	if (side_branch && (st = weft_op_linear(ctx, e, m->unused_w, NULL, &side)))
		return st;
	return weft_op_cross_entropy(ctx, logits, tg, -100, loss);
}

static double grad_sum(const weft_tensor *p)
{
	const float *g = p->grad->data;
	double s = 0;

	for (int64_t i = 0; i < weft_tensor_numel(p); i++)
		s += fabs((double)g[i]);
	return s;
}

/* ---- hooks that log what they see ---- */

typedef struct hook_log {
	char events[64][64];
	int n;
	int final_count[8];
	double final_grad[8];
	int pre_use_fwd, pre_use_bwd;
	weft_status fail_with;
} hook_log;

static weft_status on_event(weft_ctx *ctx, const weft_hook_event *ev, void *user)
{
	hook_log *log = user;

	(void)ctx;
	if (log->fail_with)
		return weft_error_set(log->fail_with, "hook refused %s", ev->op ? ev->op : "");
	switch (ev->kind) {
	case WEFT_HOOK_GRAD_FINAL:
		log->final_count[ev->param->param_index]++;
		log->final_grad[ev->param->param_index] = grad_sum(ev->param);
		snprintf(log->events[log->n++ % 64], 64, "final %s", ev->param->name);
		break;
	case WEFT_HOOK_PARAM_PRE_USE:
		if (ev->pass == WEFT_PASS_FORWARD)
			log->pre_use_fwd++;
		else
			log->pre_use_bwd++;
		break;
	case WEFT_HOOK_MODULE_FORWARD_BEGIN:
		snprintf(log->events[log->n++ % 64], 64, "fwd+ %s", ev->module);
		break;
	case WEFT_HOOK_MODULE_FORWARD_END:
		snprintf(log->events[log->n++ % 64], 64, "fwd- %s", ev->module);
		break;
	case WEFT_HOOK_MODULE_BACKWARD_BEGIN:
		snprintf(log->events[log->n++ % 64], 64, "bwd+ %s", ev->module);
		break;
	case WEFT_HOOK_MODULE_BACKWARD_END:
		snprintf(log->events[log->n++ % 64], 64, "bwd- %s", ev->module);
		break;
	default:
		break;
	}
	return WEFT_OK;
}

static int find_event(const hook_log *log, const char *what)
{
	for (int i = 0; i < log->n; i++)
		if (!strcmp(log->events[i], what))
			return i;
	return -1;
}

static void test_used_twice(weft_ctx *ctx)
{
	int64_t n = 5;
	weft_tensor *x, *xx, *y, *r;
	float dy[5];

	/* y = x * x + x  =>  dy/dx = 2x + 1, summed from three uses of x */
	x = tu_rand("x", 1, &n, -1, 1, 0);
	weft_tensor_requires_grad(x, 1);
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_mul(ctx, x, x, &xx));
	WT_OK(weft_op_add(ctx, xx, x, &y));
	WT_OK(weft_ctx_tensor(ctx, "dy", WEFT_F32, 1, &n, &r));
	for (int i = 0; i < 5; i++)
		dy[i] = ((float *)r->data)[i] = tu_uniform(-1, 1);
	WT_OK(weft_backward_from(ctx, y, r));
	WT_REQUIRE(x->grad);
	for (int i = 0; i < 5; i++) {
		float xv = ((float *)x->data)[i];
		/* exact up to float rounding of a handful of products */
		WT_CLOSE(((float *)x->grad->data)[i], (2 * xv + 1) * dy[i], 1e-6, 1e-6);
	}
	/* a second backward through the same ops is refused */
	WT_FAILS(weft_backward_from(ctx, y, r), WEFT_ERR_INVALID_ARG, "backward already ran");
	weft_tensor_free(x);
}

static void test_tied_and_hooks(weft_ctx *ctx)
{
	model m;
	hook_log log = { 0 };
	weft_tensor *loss;
	int64_t handles[6];
	double full_wte;

	model_init(&m);
	/* the tied weight's gradient is the sum of its embedding and output-layer
	 * parts: compare against each part alone (linearity of backward) */
	weft_ctx_step_begin(ctx);
	WT_OK(model_forward(ctx, &m, 0, 0, &loss));
	WT_OK(weft_backward(ctx, loss));
	float *g_full = malloc(V * C * sizeof(float));
	memcpy(g_full, m.wte->grad->data, V * C * sizeof(float));
	full_wte = grad_sum(m.wte);
	WT_CHECK(full_wte > 1e-4);

	for (int k = 0; k < 6; k++)
		WT_OK(weft_ctx_add_hook(ctx, (weft_hook_kind)k, on_event, &log, &handles[k]));
	WT_OK(weft_params_zero_grad(m.ps));
	weft_ctx_step_begin(ctx);
	WT_OK(model_forward(ctx, &m, 0, 1, &loss));
	WT_OK(weft_backward(ctx, loss));
	/* identical gradients on a rerun with hooks (hooks observe, change nothing) */
	for (int i = 0; i < V * C; i++)
		WT_CLOSE(((float *)m.wte->grad->data)[i], g_full[i], 0, 0);
	free(g_full);

	/* gradient-final: exactly once for each used parameter, after its last
	 * contribution (the grad it saw is the final grad) */
	WT_CHECK(log.final_count[0] == 1 && log.final_count[1] == 1 && log.final_count[2] == 1);
	WT_CHECK(log.final_grad[0] == grad_sum(m.wte));
	WT_CHECK(log.final_grad[1] == grad_sum(m.w1));
	WT_CHECK(log.final_grad[2] == grad_sum(m.ln_w));
	/* ln_f and the output layer come first in backward; the tied weight's
	 * last contribution is the embedding, the very first op of forward */
	WT_CHECK(find_event(&log, "final ln_f.weight") < find_event(&log, "final h.0.mlp.weight"));
	WT_CHECK(find_event(&log, "final h.0.mlp.weight") < find_event(&log, "final wte.weight"));
	/* the side branch never reaches the loss: no final until flush */
	WT_CHECK(log.final_count[3] == 0);
	WT_OK(weft_autograd_flush(ctx));
	WT_CHECK(log.final_count[3] == 1);
	WT_CHECK(log.final_count[0] == 1); /* flush does not repeat */

	/* pre-use: 5 parameter reads in forward (wte twice, w1, ln_w, side);
	 * in backward the 4 visited ops that read one (side is not visited) */
	WT_CHECK(log.pre_use_fwd == 5);
	WT_CHECK(log.pre_use_bwd == 4);

	/* module order: forward nests, backward mirrors it */
	int fb = find_event(&log, "fwd+ transformer"), fh = find_event(&log, "fwd+ transformer.h.0"),
	    fhe = find_event(&log, "fwd- transformer.h.0"), fe = find_event(&log, "fwd- transformer"),
	    bb = find_event(&log, "bwd+ transformer"), bh = find_event(&log, "bwd+ transformer.h.0"),
	    bhe = find_event(&log, "bwd- transformer.h.0"), be = find_event(&log, "bwd- transformer");
	WT_CHECK(fb >= 0 && fb < fh && fh < fhe && fhe < fe);
	WT_CHECK(fe < bb && bb < bh && bh < bhe && bhe < be);
	WT_CHECK(bh < find_event(&log, "final h.0.mlp.weight"));
	WT_CHECK(find_event(&log, "final h.0.mlp.weight") < bhe);

	/* a hook's error stops the op and comes back to the caller */
	weft_ctx_step_begin(ctx);
	log.fail_with = WEFT_ERR_COMM;
	WT_FAILS(model_forward(ctx, &m, 0, 0, &loss), WEFT_ERR_COMM, "hook refused");
	log.fail_with = WEFT_OK;
	for (int k = 0; k < 6; k++)
		WT_OK(weft_ctx_remove_hook(ctx, handles[k]));
	WT_FAILS(weft_ctx_remove_hook(ctx, handles[0]), WEFT_ERR_NOT_FOUND, "no hook has handle");
	weft_params_free(m.ps);
}

/* Micro-batches whose tapes share one step: backward from one visits only
 * its own ops; gradients of both add up to each one's alone. */
static void test_micro_batches(weft_ctx *ctx)
{
	model m;
	weft_tensor *l1, *l2;
	float *g1 = malloc(V * C * sizeof(float)), *g2 = malloc(V * C * sizeof(float));

	model_init(&m);
	for (int k = 0; k < 2; k++) {
		WT_OK(weft_params_zero_grad(m.ps));
		weft_ctx_step_begin(ctx);
		WT_OK(model_forward(ctx, &m, k, 0, &l1));
		WT_OK(weft_backward(ctx, l1));
		memcpy(k ? g2 : g1, m.wte->grad->data, V * C * sizeof(float));
	}
	WT_OK(weft_params_zero_grad(m.ps));
	weft_ctx_step_begin(ctx);
	WT_OK(model_forward(ctx, &m, 0, 0, &l1));
	WT_OK(model_forward(ctx, &m, 1, 0, &l2));
	WT_OK(weft_backward(ctx, l1));
	for (int i = 0; i < V * C; i++)
		WT_CLOSE(((float *)m.wte->grad->data)[i], g1[i], 1e-6, 1e-7);
	WT_OK(weft_backward(ctx, l2));
	for (int i = 0; i < V * C; i++)
		WT_CLOSE(((float *)m.wte->grad->data)[i], g1[i] + g2[i], 1e-5, 1e-6);
	free(g1);
	free(g2);
	weft_params_free(m.ps);
}

/* After one warm-up step a training step allocates nothing: not a block in
 * the arenas, and not one weft_mem allocation (an armed allocation failure
 * would make the step fail). */
static void test_warm_steps_allocate_nothing(void)
{
	weft_ctx_options opt = { .arena_bytes = 256, .tape_bytes = 256 };
	weft_ctx *ctx;
	weft_arena_stats a0, a1, t0, t1;
	weft_mem_stats m0, m1;
	weft_tensor *loss;
	model m;

	WT_OK(weft_ctx_create(&opt, &ctx));
	model_init(&m);
	for (int step = 0; step < 2; step++) { /* warm-up: grows, then consolidates */
		weft_ctx_step_begin(ctx);
		WT_OK(model_forward(ctx, &m, step, 0, &loss));
		WT_OK(weft_backward(ctx, loss));
	}
	weft_arena_get_stats(weft_ctx_arena(ctx), &a0);
	weft_arena_get_stats(weft_ctx_tape_arena(ctx), &t0);
	WT_CHECK(a0.block_allocs >= 2); /* the small first block did have to grow */
	weft_mem_get_stats(&m0);
	for (int step = 2; step < 6; step++) {
		weft_mem_fail_after(1);
		weft_ctx_step_begin(ctx);
		WT_OK(model_forward(ctx, &m, step, 0, &loss));
		WT_OK(weft_backward(ctx, loss));
		WT_OK(weft_params_zero_grad(m.ps));
		weft_mem_fail_after(0);
	}
	weft_arena_get_stats(weft_ctx_arena(ctx), &a1);
	weft_arena_get_stats(weft_ctx_tape_arena(ctx), &t1);
	weft_mem_get_stats(&m1);
	WT_CHECK(a1.block_allocs == a0.block_allocs);
	WT_CHECK(t1.block_allocs == t0.block_allocs);
	WT_CHECK(m1.current[WEFT_MEM_ACTIVATIONS] == m0.current[WEFT_MEM_ACTIVATIONS]);
	WT_CHECK(m1.current_total == m0.current_total);
	/* the arenas are counted as activations */
	WT_CHECK(m1.current[WEFT_MEM_ACTIVATIONS] == (int64_t)(a1.capacity + t1.capacity));
	weft_params_free(m.ps);
	weft_ctx_free(ctx);
}

static void test_no_grad(weft_ctx *ctx)
{
	model m;
	weft_tensor *loss;
	weft_arena_stats before, after;

	model_init(&m);
	weft_ctx_step_begin(ctx);
	WT_CHECK(weft_ctx_set_grad_enabled(ctx, 0) == 1);
	weft_arena_get_stats(weft_ctx_tape_arena(ctx), &before);
	WT_OK(model_forward(ctx, &m, 0, 0, &loss));
	weft_arena_get_stats(weft_ctx_tape_arena(ctx), &after);
	WT_CHECK(loss->producer == NULL);
	WT_CHECK(!(loss->flags & WEFT_TENSOR_REQUIRES_GRAD));
	WT_FAILS(weft_backward(ctx, loss), WEFT_ERR_INVALID_ARG, "was not made by a recorded op");
	WT_CHECK(weft_ctx_set_grad_enabled(ctx, 1) == 0);
	weft_params_free(m.ps);
}

int main(void)
{
	weft_ctx *ctx;

	WT_OK(weft_ctx_create(NULL, &ctx));
	test_used_twice(ctx);
	test_tied_and_hooks(ctx);
	test_micro_batches(ctx);
	test_no_grad(ctx);
	weft_ctx_free(ctx);
	test_warm_steps_allocate_nothing();
	return wt_done("test_tensor_autograd");
}
