/* The NCCL plugin's watchdog: a thread per communicator that aborts it when
 * a pending collective outlives the timeout or NCCL reports an
 * asynchronous error (nccl_impl.h, struct weft_comm), and hands back the
 * handles the device waited on (nccl_wait) once they are done. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nccl_impl.h"

/* One look at c: aborts nc when a pending collective outlived the timeout,
 * NCCL reports an asynchronous error, or c is broken and nc still live
 * (nccl_abort found the lock busy). Skips the round when another thread
 * holds mu: issue and destroy hold it only within their own deadlines. */
static void watch_once(weft_comm *c)
{
	char who[256], msg[512];
	ncclResult_t r = ncclSuccess;
	int64_t now = nccl_now_ms();

	if (pthread_mutex_trylock(&c->mu))
		return;
	if (!c->nc || atomic_load(&c->nc_aborted))
		goto out_unlock;
	if (atomic_load(&c->broken)) {
		nccl_abort_nc_locked(c);
		goto out_unlock;
	}
	for (weft_comm_work *w = c->pending, *next; w; w = next) {
		cudaError_t err;

		next = w->pend_next;
		if (now - w->issued_ms <= c->timeout_ms)
			continue;
		err = cudaEventQuery(w->done);
		if (err != cudaErrorNotReady) {
			cudaGetLastError(); /* done, or a CUDA error that wait reports */
			if (w->on_device) /* nobody waits on the host: hand it back */
				nccl_put_work_locked(c, w);
			continue;
		}
		snprintf(msg, sizeof(msg), "%s: watchdog: %s did not finish within %lld ms of its "
			 "issue (a peer is stuck, behind, or called a different collective); the "
			 "communicator was aborted", nccl_who(c, who, sizeof(who)), w->what,
			 (long long)c->timeout_ms);
		nccl_break(c, msg);
		nccl_host->log(WEFT_LOG_WARN, "%s", msg);
		nccl_abort_nc_locked(c);
		goto out_unlock;
	}
	if (ncclCommGetAsyncError(c->nc, &r) == ncclSuccess && r != ncclSuccess &&
	    r != ncclInProgress) {
		snprintf(msg, sizeof(msg), "%s: watchdog: NCCL reported %s (a peer has probably "
			 "exited; see its log); the communicator was aborted",
			 nccl_who(c, who, sizeof(who)), ncclGetErrorString(r));
		nccl_break(c, msg);
		nccl_host->log(WEFT_LOG_WARN, "%s", msg);
		nccl_abort_nc_locked(c);
	}
out_unlock:
	pthread_mutex_unlock(&c->mu);
}

static void *watchdog_main(void *arg)
{
	weft_comm *c = arg;

	cudaSetDevice(c->device); /* cudaEventQuery on c's GPU */
	pthread_mutex_lock(&c->wd_mu);
	while (!c->wd_stop) {
		struct timespec dl;

		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += NCCL_WATCH_MS * 1000000L;
		dl.tv_sec += dl.tv_nsec / 1000000000L;
		dl.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &dl);
		if (c->wd_stop)
			break;
		pthread_mutex_unlock(&c->wd_mu);
		watch_once(c);
		pthread_mutex_lock(&c->wd_mu);
	}
	pthread_mutex_unlock(&c->wd_mu);
	return NULL;
}

/* Starts c's watchdog. Errors: WEFT_ERR_COMM naming pthread_create's. */
weft_status nccl_watchdog_start(weft_comm *c)
{
	char who[256];
	int rc;

	rc = pthread_create(&c->watchdog, NULL, watchdog_main, c);
	if (rc)
		return nccl_host->error_set(WEFT_ERR_COMM, "%s: cannot start the watchdog thread: %s",
					    nccl_who(c, who, sizeof(who)), strerror(rc));
	c->watchdog_running = 1;
	return WEFT_OK;
}

void nccl_watchdog_stop(weft_comm *c)
{
	if (!c->watchdog_running)
		return;
	pthread_mutex_lock(&c->wd_mu);
	c->wd_stop = 1;
	pthread_cond_signal(&c->wd_cv);
	pthread_mutex_unlock(&c->wd_mu);
	pthread_join(c->watchdog, NULL);
	c->watchdog_running = 0;
}
