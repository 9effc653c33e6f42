/* core/dist: where this process sits in the job, and the rendezvous store.
 *
 * Environment detection reads, in this order, weft's own variables (set by
 * `weft launch`), torchrun's, Open MPI's and Slurm's; the first family
 * whose rank variable is set wins, and the choice is logged. The store is a
 * TCP key-value server (served by `weft launch`, or by rank 0 when another
 * launcher started the job) that every client must prove a per-job secret
 * to. docs/distributed.md describes both.
 */
#ifndef WEFT_DIST_DIST_H
#define WEFT_DIST_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "weft/comm.h"
#include "weft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- environment detection ------------------------------------------- */

typedef enum weft_dist_source {
	WEFT_DIST_SINGLE = 0,   /* nothing set: one process, no store */
	WEFT_DIST_WEFT = 1,     /* WEFT_RANK ... (weft launch) */
	WEFT_DIST_TORCHRUN = 2, /* RANK, WORLD_SIZE, MASTER_ADDR ... */
	WEFT_DIST_OMPI = 3,     /* OMPI_COMM_WORLD_RANK ... */
	WEFT_DIST_SLURM = 4     /* SLURM_PROCID ... */
} weft_dist_source;

#define WEFT_DIST_HOST_MAX 256
#define WEFT_DIST_SECRET_MAX 128
#define WEFT_DIST_PATH_MAX 512
#define WEFT_DIST_DEFAULT_PORT 29500

typedef struct weft_dist_env {
	weft_dist_source source;
	int rank;
	int world_size;
	int local_rank;
	int local_world_size;
	int node_rank;
	int restart_count;              /* WEFT_RESTART_COUNT; 0 on first run */
	char store_host[WEFT_DIST_HOST_MAX];
	int store_port;
	int store_served_by_rank0;      /* 1: rank 0 must serve the store */
	char secret[WEFT_DIST_SECRET_MAX];
	int secret_from_env;            /* 1: WEFT_STORE_SECRET */
	/* without WEFT_STORE_SECRET on one node: rank 0 writes a random
	 * secret here (mode 0600, in a directory only this user can enter)
	 * and the others read it; weft_dist_store_join does both */
	char secret_file[WEFT_DIST_PATH_MAX];
} weft_dist_env;

/* Under Open MPI and Slurm without MASTER_PORT, the store's port comes
 * from the job id, so that two jobs on one node do not meet. */
#define WEFT_DIST_JOB_PORT_BASE 10000
#define WEFT_DIST_JOB_PORT_SPAN 20000

/* The store's port for a job id: BASE + id mod SPAN for a number, BASE +
 * (a 64-bit FNV-1a hash of the text) mod SPAN otherwise;
 * WEFT_DIST_DEFAULT_PORT for NULL or "". */
int weft_dist_job_port(const char *job_id);

/* How to start `nodes` x `per_node` ranks with the launcher `src` ("srun
 * --nodes 2 --ntasks-per-node 4 ...", "mpirun -np 8 ...", "torchrun ...",
 * "weft launch ..."), into buf, which is returned: advice in messages. */
const char *weft_dist_start_hint(weft_dist_source src, int64_t per_node, int64_t nodes,
				 char *buf, size_t len);

/* Where env's store port comes from under its launcher and how to change
 * it, into buf, which is returned (advice for a refused or silent store). */
const char *weft_dist_port_hint(const struct weft_dist_env *env, char *buf, size_t len);

/* "single process", "weft launch", "torchrun", "Open MPI", "Slurm". */
const char *weft_dist_source_name(weft_dist_source src);

/* Fills *out from the process environment (see the order above) and logs
 * at info which family was used. Errors: WEFT_ERR_CONFIG naming the
 * variable whose value is malformed or missing and what to set. */
weft_status weft_dist_env_detect(weft_dist_env *out);

/* The first host of a Slurm node list ("gpu[03-05,9],cpu1" -> "gpu03")
 * into out. Errors: WEFT_ERR_CONFIG when the list is malformed. */
weft_status weft_dist_slurm_first_host(const char *nodelist, char *out, size_t len);

/* A new random secret of 64 hex characters (getrandom) into out (len >= 65). */
weft_status weft_dist_make_secret(char *out, size_t len);

/* The private directory of this user's secret files, made if missing:
 * $WEFT_SECRET_DIR, else $XDG_RUNTIME_DIR/weft, else /tmp/weft-<uid>.
 * Errors: WEFT_ERR_CONFIG when it is not a directory of this user with
 * mode 700 (as ssh refuses a key others could read), with what to do. */
weft_status weft_dist_secret_dir(char *out, size_t len);

/* How often a wait reports that it is still waiting: 30 s, or
 * WEFT_WAIT_REPORT_MS (for tests). */
int64_t weft_dist_report_interval_ms(void);

/* ---- the rendezvous store --------------------------------------------- */

typedef struct weft_store_server weft_store_server;
typedef struct weft_store_client weft_store_client;

/* Starts a store server on a background thread, listening on host:port
 * (host NULL: every interface; port 0: a free port, see
 * weft_store_server_port). Clients must send `secret`; others are refused
 * and logged at warn with their address. Returns a new server in *out;
 * stop it with weft_store_server_stop. Errors: WEFT_ERR_COMM naming the
 * address when it cannot listen (port in use: pick another port). */
weft_status weft_store_server_start(const char *host, int port, const char *secret,
				    weft_store_server **out);

/* The port the server listens on. */
int weft_store_server_port(const weft_store_server *srv);

/* How many clients were refused so far (wrong secret or malformed hello). */
int64_t weft_store_server_refused(const weft_store_server *srv);

/* Stops the server thread, closes every connection and frees srv. Clients
 * still blocked get an error. NULL is ignored. */
void weft_store_server_stop(weft_store_server *srv);

/* Connects to the server at host:port, retrying until timeout_ms passed
 * (the server may start later than the client), and proves `secret`.
 * timeout_ms is also the default deadline of every later call made with
 * a negative timeout. Returns a new client in *out; free with
 * weft_store_client_close. Errors: WEFT_ERR_TIMEOUT naming the address
 * when nothing answered; WEFT_ERR_COMM when the server refused the secret
 * (advice: check WEFT_STORE_SECRET). */
weft_status weft_store_connect(const char *host, int port, const char *secret,
			       int64_t timeout_ms, weft_store_client **out);

/* Joins the job's store as env says, all within timeout_ms: with
 * env->secret_file, rank 0 writes a new random secret there and the
 * others wait for it (reporting every weft_dist_report_interval_ms);
 * rank 0 serves the store when env->store_served_by_rank0 (on the
 * loopback only in secret-file mode); then connects. *srv is rank 0's
 * server (else NULL; stop it after closing *out), *out the client (its
 * default timeout: timeout_ms). With more than one rank it also starts
 * this process's heartbeat (dist/heartbeat.h), stopped at exit. Errors: as weft_store_connect and
 * weft_store_server_start; WEFT_ERR_TIMEOUT when the secret never came. */
weft_status weft_dist_store_join(weft_dist_env *env, int64_t timeout_ms, weft_store_server **srv,
				 weft_store_client **out);

/* The numeric address of this end of c's connection ("10.1.2.3", "::1")
 * into buf[0..len); returns buf, or NULL (buf "") when it cannot be read. */
const char *weft_store_client_local_addr(weft_store_client *c, char *buf, size_t len);

/* The address this rank's communicator should listen on, into buf: the
 * local end of the store connection c, i.e. the interface that routes to
 * the master. Where that is a loopback address but the job spans more
 * than one node (env->local_world_size < env->world_size: the host name
 * resolves to 127.0.x.1, Debian's default /etc/hosts), the first address
 * of the same family on an interface that is up and not loopback. The
 * interface's name goes to iface[0..ilen) ("" when unknown). Returns buf,
 * or NULL when GLOO_SOCKET_IFNAME chooses the interface instead or no
 * address was found (the backend's default then). */
const char *weft_dist_bind_host(const weft_dist_env *env, weft_store_client *c, char *buf,
				size_t len, char *iface, size_t ilen);

/* Sets the default deadline of c's later calls made with a negative
 * timeout. */
void weft_store_client_set_timeout(weft_store_client *c, int64_t timeout_ms);

/* Closes the connection and frees c. NULL is ignored. */
void weft_store_client_close(weft_store_client *c);

/* Shuts c's connection down, from any thread, so that a call blocked on it
 * (a parked get) returns WEFT_ERR_COMM at once; every later call fails.
 * Free c with weft_store_client_close as usual. Never blocks. */
void weft_store_client_shutdown(weft_store_client *c);

/* The calls below are thread-safe (one request at a time per client) and
 * block up to timeout_ms (< 0: the client's default). Errors:
 * WEFT_ERR_TIMEOUT naming the key(s), WEFT_ERR_COMM when the connection
 * broke (after which every call fails fast). */

/* Sets key to a copy of value[0..len). */
weft_status weft_store_set(weft_store_client *c, const char *key, const void *value, size_t len);

/* Waits for key, then returns a copy of its value in *value (malloc'd, NUL
 * terminated one byte past *len for convenience; free with free()). */
weft_status weft_store_get(weft_store_client *c, const char *key, int64_t timeout_ms,
			   void **value, size_t *len);

/* Adds delta to the integer at key (missing: 0); new value in *result. */
weft_status weft_store_add(weft_store_client *c, const char *key, int64_t delta,
			   int64_t *result);

/* Waits until every key exists. */
weft_status weft_store_wait(weft_store_client *c, const char *const *keys, size_t nkeys,
			    int64_t timeout_ms);

/* Whether key exists now (*exists = 0/1), without waiting. */
weft_status weft_store_check(weft_store_client *c, const char *key, int *exists);

/* The client as the plugin ABI's store vtable; borrowed, valid until
 * weft_store_client_close. */
const weft_store *weft_store_client_vtable(weft_store_client *c);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_DIST_DIST_H */
