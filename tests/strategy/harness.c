/* The strategy test harness (harness.h), its inside: a small trainer
 * around one strategy plugin (models, data, the env's callbacks, the run).
 * Result files, comparisons and the spawner are in harness_io.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nn/act_ckpt.h"
#include "train/model_stream.h"

#include "dist/dist.h"
#include "dist/pg.h"
#include "pipeline/stage.h"
#include "tp/tp.h"
#include "plugin/registry.h"
#include "train/optim_state.h"
#include "weft/config.h"
#include "weft/ops.h"

/* ---- models ----------------------------------------------------------- */

typedef struct h_model {
	const h_config *c;
	int rank;
	weft_model *m;          /* MLP / GPT */
	weft_params *ps;        /* TOY: its own parameter set */
	weft_tensor *w1, *b1, *w2, *b2, *extra;
	weft_ctx *ctx;
	int skip_extra;
} h_model;

enum { TOY_IN = 16, TOY_HID = 8, TOY_OUT = 4 };

static weft_gpt_config gpt_config(const h_config *c)
{
	return (weft_gpt_config){
		.n_layer = c->gpt_n_layer ? c->gpt_n_layer : 2,
		.n_head = c->gpt_n_head ? c->gpt_n_head : 2,
		.n_embd = c->gpt_n_embd ? c->gpt_n_embd : 32,
		.vocab_size = c->gpt_vocab ? c->gpt_vocab : 64,
		.block_size = c->gpt_block ? c->gpt_block : 16,
		.bias = 1,
		.dropout = c->dropout,
	};
}

static weft_status toy_param(weft_params *ps, const char *name, int32_t ndim, const int64_t *shape,
			     weft_tensor **out)
{
	return weft_params_add(ps, name, WEFT_F32, ndim, shape, out);
}

static void toy_init(weft_tensor *t, uint64_t seed, uint64_t salt, double bound)
{
	float *d = t->data;
	int64_t n = weft_tensor_numel(t);
	uint64_t key = weft_rng_hash(seed, salt);

	for (int64_t j = 0; j < n; j++)
		d[j] = (float)((2.0 * weft_rng_uniform(key, (uint64_t)j) - 1.0) * bound);
}

static weft_status toy_create(h_model *hm)
{
	const int64_t s_w1[2] = { TOY_HID, TOY_IN }, s_b1[1] = { TOY_HID };
	const int64_t s_w2[2] = { TOY_OUT, TOY_HID }, s_b2[1] = { TOY_OUT };
	weft_status st;

	st = weft_params_create(WEFT_CPU, &hm->ps);
	if (!st)
		st = toy_param(hm->ps, "layers.0.weight", 2, s_w1, &hm->w1);
	if (!st)
		st = toy_param(hm->ps, "layers.0.bias", 1, s_b1, &hm->b1);
	if (!st)
		st = toy_param(hm->ps, "layers.1.weight", 2, s_w2, &hm->w2);
	if (!st)
		st = toy_param(hm->ps, "layers.1.bias", 1, s_b2, &hm->b2);
	if (!st && hm->c->toy_unused)
		st = toy_param(hm->ps, "unused.weight", 1, s_b2, &hm->extra);
	if (!st)
		st = weft_params_finalize(hm->ps, 1);
	if (st)
		return st;
	toy_init(hm->w1, hm->c->seed, 1, 1.0 / sqrt(TOY_IN));
	toy_init(hm->b1, hm->c->seed, 2, 1.0 / sqrt(TOY_IN));
	toy_init(hm->w2, hm->c->seed, 3, 1.0 / sqrt(TOY_HID));
	toy_init(hm->b2, hm->c->seed, 4, 1.0 / sqrt(TOY_HID));
	if (hm->extra)
		toy_init(hm->extra, hm->c->seed, 5, 0.1);
	return WEFT_OK;
}

/* A transformer of a named preset at the harness's GPT shape, through the
 * model section a config file would hold. */
static weft_status preset_create(const h_config *c, const weft_gpt_config *g,
				 const weft_model_options *mo, weft_model **out)
{
	weft_config *cfg = NULL;
	char text[640];
	int n = snprintf(text, sizeof(text), "{preset: %s, n_layer: %lld, n_head: %lld, "
			 "n_embd: %lld, vocab_size: %lld, block_size: %lld, dropout: %g",
			 c->gpt_preset, (long long)g->n_layer, (long long)g->n_head,
			 (long long)g->n_embd, (long long)g->vocab_size,
			 (long long)g->block_size, g->dropout);
	weft_status st;

	if (c->gpt_kv_head)
		n += snprintf(text + n, sizeof(text) - (size_t)n, ", n_kv_head: %lld",
			      (long long)c->gpt_kv_head);
	if (c->gpt_inter)
		n += snprintf(text + n, sizeof(text) - (size_t)n, ", intermediate_size: %lld",
			      (long long)c->gpt_inter);
	n += snprintf(text + n, sizeof(text) - (size_t)n, "}");
	st = weft_config_load_string("harness model", text, (size_t)n, &cfg);
	if (!st)
		st = weft_model_from_config(weft_config_root(cfg), mo, out);
	weft_config_free(cfg);
	return st;
}

weft_status h_model_create(const h_config *c, const weft_model_options *mo, weft_model **out)
{
	weft_gpt_config gc = gpt_config(c);

	if (c->gpt_preset)
		return preset_create(c, &gc, mo, out);
	return weft_model_create_gpt(&gc, mo, out);
}

/* no_grads: the strategy's build plan asks for no gradient buffers (the
 * trainer honours it the same way). */
static weft_status model_create(const h_config *c, int rank, int no_grads, h_model *hm)
{
	weft_model_options mo = { .device = WEFT_CPU, .seed = c->seed, .no_grads = no_grads };
	weft_ctx_options co = { .device = WEFT_CPU, .seed = c->seed };
	weft_status st;

	memset(hm, 0, sizeof(*hm));
	hm->c = c;
	hm->rank = rank;
	if (c->gpt_tp > 1) {
		mo.tp_size = c->gpt_tp;
		mo.tp_rank = rank % c->gpt_tp;
		mo.tp_flags = c->gpt_tp_flags;
	}
	hm->skip_extra = c->toy_unused &&
			 (c->toy_unused_rank < 0 || c->toy_unused_rank == rank);
	switch (c->model) {
	case H_MODEL_TOY:
		st = toy_create(hm);
		break;
	case H_MODEL_MLP: {
		weft_mlp_config mc = { .in_features = 784, .hidden = { 64 }, .n_hidden = 1,
				       .out_features = 10, .activation = WEFT_ACT_RELU };

		st = weft_model_create_mlp(&mc, &mo, &hm->m);
		break;
	}
	case H_MODEL_GPT: {
		st = h_model_create(c, &mo, &hm->m);
		if (!st)
			st = weft_model_set_activation_checkpointing(hm->m,
								     (weft_act_ckpt)c->act_ckpt);
		break;
	}
	default:
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "harness: unknown model %d", c->model);
	}
	if (st)
		return st;
	if (hm->m)
		hm->ps = weft_model_params(hm->m);
	return weft_ctx_create(&co, &hm->ctx);
}

static void model_free(h_model *hm)
{
	weft_ctx_free(hm->ctx);
	if (hm->m)
		weft_model_free(hm->m);
	else
		weft_params_free(hm->ps);
	memset(hm, 0, sizeof(*hm));
}

/* The loss of one batch (recorded when grad is on); the logits in *logits. */
static weft_status model_loss(h_model *hm, const weft_batch *b, weft_tensor **loss,
			      weft_tensor **logits)
{
	weft_tensor *h, *a, *y;
	weft_status st;

	if (hm->m) {
		weft_model_output out;

		st = weft_model_loss(hm->m, hm->ctx, b, &out);
		*loss = out.loss;
		*logits = out.logits;
		return st;
	}
	st = weft_op_linear(hm->ctx, b->inputs, hm->w1, hm->b1, &h);
	if (!st)
		st = weft_op_relu(hm->ctx, h, &a);
	if (!st)
		st = weft_op_linear(hm->ctx, a, hm->w2, hm->b2, &y);
	if (!st && hm->extra && !hm->skip_extra)
		st = weft_op_bias(hm->ctx, y, hm->extra, &y);
	if (!st)
		st = weft_op_cross_entropy(hm->ctx, y, b->targets, -100, loss);
	*logits = y;
	return st;
}

static weft_status model_forward_backward(h_model *hm, const weft_micro_batch *b, double scale,
					  double *loss)
{
	weft_tensor *l, *logits, *scaled;
	weft_status st;

	weft_ctx_set_rng(hm->ctx, hm->c->seed, b->row_offset);
	st = model_loss(hm, &b->data, &l, &logits);
	if (st)
		return st;
	*loss = ((const float *)l->data)[0];
	st = weft_op_scale(hm->ctx, l, (float)scale, &scaled);
	if (st)
		return st;
	return weft_backward(hm->ctx, scaled);
}

/* ---- the trainer side of the env ---------------------------------------- */

typedef struct h_trainer {
	const h_config *c;
	h_model main;
	int rank;
} h_trainer;

static weft_status cb_forward_backward(void *tr, const weft_micro_batch *b, double scale,
				       double *loss)
{
	return model_forward_backward(&((h_trainer *)tr)->main, b, scale, loss);
}

static weft_status cb_evaluate(void *tr, const weft_micro_batch *b, weft_eval_report *rep)
{
	h_trainer *t = tr;
	weft_tensor *l, *logits;
	int prev = weft_ctx_set_grad_enabled(t->main.ctx, 0);
	weft_status st = model_loss(&t->main, &b->data, &l, &logits);

	weft_ctx_set_grad_enabled(t->main.ctx, prev);
	if (st)
		return st;
	rep->loss_sum += ((const float *)l->data)[0] * (double)b->rows;
	rep->rows += b->rows;
	return WEFT_OK;
}

static weft_status cb_replica_create(void *tr, int32_t index, weft_device dev, void **replica,
				     weft_params **params, weft_ctx **ctx)
{
	h_trainer *t = tr;
	h_model *hm = calloc(1, sizeof(*hm));
	weft_status st;

	(void)index;
	(void)dev;
	if (!hm)
		return weft_error_set(WEFT_ERR_NOMEM, "harness: replica");
	st = model_create(t->c, t->rank, 0, hm);
	if (st) {
		model_free(hm);
		free(hm);
		return st;
	}
	*replica = hm;
	*params = hm->ps;
	*ctx = hm->ctx;
	return WEFT_OK;
}

static weft_status cb_replica_forward_backward(void *tr, void *replica, const weft_micro_batch *b,
					       double scale, double *loss)
{
	h_trainer *t = tr;

	return model_forward_backward(replica ? replica : &t->main, b, scale, loss);
}

static void cb_replica_free(void *tr, void *replica)
{
	(void)tr;
	if (!replica)
		return;
	model_free(replica);
	free(replica);
}

/* Pipeline stages of the GPT (env->stage_create ..., appended for pp):
 * core/pipeline/stage.h, as the trainer builds and runs them. */
static weft_status cb_stage_create(void *tr, uint32_t parts, int64_t layer_begin,
				   int64_t layer_end, void **stage, weft_params **params)
{
	h_trainer *t = tr;
	weft_model_options mo = { .device = WEFT_CPU, .seed = t->c->seed };

	if (!t->main.m)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "harness: only the GPT has stages");
	return weft_pp_stage_create(t->main.m, &mo, parts, layer_begin, layer_end,
				    (weft_pp_stage **)stage, params);
}

static weft_status cb_stage_forward(void *tr, void *stage, weft_ctx *ctx,
				    const weft_micro_batch *b, weft_tensor *x, int train,
				    double loss_scale, weft_tensor **out, double *loss,
				    weft_eval_report *rep)
{
	h_trainer *t = tr;

	return weft_pp_stage_forward(stage, ctx, t->c->seed, 0, b, x, train, loss_scale, out,
				     loss, rep);
}

static void cb_stage_free(void *tr, void *stage)
{
	(void)tr;
	weft_pp_stage_free(stage);
}

/* ---- data --------------------------------------------------------------- */

/* Rows [row0, row0 + rows) of global micro-batch m of step s into x, y. */
static void fill_batch(const h_config *c, int s, int m, int64_t row0, weft_tensor *x,
		       weft_tensor *y)
{
	uint64_t key = weft_rng_hash(c->seed ^ 0xda7a, (uint64_t)s * H_MAX_MICRO + (uint64_t)m);
	int64_t rows = x->shape[0];

	if (c->model == H_MODEL_GPT) {
		weft_gpt_config g = gpt_config(c);
		int64_t T = g.block_size, *xi = x->data, *yi = y->data;

		for (int64_t r = 0; r < rows; r++)
			for (int64_t j = 0; j < T; j++) {
				uint64_t k = (uint64_t)((row0 + r) * T + j);

				xi[r * T + j] = (int64_t)(weft_rng_hash(key, 2 * k) % (uint64_t)g.vocab_size);
				yi[r * T + j] = (int64_t)(weft_rng_hash(key, 2 * k + 1) %
							  (uint64_t)g.vocab_size);
			}
		return;
	}
	{
		int64_t in = c->model == H_MODEL_MLP ? 784 : TOY_IN;
		int64_t classes = c->model == H_MODEL_MLP ? 10 : TOY_OUT;
		float *xf = x->data;
		int64_t *yi = y->data;

		for (int64_t r = 0; r < rows; r++) {
			for (int64_t j = 0; j < in; j++)
				xf[r * in + j] = weft_rng_uniform(key, (uint64_t)((row0 + r) * in + j));
			yi[r] = (int64_t)(weft_rng_hash(key ^ 0x7a, (uint64_t)(row0 + r)) %
					  (uint64_t)classes);
		}
	}
}

static weft_status alloc_batch(const h_config *c, int64_t rows, weft_tensor **x, weft_tensor **y)
{
	int64_t sx[2], sy[2];
	int32_t nx = 2, ny = 1;
	weft_dtype xdt = WEFT_F32;

	sx[0] = sy[0] = rows;
	if (c->model == H_MODEL_GPT) {
		sx[1] = sy[1] = gpt_config(c).block_size;
		ny = 2;
		xdt = WEFT_I64;
	} else {
		sx[1] = c->model == H_MODEL_MLP ? 784 : TOY_IN;
	}
	if (weft_tensor_alloc("x", xdt, nx, sx, WEFT_CPU, WEFT_MEM_OTHER, x))
		return WEFT_ERR_NOMEM;
	return weft_tensor_alloc("y", WEFT_I64, ny, sy, WEFT_CPU, WEFT_MEM_OTHER, y);
}

/* ---- the run ---------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct h_job {
	weft_dist_env de;
	weft_store_client *store;
	weft_pg *pg;
	weft_registry *reg;
	weft_config *optim_cfg, *strat_cfg, *comm_cfg;
	const weft_optim_ops *optim_ops;
	void *optim;
	const weft_strategy_ops *sops;
	void *strat;
	weft_optim_segment *segs;
	weft_tensor *x[H_MAX_MICRO], *y[H_MAX_MICRO];
	h_trainer tr;
} h_job;

static weft_status job_comm(h_job *j, const h_config *c)
{
	const void *vt;
	int64_t tmo = 30000;
	weft_status st;

	st = weft_dist_env_detect(&j->de);
	if (st || j->de.source == WEFT_DIST_SINGLE)
		return st;
	st = weft_store_connect(j->de.store_host, j->de.store_port, j->de.secret, tmo, &j->store);
	if (!st)
		st = weft_registry_find(j->reg, WEFT_PLUGIN_COMM, "gloo", &vt, NULL);
	if (!st && c->comm_options)
		st = weft_config_load_string("comm_options", c->comm_options,
					     strlen(c->comm_options), &j->comm_cfg);
	if (!st)
		st = weft_pg_create_opts(vt, j->store, j->de.rank, j->de.world_size, "world", tmo,
					 "127.0.0.1", j->comm_cfg ? weft_config_root(j->comm_cfg) :
								    NULL, &j->pg);
	/* strategies may split it (host->comm_split), as the trainer's */
	if (!st)
		st = weft_tp_comm_register(j->pg);
	return st;
}

static weft_status job_optim(h_job *j, const h_config *c)
{
	char text[128];
	const void *vt;
	weft_params *ps = j->tr.main.ps;
	size_t n = weft_params_count(ps);
	weft_tensor *flat;
	weft_status st;

	if (c->lion)
		snprintf(text, sizeof(text), "{name: lion, lr: %.17g}", c->lr);
	else if (c->sgd)
		snprintf(text, sizeof(text), "{name: sgd, lr: %.17g, momentum: 0.9}", c->lr);
	else
		snprintf(text, sizeof(text), "{name: adamw, lr: %.17g, weight_decay: 0.1, eps: %.17g}",
			 c->lr, c->adam_eps > 0 ? c->adam_eps : 1e-8);
	st = weft_registry_find(j->reg, WEFT_PLUGIN_OPTIM,
				c->lion ? "lion" : c->sgd ? "sgd" : "adamw", &vt, NULL);
	if (!st)
		st = weft_config_load_string("optimizer", text, strlen(text), &j->optim_cfg);
	if (st)
		return st;
	j->optim_ops = vt;
	st = j->optim_ops->create(weft_config_root(j->optim_cfg), &j->optim);
	if (st)
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

static void job_free(h_job *j)
{
	if (j->sops && j->strat)
		j->sops->destroy(j->strat);
	for (int m = 0; m < H_MAX_MICRO; m++) {
		weft_tensor_free(j->x[m]);
		weft_tensor_free(j->y[m]);
	}
	if (j->optim_ops && j->optim)
		j->optim_ops->destroy(j->optim);
	free(j->segs);
	model_free(&j->tr.main);
	if (j->pg)
		weft_tp_comm_unregister(j->pg);
	weft_pg_destroy(j->pg);
	weft_store_client_close(j->store);
	weft_config_free(j->strat_cfg);
	weft_config_free(j->optim_cfg);
	weft_config_free(j->comm_cfg);
	weft_registry_free(j->reg);
}

/* ---- checkpoints (save_dir / load_dir, appended for zero) ------------- */

static weft_status job_gather(h_job *j, int gather)
{
	if (!WEFT_HAS_MEMBER(j->sops, weft_strategy_ops, gather_params) || !j->sops->gather_params)
		return WEFT_OK;
	return j->sops->gather_params(j->strat, gather);
}

static weft_status job_barrier(h_job *j)
{
	const weft_comm_ops *ops = j->pg ? weft_pg_ops(j->pg) : NULL;

	return ops ? ops->barrier(weft_pg_comm(j->pg), NULL) : WEFT_OK;
}

/* Every range of this rank's optimizer state, written or read in global
 * flat coordinates (train/optim_state.h), as the trainer's checkpoints do. */
static weft_status job_optim_io(h_job *j, const char *dir, int write)
{
	weft_strategy_state ss = { .struct_size = sizeof(ss) };
	char path[600];
	int64_t total = weft_params_numel(j->tr.main.ps, WEFT_F32), at = 0;
	int fd;
	weft_status st = j->sops->state(j->strat, &ss);

	if (st)
		return st;
	snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
	fd = open(path, write ? O_WRONLY : O_RDONLY);
	if (fd < 0)
		return weft_error_set(WEFT_ERR_IO, "harness: cannot open %s: %s", path,
				      strerror(errno));
	for (uint32_t i = 0; !st && i < (ss.n_ranges ? ss.n_ranges : 1); i++) {
		int64_t b = ss.n_ranges ? ss.ranges[2 * i] : ss.begin;
		int64_t e = ss.n_ranges ? ss.ranges[2 * i + 1] : ss.end;
		float *sl[8];

		for (uint32_t k = 0; k < ss.n_slots && k < 8; k++)
			sl[k] = ss.slots[k] + at;
		st = write ? weft_optim_state_write(fd, path, 0, total, ss.n_slots,
						    (const float *const *)sl, b, e) :
			     weft_optim_state_read(fd, path, 0, total, ss.n_slots, sl, b, e);
		at += e - b;
	}
	close(fd);
	return st;
}

static weft_status job_save(h_job *j, const char *dir, int rank)
{
	weft_strategy_state ss = { .struct_size = sizeof(ss) };
	char path[600];
	weft_status st = j->sops->state(j->strat, &ss);

	if (!st && rank == 0) {
		int fd;

		snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || ftruncate(fd, weft_optim_state_bytes(ss.n_slots,
					weft_params_numel(j->tr.main.ps, WEFT_F32))) != 0)
			st = weft_error_set(WEFT_ERR_IO, "harness: cannot create %s", path);
		if (fd >= 0)
			close(fd);
	}
	if (!st)
		st = job_barrier(j);
	if (!st)
		st = job_optim_io(j, dir, 1);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	/* as the trainer saves: streamed when the strategy can, else whole */
	if (!st && j->tr.main.m && weft_model_stream_available(j->sops)) {
		weft_model_meta meta;

		weft_model_st_meta(j->tr.main.m, &meta);
		st = weft_model_stream_save(j->sops, j->strat, j->tr.main.ps, &meta, rank == 0,
					    path);
		if (!st && j->tr.c->save_whole_too) {
			snprintf(path, sizeof(path), "%s/model.whole.safetensors", dir);
			st = job_gather(j, 1);
			if (!st && rank == 0)
				st = weft_model_save_safetensors(j->tr.main.m, path);
			if (!st)
				st = job_gather(j, 0);
		}
	} else if (!st) {
		st = job_gather(j, 1);
		if (!st && rank == 0 && j->tr.main.m)
			st = weft_model_save_safetensors(j->tr.main.m, path);
		if (!st)
			st = job_gather(j, 0);
	}
	if (!st)
		st = job_barrier(j);
	return st;
}

static weft_status job_load(h_job *j, const char *dir)
{
	char path[600];
	weft_status st = job_gather(j, 1);

	if (!st && j->tr.main.m) {
		snprintf(path, sizeof(path), "%s/model.safetensors", dir);
		st = weft_model_load_safetensors(j->tr.main.m, path);
	}
	if (!st)
		st = job_gather(j, 0);
	if (!st)
		st = job_optim_io(j, dir, 0);
	return st;
}

weft_status h_run(const h_config *c, h_result *out)
{
	h_job j;
	weft_strategy_env env;
	const void *vt;
	const weft_cfg *section = NULL;
	int rank = 0, world = 1, data_rank = 0, no_grads = 0;
	int64_t rows;
	double t_steps = 0.0;
	weft_status st;

	memset(&j, 0, sizeof(j));
	memset(out, 0, sizeof(*out));
	weft_cpu_set_threads(c->threads > 0 ? c->threads : 1);
	st = weft_registry_create(&j.reg);
	if (!st)
		st = weft_registry_add_default_paths(j.reg);
	if (!st)
		st = job_comm(&j, c);
	if (st)
		goto out;
	if (j.pg) {
		rank = weft_pg_rank(j.pg);
		world = weft_pg_size(j.pg);
	}
	j.tr.c = c;
	j.tr.rank = rank;
	st = weft_registry_find(j.reg, WEFT_PLUGIN_STRATEGY, c->strategy, &vt, NULL);
	if (!st && c->strategy_yaml) {
		st = weft_config_load_string("strategy", c->strategy_yaml, strlen(c->strategy_yaml),
					     &j.strat_cfg);
		section = st ? NULL : weft_config_root(j.strat_cfg);
	}
	if (st)
		goto out;
	j.sops = vt;
	/* the model as the trainer builds it: the build plan's no_grads (the
	 * harness sets tensor parallelism itself, from c). A plan that
	 * refuses the job leaves the model with gradients: the error tests
	 * build jobs the trainer would refuse there, to reach setup's checks */
	if (WEFT_HAS_MEMBER(j.sops, weft_strategy_ops, plan) && j.sops->plan) {
		weft_model_options pmo = { .device = WEFT_CPU, .seed = c->seed };
		int32_t dr = rank, dw = world;

		if (j.sops->plan(section, rank, world, &pmo, &dr, &dw))
			weft_error_clear();
		else
			no_grads = pmo.no_grads;
	}
	st = model_create(c, rank, no_grads, &j.tr.main);
	if (!st)
		st = job_optim(&j, c);
	if (st)
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
		.ctx = j.tr.main.ctx,
		.params = j.tr.main.ps,
		.optim_ops = j.optim_ops,
		.optim = j.optim,
		.segs = j.segs,
		.nseg = weft_params_count(j.tr.main.ps),
		.gradient_clip_val = c->clip,
		.forward_backward = cb_forward_backward,
		.evaluate = cb_evaluate,
		.trainer = &j.tr,
		.replica_create = cb_replica_create,
		.replica_forward_backward = cb_replica_forward_backward,
		.replica_free = cb_replica_free,
		.n_devices = c->devices > 0 ? c->devices : 1,
		.stage_create = cb_stage_create,
		.stage_forward = cb_stage_forward,
		.stage_free = cb_stage_free,
	};
	if (c->env_world_size) {
		env.world_size = c->env_world_size;
		env.comm_ops = NULL;
		env.world = NULL;
	}
	if (c->env_no_replicas)
		env.replica_create = NULL;
	if (c->env_cuda)
		env.device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
	rows = c->batch + (c->uneven_rank > 0 && c->uneven_rank == rank ? 1 : 0);
	st = j.sops->create(section, &env, &j.strat);
	if (!st)
		st = j.sops->setup(j.strat);
	for (int m = 0; !st && m < c->n_micro; m++)
		st = alloc_batch(c, rows, &j.x[m], &j.y[m]);
	if (!st && c->load_dir)
		st = job_load(&j, c->load_dir);
	if (st)
		goto out;
	{
		weft_mem_stats ms;

		weft_mem_get_stats(&ms);
		out->setup_peak_total = ms.peak_total;
		memcpy(out->setup_current, ms.current, sizeof(out->setup_current));
	}
	weft_mem_reset_peaks();
	data_rank = c->data_ranks > 0 ?
		    (rank / (c->data_stride > 0 ? c->data_stride : 1)) % c->data_ranks : rank;
	out->rank = rank;
	out->world = world;
	out->tokens_per_step = c->batch * world * c->n_micro *
			       (c->model == H_MODEL_GPT ? gpt_config(c).block_size : 1);
	for (int s = 0; s < c->steps && s < H_MAX_STEPS; s++) {
		weft_micro_batch mb[H_MAX_MICRO];
		int gs = c->first_step + s; /* the global step: data and optimizer */
		weft_step_input in = {
			.struct_size = sizeof(in),
			.micro = mb,
			.n_micro = (size_t)c->n_micro,
			.optim = { .struct_size = sizeof(weft_optim_step_info), .step = gs + 1,
				   .lr = c->lr, .grad_scale = 1.0 },
		};
		weft_step_report *rep = &out->rep[s];
		double t0, c0;

		for (int m = 0; m < c->n_micro; m++) {
			fill_batch(c, gs, m, (int64_t)data_rank * c->batch, j.x[m], j.y[m]);
			mb[m] = (weft_micro_batch){
				.data = { .inputs = j.x[m], .targets = j.y[m] },
				.rows = rows,
				.row_offset = (int64_t)data_rank * c->batch,
			};
		}
		memset(rep, 0, sizeof(*rep));
		rep->struct_size = sizeof(*rep);
		if (c->mem_peaks_after > 0 && s == c->mem_peaks_after)
			weft_mem_reset_peaks();
		t0 = now_s();
		c0 = cpu_s();
		st = j.sops->train_step(j.strat, &in, rep);
		out->step_seconds[s] = now_s() - t0;
		out->step_cpu_seconds[s] = cpu_s() - c0;
		t_steps += out->step_seconds[s];
		if (st)
			goto out;
		out->loss[s] = rep->loss;
		out->steps = s + 1;
	}
	out->seconds = t_steps;
	if (c->save_dir) {
		weft_mem_stats ms;

		weft_mem_get_stats(&ms);
		st = job_save(&j, c->save_dir, rank);
		if (st)
			goto out;
		if (c->mem_peak_with_save)
			weft_mem_get_stats(&ms);
		memcpy(out->mem_peak, ms.peak, sizeof(out->mem_peak));
	} else {
		weft_mem_stats ms;

		weft_mem_get_stats(&ms);
		memcpy(out->mem_peak, ms.peak, sizeof(out->mem_peak));
	}
	st = job_gather(&j, 1);
	if (st)
		goto out;
	{
		weft_tensor *flat;

		weft_params_flat(j.tr.main.ps, WEFT_F32, &flat, NULL);
		out->numel = weft_tensor_numel(flat);
		out->weights = malloc((size_t)out->numel * sizeof(float));
		if (!out->weights) {
			st = WEFT_ERR_NOMEM;
			goto out;
		}
		memcpy(out->weights, flat->data, (size_t)out->numel * sizeof(float));
	}
out:
	job_free(&j);
	return st;
}
