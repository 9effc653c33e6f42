/* The strategy test harness (harness.h), its outside: result files,
 * comparisons, and the rank spawner (tests/common/spawn.c, shared with
 * tests/dist). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
