/* Gradient clipping by global L2 norm. */
#include <math.h>
#include "train/clip.h"
#include "weft/device.h"

/* Arrays from CLIP_SPLIT floats on are summed in chunks on the CPU threads
 * (weft_cpu_parallel_for): chunks of CLIP_CHUNK floats, or more for arrays
 * of more than CLIP_MAX_CHUNKS of them, then the chunks' sums in order. The
 * chunks depend on the length alone, so the sum is the same at any number
 * of threads. */
#define CLIP_CHUNK ((int64_t)4096)
#define CLIP_MAX_CHUNKS 1024
#define CLIP_SPLIT (32 * CLIP_CHUNK)

static double sum_squares(const float *x, int64_t len)
{
	/* four accumulators: shorter dependency chains, and vectorisable */
	double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
	int64_t i = 0;

	for (; i + 4 <= len; i += 4) {
		s0 += (double)x[i] * (double)x[i];
		s1 += (double)x[i + 1] * (double)x[i + 1];
		s2 += (double)x[i + 2] * (double)x[i + 2];
		s3 += (double)x[i + 3] * (double)x[i + 3];
	}
	for (; i < len; i++)
		s0 += (double)x[i] * (double)x[i];
	return (s0 + s1) + (s2 + s3);
}

typedef struct sq_job {
	const float *x;
	int64_t len, chunk;
	double *part;
} sq_job;

static void sq_chunks(void *arg, int64_t c0, int64_t c1)
{
	const sq_job *j = arg;

	for (int64_t c = c0; c < c1; c++) {
		int64_t lo = c * j->chunk, n = j->len - lo < j->chunk ? j->len - lo : j->chunk;

		j->part[c] = sum_squares(j->x + lo, n);
	}
}

double weft_clip_sum_squares(const float *const *arrays, const int64_t *lens, size_t n)
{
	double total = 0.0, part[CLIP_MAX_CHUNKS];

	for (size_t a = 0; a < n; a++) {
		sq_job j = { .x = arrays[a], .len = lens[a], .chunk = CLIP_CHUNK, .part = part };
		int64_t chunks;

		if (j.len < CLIP_SPLIT) {
			total += sum_squares(j.x, j.len);
			continue;
		}
		if (j.len > CLIP_CHUNK * CLIP_MAX_CHUNKS)
			j.chunk = (j.len + CLIP_MAX_CHUNKS - 1) / CLIP_MAX_CHUNKS;
		chunks = (j.len + j.chunk - 1) / j.chunk;
		weft_cpu_parallel_for(chunks, 1, sq_chunks, &j);
		for (int64_t c = 0; c < chunks; c++)
			total += part[c];
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
