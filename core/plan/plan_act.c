/* The activation term of the plan (plan_act.h): four measured steps per
 * model or stage kind, a bilinear fit, and for pipelines the schedule's
 * contexts played through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/act_ckpt.h"
#include "nn/nn_impl.h"
#include "nn/shapes.h"
#include "pipeline/stage.h"
#include "plan/plan_act.h"
#include "tensor/tensor_impl.h"
#include "tp/tp.h"
#include "weft/device.h"
#include "weft/ops.h"
#include "weft/pp_schedule.h"
#include "weft/status.h"

typedef struct act_run {
	const weft_model *like;  /* the config and the transformer's choices */
	weft_model_options mo;   /* the tensor-parallel fields of the real run */
	weft_act_ckpt mode;
	weft_dtype autocast;
	weft_lowp_act lowp;      /* trainer.lowp_activations as the run's device takes it */
	weft_dtype copy;         /* the weight copy the products read (weft_plan_weight_copy) */
	uint64_t seed;
	int64_t T;
	int64_t n_micro;
	size_t arena_bytes, tape_bytes; /* the contexts' first blocks (0: default) */
} act_run;

/* ---- the stand-in tensor-parallel communicator ----
 * tp rank 0 of `size`: every collective gives this rank's own
 * contribution in each place the others' would go, so the ops see the
 * shapes (and allocate the bytes) of the real run. The values are not
 * what they would be; the trial steps only read the arenas' peaks. */

typedef struct trial_comm {
	int32_t size;
} trial_comm;

static int32_t tc_size(const weft_comm *c)
{
	return ((const trial_comm *)(const void *)c)->size;
}

static int32_t tc_rank(const weft_comm *c)
{
	(void)c;
	return 0;
}

static size_t tc_bytes(const weft_comm_buf *b, int64_t n)
{
	return (size_t)n * weft_comm_dtype_size(b->dtype);
}

static weft_status tc_all_reduce(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
				 weft_comm_redop op, weft_comm_work **w)
{
	(void)c, (void)op;
	if (w)
		*w = NULL;
	if (r->data != s->data)
		memmove(r->data, s->data, tc_bytes(s, s->count));
	return WEFT_OK;
}

static weft_status tc_reduce_scatter(weft_comm *c, const weft_comm_buf *s,
				     const weft_comm_buf *r, weft_comm_redop op,
				     weft_comm_work **w)
{
	(void)c, (void)op;
	if (w)
		*w = NULL;
	if (r->data != s->data)
		memmove(r->data, s->data, tc_bytes(r, r->count));
	return WEFT_OK;
}

static weft_status tc_all_gather(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
				 weft_comm_work **w)
{
	size_t n = tc_bytes(s, s->count);

	if (w)
		*w = NULL;
	for (int32_t i = 0; i < tc_size(c); i++)
		if ((char *)r->data + (size_t)i * n != s->data)
			memmove((char *)r->data + (size_t)i * n, s->data, n);
	return WEFT_OK;
}

static weft_status tc_wait(weft_comm_work *w, int64_t timeout_ms)
{
	(void)w, (void)timeout_ms;
	return WEFT_OK;
}

static const weft_comm_ops trial_ops = {
	.all_reduce = tc_all_reduce,
	.reduce_scatter = tc_reduce_scatter,
	.all_gather = tc_all_gather,
	.wait = tc_wait,
	.rank = tc_rank,
	.size = tc_size,
};

/* ---- the trial steps ---- */

/* One training forward and backward on B rows of the model r describes
 * with n_layer blocks: the whole model (parts 0), or the pipeline stage
 * of its blocks with the WEFT_STAGE_* parts, run as pp runs one (the
 * received hidden state and its gradient in the stage's context). The
 * peaks of its device and tape arenas. */
static weft_status measure(const act_run *r, uint32_t parts, int64_t n_layer, int64_t B,
			   int64_t *arena_peak, int64_t *tape_peak)
{
	weft_gpt_config g = r->like->gpt;
	weft_model_options mo = r->mo;
	weft_ctx_options co = { .device = WEFT_CPU, .seed = r->seed,
				.arena_bytes = r->arena_bytes, .tape_bytes = r->tape_bytes };
	int64_t shape[2] = { B, r->T }, hidden[3] = { B, r->T, g.n_embd };
	trial_comm tc = { .size = r->mo.tp_size };
	weft_model *m = NULL;
	weft_pp_stage *stage = NULL;
	weft_params *ps = NULL;
	weft_ctx *ctx = NULL;
	weft_tensor *ids = NULL, *tgt = NULL, *x = NULL, *dy = NULL, *out = NULL;
	weft_arena_stats a, t;
	weft_status st;

	g.n_layer = n_layer;
	mo.device = WEFT_CPU;
	mo.no_grads = parts ? 1 : 0;
	mo.stage = 0;
	/* positions past the sequence are never read: a table of T rows */
	g.block_size = r->T;
	/* the arenas' peaks depend on the shapes, not on the weights */
	st = nn_model_create_transformer_uninit(&g, &r->like->arch, &mo, &m);
	if (!st)
		st = weft_model_set_activation_checkpointing(m, r->mode);
	if (!st && parts)
		st = weft_pp_stage_create(m, &mo, parts | WEFT_STAGE_BLOCKS, 0, n_layer, &stage,
					  &ps);
	if (!st && !parts)
		ps = weft_model_params(m);
	if (!st && r->mo.tp_size > 1)
		st = weft_tp_host_bind(ps, &trial_ops, (weft_comm *)(void *)&tc);
	if (!st)
		st = weft_ctx_create(&co, &ctx);
	if (!st)
		st = weft_ctx_set_autocast(ctx, r->autocast);
	if (!st)
		st = weft_ctx_set_lowp_activations(ctx, r->mo.tp_size > 1 ? WEFT_LOWP_ACT_OFF :
							     r->lowp); /* tp: F32, as the trainer */
	/* the run's products read the weight copy, not rounded weights in the arena */
	if (!st && !parts && r->copy != WEFT_F32 && weft_ctx_lowp_activations(ctx) == r->copy &&
	    !(st = weft_params_copy_enable(ps, r->copy)) &&
	    !(st = weft_ctx_use_params_copy(ctx, ps)))
		st = weft_params_copy_refresh(ps, ctx);
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
	if (parts) {
		weft_micro_batch b = { .data = { .inputs = ids, .targets = tgt }, .rows = B };
		double loss = 0.0;

		if (!(parts & WEFT_STAGE_EMBED)) {
			st = weft_ctx_tensor(ctx, "pp.recv", WEFT_F32, 3, hidden, &x);
			if (!st) {
				memset(x->data, 0, (size_t)weft_tensor_numel(x) * sizeof(float));
				weft_tensor_requires_grad(x, 1);
			}
		}
		if (!st)
			st = weft_pp_stage_forward(stage, ctx, r->seed, 1, &b, x, 1,
						   1.0 / (double)r->n_micro, &out, &loss, NULL);
		if (!st && !(parts & WEFT_STAGE_HEAD)) {
			st = weft_ctx_tensor(ctx, "pp.grad", WEFT_F32, 3, hidden, &dy);
			if (!st)
				memset(dy->data, 0, (size_t)weft_tensor_numel(dy) * sizeof(float));
			if (!st)
				st = weft_backward_from(ctx, out, dy);
		} else if (!st) {
			st = weft_backward(ctx, out);
		}
	} else {
		weft_model_output o;

		weft_ctx_set_grad_enabled(ctx, 1);
		weft_ctx_set_training(ctx, 1);
		weft_ctx_set_rng(ctx, r->seed, 0);
		weft_ctx_set_step(ctx, 1);
		st = weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tgt }, &o);
		if (!st)
			st = weft_backward(ctx, o.loss);
	}
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
	weft_pp_stage_free(stage);
	weft_model_free(m);
	return st ? weft_error_wrap(st, "weft plan: a trial step of %s%lld block%s at micro-batch "
				    "%lld (activations)", parts ? "a pipeline stage of " : "",
				    (long long)n_layer, n_layer == 1 ? "" : "s", (long long)B) :
		    WEFT_OK;
}

/* The four corners h[l - 1][b - 1] at 1-2 blocks x micro-batch 1-2. */
static weft_status corners(const act_run *r, uint32_t parts, int64_t arena[2][2],
			   int64_t tape[2][2])
{
	weft_status st = WEFT_OK;

	for (int l = 0; l < 2 && !st; l++)
		for (int b = 0; b < 2 && !st; b++)
			st = measure(r, parts, l + 1, b + 1, &arena[l][b], &tape[l][b]);
	return st;
}

/* The peak at (L, B) from the four measured corners h[l - 1][b - 1]. */
static int64_t bilinear(const int64_t h[2][2], int64_t L, int64_t B)
{
	int64_t d = h[1][1] - h[1][0] - h[0][1] + h[0][0];
	int64_t b = h[1][0] - h[0][0] - d, c = h[0][1] - h[0][0] - d;
	int64_t a = h[0][0] - b - c - d;

	return a + b * L + c * B + d * B * L;
}

/* ---- pipelines ---- */

/* The stage kind of stage `stage`: bit 0 the embedding, bit 1 the head. */
static int kind_of(const weft_plan_pipeline *pl, int stage)
{
	return (stage == 0 ? 1 : 0) | (stage == pl->n_stages - 1 ? 2 : 0);
}

static uint32_t parts_of(int kind)
{
	return (kind & 1 ? WEFT_STAGE_EMBED : 0u) | (kind & 2 ? WEFT_STAGE_HEAD : 0u) |
	       WEFT_STAGE_BLOCKS;
}

#define SIM_STEPS 4

/* Plays pipeline rank `rank`'s schedule of m micro-batches for SIM_STEPS
 * steps through pp's pool of contexts (a stack: taken when a micro-batch's
 * stage starts, at its receive or its forward; given back after the
 * first stage's backward or after the gradient is sent on). hosted[c]
 * gets the chunks context c ran (bit k: chunk k); *n_ctx the contexts
 * made. Returns 0, or -1 with err for a schedule that cannot run, -2 when
 * memory runs out. */
static int play(const weft_plan_pipeline *pl, int rank, int64_t m, uint32_t *hosted, int cap,
		int *n_ctx, char *err, size_t len)
{
	int v = pl->virtual_stages, n_free = 0, n = 0, rc = 0;
	size_t cap_a = weft_pp_max_actions((int)m, v), n_a = 0;
	weft_pp_action *acts = calloc(cap_a ? cap_a : 1, sizeof(*acts));
	int *fl = malloc((size_t)(m * v) * sizeof(int)), *free_stack = malloc((size_t)cap *
									    sizeof(int));

	if (!acts || !fl || !free_stack) {
		rc = -2;
		goto out;
	}
	if (weft_pp_schedule((weft_pp_kind)pl->schedule, rank, pl->pp, (int)m, v, acts, cap_a,
			     &n_a, err, len)) {
		rc = -1;
		goto out;
	}
	for (int64_t i = 0; i < m * v; i++)
		fl[i] = -1;
	for (int step = 0; step < SIM_STEPS && !rc; step++)
		for (size_t i = 0; i < n_a; i++) {
			const weft_pp_action *a = &acts[i];
			int *f = &fl[(int64_t)a->micro * v + a->chunk];

			if ((a->op == WEFT_PP_RECV_ACT || a->op == WEFT_PP_FORWARD) && *f < 0) {
				if (n_free) {
					*f = free_stack[--n_free];
				} else if (n < cap) {
					*f = n;
					hosted[n++] = 0;
				} else {
					snprintf(err, len, "more than %d micro-batches in flight",
						 cap);
					rc = -1;
					break;
				}
				hosted[*f] |= 1u << a->chunk;
			} else if ((a->op == WEFT_PP_BACKWARD && a->stage == 0) ||
				   a->op == WEFT_PP_SEND_GRAD) {
				free_stack[n_free++] = *f;
				*f = -1;
			}
		}
	*n_ctx = n;
out:
	free(acts);
	free(fl);
	free(free_stack);
	return rc;
}

/* A context's steady bytes: its arena and tape arena at the size they
 * settle in once they have run the largest of `mask`'s chunks. */
static int64_t ctx_bytes(const weft_plan_act *a, int rank, uint32_t mask, int64_t B)
{
	const weft_plan_pipeline *pl = &a->pipeline;
	int64_t arena = 0, tape = 0;

	for (int k = 0; k < pl->virtual_stages; k++) {
		int stage = k * pl->pp + rank, kind = kind_of(pl, stage);
		int64_t L = pl->stage_bounds[stage + 1] - pl->stage_bounds[stage], x;

		if (!(mask & (1u << k)))
			continue;
		x = bilinear(a->stage_arena_h[kind], L, B);
		arena = x > arena ? x : arena;
		x = bilinear(a->stage_tape_h[kind], L, B);
		tape = x > tape ? x : tape;
	}
	return (int64_t)weft_arena_steady_bytes((size_t)arena, (size_t)pl->arena_bytes) +
	       (int64_t)weft_arena_steady_bytes((size_t)tape, pl->tape_bytes ?
								(size_t)pl->tape_bytes :
								CTX_TAPE_DEFAULT_BYTES);
}

/* The largest pipeline rank's bytes at micro-batch B, that rank (as a
 * world rank) and its contexts. Returns 0, -1 with err, or -2 (memory). */
static int pipeline_bytes(const weft_plan_act *a, int64_t B, int64_t *bytes, int32_t *rank,
			  int64_t *contexts, char *err, size_t len)
{
	enum { CAP = 1024 };
	uint32_t *hosted = malloc(CAP * sizeof(uint32_t));
	int rc = hosted ? 0 : -2;

	*bytes = -1;
	for (int r = 0; r < a->pipeline.pp && !rc; r++) {
		int n = 0;
		int64_t sum = 0;

		rc = play(&a->pipeline, r, a->n_micro, hosted, CAP, &n, err, len);
		for (int c = 0; c < n && !rc; c++)
			sum += ctx_bytes(a, r, hosted[c], B);
		if (!rc && sum > *bytes) {
			*bytes = sum;
			*rank = r * (a->pipeline.rank_stride > 0 ? a->pipeline.rank_stride : 1);
			*contexts = n;
		}
	}
	free(hosted);
	return rc;
}

static weft_status predict_pipeline(const act_run *r, weft_plan_act *out)
{
	const weft_plan_pipeline *pl = &out->pipeline;
	int measured = 0;
	char err[256] = "";
	int rc;
	weft_status st;

	if (pl->virtual_stages < 1 || pl->virtual_stages > 32 || pl->n_stages < 1 ||
	    pl->n_stages > WEFT_PLAN_MAX_STAGES || pl->pp * pl->virtual_stages != pl->n_stages) {
		snprintf(out->why, sizeof(out->why), "its pipeline of %d stages on %d ranks is "
			 "not one the plan can replay", (int)pl->n_stages, (int)pl->pp);
		return WEFT_OK;
	}
	for (int s = 0; s < pl->n_stages; s++) {
		int kind = kind_of(pl, s);

		if (measured & (1 << kind))
			continue;
		st = corners(r, parts_of(kind), out->stage_arena_h[kind], out->stage_tape_h[kind]);
		if (st)
			return st;
		measured |= 1 << kind;
	}
	rc = pipeline_bytes(out, out->micro_batch, &out->bytes, &out->rank, &out->contexts, err,
			    sizeof(err));
	if (rc == -2)
		return weft_error_set(WEFT_ERR_NOMEM, "weft plan: replaying the pipeline's "
				      "schedule (activations)");
	if (rc)
		return weft_error_set(WEFT_ERR_CONFIG, "weft plan: the pipeline's %s schedule over "
				      "%d ranks with %lld micro-batches per step "
				      "(trainer.accumulate_grad_batches): %s",
				      weft_pp_kind_name((weft_pp_kind)pl->schedule), (int)pl->pp,
				      (long long)out->n_micro, err);
	out->predicted = 1;
	return WEFT_OK;
}

/* ---- the config ---- */

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
	const char *accel = "cpu";
	int lowp = 0;
	const weft_cfg *tr = weft_cfg_get(root, "trainer"), *data = weft_cfg_get(root, "data");
	const char *prec = "32-true";
	int mode = 0;
	int64_t seed = 0;
	weft_status st;

	if ((st = weft_cfg_int(data, "batch_size", 1, &out->micro_batch)) ||
	    (st = weft_cfg_int(data, "block_size", g->block_size, &out->seq_len)) ||
	    (st = weft_cfg_choice(tr, "activation_checkpointing", modes, "none", &mode)) ||
	    (st = weft_cfg_str(tr, "precision", "32-true", &prec)) ||
	    (st = weft_cfg_str(tr, "accelerator", "cpu", &accel)) ||
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
	if ((st = weft_lowp_act_parse(tr, r->autocast, &lowp)))
		return st;
	/* the trial steps run on the CPU, whose references of the 16-bit
	 * activation members measure what a CUDA run (auto there) keeps */
	r->lowp = lowp == 0 && !strcmp(accel, "cuda") ? WEFT_LOWP_ACT_ON : (weft_lowp_act)lowp;
	r->seed = (uint64_t)seed;
	r->T = out->seq_len;
	out->mode = modes[mode];
	out->precision = prec;
	out->n_layer = g->n_layer;
	return WEFT_OK;
}

/* The strategy's plan, for a pipeline's stages (pp 0 for the rest). */
static weft_status pipeline_of(const weft_model *whole, const weft_plan_opts *o,
			       weft_plan_pipeline *out)
{
	weft_plan *p = calloc(1, sizeof(*p));
	weft_status st;

	memset(out, 0, sizeof(*out));
	if (!p)
		return weft_error_set(WEFT_ERR_NOMEM, "weft plan: the strategy's plan");
	st = weft_plan_compute(weft_model_params(whole), o, p);
	if (!st)
		*out = p->pipeline;
	free(p);
	return st;
}

weft_status weft_plan_activations(const weft_cfg *root, const weft_plan_opts *o,
				  const weft_model_options *mo, weft_plan_act *out)
{
	const weft_cfg *model = weft_cfg_get(root, "model");
	const char *cls = "gpt";
	weft_model *whole = NULL;
	weft_model_options wo = *mo;
	act_run r = { .mo = *mo };
	int64_t L, B, threads = 0, accum = 1, old_threads;
	weft_status st = WEFT_OK;

	memset(out, 0, sizeof(*out));
	out->contexts = 1;
	out->tp_size = mo->tp_size > 1 ? mo->tp_size : 1;
	if (model)
		weft_cfg_str(model, "class", "gpt", &cls);
	if (strcmp(cls, "gpt")) {
		snprintf(out->why, sizeof(out->why), "model.class %s (the activation term is "
			 "measured on GPTs)", cls);
		return WEFT_OK;
	}
	wo.device = WEFT_CPU;
	wo.no_grads = 1;
	wo.stage = 0;
	st = nn_model_shapes_from_config(model, &wo, &whole);
	if (!st && !replicated_activations(o->strategy))
		st = pipeline_of(whole, o, &out->pipeline);
	if (st)
		goto out;
	if (!out->pipeline.pp && (mo->stage || (!replicated_activations(o->strategy) &&
						strcmp(o->strategy, "tp")))) {
		snprintf(out->why, sizeof(out->why), "strategy %s (its ranks neither run the "
			 "model on their own micro-batch nor say how their pipeline holds it)",
			 o->strategy);
		goto out;
	}
	st = weft_plan_weight_copy(o, &r.copy);
	if (st)
		goto out;
	r.like = whole;
	r.mo.device = WEFT_CPU;
	r.mo.no_grads = 0;
	if ((st = read_shapes(root, &whole->gpt, &r, out)) ||
	    (st = weft_cfg_int(weft_cfg_get(root, "trainer"), "threads", 0, &threads)) ||
	    (st = weft_cfg_int(weft_cfg_get(root, "trainer"), "accumulate_grad_batches", 1,
			       &accum)))
		goto out;
	out->n_micro = accum > 0 ? accum : 1;
	r.n_micro = out->n_micro;
	/* the kernel threads each rank runs (the attention's scratch is per
	 * thread), as the trainer resolves them */
	old_threads = weft_cpu_get_threads();
	weft_cpu_set_threads(weft_cpu_threads_resolve(threads, o->world));
	if (out->pipeline.pp) {
		r.arena_bytes = (size_t)out->pipeline.arena_bytes;
		r.tape_bytes = (size_t)out->pipeline.tape_bytes;
		st = predict_pipeline(&r, out);
	} else {
		st = corners(&r, 0, out->arena_h, out->tape_h);
	}
	weft_cpu_set_threads(old_threads);
	if (st || out->pipeline.pp)
		goto out;
	L = whole->gpt.n_layer;
	B = out->micro_batch;
	out->arena_peak = bilinear(out->arena_h, L, B);
	out->tape_peak = bilinear(out->tape_h, L, B);
	out->predicted = 1;
	out->bytes = weft_plan_act_bytes_at(out, B);
out:
	weft_model_free(whole);
	return st;
}

int64_t weft_plan_act_bytes_at(const weft_plan_act *a, int64_t micro_batch)
{
	if (!a->predicted || micro_batch < 1)
		return 0;
	if (a->pipeline.pp) {
		int64_t bytes = 0, contexts = 0;
		int32_t rank = 0;
		char err[256];

		return pipeline_bytes(a, micro_batch, &bytes, &rank, &contexts, err,
				      sizeof(err)) ? 0 : bytes;
	}
	return (int64_t)weft_arena_steady_bytes((size_t)bilinear(a->arena_h, a->n_layer,
								  micro_batch), 0) +
	       (int64_t)weft_arena_steady_bytes((size_t)bilinear(a->tape_h, a->n_layer,
								 micro_batch),
						CTX_TAPE_DEFAULT_BYTES);
}
