/* The heartbeat: a thread per rank that beats through the store, watches
 * the next rank of the ring, and ends this rank when one is declared stuck
 * (heartbeat.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/heartbeat.h"
#include "weft/log.h"

typedef struct heartbeat {
	weft_store_client *beat;    /* beats, watching, the done mark */
	weft_store_client *verdict; /* parked on the stuck key between beats */
	pthread_t thread;
	atomic_int stop;
	int rank, world, restart;
	int store_rank;             /* the rank whose process serves the store; -1: none */
	int64_t interval_ms, timeout_ms;
	weft_status fail;           /* why the beats stopped */
} heartbeat;

/* What a watcher knows of the rank it watches. */
typedef struct watched {
	int rank;         /* -1: nobody left to watch */
	int seen;         /* its key was read at least once */
	char last[64];    /* its last value */
	int64_t moved_at; /* when the value last changed */
} watched;

static pthread_mutex_t hb_lock = PTHREAD_MUTEX_INITIALIZER;
static heartbeat *hb_running;
static int hb_atexit;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static weft_status env_seconds(const char *name, int64_t def_ms, int64_t *out)
{
	const char *v = getenv(name);
	char *end;
	double s;

	*out = def_ms;
	if (!v || !*v)
		return WEFT_OK;
	errno = 0;
	s = strtod(v, &end);
	if (end == v || *end || errno || !(s >= 0) || s > 1e6)
		return weft_error_set(WEFT_ERR_CONFIG, "%s='%s' is not a number of seconds (e.g. "
				      "%s=%s)", name, v, name,
				      strcmp(name, "WEFT_HEARTBEAT_TIMEOUT") ? "1" : "15");
	*out = (int64_t)(s * 1000.0 + 0.5);
	return WEFT_OK;
}

weft_status weft_heartbeat_config(int64_t *interval_ms, int64_t *timeout_ms)
{
	weft_status st;

	if ((st = env_seconds("WEFT_HEARTBEAT_INTERVAL", WEFT_HEARTBEAT_INTERVAL_MS, interval_ms)) ||
	    (st = env_seconds("WEFT_HEARTBEAT_TIMEOUT", WEFT_HEARTBEAT_TIMEOUT_MS, timeout_ms)))
		return st;
	if (*timeout_ms == 0)
		return WEFT_OK;
	if (*interval_ms < 10 || *interval_ms * 2 > *timeout_ms)
		return weft_error_set(WEFT_ERR_CONFIG, "WEFT_HEARTBEAT_INTERVAL (%.3g s) must be at "
				      "least 0.01 s and at most half of WEFT_HEARTBEAT_TIMEOUT "
				      "(%.3g s); set them so, or WEFT_HEARTBEAT_TIMEOUT=0 to turn "
				      "the heartbeat off", *interval_ms / 1000.0,
				      *timeout_ms / 1000.0);
	return WEFT_OK;
}

const char *weft_dist_job_key(char *out, size_t len, int restart, const char *what)
{
	snprintf(out, len, "weft/r%d/%s", restart, what);
	return out;
}

weft_status weft_dist_claim_cause(weft_store_client *c, int restart, const char *text, char *out,
				  size_t len)
{
	char nkey[64], key[64];
	void *v = NULL;
	size_t vlen;
	int64_t n = 0;
	weft_status st;

	snprintf(out, len, "%s", text);
	weft_dist_job_key(nkey, sizeof(nkey), restart, "causes");
	weft_dist_job_key(key, sizeof(key), restart, "cause");
	if ((st = weft_store_add(c, nkey, 1, &n)))
		return st;
	if (n == 1)
		return weft_store_set(c, key, text, strlen(text));
	if ((st = weft_store_get(c, key, 2000, &v, &vlen)))
		return st;
	snprintf(out, len, "%s", (const char *)v);
	free(v);
	return WEFT_OK;
}

static int next_rank(const heartbeat *h, int r)
{
	r = (r + 1) % h->world;
	return r == h->rank ? -1 : r;
}

/* Declares w->rank stuck: the job's first cause (unless a failure came
 * first) and the stuck key every rank waits on. */
static void declare(heartbeat *h, const watched *w, int64_t silent_ms)
{
	char text[256], cause[512], key[64];
	int pid = 0;

	sscanf(w->last, "%d", &pid);
	snprintf(text, sizeof(text), "rank %d (pid %d) has stopped responding (no heartbeat for "
		 "%lld s)", w->rank, pid, (long long)(silent_ms / 1000));
	weft_dist_claim_cause(h->beat, h->restart, text, cause, sizeof(cause));
	weft_store_set(h->beat, weft_dist_job_key(key, sizeof(key), h->restart, "stuck"), text,
		       strlen(text));
}

/* One look at the watched rank. Returns -1 when the store is gone. */
static int watch(heartbeat *h, watched *w)
{
	while (w->rank >= 0) {
		char key[64], name[32];
		void *v = NULL;
		size_t n;
		int exists = 0;
		int64_t now;

		snprintf(name, sizeof(name), "hb/%d", w->rank);
		weft_dist_job_key(key, sizeof(key), h->restart, name);
		if ((h->fail = weft_store_check(h->beat, key, &exists)))
			return -1;
		if (!exists)
			return 0; /* not started yet: watched from its first beat */
		if ((h->fail = weft_store_get(h->beat, key, h->timeout_ms, &v, &n)))
			return -1;
		now = now_ms();
		if (!strcmp(v, "done")) {
			/* it finished: watch the next one that has not */
			free(v);
			*w = (watched){ .rank = next_rank(h, w->rank) };
			continue;
		}
		if (!w->seen || strcmp(v, w->last)) {
			snprintf(w->last, sizeof(w->last), "%s", (const char *)v);
			w->seen = 1;
			w->moved_at = now;
		} else if (now - w->moved_at >= h->timeout_ms) {
			declare(h, w, now - w->moved_at);
			w->rank = -1; /* once is enough */
		}
		free(v);
		return 0;
	}
	return 0;
}

static void *beat_main(void *arg)
{
	heartbeat *h = arg;
	watched w = { .rank = next_rank(h, h->rank) };
	char key[64], stuck[64], name[32], val[64];
	unsigned long long count = 0;

	snprintf(name, sizeof(name), "hb/%d", h->rank);
	weft_dist_job_key(key, sizeof(key), h->restart, name);
	weft_dist_job_key(stuck, sizeof(stuck), h->restart, "stuck");
	while (!atomic_load(&h->stop)) {
		void *v = NULL;
		size_t n;
		weft_status st;

		snprintf(val, sizeof(val), "%d %llu", (int)getpid(), ++count);
		if ((h->fail = weft_store_set(h->beat, key, val, strlen(val))) || watch(h, &w)) {
			if (h->fail == WEFT_ERR_TIMEOUT && h->store_rank >= 0 &&
			    h->store_rank != h->rank && !atomic_load(&h->stop)) {
				/* the store answers nothing, yet its connection
				 * stands: the process that serves it is stopped or
				 * wedged. Nobody can hear a verdict now: say it here. */
				weft_log(WEFT_LOG_ERROR, "rank %d (which serves the store) has "
					 "stopped responding: the store did not answer for %lld s; "
					 "this rank stops, its collectives cannot complete",
					 h->store_rank, (long long)(h->timeout_ms / 1000));
				_exit(1);
			}
			break; /* the store is gone: the job is ending */
		}
		/* the pause between beats is a wait for a verdict */
		st = weft_store_get(h->verdict, stuck, h->interval_ms, &v, &n);
		if (!st) {
			/* _exit: the main thread may be anywhere, blocked in a
			 * collective that can never complete */
			weft_log(WEFT_LOG_ERROR, "%s; this rank stops, its collectives cannot "
				 "complete", (const char *)v);
			_exit(1);
		}
		if (st != WEFT_ERR_TIMEOUT)
			break;
	}
	if (!atomic_load(&h->stop))
		weft_log(WEFT_LOG_DEBUG, "heartbeat: the store is gone (%s); beats stop",
			 weft_error_last());
	return NULL;
}

static void at_exit_stop(void)
{
	weft_heartbeat_stop();
}

weft_status weft_heartbeat_start(const weft_dist_env *env, const char *host,
				 int64_t connect_timeout_ms)
{
	int64_t interval, timeout;
	heartbeat *h;
	weft_status st;

	if (env->world_size <= 1)
		return WEFT_OK;
	if ((st = weft_heartbeat_config(&interval, &timeout)))
		return st;
	if (!timeout) {
		weft_log(WEFT_LOG_DEBUG, "heartbeat off (WEFT_HEARTBEAT_TIMEOUT=0)");
		return WEFT_OK;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return weft_error_set(WEFT_ERR_NOMEM, "heartbeat: out of memory");
	*h = (heartbeat){ .rank = env->rank, .world = env->world_size,
			  .restart = env->restart_count, .interval_ms = interval,
			  .timeout_ms = timeout, .store_rank = env->store_served_by_rank0 ? 0 : -1 };
	if ((st = weft_store_connect(host, env->store_port, env->secret, connect_timeout_ms,
				     &h->beat)) ||
	    (st = weft_store_connect(host, env->store_port, env->secret, connect_timeout_ms,
				     &h->verdict)))
		goto out_free;
	/* a store that does not answer for a whole timeout is itself stuck */
	weft_store_client_set_timeout(h->beat, timeout);
	pthread_mutex_lock(&hb_lock);
	if (hb_running) {
		/* several ranks in one process (tests): the first one beats */
		pthread_mutex_unlock(&hb_lock);
		weft_log(WEFT_LOG_DEBUG, "heartbeat: this process already beats for rank %d",
			 hb_running->rank);
		st = WEFT_OK;
		goto out_free;
	}
	if (pthread_create(&h->thread, NULL, beat_main, h)) {
		pthread_mutex_unlock(&hb_lock);
		st = weft_error_set(WEFT_ERR_NOMEM, "heartbeat: cannot start its thread");
		goto out_free;
	}
	hb_running = h;
	if (!hb_atexit && !atexit(at_exit_stop))
		hb_atexit = 1;
	pthread_mutex_unlock(&hb_lock);
	weft_log(WEFT_LOG_DEBUG, "heartbeat every %lld ms; a rank silent for %lld ms is declared "
		 "stuck", (long long)interval, (long long)timeout);
	return WEFT_OK;
out_free:
	weft_store_client_close(h->verdict);
	weft_store_client_close(h->beat);
	free(h);
	return st;
}

void weft_heartbeat_stop(void)
{
	char key[64], name[32];
	heartbeat *h;

	pthread_mutex_lock(&hb_lock);
	h = hb_running;
	hb_running = NULL;
	pthread_mutex_unlock(&hb_lock);
	if (!h)
		return;
	atomic_store(&h->stop, 1);
	weft_store_client_shutdown(h->verdict);
	pthread_join(h->thread, NULL);
	/* finished, not stuck: the watcher moves on (the store may be gone
	 * already; then nobody watches) */
	snprintf(name, sizeof(name), "hb/%d", h->rank);
	weft_store_set(h->beat, weft_dist_job_key(key, sizeof(key), h->restart, name), "done", 4);
	weft_store_client_close(h->verdict);
	weft_store_client_close(h->beat);
	free(h);
}
