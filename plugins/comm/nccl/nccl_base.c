/* The NCCL plugin's base, below nccl_comm.c (communicators, issue and
 * wait) and nccl_watchdog.c: the host table, the clock, a communicator's
 * name and broken state, aborting it, and handing a work handle back. */
#include <stdio.h>
#include <time.h>

#include "nccl_impl.h"

const weft_host *nccl_host;

void nccl_account_device(weft_mem_category cat, int64_t delta)
{
	weft_host_account_device(nccl_host, cat, delta);
}

int64_t nccl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *nccl_who(const weft_comm *c, char *buf, size_t len)
{
	snprintf(buf, len, "nccl: comm '%s' rank %d/%d", c->name, (int)c->rank, (int)c->size);
	return buf;
}

void nccl_break(weft_comm *c, const char *reason)
{
	int expect = 0;

	/* 0: intact, 1: reason being written, 2: broken with reason */
	if (atomic_compare_exchange_strong(&c->broken, &expect, 1)) {
		snprintf(c->broken_reason, sizeof(c->broken_reason), "%s", reason);
		atomic_store(&c->broken, 2);
	}
}

/* ncclCommAbort, once; the caller holds c->mu. nc is unusable after it. */
void nccl_abort_nc_locked(weft_comm *c)
{
	int expect = 0;

	if (c->nc && atomic_compare_exchange_strong(&c->nc_aborted, &expect, 1))
		ncclCommAbort(c->nc);
}

/* Hands a finished handle back, with its scratch area; the caller holds
 * c->mu. */
void nccl_put_work_locked(weft_comm *c, weft_comm_work *w)
{
	if (w->pending) {
		if (w->pend_prev)
			w->pend_prev->pend_next = w->pend_next;
		else
			c->pending = w->pend_next;
		if (w->pend_next)
			w->pend_next->pend_prev = w->pend_prev;
		w->pend_prev = w->pend_next = NULL;
		w->pending = 0;
	}
	if (w->stage) {
		w->stage->next = c->free_stages;
		c->free_stages = w->stage;
		w->stage = NULL;
	}
	w->out_dst = NULL;
	w->out_bytes = 0;
	w->on_device = 0;
	w->next = c->free_works;
	c->free_works = w;
}
