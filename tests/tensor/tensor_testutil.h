/* Helpers shared by the tensor tests: deterministic random fills and a
 * central finite-difference gradient checker. */
#ifndef WEFT_TENSOR_TESTUTIL_H
#define WEFT_TENSOR_TESTUTIL_H

#include <math.h>
#include <stdint.h>

#include "weft/autograd.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"

static uint64_t tu_rng = 0x1234567u;

/* Uniform in [lo, hi) from a fixed-seed generator (reproducible runs). */
static inline float tu_uniform(float lo, float hi)
{
	tu_rng = tu_rng * 6364136223846793005ull + 1442695040888963407ull;
	return lo + (hi - lo) * (float)((tu_rng >> 40) * (1.0 / 16777216.0));
}

/* A heap F32 tensor filled uniformly in [lo, hi); values with |v| < gap are
 * pushed out to +-gap (keeps ReLU inputs away from the kink). */
static inline weft_tensor *tu_rand(const char *name, int32_t ndim, const int64_t *shape, float lo,
				   float hi, float gap)
{
	weft_tensor *t;
	float *d;

	WT_OK(weft_tensor_alloc(name, WEFT_F32, ndim, shape, WEFT_CPU, WEFT_MEM_OTHER, &t));
	d = t->data;
	for (int64_t i = 0; i < weft_tensor_numel(t); i++) {
		d[i] = tu_uniform(lo, hi);
		if (fabsf(d[i]) < gap)
			d[i] = d[i] < 0 ? -gap : gap;
	}
	return t;
}

/* A forward under test: inputs in, one output out. */
typedef weft_status (*tu_forward)(weft_ctx *ctx, weft_tensor **in, weft_tensor **out);

/* sum(out * r) in double. */
static inline double tu_dot(const weft_tensor *out, const float *r)
{
	const float *o = out->data;
	double s = 0.0;

	for (int64_t i = 0; i < weft_tensor_numel(out); i++)
		s += (double)o[i] * (double)r[i];
	return s;
}

/*
 * Checks d/dx sum(f(x) * R) from backward against central differences
 * (f(x + eps) - f(x - eps)) / 2 eps for every F32 input that requires a
 * gradient, at up to max_checks elements per input (evenly spread).
 * Why these numbers: in float32 the rounding error of f is about
 * 6e-8 * |f| * sqrt(n); divided by 2 eps = 2e-3 that is ~1e-4 for the
 * |f| ~ 1..10 these small cases produce, and the truncation error eps^2 *
 * f''' / 6 is ~1e-7; so atol 1e-3 with rtol 1e-2 leaves a 10x margin yet
 * catches any wrong term (a missing factor or sign is off by O(1)).
 * Returns the number of mismatches.
 */
static inline int tu_gradcheck(const char *name, weft_ctx *ctx, tu_forward fwd, weft_tensor **in,
			       int n_in, int max_checks)
{
	const double eps = 1e-3, rtol = 1e-2, atol = 1e-3;
	weft_tensor *out, *rt;
	float *r, *grads[8] = { 0 };
	double gnorm = 0.0;
	int bad = 0;

	weft_ctx_step_begin(ctx);
	WT_OK(fwd(ctx, in, &out));
	r = malloc(weft_tensor_nbytes(out) + 4);
	WT_REQUIRE(r);
	for (int64_t i = 0; i < weft_tensor_numel(out); i++)
		r[i] = tu_uniform(-1.0f, 1.0f);
	if (weft_tensor_numel(out) == 1)
		r[0] = 1.0f;
	WT_OK(weft_ctx_tensor(ctx, "R", WEFT_F32, out->ndim, out->shape, &rt));
	memcpy(rt->data, r, weft_tensor_nbytes(out));
	for (int k = 0; k < n_in; k++)
		if (in[k] && in[k]->grad && !(in[k]->flags & WEFT_TENSOR_GRAD_IN_ARENA))
			WT_OK(weft_tensor_zero(in[k]->grad)); /* owned grads accumulate */
	WT_OK(weft_backward_from(ctx, out, rt));
	/* keep the analytic gradients: the next step_begin frees arena ones */
	for (int k = 0; k < n_in; k++) {
		if (!in[k] || !(in[k]->flags & WEFT_TENSOR_REQUIRES_GRAD))
			continue;
		WT_REQUIRE(in[k]->grad);
		grads[k] = malloc(weft_tensor_nbytes(in[k]) + 4);
		memcpy(grads[k], in[k]->grad->data, weft_tensor_nbytes(in[k]));
	}
	int prev = weft_ctx_set_grad_enabled(ctx, 0);

	for (int k = 0; k < n_in; k++) {
		float *x;
		int64_t n, stride;

		if (!grads[k])
			continue;
		x = in[k]->data;
		n = weft_tensor_numel(in[k]);
		stride = n > max_checks ? n / max_checks : 1;
		for (int64_t e = 0; e < n; e += stride) {
			float keep = x[e];
			double fp, fm, num, ana = grads[k][e];

			x[e] = keep + (float)eps;
			weft_ctx_step_begin(ctx);
			WT_OK(fwd(ctx, in, &out));
			fp = tu_dot(out, r);
			x[e] = keep - (float)eps;
			weft_ctx_step_begin(ctx);
			WT_OK(fwd(ctx, in, &out));
			fm = tu_dot(out, r);
			x[e] = keep;
			/* divide by the perturbation float actually applied */
			num = (fp - fm) / ((double)(keep + (float)eps) - (double)(keep - (float)eps));
			gnorm += ana * ana;
			wt_checks++;
			if (!(fabs(ana - num) <= atol + rtol * fabs(num))) {
				if (bad < 5)
					fprintf(stderr, "%s: input %d element %lld: backward %.6g, "
						"finite difference %.6g\n", name, k, (long long)e,
						ana, num);
				bad++;
				wt_failures++;
			}
		}
		free(grads[k]);
	}
	weft_ctx_set_grad_enabled(ctx, prev);
	free(r);
	/* a gradient that is all zeros would pass trivially against a broken
	 * forward that ignores its input: demand a signal */
	WT_CHECK(gnorm > 1e-6);
	if (bad)
		fprintf(stderr, "%s: %d gradient mismatches\n", name, bad);
	return bad;
}

#endif /* WEFT_TENSOR_TESTUTIL_H */
