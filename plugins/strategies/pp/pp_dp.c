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
 * it moves 1.5 times ddp's bytes for 1/dp of the optimizer state). */
#include <string.h>

#include "pp.h"

static weft_comm_buf f32(float *data, int64_t n)
{
	return (weft_comm_buf){ .data = data, .count = n, .dtype = WEFT_COMM_F32,
				.device = WEFT_COMM_DEVICE_CPU };
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
	s->dp_stage = g_host->mem_alloc(WEFT_MEM_COMM, (size_t)(s->dp_stage_numel ? s->dp_stage_numel
								 : 1) * sizeof(float));
	if (!s->dp_stage)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy hybrid: zero_1 gather buffer of "
					 "%lld floats", (long long)s->dp_stage_numel);
	return WEFT_OK;
}

weft_status pp_dp_grads(pp_strategy *s, int64_t *bytes, int64_t *calls)
{
	for (int k = 0; s->dp_comm && k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];
		weft_comm_buf b = f32(c->grad, c->numel);
		weft_status st = s->g.ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_AVG, NULL);

		if (st)
			return g_host->error_wrap(st, "strategy hybrid: averaging stage %d's gradients "
						  "over its %d dp replicas", c->stage, s->o.dp);
		*bytes += c->numel * (int64_t)sizeof(float);
		*calls += 1;
	}
	return WEFT_OK;
}

weft_status pp_dp_params(pp_strategy *s, int64_t *bytes, int64_t *calls)
{
	if (!s->dp_comm || s->o.dp_strategy != PP_DP_ZERO_1)
		return WEFT_OK;
	for (int k = 0; k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];

		for (int i = 0; i < c->n_pieces; i++) {
			const pp_piece *p = &c->piece[i];
			int64_t len = p->end - p->begin, per = (len + s->o.dp - 1) / s->o.dp;
			float *mine = s->dp_stage + per * s->mesh.dp_idx;
			weft_comm_buf sb = f32(mine, per), rb = f32(s->dp_stage, per * s->o.dp);
			weft_status st;

			memcpy(mine, c->flat + p->local + (p->sh_lo - p->begin),
			       (size_t)(p->sh_hi - p->sh_lo) * sizeof(float));
			st = s->g.ops->all_gather(s->dp_comm, &sb, &rb, NULL);
			if (st)
				return g_host->error_wrap(st, "strategy hybrid: zero_1 gathering stage "
							  "%d's parameters over its dp replicas",
							  c->stage);
			memcpy(c->flat + p->local, s->dp_stage, (size_t)len * sizeof(float));
			*bytes += per * (int64_t)sizeof(float);
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
	g_host->mem_free(s->dp_stage);
	s->dp_stage = NULL;
}
