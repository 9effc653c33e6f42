/* What plugins reach of core/tp through the host services table
 * (weft/plugin.h, "sub-communicators and tensor parallelism", since ABI
 * 1.1): splitting host-made communicators, and a model's tensor-parallel
 * group by its parameter set. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tp/tp_impl.h"

/* ---- communicators the host made, and the ones split from them ---- */

typedef struct comm_entry {
	weft_pg *pg;
	int owned; /* made by comm_split: comm_free destroys it */
} comm_entry;

static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;
static comm_entry *comms;
static size_t n_comms, cap_comms;

static weft_status comm_add(weft_pg *pg, int owned)
{
	weft_status st = WEFT_OK;

	pthread_mutex_lock(&comm_lock);
	if (n_comms == cap_comms) {
		size_t cap = cap_comms ? 2 * cap_comms : 8;
		comm_entry *n = realloc(comms, cap * sizeof(*n));

		if (!n) {
			st = weft_error_set(WEFT_ERR_NOMEM, "out of memory registering group '%s'",
					    weft_pg_name(pg));
			goto out_unlock;
		}
		comms = n;
		cap_comms = cap;
	}
	comms[n_comms++] = (comm_entry){ .pg = pg, .owned = owned };
out_unlock:
	pthread_mutex_unlock(&comm_lock);
	return st;
}

/* Removes the entry of pg (or of the group whose communicator is c) and
 * returns it; .pg NULL when there is none. */
static comm_entry comm_take(const weft_pg *pg, const weft_comm *c)
{
	comm_entry e = { 0 };

	pthread_mutex_lock(&comm_lock);
	for (size_t i = 0; i < n_comms; i++)
		if (comms[i].pg == pg || (c && weft_pg_comm(comms[i].pg) == c)) {
			e = comms[i];
			comms[i] = comms[--n_comms];
			break;
		}
	if (!n_comms) {
		free(comms);
		comms = NULL;
		cap_comms = 0;
	}
	pthread_mutex_unlock(&comm_lock);
	return e;
}

weft_pg *weft_tp_comm_find(const weft_comm *c)
{
	weft_pg *pg = NULL;

	pthread_mutex_lock(&comm_lock);
	for (size_t i = 0; i < n_comms && !pg; i++)
		if (weft_pg_comm(comms[i].pg) == c)
			pg = comms[i].pg;
	pthread_mutex_unlock(&comm_lock);
	return pg;
}

weft_status weft_tp_comm_register(weft_pg *pg)
{
	return comm_add(pg, 0);
}

void weft_tp_comm_unregister(weft_pg *pg)
{
	comm_take(pg, NULL);
}

weft_status weft_tp_host_comm_split(const weft_comm_ops *ops, weft_comm *comm, int32_t color,
				    int32_t key, weft_comm **out)
{
	weft_pg *pg = comm ? weft_tp_comm_find(comm) : NULL, *sub = NULL;
	weft_status st;

	*out = NULL;
	if (!pg)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "comm_split: this communicator was not "
				      "made by the host (only the world communicator a strategy is "
				      "given, and those split from it, can be split)");
	/* the backend's table or the ledger's copy of it (comm_ledger.c),
	 * which keeps the backend's init */
	if (weft_pg_ops(pg) != ops && weft_pg_ops(pg)->init != ops->init)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "comm_split: group '%s' belongs to "
				      "another comm backend", weft_pg_name(pg));
	st = weft_pg_split(pg, color, key, &sub);
	if (st || !sub)
		return st;
	st = comm_add(sub, 1);
	if (st) {
		weft_pg_destroy(sub);
		return st;
	}
	*out = weft_pg_comm(sub);
	return WEFT_OK;
}

void weft_tp_host_comm_free(weft_comm *sub)
{
	comm_entry e;

	if (!sub)
		return;
	e = comm_take(NULL, sub);
	if (e.pg && e.owned)
		weft_pg_destroy(e.pg);
	else if (e.pg)
		comm_add(e.pg, 0); /* not ours to free: keep it registered */
}

/* ---- a model's group, by its parameter set ---- */

weft_status weft_tp_host_info(const weft_params *ps, int32_t *size, int32_t *rank,
			      uint32_t *flags)
{
	const weft_tp_group *g = weft_tp_group_find(ps);

	*size = g ? g->size : 1;
	*rank = g ? g->rank : 0;
	*flags = g ? g->flags : 0;
	return WEFT_OK;
}

weft_status weft_tp_host_bind(weft_params *ps, const weft_comm_ops *ops, weft_comm *comm)
{
	weft_tp_group *g = weft_tp_group_find(ps);

	if (!g)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: this model was built whole (no "
				      "tensor-parallel group); build it with "
				      "weft_model_options.tp_size > 1");
	return weft_tp_group_bind(g, ops, comm);
}

int weft_tp_host_param_split(const weft_params *ps, size_t index, int *grad_partial,
			     int64_t *full_numel)
{
	const weft_tp_group *g = weft_tp_group_find(ps);
	const weft_tensor *p = weft_params_at(ps, index);

	*grad_partial = g ? weft_tp_group_partial(g, index) : 0;
	*full_numel = g ? weft_tp_full_numel(g, index) : (p ? weft_tensor_numel(p) : 0);
	return g ? (int)weft_tp_group_split(g, index, NULL, NULL) : WEFT_TP_REPLICATE;
}

int weft_tp_host_param_runs(const weft_params *ps, size_t index, int64_t *local, int64_t *whole,
			    int64_t *count, int *shared)
{
	const weft_tp_group *g = weft_tp_group_find(ps);
	weft_tp_run run[WEFT_TP_MAX_PARTS];
	int32_t n = g ? weft_tp_group_runs(g, index, g->rank, run) : 0;

	for (int32_t k = 0; k < n; k++) {
		local[k] = run[k].local;
		whole[k] = run[k].whole;
		count[k] = run[k].count;
		shared[k] = run[k].shared;
	}
	return (int)n;
}

void weft_tp_host_stats(const weft_params *ps, int reset, int64_t *calls, int64_t *elements,
			int64_t *bytes)
{
	weft_tp_group *g = weft_tp_group_find(ps);

	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < WEFT_TP_NUM_COLL; k++) {
			int i = pass * WEFT_TP_NUM_COLL + k;

			calls[i] = g ? g->stats.calls[pass][k] : 0;
			elements[i] = g ? g->stats.elements[pass][k] : 0;
			bytes[i] = g ? g->stats.bytes[pass][k] : 0;
		}
	if (g && reset)
		weft_tp_group_reset_stats(g);
}

weft_status weft_tp_host_gather_param(const weft_params *ps, size_t index, int grads,
				      float *full)
{
	weft_tp_group *g = weft_tp_group_find(ps);
	const weft_tensor *p = weft_params_at(ps, index);

	if (g)
		return weft_tp_gather_param(g, ps, index, grads, full);
	if (!p || (grads && !p->grad))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "tp: gather of parameter %zu", index);
	return weft_tensor_copy_to_host(grads ? p->grad : p, full,
					weft_tensor_nbytes(p));
}
