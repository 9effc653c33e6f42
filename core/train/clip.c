/* Gradient clipping by global L2 norm. */
#include <math.h>
#include "train/clip.h"
#include "weft/device.h"

/* Each array's sum by the CPU kernel table's sum_squares_ranges: four
 * accumulators, chunks on the kernels' threads from 128 Ki floats on,
 * added in an order set by the length alone, so the sum is the same at any
 * number of threads, and clipping agrees bit for bit with the strategies'
 * device services on the CPU. */
double weft_clip_sum_squares(const float *const *arrays, const int64_t *lens, size_t n)
{
	const weft_kernel_table *k = NULL;
	double total = 0.0;

	if (weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CPU }, &k) || !k)
		return NAN; /* the CPU table is built in: never */
	for (size_t a = 0; a < n; a++) {
		weft_elem_range r = { .offset = 0, .count = lens[a] };
		double s = 0.0;

		if (k->sum_squares_ranges(NULL, arrays[a], &r, 1, &s))
			return NAN;
		total += s;
	}
	return total;
}

double weft_clip_coef(double sumsq, double max_norm, double *norm_out)
{
	double norm = sqrt(sumsq);
	double coef;

	if (norm_out)
		*norm_out = norm;
	if (!isfinite(norm))
		return 1.0;
	coef = max_norm / (norm + WEFT_CLIP_EPS);
	return coef < 1.0 ? coef : 1.0;
}

void weft_clip_scale(float *const *arrays, const int64_t *lens, size_t n, double coef)
{
	const float c = (float)coef;

	for (size_t a = 0; a < n; a++) {
		float *x = arrays[a];

		for (int64_t i = 0; i < lens[a]; i++)
			x[i] = x[i] * c;
	}
}

weft_status weft_clip_grad_norm(float *const *arrays, const int64_t *lens, size_t n,
				double max_norm, double *norm_out)
{
	double coef;

	if (!isfinite(max_norm) || max_norm <= 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "gradient clipping: max_norm must be a finite number > 0, got %g",
				      max_norm);
	for (size_t a = 0; a < n; a++) {
		if (lens[a] < 0 || (lens[a] > 0 && !arrays[a]))
			return weft_error_set(WEFT_ERR_INVALID_ARG,
					      "gradient clipping: array %zu of %zu is NULL or has "
					      "negative length %lld",
					      a, n, (long long)lens[a]);
	}
	coef = weft_clip_coef(weft_clip_sum_squares((const float *const *)arrays, lens, n),
			      max_norm, norm_out);
	if (coef < 1.0)
		weft_clip_scale(arrays, lens, n, coef);
	return WEFT_OK;
}
