/* Environment detection: weft, torchrun, Open MPI, Slurm (in that order). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/dist.h"
#include "weft/log.h"

const char *weft_dist_source_name(weft_dist_source src)
{
	switch (src) {
	case WEFT_DIST_SINGLE: return "single process";
	case WEFT_DIST_WEFT: return "weft launch";
	case WEFT_DIST_TORCHRUN: return "torchrun";
	case WEFT_DIST_OMPI: return "Open MPI";
	case WEFT_DIST_SLURM: return "Slurm";
	}
	return "unknown";
}

static const char *env_get(const char *name)
{
	const char *v = getenv(name);

	return (v && *v) ? v : NULL;
}

/* Reads an integer variable in [lo, hi]; `def` when unset and def_ok. */
static weft_status env_int(const char *name, int lo, int hi, int def, int def_ok, int *out)
{
	const char *v = env_get(name);
	char *end;
	long n;

	if (!v) {
		if (def_ok) {
			*out = def;
			return WEFT_OK;
		}
		return weft_error_set(WEFT_ERR_CONFIG,
				      "environment variable %s is not set; the launcher that "
				      "set the others should set it too (or export it)", name);
	}
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "environment variable %s='%s' is not an integer in "
				      "[%d, %d]", name, v, lo, hi);
	*out = (int)n;
	return WEFT_OK;
}

static weft_status copy_str(char *dst, size_t len, const char *src, const char *what)
{
	size_t n = strlen(src);

	if (n == 0 || n >= len)
		return weft_error_set(WEFT_ERR_CONFIG, "%s '%s' is empty or longer than %zu bytes",
				      what, src, len - 1);
	memcpy(dst, src, n + 1);
	return WEFT_OK;
}

/* dir must be a directory of ours that nobody else can enter or list. */
static weft_status check_private_dir(const char *dir)
{
	struct stat sb;

	if (lstat(dir, &sb) != 0)
		return weft_error_set(WEFT_ERR_IO, "store secret: cannot read %s: %s", dir,
				      strerror(errno));
	if (!S_ISDIR(sb.st_mode) || sb.st_uid != getuid() || (sb.st_mode & 077))
		return weft_error_set(WEFT_ERR_CONFIG,
				      "store secret: %s is not a private directory of this user "
				      "(owner uid %u, mode %03o; want uid %u, mode 700): another "
				      "user may have made it; remove it, or export "
				      "WEFT_STORE_SECRET=<random string> in the job",
				      dir, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 0777),
				      (unsigned)getuid());
	return WEFT_OK;
}

weft_status weft_dist_secret_dir(char *out, size_t len)
{
	const char *base = getenv("WEFT_SECRET_DIR");

	if (base && *base)
		snprintf(out, len, "%s", base);
	else if (getenv("XDG_RUNTIME_DIR") && *getenv("XDG_RUNTIME_DIR"))
		snprintf(out, len, "%s/weft", getenv("XDG_RUNTIME_DIR"));
	else
		snprintf(out, len, "/tmp/weft-%u", (unsigned)getuid());
	if (mkdir(out, 0700) != 0 && errno != EEXIST)
		return weft_error_set(WEFT_ERR_IO, "store secret: cannot make %s: %s", out,
				      strerror(errno));
	return check_private_dir(out);
}

weft_status weft_dist_make_secret(char *out, size_t len)
{
	unsigned char raw[32];
	size_t got = 0;

	if (len < 2 * sizeof(raw) + 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "secret buffer of %zu bytes is too "
				      "small (need %zu)", len, 2 * sizeof(raw) + 1);
	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return weft_error_set(WEFT_ERR_IO, "getrandom failed: %s", strerror(errno));
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return WEFT_OK;
}

weft_status weft_dist_slurm_first_host(const char *nodelist, char *out, size_t len)
{
	const char *p = nodelist;
	size_t n = 0;

	if (!nodelist || !*nodelist)
		return weft_error_set(WEFT_ERR_CONFIG, "SLURM_JOB_NODELIST is empty; run inside "
				      "a Slurm allocation (srun/sbatch) or set MASTER_ADDR");
	/* prefix up to ',' or '[' */
	while (*p && *p != ',' && *p != '[') {
		if (n + 1 >= len)
			goto malformed;
		out[n++] = *p++;
	}
	if (*p == '[') {
		p++;
		/* first number of the first range, zero padding kept */
		if (!isdigit((unsigned char)*p))
			goto malformed;
		while (isdigit((unsigned char)*p)) {
			if (n + 1 >= len)
				goto malformed;
			out[n++] = *p++;
		}
		if (*p != '-' && *p != ',' && *p != ']')
			goto malformed;
		if (!strchr(p, ']'))
			goto malformed;
	}
	if (n == 0)
		goto malformed;
	out[n] = '\0';
	return WEFT_OK;
malformed:
	return weft_error_set(WEFT_ERR_CONFIG, "SLURM_JOB_NODELIST='%s' is not a node list "
			      "weft can read (expected e.g. 'node[01-04],gpu7'); set MASTER_ADDR "
			      "to the first node's address instead", nodelist);
}

/* Without WEFT_STORE_SECRET nothing public may stand for the secret: on
 * one node rank 0 makes a random one and hands it over in a file only this
 * user can read (named after the job, so that jobs do not share it); a
 * store that other hosts must reach needs the secret exported. */
static weft_status read_secret(weft_dist_env *env, const char *job_id)
{
	const char *s = env_get("WEFT_STORE_SECRET");
	char dir[WEFT_DIST_PATH_MAX - 64], key[256];
	uint64_t h = 1469598103934665603ull;
	weft_status st;

	if (s) {
		env->secret_from_env = 1;
		return copy_str(env->secret, sizeof(env->secret), s, "WEFT_STORE_SECRET");
	}
	env->secret_from_env = 0;
	if (env->world_size > env->local_world_size)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s started %d ranks on several nodes but WEFT_STORE_SECRET "
				      "is not set, so anyone who can reach the store at %s:%d could "
				      "join the job: export WEFT_STORE_SECRET=$(openssl rand -hex "
				      "32) in the job script before %s, so every rank inherits it",
				      weft_dist_source_name(env->source), env->world_size,
				      env->store_host, env->store_port,
				      env->source == WEFT_DIST_SLURM ? "srun" :
				      env->source == WEFT_DIST_OMPI ? "mpirun" : "torchrun");
	if ((st = weft_dist_secret_dir(dir, sizeof(dir))))
		return st;
	snprintf(key, sizeof(key), "%s:%s:%d", weft_dist_source_name(env->source),
		 job_id ? job_id : "-", env->store_port);
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	snprintf(env->secret_file, sizeof(env->secret_file), "%s/store-%016llx.secret", dir,
		 (unsigned long long)h);
	return WEFT_OK;
}

int weft_dist_job_port(const char *job_id)
{
	uint64_t h = 1469598103934665603ull;
	char *end;
	unsigned long long n;

	if (!job_id || !*job_id)
		return WEFT_DIST_DEFAULT_PORT;
	errno = 0;
	n = strtoull(job_id, &end, 10);
	if (!errno && !*end)
		return WEFT_DIST_JOB_PORT_BASE + (int)(n % WEFT_DIST_JOB_PORT_SPAN);
	for (const char *p = job_id; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return WEFT_DIST_JOB_PORT_BASE + (int)(h % WEFT_DIST_JOB_PORT_SPAN);
}

const char *weft_dist_start_hint(weft_dist_source src, int64_t per_node, int64_t nodes,
				 char *buf, size_t len)
{
	switch (src) {
	case WEFT_DIST_TORCHRUN:
		snprintf(buf, len, "torchrun --nnodes %lld --nproc-per-node %lld ...",
			 (long long)nodes, (long long)per_node);
		break;
	case WEFT_DIST_OMPI:
		snprintf(buf, len, "mpirun -np %lld --map-by ppr:%lld:node ...",
			 (long long)(nodes * per_node), (long long)per_node);
		break;
	case WEFT_DIST_SLURM:
		snprintf(buf, len, "srun --nodes %lld --ntasks-per-node %lld ... (in sbatch: "
			 "#SBATCH --nodes=%lld --ntasks-per-node=%lld)", (long long)nodes,
			 (long long)per_node, (long long)nodes, (long long)per_node);
		break;
	default:
		snprintf(buf, len, "weft launch --nnodes %lld --nproc-per-node %lld -- ...",
			 (long long)nodes, (long long)per_node);
		break;
	}
	return buf;
}

const char *weft_dist_port_hint(const weft_dist_env *env, char *buf, size_t len)
{
	switch (env->source) {
	case WEFT_DIST_TORCHRUN:
		snprintf(buf, len, "under torchrun weft's store is on MASTER_PORT + 1 (%d); "
			 "give each job its own --master-port, or export WEFT_STORE_PORT",
			 env->store_port);
		break;
	case WEFT_DIST_OMPI:
	case WEFT_DIST_SLURM:
		snprintf(buf, len, "under %s the store's port %d comes from MASTER_PORT, else "
			 "from the job id (%d + id mod %d); if another job or program holds it, "
			 "export a different MASTER_PORT in the job (before %s)",
			 weft_dist_source_name(env->source), env->store_port,
			 WEFT_DIST_JOB_PORT_BASE, WEFT_DIST_JOB_PORT_SPAN,
			 env->source == WEFT_DIST_SLURM ? "srun" : "mpirun");
		break;
	default:
		snprintf(buf, len, "weft launch serves the store on port %d; check that every "
			 "node's launcher got the same --master-addr and --master-port",
			 env->store_port);
		break;
	}
	return buf;
}

/* Store address for launchers that are not ours: MASTER_ADDR, or `host`. */
static weft_status master_from_env(weft_dist_env *env, const char *fallback_host, int port_def)
{
	const char *addr = env_get("MASTER_ADDR");
	weft_status st;

	if (!addr)
		addr = fallback_host;
	if (!addr)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "%s set the ranks but not where to meet: export MASTER_ADDR "
				      "(rank 0's host) and MASTER_PORT (a free port) in the job",
				      weft_dist_source_name(env->source));
	st = copy_str(env->store_host, sizeof(env->store_host), addr, "MASTER_ADDR");
	if (st)
		return st;
	return env_int("MASTER_PORT", 1, 65535, port_def, 1, &env->store_port);
}

static weft_status detect_weft(weft_dist_env *env)
{
	weft_status st;
	const char *host;

	env->source = WEFT_DIST_WEFT;
	if ((st = env_int("WEFT_RANK", 0, INT_MAX, 0, 0, &env->rank)) ||
	    (st = env_int("WEFT_WORLD_SIZE", 1, INT_MAX, 0, 0, &env->world_size)) ||
	    (st = env_int("WEFT_LOCAL_RANK", 0, INT_MAX, 0, 1, &env->local_rank)) ||
	    (st = env_int("WEFT_LOCAL_WORLD_SIZE", 1, INT_MAX, env->world_size, 1,
			  &env->local_world_size)) ||
	    (st = env_int("WEFT_NODE_RANK", 0, INT_MAX, 0, 1, &env->node_rank)) ||
	    (st = env_int("WEFT_STORE_PORT", 1, 65535, 0, 0, &env->store_port)))
		return st;
	host = env_get("WEFT_STORE_ADDR");
	if (!host)
		return weft_error_set(WEFT_ERR_CONFIG, "WEFT_RANK is set but WEFT_STORE_ADDR is "
				      "not; start ranks with `weft launch` or export both");
	if ((st = copy_str(env->store_host, sizeof(env->store_host), host, "WEFT_STORE_ADDR")))
		return st;
	if (!env_get("WEFT_STORE_SECRET"))
		return weft_error_set(WEFT_ERR_CONFIG, "WEFT_RANK is set but WEFT_STORE_SECRET "
				      "is not; `weft launch` sets it, so start ranks with it");
	env->store_served_by_rank0 = 0;
	return read_secret(env, NULL);
}

static weft_status detect_torchrun(weft_dist_env *env)
{
	weft_status st;
	int port_override = 0;

	env->source = WEFT_DIST_TORCHRUN;
	if ((st = env_int("RANK", 0, INT_MAX, 0, 0, &env->rank)) ||
	    (st = env_int("WORLD_SIZE", 1, INT_MAX, 0, 0, &env->world_size)) ||
	    (st = env_int("LOCAL_RANK", 0, INT_MAX, 0, 1, &env->local_rank)) ||
	    (st = env_int("LOCAL_WORLD_SIZE", 1, INT_MAX, env->world_size, 1,
			  &env->local_world_size)) ||
	    (st = env_int("GROUP_RANK", 0, INT_MAX, 0, 1, &env->node_rank)) ||
	    (st = master_from_env(env, NULL, WEFT_DIST_DEFAULT_PORT)) ||
	    (st = env_int("WEFT_STORE_PORT", 1, 65535, 0, 1, &port_override)))
		return st;
	/* torchrun's own store already listens on MASTER_PORT */
	env->store_port = port_override ? port_override : env->store_port + 1;
	if (env->store_port > 65535)
		return weft_error_set(WEFT_ERR_CONFIG, "MASTER_PORT=65535 leaves no port for "
				      "weft's store (MASTER_PORT+1); pick a lower port");
	env->store_served_by_rank0 = 1;
	return read_secret(env, env_get("TORCHELASTIC_RUN_ID"));
}

/* The node's index under Open MPI, which exports none: with ranks placed
 * by slot (mpirun's default: node n holds ranks n*L .. n*L+L-1, L ranks a
 * node) it is rank / L; placed by node (--map-by node: round robin over
 * N nodes) it is rank mod N. Mappings that are neither give -1 (unknown;
 * only logged). */
static int ompi_node_index(int rank, int world, int local, int local_size)
{
	int nodes = (world + local_size - 1) / local_size;

	if (local == rank % local_size)
		return rank / local_size;
	if (nodes > 0 && local == rank / nodes)
		return rank % nodes;
	return -1;
}

/* Open MPI's job id: ess_base_jobid (4.x), else the PMIx namespace (5.x). */
static const char *ompi_job_id(void)
{
	const char *id = env_get("OMPI_MCA_ess_base_jobid");

	return id ? id : env_get("PMIX_NAMESPACE");
}

static weft_status detect_ompi(weft_dist_env *env)
{
	weft_status st;

	env->source = WEFT_DIST_OMPI;
	if ((st = env_int("OMPI_COMM_WORLD_RANK", 0, INT_MAX, 0, 0, &env->rank)) ||
	    (st = env_int("OMPI_COMM_WORLD_SIZE", 1, INT_MAX, 0, 0, &env->world_size)) ||
	    (st = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX, 0, 1, &env->local_rank)) ||
	    (st = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT_MAX, env->world_size, 1,
			  &env->local_world_size)))
		return st;
	/* OMPI_COMM_WORLD_NODE_RANK is the rank's index on its node, not the
	 * node's index: that follows from the mapping (see ompi_node_index) */
	env->node_rank = ompi_node_index(env->rank, env->world_size, env->local_rank,
					 env->local_world_size);
	/* a single-node mpirun needs no address: everyone is local; the port
	 * is the job's own, so two jobs on one node do not meet */
	st = master_from_env(env, env->local_world_size == env->world_size ? "127.0.0.1" : NULL,
			     weft_dist_job_port(ompi_job_id()));
	if (st)
		return st;
	env->store_served_by_rank0 = 1;
	return read_secret(env, ompi_job_id());
}

/* Slurm's SLURM_TASKS_PER_NODE looks like "2(x3),1": the first count. */
static int slurm_tasks_on_first_node(void)
{
	const char *v = env_get("SLURM_NTASKS_PER_NODE");

	if (!v)
		v = env_get("SLURM_TASKS_PER_NODE");
	return v ? atoi(v) : 0;
}

static weft_status detect_slurm(weft_dist_env *env)
{
	char first[WEFT_DIST_HOST_MAX];
	const char *nodelist;
	weft_status st;
	int local = slurm_tasks_on_first_node();

	env->source = WEFT_DIST_SLURM;
	if ((st = env_int("SLURM_PROCID", 0, INT_MAX, 0, 0, &env->rank)) ||
	    (st = env_int("SLURM_NTASKS", 1, INT_MAX, 0, 0, &env->world_size)) ||
	    (st = env_int("SLURM_LOCALID", 0, INT_MAX, 0, 1, &env->local_rank)) ||
	    (st = env_int("SLURM_NODEID", 0, INT_MAX, 0, 1, &env->node_rank)))
		return st;
	env->local_world_size = local > 0 ? local : env->world_size;
	nodelist = env_get("SLURM_JOB_NODELIST");
	if (!nodelist)
		nodelist = env_get("SLURM_NODELIST");
	if (env_get("MASTER_ADDR")) {
		st = master_from_env(env, NULL, weft_dist_job_port(env_get("SLURM_JOB_ID")));
	} else {
		st = weft_dist_slurm_first_host(nodelist, first, sizeof(first));
		if (!st)
			st = master_from_env(env, first, weft_dist_job_port(env_get("SLURM_JOB_ID")));
	}
	if (st)
		return st;
	env->store_served_by_rank0 = 1;
	return read_secret(env, env_get("SLURM_JOB_ID"));
}

/* A Slurm batch script (or salloc shell) that runs weft itself instead of
 * through srun: the allocation has several nodes, or Slurm's variables
 * say several tasks, but no job step started this process, so the other
 * ranks will never come. */
static weft_status check_not_batch_step(void)
{
	const char *nodes = env_get("SLURM_JOB_NUM_NODES") ? env_get("SLURM_JOB_NUM_NODES") :
			    env_get("SLURM_NNODES");
	const char *tasks = env_get("SLURM_NTASKS");
	long n = nodes ? atol(nodes) : 1, t = tasks ? atol(tasks) : 1;

	if (!env_get("SLURM_JOB_ID") || env_get("SLURM_STEP_ID") || env_get("SLURM_STEPID"))
		return WEFT_OK;
	if (n > 1 || (env_get("SLURM_PROCID") && t > 1))
		return weft_error_set(WEFT_ERR_CONFIG, "Slurm job %s has %ld node(s) and %ld "
				      "task(s), but this process was not started by srun (no "
				      "SLURM_STEP_ID): run it in the batch script as `srun weft fit "
				      "...` (e.g. srun --nodes %ld --ntasks-per-node D weft fit "
				      "--config cfg.yaml), or the other ranks never come",
				      env_get("SLURM_JOB_ID"), n, t, n);
	return WEFT_OK;
}

weft_status weft_dist_env_detect(weft_dist_env *out)
{
	weft_dist_env env = { .world_size = 1, .local_world_size = 1 };
	weft_status st = WEFT_OK;

	if (env_get("WEFT_RANK"))
		st = detect_weft(&env);
	else if (env_get("RANK") && env_get("WORLD_SIZE"))
		st = detect_torchrun(&env);
	else if (env_get("OMPI_COMM_WORLD_RANK"))
		st = detect_ompi(&env);
	else if ((st = check_not_batch_step()))
		return st;
	else if (env_get("SLURM_PROCID") && env_get("SLURM_NTASKS"))
		st = detect_slurm(&env);
	if (st)
		return weft_error_wrap(st, "finding this rank from the environment (%s)",
				       weft_dist_source_name(env.source));
	if ((st = env_int("WEFT_RESTART_COUNT", 0, INT_MAX, 0, 1, &env.restart_count)))
		return st;
	if (env.rank >= env.world_size)
		return weft_error_set(WEFT_ERR_CONFIG, "%s: rank %d is not below the world size "
				      "%d; check the launcher's variables",
				      weft_dist_source_name(env.source), env.rank, env.world_size);
	if (env.local_rank >= env.local_world_size)
		return weft_error_set(WEFT_ERR_CONFIG, "%s: local rank %d is not below the local "
				      "world size %d; check the launcher's variables",
				      weft_dist_source_name(env.source), env.local_rank,
				      env.local_world_size);
	if (env.source != WEFT_DIST_SINGLE) {
		weft_log(WEFT_LOG_INFO, "distributed environment from %s: rank %d of %d (local "
			 "%d of %d, node %d), store %s:%d%s", weft_dist_source_name(env.source),
			 env.rank, env.world_size, env.local_rank, env.local_world_size,
			 env.node_rank, env.store_host, env.store_port,
			 env.store_served_by_rank0 ? " served by rank 0" : "");
		if (env.secret_file[0])
			weft_log(WEFT_LOG_DEBUG, "store secret: made by rank 0 in %s (mode 0600)",
				 env.secret_file);
	} else {
		weft_log(WEFT_LOG_DEBUG, "no distributed environment found: single process");
	}
	*out = env;
	return WEFT_OK;
}
