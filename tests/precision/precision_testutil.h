/* Array comparisons shared by the precision tests. */
#ifndef WEFT_PRECISION_TESTUTIL_H
#define WEFT_PRECISION_TESTUTIL_H

#include <math.h>
#include <stdint.h>

/* max |x[i]| over n elements, in double. */
static inline double max_abs(const float *x, int64_t n)
{
	double m = 0;

	for (int64_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)x[i]));
	return m;
}

/* max |x[i] - y[i]| over n elements, in double. */
static inline double max_diff(const float *x, const float *y, int64_t n)
{
	double m = 0;

	for (int64_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)x[i] - (double)y[i]));
	return m;
}

#endif /* WEFT_PRECISION_TESTUTIL_H */
