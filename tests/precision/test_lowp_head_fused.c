/* The fused classifier (ABI 1.7: cross_entropy_lowp_fused, which writes the
 * loss's gradient over the logits in the forward's pass for an expected
 * upstream gradient, and cross_entropy_lowp_regrad, the backward's
 * correction) in weft_op_linear_cross_entropy, on the CPU's reference
 * kernels with 16-bit activations forced on, BF16 and F16 autocast, a
 * vocabulary of 100 (logits rows padded to 128), rows 3 and 8 ignored.
 *
 * Each run is the head over a 16-bit hidden state h = linear(x, P), once
 * through the CPU table (the fused path: the test counts its calls) and
 * once through the same table without the two ABI 1.7 members (today's
 * forward, then cross_entropy_lowp_backward in the backward):
 * - the upstream gradient the context expects (ctx->loss_grad_hint, as
 *   the trainer sets it) is the real one: weft_backward with the hint 1,
 *   and a loss scaled by 1024 with the hint 1024 (16-mixed's way): the
 *   loss and every gradient (dP, dx, dW) have the same bits on both paths;
 * - it is not (weft_backward_from with 3.7 under the hint 1; the hint
 *   1024 with an unscaled loss): the correction rescales each gradient
 *   element of a counted row once more, so each is within (2u + u^2 +
 *   2^-21) of the exact value where the two-pass one is within u + 2^-22
 *   (u = 2^-8 BF16, 2^-11 F16; kernels.h, cross_entropy_lowp_regrad);
 *   their difference is at most e |g|, e = 3u + 4u^2 + 2^-20, plus F16's
 *   subnormal spacing 2^-24 (1 + dloss / hint) for the elements the hint
 *   made subnormal. Through the products: dW_ij = sum_r dz_rj h_ri, with
 *   sum_r |dz_rj| <= dloss (each counted row's |softmax - onehot| <= 1,
 *   scaled by dloss / count), so |dW - dW_ref| <= max|h| (e dloss + rows
 *   2^-24 (1 + dloss / hint)), with 1e-6 max|h| dloss for the F32 sums;
 *   dx = dh P with dh = dz W in 16 bits (sum_j |dz_rj| <= 2 dloss /
 *   count): |dh - dh_ref| <= max|W| (1 + u) (e 2 dloss / count + V 2^-24
 *   (1 + dloss / hint)) plus the two roundings of dh itself (2u max|W| (1
 *   + u) 2 dloss / count), times C max|P| for dx. Without the correction
 *   the gradients are off by the factor dloss / hint (3.7 or 1/1024): far
 *   outside;
 * - evaluation (grad off) runs the forward alone: no fused call, the same
 *   loss. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor_impl.h" /* ctx->loss_grad_hint, as the trainer sets it */
#include "weft/autograd.h"
#include "weft/half.h"
#include "weft/kernels.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"

enum { ROWS = 12, C = 16, V = 100, IGNORE = -100, COUNTED = ROWS - 2 };

static const weft_kernel_table *cpu;
static weft_kernel_table fusing, two_pass;
static int n_fused, n_backward;

static weft_status count_fused(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
			       int64_t ld, void *logits, weft_dtype idx_dt, const void *targets,
			       int64_t ignore_index, float hint, float *lse, float *loss,
			       float *count)
{
	n_fused++;
	return cpu->cross_entropy_lowp_fused(kctx, dt, rows, vocab, ld, logits, idx_dt, targets,
					     ignore_index, hint, lse, loss, count);
}

static weft_status count_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				  int64_t ld, const void *logits, weft_dtype idx_dt,
				  const void *targets, int64_t ignore_index, const float *lse,
				  const float *dloss, const float *count, void *dlogits)
{
	n_backward++;
	return cpu->cross_entropy_lowp_backward(kctx, dt, rows, vocab, ld, logits, idx_dt, targets,
						ignore_index, lse, dloss, count, dlogits);
}

typedef struct run_out {
	float loss, dp[C * C], dx[ROWS * C], dw[V * C];
	double max_h; /* of the 16-bit hidden state */
} run_out;

/* One step of the head on `table`: the context expects `hint`; the loss is
 * scaled by `scale` (1: not) and back-propagated from 1, or, seed not 0,
 * from `seed` (weft_backward_from). grad 0: evaluation, no backward. */
static void run(const weft_kernel_table *table, weft_dtype dt, float hint, float scale,
		float seed, int grad, run_out *o)
{
	int64_t xs[2] = { ROWS, C }, ps[2] = { C, C }, ws[2] = { V, C }, ts[1] = { ROWS };
	weft_tensor *x, *p, *w, *tg, *h, *loss, *top, *g;
	uint32_t s = 7;
	weft_ctx *ctx;

	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, table));
	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, dt));
	WT_OK(weft_ctx_set_lowp_activations(ctx, WEFT_LOWP_ACT_ON));
	weft_ctx_set_grad_enabled(ctx, grad);
	ctx->loss_grad_hint = hint;
	WT_OK(weft_tensor_alloc("x", WEFT_F32, 2, xs, WEFT_CPU, WEFT_MEM_OTHER, &x));
	WT_OK(weft_tensor_alloc("p", WEFT_F32, 2, ps, WEFT_CPU, WEFT_MEM_OTHER, &p));
	WT_OK(weft_tensor_alloc("w", WEFT_F32, 2, ws, WEFT_CPU, WEFT_MEM_OTHER, &w));
	WT_OK(weft_tensor_alloc("g", WEFT_F32, 0, NULL, WEFT_CPU, WEFT_MEM_OTHER, &g));
	*(float *)g->data = seed;
	for (int64_t i = 0; i < ROWS * C; i++) { /* a fixed spread in [-2, 2) */
		s = s * 1664525u + 1013904223u;
		((float *)x->data)[i] = (float)((s >> 8) & 0xffff) / 16384.0f - 2.0f;
	}
	for (int64_t i = 0; i < C * C; i++)
		((float *)p->data)[i] = (float)((i * 37) % 29) / 29.0f - 0.5f;
	for (int64_t i = 0; i < V * C; i++)
		((float *)w->data)[i] = (float)((i * 53) % 41) / 20.5f - 1.0f;
	weft_tensor_requires_grad(x, 1);
	weft_tensor_requires_grad(p, 1);
	weft_tensor_requires_grad(w, 1);
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 1, ts, &tg));
	for (int64_t r = 0; r < ROWS; r++) /* the last rows' targets next to the padding */
		((int64_t *)tg->data)[r] = r == 3 || r == 8 ? IGNORE : (V - 1 - r * 7) % V;
	WT_OK(weft_op_linear(ctx, x, p, NULL, &h));
	WT_REQUIRE(h->dtype == (int32_t)dt);
	o->max_h = 0;
	for (int64_t i = 0; i < ROWS * C; i++)
		o->max_h = fmax(o->max_h, fabs(weft_half_load(dt, h->data, i)));
	WT_OK(weft_op_linear_cross_entropy(ctx, h, w, tg, IGNORE, &loss));
	o->loss = *(const float *)loss->data;
	if (grad) {
		top = loss;
		if (scale != 1.0f)
			WT_OK(weft_op_scale(ctx, loss, scale, &top));
		if (seed != 0.0f)
			WT_OK(weft_backward_from(ctx, top, g));
		else
			WT_OK(weft_backward(ctx, top));
		WT_REQUIRE(x->grad && p->grad && w->grad);
		memcpy(o->dp, p->grad->data, sizeof(o->dp));
		memcpy(o->dx, x->grad->data, sizeof(o->dx));
		memcpy(o->dw, w->grad->data, sizeof(o->dw));
	}
	weft_ctx_free(ctx);
	weft_tensor_free(x);
	weft_tensor_free(p);
	weft_tensor_free(w);
	weft_tensor_free(g);
}

/* The upstream gradient is the hint: the two paths give the same bits. */
static void test_same_bits(weft_dtype dt, float hint)
{
	static run_out f, t;
	int fused_calls;

	n_fused = n_backward = 0;
	run(&fusing, dt, hint, hint, 0.0f, 1, &f);
	fused_calls = n_fused;
	WT_CHECK(fused_calls == 1 && n_backward == 0);
	run(&two_pass, dt, hint, hint, 0.0f, 1, &t);
	WT_CHECK(n_fused == fused_calls && n_backward == 1);
	WT_CHECK(isfinite(f.loss) && f.loss > 0);
	WT_CHECK(memcmp(&f.loss, &t.loss, sizeof(f.loss)) == 0);
	WT_CHECK(memcmp(f.dp, t.dp, sizeof(f.dp)) == 0);
	WT_CHECK(memcmp(f.dx, t.dx, sizeof(f.dx)) == 0);
	WT_CHECK(memcmp(f.dw, t.dw, sizeof(f.dw)) == 0);
	fprintf(stderr, "%s, hint %g = dloss: loss %.9g, dP dx dW the same bits as two passes\n",
		dt == WEFT_BF16 ? "bf16" : "f16", (double)hint, (double)f.loss);
}

/* max over n of |a - b| - tol (<= 0 when every element is within tol). */
static double worst(const float *a, const float *b, int64_t n, double tol, double *diff)
{
	double w = -INFINITY;

	*diff = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);

		WT_CHECK(isfinite(a[i]));
		*diff = fmax(*diff, d);
		w = fmax(w, d - tol);
	}
	return w;
}

/* The upstream gradient is dloss, not the hint: corrected within the
 * bound of the header comment. */
static void test_mismatch(weft_dtype dt, float hint, float dloss)
{
	static run_out f, t;
	double u = dt == WEFT_BF16 ? 0x1p-8 : 0x1p-11, sub = 0x1p-24 * (1.0 + dloss / hint);
	double e = 3 * u + 4 * u * u + 0x1p-20;
	double mw = 1.0, mp = 0.5, dw_tol, dh_tol, dx_tol, ddw, ddx; /* max|W|, max|P| */
	/* dloss reaches the loss as the seed (hint 1) or as an unscaled
	 * backward from 1 (hint 1024) */
	float seed = hint == 1.0f ? dloss : 0.0f;

	n_fused = 0;
	run(&fusing, dt, hint, 1.0f, seed, 1, &f);
	WT_CHECK(n_fused == 1);
	run(&two_pass, dt, hint, 1.0f, seed, 1, &t);
	WT_CHECK(memcmp(&f.loss, &t.loss, sizeof(f.loss)) == 0);
	dw_tol = f.max_h * (e * dloss + ROWS * sub + 1e-6 * dloss);
	dh_tol = mw * (1 + u) * (e * 2 * dloss / COUNTED + V * sub) +
		 2 * u * mw * (1 + u) * 2 * dloss / COUNTED;
	dx_tol = C * mp * dh_tol + 1e-6 * dloss;
	WT_CHECK(worst(f.dw, t.dw, V * C, dw_tol, &ddw) <= 0);
	WT_CHECK(worst(f.dx, t.dx, ROWS * C, dx_tol, &ddx) <= 0);
	fprintf(stderr, "%s, hint %g, dloss %g: max |dW - two-pass| %.3g (bound %.3g), max |dx "
		"- two-pass| %.3g (bound %.3g)\n", dt == WEFT_BF16 ? "bf16" : "f16",
		(double)hint, (double)dloss, ddw, dw_tol, ddx, dx_tol);
}

/* Evaluation: the forward alone, the same loss. */
static void test_eval(weft_dtype dt)
{
	static run_out f, t;

	n_fused = 0;
	run(&fusing, dt, 1.0f, 1.0f, 0.0f, 0, &f);
	WT_CHECK(n_fused == 0);
	run(&fusing, dt, 1.0f, 1.0f, 0.0f, 1, &t);
	WT_CHECK(n_fused == 1);
	WT_CHECK(memcmp(&f.loss, &t.loss, sizeof(f.loss)) == 0);
}

int main(void)
{
	static const weft_dtype dts[] = { WEFT_BF16, WEFT_F16 };

	WT_OK(weft_kernels_get(WEFT_CPU, &cpu));
	WT_REQUIRE(WEFT_HAS_MEMBER(cpu, weft_kernel_table, cross_entropy_lowp_regrad) &&
		   cpu->cross_entropy_lowp_fused && cpu->cross_entropy_lowp_regrad);
	fusing = *cpu;
	fusing.cross_entropy_lowp_fused = count_fused;
	fusing.cross_entropy_lowp_backward = count_backward;
	two_pass = fusing;
	two_pass.cross_entropy_lowp_fused = NULL;
	two_pass.cross_entropy_lowp_regrad = NULL;
	for (int i = 0; i < 2; i++) {
		test_same_bits(dts[i], 1.0f);
		test_same_bits(dts[i], 1024.0f);
		test_mismatch(dts[i], 1.0f, 3.7f);
		test_mismatch(dts[i], 1024.0f, 1.0f);
		test_eval(dts[i]);
	}
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
	return wt_done("test_lowp_head_fused");
}
