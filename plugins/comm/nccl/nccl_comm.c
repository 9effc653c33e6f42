/* The NCCL comm plugin: communicators, work handles and waiting (the
 * collectives are nccl_ops.c's, the vtable and entry symbol nccl_entry.c's).
 *
 * - The unique id travels through the rendezvous store: rank 0 makes it
 *   and sets "<group name>/nccl/<generation>/unique_id"; the others wait
 *   for the key (nccl_rendezvous.h: a re-created group never reads the id
 *   of an earlier one).
 * - Communicators are non-blocking (ncclConfig_t.blocking = 0): init, every
 *   collective and finalize return at once, and the plugin polls
 *   ncclCommGetAsyncError against a deadline (the comm's timeout). When the
 *   deadline passes it calls ncclCommAbort and reports WEFT_ERR_TIMEOUT:
 *   a stuck peer never hangs this rank. A watchdog thread per communicator
 *   does the same for collectives nobody is waiting for (the host may be
 *   blocked elsewhere, in cudaFree or a device-wide synchronize that waits
 *   for the stuck NCCL kernel): it aborts the communicator once a pending
 *   collective is older than the timeout or NCCL reports an error.
 * - Every use of the ncclComm_t holds the comm's lock, since another
 *   thread (wait, abort, the watchdog) may abort it at any moment.
 * - Collectives run on the communicator's own stream (non-blocking: no
 *   implicit order with the legacy default stream or any other). Before
 *   each, the comm stream waits for events recorded on the compute streams
 *   (the CUDA kernel library's extras, stream_wait_compute: one per live
 *   kernel-table context of the GPU, since a comm call carries no context
 *   and pp computes on several), so the collective sees everything the
 *   compute streams wrote before the call. Completion is an event on the
 *   comm stream; `wait` polls it with the deadline, so compute issued
 *   after `wait` returned runs after the collective. No device-wide
 *   synchronize and no legacy-stream work on the way.
 * - Host buffers (weft_comm_buf.device == WEFT_COMM_DEVICE_CPU: the
 *   trainer's loss, eval sums, overflow flag, config hash, broadcast paths)
 *   are staged (nccl_stage.h): the call takes an idle scratch area (device
 *   memory plus as many pinned host bytes), memcpys what the collective
 *   reads into the pinned block, queues pinned -> device, the collective
 *   on the scratch, device -> pinned, then the completion event, all on
 *   the comm stream; `wait` copies the result into the caller's buffer
 *   once the event completed. Nothing blocks outside the deadline (no
 *   pageable copy, which would wait for the collective itself), each
 *   pending call has its own area, and areas are only freed at destroy
 *   (cudaFree would synchronize the device).
 *   Why not a second, host-side group (gloo) for host buffers, as torch
 *   does: it would need a second backend loaded and connected for every
 *   group and split, and an order between the two groups' collectives
 *   (ddp's loss all-reduce is issued behind the bucket all-reduces and
 *   waited with them); staging keeps one communicator, one FIFO, one
 *   deadline, at the cost of two small copies per host collective.
 * One communicator per process group: the host calls init for each group
 * (split is left to the host, which builds groups through the store).
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nccl_impl.h"

/* Polling pause: yield for the first rounds (collectives of small
 * buckets finish in microseconds), then sleep 50 us. */
static void pause_round(int round)
{
	struct timespec ts = { 0, 50000 };

	if (round < 200)
		sched_yield();
	else
		nanosleep(&ts, NULL);
}

static const char *reason_of(weft_comm *c)
{
	return atomic_load(&c->broken) == 2 ? c->broken_reason : "a failure on another thread";
}

/* Polls a non-blocking communicator until its last call finished.
 * Returns the outcome; *timed_out when the deadline passed, *cancelled
 * when abort was called meanwhile. */
static ncclResult_t settle(weft_comm *c, ncclResult_t r, int64_t deadline, int *timed_out,
			   int *cancelled)
{
	*timed_out = *cancelled = 0;
	for (int round = 0; r == ncclInProgress; round++) {
		if (nccl_now_ms() > deadline) {
			*timed_out = 1;
			break;
		}
		if (atomic_load(&c->broken)) {
			*cancelled = 1;
			break;
		}
		pause_round(round);
		if (ncclCommGetAsyncError(c->nc, &r) != ncclSuccess)
			break;
	}
	return r;
}

static weft_status fail_nccl(weft_comm *c, weft_status st, const char *what, const char *how,
			     ncclResult_t r)
{
	char who[256], msg[1024];
	const char *last = c->nc && !atomic_load(&c->nc_aborted) ? ncclGetLastError(c->nc) : "";

	snprintf(msg, sizeof(msg), "%s: %s %s: %s%s%s%s", nccl_who(c, who, sizeof(who)), what,
		 how, ncclGetErrorString(r), last && *last ? " (" : "", last ? last : "",
		 last && *last ? ")" : "");
	nccl_break(c, msg);
	return nccl_host->error_set(st, "%s", msg);
}

static weft_status fail_cuda(weft_comm *c, const char *what, cudaError_t err)
{
	char who[256], msg[1024];

	snprintf(msg, sizeof(msg), "%s: %s: CUDA error %s: %s", nccl_who(c, who, sizeof(who)), what,
		 cudaGetErrorName(err), cudaGetErrorString(err));
	nccl_break(c, msg);
	return nccl_host->error_set(WEFT_ERR_COMM, "%s", msg);
}

static weft_comm_work *take_work_locked(weft_comm *c)
{
	weft_comm_work *w = c->free_works;

	if (w) {
		c->free_works = w->next;
		return w;
	}
	w = nccl_host->mem_calloc(WEFT_MEM_COMM, sizeof(*w));
	if (!w)
		return NULL;
	if (cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming) != cudaSuccess) {
		nccl_host->mem_free(w);
		return NULL;
	}
	return w;
}

static void put_work(weft_comm *c, weft_comm_work *w)
{
	pthread_mutex_lock(&c->mu);
	nccl_put_work_locked(c, w);
	pthread_mutex_unlock(&c->mu);
}

/* The handles that waited on the device (nccl_wait) and were issued before
 * `seq`: done, since the comm stream runs in issue order and a later call
 * completed. Back to the free list. The caller holds c->mu. */
static void reclaim_before_locked(weft_comm *c, uint64_t seq)
{
	weft_comm_work *w = c->pending, *next;

	for (; w; w = next) {
		next = w->pend_next;
		if (w->on_device && w->seq < seq)
			nccl_put_work_locked(c, w);
	}
}

/* The device waits for w instead of the host: the legacy default stream
 * waits for its event, and with it every later piece of work of the
 * device's blocking streams (each kernel-table context's compute stream
 * is one; the comm stream is not): compute queued after this wait runs
 * after the collective, as after a host wait, and the host goes on. w
 * stays pending, so the watchdog still aborts a collective stuck past the
 * timeout (the device then stops waiting); it is handed back once a later
 * call of the comm completed on the host (reclaim_before_locked) or by the
 * watchdog. */
static weft_status wait_on_device(weft_comm *c, weft_comm_work *w)
{
	char who[256];
	cudaError_t err;

	if (atomic_load(&c->broken)) {
		weft_status st = nccl_host->error_set(WEFT_ERR_CANCELLED, "%s: %s was aborted (%s)",
						      nccl_who(c, who, sizeof(who)), w->what,
						      reason_of(c));

		put_work(c, w);
		return st;
	}
	cudaSetDevice(c->device);
	err = cudaStreamWaitEvent(cudaStreamLegacy, w->done, 0);
	if (err != cudaSuccess) {
		weft_status st = fail_cuda(c, w->what, err);

		pthread_mutex_lock(&c->mu);
		nccl_abort_nc_locked(c);
		pthread_mutex_unlock(&c->mu);
		put_work(c, w);
		return st;
	}
	pthread_mutex_lock(&c->mu);
	w->on_device = 1;
	pthread_mutex_unlock(&c->mu);
	return WEFT_OK;
}

/* An idle scratch area of at least `need` bytes in *out: the smallest
 * idle one that fits, else a new one of nccl_stage_capacity(need) (the
 * only allocation: once a run's few sizes have an area each, staging
 * allocates nothing). The caller holds c->mu and has made c->device
 * current. Errors: WEFT_ERR_NOMEM naming the bytes, WEFT_ERR_COMM for
 * other CUDA failures. */
static weft_status take_stage_locked(weft_comm *c, size_t need, const char *what,
				     struct nccl_stage_buf **out)
{
	struct nccl_stage_buf **best = NULL, *b;
	char who[256];
	cudaError_t err;
	weft_status st;

	for (struct nccl_stage_buf **p = &c->free_stages; *p; p = &(*p)->next)
		if ((*p)->cap >= need && (!best || (*p)->cap < (*best)->cap))
			best = p;
	if (best) {
		b = *best;
		*best = b->next;
		b->next = NULL;
		*out = b;
		return WEFT_OK;
	}
	b = nccl_host->mem_calloc(WEFT_MEM_OTHER, sizeof(*b));
	if (!b)
		return nccl_host->error_set(WEFT_ERR_NOMEM, "%s: %s: no memory for a staging area",
					    nccl_who(c, who, sizeof(who)), what);
	b->cap = nccl_stage_capacity(need, NCCL_STAGE_MIN_BYTES);
	err = cudaMalloc(&b->dev, b->cap);
	if (err == cudaSuccess)
		err = cudaHostAlloc(&b->host, b->cap, cudaHostAllocDefault);
	if (err != cudaSuccess) {
		st = nccl_host->error_set(err == cudaErrorMemoryAllocation ? WEFT_ERR_NOMEM :
					  WEFT_ERR_COMM, "%s: %s: allocating %zu bytes on cuda:%d and "
					  "as many pinned host bytes to stage host buffers: %s: %s",
					  nccl_who(c, who, sizeof(who)), what, b->cap, (int)c->device,
					  cudaGetErrorName(err), cudaGetErrorString(err));
		cudaGetLastError();
		if (b->dev)
			cudaFree(b->dev);
		nccl_host->mem_free(b);
		return st;
	}
	nccl_account_device(WEFT_MEM_COMM, (int64_t)b->cap);
	nccl_host->mem_account(WEFT_MEM_COMM, (int64_t)b->cap);
	b->all_next = c->all_stages;
	c->all_stages = b;
	*out = b;
	return WEFT_OK;
}

/* Points k->sdev and k->rdev at the buffers or at the scratch area, copies
 * the host bytes the call reads into pinned memory and queues their copy
 * to the device; notes on w what wait copies back. The caller holds c->mu
 * with c->device current. */
static cudaError_t stage_in_locked(weft_comm *c, struct nccl_call *k, weft_comm_work *w)
{
	const nccl_stage_plan *p = &k->plan;
	char *dev, *host;
	cudaError_t err = cudaSuccess;

	k->sdev = k->send ? k->send->data : NULL;
	k->rdev = k->recv ? k->recv->data : NULL;
	if (!p->staged)
		return cudaSuccess;
	dev = w->stage->dev;
	host = w->stage->host;
	if (p->send_mapped)
		k->sdev = dev + p->send_off;
	if (p->recv_mapped)
		k->rdev = dev + p->recv_off;
	if (p->in_bytes) {
		/* the area is idle (its last call was waited for): pinned memory is free */
		memcpy(host + p->in_off, k->send->data, p->in_bytes);
		err = cudaMemcpyAsync(dev + p->in_off, host + p->in_off, p->in_bytes,
				      cudaMemcpyHostToDevice, c->stream);
	}
	return err;
}

/* After the collective: queues the copy of what it wrote to pinned memory
 * and tells wait where it goes. */
static cudaError_t stage_out_locked(weft_comm *c, const struct nccl_call *k, weft_comm_work *w)
{
	const nccl_stage_plan *p = &k->plan;
	char *host;

	if (!p->staged || !p->out_bytes)
		return cudaSuccess;
	host = w->stage->host;
	w->out_dst = k->recv->data;
	w->out_src = host + p->out_off;
	w->out_bytes = p->out_bytes;
	return cudaMemcpyAsync(host + p->out_off, (char *)w->stage->dev + p->out_off,
			       p->out_bytes, cudaMemcpyDeviceToHost, c->stream);
}

/* Makes c->stream wait for the work issued so far on the compute streams
 * of c's GPU (module comment). A process that has not loaded the CUDA
 * kernel library has no compute stream of weft's: then there is nothing
 * to wait for (its device buffers were written by the caller's own
 * copies). The caller holds c->mu with c->device current. Errors:
 * WEFT_ERR_UNSUPPORTED for a kernel library built before ABI 1.4, the
 * extras' CUDA errors; either breaks c. */
static weft_status order_after_compute_locked(weft_comm *c, const char *what)
{
	const weft_cuda_extras *ex = c->extras;
	const char *file = NULL;
	char who[256], msg[1024];
	weft_status st;

	if (!ex) {
		if (!WEFT_HAS_MEMBER(nccl_host, weft_host, cuda_extras) ||
		    !nccl_host->cuda_extras || nccl_host->cuda_extras(&ex, &file) != WEFT_OK)
			return WEFT_OK; /* no kernel library loaded: no compute stream */
		if (!WEFT_HAS_MEMBER(ex, weft_cuda_extras, stream_wait_compute) ||
		    !ex->stream_wait_compute) {
			snprintf(msg, sizeof(msg), "%s: %s: the CUDA kernel library %s was built "
				 "before ABI 1.4 and cannot order the comm stream after its "
				 "compute streams (no stream_wait_compute); rebuild the CUDA "
				 "kernels with this weft", nccl_who(c, who, sizeof(who)), what,
				 file ? file : "(unknown file)");
			nccl_break(c, msg);
			return nccl_host->error_set(WEFT_ERR_UNSUPPORTED, "%s", msg);
		}
		c->extras = ex;
	}
	st = ex->stream_wait_compute(c->device, c->stream);
	if (st) {
		snprintf(msg, sizeof(msg), "%s: %s: ordering the comm stream after the compute "
			 "streams: %s", nccl_who(c, who, sizeof(who)), what,
			 nccl_host->error_last());
		nccl_break(c, msg);
		return nccl_host->error_set(st, "%s", msg);
	}
	return WEFT_OK;
}

weft_status nccl_issue(weft_comm *c, const char *what,
		       ncclResult_t (*issue_fn)(weft_comm *c, const struct nccl_call *k),
		       struct nccl_call *k, weft_comm_work **work)
{
	char who[256];
	int timed_out, cancelled;
	int64_t deadline = nccl_now_ms() + c->timeout_ms;
	weft_comm_work *w;
	cudaError_t err;
	ncclResult_t r;
	weft_status st;

	if (work)
		*work = NULL;
	if (atomic_load(&c->broken))
		return nccl_host->error_set(WEFT_ERR_COMM, "%s: %s refused: the communicator broke "
					    "earlier (%s)", nccl_who(c, who, sizeof(who)), what,
					    reason_of(c));
	pthread_mutex_lock(&c->mu);
	/* first: a new handle's event and a new staging area belong to c's GPU */
	err = cudaSetDevice(c->device);
	if (err != cudaSuccess) {
		st = fail_cuda(c, what, err);
		goto out_unlock;
	}
	w = take_work_locked(c);
	if (!w) {
		st = nccl_host->error_set(WEFT_ERR_NOMEM, "%s: no memory for a work handle",
					  nccl_who(c, who, sizeof(who)));
		goto out_unlock;
	}
	w->comm = c;
	if (k && k->plan.staged && (st = take_stage_locked(c, k->plan.bytes, what, &w->stage)))
		goto out_put_work;
	if ((st = order_after_compute_locked(c, what)))
		goto out_put_work;
	err = k ? stage_in_locked(c, k, w) : cudaSuccess;
	if (err != cudaSuccess) {
		st = fail_cuda(c, what, err);
		goto out_put_work;
	}
	r = settle(c, issue_fn(c, k), deadline, &timed_out, &cancelled);
	if (timed_out || cancelled) {
		nccl_abort_nc_locked(c);
		st = timed_out ? fail_nccl(c, WEFT_ERR_TIMEOUT, what, "could not be started within the "
					   "timeout; a peer is stuck or gone", ncclInProgress) :
		     fail_nccl(c, WEFT_ERR_CANCELLED, what, "was aborted", ncclInProgress);
		goto out_put_work;
	}
	if (r != ncclSuccess) {
		st = fail_nccl(c, WEFT_ERR_COMM, what, "failed", r);
		goto out_put_work;
	}
	w->seq = ++c->seq;
	/* device buffers only: wait may leave the waiting to the device */
	w->device_only = k && !k->plan.staged;
	snprintf(w->what, sizeof(w->what), "%s #%llu", what, (unsigned long long)w->seq);
	err = k ? stage_out_locked(c, k, w) : cudaSuccess;
	if (err == cudaSuccess)
		err = cudaEventRecord(w->done, c->stream);
	if (err == cudaSuccess) {
		/* for the watchdog: pending from now until wait hands it back */
		w->issued_ms = nccl_now_ms();
		w->pending = 1;
		w->pend_prev = NULL;
		w->pend_next = c->pending;
		if (c->pending)
			c->pending->pend_prev = w;
		c->pending = w;
	}
	pthread_mutex_unlock(&c->mu);
	if (err != cudaSuccess) {
		st = fail_cuda(c, what, err);
		/* the comm is broken now: abort so nothing runs on the area again */
		pthread_mutex_lock(&c->mu);
		nccl_abort_nc_locked(c);
		pthread_mutex_unlock(&c->mu);
		put_work(c, w);
		return st;
	}
	if (work) {
		*work = w;
		return WEFT_OK;
	}
	return nccl_wait(w, -1);

out_put_work:
	pthread_mutex_unlock(&c->mu);
	put_work(c, w);
	return st;

out_unlock:
	pthread_mutex_unlock(&c->mu);
	return st;
}

weft_status nccl_wait(weft_comm_work *w, int64_t timeout_ms)
{
	weft_comm *c;
	int64_t limit, deadline;
	weft_status st = WEFT_OK;
	char what[160];

	if (!w)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "nccl: wait on a NULL work handle");
	c = w->comm;
	if (w->device_only)
		return wait_on_device(c, w);
	limit = timeout_ms < 0 ? c->timeout_ms : timeout_ms;
	deadline = nccl_now_ms() + limit;
	snprintf(what, sizeof(what), "%s", w->what);
	cudaSetDevice(c->device);
	for (int round = 0;; round++) {
		cudaError_t err = cudaEventQuery(w->done);
		ncclResult_t r = ncclSuccess;

		if (err == cudaSuccess) {
			/* done, but an aborted communicator or an asynchronous
			 * error leaves the buffer unreduced: say so, never OK */
			char who[256];

			pthread_mutex_lock(&c->mu);
			if (atomic_load(&c->broken))
				st = nccl_host->error_set(WEFT_ERR_CANCELLED, "%s: %s was aborted (%s)",
							  nccl_who(c, who, sizeof(who)), what,
							  reason_of(c));
			else if (!atomic_load(&c->nc_aborted) &&
				 ncclCommGetAsyncError(c->nc, &r) == ncclSuccess &&
				 r != ncclSuccess && r != ncclInProgress)
				st = fail_nccl(c, WEFT_ERR_COMM, what, "failed (a peer has probably "
					       "exited; see its log)", r);
			pthread_mutex_unlock(&c->mu);
			break;
		}
		if (err != cudaErrorNotReady) {
			st = fail_cuda(c, what, err);
			break;
		}
		/* nc only under the lock (another thread may abort it); when an
		 * issuer holds it, skip the check this round */
		if (pthread_mutex_trylock(&c->mu) == 0) {
			if (!atomic_load(&c->nc_aborted) &&
			    ncclCommGetAsyncError(c->nc, &r) == ncclSuccess && r != ncclSuccess &&
			    r != ncclInProgress)
				st = fail_nccl(c, WEFT_ERR_COMM, what, "failed (a peer has probably "
					       "exited; see its log)", r);
			pthread_mutex_unlock(&c->mu);
			if (st != WEFT_OK)
				break;
		}
		if (atomic_load(&c->broken)) {
			char who[256];

			st = nccl_host->error_set(WEFT_ERR_CANCELLED, "%s: %s was aborted (%s)",
						  nccl_who(c, who, sizeof(who)), what, reason_of(c));
			break;
		}
		if (nccl_now_ms() > deadline) {
			char how[128];

			snprintf(how, sizeof(how), "did not finish within %lld ms; a peer is stuck, "
				 "behind, or called a different collective", (long long)limit);
			pthread_mutex_lock(&c->mu); /* fail_nccl reads nc's last error */
			st = fail_nccl(c, WEFT_ERR_TIMEOUT, what, how, ncclInProgress);
			pthread_mutex_unlock(&c->mu);
			break;
		}
		pause_round(round);
	}
	if (st != WEFT_OK) {
		/* no hang: tear the communicator down so the kernels stop */
		pthread_mutex_lock(&c->mu);
		nccl_abort_nc_locked(c);
		pthread_mutex_unlock(&c->mu);
	} else if (w->out_bytes) {
		/* a staged host recv: the event covers the copy to pinned memory */
		memcpy(w->out_dst, w->out_src, w->out_bytes);
	}
	pthread_mutex_lock(&c->mu);
	if (st == WEFT_OK)
		reclaim_before_locked(c, w->seq);
	nccl_put_work_locked(c, w);
	pthread_mutex_unlock(&c->mu);
	return st;
}

weft_status nccl_test(weft_comm_work *w, int *done)
{
	cudaError_t err;

	*done = 0;
	if (!w)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "nccl: test on a NULL work handle");
	cudaSetDevice(w->comm->device);
	err = cudaEventQuery(w->done);
	if (err == cudaSuccess)
		*done = 1;
	else if (err != cudaErrorNotReady)
		return fail_cuda(w->comm, w->what, err);
	return WEFT_OK;
}

/* ---- lifecycle ---- */

void nccl_abort(weft_comm *c)
{
	if (!c)
		return;
	nccl_break(c, "aborted by the host");
	/* never block: a thread inside a collective aborts nc when it sees the
	 * flag, or else the watchdog does within NCCL_WATCH_MS */
	if (pthread_mutex_trylock(&c->mu) == 0) {
		nccl_abort_nc_locked(c);
		pthread_mutex_unlock(&c->mu);
	}
}

void nccl_destroy(weft_comm *c)
{
	if (!c)
		return;
	nccl_watchdog_stop(c);
	pthread_mutex_lock(&c->mu);
	cudaSetDevice(c->device);
	if (c->nc && !atomic_load(&c->nc_aborted)) {
		int timed_out, cancelled;
		ncclResult_t r = settle(c, ncclCommFinalize(c->nc), nccl_now_ms() + c->timeout_ms,
					&timed_out, &cancelled);

		if (r == ncclSuccess && !timed_out && !cancelled)
			ncclCommDestroy(c->nc);
		else
			nccl_abort_nc_locked(c);
	}
	/* after finalize or abort nothing runs: the handles the device waited on
	 * are idle */
	while (c->pending)
		nccl_put_work_locked(c, c->pending);
	while (c->free_works) {
		weft_comm_work *w = c->free_works;

		c->free_works = w->next;
		cudaEventDestroy(w->done);
		nccl_host->mem_free(w);
	}
	while (c->all_stages) {
		struct nccl_stage_buf *b = c->all_stages;

		c->all_stages = b->all_next;
		cudaFreeHost(b->host);
		cudaFree(b->dev);
		nccl_account_device(WEFT_MEM_COMM, -(int64_t)b->cap);
		nccl_host->mem_account(WEFT_MEM_COMM, -(int64_t)b->cap);
		nccl_host->mem_free(b);
	}
	c->free_stages = NULL;
	if (c->barrier_buf) {
		cudaFree(c->barrier_buf);
		nccl_account_device(WEFT_MEM_COMM, -(int64_t)sizeof(int32_t));
	}
	if (c->stream)
		cudaStreamDestroy(c->stream);
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->wd_cv);
	pthread_mutex_destroy(&c->wd_mu);
	nccl_host->mem_free(c);
}

/* ncclGetUniqueId for nccl_exchange_id. */
static weft_status make_id(void *arg, void *id, size_t bytes)
{
	weft_comm *c = arg;
	char who[256];
	ncclResult_t r;

	(void)bytes;
	r = ncclGetUniqueId(id);
	if (r != ncclSuccess)
		return nccl_host->error_set(WEFT_ERR_COMM, "%s: ncclGetUniqueId failed: %s",
					    nccl_who(c, who, sizeof(who)), ncclGetErrorString(r));
	return WEFT_OK;
}

/* The unique id of this init of the group: made by rank 0, read by the
 * others through the store under this generation's key. */
static weft_status exchange_id(const weft_comm_init_args *a, weft_comm *c, ncclUniqueId *id)
{
	char who[256];
	int64_t gen;
	weft_status st;

	st = nccl_exchange_id(nccl_host, a->store, c->name, c->rank, a->timeout_ms,
			      nccl_who(c, who, sizeof(who)), make_id, c, id, sizeof(*id), &gen);
	if (!st)
		nccl_host->log(WEFT_LOG_DEBUG, "%s: NCCL id of generation %lld exchanged", who,
			       (long long)gen);
	return st;
}

static weft_status check_device(const weft_comm_init_args *a)
{
	cudaError_t err;
	int n = 0;

	if (a->device != WEFT_COMM_DEVICE_CUDA)
		return nccl_host->error_set(WEFT_ERR_UNSUPPORTED, "nccl moves GPU memory only; for "
					    "trainer.accelerator=cpu use trainer.comm=gloo");
	err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess || n == 0) {
		cudaGetLastError();
		return nccl_host->error_set(WEFT_ERR_UNSUPPORTED, "nccl: no CUDA device (%s); use "
					    "trainer.comm=gloo and trainer.accelerator=cpu on this "
					    "machine", err != cudaSuccess ? cudaGetErrorString(err) :
					    "cudaGetDeviceCount found 0 GPUs");
	}
	if (a->device_index < 0 || a->device_index >= n)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "nccl: device cuda:%d does not "
					    "exist: this machine has %d GPU%s (cuda:0..cuda:%d)",
					    (int)a->device_index, n, n == 1 ? "" : "s", n - 1);
	return WEFT_OK;
}

weft_status nccl_init(const weft_comm_init_args *a, weft_comm **out)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	char who[256];
	ncclUniqueId id;
	int timed_out = 0, cancelled = 0;
	int64_t deadline;
	cudaError_t err;
	ncclResult_t r;
	weft_status st;
	weft_comm *c;

	*out = NULL;
	if (!a || !a->store)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "nccl: init needs args and a store");
	if (a->size < 1 || a->rank < 0 || a->rank >= a->size)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "nccl: rank %d is not in a group of "
					    "size %d", (int)a->rank, (int)a->size);
	if (a->timeout_ms <= 0)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "nccl: the comm timeout must be "
					    "positive, got %lld ms", (long long)a->timeout_ms);
	if ((st = check_device(a)))
		return st;
	c = nccl_host->mem_calloc(WEFT_MEM_OTHER, sizeof(*c));
	if (!c)
		return WEFT_ERR_NOMEM;
	snprintf(c->name, sizeof(c->name), "%s", a->name ? a->name : "world");
	c->rank = a->rank;
	c->size = a->size;
	c->device = a->device_index;
	c->timeout_ms = a->timeout_ms;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->wd_mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&c->wd_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	deadline = nccl_now_ms() + a->timeout_ms;
	err = cudaSetDevice(c->device);
	if (err == cudaSuccess)
		err = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
	if (err == cudaSuccess)
		err = cudaMalloc((void **)&c->barrier_buf, sizeof(int32_t));
	if (err != cudaSuccess) {
		st = nccl_host->error_set(err == cudaErrorMemoryAllocation ? WEFT_ERR_NOMEM :
					  WEFT_ERR_COMM, "%s: setting up cuda:%d: %s: %s",
					  nccl_who(c, who, sizeof(who)), (int)c->device,
					  cudaGetErrorName(err), cudaGetErrorString(err));
		goto out_destroy;
	}
	nccl_account_device(WEFT_MEM_COMM, (int64_t)sizeof(int32_t));
	if ((st = exchange_id(a, c, &id)))
		goto out_destroy;
	cfg.blocking = 0;
	cfg.commName = c->name;
	r = ncclCommInitRankConfig(&c->nc, c->size, id, c->rank, &cfg);
	if (r == ncclInProgress || r == ncclSuccess)
		r = settle(c, r == ncclSuccess ? ncclInProgress : r, deadline, &timed_out,
			   &cancelled);
	if (r != ncclSuccess || timed_out) {
		if (timed_out)
			st = nccl_host->error_set(WEFT_ERR_TIMEOUT, "%s: the other ranks did not join "
						  "within %lld ms (are they running with "
						  "trainer.comm=nccl? raise trainer.comm_timeout if "
						  "they are slow to start)",
						  nccl_who(c, who, sizeof(who)),
						  (long long)a->timeout_ms);
		else
			st = nccl_host->error_set(WEFT_ERR_COMM, "%s: ncclCommInitRankConfig failed "
						  "on cuda:%d: %s%s%s", nccl_who(c, who, sizeof(who)),
						  (int)c->device, ncclGetErrorString(r),
						  c->nc ? ": " : "",
						  c->nc ? ncclGetLastError(c->nc) : "");
		if (c->nc) {
			pthread_mutex_lock(&c->mu);
			nccl_abort_nc_locked(c);
			pthread_mutex_unlock(&c->mu);
		}
		goto out_destroy;
	}
	if ((st = nccl_watchdog_start(c)))
		goto out_destroy;
	nccl_host->log(WEFT_LOG_DEBUG, "%s connected on cuda:%d", nccl_who(c, who, sizeof(who)),
		       (int)c->device);
	*out = c;
	return WEFT_OK;

out_destroy:
	nccl_destroy(c);
	return st;
}
