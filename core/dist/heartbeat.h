/* core/dist: the heartbeat, which names a rank that stopped making
 * progress (SIGSTOP'd, wedged in the kernel, swapped to death) within
 * seconds, independently of collective timeouts.
 *
 * Every rank runs a thread with its own store connection. Each interval it
 * bumps weft/r<restart>/hb/<rank> ("<pid> <count>"), and watches the next
 * rank of the ring that has not finished: when that rank's count has not
 * moved for the heartbeat timeout, the watcher declares it, once for the
 * job:
 *   "rank K (pid P) has stopped responding (no heartbeat for N s)"
 * into weft/r<restart>/stuck and, when no failure was claimed before, into
 * the job's first cause (weft/r<restart>/cause, see weft_dist_claim_cause).
 * Every rank's thread waits on the stuck key between beats, so all of them
 * see a verdict at once: they log it as an error and end the process with
 * status 1 (their collectives can never complete). A slow collective or a
 * long kernel does not stop the beat (the thread is its own); a stopped
 * process does. A rank that ends normally marks its key "done" at exit so
 * nobody mistakes a finished rank for a stuck one. A rank is watched only
 * once it has beaten once.
 *
 * The launcher reads the same keys: the first cause is what it reports.
 * docs/distributed.md ("The heartbeat") describes it for users.
 */
#ifndef WEFT_DIST_HEARTBEAT_H
#define WEFT_DIST_HEARTBEAT_H

#include <stddef.h>
#include <stdint.h>

#include "dist/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_HEARTBEAT_INTERVAL_MS 1000
#define WEFT_HEARTBEAT_TIMEOUT_MS 15000

/* The heartbeat's interval and timeout in ms: WEFT_HEARTBEAT_INTERVAL and
 * WEFT_HEARTBEAT_TIMEOUT (seconds, decimals allowed; TIMEOUT=0 turns the
 * heartbeat off: *timeout_ms = 0), else 1 s and 15 s. Errors:
 * WEFT_ERR_CONFIG naming the variable when a value is not a number, or the
 * interval is not below half the timeout. */
weft_status weft_heartbeat_config(int64_t *interval_ms, int64_t *timeout_ms);

/* The store key "weft/r<restart>/<what>" of one attempt of the job into
 * out, which is returned. */
const char *weft_dist_job_key(char *out, size_t len, int restart, const char *what);

/* Claims the job's first cause: the first caller's `text` becomes it; a
 * later caller gets the earlier text (waiting up to 2 s for it to be
 * written). Either way the cause is copied to out. Returns WEFT_OK, or the
 * store's error (out then holds text). */
weft_status weft_dist_claim_cause(weft_store_client *c, int restart, const char *text, char *out,
				  size_t len);

/* Starts this process's heartbeat for env's rank (world > 1), connected to
 * the store at host:env->store_port with its own two connections (one
 * beats and watches, one waits for a verdict); does nothing when the
 * heartbeat is off. One per process: a second call while one runs does
 * nothing (several ranks in one process: the first one beats). The beat
 * is marked done and stopped at exit, or by weft_heartbeat_stop. Errors:
 * those of weft_heartbeat_config and weft_store_connect, WEFT_ERR_NOMEM. */
weft_status weft_heartbeat_start(const weft_dist_env *env, const char *host,
				 int64_t connect_timeout_ms);

/* Marks this rank done, stops the thread and closes its connections.
 * Blocks briefly. Nothing running: nothing done. */
void weft_heartbeat_stop(void);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_DIST_HEARTBEAT_H */
