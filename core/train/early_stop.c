/* Early stopping's rule (train/early_stop.h). */
#include <math.h>

#include "train/early_stop.h"

double weft_early_stop_initial_best(const weft_early_stop_config *c)
{
	return c->mode_max ? -INFINITY : INFINITY;
}

int weft_early_stop_update(const weft_early_stop_config *c, double v, double *best,
			   int64_t *wait)
{
	int improved = c->mode_max ? v > *best + c->min_delta : v < *best - c->min_delta;

	if (improved) {
		*best = v;
		*wait = 0;
		return 0;
	}
	++*wait;
	return *wait >= c->patience;
}
