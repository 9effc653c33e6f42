/* `weft bench comm`: the nccl-tests table for a comm backend. Started
 * without a launcher it re-executes itself through core/launch with -n
 * ranks; each rank then meets the others and times the collective. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "dist/dist.h"
#include "dist/pg.h"
#include "launch/launch.h"
#include "train/device_map.h"
#include "plugin/registry.h"
#include "weft/weft.h"

typedef struct bench_opts {
	const char *backend;
	const char *op;
	int nranks;
	int64_t min_bytes, max_bytes;
	int factor;
	int warmup, iters;
	char options[1024]; /* the backend's options, "key: value" lines */
} bench_opts;

static void bench_usage(FILE *out)
{
	fprintf(out,
		"usage: weft bench comm [--backend gloo|nccl] [-n RANKS] [-b MIN] [-e MAX] [-f FACTOR]\n"
		"                       [-w WARMUP] [-i ITERS] [--op all_reduce|all_gather|\n"
		"                        reduce_scatter|broadcast] [-o KEY=VALUE]...\n\n"
		"Prints nccl-tests' table (size, count, type, redop, root, time, algbw, busbw,\n"
		"#wrong) for float buffers from MIN to MAX bytes (suffixes K, M, G), each\n"
		"FACTOR times the last. Defaults: gloo, 2 ranks, 8 B to 64M, factor 2,\n"
		"5 warm-up and 20 timed iterations, all_reduce (sum). With nccl the buffers\n"
		"live on the GPUs (local rank r on GPU r), as in nccl-tests. -o passes the\n"
		"backend an option, as trainer.comm's mapping does (gloo: -o shm=off).\n");
}

static int parse_size(const char *s, int64_t *out)
{
	char *end;
	double v = strtod(s, &end);
	int64_t mul = 1;

	if (end == s || v < 0)
		return -1;
	if (*end == 'K' || *end == 'k')
		mul = 1 << 10;
	else if (*end == 'M' || *end == 'm')
		mul = 1 << 20;
	else if (*end == 'G' || *end == 'g')
		mul = 1 << 30;
	else if (*end)
		return -1;
	if (*end && end[1])
		return -1;
	*out = (int64_t)(v * (double)mul);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Bus bandwidth factor of nccl-tests for each collective. */
static double bus_factor(const char *op, int n)
{
	if (!strcmp(op, "all_reduce"))
		return 2.0 * (n - 1) / n;
	if (!strcmp(op, "broadcast"))
		return 1.0;
	return (double)(n - 1) / n;
}

static weft_status run_one(weft_pg *pg, const char *op, float *send, float *recv, int64_t count,
			   weft_device dev)
{
	int n = weft_pg_size(pg);
	weft_comm_device cd = dev.type == WEFT_DEVICE_CUDA ? WEFT_COMM_DEVICE_CUDA :
							     WEFT_COMM_DEVICE_CPU;
	weft_comm_buf s = { .data = send, .count = count, .dtype = WEFT_COMM_F32, .device = cd,
			    .device_index = dev.index };
	weft_comm_buf r = { .data = recv, .count = count, .dtype = WEFT_COMM_F32, .device = cd,
			    .device_index = dev.index };

	if (!strcmp(op, "all_reduce"))
		return weft_pg_all_reduce(pg, &s, &r, WEFT_COMM_SUM, NULL);
	if (!strcmp(op, "all_gather")) {
		s.count = count / n;
		r.count = s.count * n;
		return weft_pg_all_gather(pg, &s, &r, NULL);
	}
	if (!strcmp(op, "reduce_scatter")) {
		s.count = count / n * n;
		r.count = count / n;
		return weft_pg_reduce_scatter(pg, &s, &r, WEFT_COMM_SUM, NULL);
	}
	return weft_pg_broadcast(pg, &r, 0, NULL);
}

/* Elements of recv that differ from what the collective must give. */
static int64_t count_wrong(const char *op, const float *recv, int64_t count, int n)
{
	int64_t wrong = 0, m = count;
	float want = (float)(n * (n + 1) / 2);

	if (!strcmp(op, "all_gather")) {
		m = count / n * n;
		for (int64_t i = 0; i < m; i++)
			wrong += recv[i] != (float)(i / (count / n) + 1);
		return wrong;
	}
	if (!strcmp(op, "reduce_scatter"))
		m = count / n;
	if (!strcmp(op, "broadcast"))
		want = 1.0f;
	for (int64_t i = 0; i < m; i++)
		wrong += recv[i] != want;
	return wrong;
}

/* The benchmark's buffers: host arrays to fill and check, and where the
 * collective runs (the same arrays on the CPU; device copies for nccl). */
typedef struct bench_bufs {
	weft_device dev;
	const weft_kernel_table *k; /* dev's kernels; NULL on the CPU */
	float *hsend, *hrecv, *send, *recv;
	size_t bytes;
} bench_bufs;

static weft_status bufs_alloc(bench_bufs *b, weft_device dev, size_t bytes)
{
	weft_status st;

	b->dev = dev;
	b->bytes = bytes;
	b->hsend = weft_mem_alloc(WEFT_MEM_COMM, bytes);
	b->hrecv = weft_mem_alloc(WEFT_MEM_COMM, bytes);
	if (!b->hsend || !b->hrecv)
		return WEFT_ERR_NOMEM; /* weft_mem_alloc set the message */
	if (dev.type == WEFT_DEVICE_CPU) {
		b->send = b->hsend;
		b->recv = b->hrecv;
		return WEFT_OK;
	}
	if ((st = weft_kernels_get(dev, &b->k)) ||
	    (st = weft_device_alloc(dev, WEFT_MEM_COMM, bytes, (void **)&b->send)) ||
	    (st = weft_device_alloc(dev, WEFT_MEM_COMM, bytes, (void **)&b->recv)))
		return st;
	return WEFT_OK;
}

/* Host arrays -> the collective's buffers (a no-op on the CPU). */
static weft_status bufs_put(const bench_bufs *b, size_t bytes)
{
	weft_status st;

	if (!b->k)
		return WEFT_OK;
	if ((st = b->k->copy(NULL, b->send, b->hsend, bytes, WEFT_COPY_HOST_TO_DEVICE)) ||
	    (st = b->k->copy(NULL, b->recv, b->hrecv, bytes, WEFT_COPY_HOST_TO_DEVICE)))
		return st;
	return b->k->synchronize(NULL);
}

/* The received buffer -> hrecv (a no-op on the CPU). */
static weft_status bufs_get(const bench_bufs *b, size_t bytes)
{
	if (!b->k)
		return WEFT_OK;
	return b->k->copy(NULL, b->hrecv, b->recv, bytes, WEFT_COPY_DEVICE_TO_HOST);
}

static void bufs_free(bench_bufs *b)
{
	if (b->k) {
		weft_device_free(b->dev, WEFT_MEM_COMM, b->send, b->bytes);
		weft_device_free(b->dev, WEFT_MEM_COMM, b->recv, b->bytes);
	}
	weft_mem_free(b->hsend);
	weft_mem_free(b->hrecv);
}

/* nccl runs on the GPUs, as nccl-tests do: local rank r on cuda:r (the
 * trainer's mapping, which refuses ranks sharing a GPU under nccl). */
static weft_status bench_device(const char *backend, const weft_dist_env *env, weft_device *dev)
{
	*dev = WEFT_CPU;
	if (strcmp(backend, "nccl") != 0)
		return WEFT_OK;
	*dev = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
	return weft_device_map_apply(dev, env->local_rank, env->local_world_size, backend);
}

static int bench_rank(const bench_opts *o)
{
	weft_dist_env env;
	weft_store_client *store = NULL;
	weft_registry *reg = NULL;
	const void *vt;
	weft_pg *pg = NULL;
	weft_device dev = WEFT_CPU;
	bench_bufs bb = { 0 };
	float *send, *recv, tsum;
	int64_t maxc = o->max_bytes / 4 + 1;
	int rc = 1;
	weft_config *opts = NULL;

	if ((o->options[0] && weft_config_load_string("-o", o->options, strlen(o->options),
						      &opts)) ||
	    weft_dist_env_detect(&env) || bench_device(o->backend, &env, &dev) ||
	    weft_store_connect(env.store_host, env.store_port, env.secret, 60000, &store) ||
	    weft_registry_create(&reg) || weft_registry_add_default_paths(reg) ||
	    weft_registry_find(reg, WEFT_PLUGIN_COMM, o->backend, &vt, NULL) ||
	    weft_pg_create_dev(vt, store, env.rank, env.world_size, "bench", 60000,
			       env.local_world_size == env.world_size ? "127.0.0.1" : NULL,
			       opts ? weft_config_root(opts) : NULL,
			       dev.type == WEFT_DEVICE_CUDA ? WEFT_COMM_DEVICE_CUDA :
							      WEFT_COMM_DEVICE_CPU,
			       dev.index, &pg) ||
	    (opts && weft_config_check_unused(opts)))
		goto out;
	weft_log_set_rank(env.rank);
	if (bufs_alloc(&bb, dev, (size_t)maxc * 4))
		goto out;
	send = bb.hsend;
	recv = bb.hrecv;
	if (env.rank == 0) {
		printf("# weft bench comm: backend %s, %d ranks, op %s, %d warm-up + %d timed "
		       "iterations\n", o->backend, env.world_size, o->op, o->warmup, o->iters);
		printf("#%12s %13s %7s %7s %6s %10s %8s %8s %7s\n", "size", "count", "type",
		       "redop", "root", "time", "algbw", "busbw", "#wrong");
		printf("#%12s %13s %7s %7s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "",
		       "", "(us)", "(GB/s)", "(GB/s)", "");
	}
	for (int64_t bytes = o->min_bytes; bytes <= o->max_bytes;
	     bytes = bytes * o->factor > bytes ? bytes * o->factor : bytes + 1) {
		int64_t count = bytes / 4, wrong;
		weft_comm_buf t = { .data = &tsum, .count = 1, .dtype = WEFT_COMM_F32 };
		double t0, us, algbw;
		float secs;

		for (int64_t i = 0; i < count; i++) {
			send[i] = !strcmp(o->op, "all_gather") ? (float)(env.rank + 1) :
				  (float)(env.rank + 1);
			recv[i] = env.rank == 0 ? 1.0f : 0.0f;
		}
		if (bufs_put(&bb, (size_t)count * 4) ||
		    run_one(pg, o->op, bb.send, bb.recv, count, dev) ||
		    bufs_get(&bb, (size_t)count * 4))
			goto out;
		wrong = count_wrong(o->op, recv, count, env.world_size);
		for (int w = 0; w < o->warmup; w++)
			if (run_one(pg, o->op, bb.send, bb.recv, count, dev))
				goto out;
		if (weft_pg_barrier(pg, NULL))
			goto out;
		t0 = now_s();
		for (int it = 0; it < o->iters; it++)
			if (run_one(pg, o->op, bb.send, bb.recv, count, dev))
				goto out;
		/* a GPU collective returns when it is queued: time it done */
		if (bb.k && bb.k->synchronize(NULL))
			goto out;
		/* the slowest rank's time, as nccl-tests reports */
		secs = (float)((now_s() - t0) / o->iters);
		tsum = secs;
		if (weft_pg_all_reduce(pg, &t, &t, WEFT_COMM_MAX, NULL))
			goto out;
		us = tsum * 1e6;
		algbw = (double)bytes / tsum / 1e9;
		if (env.rank == 0)
			printf(" %12lld %13lld %7s %7s %6d %10.1f %8.2f %8.2f %7lld\n",
			       (long long)bytes, (long long)count, "float",
			       !strcmp(o->op, "all_reduce") || !strcmp(o->op, "reduce_scatter") ?
			       "sum" : "none", !strcmp(o->op, "broadcast") ? 0 : -1, us, algbw,
			       algbw * bus_factor(o->op, env.world_size), (long long)wrong);
		fflush(stdout);
		if (bytes == o->max_bytes)
			break;
		if (bytes * o->factor > o->max_bytes)
			bytes = o->max_bytes / o->factor;
	}
	rc = 0;
out:
	if (rc)
		weft_cli_fail();
	weft_pg_destroy(pg);
	bufs_free(&bb);
	weft_registry_free(reg);
	weft_store_client_close(store);
	weft_config_free(opts);
	return rc;
}

/* Not a launched rank yet: run -n copies of this very command. */
static int bench_launch(const bench_opts *o, int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char **args = calloc((size_t)argc + 3, sizeof(*args));
	weft_launch_opts lo = { .nproc_per_node = o->nranks, .nnodes = 1 };
	weft_launch_result res;
	int rc;

	if (n <= 0 || !args) {
		free(args);
		weft_error_set(WEFT_ERR_IO, "bench: cannot find this program to start the ranks");
		return weft_cli_fail();
	}
	self[n] = '\0';
	args[0] = self;
	args[1] = "bench";
	for (int i = 0; i < argc; i++)
		args[i + 2] = argv[i];
	lo.argv = args;
	rc = weft_launch_run(&lo, &res) ? weft_cli_fail() : res.exit_code;
	if (res.exit_code)
		fprintf(stderr, "weft: bench comm failed: %s\n", res.cause);
	free(args);
	return rc;
}

int weft_cmd_bench(int argc, char **argv)
{
	bench_opts o = { .backend = "gloo", .op = "all_reduce", .nranks = 2, .min_bytes = 8,
			 .max_bytes = 64 << 20, .factor = 2, .warmup = 5, .iters = 20 };

	if (argc < 2 || strcmp(argv[1], "comm")) {
		fprintf(stderr, "weft bench: the only benchmark is `comm`\n");
		bench_usage(stderr);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			bench_usage(stdout);
			return 0;
		}
		if (!v) {
			bad = 1;
		} else if (!strcmp(a, "--backend")) {
			o.backend = v;
		} else if (!strcmp(a, "--op")) {
			o.op = v;
			bad = strcmp(v, "all_reduce") && strcmp(v, "all_gather") &&
			      strcmp(v, "reduce_scatter") && strcmp(v, "broadcast");
		} else if (!strcmp(a, "-n")) {
			o.nranks = atoi(v);
			bad = o.nranks < 1;
		} else if (!strcmp(a, "-b")) {
			bad = parse_size(v, &o.min_bytes);
		} else if (!strcmp(a, "-e")) {
			bad = parse_size(v, &o.max_bytes);
		} else if (!strcmp(a, "-f")) {
			o.factor = atoi(v);
			bad = o.factor < 2;
		} else if (!strcmp(a, "-w")) {
			o.warmup = atoi(v);
			bad = o.warmup < 0;
		} else if (!strcmp(a, "-i")) {
			o.iters = atoi(v);
			bad = o.iters < 1;
		} else if (!strcmp(a, "-o")) {
			const char *eq = strchr(v, '=');
			size_t used = strlen(o.options);

			bad = !eq || eq == v || !eq[1] ||
			      snprintf(o.options + used, sizeof(o.options) - used, "%.*s: %s\n",
				       (int)(eq - v), v, eq + 1) >= (int)(sizeof(o.options) - used);
		} else {
			bad = 1;
		}
		if (bad) {
			fprintf(stderr, "weft bench comm: bad option '%s%s%s'\n", a, v ? " " : "",
				v ? v : "");
			bench_usage(stderr);
			return 2;
		}
		i++;
	}
	if (o.min_bytes < 4 || o.max_bytes < o.min_bytes) {
		fprintf(stderr, "weft bench comm: need 4 <= -b <= -e (got %lld and %lld bytes)\n",
			(long long)o.min_bytes, (long long)o.max_bytes);
		return 2;
	}
	if (!getenv("WEFT_RANK") && !getenv("RANK"))
		return bench_launch(&o, argc - 1, argv + 1);
	return bench_rank(&o);
}
