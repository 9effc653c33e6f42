/* Options of strategy "pp" and the split of the blocks into stages. */
#include <stdio.h>
#include <string.h>

#include "pp.h"

static const char *const schedule_names[] = { "gpipe", "1f1b", "interleaved_1f1b", NULL };

weft_status pp_options_parse(const weft_cfg *section, const weft_strategy_env *env,
			     const char *who, pp_options *o)
{
	const weft_cfg *part;
	int64_t pp, v;
	weft_status st;

	memset(o, 0, sizeof(*o));
	o->section = section;
	o->hybrid = !strcmp(who, "hybrid");
	o->dp = o->tp = 1;
	if (section)
		g_host->cfg_get(section, "name");
	if (o->hybrid) {
		static const char *const dp_names[] = { "ddp", "zero_1", NULL };
		int64_t dp, tp;

		st = g_host->cfg_int(section, "dp", 1, &dp);
		if (!st)
			st = g_host->cfg_int(section, "tp", 1, &tp);
		if (!st)
			st = g_host->cfg_choice(section, "dp_strategy", dp_names, "ddp",
						&o->dp_strategy);
		if (st)
			return st;
		if (dp < 1 || dp > 1024)
			return g_host->cfg_error(g_host->cfg_get(section, "dp"), "must be in [1, 1024], "
						 "got %lld", (long long)dp);
		if (tp < 1 || tp > 1024)
			return g_host->cfg_error(g_host->cfg_get(section, "tp"), "must be in [1, 1024], "
						 "got %lld", (long long)tp);
		o->dp = (int)dp;
		o->tp = (int)tp;
	}
	st = g_host->cfg_int(section, "pp", o->hybrid ? env->world_size / (o->dp * o->tp) :
				env->world_size, &pp);
	if (!st)
		st = g_host->cfg_choice(section, "schedule", schedule_names, "1f1b", &o->schedule);
	if (!st)
		st = g_host->cfg_int(section, "virtual_stages", 1, &v);
	if (st)
		return st;
	if (pp < 1 || pp > 1024)
		return g_host->cfg_error(g_host->cfg_get(section, "pp"), "must be in [1, 1024], got "
					 "%lld", (long long)pp);
	if (v < 1 || v > PP_MAX_CHUNKS)
		return g_host->cfg_error(g_host->cfg_get(section, "virtual_stages"), "must be in "
					 "[1, %d], got %lld", PP_MAX_CHUNKS, (long long)v);
	if (v > 1 && o->schedule != WEFT_PP_INTERLEAVED)
		return g_host->cfg_error(g_host->cfg_get(section, "virtual_stages"), "is %lld but "
					 "schedule %s runs one stage per rank; use schedule: "
					 "interleaved_1f1b, or virtual_stages: 1", (long long)v,
					 schedule_names[o->schedule]);
	o->pp = (int)pp;
	o->v = (int)v;
	if (o->schedule == WEFT_PP_INTERLEAVED && o->pp < 2)
		return g_host->cfg_error(g_host->cfg_get(section, "schedule"), "interleaved_1f1b "
					 "needs at least 2 pipeline ranks, got pp = %d; use 1f1b",
					 o->pp);
	part = section ? g_host->cfg_get(section, "partition") : NULL;
	o->partition_node = part;
	if (part && g_host->cfg_kind_of(part) == WEFT_CFG_SEQ) {
		size_t n = g_host->cfg_size(part);

		g_host->cfg_mark_used(part);
		if (n > sizeof(o->layers) / sizeof(o->layers[0]))
			return g_host->cfg_error(part, "lists %zu stages; at most %zu", n,
						 sizeof(o->layers) / sizeof(o->layers[0]));
		for (size_t i = 0; i < n; i++) {
			st = g_host->cfg_as_int(g_host->cfg_at(part, i), &o->layers[i]);
			if (st)
				return st;
			if (o->layers[i] < 1)
				return g_host->cfg_error(g_host->cfg_at(part, i), "stage %zu gets %lld "
							 "blocks; every stage needs at least 1",
							 i, (long long)o->layers[i]);
		}
		o->n_layers_list = (int)n;
		o->partition = PP_PART_LIST;
	} else {
		static const char *const names[] = { "uniform", "parameters", NULL };

		st = g_host->cfg_choice(section, "partition", names, "uniform", &o->partition);
		if (st)
			return st;
	}
	return WEFT_OK;
}

weft_status pp_mesh_check(const pp_options *o, int32_t rank, int32_t world, pp_mesh *m)
{
	const weft_cfg *at = o->section ? g_host->cfg_get(o->section, "pp") : NULL;

	if ((int64_t)o->pp * o->tp * o->dp != world) {
		if (!o->hybrid)
			return g_host->cfg_error(at, "pp is %d but the world has %d ranks; strategy pp "
						 "needs pp = world size (pp x tp x dp = %d x 1 x 1 = "
						 "%d != %d); use strategy hybrid to combine it with "
						 "data or tensor parallelism", o->pp, (int)world, o->pp,
						 o->pp, (int)world);
		return g_host->cfg_error(o->section, "strategy hybrid: pp x tp x dp = %d x %d x %d = "
					 "%lld != %d, the world size (trainer.devices x "
					 "trainer.num_nodes); pick sizes whose product is %d", o->pp,
					 o->tp, o->dp, (long long)o->pp * o->tp * o->dp, (int)world,
					 (int)world);
	}
	m->tp_idx = rank % o->tp;
	m->dp_idx = rank / o->tp % o->dp;
	m->pp_idx = rank / (o->tp * o->dp);
	return WEFT_OK;
}

/* Splits costs w[0..n) into S consecutive non-empty groups minimising the
 * largest group (plus the first group's `first` and the last's `last`):
 * the classic linear-partition dynamic programme, O(S n^2). */
static weft_status balance(const int64_t *w, int64_t n, int S, int64_t first, int64_t last,
			   int64_t *bounds)
{
	int64_t *best, *cut, *pre;
	size_t cells = (size_t)(S + 1) * (size_t)(n + 1);

	best = g_host->mem_alloc(WEFT_MEM_OTHER, cells * sizeof(int64_t));
	cut = g_host->mem_alloc(WEFT_MEM_OTHER, cells * sizeof(int64_t));
	pre = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)(n + 1) * sizeof(int64_t));
	if (!best || !cut || !pre) {
		g_host->mem_free(best);
		g_host->mem_free(cut);
		g_host->mem_free(pre);
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': partition tables");
	}
	pre[0] = 0;
	for (int64_t i = 0; i < n; i++)
		pre[i + 1] = pre[i] + w[i];
#define B(k, i) best[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
#define C(k, i) cut[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
	/* B(k, i): the best largest group splitting blocks [0, i) into k groups */
	for (int64_t i = 0; i <= n; i++)
		B(1, i) = i ? pre[i] + first + (S == 1 ? last : 0) : INT64_MAX;
	for (int k = 2; k <= S; k++)
		for (int64_t i = 0; i <= n; i++) {
			B(k, i) = INT64_MAX;
			for (int64_t j = k - 1; j < i; j++) {
				int64_t g = pre[i] - pre[j] + (k == S && i == n ? last : 0);
				int64_t c = B(k - 1, j) > g ? B(k - 1, j) : g;

				if (B(k - 1, j) != INT64_MAX && c < B(k, i)) {
					B(k, i) = c;
					C(k, i) = j;
				}
			}
		}
	bounds[S] = n;
	for (int k = S, i = (int)n; k > 1; k--) {
		bounds[k - 1] = C(k, i);
		i = (int)C(k, i);
	}
	bounds[0] = 0;
#undef B
#undef C
	g_host->mem_free(best);
	g_host->mem_free(cut);
	g_host->mem_free(pre);
	return WEFT_OK;
}

weft_status pp_partition(const pp_options *o, int S, int64_t n_layer, const int64_t *cost,
			 int64_t embed, int64_t head, int64_t *bounds)
{
	const weft_cfg *node = o->partition_node;

	if (n_layer < S)
		return g_host->cfg_error(node ? node : g_host->cfg_get(o->section, "pp"),
					 "the model's %lld blocks cannot be split into %d pipeline "
					 "stages (pp %d x virtual_stages %d): every stage needs at "
					 "least one block; use fewer stages or a deeper model",
					 (long long)n_layer, S, o->pp, o->v);
	switch (o->partition) {
	case PP_PART_UNIFORM:
		if (n_layer % S)
			return g_host->cfg_error(node ? node : g_host->cfg_get(o->section, "pp"),
						 "partition uniform cannot split %lld blocks into %d "
						 "equal stages (pp %d x virtual_stages %d); use "
						 "partition: parameters, or a list of %d block counts "
						 "that sum to %lld", (long long)n_layer, S, o->pp, o->v,
						 S, (long long)n_layer);
		for (int s = 0; s <= S; s++)
			bounds[s] = n_layer / S * s;
		return WEFT_OK;
	case PP_PART_PARAMETERS:
		return balance(cost, n_layer, S, embed, head, bounds);
	default: {
		int64_t sum = 0;

		for (int i = 0; i < o->n_layers_list; i++)
			sum += o->layers[i];
		if (o->n_layers_list != S || sum != n_layer)
			return g_host->cfg_error(node, "lists %d stages holding %lld blocks, but the "
						 "pipeline has %d stages (pp %d x virtual_stages %d) "
						 "and the model %lld blocks; give %d counts that sum "
						 "to %lld", o->n_layers_list, (long long)sum, S, o->pp,
						 o->v, (long long)n_layer, S, (long long)n_layer);
		bounds[0] = 0;
		for (int s = 0; s < S; s++)
			bounds[s + 1] = bounds[s] + o->layers[s];
		return WEFT_OK;
	}
	}
}
