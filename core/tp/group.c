/* The tensor-parallel group: registry by parameter set, per-parameter
 * splits, the bound communicator, counters, and shard <-> full copies. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tp/tp_impl.h"

/* ---- registry: parameter set -> group ---- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static weft_tp_group **reg;
static size_t reg_n, reg_cap;

static weft_status reg_add(weft_tp_group *g)
{
	weft_status st = WEFT_OK;

	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < reg_n; i++)
		if (reg[i]->owner == g->owner) {
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "tp: this parameter set already "
					    "has a tensor-parallel group");
			goto out_unlock;
		}
	if (reg_n == reg_cap) {
		size_t cap = reg_cap ? 2 * reg_cap : 8;
		weft_tp_group **n = realloc(reg, cap * sizeof(*n));

		if (!n) {
			st = weft_error_set(WEFT_ERR_NOMEM, "tp: out of memory registering a group");
			goto out_unlock;
		}
		reg = n;
		reg_cap = cap;
	}
	reg[reg_n++] = g;
out_unlock:
	pthread_mutex_unlock(&reg_lock);
	return st;
}

static void reg_remove(const weft_tp_group *g)
{
	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < reg_n; i++)
		if (reg[i] == g) {
			reg[i] = reg[--reg_n];
			break;
		}
	if (!reg_n) {
		free(reg);
		reg = NULL;
		reg_cap = 0;
	}
	pthread_mutex_unlock(&reg_lock);
}

weft_tp_group *weft_tp_group_find(const weft_params *ps)
{
	weft_tp_group *g = NULL;

	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < reg_n && !g; i++)
		if (reg[i]->owner == ps)
			g = reg[i];
	pthread_mutex_unlock(&reg_lock);
	return g;
}

/* ---- the group ---- */

weft_status weft_tp_group_create(int32_t size, int32_t rank, uint32_t flags,
				 const weft_params *owner, weft_tp_group **out)
{
	weft_tp_group *g;
	size_t n = owner ? weft_params_count(owner) : 0;
	weft_status st;

	*out = NULL;
	if (size < 1 || rank < 0 || rank >= size)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: rank %d of a group of %d is out "
				      "of range", (int)rank, (int)size);
	if (!owner)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: a group needs the parameter set "
				      "it splits");
	g = calloc(1, sizeof(*g));
	if (g)
		g->p = calloc(n ? n : 1, sizeof(*g->p));
	if (!g || !g->p) {
		free(g);
		return weft_error_set(WEFT_ERR_NOMEM, "tp: out of memory creating a group of %d",
				      (int)size);
	}
	g->size = size;
	g->rank = rank;
	g->flags = flags;
	g->owner = owner;
	g->nparams = n;
	for (size_t i = 0; i < n; i++) {
		const weft_tensor *p = weft_params_at(owner, i);

		g->p[i].ndim = p->ndim;
		for (int32_t d = 0; d < p->ndim && d < 2; d++)
			g->p[i].shape[d] = p->shape[d];
	}
	st = reg_add(g);
	if (st) {
		free(g->p);
		free(g);
		return st;
	}
	*out = g;
	return WEFT_OK;
}

void weft_tp_group_free(weft_tp_group *g)
{
	if (!g)
		return;
	reg_remove(g);
	free(g->p);
	free(g);
}

int32_t weft_tp_group_size(const weft_tp_group *g)
{
	return g->size;
}

int32_t weft_tp_group_rank(const weft_tp_group *g)
{
	return g->rank;
}

uint32_t weft_tp_group_flags(const weft_tp_group *g)
{
	return g->flags;
}

weft_status weft_tp_group_set_split(weft_tp_group *g, size_t index, weft_tp_split split,
				    int32_t ndim, const int64_t *full_shape)
{
	if (index >= g->nparams)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: parameter %zu of %zu", index,
				      g->nparams);
	if (ndim < 1 || ndim > 2 || (split == WEFT_TP_COLS && ndim != 2))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: parameter %zu: a split of %d dims",
				      index, (int)ndim);
	g->p[index].split = split;
	g->p[index].ndim = ndim;
	g->p[index].shape[0] = full_shape[0];
	g->p[index].shape[1] = ndim > 1 ? full_shape[1] : 0;
	return WEFT_OK;
}

weft_status weft_tp_group_set_parts(weft_tp_group *g, size_t index, int32_t nparts,
				    const int64_t *rows, const int32_t *split, int32_t ndim,
				    const int64_t *full_shape)
{
	struct tp_param *p;
	int64_t sum = 0;
	weft_status st;

	if (nparts < 1 || nparts > WEFT_TP_MAX_PARTS)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: parameter %zu: %d packed parts "
				      "(1 to %d)", index, (int)nparts, WEFT_TP_MAX_PARTS);
	for (int32_t k = 0; k < nparts; k++) {
		if (rows[k] < 0 || (split[k] && rows[k] % g->size))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: parameter %zu: part %d "
					      "of %lld rows cannot be split %d ways", index, (int)k,
					      (long long)rows[k], (int)g->size);
		sum += rows[k];
	}
	if (sum != full_shape[0])
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: parameter %zu: parts of %lld rows "
				      "in all, the tensor has %lld", index, (long long)sum,
				      (long long)full_shape[0]);
	if ((st = weft_tp_group_set_split(g, index, WEFT_TP_ROWS_PARTS, ndim, full_shape)))
		return st;
	p = &g->p[index];
	p->nparts = nparts;
	for (int32_t k = 0; k < nparts; k++) {
		p->part_rows[k] = rows[k];
		p->part_split[k] = split[k] != 0;
	}
	return WEFT_OK;
}

int32_t weft_tp_group_runs(const weft_tp_group *g, size_t index, int32_t rank,
			   weft_tp_run *out)
{
	const struct tp_param *p = index < g->nparams ? &g->p[index] : NULL;
	int64_t inner, whole = 0, local = 0;

	if (!p || p->split != WEFT_TP_ROWS_PARTS)
		return 0;
	inner = p->ndim > 1 ? p->shape[1] : 1;
	for (int32_t k = 0; k < p->nparts; k++) {
		int64_t rows = p->part_split[k] ? p->part_rows[k] / g->size : p->part_rows[k];
		int64_t first = p->part_split[k] ? rank * rows : 0;

		out[k] = (weft_tp_run){ .local = local, .whole = (whole + first) * inner,
					.count = rows * inner, .shared = !p->part_split[k] };
		local += rows * inner;
		whole += p->part_rows[k];
	}
	return p->nparts;
}

weft_status weft_tp_group_set_partial(weft_tp_group *g, size_t index)
{
	if (index >= g->nparams)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: parameter %zu of %zu", index,
				      g->nparams);
	g->p[index].grad_partial = 1;
	return WEFT_OK;
}

int weft_tp_group_partial(const weft_tp_group *g, size_t index)
{
	return index < g->nparams && g->p[index].grad_partial;
}

weft_tp_split weft_tp_group_split(const weft_tp_group *g, size_t index, int32_t *ndim,
				  int64_t *full_shape)
{
	if (index >= g->nparams)
		return WEFT_TP_REPLICATE;
	if (ndim)
		*ndim = g->p[index].ndim;
	if (full_shape) {
		full_shape[0] = g->p[index].shape[0];
		full_shape[1] = g->p[index].shape[1];
	}
	return g->p[index].split;
}

weft_status weft_tp_group_bind(weft_tp_group *g, const weft_comm_ops *ops, weft_comm *comm)
{
	int32_t size, rank;

	if (!comm) {
		g->ops = NULL;
		g->comm = NULL;
		return WEFT_OK;
	}
	if (!ops)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: binding a group needs the "
				      "communicator's backend");
	size = ops->size(comm);
	rank = ops->rank(comm);
	if (size != g->size)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: the model was built for %d "
				      "tensor-parallel ranks but the communicator has %d",
				      (int)g->size, (int)size);
	if (rank != g->rank)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: the model holds the shards of tp "
				      "rank %d but this communicator's rank is %d", (int)g->rank,
				      (int)rank);
	g->ops = ops;
	g->comm = comm;
	return WEFT_OK;
}

weft_comm *weft_tp_group_comm(const weft_tp_group *g)
{
	return g->comm;
}

const weft_comm_ops *weft_tp_group_ops(const weft_tp_group *g)
{
	return g->ops;
}

void weft_tp_group_stats(const weft_tp_group *g, weft_tp_stats *out)
{
	*out = g->stats;
}

void weft_tp_group_reset_stats(weft_tp_group *g)
{
	memset(&g->stats, 0, sizeof(g->stats));
}

/* ---- shards ---- */

static int64_t inner_of(const int64_t *full_shape, int32_t ndim)
{
	return ndim > 1 ? full_shape[1] : 1;
}

/* Copies every contiguous run of rank's shard between `shard` and `full`
 * (to_shard: full -> shard). */
static void each_run(weft_tp_split split, const int64_t *full_shape, int32_t ndim, int32_t size,
		     int32_t rank, float *shard, float *full, int to_shard)
{
	int64_t inner = inner_of(full_shape, ndim), rows = full_shape[0];
	int64_t parts = split == WEFT_TP_ROWS3 ? 3 : 1;

	switch (split) {
	case WEFT_TP_REPLICATE:
		if (to_shard)
			memcpy(shard, full, (size_t)(rows * inner) * sizeof(float));
		else
			memcpy(full, shard, (size_t)(rows * inner) * sizeof(float));
		return;
	case WEFT_TP_ROWS:
	case WEFT_TP_ROWS3: {
		int64_t part = rows / parts, per = part / size;

		for (int64_t k = 0; k < parts; k++) {
			float *s = shard + k * per * inner;
			float *f = full + (k * part + rank * per) * inner;
			size_t bytes = (size_t)(per * inner) * sizeof(float);

			if (to_shard)
				memcpy(s, f, bytes);
			else
				memcpy(f, s, bytes);
		}
		return;
	}
	case WEFT_TP_ROWS_PARTS:
		return; /* weft_tp_group_take_shard / put_shard: the parts are the group's */
	case WEFT_TP_COLS: {
		int64_t per = inner / size;

		for (int64_t i = 0; i < rows; i++) {
			float *s = shard + i * per, *f = full + i * inner + rank * per;

			if (to_shard)
				memcpy(s, f, (size_t)per * sizeof(float));
			else
				memcpy(f, s, (size_t)per * sizeof(float));
		}
		return;
	}
	}
}

static int32_t ndim_of(const int64_t *full_shape)
{
	return full_shape[1] > 0 ? 2 : 1;
}

void weft_tp_take_shard(weft_tp_split split, const int64_t *full_shape, int32_t size,
			int32_t rank, const float *full, float *shard)
{
	each_run(split, full_shape, ndim_of(full_shape), size, rank, shard, (float *)full, 1);
}

void weft_tp_put_shard(weft_tp_split split, const int64_t *full_shape, int32_t size,
		       int32_t rank, const float *shard, float *full)
{
	each_run(split, full_shape, ndim_of(full_shape), size, rank, (float *)shard, full, 0);
}

/* Copies rank's runs of a WEFT_TP_ROWS_PARTS parameter (to_shard: full
 * -> shard), else each_run of its split. */
static void group_runs(const weft_tp_group *g, size_t index, int32_t rank, float *shard,
		       float *full, int to_shard)
{
	const struct tp_param *p = &g->p[index];
	weft_tp_run run[WEFT_TP_MAX_PARTS];
	int32_t n = weft_tp_group_runs(g, index, rank, run);

	if (p->split != WEFT_TP_ROWS_PARTS) {
		each_run(p->split, p->shape, p->ndim, g->size, rank, shard, full, to_shard);
		return;
	}
	for (int32_t k = 0; k < n; k++) {
		size_t bytes = (size_t)run[k].count * sizeof(float);

		if (to_shard)
			memcpy(shard + run[k].local, full + run[k].whole, bytes);
		else
			memcpy(full + run[k].whole, shard + run[k].local, bytes);
	}
}

void weft_tp_group_take_shard(const weft_tp_group *g, size_t index, int32_t rank,
			      const float *full, float *shard)
{
	if (index < g->nparams)
		group_runs(g, index, rank, shard, (float *)full, 1);
}

void weft_tp_group_put_shard(const weft_tp_group *g, size_t index, int32_t rank,
			     const float *shard, float *full)
{
	if (index < g->nparams)
		group_runs(g, index, rank, (float *)shard, full, 0);
}

int64_t weft_tp_full_numel(const weft_tp_group *g, size_t index)
{
	if (index >= g->nparams)
		return 0;
	return g->p[index].shape[0] * inner_of(g->p[index].shape, g->p[index].ndim);
}

int64_t weft_tp_whole_numel(const weft_params *ps)
{
	const weft_tp_group *g = weft_tp_group_find(ps);
	size_t n = weft_params_count(ps);
	int64_t total = 0;

	if (!g)
		return weft_params_numel(ps, WEFT_F32);
	for (size_t i = 0; i < n; i++) {
		const weft_tensor *p = weft_params_at(ps, i);

		if (p && p->dtype == WEFT_F32)
			total += weft_tp_full_numel(g, i);
	}
	return total;
}

weft_status weft_tp_gather_param(weft_tp_group *g, const weft_params *ps, size_t index,
				 int grads, float *full)
{
	weft_tensor *p = weft_params_at(ps, index);
	const weft_tensor *src = p ? (grads ? p->grad : p) : NULL;
	int64_t n = src ? weft_tensor_numel(src) : 0;
	const struct tp_param *tp = index < g->nparams ? &g->p[index] : NULL;
	float *local = NULL, *all = NULL;
	weft_status st;

	if (!src || !tp)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: gather of parameter %zu (%s)",
				      index, grads ? "no gradient" : "out of range");
	if (tp->split == WEFT_TP_REPLICATE)
		return weft_tensor_copy_to_host(src, full, (size_t)n * sizeof(float));
	if (!g->comm)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: gathering '%s' needs the group's "
				      "communicator; run under strategy tp, which binds it",
				      p->name);
	local = malloc((size_t)(n ? n : 1) * sizeof(float));
	all = malloc((size_t)(n * g->size + 1) * sizeof(float));
	if (!local || !all) {
		st = weft_error_set(WEFT_ERR_NOMEM, "tp: out of memory gathering '%s'", p->name);
		goto out_free;
	}
	st = weft_tensor_copy_to_host(src, local, (size_t)n * sizeof(float));
	if (!st) {
		weft_comm_buf s = { .data = local, .count = n, .dtype = WEFT_COMM_F32 };
		weft_comm_buf r = { .data = all, .count = n * g->size, .dtype = WEFT_COMM_F32 };

		st = g->ops->all_gather(g->comm, &s, &r, NULL);
		if (st)
			st = weft_error_wrap(st, "tp: gathering '%s'", p->name);
	}
	for (int32_t r = 0; !st && r < g->size; r++)
		weft_tp_group_put_shard(g, index, r, all + r * n, full);
out_free:
	free(local);
	free(all);
	return st;
}
