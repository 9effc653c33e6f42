/* The NCCL comm plugin's internals, shared by nccl_comm.c (communicators,
 * work handles, waiting with a deadline) and nccl_ops.c (collectives). */
#ifndef WEFT_NCCL_IMPL_H
#define WEFT_NCCL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "weft/comm.h"

extern const weft_host *nccl_host;

/* One issued collective: an event recorded on the comm stream after it. */
struct weft_comm_work {
	weft_comm *comm;
	cudaEvent_t done;
	uint64_t seq;
	char what[160]; /* "all_reduce #3 (f32 x 1024, sum)" for messages */
	struct weft_comm_work *next; /* free list */
};

struct weft_comm {
	char name[200];
	int32_t rank, size, device;
	int64_t timeout_ms;
	ncclComm_t nc;
	cudaStream_t stream; /* the comm stream: every collective runs here, in issue order */
	cudaEvent_t ready;   /* orders the comm stream after the compute streams */
	int32_t *barrier_buf; /* one int on the device for barrier */

	pthread_mutex_t mu; /* issue, wait's abort, destroy */
	uint64_t seq;
	struct weft_comm_work *free_works;
	atomic_int broken;     /* a collective failed or timed out, or abort was called */
	atomic_int nc_aborted; /* ncclCommAbort was called: nc must not be used */
	char broken_reason[512];
};

/* "comm 'world' rank 1/4" into buf. */
const char *nccl_who(const weft_comm *c, char *buf, size_t len);

/* Marks c broken with reason (the first reason is kept). Holds no lock. */
void nccl_break(weft_comm *c, const char *reason);

/* Runs `issue_fn` (which enqueues NCCL calls on c->stream) after ordering
 * the comm stream behind every compute stream, settles a non-blocking
 * communicator, records the completion event, and either hands back a
 * work handle (work != NULL) or waits for it with the comm's timeout.
 * `what` describes the operation for messages. */
weft_status nccl_issue(weft_comm *c, const char *what,
		       ncclResult_t (*issue_fn)(weft_comm *c, const void *arg), const void *arg,
		       weft_comm_work **work);

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
