/* The prefetching loader: one worker thread, a ring of batch slots, a
 * generation counter so a restarted epoch discards stale fills. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/loader.h"

#define MAX_PREFETCH 16

struct weft_loader {
	weft_batch_source src;
	int slots;
	weft_host_batch *ring;
	int threaded;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv_work;   /* worker waits: slot freed, epoch started, stop */
	pthread_cond_t cv_ready;  /* consumer waits: batch ready, error */
	pthread_cond_t cv_idle;   /* start_epoch waits: fill finished */
	/* guarded by mu: */
	int active;               /* an epoch is running */
	int busy;                 /* the worker is filling outside the lock */
	int stop;
	uint64_t gen;             /* bumped by start_epoch */
	int64_t epoch, first, end;
	int64_t produced;         /* batches filled this epoch run */
	int64_t consumed;         /* batches handed out */
	int holding;              /* the consumer holds slot (consumed - 1) */
	weft_status err;
	char errmsg[1024];
	int64_t err_index;
	double wait_s;
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int can_fill(const weft_loader *l)
{
	int64_t released = l->consumed - l->holding;

	return l->active && !l->err && l->first + l->produced < l->end &&
	       l->produced - released < l->slots;
}

static void *worker(void *arg)
{
	weft_loader *l = arg;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		int64_t k, index;
		uint64_t gen;
		weft_status st;
		char msg[sizeof(l->errmsg)];

		if (!can_fill(l)) {
			pthread_cond_wait(&l->cv_work, &l->mu);
			continue;
		}
		k = l->produced;
		index = l->first + k;
		gen = l->gen;
		l->busy = 1;
		pthread_mutex_unlock(&l->mu);

		st = l->src.fill(l->src.ctx, index, &l->ring[k % l->slots]);
		if (st)
			snprintf(msg, sizeof(msg), "%s", weft_error_last());

		pthread_mutex_lock(&l->mu);
		l->busy = 0;
		pthread_cond_broadcast(&l->cv_idle);
		if (gen != l->gen)
			continue; /* the epoch was restarted meanwhile: discard */
		if (st) {
			l->err = st;
			l->err_index = index;
			memcpy(l->errmsg, msg, sizeof(msg));
		} else {
			l->produced++;
		}
		pthread_cond_broadcast(&l->cv_ready);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

weft_status weft_loader_create(const weft_batch_source *src, int prefetch, weft_loader **out)
{
	weft_loader *l;
	weft_status st;

	*out = NULL;
	if (prefetch < 0 || prefetch > MAX_PREFETCH)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "prefetch must be 0 to %d batches, got %d",
				      MAX_PREFETCH, prefetch);
	l = calloc(1, sizeof(*l));
	if (!l)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory creating a data loader");
	l->src = *src;
	l->slots = prefetch + 1;
	l->ring = calloc((size_t)l->slots, sizeof(*l->ring));
	if (!l->ring) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory creating a data loader");
		goto out_free;
	}
	for (int i = 0; i < l->slots; i++) {
		st = src->alloc(src->ctx, &l->ring[i]);
		if (st)
			goto out_free_batches;
	}
	l->epoch = -1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv_work, NULL);
	pthread_cond_init(&l->cv_ready, NULL);
	pthread_cond_init(&l->cv_idle, NULL);
	if (prefetch > 0) {
		if (pthread_create(&l->thread, NULL, worker, l) != 0) {
			st = weft_error_set(WEFT_ERR_INTERNAL, "cannot start the data loader thread");
			goto out_destroy_sync;
		}
		l->threaded = 1;
	}
	*out = l;
	return WEFT_OK;
out_destroy_sync:
	pthread_cond_destroy(&l->cv_idle);
	pthread_cond_destroy(&l->cv_ready);
	pthread_cond_destroy(&l->cv_work);
	pthread_mutex_destroy(&l->mu);
out_free_batches:
	for (int i = 0; i < l->slots; i++)
		weft_batch_free(&l->ring[i]);
	free(l->ring);
out_free:
	free(l);
	return st;
}

weft_status weft_loader_start_epoch(weft_loader *l, int64_t epoch, int64_t first_batch)
{
	weft_status st;
	int64_t n;

	pthread_mutex_lock(&l->mu);
	l->gen++;
	l->active = 0;
	while (l->busy)
		pthread_cond_wait(&l->cv_idle, &l->mu);
	/* The worker is idle and cannot start a fill (active == 0). */
	st = l->src.prepare_epoch(l->src.ctx, epoch);
	if (st)
		goto out_unlock;
	n = l->src.num_batches(l->src.ctx);
	if (first_batch < 0 || first_batch > n) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "cannot start epoch %" PRId64 " at batch %"
				    PRId64 ": it has %" PRId64 " batches (was the checkpoint made "
				    "with another batch size or world size?)", epoch, first_batch,
				    n);
		goto out_unlock;
	}
	l->epoch = epoch;
	l->first = first_batch;
	l->end = n;
	l->produced = l->consumed = 0;
	l->holding = 0;
	l->err = WEFT_OK;
	l->active = 1;
	pthread_cond_broadcast(&l->cv_work);
out_unlock:
	pthread_mutex_unlock(&l->mu);
	return st;
}

weft_status weft_loader_next(weft_loader *l, const weft_host_batch **out)
{
	weft_status st = WEFT_OK;
	double t0;

	*out = NULL;
	if (!l->threaded) {
		weft_host_batch *b;

		if (!l->active)
			return weft_error_set(WEFT_ERR_INVALID_ARG, "data loader: next before "
					      "start_epoch");
		if (l->first + l->consumed >= l->end)
			return WEFT_OK;
		b = &l->ring[0];
		st = l->src.fill(l->src.ctx, l->first + l->consumed, b);
		if (st)
			return weft_error_wrap(st, "data loader, epoch %" PRId64 " batch %" PRId64,
					       l->epoch, l->first + l->consumed);
		l->consumed++;
		*out = b;
		return WEFT_OK;
	}
	pthread_mutex_lock(&l->mu);
	if (!l->active) {
		pthread_mutex_unlock(&l->mu);
		return weft_error_set(WEFT_ERR_INVALID_ARG, "data loader: next before start_epoch");
	}
	if (l->holding) {
		l->holding = 0;
		pthread_cond_signal(&l->cv_work);
	}
	if (l->first + l->consumed >= l->end)
		goto out_unlock;
	t0 = mono();
	while (l->produced == l->consumed && !l->err)
		pthread_cond_wait(&l->cv_ready, &l->mu);
	l->wait_s += mono() - t0;
	if (l->produced > l->consumed) {
		*out = &l->ring[l->consumed % l->slots];
		l->consumed++;
		l->holding = 1;
	} else {
		st = weft_error_set(l->err, "data loader, epoch %" PRId64 " batch %" PRId64 ": %s",
				    l->epoch, l->err_index, l->errmsg);
	}
out_unlock:
	pthread_mutex_unlock(&l->mu);
	return st;
}

int64_t weft_loader_num_batches(const weft_loader *l)
{
	return l->src.num_batches(l->src.ctx);
}

void weft_loader_position(const weft_loader *l, int64_t *epoch, int64_t *next_batch)
{
	weft_loader *m = (weft_loader *)l;

	pthread_mutex_lock(&m->mu);
	*epoch = l->epoch;
	*next_batch = l->first + l->consumed;
	pthread_mutex_unlock(&m->mu);
}

double weft_loader_wait_seconds(const weft_loader *l)
{
	return l->wait_s;
}

void weft_loader_destroy(weft_loader *l)
{
	if (!l)
		return;
	if (l->threaded) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_broadcast(&l->cv_work);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thread, NULL);
	}
	pthread_cond_destroy(&l->cv_idle);
	pthread_cond_destroy(&l->cv_ready);
	pthread_cond_destroy(&l->cv_work);
	pthread_mutex_destroy(&l->mu);
	for (int i = 0; i < l->slots; i++)
		weft_batch_free(&l->ring[i]);
	free(l->ring);
	free(l);
}
