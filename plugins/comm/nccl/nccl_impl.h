/* The NCCL comm plugin's internals, shared by nccl_comm.c (communicators,
 * work handles, waiting with a deadline), nccl_ops.c (collectives) and
 * nccl_entry.c (the vtable and entry symbol). */
#ifndef WEFT_NCCL_IMPL_H
#define WEFT_NCCL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "nccl_rendezvous.h"
#include "nccl_stage.h"
#include "weft/comm.h"
#include "weft/cuda_extras.h"

extern const weft_host *nccl_host; /* nccl_base.c; set by the entry symbol */

/* Counts `delta` bytes of device memory under `cat` with the host's
 * mem_account_device (ABI 1.5), else with mem_account (totals only). */
void nccl_account_device(weft_mem_category cat, int64_t delta);

/* Smallest scratch area for host buffers (bytes, device and pinned each). */
#define NCCL_STAGE_MIN_BYTES 4096

/* A scratch area for staging host buffers: `cap` bytes on the comm's GPU
 * and as many pinned host bytes. A call holds one from issue to wait, so
 * asynchronous staged calls never share one; areas are reused, never
 * freed before destroy (cudaFree and cudaFreeHost synchronize the device,
 * which must not wait on a collective stuck behind a lost peer). */
struct nccl_stage_buf {
	void *dev, *host;
	size_t cap;
	struct nccl_stage_buf *next;     /* the idle areas (free list) */
	struct nccl_stage_buf *all_next; /* every area of the comm, for destroy */
};

/* One issued collective: an event recorded on the comm stream after it. */
struct weft_comm_work {
	weft_comm *comm;
	cudaEvent_t done;
	uint64_t seq;
	char what[160]; /* "all_reduce #3 (f32 x 1024, sum)" for messages */
	struct nccl_stage_buf *stage; /* held while a staged call is pending */
	void *out_dst;                /* staged recv: host bytes to fill in wait */
	const void *out_src;          /* ... from the pinned block */
	size_t out_bytes;
	struct weft_comm_work *next;  /* free list */
	/* issued and not yet waited for: on the comm's pending list (under
	 * its mu), which the watchdog reads */
	int64_t issued_ms;
	int pending;
	struct weft_comm_work *pend_prev, *pend_next;
	/* device buffers only (no staging, not a barrier): nccl_wait makes the
	 * device wait for it, not the host */
	int device_only;
	/* waited on by the device: still pending (for the watchdog) until a
	 * later call completed on the host or the watchdog saw it done */
	int on_device;
};

struct weft_comm {
	char name[200];
	int32_t rank, size, device;
	int64_t timeout_ms;
	ncclComm_t nc;
	cudaStream_t stream; /* the comm stream: every collective runs here, in issue order */
	/* The CUDA kernel library's extras once found (under mu): their
	 * stream_wait_compute orders the comm stream after the compute
	 * streams, with events. NULL while no kernel library is loaded. */
	const struct weft_cuda_extras *extras;
	int32_t *barrier_buf; /* one int on the device for barrier */

	pthread_mutex_t mu; /* issue, wait's abort, destroy */
	uint64_t seq;
	struct weft_comm_work *free_works;
	struct nccl_stage_buf *free_stages; /* idle scratch areas */
	struct nccl_stage_buf *all_stages;  /* every area, idle or held, for destroy */
	atomic_int broken;     /* a collective failed or timed out, or abort was called */
	atomic_int nc_aborted; /* ncclCommAbort was called: nc must not be used */
	char broken_reason[512];

	/* Every call that reads nc (ncclCommGetAsyncError, ncclGetLastError,
	 * ncclCommAbort, the collectives) holds mu: another thread may abort
	 * it at any moment. */
	struct weft_comm_work *pending; /* issued, not yet waited for (under mu) */

	/* The watchdog: a thread that, every NCCL_WATCH_MS, aborts nc when a
	 * pending collective is older than the timeout, NCCL reports an
	 * asynchronous error, or the comm was marked broken (abort) while its
	 * lock was busy. So a stuck collective ends by the deadline even when
	 * no thread waits for it: one blocked in cudaFree or a device-wide
	 * synchronize, or one that never calls wait. */
	pthread_t watchdog;
	int watchdog_running;
	pthread_mutex_t wd_mu;
	pthread_cond_t wd_cv;
	int wd_stop; /* under wd_mu */
};

/* The watchdog's period (ms). */
#define NCCL_WATCH_MS 100

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t nccl_now_ms(void);

/* ncclCommAbort, once; the caller holds c->mu. nc is unusable after it. */
void nccl_abort_nc_locked(weft_comm *c);

/* Unlinks w from the pending list and hands it back (with its scratch
 * area) to the free list; the caller holds c->mu. */
void nccl_put_work_locked(weft_comm *c, weft_comm_work *w);

/* Starts and stops c's watchdog (nccl_watchdog.c). start's errors:
 * WEFT_ERR_COMM naming pthread_create's. */
weft_status nccl_watchdog_start(weft_comm *c);
void nccl_watchdog_stop(weft_comm *c);

/* "comm 'world' rank 1/4" into buf. */
const char *nccl_who(const weft_comm *c, char *buf, size_t len);

/* Marks c broken with reason (the first reason is kept). Holds no lock. */
void nccl_break(weft_comm *c, const char *reason);

/* One call: the caller's buffers, and the device pointers NCCL gets
 * (sdev, rdev: the buffers' own for device memory, scratch for staged host
 * memory; nccl_issue fills them from the plan). */
struct nccl_call {
	const weft_comm_buf *send, *recv;
	weft_comm_redop redop;
	int32_t peer; /* root or peer */
	nccl_stage_plan plan;
	void *sdev, *rdev;
};

/* Runs `issue_fn` (which enqueues NCCL calls on c->stream with k->sdev and
 * k->rdev) after ordering the comm stream behind the work issued so far on
 * every compute stream of c's GPU (an event per kernel-table context,
 * recorded there and waited for on the comm stream),
 * settles a non-blocking communicator, records the completion event, and
 * either hands back a work handle (work != NULL) or waits for it with the
 * comm's timeout. With k->plan.staged it takes a scratch area, copies the
 * host bytes the call reads into it (host memcpy to pinned memory, then
 * an asynchronous copy on the comm stream), and after the collective
 * queues the copy of what it writes back to pinned memory; nccl_wait
 * copies that into the caller's buffer once the event completed. k may be
 * NULL (barrier). `what` describes the operation for messages. */
weft_status nccl_issue(weft_comm *c, const char *what,
		       ncclResult_t (*issue_fn)(weft_comm *c, const struct nccl_call *k),
		       struct nccl_call *k, weft_comm_work **work);

/* init, abort and destroy of the vtable. */
weft_status nccl_init(const weft_comm_init_args *a, weft_comm **out);
void nccl_abort(weft_comm *c);
void nccl_destroy(weft_comm *c);

/* wait and test of the vtable. */
weft_status nccl_wait(weft_comm_work *w, int64_t timeout_ms);
weft_status nccl_test(weft_comm_work *w, int *done);

/* The collectives of the vtable (nccl_ops.c). */
weft_status nccl_all_reduce(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			    weft_comm_redop op, weft_comm_work **work);
weft_status nccl_reduce_scatter(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
				weft_comm_redop op, weft_comm_work **work);
weft_status nccl_all_gather(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			    weft_comm_work **work);
weft_status nccl_broadcast(weft_comm *c, const weft_comm_buf *b, int32_t root,
			   weft_comm_work **work);
weft_status nccl_send(weft_comm *c, const weft_comm_buf *b, int32_t peer, weft_comm_work **work);
weft_status nccl_recv(weft_comm *c, const weft_comm_buf *b, int32_t peer, weft_comm_work **work);
weft_status nccl_all_to_all(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			    weft_comm_work **work);
weft_status nccl_barrier(weft_comm *c, weft_comm_work **work);

#endif /* WEFT_NCCL_IMPL_H */
