/* dist_worker: one rank of a multi-process test (started by common/spawn.h or by
 * `weft launch`). `dist_worker SCENARIO`; exits 0 when every check on this
 * rank held, 1 with the error on stderr otherwise.
 *
 * Values are small integers, exactly representable in every dtype (bf16
 * holds integers up to 256 exactly), and every partial sum stays below
 * 256, so every result is compared exactly: any difference is a bug, not
 * rounding. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/pg.h"
#include "plugin/registry.h"
#include "weft/config.h"
#include "weft/log.h"
#include "weft/memory.h"
#include "weft_test.h"
#include "weft/half.h"

static int R, P;

/* dtypes run_reductions and run_moves cover (bit d: dtype d) */
static unsigned dtype_mask = ~0u;

/* ---- typed element access --------------------------------------------- */

static void put(void *base, weft_comm_dtype dt, size_t i, double v)
{
	switch (dt) {
	case WEFT_COMM_F32: ((float *)base)[i] = (float)v; break;
	case WEFT_COMM_F64: ((double *)base)[i] = v; break;
	case WEFT_COMM_I32: ((int32_t *)base)[i] = (int32_t)v; break;
	case WEFT_COMM_I64: ((int64_t *)base)[i] = (int64_t)v; break;
	case WEFT_COMM_BF16: ((uint16_t *)base)[i] = weft_half_f32_to_bf16((float)v); break;
	case WEFT_COMM_F16: ((uint16_t *)base)[i] = weft_half_f32_to_f16((float)v); break;
	default: break;
	}
}

static double get(const void *base, weft_comm_dtype dt, size_t i)
{
	switch (dt) {
	case WEFT_COMM_F32: return ((const float *)base)[i];
	case WEFT_COMM_F64: return ((const double *)base)[i];
	case WEFT_COMM_I32: return ((const int32_t *)base)[i];
	case WEFT_COMM_I64: return (double)((const int64_t *)base)[i];
	case WEFT_COMM_BF16: return weft_half_bf16_to_f32(((const uint16_t *)base)[i]);
	case WEFT_COMM_F16: return weft_half_f16_to_f32(((const uint16_t *)base)[i]);
	default: return 0;
	}
}

/* What an avg of integer sum `s` over p ranks gives in dtype dt: floats
 * divide in f32/f64 (then round once to 16 bits), integers truncate. */
static double avg_of(double s, int p, weft_comm_dtype dt)
{
	switch (dt) {
	case WEFT_COMM_F32: return (float)s / (float)p;
	case WEFT_COMM_F64: return s / p;
	case WEFT_COMM_I32:
	case WEFT_COMM_I64: return (double)((int64_t)s / p);
	case WEFT_COMM_BF16: return weft_half_bf16_to_f32(weft_half_f32_to_bf16((float)s / (float)p));
	case WEFT_COMM_F16: return weft_half_f16_to_f32(weft_half_f32_to_f16((float)s / (float)p));
	default: return 0;
	}
}

static weft_comm_buf buf(void *p, int64_t n, weft_comm_dtype dt)
{
	return (weft_comm_buf){ .data = p, .count = n, .dtype = dt, .device = WEFT_COMM_DEVICE_CPU };
}

/* rank r's contribution to reductions: (r+1) * (i%5 + 1) */
static double red_val(int r, size_t i)
{
	return (double)((r + 1) * (int)(i % 5 + 1));
}

static double expect_red(int p, size_t i, weft_comm_redop op, weft_comm_dtype dt)
{
	double v = (double)(i % 5 + 1), s = v * p * (p + 1) / 2;

	switch (op) {
	case WEFT_COMM_SUM: return s;
	case WEFT_COMM_AVG: return avg_of(s, p, dt);
	case WEFT_COMM_MAX: return v * p;
	case WEFT_COMM_MIN: return v;
	default: return 0;
	}
}

/* data for moves: distinct per (source, index), below 97 */
static double mv_val(int src, size_t i)
{
	return (double)((src * 7 + (int)i) % 97);
}

/* ---- scenarios -------------------------------------------------------------- */

static int check_block(const char *what, const void *p, weft_comm_dtype dt, size_t n,
		       double (*want)(size_t, void *), void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		double got = get(p, dt, i), w = want(i, ctx);

		if (got != w) {
			fprintf(stderr, "rank %d/%d: %s %s: element %zu is %g, expected %g\n", R, P,
				what, weft_comm_dtype_name(dt), i, got, w);
			wt_failures++;
			return 0;
		}
	}
	wt_checks++;
	return 1;
}

typedef struct red_ctx {
	int p;
	weft_comm_redop op;
	weft_comm_dtype dt;
	size_t offset;
} red_ctx;

static double want_red(size_t i, void *c)
{
	red_ctx *x = c;

	return expect_red(x->p, i + x->offset, x->op, x->dt);
}

typedef struct mv_ctx {
	int p, r; /* the group's size and this rank's place in it */
	size_t n;
} mv_ctx;

/* all_gather: element i of recv came from rank i / n */
static double want_gather(size_t i, void *c)
{
	mv_ctx *x = c;

	return mv_val((int)(i / x->n), i % x->n);
}

static double want_bcast(size_t i, void *c)
{
	return mv_val(*(int *)c, i);
}

/* all_to_all: recv block j, element i came from rank j's block R */
static double want_a2a(size_t i, void *c)
{
	mv_ctx *x = c;

	return mv_val((int)(i / x->n) * x->p + x->r, i % x->n);
}

static void run_reductions(weft_pg *pg, size_t n)
{
	int p = weft_pg_size(pg), r = weft_pg_rank(pg);
	size_t es = 8, total = (size_t)p * n;
	char *a = weft_mem_alloc(WEFT_MEM_COMM, total * es);
	char *b = weft_mem_alloc(WEFT_MEM_COMM, total * es);

	for (int d = 0; d < WEFT_COMM_NUM_DTYPES; d++) {
		weft_comm_dtype dt = (weft_comm_dtype)d;

		if (!(dtype_mask >> d & 1))
			continue;
		for (int o = 0; o < WEFT_COMM_NUM_REDOPS; o++) {
			weft_comm_redop op = (weft_comm_redop)o;
			red_ctx ctx = { .p = p, .op = op, .dt = dt };
			char what[96];
			weft_comm_buf sa, sb;

			/* all_reduce, out of place then in place */
			for (size_t i = 0; i < n; i++) {
				put(a, dt, i, red_val(r, i));
				put(b, dt, i, -1);
			}
			sa = buf(a, (int64_t)n, dt);
			sb = buf(b, (int64_t)n, dt);
			WT_OK(weft_pg_all_reduce(pg, &sa, &sb, op, NULL));
			snprintf(what, sizeof(what), "%s all_reduce %s n=%zu", weft_pg_name(pg),
				 weft_comm_redop_name(op), n);
			check_block(what, b, dt, n, want_red, &ctx);
			WT_OK(weft_pg_all_reduce(pg, &sa, &sa, op, NULL));
			strcat(what, " in place");
			check_block(what, a, dt, n, want_red, &ctx);

			/* reduce_scatter, out of place then in place */
			for (size_t i = 0; i < total; i++)
				put(a, dt, i, red_val(r, i));
			sa = buf(a, (int64_t)total, dt);
			sb = buf(b, (int64_t)n, dt);
			WT_OK(weft_pg_reduce_scatter(pg, &sa, &sb, op, NULL));
			ctx.offset = (size_t)r * n;
			snprintf(what, sizeof(what), "%s reduce_scatter %s n=%zu", weft_pg_name(pg),
				 weft_comm_redop_name(op), n);
			check_block(what, b, dt, n, want_red, &ctx);
			sb = buf(a + (size_t)r * n * weft_comm_dtype_size(dt), (int64_t)n, dt);
			WT_OK(weft_pg_reduce_scatter(pg, &sa, &sb, op, NULL));
			strcat(what, " in place");
			check_block(what, sb.data, dt, n, want_red, &ctx);
		}
	}
	weft_mem_free(a);
	weft_mem_free(b);
}

static void run_moves(weft_pg *pg, size_t n)
{
	int p = weft_pg_size(pg), r = weft_pg_rank(pg);
	size_t total = (size_t)p * n;
	char *a = weft_mem_alloc(WEFT_MEM_COMM, total * 8);
	char *b = weft_mem_alloc(WEFT_MEM_COMM, total * 8);

	for (int d = 0; d < WEFT_COMM_NUM_DTYPES; d++) {
		weft_comm_dtype dt = (weft_comm_dtype)d;
		size_t es = weft_comm_dtype_size(dt);

		if (!(dtype_mask >> d & 1))
			continue;
		mv_ctx mc = { .p = p, .r = r, .n = n };
		weft_comm_buf sa, sb;
		int root = p - 1;

		/* all_gather out of place, then in place */
		for (size_t i = 0; i < n; i++)
			put(a, dt, i, mv_val(r, i));
		sa = buf(a, (int64_t)n, dt);
		sb = buf(b, (int64_t)total, dt);
		WT_OK(weft_pg_all_gather(pg, &sa, &sb, NULL));
		check_block("all_gather", b, dt, total, want_gather, &mc);
		memset(b, 0, total * es);
		for (size_t i = 0; i < n; i++)
			put(b + (size_t)r * n * es, dt, i, mv_val(r, i));
		sa = buf(b + (size_t)r * n * es, (int64_t)n, dt);
		WT_OK(weft_pg_all_gather(pg, &sa, &sb, NULL));
		check_block("all_gather in place", b, dt, total, want_gather, &mc);

		/* broadcast from the last rank */
		for (size_t i = 0; i < n; i++)
			put(a, dt, i, r == root ? mv_val(root, i) : -1);
		sa = buf(a, (int64_t)n, dt);
		WT_OK(weft_pg_broadcast(pg, &sa, root, NULL));
		check_block("broadcast", a, dt, n, want_bcast, &root);

		/* all_to_all: block j of rank r holds mv_val(r * P + j, i) */
		for (size_t j = 0; j < (size_t)p; j++)
			for (size_t i = 0; i < n; i++)
				put(a, dt, j * n + i, mv_val(r * p + (int)j, i));
		sa = buf(a, (int64_t)total, dt);
		sb = buf(b, (int64_t)total, dt);
		WT_OK(weft_pg_all_to_all(pg, &sa, &sb, NULL));
		check_block("all_to_all", b, dt, total, want_a2a, &mc);

		/* a ring of send/recv, asynchronous so neither side blocks first */
		if (p > 1) {
			weft_comm_work *ws = NULL, *wr = NULL;
			int from = (r - 1 + p) % p;

			for (size_t i = 0; i < n; i++)
				put(a, dt, i, mv_val(r, i));
			sa = buf(a, (int64_t)n, dt);
			sb = buf(b, (int64_t)n, dt);
			WT_OK(weft_pg_send(pg, &sa, (r + 1) % p, &ws));
			WT_OK(weft_pg_recv(pg, &sb, from, &wr));
			WT_OK(weft_pg_wait(pg, ws, -1));
			WT_OK(weft_pg_wait(pg, wr, -1));
			check_block("send/recv", b, dt, n, want_bcast, &from);
		}
	}
	WT_OK(weft_pg_barrier(pg, NULL));
	weft_mem_free(a);
	weft_mem_free(b);
}

/* Several all_reduces in flight at once: FIFO order, every handle waited. */
static void run_async(weft_pg *pg)
{
	enum { K = 8, N = 257 };
	static float x[K][N];
	weft_comm_work *w[K];
	int p = weft_pg_size(pg);

	for (int k = 0; k < K; k++) {
		weft_comm_buf b = buf(x[k], N, WEFT_COMM_F32);

		for (int i = 0; i < N; i++)
			x[k][i] = (float)(k + 1);
		WT_OK(weft_pg_all_reduce(pg, &b, &b, WEFT_COMM_SUM, &w[k]));
	}
	for (int k = 0; k < K; k++) {
		int done;

		WT_OK(weft_pg_ops(pg)->test(w[k], &done));
		WT_OK(weft_pg_wait(pg, w[k], -1));
		WT_CHECK(x[k][0] == (float)((k + 1) * p) && x[k][N - 1] == (float)((k + 1) * p));
	}
}

static void scenario_collectives(weft_pg *world)
{
	weft_pg *sub = NULL;

	run_reductions(world, 13);
	run_reductions(world, 1);
	run_moves(world, 13);
	run_async(world);
	/* a large odd count: several of Gloo's 1 MiB segments */
	{
		size_t n = 300007;
		float *v = weft_mem_alloc(WEFT_MEM_COMM, n * sizeof(float));
		weft_comm_buf b = buf(v, (int64_t)n, WEFT_COMM_F32);
		int bad = 0;

		for (size_t i = 0; i < n; i++)
			v[i] = (float)(R + 1);
		WT_OK(weft_pg_all_reduce(world, &b, &b, WEFT_COMM_SUM, NULL));
		for (size_t i = 0; i < n; i++)
			bad += v[i] != (float)(P * (P + 1) / 2);
		WT_CHECK(bad == 0);
		weft_mem_free(v);
	}
	/* subgroups: even and odd ranks, reversed order by key */
	WT_OK(weft_pg_split(world, R % 2, -R, &sub));
	WT_REQUIRE(sub != NULL);
	WT_CHECK(weft_pg_size(sub) == (P - R % 2 + 1) / 2);
	WT_CHECK(weft_pg_rank(sub) == weft_pg_size(sub) - 1 - R / 2);
	run_reductions(sub, 7);
	run_moves(sub, 7);
	weft_pg_destroy(sub);
	/* a color < 0 takes no part */
	WT_OK(weft_pg_split(world, R == 0 ? -1 : 0, 0, &sub));
	WT_CHECK((R == 0) == (sub == NULL));
	if (sub) {
		WT_CHECK(weft_pg_size(sub) == P - 1 && weft_pg_rank(sub) == R - 1);
		run_moves(sub, 3);
		weft_pg_destroy(sub);
	}
}

/* Collectives larger than a shared-memory slot (1 MiB a rank), so they run
 * in several pieces, the last one shorter (600001 f32: 3 pieces of an
 * all_reduce, 5 of a reduce_scatter at 2 ranks); f32 and bf16 (reduced
 * widened in scratch memory), every reduction. */
static void scenario_large(weft_pg *world)
{
	dtype_mask = 1u << WEFT_COMM_F32 | 1u << WEFT_COMM_BF16;
	run_reductions(world, 600001);
	dtype_mask = 1u << WEFT_COMM_F32;
	run_moves(world, 600001);
	dtype_mask = ~0u;
}

/* Rank 1 dies by SIGKILL in the middle of the third all_reduce's series. */
static void scenario_killed(weft_pg *world)
{
	float v[64];
	weft_comm_buf b = buf(v, 64, WEFT_COMM_F32);
	weft_status st = WEFT_OK;

	for (int k = 0; k < 4 && !st; k++) {
		if (k == 2 && R == 1)
			raise(SIGKILL);
		st = weft_pg_all_reduce(world, &b, &b, WEFT_COMM_SUM, NULL);
	}
	if (st) {
		fprintf(stderr, "weft: %s: %s\n", weft_status_str(st), weft_error_last());
		exit(3);
	}
}

/* The last rank calls all_gather where the others call all_reduce. */
static void scenario_mismatch(weft_pg *world)
{
	float v[8 * 8];
	weft_comm_buf s = buf(v, 8, WEFT_COMM_F32), r = buf(v, 8 * P, WEFT_COMM_F32);
	weft_status st;

	memset(v, 0, sizeof(v));
	WT_OK(weft_pg_barrier(world, NULL));
	if (R == P - 1)
		st = weft_pg_all_gather(world, &s, &r, NULL);
	else
		st = weft_pg_all_reduce(world, &s, &s, WEFT_COMM_SUM, NULL);
	if (st) {
		fprintf(stderr, "weft: %s: %s\n", weft_status_str(st), weft_error_last());
		exit(3);
	}
}

/* 2 x 2 mesh (dp, tp): groups and coordinates follow the documented
 * row-major layout. */
static void scenario_mesh(weft_pg *world)
{
	static const int dims[] = { 2, 2 };
	static const char *const names[] = { "dp", "tp" };
	weft_mesh *m;
	int32_t v, out[2];

	WT_OK(weft_mesh_create(world, 2, dims, names, &m));
	WT_CHECK(weft_mesh_coord(m, "dp") == R / 2 && weft_mesh_coord(m, "tp") == R % 2);
	/* tp groups hold consecutive ranks {0,1} {2,3}; dp groups {0,2} {1,3} */
	v = R;
	{
		weft_comm_buf s = buf(&v, 1, WEFT_COMM_I32), r = buf(out, 2, WEFT_COMM_I32);

		WT_OK(weft_pg_all_gather(weft_mesh_group(m, "tp"), &s, &r, NULL));
		WT_CHECK(out[0] == (R / 2) * 2 && out[1] == (R / 2) * 2 + 1);
		WT_OK(weft_pg_all_gather(weft_mesh_group(m, "dp"), &s, &r, NULL));
		WT_CHECK(out[0] == R % 2 && out[1] == R % 2 + 2);
	}
	WT_CHECK(weft_mesh_group(m, "pp") == NULL && weft_mesh_coord(m, "pp") == -1);
	weft_mesh_destroy(m);
	{
		static const int bad[] = { 3, 2 };
		WT_FAILS(weft_mesh_create(world, 2, bad, names, &m), WEFT_ERR_CONFIG,
			 "dp=3 x tp=2", "holds 6 ranks but the world has 4");
	}
}

int main(int argc, char **argv)
{
	weft_dist_env env;
	weft_store_client *store;
	weft_registry *reg;
	const void *vt;
	weft_pg *world;
	char path[4096];
	const char *tmo = getenv("WEFT_TEST_COMM_TIMEOUT_MS");
	int64_t timeout = tmo ? atoll(tmo) : 10000;
	/* the backend's `shm` option: WEFT_TEST_GLOO_SHM for every rank, or
	 * WEFT_TEST_GLOO_SHM_<rank> for one */
	char shm_var[64], opt_text[64];
	const char *shm;
	weft_config *opts = NULL;
	weft_status st;

	if (argc < 2) {
		fprintf(stderr, "usage: dist_worker collectives|large|killed|mismatch|mesh|init\n");
		return 2;
	}
	WT_OK(weft_dist_env_detect(&env));
	R = env.rank;
	P = env.world_size;
	weft_log_set_rank(R);
	WT_OK(weft_store_connect(env.store_host, env.store_port, env.secret, timeout, &store));
	WT_OK(weft_registry_create(&reg));
	snprintf(path, sizeof(path), "%s/comm_gloo.so", getenv("WEFT_PLUGIN_DIR"));
	WT_OK(weft_registry_add_file(reg, path));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_COMM, "gloo", &vt, NULL));
	snprintf(shm_var, sizeof(shm_var), "WEFT_TEST_GLOO_SHM_%d", R);
	shm = getenv(shm_var) ? getenv(shm_var) : getenv("WEFT_TEST_GLOO_SHM");
	if (shm) {
		snprintf(opt_text, sizeof(opt_text), "shm: %s\n", shm);
		WT_OK(weft_config_load_string("test-options", opt_text, strlen(opt_text), &opts));
	}
	st = weft_pg_create_opts(vt, store, R, P, "world", timeout, "127.0.0.1",
				 opts ? weft_config_root(opts) : NULL, &world);
	if (!strcmp(argv[1], "init")) {
		/* only meeting the others: a failure is reported, not a test failure */
		if (st)
			fprintf(stderr, "weft: %s: %s\n", weft_status_str(st), weft_error_last());
		else
			weft_pg_destroy(world);
		weft_config_free(opts);
		weft_registry_free(reg);
		weft_store_client_close(store);
		return st ? 3 : 0;
	}
	WT_OK(st);

	if (!strcmp(argv[1], "collectives"))
		scenario_collectives(world);
	else if (!strcmp(argv[1], "killed"))
		scenario_killed(world);
	else if (!strcmp(argv[1], "mismatch"))
		scenario_mismatch(world);
	else if (!strcmp(argv[1], "mesh"))
		scenario_mesh(world);
	else if (!strcmp(argv[1], "large"))
		scenario_large(world);
	else
		WT_REQUIRE(!"unknown scenario");

	weft_pg_destroy(world);
	weft_config_free(opts);
	weft_registry_free(reg);
	weft_store_client_close(store);
	return wt_done(argv[1]);
}
