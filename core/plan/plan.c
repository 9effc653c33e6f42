/* Memory and communication plans (plan.h). */
#include <string.h>

#include "plan/plan.h"
#include "weft/status.h"

/* The prefix of a parameter name up to its last dot: its module. */
static int same_module(const char *a, const char *b)
{
	const char *da = strrchr(a, '.'), *db = strrchr(b, '.');
	size_t la = da ? (size_t)(da - a) : 0, lb = db ? (size_t)(db - b) : 0;

	return la == lb && !strncmp(a, b, la);
}

static const weft_cfg *opt_node(const weft_cfg *map, const weft_cfg *zo, const char *key)
{
	const weft_cfg *n = map ? weft_cfg_get(map, key) : NULL;

	return n ? n : zo ? weft_cfg_get(zo, key) : NULL;
}

static weft_status opt_count(const weft_cfg *map, const weft_cfg *zo, const char *key,
			     int64_t def, int64_t *out)
{
	const weft_cfg *n = opt_node(map, zo, key);
	double v;

	*out = def;
	if (!n)
		return WEFT_OK;
	if (weft_cfg_as_float(n, &v) || v < 0 || v != (double)(int64_t)v)
		return weft_cfg_error(n, "'%s' must be a whole number of elements", key);
	*out = (int64_t)v;
	return WEFT_OK;
}

weft_status weft_plan_opts_from_config(const weft_cfg *root, int32_t world, weft_plan_opts *o)
{
	const weft_cfg *tr = root ? weft_cfg_get(root, "trainer") : NULL;
	const weft_cfg *sn = tr ? weft_cfg_get(tr, "strategy") : NULL;
	const weft_cfg *map = NULL, *zo = NULL, *stage_n;
	const char *name = "single";
	int64_t devices = 1, nodes = 1, accum = 1, stage = 2;
	weft_status st;

	memset(o, 0, sizeof(*o));
	if (sn && weft_cfg_kind_of(sn) == WEFT_CFG_MAP) {
		map = sn;
		zo = weft_cfg_get(map, "zero_optimization");
		st = weft_cfg_str(map, "name", NULL, &name);
		if (!st && !name)
			return weft_cfg_error(sn, "trainer.strategy needs a name: (ddp, zero_2, ...)");
		if (st)
			return st;
	} else if (sn) {
		st = weft_cfg_as_str(sn, &name);
		if (st)
			return st;
	}
	if (tr) {
		const weft_cfg *dn = weft_cfg_get(tr, "devices");

		/* devices: auto is the launcher's world; alone, 1 (or --world-size) */
		if (dn && weft_cfg_scalar(dn) && !strcmp(weft_cfg_scalar(dn), "auto"))
			st = WEFT_OK;
		else
			st = weft_cfg_int(tr, "devices", 1, &devices);
		if (!st)
			st = weft_cfg_int(tr, "num_nodes", 1, &nodes);
		if (!st)
			st = weft_cfg_int(tr, "accumulate_grad_batches", 1, &accum);
		if (st)
			return st;
	}
	o->strategy = name;
	o->world = world > 0 ? world : (int32_t)(devices * nodes);
	o->n_micro = accum > 0 ? accum : 1;
	if (!strcmp(name, "single") || !strcmp(name, "ddp") || !strcmp(name, "dp")) {
		o->kind = WEFT_PLAN_REPLICATED;
		return WEFT_OK;
	}
	if (strncmp(name, "zero", 4) != 0 ||
	    (name[4] && !(name[4] == '_' && name[5] >= '1' && name[5] <= '3' && !name[6])))
		return weft_cfg_error(sn, "weft plan knows strategies single, dp, ddp, zero, zero_1, "
				      "zero_2 and zero_3, not '%s'", name);
	o->kind = WEFT_PLAN_ZERO;
	if (name[4])
		stage = name[5] - '0';
	stage_n = opt_node(map, zo, "stage");
	if (stage_n && (weft_cfg_as_int(stage_n, &stage) || stage < 1 || stage > 3))
		return weft_cfg_error(stage_n, "ZeRO stage must be 1, 2 or 3");
	o->stage = (int)stage;
	st = opt_count(map, zo, "reduce_bucket_size", 500000000, &o->reduce_bucket_size);
	if (!st)
		st = opt_count(map, zo, "allgather_bucket_size", 500000000, &o->allgather_bucket_size);
	if (!st)
		st = opt_count(map, zo, "stage3_prefetch_bucket_size", 50000000,
			       &o->prefetch_bucket_size);
	if (!st)
		st = opt_count(map, zo, "stage3_param_persistence_threshold", 100000,
			       &o->persistence_threshold);
	return st;
}

static void plan_replicated(const weft_plan_opts *o, weft_plan *p)
{
	int64_t n = p->numel, w = o->world;

	p->bytes[WEFT_MEM_PARAMS] = 4 * n;
	p->bytes[WEFT_MEM_GRADS] = 4 * n;
	p->bytes[WEFT_MEM_OPTIM] = 4 * (int64_t)o->n_slots * n;
	if (w > 1 && strcmp(o->strategy, "dp") != 0) {
		p->collective_elements = n;
		p->moved_elements = 2 * n * (w - 1) / w;
	}
}

weft_status weft_plan_compute(const weft_params *ps, const weft_plan_opts *o, weft_plan *p)
{
	size_t np = weft_params_count(ps);
	int64_t w = o->world, cap, len = 0, chunk_sum = 0, persist_sum = 0;
	int64_t persist_bytes = 0, units = 0;
	const char *first = NULL;

	memset(p, 0, sizeof(*p));
	if (w < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "plan: world size %d; it must be >= 1",
				      (int)w);
	p->numel = weft_params_numel(ps, WEFT_F32);
	if (o->kind == WEFT_PLAN_REPLICATED) {
		plan_replicated(o, p);
		return WEFT_OK;
	}
	if (o->stage < 1 || o->stage > 3)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "plan: ZeRO stage %d; it must be 1, 2 "
				      "or 3", o->stage);
	cap = o->reduce_bucket_size < o->allgather_bucket_size ? o->reduce_bucket_size :
								   o->allgather_bucket_size;
	/* units exactly as the zero plugin cuts them; a unit closes at i == np */
	for (size_t i = 0; i <= np; i++) {
		const weft_tensor *t = i < np ? weft_params_at(ps, i) : NULL;
		int64_t n = t ? weft_tensor_numel(t) : 0;
		int split;

		if (t && t->dtype != WEFT_F32)
			continue;
		if (!t)
			split = 1;
		else if (o->stage == 3)
			split = !first || !same_module(first, t->name);
		else
			split = !first || len + n > cap;
		if (split && first) {
			int64_t c = (len + w - 1) / w;
			int persist = o->stage == 3 && len < o->persistence_threshold;

			units++;
			chunk_sum += c;
			if (c > p->max_chunk)
				p->max_chunk = c;
			/* rank 0's piece is always a whole chunk: the largest shard */
			p->shard_numel += c < len ? c : len;
			if (persist) {
				persist_sum += c;
				persist_bytes += 4 * w * c;
			}
		}
		if (split && t) {
			first = t->name;
			len = 0;
		}
		len += n;
	}
	p->n_units = units;
	p->bytes[WEFT_MEM_OPTIM] = 4 * (int64_t)o->n_slots * p->shard_numel;
	switch (o->stage) {
	case 1:
		p->bytes[WEFT_MEM_PARAMS] = 4 * p->numel;
		p->bytes[WEFT_MEM_GRADS] = 4 * p->numel;
		p->bytes[WEFT_MEM_COMM] = 4 * w * p->max_chunk;
		p->collective_elements = 2 * w * chunk_sum;
		break;
	case 2:
		p->bytes[WEFT_MEM_PARAMS] = 4 * p->numel;
		p->bytes[WEFT_MEM_GRADS] = 4 * p->shard_numel;
		p->bytes[WEFT_MEM_COMM] = 4 * w * p->max_chunk;
		/* open buckets plus one in flight; a tied embedding keeps one
		 * more open through the whole backward */
		p->working_grads = 3 * 4 * w * p->max_chunk;
		p->collective_elements = (o->n_micro + 1) * w * chunk_sum;
		break;
	default:
		p->bytes[WEFT_MEM_PARAMS] = 4 * p->shard_numel;
		p->bytes[WEFT_MEM_GRADS] = 4 * p->shard_numel;
		p->working_grads = 3 * 4 * w * p->max_chunk;
		/* the unit in use, the prefetched ones, one being released */
		p->working_params = 4 * w * p->max_chunk *
				    (2 + (p->max_chunk ? o->prefetch_bucket_size / (w * p->max_chunk) : 0));
		/* never more than the whole (padded) model */
		if (p->working_params > 4 * w * (chunk_sum - persist_sum))
			p->working_params = 4 * w * (chunk_sum - persist_sum);
		p->working_params += persist_bytes;
		p->collective_elements = o->n_micro * 3 * w * (chunk_sum - persist_sum) +
					 (o->n_micro + 1) * w * persist_sum;
		break;
	}
	p->moved_elements = p->collective_elements * (w - 1) / w;
	return WEFT_OK;
}
