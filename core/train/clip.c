/* Gradient clipping by global L2 norm. */
#include <math.h>
#include "train/clip.h"

double weft_clip_sum_squares(const float *const *arrays, const int64_t *lens, size_t n)
{
	double total = 0.0;

	for (size_t a = 0; a < n; a++) {
		const float *x = arrays[a];
		/* four accumulators: shorter dependency chains, and vectorisable */
		double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
		int64_t i = 0;

		for (; i + 4 <= lens[a]; i += 4) {
			s0 += (double)x[i] * (double)x[i];
			s1 += (double)x[i + 1] * (double)x[i + 1];
			s2 += (double)x[i + 2] * (double)x[i + 2];
			s3 += (double)x[i + 3] * (double)x[i + 3];
		}
		for (; i < lens[a]; i++)
			s0 += (double)x[i] * (double)x[i];
		total += (s0 + s1) + (s2 + s3);
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
