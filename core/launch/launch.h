/* core/launch: the local process launcher behind `weft launch`.
 *
 * It starts nproc_per_node copies of a command on this node with
 * torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT) and
 * weft's (WEFT_RANK ... WEFT_STORE_SECRET, WEFT_RESTART_COUNT), serves the
 * rendezvous store on node 0, and watches the children:
 *   - when one fails (non-zero exit or a signal) it stops the others
 *     (SIGTERM, then SIGKILL after term_timeout_ms) and reports the root
 *     cause: "rank 1 (pid 4242) killed by signal 9 (Killed)"; the cause is
 *     the job's first one, claimed in the store, so a rank the heartbeat
 *     declared stuck, or one that died on another node, is named rather
 *     than the healthy rank that gave up waiting for it;
 *   - with restarts left it starts the whole group again, with
 *     WEFT_RESTART_COUNT one higher (a trainer with `resume: auto` then
 *     continues from its last checkpoint);
 *   - SIGINT and SIGTERM sent to the launcher are forwarded to every child;
 *   - children die with the launcher (PR_SET_PDEATHSIG), so no rank
 *     outlives it even when the launcher is killed with SIGKILL.
 * docs/distributed.md describes it for users.
 */
#ifndef WEFT_LAUNCH_LAUNCH_H
#define WEFT_LAUNCH_LAUNCH_H

#include <stdint.h>

#include "weft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_LAUNCH_MAX_LOCAL 256

typedef struct weft_launch_opts {
	int nproc_per_node;      /* >= 1 */
	int nnodes;              /* >= 1 */
	int node_rank;           /* 0 <= node_rank < nnodes */
	const char *master_addr; /* node 0's address; NULL: 127.0.0.1 (one node only) */
	int master_port;         /* 0: a free port (one node only) */
	int max_restarts;        /* >= 0 */
	int64_t term_timeout_ms; /* SIGTERM -> SIGKILL grace; <= 0: 5000 */
	int64_t join_timeout_ms; /* how long nodes gather and the store is
				  * waited for; <= 0: 1800 s */
	char *const *argv;       /* the command, NULL-terminated; argv[0] searched in PATH */
} weft_launch_opts;

/* The outcome of a launch. */
typedef struct weft_launch_result {
	int exit_code;      /* what `weft launch` exits with: 0, the failing rank's
			     * code, or 128 + signal */
	int restarts;       /* how many times the group was restarted */
	int failed_rank;    /* -1 when every rank succeeded */
	int failed_pid;
	char cause[512];    /* the root cause in words; "" on success */
} weft_launch_result;

/* Runs the group to completion (blocking) and fills *res. Returns WEFT_OK
 * when the launcher itself worked, whatever the children did (see
 * res->exit_code); errors: WEFT_ERR_CONFIG for impossible options (with
 * the flag to fix), WEFT_ERR_COMM when the store cannot listen,
 * WEFT_ERR_IO when fork fails. Installs SIGINT/SIGTERM handlers for its
 * duration and restores the previous ones. */
weft_status weft_launch_run(const weft_launch_opts *opts, weft_launch_result *res);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_LAUNCH_LAUNCH_H */
