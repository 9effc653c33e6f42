/* Gradient clipping by global L2 norm against torch.nn.utils.clip_grad_norm_
 * (tests/fixtures/optim/clip.txt: a case that clips, one that does not, one
 * that clips hard), and the properties strategies rely on: per-shard sums
 * of squares add up to the whole; a non-finite norm leaves gradients alone.
 *
 * Tolerance 1e-6 relative: PyTorch accumulates the norm in float32 (error
 * about 1e-7 relative for these 72 values), weft in double; the clipped
 * values are one float multiply by a coefficient that differs by as much.
 */
#include <math.h>
#include "train/clip.h"
#include "weft/device.h"
#include "optim_test.h"

#define NT 4

static void fixtures(void)
{
	char path[4096], *line = NULL, id[32];
	size_t cap = 0;
	int cases = 0;
	FILE *f;
	float *grad[NT] = { 0 }, *want[NT] = { 0 };
	int64_t lens[NT] = { 0 };
	double max_norm = 0, want_norm = 0;
	int ng = 0, nw = 0;

	ot_fixture_path(path, sizeof(path), "clip.txt");
	f = fopen(path, "r");
	WT_REQUIRE(f != NULL);
	for (;;) {
		ssize_t got = getline(&line, &cap, f);

		if ((got <= 0 || !strncmp(line, "clip ", 5)) && nw == NT) {
			double norm;

			WT_OK(weft_clip_grad_norm(grad, lens, NT, max_norm, &norm));
			WT_CLOSE(norm, want_norm, 1e-6, 0);
			for (int t = 0; t < NT; t++)
				for (int64_t i = 0; i < lens[t]; i++)
					WT_CLOSE(grad[t][i], want[t][i], 1e-6, 1e-12);
			for (int t = 0; t < NT; t++) {
				free(grad[t]);
				free(want[t]);
			}
			ng = nw = 0;
			cases++;
		}
		if (got <= 0)
			break;
		if (!strncmp(line, "clip ", 5)) {
			WT_REQUIRE(sscanf(line + 5, "%31s %lf %lf", id, &max_norm, &want_norm) == 3);
		} else if (!strncmp(line, "grad ", 5) || !strncmp(line, "clipped ", 8)) {
			int is_grad = line[0] == 'g';
			char *p = strchr(line, ' ') + 1, *q = p;
			int64_t n = 0;

			while (strtof(q, &p), p != q) {
				q = p;
				n++;
			}
			WT_REQUIRE((is_grad ? ng : nw) < NT);
			if (is_grad) {
				lens[ng] = n;
				grad[ng++] = ot_floats(strchr(line, ' ') + 1, n);
			} else {
				WT_REQUIRE(lens[nw] == n);
				want[nw++] = ot_floats(strchr(line, ' ') + 1, n);
			}
		}
	}
	free(line);
	fclose(f);
	WT_CHECK(cases == 3);
}

static void properties(void)
{
	float a[1001], b[37];
	float *arrays[2] = { a, b };
	int64_t lens[2] = { 1001, 37 };
	double whole, parts, norm, coef;

	for (int i = 0; i < 1001; i++)
		a[i] = (float)((i % 17) - 8) * 0.125f;
	for (int i = 0; i < 37; i++)
		b[i] = (float)i * 0.01f;

	/* shards of the same arrays: partial sums add to the whole, within
	 * double rounding (1e-12 relative is ~4000 ulps of double) */
	whole = weft_clip_sum_squares((const float *const *)arrays, lens, 2);
	{
		const float *p1[1] = { a }, *p2[2] = { a + 300, b };
		int64_t l1[1] = { 300 }, l2[2] = { 701, 37 };

		parts = weft_clip_sum_squares(p1, l1, 1) + weft_clip_sum_squares(p2, l2, 2);
	}
	WT_CLOSE(parts, whole, 1e-12, 0);

	/* coefficient: max_norm / (norm + 1e-6) below 1, else 1 */
	coef = weft_clip_coef(25.0, 1.0, &norm);
	WT_CLOSE(norm, 5.0, 1e-15, 0);
	WT_CLOSE(coef, 1.0 / (5.0 + 1e-6), 1e-15, 0);
	WT_CHECK(weft_clip_coef(25.0, 10.0, NULL) == 1.0);

	/* an inf gradient: norm inf, coefficient 1, nothing scaled */
	a[5] = INFINITY;
	{
		float a0[1001], b0[37];

		memcpy(a0, a, sizeof(a));
		memcpy(b0, b, sizeof(b));
		WT_OK(weft_clip_grad_norm(arrays, lens, 2, 1.0, &norm));
		WT_CHECK(isinf(norm));
		WT_CHECK(!memcmp(a0, a, sizeof(a)) && !memcmp(b0, b, sizeof(b)));
	}

	WT_FAILS(weft_clip_grad_norm(arrays, lens, 2, 0.0, &norm), WEFT_ERR_INVALID_ARG,
		 "max_norm must be a finite number > 0, got 0");
	lens[1] = -2;
	WT_FAILS(weft_clip_grad_norm(arrays, lens, 2, 1.0, &norm), WEFT_ERR_INVALID_ARG,
		 "array 1 of 2", "negative length -2");
}

/* Long arrays are summed in chunks on the CPU threads: the same sum, bit
 * for bit, at 1 and at 3 threads, for an array of a few chunks (uneven
 * last chunk) and one past 1024 chunks of 4096 (larger chunks); and
 * within 1e-12 of a long double reference. */
static void threads(void)
{
	enum { N1 = 300001, N2 = 5000003 };
	float *a = malloc(N1 * sizeof(float)), *b = malloc(N2 * sizeof(float));
	const float *arrays[2] = { a, b };
	int64_t lens[2] = { N1, N2 };
	long double ref = 0.0L;
	double s1, s3;

	WT_REQUIRE(a && b);
	for (int i = 0; i < N1; i++)
		a[i] = (float)(((int64_t)i * 7919) % 2001 - 1000) * 1e-3f;
	for (int i = 0; i < N2; i++)
		b[i] = (float)(((int64_t)i * 104729) % 4001 - 2000) * 1e-4f;
	for (int i = 0; i < N1; i++)
		ref += (long double)a[i] * a[i];
	for (int i = 0; i < N2; i++)
		ref += (long double)b[i] * b[i];
	weft_cpu_set_threads(1);
	s1 = weft_clip_sum_squares(arrays, lens, 2);
	weft_cpu_set_threads(3);
	s3 = weft_clip_sum_squares(arrays, lens, 2);
	weft_cpu_set_threads(1);
	WT_CHECK(s1 == s3);
	WT_CLOSE(s1, (double)ref, 1e-12, 0);
	free(a);
	free(b);
}

int main(void)
{
	fixtures();
	properties();
	threads();
	return wt_done("test_optim_clip");
}
