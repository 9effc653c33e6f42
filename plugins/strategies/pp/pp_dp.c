/* The dp replicas of a hybrid mesh (strategy "hybrid", pp.h).
 *
 * Every rank of one dp group holds the same stages and reads different
 * rows. After the pipeline flush (and the tied embedding's sum) each chunk's
 * gradients are averaged over the group (one all-reduce per chunk), which
 * makes them those of the global batch when every replica has as many
 * rows. dp_strategy ddp: each replica then steps all its parameters, with
 * optimizer state for all of them. zero_1: each piece of a chunk is cut
 * into dp equal shards; a replica keeps optimizer state for its shard
 * only, steps it, and the shards are all-gathered back into every
 * replica's parameters (ZeRO stage 1; gradients are all-reduced whole, so
 * it moves 1.5 times ddp's bytes for 1/dp of the optimizer state).
 *
 * Device memory. The gradients, parameters and the zero_1 gather buffer
 * live on the model's device; the collectives take them as buffers of
 * that device (gloo stages CUDA buffers through host memory, nccl takes
 * them as they are) and every copy between them is the kernel table's
 * copy_ranges on the model's context, so no element is touched by host
 * code. Off the CPU the context is synchronized before each collective:
 * the kernels that wrote its input (the tied embedding's axpy, the
 * optimizer step, the shard's copy) are done whatever stream the backend
 * reads on. On the CPU the copies are the loops they were, bit for bit. */
#include <string.h>

#include "pp.h"

static weft_comm_buf f32(const pp_strategy *s, float *data, int64_t n)
{
	return (weft_comm_buf){ .data = data, .count = n, .dtype = WEFT_COMM_F32,
				.device = (weft_comm_device)s->g.device_type,
				.device_index = s->g.device_index };
}

/* Off the CPU: waits for the work issued on the model's context. */
static weft_status settle(pp_strategy *s, const char *before)
{
	weft_status st;

	if (s->on_cpu)
		return WEFT_OK;
	st = s->k->synchronize(s->kctx);
	return st ? g_host->error_wrap(st, "strategy hybrid: waiting for the device before %s",
				       before) : WEFT_OK;
}

static size_t stage_bytes(const pp_strategy *s)
{
	return (size_t)(s->dp_stage_numel ? s->dp_stage_numel : 1) * sizeof(float);
}

void pp_dp_shard(const pp_strategy *s, pp_piece *p)
{
	int64_t len = p->end - p->begin, per, lo, hi;
	int dp = s->o.dp, k = s->mesh.dp_idx;

	if (dp == 1 || s->o.dp_strategy != PP_DP_ZERO_1) {
		p->sh_lo = p->begin;
		p->sh_hi = p->end;
		return;
	}
	per = (len + dp - 1) / dp;
	lo = per * k < len ? per * k : len;
	hi = per * (k + 1) < len ? per * (k + 1) : len;
	p->sh_lo = p->begin + lo;
	p->sh_hi = p->begin + hi;
}

weft_status pp_dp_setup(pp_strategy *s)
{
	int64_t most = 0;

	if (!s->dp_comm || s->o.dp_strategy != PP_DP_ZERO_1)
		return WEFT_OK;
	for (int k = 0; k < s->o.v; k++)
		for (int i = 0; i < s->chunk[k].n_pieces; i++) {
			const pp_piece *p = &s->chunk[k].piece[i];
			int64_t per = (p->end - p->begin + s->o.dp - 1) / s->o.dp;

			most = per > most ? per : most;
		}
	s->dp_stage_numel = most * s->o.dp;
	s->dp_stage = pp_dalloc(s, WEFT_MEM_COMM, stage_bytes(s), "the zero_1 gather buffer");
	if (!s->dp_stage)
		return g_host->error_wrap(WEFT_ERR_NOMEM, "strategy hybrid: zero_1 gather buffer "
					  "of %lld floats", (long long)s->dp_stage_numel);
	return WEFT_OK;
}

weft_status pp_dp_grads(pp_strategy *s, int64_t *bytes, int64_t *calls)
{
	weft_status st;

	if (!s->dp_comm)
		return WEFT_OK;
	st = settle(s, "averaging the gradients over the dp replicas");
	for (int k = 0; !st && k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];
		weft_comm_buf b = f32(s, c->grad, c->numel);

		st = s->g.ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_AVG, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy hybrid: averaging stage %d's gradients "
						  "over its %d dp replicas", c->stage, s->o.dp);
		*bytes += c->numel * (int64_t)sizeof(float);
		*calls += 1;
	}
	return st;
}

/* One piece's zero_1 gather: this rank's stepped shard into its slot of
 * the gather buffer, the all-gather, the whole piece back into the
 * chunk's parameters. */
static weft_status gather_piece(pp_strategy *s, pp_chunk *c, const pp_piece *p)
{
	int64_t len = p->end - p->begin, per = (len + s->o.dp - 1) / s->o.dp;
	weft_copy_range mine = { .dst = per * s->mesh.dp_idx,
				 .src = p->local + (p->sh_lo - p->begin),
				 .count = p->sh_hi - p->sh_lo };
	weft_copy_range back = { .dst = p->local, .src = 0, .count = len };
	weft_comm_buf sb = f32(s, s->dp_stage + mine.dst, per);
	weft_comm_buf rb = f32(s, s->dp_stage, per * s->o.dp);
	weft_status st;

	st = s->k->copy_ranges(s->kctx, sizeof(float), &mine, 1, s->dp_stage, c->flat);
	if (st)
		return g_host->error_wrap(st, "strategy hybrid: zero_1 copying stage %d's shard "
					  "into the gather buffer", c->stage);
	st = settle(s, "the zero_1 gather");
	if (!st)
		st = s->g.ops->all_gather(s->dp_comm, &sb, &rb, NULL);
	if (st)
		return g_host->error_wrap(st, "strategy hybrid: zero_1 gathering stage %d's "
					  "parameters over its dp replicas", c->stage);
	st = s->k->copy_ranges(s->kctx, sizeof(float), &back, 1, c->flat, s->dp_stage);
	return st ? g_host->error_wrap(st, "strategy hybrid: zero_1 copying stage %d's gathered "
				       "parameters back", c->stage) : WEFT_OK;
}

weft_status pp_dp_params(pp_strategy *s, int64_t *bytes, int64_t *calls)
{
	if (!s->dp_comm || s->o.dp_strategy != PP_DP_ZERO_1)
		return WEFT_OK;
	for (int k = 0; k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];

		for (int i = 0; i < c->n_pieces; i++) {
			const pp_piece *p = &c->piece[i];
			weft_status st = gather_piece(s, c, p);

			if (st)
				return st;
			*bytes += (p->end - p->begin + s->o.dp - 1) / s->o.dp * (int64_t)sizeof(float);
			*calls += 1;
		}
	}
	return WEFT_OK;
}

weft_status pp_dp_sum(pp_strategy *s, double *v, int n, int64_t *bytes, int64_t *calls)
{
	weft_status st;

	if (!s->dp_comm)
		return WEFT_OK;
	st = pp_f64_sum(s, s->dp_comm, v, n);
	if (st)
		return g_host->error_wrap(st, "strategy hybrid: sum over the dp replicas");
	*bytes += n * (int64_t)sizeof(double);
	*calls += 1;
	return WEFT_OK;
}

void pp_dp_free(pp_strategy *s)
{
	if (s->dp_stage)
		pp_dfree(s, WEFT_MEM_COMM, s->dp_stage, stage_bytes(s));
	s->dp_stage = NULL;
}
