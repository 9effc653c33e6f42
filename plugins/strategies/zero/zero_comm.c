/* ZeRO, the middle layer: the collectives over the unit buffers of
 * zero_layout.c. The queue of collectives in flight, stage 3's gathering,
 * prefetching and release, stages 2 and 3's bucket reduce-scatters, the
 * autograd hooks that launch them, and the blocking collectives on the
 * staging buffer (stages 1, 2) and of persistent units (stage 3) that the
 * step (zero_step.c, which describes the stages) runs after the optimizer.
 * Buffers are filled, packed and summed through zero_dev.c's services
 * (stream-ordered on the compute stream, which the comm backend's staging
 * or its own stream orders after), never by this file's code. */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

/* ---- the queue of collectives in flight --------------------------------- */

static weft_status enqueue(zero *z, weft_comm_work *w, int kind, size_t unit, int64_t t0)
{
	if (z->q_tail == z->q_cap) {
		size_t cap = z->q_cap ? z->q_cap * 2 : 64;
		zwork *q = realloc(z->q, cap * sizeof(*q));

		if (!q) {
			z->ops->wait(w, -1);
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory for "
						 "the collective queue", z->label);
		}
		z->q = q;
		z->q_cap = cap;
	}
	z->q[z->q_tail++] = (zwork){ .work = w, .kind = kind, .unit = unit, .t_launch = t0 };
	return WEFT_OK;
}

/* Applies a finished collective: a gathered unit becomes usable; a
 * reduce-scattered bucket adds its averaged piece to the gradient shard
 * and goes back to the pool. */
static weft_status retire(zero *z, zwork *e, int64_t now)
{
	weft_status st;

	zunit *u = &z->units[e->unit];
	int64_t start = e->t_launch > z->last_done_ns ? e->t_launch : z->last_done_ns;

	z->busy_ns += now > start ? now - start : 0;
	z->last_done_ns = now;
	if (e->kind == ZW_AG) {
		u->ag = 2;
		zero_point_params(z, u, u->pbuf);
		return WEFT_OK;
	}
	st = zero_dadd(z, z->gshard + u->packed, u->gbuf + (int64_t)z->rank * u->chunk,
		       u->mine_hi - u->mine_lo);
	/* offload: the step's last micro-batch made the piece final */
	if (!st)
		st = zero_offload_grads_down(z, u);
	zero_point_grads(z, u, NULL);
	zero_pool_put(&z->gpool, u->gbuf, z->world * u->chunk);
	u->gbuf = NULL;
	if (st)
		return g_host->error_wrap(st, "strategy '%s': adding unit %zu's reduced gradients "
					  "to the shard", z->label, e->unit);
	return WEFT_OK;
}

/* Waits for queue entries up to and including index `upto`. */
static weft_status wait_through(zero *z, size_t upto)
{
	weft_status st = WEFT_OK;

	while (z->q_head < z->q_tail && z->q_head <= upto) {
		zwork *e = &z->q[z->q_head];
		int64_t t0 = weft_clock_ns();
		weft_status w = z->ops->wait(e->work, -1);
		int64_t t1 = weft_clock_ns();

		z->exposed_ns += t1 - t0;
		e->work = NULL;
		z->q_head++;
		if (w) {
			if (!st)
				st = g_host->error_wrap(w, "strategy '%s': %s of unit %zu (elements "
							"%lld..%lld)", z->label,
							e->kind == ZW_AG ? "all-gather" : "reduce-scatter",
							e->unit, (long long)z->units[e->unit].lo,
							(long long)z->units[e->unit].hi);
			continue;
		}
		if (!st)
			st = retire(z, e, t1);
	}
	if (z->q_head == z->q_tail)
		z->q_head = z->q_tail = 0;
	return st;
}

weft_status zero_drain(zero *z)
{
	return z->q_tail ? wait_through(z, z->q_tail - 1) : WEFT_OK;
}

/* Retires finished collectives at the head without waiting. */
static weft_status poll(zero *z)
{
	weft_status st = WEFT_OK;

	while (!st && z->q_head < z->q_tail) {
		zwork *e = &z->q[z->q_head];
		int done = 0;

		if (z->ops->test(e->work, &done) || !done)
			return WEFT_OK;
		if (z->ops->wait(e->work, -1))
			return WEFT_OK; /* broken: the next wait reports it */
		e->work = NULL;
		z->q_head++;
		st = retire(z, e, weft_clock_ns());
	}
	if (z->q_head == z->q_tail)
		z->q_head = z->q_tail = 0;
	return st;
}

/* ---- stage 3: gathering ------------------------------------------------- */

/* Gathers unit k into buf (a pool buffer), or into one from the pool when
 * buf is NULL. */
static weft_status launch_ag(zero *z, size_t k, int blocking, float *buf)
{
	zunit *u = &z->units[k];
	float *mine;
	int64_t piece = u->mine_hi - u->mine_lo, t0 = weft_clock_ns();
	weft_comm_buf send, recv;
	weft_comm_work *w = NULL;
	weft_status st;

	u->pbuf = buf ? buf : zero_pool_get(z, &z->ppool, z->world * u->chunk);
	if (!u->pbuf)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s' (rank %d): out of memory "
					 "gathering unit %zu (%lld bytes)", z->label, z->rank, k,
					 (long long)(z->world * u->chunk * 4));
	mine = u->pbuf + (int64_t)z->rank * u->chunk;
	st = zero_dcopy(z, mine, z->pshard + u->packed, piece);
	if (!st)
		st = zero_dzero(z, mine + piece, u->chunk - piece);
	if (st) {
		zero_pool_put(&z->ppool, u->pbuf, z->world * u->chunk);
		u->pbuf = NULL;
		return g_host->error_wrap(st, "strategy '%s': packing unit %zu for its all-gather",
					  z->label, k);
	}
	z->live_elems += u->hi - u->lo;
	u->ag = 1;
	z->bytes += z->world * u->chunk * 4;
	z->elements += z->world * u->chunk;
	z->calls++;
	z->gathers++;
	if (z->world == 1) {
		u->ag = 2;
		zero_point_params(z, u, u->pbuf);
		return WEFT_OK;
	}
	send = zero_buf(z, mine, u->chunk);
	recv = zero_buf(z, u->pbuf, z->world * u->chunk);
	st = z->ops->all_gather(z->comm, &send, &recv, blocking ? NULL : &w);
	if (st)
		return g_host->error_wrap(st, "strategy '%s': all-gather of unit %zu (elements "
					  "%lld..%lld)", z->label, k, (long long)u->lo,
					  (long long)u->hi);
	if (blocking) {
		int64_t t1 = weft_clock_ns();

		z->exposed_ns += t1 - t0;
		z->busy_ns += t1 - t0;
		u->ag = 2;
		zero_point_params(z, u, u->pbuf);
		return WEFT_OK;
	}
	return enqueue(z, w, ZW_AG, k, t0);
}

weft_status zero_gather_unit(zero *z, size_t k)
{
	zunit *u = &z->units[k];

	if (u->ag == 0)
		return launch_ag(z, k, 1, NULL);
	if (u->ag == 1) {
		for (size_t i = z->q_head; i < z->q_tail; i++)
			if (z->q[i].kind == ZW_AG && z->q[i].unit == k)
				return wait_through(z, i);
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy '%s': unit %zu is being "
					 "gathered but no all-gather is queued", z->label, k);
	}
	return WEFT_OK;
}

static void release(zero *z, zunit *u)
{
	if (u->persist || u->ag != 2)
		return;
	zero_point_params(z, u, NULL);
	zero_pool_put(&z->ppool, u->pbuf, z->world * u->chunk);
	u->pbuf = NULL;
	u->ag = 0;
	u->owner = NULL;
	u->used = 0;
	z->live_elems -= u->hi - u->lo;
}

void zero_release_all(zero *z)
{
	for (size_t k = 0; k < z->n_units; k++)
		release(z, &z->units[k]);
}

/* Launches the all-gathers of the units after k (forward) or before it
 * (backward), up to stage3_prefetch_bucket_size elements ahead and within
 * stage3_max_live_parameters, into the buffers setup reserved, keeping one
 * free for a unit needed now (a prefetch never grows the pool). */
static weft_status prefetch(zero *z, size_t k, int backward)
{
	int64_t ahead = 0;

	for (size_t step = 1; step < z->n_units; step++) {
		size_t j;
		zunit *u;
		float *buf;
		weft_status st;

		if (backward) {
			if (step > k)
				break;
			j = k - step;
		} else {
			j = k + step;
			if (j >= z->n_units)
				break;
		}
		u = &z->units[j];
		if (u->persist)
			continue;
		ahead += u->hi - u->lo;
		if (ahead > z->prefetch_bucket_size)
			break;
		if (u->ag != 0)
			continue;
		if (z->live_elems + (u->hi - u->lo) > z->max_live_parameters)
			break;
		buf = zero_pool_try(&z->ppool, z->world * u->chunk, 1);
		if (!buf)
			break;
		st = launch_ag(z, j, 0, buf);
		if (st)
			return st;
	}
	return WEFT_OK;
}

/* ---- stages 2 and 3: reducing ------------------------------------------- */

static weft_status grad_bucket(zero *z, size_t k)
{
	zunit *u = &z->units[k];

	if (u->gbuf)
		return WEFT_OK;
	/* double buffering, as DeepSpeed's buckets: at most one reduce-scatter
	 * in flight while the next bucket fills, so gradients held stay at the
	 * open buckets plus one */
	for (size_t i = z->q_tail; i-- > z->q_head;)
		if (z->q[i].kind == ZW_RS) {
			weft_status st = wait_through(z, i);

			if (st)
				return st;
			break;
		}
	u->gbuf = zero_pool_get(z, &z->gpool, z->world * u->chunk);
	if (!u->gbuf)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s' (rank %d): out of memory "
					 "for the gradient bucket of unit %zu", z->label, z->rank,
					 k);
	zero_point_grads(z, u, u->gbuf);
	return zero_dzero(z, u->gbuf, z->world * u->chunk);
}

static weft_status launch_rs(zero *z, size_t k)
{
	zunit *u = &z->units[k];
	int64_t t0 = weft_clock_ns();
	weft_comm_buf send, recv;
	weft_comm_work *w = NULL;
	weft_status st = grad_bucket(z, k);

	if (st)
		return st;
	u->rs_launched = 1;
	z->bytes += z->world * u->chunk * 4;
	z->elements += z->world * u->chunk;
	z->calls++;
	if (z->world == 1) {
		zwork e = { .kind = ZW_RS, .unit = k, .t_launch = t0 };

		return retire(z, &e, weft_clock_ns());
	}
	send = zero_buf(z, u->gbuf, z->world * u->chunk);
	recv = zero_buf(z, u->gbuf + (int64_t)z->rank * u->chunk, u->chunk);
	st = z->ops->reduce_scatter(z->comm, &send, &recv, WEFT_COMM_AVG, &w);
	if (st)
		return g_host->error_wrap(st, "strategy '%s': launching the reduce-scatter of "
					  "unit %zu (elements %lld..%lld)", z->label, k,
					  (long long)u->lo, (long long)u->hi);
	st = enqueue(z, w, ZW_RS, k, t0);
	if (!st && !z->overlap_comm)
		st = wait_through(z, z->q_tail - 1);
	return st;
}

/* Launches, from the last unit backward, every complete unit whose
 * successors were all launched: the same order on every rank. */
weft_status zero_launch_ready(zero *z)
{
	while (z->next_rs < z->n_units) {
		size_t k = z->n_units - 1 - z->next_rs;
		weft_status st;

		if (z->units[k].ready < z->units[k].p_count)
			break;
		st = launch_rs(z, k);
		if (st)
			return st;
		z->next_rs++;
	}
	return WEFT_OK;
}

/* ---- hooks -------------------------------------------------------------- */

static zunit *unit_of(zero *z, const weft_tensor *p, size_t *k)
{
	int64_t i = p ? p->param_index : -1;

	if (i < 0 || (size_t)i >= z->n_params || g_host->params_at(z->env->params, (size_t)i) != p)
		return NULL;
	*k = (size_t)z->unit_of[i];
	return &z->units[*k];
}

static weft_status pre_use_hook(struct weft_ctx *ctx, const struct weft_hook_event *ev, void *user)
{
	zero *z = user;
	size_t k;
	zunit *u = unit_of(z, ev->param, &k);
	int backward = ev->pass == WEFT_PASS_BACKWARD;
	weft_status st;

	(void)ctx;
	if (!u)
		return WEFT_OK;
	if (z->stage == 3 && !u->persist && !z->gathered_whole) {
		st = zero_gather_unit(z, k);
		if (st)
			return st;
		if (!u->used) {
			u->used = 1;
			u->owner = z->depth ? z->mod_stack[z->depth - 1] : NULL;
		}
		if (z->prefetch_bucket_size) {
			st = prefetch(z, k, backward);
			if (st)
				return st;
		}
	}
	if (backward && z->reducing)
		return grad_bucket(z, k);
	return WEFT_OK;
}

static weft_status grad_final_hook(struct weft_ctx *ctx, const struct weft_hook_event *ev,
				   void *user)
{
	zero *z = user;
	size_t k;
	zunit *u = unit_of(z, ev->param, &k);

	(void)ctx;
	if (!u || !z->reducing)
		return WEFT_OK;
	u->ready++;
	if (z->q_head < z->q_tail) {
		weft_status st = poll(z);

		if (st)
			return st;
	}
	return zero_launch_ready(z);
}

static weft_status module_begin_hook(struct weft_ctx *ctx, const struct weft_hook_event *ev,
				     void *user)
{
	zero *z = user;

	(void)ctx;
	if (z->depth < ZERO_MAX_DEPTH)
		z->mod_stack[z->depth] = ev->module_ptr;
	z->depth++;
	return WEFT_OK;
}

static weft_status module_end_hook(struct weft_ctx *ctx, const struct weft_hook_event *ev,
				   void *user)
{
	zero *z = user;

	(void)ctx;
	if (z->depth > 0)
		z->depth--;
	if (z->gathered_whole || !ev->module_ptr)
		return WEFT_OK;
	for (size_t k = 0; k < z->n_units; k++) {
		zunit *u = &z->units[k];

		if (u->ag == 2 && u->used && u->owner == ev->module_ptr)
			release(z, u);
	}
	return WEFT_OK;
}

static weft_status add_hook(zero *z, weft_hook_kind kind, weft_hook_fn fn)
{
	weft_status st = g_host->ctx_add_hook(z->env->ctx, kind, fn, z, &z->hooks[z->n_hooks]);

	if (!st)
		z->n_hooks++;
	return st;
}

weft_status zero_hooks_add(zero *z)
{
	weft_status st = WEFT_OK;

	if (z->stage >= 2) {
		st = add_hook(z, WEFT_HOOK_PARAM_PRE_USE, pre_use_hook);
		if (!st)
			st = add_hook(z, WEFT_HOOK_GRAD_FINAL, grad_final_hook);
	}
	if (z->stage == 3) {
		if (!st)
			st = add_hook(z, WEFT_HOOK_MODULE_FORWARD_BEGIN, module_begin_hook);
		if (!st)
			st = add_hook(z, WEFT_HOOK_MODULE_BACKWARD_BEGIN, module_begin_hook);
		if (!st)
			st = add_hook(z, WEFT_HOOK_MODULE_FORWARD_END, module_end_hook);
		if (!st)
			st = add_hook(z, WEFT_HOOK_MODULE_BACKWARD_END, module_end_hook);
	}
	return st;
}

/* ---- stage 1 and the all-gather after the step -------------------------- */

/* A blocking collective on the staging buffer (stages 1, 2). */
weft_status zero_staged(zero *z, size_t k, int reduce)
{
	zunit *u = &z->units[k];
	int64_t len = u->hi - u->lo, piece = u->mine_hi - u->mine_lo, t0 = weft_clock_ns();
	float *mine = z->staging + (int64_t)z->rank * u->chunk;
	weft_comm_buf all = zero_buf(z, z->staging, z->world * u->chunk);
	weft_comm_buf one = zero_buf(z, mine, u->chunk);
	weft_status st = WEFT_OK;

	if (reduce) {
		st = zero_dcopy(z, z->staging, z->full_grads + u->lo, len);
		if (!st)
			st = zero_dzero(z, z->staging + len, z->world * u->chunk - len);
		if (!st && z->world > 1)
			st = z->ops->reduce_scatter(z->comm, &all, &one, WEFT_COMM_AVG, NULL);
		if (!st)
			st = zero_dcopy(z, z->full_grads + u->mine_lo, mine, piece);
	} else {
		st = zero_dcopy(z, mine, z->full_params + u->mine_lo, piece);
		if (!st)
			st = zero_dzero(z, mine + piece, u->chunk - piece);
		if (!st && z->world > 1)
			st = z->ops->all_gather(z->comm, &one, &all, NULL);
		if (!st)
			st = zero_dcopy(z, z->full_params + u->lo, z->staging, len);
	}
	if (st)
		return g_host->error_wrap(st, "strategy '%s': %s of unit %zu (elements %lld..%lld)",
					  z->label, reduce ? "reduce-scatter" : "all-gather", k,
					  (long long)u->lo, (long long)u->hi);
	{
		int64_t dt = weft_clock_ns() - t0;

		z->busy_ns += dt;
		z->exposed_ns += dt;
	}
	z->bytes += z->world * u->chunk * 4;
	z->elements += z->world * u->chunk;
	z->calls++;
	return WEFT_OK;
}

/* Stage 3, after the step: persistent units take their new values. */
weft_status zero_refresh_persistent(zero *z)
{
	for (size_t k = 0; k < z->n_units; k++) {
		zunit *u = &z->units[k];
		int64_t piece = u->mine_hi - u->mine_lo;
		float *mine;
		weft_comm_buf send, recv;
		weft_status st;

		if (!u->persist)
			continue;
		mine = u->pbuf + (int64_t)z->rank * u->chunk;
		st = zero_dcopy(z, mine, z->pshard + u->packed, piece);
		if (!st)
			st = zero_dzero(z, mine + piece, u->chunk - piece);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': packing persistent unit %zu",
						  z->label, k);
		z->bytes += z->world * u->chunk * 4;
		z->elements += z->world * u->chunk;
		z->calls++;
		if (z->world == 1)
			continue;
		send = zero_buf(z, mine, u->chunk);
		recv = zero_buf(z, u->pbuf, z->world * u->chunk);
		st = z->ops->all_gather(z->comm, &send, &recv, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy '%s': all-gather of persistent unit "
						  "%zu", z->label, k);
	}
	return WEFT_OK;
}
