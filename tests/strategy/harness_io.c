/* The strategy test harness (harness.h), its outside: result files,
 * comparisons, and the rank spawner (tests/common/spawn.c, shared with
 * tests/dist). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- results ------------------------------------------------------------ */

void h_result_free(h_result *r)
{
	free(r->weights);
	r->weights = NULL;
}

int h_result_write(const h_result *r, const char *path)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(r, sizeof(*r), 1, f) == 1 &&
	     fwrite(r->weights, sizeof(float), (size_t)r->numel, f) == (size_t)r->numel;
	return (fclose(f) == 0 && ok) ? 0 : -1;
}

int h_result_read(h_result *r, const char *path)
{
	FILE *f = fopen(path, "rb");
	int ok;

	if (!f)
		return -1;
	ok = fread(r, sizeof(*r), 1, f) == 1;
	r->weights = ok ? malloc((size_t)r->numel * sizeof(float) + 1) : NULL;
	ok = ok && r->weights &&
	     fread(r->weights, sizeof(float), (size_t)r->numel, f) == (size_t)r->numel;
	fclose(f);
	if (!ok) {
		free(r->weights);
		r->weights = NULL;
	}
	return ok ? 0 : -1;
}

/* ---- spawning ranks: common/spawn.h ---------------------------------- */

_Static_assert(H_MAX_RANKS <= WT_SPAWN_MAX, "h_spawn runs at most WT_SPAWN_MAX ranks");

int h_spawn(int n, char *const argv[], double deadline_s, h_spawn_result *res)
{
	return wt_spawn(n, argv, deadline_s, res);
}

int h_spawn_ok(const h_spawn_result *res, int r)
{
	return wt_spawn_exited(res, r, 0);
}

double h_max_rel(const float *a, const float *b, int64_t n, double floor, int64_t *where)
{
	double worst = 0.0;

	*where = -1;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]) / (fabs((double)b[i]) + floor);

		if (!(d <= worst)) {
			worst = d;
			*where = i;
		}
	}
	return worst;
}

double h_rel_l2(const float *a, const float *b, int64_t n)
{
	double num = 0.0, den = 0.0;

	for (int64_t i = 0; i < n; i++) {
		double d = (double)a[i] - (double)b[i];

		num += d * d;
		den += (double)b[i] * (double)b[i];
	}
	return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* ---- a job of ranks against one process ------------------------------- */

int h_rank_write(const h_config *c, const char *prefix)
{
	h_result r;
	char path[512];
	weft_status st = h_run(c, &r);

	if (st) {
		fprintf(stderr, "rank failed: %s: %s\n", weft_status_str(st), weft_error_last());
		return 3;
	}
	snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, r.rank);
	if (h_result_write(&r, path)) {
		fprintf(stderr, "cannot write %s\n", path);
		h_result_free(&r);
		return 1;
	}
	h_result_free(&r);
	return 0;
}

int h_run_ranks(const char *self, int n, char *const args[], double deadline_s, h_result *got)
{
	h_spawn_result sp;
	char *argv[16], path[512];
	int k = 0, ok = 1, read = 0;
	const char *prefix = NULL;

	argv[k++] = (char *)self;
	argv[k++] = "rank";
	for (int i = 0; args[i] && k < 15; i++)
		prefix = argv[k++] = args[i];
	argv[k] = NULL;
	if (!prefix || h_spawn(n, argv, deadline_s, &sp) != 0) {
		fprintf(stderr, "h_run_ranks: cannot start %d ranks of %s\n", n, self);
		return 0;
	}
	if (sp.hung)
		fprintf(stderr, "h_run_ranks: the job of %d ranks of %s hung past %.0f s and was "
			"killed\n", n, self, deadline_s);
	for (int r = 0; r < n; r++) {
		ok &= h_spawn_ok(&sp, r);
		snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, r);
		if (ok && h_result_read(&got[r], path) != 0) {
			fprintf(stderr, "h_run_ranks: cannot read rank %d's result %s\n", r, path);
			ok = 0;
		}
		read += ok;
		unlink(path);
	}
	if (!ok || sp.hung) {
		for (int r = 0; r < read; r++)
			h_result_free(&got[r]);
		return 0;
	}
	return 1;
}

double h_weight_error(const float *w, const float *ref, int64_t n, int sgd, double floor,
		      double tol, const char *who)
{
	int64_t where = -1;
	double e = sgd ? h_max_rel(w, ref, n, floor, &where) : h_rel_l2(w, ref, n);

	if (!(e <= tol))
		fprintf(stderr, "%s: weights off by %.3g (%s, element %lld)\n", who, e,
			sgd ? "max rel" : "rel L2", (long long)where);
	return e;
}
