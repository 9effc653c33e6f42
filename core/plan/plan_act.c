/* The activation term of the plan (plan_act.h): four measured steps and a
 * bilinear fit. */
#include <stdio.h>
#include <string.h>

#include "nn/act_ckpt.h"
#include "nn/shapes.h"
#include "plan/plan_act.h"
#include "tensor/tensor_impl.h"
#include "weft/device.h"
#include "weft/ops.h"
#include "weft/status.h"

typedef struct act_run {
	const weft_gpt_config *gpt;
	weft_model_options mo;
	weft_act_ckpt mode;
	weft_dtype autocast;
	uint64_t seed;
	int64_t T;
} act_run;

/* One training forward and backward of a GPT of n_layer blocks on B rows:
 * the peaks of its device and tape arenas. */
static weft_status measure(const act_run *r, int64_t n_layer, int64_t B, int64_t *arena_peak,
			   int64_t *tape_peak)
{
	weft_gpt_config g = *r->gpt;
	weft_ctx_options co = { .device = WEFT_CPU, .seed = r->seed };
	int64_t shape[2] = { B, r->T };
	weft_model *m = NULL;
	weft_ctx *ctx = NULL;
	weft_tensor *ids = NULL, *tgt = NULL;
	weft_model_output out;
	weft_arena_stats a, t;
	weft_status st;

	g.n_layer = n_layer;
	/* positions past the sequence are never read: a table of T rows */
	g.block_size = r->T;
	/* the arenas' peaks depend on the shapes, not on the weights */
	st = nn_model_create_gpt_uninit(&g, &r->mo, &m);
	if (!st)
		st = weft_model_set_activation_checkpointing(m, r->mode);
	if (!st)
		st = weft_ctx_create(&co, &ctx);
	if (!st)
		st = weft_ctx_set_autocast(ctx, r->autocast);
	if (!st)
		st = weft_tensor_alloc("ids", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, &ids);
	if (!st)
		st = weft_tensor_alloc("targets", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, &tgt);
	if (st)
		goto out;
	for (int64_t i = 0; i < B * r->T; i++) {
		((int64_t *)ids->data)[i] = (i * 7 + 3) % g.vocab_size;
		((int64_t *)tgt->data)[i] = (i * 5 + 1) % g.vocab_size;
	}
	weft_ctx_step_begin(ctx);
	weft_ctx_set_grad_enabled(ctx, 1);
	weft_ctx_set_training(ctx, 1);
	weft_ctx_set_rng(ctx, r->seed, 0);
	weft_ctx_set_step(ctx, 1);
	st = weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tgt }, &out);
	if (!st)
		st = weft_backward(ctx, out.loss);
	if (st)
		goto out;
	weft_arena_get_stats(weft_ctx_arena(ctx), &a);
	weft_arena_get_stats(weft_ctx_tape_arena(ctx), &t);
	*arena_peak = (int64_t)a.high_water;
	*tape_peak = (int64_t)t.high_water;
out:
	weft_tensor_free(ids);
	weft_tensor_free(tgt);
	weft_ctx_free(ctx);
	weft_model_free(m);
	return st ? weft_error_wrap(st, "weft plan: a trial step of %lld block%s at micro-batch "
				    "%lld (activations)", (long long)n_layer,
				    n_layer == 1 ? "" : "s", (long long)B) : WEFT_OK;
}

/* The peak at (L, B) from the four measured corners h[l - 1][b - 1]. */
static int64_t bilinear(const int64_t h[2][2], int64_t L, int64_t B)
{
	int64_t d = h[1][1] - h[1][0] - h[0][1] + h[0][0];
	int64_t b = h[1][0] - h[0][0] - d, c = h[0][1] - h[0][0] - d;
	int64_t a = h[0][0] - b - c - d;

	return a + b * L + c * B + d * B * L;
}

static int replicated_activations(const char *strategy)
{
	return !strcmp(strategy, "single") || !strcmp(strategy, "ddp") ||
	       !strncmp(strategy, "zero", 4) || !strncmp(strategy, "deepspeed", 9) ||
	       !strcmp(strategy, "fsdp");
}

static weft_status read_shapes(const weft_cfg *root, const weft_gpt_config *g, act_run *r,
			       weft_plan_act *out)
{
	static const char *const modes[] = { "none", "full", "selective", NULL };
	const weft_cfg *tr = weft_cfg_get(root, "trainer"), *data = weft_cfg_get(root, "data");
	const char *prec = "32-true";
	int mode = 0;
	int64_t seed = 0;
	weft_status st;

	if ((st = weft_cfg_int(data, "batch_size", 1, &out->micro_batch)) ||
	    (st = weft_cfg_int(data, "block_size", g->block_size, &out->seq_len)) ||
	    (st = weft_cfg_choice(tr, "activation_checkpointing", modes, "none", &mode)) ||
	    (st = weft_cfg_str(tr, "precision", "32-true", &prec)) ||
	    (st = weft_cfg_int(root, "seed_everything", 0, &seed)))
		return st;
	if (out->micro_batch < 1)
		return weft_cfg_error(weft_cfg_get(data, "batch_size"), "must be >= 1, got %lld",
				      (long long)out->micro_batch);
	if (out->seq_len < 1 || out->seq_len > g->block_size)
		return weft_cfg_error(weft_cfg_get(data, "block_size"), "must be in [1, %lld] "
				      "(model.block_size), got %lld", (long long)g->block_size,
				      (long long)out->seq_len);
	r->mode = (weft_act_ckpt)mode;
	r->autocast = !strcmp(prec, "bf16-mixed") ? WEFT_BF16 :
		      !strcmp(prec, "16-mixed") ? WEFT_F16 : WEFT_F32;
	r->seed = (uint64_t)seed;
	r->T = out->seq_len;
	out->mode = modes[mode];
	out->precision = prec;
	out->n_layer = g->n_layer;
	return WEFT_OK;
}

weft_status weft_plan_activations(const weft_cfg *root, const weft_plan_opts *o,
				  const weft_model_options *mo, weft_plan_act *out)
{
	const weft_cfg *model = weft_cfg_get(root, "model");
	const char *cls = "gpt";
	weft_gpt_config g;
	weft_model *whole = NULL;
	act_run r = { .mo = *mo };
	int64_t arena[2][2], tape[2][2], L, B, threads = 0, old_threads;
	weft_status st = WEFT_OK;

	memset(out, 0, sizeof(*out));
	out->contexts = 1;
	if (model)
		weft_cfg_str(model, "class", "gpt", &cls);
	if (strcmp(cls, "gpt")) {
		snprintf(out->why, sizeof(out->why), "model.class %s (the activation term is "
			 "measured on GPTs)", cls);
		return WEFT_OK;
	}
	if (!replicated_activations(o->strategy) || mo->tp_size > 1 || mo->stage) {
		snprintf(out->why, sizeof(out->why), "strategy %s (its ranks do not each run the "
			 "whole model on their own micro-batch)", o->strategy);
		return WEFT_OK;
	}
	st = nn_model_shapes_from_config(model, &(weft_model_options){ .device = WEFT_CPU,
								      .no_grads = 1 }, &whole);
	if (st)
		return st;
	g = *weft_model_gpt_config(whole);
	weft_model_free(whole);
	r.gpt = &g;
	r.mo.device = WEFT_CPU;
	r.mo.no_grads = 0;
	if ((st = read_shapes(root, &g, &r, out)) ||
	    (st = weft_cfg_int(weft_cfg_get(root, "trainer"), "threads", 0, &threads)))
		return st;
	/* the kernel threads each rank runs (the attention's scratch is per
	 * thread), as the trainer resolves them */
	old_threads = weft_cpu_get_threads();
	weft_cpu_set_threads(weft_cpu_threads_resolve(threads, o->world));
	for (int l = 0; l < 2 && !st; l++)
		for (int b = 0; b < 2 && !st; b++)
			st = measure(&r, l + 1, b + 1, &arena[l][b], &tape[l][b]);
	weft_cpu_set_threads(old_threads);
	if (st)
		return st;
	L = g.n_layer;
	B = out->micro_batch;
	memcpy(out->arena_h, arena, sizeof(arena));
	memcpy(out->tape_h, tape, sizeof(tape));
	out->arena_peak = bilinear(arena, L, B);
	out->tape_peak = bilinear(tape, L, B);
	out->predicted = 1;
	out->bytes = weft_plan_act_bytes_at(out, B);
	return WEFT_OK;
}

int64_t weft_plan_act_bytes_at(const weft_plan_act *a, int64_t micro_batch)
{
	if (!a->predicted || micro_batch < 1)
		return 0;
	return (int64_t)weft_arena_steady_bytes((size_t)bilinear(a->arena_h, a->n_layer,
								  micro_batch), 0) +
	       (int64_t)weft_arena_steady_bytes((size_t)bilinear(a->tape_h, a->n_layer,
								 micro_batch),
						CTX_TAPE_DEFAULT_BYTES);
}
