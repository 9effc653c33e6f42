/* The local launcher: start ranks, serve the store, watch, stop, restart. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/heartbeat.h"
#include "launch/launch.h"
#include "weft/log.h"

extern char **environ;

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Variables the launcher sets; inherited copies are dropped. */
static const char *const our_vars[] = {
	"WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK", "WEFT_LOCAL_WORLD_SIZE",
	"WEFT_NODE_RANK", "WEFT_STORE_ADDR", "WEFT_STORE_PORT", "WEFT_STORE_SECRET",
	"WEFT_RESTART_COUNT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
	"GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
};
#define NOUR (sizeof(our_vars) / sizeof(our_vars[0]))

static int is_ours(const char *entry)
{
	for (size_t i = 0; i < NOUR; i++) {
		size_t n = strlen(our_vars[i]);

		if (!strncmp(entry, our_vars[i], n) && entry[n] == '=')
			return 1;
	}
	return 0;
}

/* The environment of one rank: the launcher's, minus our variables, plus
 * ours. Returns a malloc'd array of malloc'd strings (free with free_env). */
static char **rank_env(const weft_launch_opts *o, int local, const char *addr, int port,
		       int child_port, const char *secret, int restart)
{
	size_t n = 0, k = 0;
	char **env;
	int world = o->nproc_per_node * o->nnodes, rank = o->node_rank * o->nproc_per_node + local;
	char vals[NOUR][256];

	while (environ[n])
		n++;
	env = calloc(n + NOUR + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!is_ours(environ[i]) && !(env[k++] = strdup(environ[i])))
			goto out_free;
	snprintf(vals[0], 256, "%d", rank);
	snprintf(vals[1], 256, "%d", world);
	snprintf(vals[2], 256, "%d", local);
	snprintf(vals[3], 256, "%d", o->nproc_per_node);
	snprintf(vals[4], 256, "%d", o->node_rank);
	snprintf(vals[5], 256, "%s", addr);
	snprintf(vals[6], 256, "%d", port);
	snprintf(vals[7], 256, "%s", secret);
	snprintf(vals[8], 256, "%d", restart);
	/* torchrun's: the same values */
	snprintf(vals[9], 256, "%d", rank);
	snprintf(vals[10], 256, "%d", world);
	snprintf(vals[11], 256, "%d", local);
	snprintf(vals[12], 256, "%d", o->nproc_per_node);
	snprintf(vals[13], 256, "%d", o->node_rank);
	snprintf(vals[14], 256, "%s", addr);
	snprintf(vals[15], 256, "%d", child_port); /* not the store's: the child's own */
	snprintf(vals[16], 256, "%d", restart);
	for (size_t i = 0; i < NOUR; i++) {
		size_t len = strlen(our_vars[i]) + strlen(vals[i]) + 2;

		if (!(env[k] = malloc(len)))
			goto out_free;
		snprintf(env[k++], len, "%s=%s", our_vars[i], vals[i]);
	}
	return env;
out_free:
	for (size_t i = 0; i < k; i++)
		free(env[i]);
	free(env);
	return NULL;
}

static void free_env(char **env)
{
	if (!env)
		return;
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	free(env);
}

typedef struct child {
	pid_t pid; /* 0 once reaped */
	int status;
} child;

static void describe(char *out, size_t len, int rank, pid_t pid, int status)
{
	if (WIFSIGNALED(status))
		snprintf(out, len, "rank %d (pid %d) killed by signal %d (%s)", rank, (int)pid,
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(out, len, "rank %d (pid %d) exited with status %d", rank, (int)pid,
			 WEXITSTATUS(status));
}

static int exit_code_of(int status)
{
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static void signal_all(child *ch, int n, int sig)
{
	for (int i = 0; i < n; i++)
		if (ch[i].pid > 0)
			kill(ch[i].pid, sig);
}

/* Starts one attempt's children. Returns the number started (all or, on a
 * failed fork, those before it, which the caller then stops). */
static int start_children(const weft_launch_opts *o, child *ch, const char *addr, int port,
			  int child_port, const char *secret, int restart, weft_status *st)
{
	pid_t launcher = getpid();

	for (int i = 0; i < o->nproc_per_node; i++) {
		char **env = rank_env(o, i, addr, port, child_port, secret, restart);
		pid_t pid;

		if (!env) {
			*st = weft_error_set(WEFT_ERR_NOMEM, "launch: out of memory for rank "
					     "%d's environment", i);
			return i;
		}
		pid = fork();
		if (pid < 0) {
			*st = weft_error_set(WEFT_ERR_IO, "launch: fork for local rank %d failed: %s",
					     i, strerror(errno));
			free_env(env);
			return i;
		}
		if (pid == 0) {
			/* die with the launcher, even if it is SIGKILLed */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != launcher)
				_exit(127);
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			execvpe(o->argv[0], o->argv, env);
			fprintf(stderr, "weft launch: cannot run '%s': %s\n", o->argv[0],
				strerror(errno));
			_exit(127);
		}
		free_env(env);
		ch[i] = (child){ .pid = pid };
	}
	return o->nproc_per_node;
}

/* A failure reported by another process first: the job's first cause is
 * claimed in the store (weft_dist_claim_cause), so every launcher reports
 * the same root cause, and a rank the heartbeat declared stuck is named
 * rather than the healthy rank that gave up waiting for it. Fills res from
 * the cause; returns 1 when it is not this launcher's own `local` text. */
static int first_cause(weft_store_client *sc, int restart, const char *local,
		       weft_launch_result *res)
{
	int r = -1, p = 0;

	snprintf(res->cause, sizeof(res->cause), "%s", local);
	if (sc)
		weft_dist_claim_cause(sc, restart, local, res->cause, sizeof(res->cause));
	if (sscanf(res->cause, "rank %d (pid %d)", &r, &p) == 2) {
		res->failed_rank = r;
		res->failed_pid = p;
	}
	return strcmp(res->cause, local) != 0;
}

/* The heartbeat's verdict for this attempt, if one was given: 1 and its
 * text in out. */
static int stuck_verdict(weft_store_client *sc, int restart, char *out, size_t len)
{
	char key[64];
	void *v = NULL;
	size_t n;
	int exists = 0;

	weft_dist_job_key(key, sizeof(key), restart, "stuck");
	if (!sc || weft_store_check(sc, key, &exists) || !exists ||
	    weft_store_get(sc, key, 1000, &v, &n))
		return 0;
	snprintf(out, len, "%s", (const char *)v);
	free(v);
	return 1;
}

/* Ranks that learn of a cause from elsewhere (the heartbeat's verdict)
 * get this long to say so themselves before SIGTERM. */
#define SETTLE_MS 1000

/* Watches one attempt until every child is gone. Fills the root cause of
 * the first failure: the job's first cause when sc (the job's store) is
 * reachable. Returns 1 when the attempt failed. */
static int watch(const weft_launch_opts *o, child *ch, int n, int64_t grace,
		 weft_store_client *sc, int restart, weft_launch_result *res, int *forwarded)
{
	int alive = n, failed = 0, first = o->node_rank * o->nproc_per_node;
	int64_t kill_at = -1, term_at = -1, next_poll = 0;

	while (alive > 0) {
		int status;
		pid_t pid;
		char text[512];

		if (got_signal && !*forwarded) {
			*forwarded = got_signal;
			weft_log(WEFT_LOG_WARN, "weft launch: got %s; forwarding it to %d rank(s)",
				 strsignal(got_signal), alive);
			signal_all(ch, n, got_signal);
			kill_at = now_ms() + grace;
		}
		if (sc && !failed && !*forwarded && now_ms() >= next_poll) {
			next_poll = now_ms() + 100;
			if (stuck_verdict(sc, restart, text, sizeof(text))) {
				failed = 1;
				res->exit_code = 1;
				first_cause(sc, restart, text, res);
				weft_log(WEFT_LOG_ERROR, "weft launch: %s; stopping the %d rank(s) "
					 "here", res->cause, alive);
				term_at = now_ms() + SETTLE_MS;
			}
		}
		pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			for (int i = 0; i < n; i++) {
				if (ch[i].pid != pid)
					continue;
				ch[i].pid = 0;
				ch[i].status = status;
				alive--;
				if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || failed ||
				    *forwarded)
					break;
				failed = 1;
				res->failed_rank = first + i;
				res->failed_pid = (int)pid;
				res->exit_code = exit_code_of(status);
				describe(text, sizeof(text), first + i, pid, status);
				if (first_cause(sc, restart, text, res)) {
					/* an earlier cause: let the others say it too */
					weft_log(WEFT_LOG_ERROR, "weft launch: %s, after: %s; "
						 "stopping the other %d rank(s)", text, res->cause,
						 alive);
					term_at = now_ms() + SETTLE_MS;
				} else {
					weft_log(WEFT_LOG_ERROR, "weft launch: %s; stopping the "
						 "other %d rank(s)", res->cause, alive);
					term_at = now_ms();
				}
			}
			continue;
		}
		if (pid < 0 && errno == ECHILD)
			break;
		if (term_at >= 0 && now_ms() >= term_at) {
			signal_all(ch, n, SIGTERM);
			/* a stopped rank acts on SIGTERM only once continued */
			for (int i = 0; i < n; i++)
				if (ch[i].pid > 0 && first + i == res->failed_rank)
					kill(ch[i].pid, SIGKILL);
			kill_at = now_ms() + grace;
			term_at = -1;
		}
		if (kill_at >= 0 && now_ms() >= kill_at) {
			weft_log(WEFT_LOG_WARN, "weft launch: %d rank(s) still running %lld ms after "
				 "SIGTERM; killing them", alive, (long long)grace);
			signal_all(ch, n, SIGKILL);
			kill_at = -1;
		}
		{
			struct timespec ts = { .tv_nsec = 10 * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	return failed;
}

/* A port nothing listens on now at addr (the kernel's choice). */
static weft_status free_port(const char *addr, int *out)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd;

	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return weft_error_set(WEFT_ERR_COMM, "weft launch: no free port for MASTER_PORT "
				      "on %s: %s; pass --master-port", addr, strerror(e));
	}
	*out = ntohs(a.sin_port);
	close(fd);
	return WEFT_OK;
}

static weft_status check_opts(const weft_launch_opts *o)
{
	if (o->nproc_per_node < 1 || o->nproc_per_node > WEFT_LAUNCH_MAX_LOCAL)
		return weft_error_set(WEFT_ERR_CONFIG, "--nproc-per-node %d is not in 1..%d",
				      o->nproc_per_node, WEFT_LAUNCH_MAX_LOCAL);
	if (o->nnodes < 1)
		return weft_error_set(WEFT_ERR_CONFIG, "--nnodes %d must be at least 1", o->nnodes);
	if (o->node_rank < 0 || o->node_rank >= o->nnodes)
		return weft_error_set(WEFT_ERR_CONFIG, "--node-rank %d is not in 0..%d (--nnodes "
				      "%d)", o->node_rank, o->nnodes - 1, o->nnodes);
	if (o->max_restarts < 0)
		return weft_error_set(WEFT_ERR_CONFIG, "--max-restarts %d must be 0 or more",
				      o->max_restarts);
	if (o->master_port < 0 || o->master_port > 65534)
		return weft_error_set(WEFT_ERR_CONFIG, "--master-port %d is not a port in 0..65534 "
				      "(the children's MASTER_PORT is the one above it)",
				      o->master_port);
	if (!o->argv || !o->argv[0])
		return weft_error_set(WEFT_ERR_CONFIG, "no command to launch: put it after '--', "
				      "e.g. weft launch --nproc-per-node 2 -- weft fit --config "
				      "cfg.yaml");
	if (o->nnodes > 1 && (!o->master_addr || !o->master_port))
		return weft_error_set(WEFT_ERR_CONFIG, "with --nnodes %d every node needs "
				      "--master-addr (node 0's address) and --master-port",
				      o->nnodes);
	if (o->nnodes > 1 && !getenv("WEFT_STORE_SECRET"))
		return weft_error_set(WEFT_ERR_CONFIG, "with --nnodes %d every node's launcher "
				      "needs the same secret: export WEFT_STORE_SECRET=<random "
				      "string> on all nodes (e.g. from `openssl rand -hex 32`)",
				      o->nnodes);
	return WEFT_OK;
}

/* Node rank r's registration key ("weft/node/<r>/<what>"). */
static const char *node_key(char *out, size_t len, int r, const char *what)
{
	snprintf(out, len, "weft/node/%d/%s", r, what);
	return out;
}

/* The node ranks that have not registered, as "1, 3" into out. */
static void missing_nodes(const weft_launch_opts *o, weft_store_client *sc, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (int r = 0; r < o->nnodes && used + 16 < len; r++) {
		char key[64];
		int exists = 1;

		weft_store_check(sc, node_key(key, sizeof(key), r, "host"), &exists);
		if (!exists)
			used += (size_t)snprintf(out + used, len - used, "%s%d", used ? ", " : "", r);
	}
}

/* Two launchers with one --node-rank: the error both of them give. */
static weft_status duplicate_node(const weft_launch_opts *o, const char *a, const char *b)
{
	return weft_error_set(WEFT_ERR_CONFIG, "--node-rank %d is given to two nodes: %s and %s; "
			      "give every node its own --node-rank in 0..%d", o->node_rank, a, b,
			      o->nnodes - 1);
}

/* Several nodes: registers this node's rank in the store and waits until
 * every node has, reporting every weft_dist_report_interval_ms. Errors:
 * WEFT_ERR_CONFIG when another launcher has the same --node-rank (both
 * fail, naming both hosts), WEFT_ERR_TIMEOUT naming the missing nodes. */
static weft_status gather_nodes(const weft_launch_opts *o, weft_store_client *sc,
				const char *addr, int port, int64_t timeout_ms)
{
	char me[WEFT_DIST_HOST_MAX + 64], host[WEFT_DIST_HOST_MAX] = "?", key[64], missing[256];
	int64_t t0 = now_ms(), next_report = t0 + weft_dist_report_interval_ms(), n = 0, k = 0;
	void *v = NULL;
	size_t vlen;
	weft_status st;

	gethostname(host, sizeof(host) - 1);
	snprintf(me, sizeof(me), "%s (launcher pid %d)", host, (int)getpid());
	if ((st = weft_store_add(sc, node_key(key, sizeof(key), o->node_rank, "claims"), 1, &n)))
		return st;
	if (n > 1) {
		/* the first one learns it from the dup key */
		weft_store_set(sc, node_key(key, sizeof(key), o->node_rank, "dup"), me, strlen(me));
		if ((st = weft_store_get(sc, node_key(key, sizeof(key), o->node_rank, "host"), 5000,
					 &v, &vlen)))
			return st;
		st = duplicate_node(o, (const char *)v, me);
		free(v);
		return st;
	}
	if ((st = weft_store_set(sc, node_key(key, sizeof(key), o->node_rank, "host"), me,
				 strlen(me))) ||
	    (st = weft_store_add(sc, "weft/nodes", 1, &k)))
		return st;
	for (;;) {
		int dup = 0;

		if ((st = weft_store_check(sc, node_key(key, sizeof(key), o->node_rank, "dup"), &dup)))
			return st;
		if (dup) {
			if ((st = weft_store_get(sc, key, 1000, &v, &vlen)))
				return st;
			st = duplicate_node(o, me, (const char *)v);
			free(v);
			return st;
		}
		if ((st = weft_store_add(sc, "weft/nodes", 0, &k)))
			return st;
		if (k >= o->nnodes)
			return WEFT_OK;
		if (now_ms() - t0 >= timeout_ms) {
			missing_nodes(o, sc, missing, sizeof(missing));
			return weft_error_set(WEFT_ERR_TIMEOUT, "weft launch: only %lld of %d nodes "
					      "came to %s:%d within %lld s (missing node ranks: "
					      "%s); start `weft launch --nnodes %d --node-rank R "
					      "--master-addr %s --master-port %d` on them",
					      (long long)k, o->nnodes, addr, port,
					      (long long)timeout_ms / 1000, missing, o->nnodes, addr,
					      o->master_port);
		}
		if (now_ms() >= next_report) {
			missing_nodes(o, sc, missing, sizeof(missing));
			weft_log(WEFT_LOG_WARN, "weft launch: waiting for %lld of %d nodes at %s:%d, "
				 "%lld s of %lld s (missing node ranks: %s)",
				 (long long)(o->nnodes - k), o->nnodes, addr, port,
				 (long long)(now_ms() - t0) / 1000, (long long)timeout_ms / 1000,
				 missing);
			next_report += weft_dist_report_interval_ms();
		}
		{
			struct timespec ts = { .tv_nsec = 50 * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
}

weft_status weft_launch_run(const weft_launch_opts *o, weft_launch_result *res)
{
	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	weft_store_server *srv = NULL;
	const char *addr = o->master_addr ? o->master_addr : "127.0.0.1";
	char secret[WEFT_DIST_SECRET_MAX];
	int64_t grace = o->term_timeout_ms > 0 ? o->term_timeout_ms : 5000;
	int64_t join_ms = o->join_timeout_ms > 0 ? o->join_timeout_ms : 1800 * 1000;
	int port = o->master_port, child_port = 0, forwarded = 0;
	weft_store_client *sc = NULL;
	int64_t hb_interval, hb_timeout;
	child *ch;
	weft_status st;

	memset(res, 0, sizeof(*res));
	res->failed_rank = -1;
	if ((st = check_opts(o)) || (st = weft_heartbeat_config(&hb_interval, &hb_timeout)))
		return st;
	if (getenv("WEFT_STORE_SECRET"))
		snprintf(secret, sizeof(secret), "%s", getenv("WEFT_STORE_SECRET"));
	else if ((st = weft_dist_make_secret(secret, sizeof(secret))))
		return st;
	if (o->node_rank == 0) {
		st = weft_store_server_start(o->nnodes > 1 ? NULL : addr, port, secret, &srv);
		/* a store of this job already on the port: another launcher
		 * with --node-rank 0 on this host, found below */
		if (st && o->nnodes > 1 &&
		    !weft_store_connect(addr, port, secret, 2000, &sc))
			st = WEFT_OK;
		if (st)
			return weft_error_wrap(st, "weft launch");
		if (srv)
			port = weft_store_server_port(srv);
	}
	/* the launcher's own connection: the nodes gather through it, and the
	 * job's first cause and the heartbeat's verdicts are read there */
	if (!sc && (st = weft_store_connect(addr, port, secret, join_ms, &sc))) {
		weft_store_server_stop(srv);
		return weft_error_wrap(st, "weft launch");
	}
	if (o->nnodes > 1 && (st = gather_nodes(o, sc, addr, port, join_ms))) {
		weft_store_client_close(sc);
		weft_store_server_stop(srv);
		return st;
	}
	/* MASTER_PORT is the children's own (a program that serves its own
	 * store there, as PyTorch's init does); weft's store keeps
	 * WEFT_STORE_PORT. With several nodes every node must export the same
	 * one: --master-port + 1; on one node, another free port. */
	if (o->nnodes > 1 || o->master_port)
		child_port = port + 1;
	else if ((st = free_port(addr, &child_port))) {
		weft_store_client_close(sc);
		weft_store_server_stop(srv);
		return st;
	}
	ch = calloc((size_t)o->nproc_per_node, sizeof(*ch));
	if (!ch) {
		weft_store_client_close(sc);
		weft_store_server_stop(srv);
		return weft_error_set(WEFT_ERR_NOMEM, "launch: out of memory");
	}
	got_signal = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	for (int attempt = 0;; attempt++) {
		int n, failed;

		st = WEFT_OK;
		memset(ch, 0, (size_t)o->nproc_per_node * sizeof(*ch));
		weft_log(WEFT_LOG_INFO, "weft launch: starting %d rank(s) of %d on node %d (store "
			 "%s:%d)%s", o->nproc_per_node, o->nproc_per_node * o->nnodes,
			 o->node_rank, addr, port, attempt ? ", after a restart" : "");
		n = start_children(o, ch, addr, port, child_port, secret, attempt, &st);
		if (st) {
			signal_all(ch, n, SIGKILL);
			watch(o, ch, n, grace, sc, attempt, res, &forwarded);
			goto out_restore;
		}
		failed = watch(o, ch, n, grace, sc, attempt, res, &forwarded);
		if (forwarded) {
			res->exit_code = 128 + forwarded;
			snprintf(res->cause, sizeof(res->cause), "stopped by %s",
				 strsignal(forwarded));
			break;
		}
		if (!failed) {
			res->exit_code = 0;
			res->failed_rank = -1;
			res->cause[0] = '\0';
			break;
		}
		if (attempt >= o->max_restarts)
			break;
		res->restarts++;
		weft_log(WEFT_LOG_WARN, "weft launch: restarting the group (%d of %d) after: %s",
			 attempt + 1, o->max_restarts, res->cause);
	}
out_restore:
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	free(ch);
	weft_store_client_close(sc);
	weft_store_server_stop(srv);
	return st;
}
