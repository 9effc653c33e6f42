/* Tensor parallelism (strategy tp, core/tp) against the one-process run of
 * the same global batch, on real ranks over gloo.
 *
 *   test_strategy_tp equiv TP DP SP [CLIP [PLAN]]   TP x DP ranks (SP 1:
 *       sequence parallel; CLIP: gradient_clip_val; PLAN 1: a plan keeping
 *       some sub-layers whole) against strategy single: every
 *       step's loss (and global grad norm when clipping), every final
 *       weight (shards gathered into full nanoGPT tensors), all ranks'
 *       gathered weights bit-identical, eval_step's loss, the step's tp
 *       collectives against the theory (below), and the whole
 *       model.safetensors a tp run writes loading at tp 1, 2 and 4.
 *   test_strategy_tp bytes              per-rank parameter bytes of split
 *       layers = 1/T of the whole layer, measured (param sizes and the
 *       WEFT_MEM_PARAMS counter), and shards that reassemble to the whole
 *       model's initial values.
 *   test_strategy_tp errors             n_embd / n_head not divisible by
 *       T, a size that does not divide the world, model/strategy mismatch.
 *
 * Model: GPT, 2 layers, n_embd 32, 4 heads, T (block) 16, vocab 64, bias,
 * no dropout; B = 2 rows per dp rank per step, 20 steps.
 *
 * Tolerances (as test_strategy_ddp, for the same reasons):
 * - loss of every step within 1e-5 relative;
 * - weights: SGD (momentum 0.9, lr 0.05) so that updates are linear in
 *   the gradient: every weight within 1e-5 of the reference relative to
 *   max(|w|, 1e-2) (weights start near 0.02, biases at 0 where a relative
 *   measure means nothing, hence the floor). Tensor parallelism changes
 *   only the order of float32 sums (split GEMMs summed by all-reduce, a
 *   few ulps per step); a wrong split, a missing all-reduce or a doubled
 *   gradient moves weights by > 1e-3.
 * Communication per step (B rows, s = 16 positions, h = 32): each
 * transformer block issues, without sequence parallelism, 2 all-reduces in
 * forward (after attn.c_proj and mlp.c_proj, g) and 2 in backward (before
 * c_attn and c_fc, f), each over b*s*h elements; with it, 2 all-gathers
 * and 2 reduce-scatters in forward and the same in backward, each over
 * b*s*h elements of the whole tensor, plus one all-gather in forward
 * (before the replicated head) and one in backward (after the embedding's
 * split) outside the blocks. A ring moves 2(T-1)/T of an all-reduce's
 * elements per rank and (T-1)/T of an all-gather's or reduce-scatter's,
 * so both variants move the same bytes; each rank's contributed bytes
 * are asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "weft_test.h"

#include "dist/dist.h"
#include "dist/pg.h"
#include "plugin/registry.h"
#include "tp/tp.h"
#include "weft/config.h"
#include "weft/module.h"
#include "weft/ops.h"

#define TOL 1e-5
#define WEIGHT_FLOOR 1e-2
#define STEPS 20
#define ROWS 2
#define N_LAYER 2
#define N_EMBD 32
#define N_HEAD 4
#define SEQ 16
#define VOCAB 64

typedef struct run_cfg {
	const char *strategy;   /* "tp" or "single" */
	int tp, dp, sp;
	int64_t batch;          /* rows of this rank */
	const char *save;       /* tp > 1: rank 0 writes the whole model here */
	double clip;            /* gradient_clip_val; 0: off */
	int plan;               /* 1: PLAN_YAML (block 0's attention, block 1's MLP whole) */
} run_cfg;

/* A plan that keeps block 0's attention and block 1's MLP whole: first
 * match wins, so the specific lines come first. */
#define PLAN_YAML "{\"transformer.h.0.attn.*\": replicate, \"transformer.h.1.mlp.*\": " \
		  "replicate, \"*.c_attn\": colwise, \"*.c_fc\": colwise, \"*.c_proj\": rowwise}"
#define PLAN_TEXT "transformer.h.0.attn.*=replicate\ntransformer.h.1.mlp.*=replicate\n" \
		  "*.c_attn=colwise\n*.c_fc=colwise\n*.c_proj=rowwise"
#define PLAN_SPLIT 2 /* sub-layers (of 2 * N_LAYER) the plan splits */

typedef struct run_out {
	double loss[STEPS];
	weft_step_report rep[STEPS];
	weft_tp_stats stats;    /* of the last step */
	double eval_loss;       /* eval_step on step 0's batch after training */
	int64_t numel;          /* full model */
	float *weights;         /* full, gathered */
} run_out;

static weft_gpt_config gpt(void)
{
	return (weft_gpt_config){ .n_layer = N_LAYER, .n_head = N_HEAD, .n_embd = N_EMBD,
				  .vocab_size = VOCAB, .block_size = SEQ, .bias = 1 };
}

/* Rows [row0, row0 + rows) of step s's global batch. */
static void fill(int s, int64_t row0, weft_tensor *x, weft_tensor *y)
{
	uint64_t key = weft_rng_hash(0x7e57, (uint64_t)s);
	int64_t *xi = x->data, *yi = y->data;

	for (int64_t r = 0; r < x->shape[0]; r++)
		for (int64_t j = 0; j < SEQ; j++) {
			uint64_t k = (uint64_t)((row0 + r) * SEQ + j);

			xi[r * SEQ + j] = (int64_t)(weft_rng_hash(key, 2 * k) % VOCAB);
			yi[r * SEQ + j] = (int64_t)(weft_rng_hash(key, 2 * k + 1) % VOCAB);
		}
}

typedef struct job {
	weft_dist_env de;
	weft_store_client *store;
	weft_pg *pg;
	weft_registry *reg;
	weft_config *ocfg, *scfg;
	const weft_optim_ops *oops;
	void *optim;
	const weft_strategy_ops *sops;
	void *strat;
	weft_optim_segment *segs;
	weft_model *model;
	weft_ctx *ctx;
	weft_tensor *x, *y;
} job;

static weft_status cb_fb(void *tr, const weft_micro_batch *b, double scale, double *loss)
{
	job *j = tr;
	weft_model_output o;
	weft_tensor *scaled;
	weft_status st;

	weft_ctx_set_rng(j->ctx, 1, b->row_offset);
	st = weft_model_loss(j->model, j->ctx, &b->data, &o);
	if (st)
		return st;
	*loss = ((const float *)o.loss->data)[0];
	st = weft_op_scale(j->ctx, o.loss, (float)scale, &scaled);
	return st ? st : weft_backward(j->ctx, scaled);
}

static weft_status cb_eval(void *tr, const weft_micro_batch *b, weft_eval_report *rep)
{
	job *j = tr;
	weft_eval_result r;
	weft_status st = weft_model_eval(j->model, j->ctx, &b->data, &r);

	if (!st) {
		rep->loss_sum += r.loss * (double)b->rows;
		rep->rows += b->rows;
	}
	return st;
}

static void job_free(job *j)
{
	if (j->sops && j->strat)
		j->sops->destroy(j->strat);
	if (j->oops && j->optim)
		j->oops->destroy(j->optim);
	weft_tensor_free(j->x);
	weft_tensor_free(j->y);
	free(j->segs);
	weft_ctx_free(j->ctx);
	weft_model_free(j->model);
	if (j->pg) {
		weft_tp_comm_unregister(j->pg);
		weft_pg_destroy(j->pg);
	}
	weft_store_client_close(j->store);
	weft_config_free(j->scfg);
	weft_config_free(j->ocfg);
	weft_registry_free(j->reg);
}

static weft_status job_optim(job *j)
{
	static const char text[] = "{name: sgd, lr: 0.05, momentum: 0.9}";
	weft_params *ps = weft_model_params(j->model);
	size_t n = weft_params_count(ps);
	weft_tensor *flat;
	const void *vt;
	weft_status st;

	st = weft_registry_find(j->reg, WEFT_PLUGIN_OPTIM, "sgd", &vt, NULL);
	if (!st)
		st = weft_config_load_string("optimizer", text, strlen(text), &j->ocfg);
	if (st)
		return st;
	j->oops = vt;
	if ((st = j->oops->create(weft_config_root(j->ocfg), &j->optim)))
		return st;
	j->segs = calloc(n, sizeof(*j->segs));
	if (!j->segs)
		return WEFT_ERR_NOMEM;
	weft_params_flat(ps, WEFT_F32, &flat, NULL);
	for (size_t i = 0; i < n; i++) {
		weft_tensor *p = weft_params_at(ps, i);

		j->segs[i] = (weft_optim_segment){
			.name = p->name,
			.offset = (int64_t)((const float *)p->data - (const float *)flat->data),
			.numel = weft_tensor_numel(p),
			.ndim = p->ndim,
			.decay = p->ndim >= 2,
		};
	}
	return WEFT_OK;
}

/* The full model's weights in declaration order, gathered from shards. */
static weft_status gather_all(job *j, run_out *out)
{
	weft_params *ps = weft_model_params(j->model);
	weft_tp_group *g = weft_tp_group_find(ps);
	size_t n = weft_params_count(ps);
	int64_t total = 0, off = 0;
	weft_status st = WEFT_OK;

	for (size_t i = 0; i < n; i++)
		total += g ? weft_tp_full_numel(g, i) : weft_tensor_numel(weft_params_at(ps, i));
	out->numel = total;
	out->weights = malloc((size_t)total * sizeof(float));
	if (!out->weights)
		return WEFT_ERR_NOMEM;
	for (size_t i = 0; i < n && !st; i++) {
		weft_tensor *p = weft_params_at(ps, i);

		if (g) {
			st = weft_tp_gather_param(g, ps, i, 0, out->weights + off);
			off += weft_tp_full_numel(g, i);
		} else {
			memcpy(out->weights + off, p->data, weft_tensor_nbytes(p));
			off += weft_tensor_numel(p);
		}
	}
	return st;
}

static weft_status run(const run_cfg *c, run_out *out)
{
	job j;
	weft_gpt_config gc = gpt();
	weft_model_options mo = { .seed = 1234 };
	weft_ctx_options co = { .seed = 1 };
	weft_strategy_env env;
	const void *vt;
	char yaml[512];
	int rank = 0, world = 1;
	int64_t shape[2] = { c->batch, SEQ };
	weft_status st;

	memset(&j, 0, sizeof(j));
	memset(out, 0, sizeof(*out));
	weft_cpu_set_threads(1);
	if ((st = weft_registry_create(&j.reg)) || (st = weft_registry_add_default_paths(j.reg)) ||
	    (st = weft_dist_env_detect(&j.de)))
		goto out;
	if (j.de.source != WEFT_DIST_SINGLE) {
		if ((st = weft_store_connect(j.de.store_host, j.de.store_port, j.de.secret, 30000,
					     &j.store)) ||
		    (st = weft_registry_find(j.reg, WEFT_PLUGIN_COMM, "gloo", &vt, NULL)) ||
		    (st = weft_pg_create(vt, j.store, j.de.rank, j.de.world_size, "world", 30000,
					 "127.0.0.1", &j.pg)) ||
		    (st = weft_tp_comm_register(j.pg)))
			goto out;
		rank = weft_pg_rank(j.pg);
		world = weft_pg_size(j.pg);
	}
	if (c->tp > 1) {
		mo.tp_size = c->tp;
		mo.tp_rank = rank % c->tp;
		mo.tp_flags = c->sp ? WEFT_TP_SEQUENCE_PARALLEL : 0;
		mo.tp_plan = c->plan ? PLAN_TEXT : NULL;
	}
	if ((st = weft_model_create_gpt(&gc, &mo, &j.model)) || (st = weft_ctx_create(&co, &j.ctx)) ||
	    (st = job_optim(&j)) ||
	    (st = weft_registry_find(j.reg, WEFT_PLUGIN_STRATEGY, c->strategy, &vt, NULL)))
		goto out;
	j.sops = vt;
	snprintf(yaml, sizeof(yaml), "{name: %s, size: %d, sequence_parallel: %s%s%s}",
		 c->strategy, c->tp, c->sp ? "true" : "false", c->plan ? ", plan: " : "",
		 c->plan ? PLAN_YAML : "");
	if (!strcmp(c->strategy, "tp") &&
	    (st = weft_config_load_string("strategy", yaml, strlen(yaml), &j.scfg)))
		goto out;
	env = (weft_strategy_env){
		.struct_size = sizeof(env),
		.rank = rank,
		.world_size = world,
		.local_rank = rank,
		.local_world_size = world,
		.device = WEFT_CPU,
		.comm_timeout_ms = 30000,
		.comm_ops = j.pg ? weft_pg_ops(j.pg) : NULL,
		.world = j.pg ? weft_pg_comm(j.pg) : NULL,
		.ctx = j.ctx,
		.params = weft_model_params(j.model),
		.optim_ops = j.oops,
		.optim = j.optim,
		.segs = j.segs,
		.nseg = weft_params_count(weft_model_params(j.model)),
		.gradient_clip_val = c->clip,
		.forward_backward = cb_fb,
		.evaluate = cb_eval,
		.trainer = &j,
	};
	if ((st = j.sops->create(j.scfg ? weft_config_root(j.scfg) : NULL, &env, &j.strat)) ||
	    (st = j.sops->setup(j.strat)) ||
	    (st = weft_tensor_alloc("x", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, &j.x)) ||
	    (st = weft_tensor_alloc("y", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, &j.y)))
		goto out;
	for (int s = 0; s < STEPS; s++) {
		int64_t row0 = (int64_t)(c->tp > 1 ? rank / c->tp : rank) * c->batch;
		weft_micro_batch mb = { .data = { .inputs = j.x, .targets = j.y }, .rows = c->batch,
					.row_offset = row0 };
		weft_step_input in = {
			.struct_size = sizeof(in), .micro = &mb, .n_micro = 1,
			.optim = { .struct_size = sizeof(weft_optim_step_info), .step = s + 1,
				   .lr = 0.05, .grad_scale = 1.0 },
		};

		fill(s, row0, j.x, j.y);
		out->rep[s].struct_size = sizeof(out->rep[s]);
		if ((st = j.sops->train_step(j.strat, &in, &out->rep[s])))
			goto out;
		out->loss[s] = out->rep[s].loss;
	}
	if (weft_tp_group_find(weft_model_params(j.model)))
		weft_tp_group_stats(weft_tp_group_find(weft_model_params(j.model)), &out->stats);
	if (c->sp) {
		/* sequence parallelism splits positions: 15 of them do not split */
		int64_t odd[2] = { 1, 15 };
		weft_tensor *ids = NULL, *logits = NULL;

		weft_ctx_step_begin(j.ctx);
		if ((st = weft_ctx_tensor(j.ctx, "ids", WEFT_I64, 2, odd, &ids)))
			goto out;
		WT_FAILS(weft_model_forward(j.model, j.ctx, ids, &logits), WEFT_ERR_SHAPE,
			 "sequence length (dim 1) 15", "tensor-parallel size");
	}
	{
		int64_t row0 = (int64_t)(c->tp > 1 ? rank / c->tp : rank) * c->batch;
		weft_micro_batch mb = { .data = { .inputs = j.x, .targets = j.y }, .rows = c->batch,
					.row_offset = row0 };
		weft_eval_report er = { .struct_size = sizeof(er) };

		fill(0, row0, j.x, j.y);
		if ((st = j.sops->eval_step(j.strat, &mb, &er)))
			goto out;
		out->eval_loss = er.loss_sum / (double)er.rows;
	}
	st = gather_all(&j, out);
	if (!st && c->save && c->tp > 1) {
		weft_model *whole = NULL;

		/* a shard model refuses to be saved as if it were whole */
		WT_FAILS(weft_model_save_safetensors(j.model, c->save), WEFT_ERR_INVALID_ARG,
			 "tensor-parallel shards", "weft_model_gather_whole");
		st = weft_model_gather_whole(j.model, &whole);
		if (!st && rank == 0)
			st = weft_model_save_safetensors(whole, c->save);
		weft_model_free(whole);
	}
out:
	job_free(&j);
	return st;
}

/* ---- ranks ---- */

static int write_out(const run_out *r, const char *path)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(r, sizeof(*r), 1, f) == 1 &&
	     fwrite(r->weights, sizeof(float), (size_t)r->numel, f) == (size_t)r->numel;
	return (fclose(f) == 0 && ok) ? 0 : -1;
}

static int read_out(run_out *r, const char *path)
{
	FILE *f = fopen(path, "rb");
	int ok;

	if (!f)
		return -1;
	ok = fread(r, sizeof(*r), 1, f) == 1;
	r->weights = ok ? malloc((size_t)r->numel * sizeof(float) + 1) : NULL;
	ok = ok && r->weights &&
	     fread(r->weights, sizeof(float), (size_t)r->numel, f) == (size_t)r->numel;
	fclose(f);
	return ok ? 0 : -1;
}

static int rank_main(char **argv)
{
	run_cfg c = { .strategy = "tp", .tp = atoi(argv[2]), .dp = atoi(argv[3]),
		      .sp = atoi(argv[4]), .batch = ROWS, .clip = atof(argv[6]),
		      .plan = atoi(argv[7]) };
	run_out r;
	char path[600], save[600];
	const char *env_rank = getenv("WEFT_RANK");
	weft_status st;

	snprintf(save, sizeof(save), "%s-whole.safetensors", argv[5]);
	c.save = save;
	st = run(&c, &r);
	if (st || wt_failures) {
		fprintf(stderr, "rank failed: %s: %s\n", weft_status_str(st), weft_error_last());
		return 3;
	}
	snprintf(path, sizeof(path), "%s-rank%s.bin", argv[5], env_rank ? env_rank : "0");
	st = write_out(&r, path) ? WEFT_ERR_IO : WEFT_OK;
	free(r.weights);
	return st ? 1 : 0;
}

/* ---- equivalence ---- */

/* split: the sub-layers (attention or MLP) the plan splits, of 2 per
 * block; a whole one runs no collective without sequence parallelism and,
 * with it, one all-gather per pass (its input gathered in forward, its
 * output's gradient in backward) in place of the split one's all-gather
 * and reduce-scatter. */
static void check_comm(const run_out *r, int tp, int sp, int split)
{
	int64_t bsh = (int64_t)ROWS * SEQ * N_EMBD;
	const weft_tp_stats *s = &r->stats;

	if (!sp) {
		for (int pass = 0; pass < 2; pass++) {
			WT_CHECK(s->calls[pass][WEFT_TP_ALL_REDUCE] == split);
			WT_CHECK(s->elements[pass][WEFT_TP_ALL_REDUCE] == split * bsh);
			WT_CHECK(s->bytes[pass][WEFT_TP_ALL_REDUCE] == split * bsh * 4);
			WT_CHECK(s->calls[pass][WEFT_TP_ALL_GATHER] == 0);
			WT_CHECK(s->calls[pass][WEFT_TP_REDUCE_SCATTER] == 0);
		}
		return;
	}
	for (int pass = 0; pass < 2; pass++) {
		/* blocks: 2 each; plus the head's gather (forward) and the
		 * embedding split's gather (backward) */
		WT_CHECK(s->calls[pass][WEFT_TP_ALL_REDUCE] == 0);
		WT_CHECK(s->calls[pass][WEFT_TP_ALL_GATHER] == 2 * N_LAYER + 1);
		WT_CHECK(s->elements[pass][WEFT_TP_ALL_GATHER] == (2 * N_LAYER + 1) * bsh);
		WT_CHECK(s->bytes[pass][WEFT_TP_ALL_GATHER] == (2 * N_LAYER + 1) * bsh / tp * 4);
		WT_CHECK(s->calls[pass][WEFT_TP_REDUCE_SCATTER] == split);
		WT_CHECK(s->elements[pass][WEFT_TP_REDUCE_SCATTER] == split * bsh);
		WT_CHECK(s->bytes[pass][WEFT_TP_REDUCE_SCATTER] == split * bsh / tp * 4);
	}
}

/* model.safetensors of a tensor-parallel run is the whole model: it loads
 * into a whole GPT and into the shards of tp 2 and 4, giving back exactly
 * the weights gathered from the run. */
static void check_checkpoint(const char *path, const float *want, int64_t numel)
{
	weft_gpt_config gc = gpt();

	for (int T = 1; T <= 4; T *= 2) {
		float *got = calloc((size_t)numel, sizeof(float));

		WT_REQUIRE(got);
		for (int r = 0; r < T; r++) {
			weft_model_options mo = { .seed = 99, .tp_size = T, .tp_rank = r };
			weft_model *m;
			weft_params *ps;
			weft_tp_group *g;
			int64_t off = 0;

			WT_OK(weft_model_create_gpt(&gc, &mo, &m));
			WT_OK(weft_model_load_safetensors(m, path));
			ps = weft_model_params(m);
			g = weft_tp_group_find(ps);
			for (size_t i = 0; i < weft_params_count(ps); i++) {
				weft_tensor *p = weft_params_at(ps, i);
				int64_t full_shape[2];

				if (!g) {
					memcpy(got + off, p->data, weft_tensor_nbytes(p));
					off += weft_tensor_numel(p);
					continue;
				}
				weft_tp_put_shard(weft_tp_group_split(g, i, NULL, full_shape), full_shape,
						  T, r, p->data, got + off);
				off += weft_tp_full_numel(g, i);
			}
			WT_CHECK(off == numel);
			weft_model_free(m);
		}
		WT_CHECK(!memcmp(got, want, (size_t)numel * sizeof(float)));
		free(got);
	}
}

static int equiv_main(const char *self, int tp, int dp, int sp, const char *clip,
		      const char *plan)
{
	run_cfg ref_cfg = { .strategy = "single", .tp = 1, .dp = 1, .batch = (int64_t)ROWS * dp,
			    .clip = atof(clip) };
	run_out ref, r[H_MAX_RANKS];
	h_spawn_result res;
	char prefix[256], path[600], a_tp[8], a_dp[8], a_sp[8];
	char *argv[9];
	int n = tp * dp;
	int64_t where;

	snprintf(prefix, sizeof(prefix), "tp-%d-%d-%d-%d", (int)getpid(), tp, dp, sp);
	snprintf(a_tp, sizeof(a_tp), "%d", tp);
	snprintf(a_dp, sizeof(a_dp), "%d", dp);
	snprintf(a_sp, sizeof(a_sp), "%d", sp);
	argv[0] = (char *)self;
	argv[1] = "rank";
	argv[2] = a_tp;
	argv[3] = a_dp;
	argv[4] = a_sp;
	argv[5] = prefix;
	argv[6] = (char *)clip;
	argv[7] = (char *)plan;
	argv[8] = NULL;
	WT_REQUIRE(h_spawn(n, argv, 90.0, &res) == 0);
	WT_REQUIRE(!res.hung);
	for (int k = 0; k < n; k++)
		WT_REQUIRE(h_spawn_ok(&res, k));
	WT_OK(run(&ref_cfg, &ref));
	for (int k = 0; k < n; k++) {
		snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, k);
		WT_REQUIRE(read_out(&r[k], path) == 0);
		unlink(path);
	}
	for (int s = 0; s < STEPS; s++) {
		WT_CLOSE(r[0].loss[s], ref.loss[s], TOL, 0.0);
		/* with clipping: the global norm (shards summed over tp) */
		if (ref_cfg.clip > 0) {
			WT_CLOSE(r[0].rep[s].grad_norm, ref.rep[s].grad_norm, TOL, 0.0);
			WT_CHECK(ref.rep[s].grad_norm > ref_cfg.clip); /* every step clips */
		}
	}
	WT_CLOSE(r[0].eval_loss, ref.eval_loss, TOL, 0.0);
	fprintf(stderr, "  clip %s: grad norm %.4f (ref %.4f); eval loss %.6f (ref %.6f)\n", clip,
		r[0].rep[0].grad_norm, ref.rep[0].grad_norm, r[0].eval_loss, ref.eval_loss);
	fprintf(stderr, "tp %d dp %d sp %d plan %s: loss %.6f -> %.6f (ref %.6f -> %.6f)\n", tp,
		dp, sp, plan, r[0].loss[0], r[0].loss[STEPS - 1], ref.loss[0],
		ref.loss[STEPS - 1]);
	WT_REQUIRE(r[0].numel == ref.numel);
	{
		double worst = h_max_rel(r[0].weights, ref.weights, ref.numel, WEIGHT_FLOOR, &where);
		double l2 = h_rel_l2(r[0].weights, ref.weights, ref.numel);

		fprintf(stderr, "  weights: max rel %.3g (floor %g) at %lld, rel L2 %.3g\n", worst,
			WEIGHT_FLOOR, (long long)where, l2);
		WT_CHECK(worst <= TOL);
	}
	/* the weights moved, so the check above compares trained weights */
	{
		weft_gpt_config gc = gpt();
		weft_model_options mo = { .seed = 1234 };
		weft_model *m0;
		weft_tensor *flat;

		WT_OK(weft_model_create_gpt(&gc, &mo, &m0));
		weft_params_flat(weft_model_params(m0), WEFT_F32, &flat, NULL);
		WT_CHECK(weft_tensor_numel(flat) == ref.numel);
		WT_CHECK(h_rel_l2(flat->data, ref.weights, ref.numel) > 1e-3);
		weft_model_free(m0);
	}
	for (int k = 1; k < n; k++) {
		WT_CHECK(r[k].numel == r[0].numel);
		WT_CHECK(!memcmp(r[k].weights, r[0].weights, (size_t)r[0].numel * sizeof(float)));
		for (int s = 0; s < STEPS; s++)
			WT_CHECK(r[k].loss[s] == r[0].loss[s]);
	}
	for (int k = 0; k < n; k++)
		check_comm(&r[k], tp, sp, atoi(plan) ? PLAN_SPLIT : 2 * N_LAYER);
	snprintf(path, sizeof(path), "%s-whole.safetensors", prefix);
	check_checkpoint(path, r[0].weights, r[0].numel);
	unlink(path);
	for (int k = 0; k < n; k++)
		free(r[k].weights);
	free(ref.weights);
	return wt_done("test_strategy_tp");
}

/* ---- bytes of split layers ---- */

static int bytes_main(void)
{
	weft_gpt_config gc = gpt();
	weft_model_options whole = { .seed = 1234 };
	weft_model *full, *part;
	weft_params *fp;

	WT_OK(weft_model_create_gpt(&gc, &whole, &full));
	fp = weft_model_params(full);
	for (int T = 2; T <= 4; T *= 2) {
		float *assembled[64] = { 0 };
		size_t n = weft_params_count(fp);

		WT_REQUIRE(n <= 64);
		for (int r = 0; r < T; r++) {
			weft_model_options mo = { .seed = 1234, .tp_size = T, .tp_rank = r };
			weft_mem_stats m0, m1;
			int64_t split_local = 0, split_full = 0, params_bytes;
			weft_params *pp;
			weft_tp_group *g;

			weft_mem_get_stats(&m0);
			WT_OK(weft_model_create_gpt(&gc, &mo, &part));
			weft_mem_get_stats(&m1);
			pp = weft_model_params(part);
			g = weft_tp_group_find(pp);
			WT_REQUIRE(g && weft_params_count(pp) == n);
			params_bytes = 0;
			for (size_t i = 0; i < n; i++) {
				weft_tensor *p = weft_params_at(pp, i);
				weft_tensor *q = weft_params_at(fp, i);
				weft_tp_split sp = weft_tp_group_split(g, i, NULL, NULL);
				int64_t full_shape[2];

				params_bytes += (int64_t)weft_tensor_nbytes(p);
				WT_CHECK(!strcmp(p->name, q->name));
				weft_tp_group_split(g, i, NULL, full_shape);
				if (sp == WEFT_TP_REPLICATE) {
					WT_CHECK(weft_tensor_numel(p) == weft_tensor_numel(q));
					WT_CHECK(!memcmp(p->data, q->data, weft_tensor_nbytes(p)));
					continue;
				}
				split_local += (int64_t)weft_tensor_nbytes(p);
				split_full += (int64_t)weft_tensor_nbytes(q);
				WT_CHECK((int64_t)weft_tensor_nbytes(p) * T ==
					 (int64_t)weft_tensor_nbytes(q));
				if (!assembled[i])
					assembled[i] = calloc((size_t)weft_tensor_numel(q), sizeof(float));
				weft_tp_put_shard(sp, full_shape, T, r, p->data, assembled[i]);
			}
			/* c_attn w+b, c_fc w+b, two c_proj weights per block */
			WT_CHECK(split_local * T == split_full);
			WT_CHECK(split_full == N_LAYER * (int64_t)sizeof(float) *
					       (3 * N_EMBD * N_EMBD + 3 * N_EMBD + 4 * N_EMBD * N_EMBD +
						4 * N_EMBD + N_EMBD * N_EMBD + 4 * N_EMBD * N_EMBD));
			/* measured: the parameter buffer the model allocated */
			WT_CHECK(m1.current[WEFT_MEM_PARAMS] - m0.current[WEFT_MEM_PARAMS] >=
				 params_bytes);
			WT_CHECK(m1.current[WEFT_MEM_PARAMS] - m0.current[WEFT_MEM_PARAMS] <
				 params_bytes + 64 * 2);
			fprintf(stderr, "tp %d rank %d: split layers %lld of %lld bytes; params %lld "
				"bytes (accounted %lld)\n", T, r, (long long)split_local,
				(long long)split_full, (long long)params_bytes,
				(long long)(m1.current[WEFT_MEM_PARAMS] - m0.current[WEFT_MEM_PARAMS]));
			weft_model_free(part);
		}
		/* the shards of every rank put together are the whole model */
		for (size_t i = 0; i < n; i++) {
			weft_tensor *q = weft_params_at(fp, i);

			if (!assembled[i])
				continue;
			WT_CHECK(!memcmp(assembled[i], q->data, weft_tensor_nbytes(q)));
			free(assembled[i]);
		}
	}
	weft_model_free(full);
	return wt_done("test_strategy_tp");
}

/* ---- errors ---- */

/* The strategy's own checks, through the plugin as the trainer loads it:
 * a size that does not divide the world, a model built for another size,
 * a sequence-parallel mismatch. create neither blocks nor communicates, so
 * a one-process env that claims a world of 4 is enough. */
static weft_status try_create(const weft_strategy_ops *ops, const char *yaml, int world,
			      weft_model *m)
{
	weft_config *cfg = NULL;
	weft_strategy_env env = {
		.struct_size = sizeof(env),
		.world_size = world,
		.local_world_size = world,
		.device = WEFT_CPU,
		.comm_ops = (const weft_comm_ops *)ops, /* never called by create */
		.params = weft_model_params(m),
	};
	void *s = NULL;
	weft_status st = weft_config_load_string("strategy", yaml, strlen(yaml), &cfg);

	if (!st)
		st = ops->create(weft_config_root(cfg), &env, &s);
	if (!st)
		st = weft_config_check_unused(cfg);
	if (s)
		ops->destroy(s);
	weft_config_free(cfg);
	return st;
}

/* A communicator that only answers size and rank, for bind's checks. */
static int32_t fake_size(const weft_comm *c)
{
	(void)c;
	return 4;
}

static int32_t fake_rank(const weft_comm *c)
{
	(void)c;
	return 1;
}

/* A tp model used without a bound communicator, or bound to one of the
 * wrong size or rank, says so. */
static void group_errors(void)
{
	weft_gpt_config gc = gpt();
	weft_model_options mo = { .seed = 1, .tp_size = 2, .tp_rank = 1 };
	weft_comm_ops fake = { .size = fake_size, .rank = fake_rank };
	int64_t shape[2] = { 1, SEQ };
	weft_model *m;
	weft_ctx *ctx;
	weft_ctx_options co = { .seed = 1 };
	weft_tensor *ids, *out = NULL;
	weft_tp_group *g;

	WT_OK(weft_model_create_gpt(&gc, &mo, &m));
	WT_OK(weft_ctx_create(&co, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I64, 2, shape, &ids));
	WT_FAILS(weft_model_forward(m, ctx, ids, &out), WEFT_ERR_INVALID_ARG,
		 "no communicator is bound", "strategy tp");
	g = weft_tp_group_find(weft_model_params(m));
	WT_REQUIRE(g);
	WT_FAILS(weft_tp_group_bind(g, &fake, (weft_comm *)&fake), WEFT_ERR_INVALID_ARG,
		 "built for 2 tensor-parallel ranks", "communicator has 4");
	WT_FAILS(weft_model_save_safetensors(m, "unused.safetensors"), WEFT_ERR_INVALID_ARG,
		 "tensor-parallel shards");
	weft_ctx_free(ctx);
	weft_model_free(m);
}

static int strategy_errors(void)
{
	weft_gpt_config gc = gpt();
	weft_model_options whole = { .seed = 1 }, split = { .seed = 1, .tp_size = 2 };
	weft_model *m, *m2;
	weft_registry *reg;
	const void *vt;

	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_default_paths(reg));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "tp", &vt, NULL));
	WT_OK(weft_model_create_gpt(&gc, &whole, &m));
	WT_OK(weft_model_create_gpt(&gc, &split, &m2));
	WT_FAILS(try_create(vt, "{name: tp, size: 3}", 4, m), WEFT_ERR_CONFIG, "size 3",
		 "world size 4", "strategy:1:");
	WT_FAILS(try_create(vt, "{name: tp, size: 2}", 4, m), WEFT_ERR_CONFIG,
		 "built for tensor-parallel size 1", "tp_size = 2");
	WT_FAILS(try_create(vt, "{name: tp, size: 2, sequence_parallel: true}", 2, m2),
		 WEFT_ERR_CONFIG, "sequence_parallel is true", "without");
	WT_FAILS(try_create(vt, "{name: tp, size: 2, sizes: 1}", 2, m2), WEFT_ERR_CONFIG,
		 "sizes");
	WT_FAILS(try_create(vt, "{name: tp, size: 2, plan: {\"*.c_attn\": sideways}}", 2, m2),
		 WEFT_ERR_CONFIG, "strategy:1:", "'sideways' for '*.c_attn' is not a style");
	WT_FAILS(try_create(vt, "{name: tp, size: 2, plan: [colwise]}", 2, m2), WEFT_ERR_CONFIG,
		 "plan must be a mapping");
	WT_OK(try_create(vt, "{name: tp, size: 2}", 2, m2));
	weft_model_free(m2);
	weft_model_free(m);
	weft_registry_free(reg);
	return wt_done("test_strategy_tp");
}

static int errors_main(void)
{
	weft_gpt_config gc = gpt();
	weft_model_options mo = { .seed = 1, .tp_size = 4, .tp_rank = 0 };
	weft_model *m = NULL;

	gc.n_head = 6;
	gc.n_embd = 36;
	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_CONFIG, "n_head 6",
		 "tensor-parallel size 4");
	gc.n_head = 3;
	gc.n_embd = 30;
	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_CONFIG, "n_embd 30",
		 "tensor-parallel size 4");
	WT_CHECK(m == NULL);
	gc = gpt();
	mo.tp_rank = 4;
	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_INVALID_ARG, "tp_rank 4");
	/* plans the model cannot follow */
	mo.tp_rank = 0;
	mo.tp_plan = "*.c_attn=colwise";
	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_CONFIG,
		 "transformer.h.0.attn.c_attn is colwise", "attn.c_proj is replicate",
		 "colwise and rowwise, or both replicate");
	mo.tp_plan = "*.c_attn=rowwise\n*.c_proj=colwise";
	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_CONFIG, "c_attn is rowwise");
	mo.tp_plan = "*.c_attn=colwise\n*.c_fc=colwise\n*.c_proj=rowwise\nlm_head=colwise";
	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_CONFIG,
		 "'lm_head=colwise' matches no Linear");
	mo.tp_plan = "*.c_attn=sideways";
	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_CONFIG,
		 "must be colwise, rowwise or replicate");
	mo.tp_plan = NULL;
	group_errors();
	return strategy_errors();
}

int main(int argc, char **argv)
{
	if (argc >= 8 && !strcmp(argv[1], "rank"))
		return rank_main(argv);
	if (argc >= 5 && !strcmp(argv[1], "equiv"))
		return equiv_main(argv[0], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]),
				  argc >= 6 ? argv[5] : "0", argc >= 7 ? argv[6] : "0");
	if (argc >= 2 && !strcmp(argv[1], "bytes"))
		return bytes_main();
	if (argc >= 2 && !strcmp(argv[1], "errors"))
		return errors_main();
	fprintf(stderr, "usage: %s equiv TP DP SP [CLIP [PLAN]] | bytes | errors\n", argv[0]);
	return 2;
}
