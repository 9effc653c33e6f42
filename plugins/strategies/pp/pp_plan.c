/* The memory plans of pp and hybrid (weft/strategy.h, memory_plan). The
 * blocks are split into stages by pp_partition, the partitioner setup
 * uses, from the same costs (each block's parameters; the embedding on
 * the first stage, ln_f and the tied head's copy of wte - or an untied
 * model's lm_head.weight - on the last).
 * Pipeline rank r holds stages r, r + pp, ...; every dp replica and tp
 * shard of it holds as much (hybrid's model is already rank 0's tp
 * shard). Per rank: the trainer's model (its parameters, without
 * gradients: pp's and hybrid's build plan asks for none; the strategy
 * copies the stages' values into it for checkpoints), its stages'
 * parameters and gradients (the last stage with its own copy of the tied
 * wte), the optimizer state of what it owns
 * (the copy excluded; 1/dp of it under dp_strategy zero_1), and per step
 * one all-reduce of its gradients over the dp replicas plus the tied
 * embedding's gradient sum between the first and the last stage (none
 * for an untied head).
 * Activations sent between stages depend on the batch and are not
 * counted. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "pp.h"

static const char *const WTE = "transformer.wte.weight";
static const char *const LM_HEAD = "lm_head.weight";

/* The block index of "transformer.h.<i>." names; -1 for other names. */
static int64_t block_index(const char *name)
{
	const char *pre = "transformer.h.";
	char *end;
	long long i;

	if (strncmp(name, pre, strlen(pre)))
		return -1;
	i = strtoll(name + strlen(pre), &end, 10);
	return *end == '.' ? i : -1;
}

/* The stages and the schedule (ABI 1.5), for the plan's activation term
 * (the contexts are pp.c's get_ctx), and the communicators split off the
 * world. A caller whose result predates the members gets nothing. */
static void pipeline_of(const pp_strategy *s, const int64_t *bounds, weft_plan_result *out)
{
	weft_plan_pipeline *pl = &out->pipeline;

	if (out->struct_size < offsetof(weft_plan_result, sub_comm_size) +
				sizeof(out->sub_comm_size) || s->S > WEFT_PLAN_MAX_STAGES)
		return;
	pl->pp = s->o.pp;
	pl->virtual_stages = s->o.v;
	pl->schedule = s->o.schedule;
	pl->n_stages = s->S;
	pl->rank_stride = s->o.dp * s->o.tp;
	pl->arena_bytes = PP_CTX_ARENA_BYTES;
	pl->tape_bytes = PP_CTX_TAPE_BYTES;
	for (int i = 0; i <= s->S; i++)
		pl->stage_bounds[i] = bounds[i];
	/* the pipeline, dp and tp groups split off the world (pp.c) */
	if (s->o.pp < s->o.pp * s->o.dp * s->o.tp)
		out->sub_comm_size[out->n_sub_comms++] = s->o.pp;
	if (s->o.dp > 1)
		out->sub_comm_size[out->n_sub_comms++] = s->o.dp;
	if (s->o.tp > 1)
		out->sub_comm_size[out->n_sub_comms++] = s->o.tp;
}

weft_status pp_memory_plan(void *p, const weft_plan_query *q, weft_plan_result *out)
{
	const pp_strategy *s = p;
	const char *who = s->o.hybrid ? "hybrid" : "pp";
	int64_t n_layer = 0, embed = 0, head = 0, wte = 0, lm_head = 0, numel = 0, model = 0;
	int64_t *cost = NULL, *bounds = NULL, worst_held = -1, worst_owned = 0;
	int used = 0, S = s->S, pp = s->o.pp, dp = s->o.dp;
	weft_status st;

	for (size_t i = 0; i < q->n_params; i++) {
		int64_t b = block_index(q->params[i].name);

		if (b + 1 > n_layer)
			n_layer = b + 1;
		if (!strcmp(q->params[i].name, WTE))
			wte = q->params[i].numel;
		if (!strcmp(q->params[i].name, LM_HEAD))
			lm_head = q->params[i].numel;
		numel += q->params[i].full_numel;
		if (q->params[i].dtype == WEFT_F32)
			model += q->params[i].numel;
	}
	if (!wte || n_layer < 1)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': the model is not a "
					 "GPT (no transformer.wte.weight or transformer.h.* "
					 "parameters); pipeline stages are built from a GPT's "
					 "blocks", who);
	cost = g_host->mem_calloc(WEFT_MEM_OTHER, (size_t)n_layer * sizeof(int64_t));
	bounds = g_host->mem_calloc(WEFT_MEM_OTHER, (size_t)(S + 1) * sizeof(int64_t));
	if (!cost || !bounds) {
		st = g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': stage bounds", who);
		goto out;
	}
	/* the head's matrix: the tied wte's copy, or the untied lm_head */
	head = lm_head ? 0 : wte;
	for (size_t i = 0; i < q->n_params; i++) {
		int64_t b = block_index(q->params[i].name);

		if (b >= 0)
			cost[b] += q->params[i].numel;
		else if (!strncmp(q->params[i].name, "transformer.ln_f", 16) ||
			 !strcmp(q->params[i].name, LM_HEAD))
			head += q->params[i].numel;
		else
			embed += q->params[i].numel;
	}
	st = pp_partition(&s->o, S, n_layer, cost, embed, head, bounds);
	if (st)
		goto out;
	used = snprintf(out->layout, sizeof(out->layout), "%s%d stages (pp %d x dp %d x tp %d); "
			"owned per pipeline rank:", s->o.hybrid ? "hybrid, " : "", S, pp, dp,
			s->o.tp);
	for (int r = 0; r < pp; r++) {
		int64_t owned = 0, held;

		for (int k = 0; k < s->o.v; k++) {
			int stage = k * pp + r;

			for (int64_t b = bounds[stage]; b < bounds[stage + 1]; b++)
				owned += cost[b];
			if (stage == 0)
				owned += embed;
			if (stage == S - 1)
				owned += lm_head ? head : head - wte;
		}
		/* the last stage's own copy of the tied wte (its head) */
		held = owned + (S > 1 && !lm_head && r == (S - 1) % pp ? wte : 0);
		if (held > worst_held) {
			worst_held = held;
			worst_owned = owned;
			out->rank = r * dp * s->o.tp; /* pipeline index r, dp 0, tp 0 */
		}
		if (used > 0 && (size_t)used < sizeof(out->layout))
			used += snprintf(out->layout + used, sizeof(out->layout) - (size_t)used,
					 "%s %lld", r ? " +" : "", (long long)owned);
	}
	if (used > 0 && (size_t)used < sizeof(out->layout))
		snprintf(out->layout + used, sizeof(out->layout) - (size_t)used, " = %lld",
			 (long long)numel);
	out->numel = numel;
	out->bytes[WEFT_MEM_PARAMS] = 4 * (model + worst_held);
	out->bytes[WEFT_MEM_GRADS] = 4 * worst_held;
	out->bytes[WEFT_MEM_OPTIM] = 4 * (int64_t)q->n_slots *
				     (s->o.dp_strategy == PP_DP_ZERO_1 && dp > 1 ?
				      (worst_owned + dp - 1) / dp : worst_owned);
	if (dp > 1) {
		out->collective_elements += worst_held;
		out->moved_elements += 2 * worst_held * (dp - 1) / dp;
	}
	if (S > 1 && pp > 1 && !lm_head) {
		/* the first and the last stage swap their wte gradients */
		out->collective_elements += 2 * wte;
		out->moved_elements += wte;
	}
	pipeline_of(s, bounds, out);
out:
	g_host->mem_free(cost);
	g_host->mem_free(bounds);
	return st;
}
