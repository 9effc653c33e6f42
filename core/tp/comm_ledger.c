/* The comm vtable strategies call (weft_tp_ledger_ops, core/tp/tp.h): the
 * backend's table with each collective on a host-made communicator routed
 * through its process group (core/dist/pg.c), which records it in the
 * collective ledger and, when it fails, compares ledgers through the store
 * so the error names the rank that fell behind or is gone, not a peer's
 * IP:port. Asynchronous handles are remembered with their group until
 * wait, so a failure found at wait is diagnosed too. */
#include <pthread.h>
#include <stdlib.h>

#include "tp/tp_impl.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const weft_comm_ops *backend; /* the wrapped one */
static weft_comm_ops wrapped;

typedef struct pending {
	weft_comm_work *work;
	weft_pg *pg;
} pending;

static pending *pend;
static size_t n_pend, cap_pend;

/* Remembers work's group; without memory the handle is still valid, only
 * a failure at its wait goes undiagnosed. */
static void remember(weft_comm_work *work, weft_pg *pg)
{
	pthread_mutex_lock(&lock);
	if (n_pend == cap_pend) {
		size_t cap = cap_pend ? 2 * cap_pend : 16;
		pending *n = realloc(pend, cap * sizeof(*n));

		if (n) {
			pend = n;
			cap_pend = cap;
		}
	}
	if (n_pend < cap_pend)
		pend[n_pend++] = (pending){ .work = work, .pg = pg };
	pthread_mutex_unlock(&lock);
}

static weft_pg *forget(const weft_comm_work *work)
{
	weft_pg *pg = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = n_pend; i-- > 0;)
		if (pend[i].work == work) {
			pg = pend[i].pg;
			pend[i] = pend[--n_pend];
			break;
		}
	if (!n_pend) {
		free(pend);
		pend = NULL;
		cap_pend = 0;
	}
	pthread_mutex_unlock(&lock);
	return pg;
}

static weft_status issued(weft_pg *pg, weft_status st, weft_comm_work **work)
{
	if (!st && work && *work)
		remember(*work, pg);
	return st;
}

static weft_status l_all_reduce(weft_comm *c, const weft_comm_buf *send, const weft_comm_buf *recv,
				weft_comm_redop op, weft_comm_work **work)
{
	weft_pg *pg = weft_tp_comm_find(c);

	if (!pg)
		return backend->all_reduce(c, send, recv, op, work);
	return issued(pg, weft_pg_all_reduce(pg, send, recv, op, work), work);
}

static weft_status l_reduce_scatter(weft_comm *c, const weft_comm_buf *send,
				    const weft_comm_buf *recv, weft_comm_redop op,
				    weft_comm_work **work)
{
	weft_pg *pg = weft_tp_comm_find(c);

	if (!pg)
		return backend->reduce_scatter(c, send, recv, op, work);
	return issued(pg, weft_pg_reduce_scatter(pg, send, recv, op, work), work);
}

static weft_status l_all_gather(weft_comm *c, const weft_comm_buf *send, const weft_comm_buf *recv,
				weft_comm_work **work)
{
	weft_pg *pg = weft_tp_comm_find(c);

	if (!pg)
		return backend->all_gather(c, send, recv, work);
	return issued(pg, weft_pg_all_gather(pg, send, recv, work), work);
}

static weft_status l_broadcast(weft_comm *c, const weft_comm_buf *buf, int32_t root,
			       weft_comm_work **work)
{
	weft_pg *pg = weft_tp_comm_find(c);

	if (!pg)
		return backend->broadcast(c, buf, root, work);
	return issued(pg, weft_pg_broadcast(pg, buf, root, work), work);
}

static weft_status l_all_to_all(weft_comm *c, const weft_comm_buf *send, const weft_comm_buf *recv,
				weft_comm_work **work)
{
	weft_pg *pg = weft_tp_comm_find(c);

	if (!pg)
		return backend->all_to_all(c, send, recv, work);
	return issued(pg, weft_pg_all_to_all(pg, send, recv, work), work);
}

static weft_status l_barrier(weft_comm *c, weft_comm_work **work)
{
	weft_pg *pg = weft_tp_comm_find(c);

	if (!pg)
		return backend->barrier(c, work);
	return issued(pg, weft_pg_barrier(pg, work), work);
}

static weft_status l_wait(weft_comm_work *work, int64_t timeout_ms)
{
	weft_pg *pg = forget(work);

	return pg ? weft_pg_wait(pg, work, timeout_ms) : backend->wait(work, timeout_ms);
}

const weft_comm_ops *weft_tp_ledger_ops(const weft_comm_ops *b)
{
	const weft_comm_ops *out = b;

	if (!b)
		return NULL;
	pthread_mutex_lock(&lock);
	if (!backend) {
		backend = b;
		wrapped = *b;
		wrapped.all_reduce = l_all_reduce;
		wrapped.reduce_scatter = l_reduce_scatter;
		wrapped.all_gather = l_all_gather;
		wrapped.broadcast = l_broadcast;
		wrapped.all_to_all = l_all_to_all;
		wrapped.barrier = l_barrier;
		wrapped.wait = l_wait;
	}
	if (backend == b)
		out = &wrapped;
	pthread_mutex_unlock(&lock);
	return out;
}
