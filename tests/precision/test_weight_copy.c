/* The 16-bit weight copy (weft_params_copy_enable, weft_ctx_use_params_copy,
 * weft_params_copy_refresh; since ABI 1.7) on the CPU's reference kernels,
 * bf16 autocast.
 *
 * A parameter set of three F32 tensors: a linear layer's weight (16 x 16),
 * a vector of 7 (so the next tensor starts at an odd element of the flat
 * buffer, and of the copy) and a classifier head (40 x 16). One forward
 * and backward: y = linear(x, W), then the fused head and its loss over
 * (y, H) with 16-bit activations; or, with F32 activations, the autocast
 * linear layer and the unfused head.
 *
 * - The numbers do not change: a context that reads the copy gives the
 *   loss and the gradients of x, W and H bit for bit as one that rounds
 *   each weight in its forward (both round the same F32 values to bf16 the
 *   same way, once), with 16-bit activations and with F32 ones.
 * - The products read the copy: with it no product rounds W or H (the
 *   kernel table's convert is never called on a weight's element count,
 *   counted by a wrapping table), without it each is rounded once.
 * - The copy is what they read, so it must be refreshed: after W's F32
 *   values change, a context reading the unrefreshed copy still gives the
 *   old loss bit for bit (and not the new one), and after
 *   weft_params_copy_refresh the new one bit for bit.
 * - Memory: the copy is 2 bytes per F32 parameter under WEFT_MEM_PARAMS.
 * - The errors a caller can hit: before finalize, a set without F32
 *   parameters, a non-16-bit dtype, a second dtype, a context told to read
 *   a set without a copy, a refresh without one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/kernels.h"
#include "weft/memory.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"

enum { ROWS = 6, C = 16, V = 40, ODD = 7, IGNORE = -100 };

static const weft_kernel_table *cpu;
static weft_kernel_table counting;
static int n_weight_rounds; /* converts of F32 to 16 bits of a weight's size */

static weft_status count_convert(void *kctx, int64_t n, weft_dtype src_dt, const void *src,
				 weft_dtype dst_dt, void *dst)
{
	if (src_dt == WEFT_F32 && dst_dt != WEFT_F32 && (n == C * C || n == V * C))
		n_weight_rounds++;
	return cpu->convert(kctx, n, src_dt, src, dst_dt, dst);
}

static float val(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void fill(float *p, int64_t n, uint32_t seed, float scale)
{
	for (int64_t i = 0; i < n; i++)
		p[i] = scale * val(&seed);
}

typedef struct model {
	weft_params *ps;
	weft_tensor *w, *odd, *h;
} model;

static void model_make(model *m)
{
	int64_t ws[2] = { C, C }, os[1] = { ODD }, hs[2] = { V, C };

	WT_OK(weft_params_create(WEFT_CPU, &m->ps));
	WT_OK(weft_params_add(m->ps, "w.weight", WEFT_F32, 2, ws, &m->w));
	WT_OK(weft_params_add(m->ps, "odd.bias", WEFT_F32, 1, os, &m->odd));
	WT_OK(weft_params_add(m->ps, "head.weight", WEFT_F32, 2, hs, &m->h));
	WT_OK(weft_params_finalize(m->ps, 1));
	fill(m->w->data, C * C, 1, 1.0f);
	fill(m->odd->data, ODD, 2, 1.0f);
	fill(m->h->data, V * C, 3, 2.0f);
}

typedef struct result {
	float loss;
	float dx[ROWS * C], dw[C * C], dh[V * C];
} result;

/* One step on a new context: lowp 16-bit activations or F32 ones; copy:
 * the context reads m's copy. */
static void step(model *m, int lowp, int copy, result *r)
{
	int64_t xs[2] = { ROWS, C }, ts[1] = { ROWS };
	weft_tensor *x, *tg, *y, *z, *loss;
	weft_ctx *ctx;

	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_BF16));
	WT_OK(weft_ctx_set_lowp_activations(ctx, lowp ? WEFT_LOWP_ACT_ON : WEFT_LOWP_ACT_OFF));
	if (copy)
		WT_OK(weft_ctx_use_params_copy(ctx, m->ps));
	WT_OK(weft_params_zero_grad(m->ps));
	WT_OK(weft_tensor_alloc("x", WEFT_F32, 2, xs, WEFT_CPU, WEFT_MEM_OTHER, &x));
	fill(x->data, ROWS * C, 4, 2.0f);
	weft_tensor_requires_grad(x, 1);
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 1, ts, &tg));
	for (int64_t i = 0; i < ROWS; i++)
		((int64_t *)tg->data)[i] = i == 2 ? IGNORE : (i * 13 + 5) % V;
	WT_OK(weft_op_linear(ctx, x, m->w, NULL, &y));
	WT_REQUIRE(y->dtype == (lowp ? WEFT_BF16 : WEFT_F32));
	if (lowp) {
		WT_OK(weft_op_linear_cross_entropy(ctx, y, m->h, tg, IGNORE, &loss));
	} else {
		WT_OK(weft_op_linear(ctx, y, m->h, NULL, &z));
		WT_OK(weft_op_cross_entropy(ctx, z, tg, IGNORE, &loss));
	}
	r->loss = *(const float *)loss->data;
	WT_OK(weft_backward(ctx, loss));
	WT_REQUIRE(x->grad && m->w->grad && m->h->grad);
	memcpy(r->dx, x->grad->data, sizeof(r->dx));
	memcpy(r->dw, m->w->grad->data, sizeof(r->dw));
	memcpy(r->dh, m->h->grad->data, sizeof(r->dh));
	weft_ctx_free(ctx);
	weft_tensor_free(x);
}

static int same(const result *a, const result *b)
{
	return !memcmp(&a->loss, &b->loss, sizeof(a->loss)) && !memcmp(a->dx, b->dx, sizeof(a->dx)) &&
	       !memcmp(a->dw, b->dw, sizeof(a->dw)) && !memcmp(a->dh, b->dh, sizeof(a->dh));
}

/* With and without the copy: the same bits; the copy's run rounds no
 * weight, the other rounds each once (W and H). */
static void test_same_bits(int lowp)
{
	static result with, without;
	model m;
	weft_mem_stats s0, s1;
	int rounds;

	model_make(&m);
	weft_mem_get_stats(&s0);
	WT_OK(weft_params_copy_enable(m.ps, WEFT_BF16));
	weft_mem_get_stats(&s1);
	/* 2 bytes per F32 parameter, counted as parameters */
	WT_CHECK(s1.current[WEFT_MEM_PARAMS] - s0.current[WEFT_MEM_PARAMS] ==
		 2 * weft_params_numel(m.ps, WEFT_F32));
	WT_CHECK(weft_params_copy(m.ps) && weft_params_copy(m.ps)->dtype == WEFT_BF16 &&
		 weft_tensor_numel(weft_params_copy(m.ps)) == C * C + ODD + V * C);
	WT_OK(weft_params_copy_enable(m.ps, WEFT_BF16)); /* again: nothing */
	{
		weft_ctx *ctx;

		WT_OK(weft_ctx_create(NULL, &ctx));
		WT_OK(weft_params_copy_refresh(m.ps, ctx));
		weft_ctx_free(ctx);
	}
	n_weight_rounds = 0;
	step(&m, lowp, 0, &without);
	rounds = n_weight_rounds;
	n_weight_rounds = 0;
	step(&m, lowp, 1, &with);
	fprintf(stderr, "%s activations: weights rounded %d times without the copy, %d with it\n",
		lowp ? "16-bit" : "F32", rounds, n_weight_rounds);
	WT_CHECK(rounds == 2 && n_weight_rounds == 0);
	WT_CHECK(isfinite(with.loss) && with.loss > 0);
	WT_CHECK(same(&with, &without));
	weft_params_free(m.ps);
}

/* The copy is read: stale until refreshed. */
static void test_refresh(void)
{
	static result before, stale, fresh, rounded;
	weft_ctx *ctx;
	model m;

	model_make(&m);
	WT_OK(weft_params_copy_enable(m.ps, WEFT_BF16));
	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_OK(weft_params_copy_refresh(m.ps, ctx));
	step(&m, 1, 1, &before);
	for (int64_t i = 0; i < C * C; i++) /* an update of W, large against a bf16 ulp */
		((float *)m.w->data)[i] += 0.25f;
	step(&m, 1, 1, &stale);
	step(&m, 1, 0, &rounded);
	WT_CHECK(stale.loss == before.loss);
	WT_CHECK(rounded.loss != before.loss);
	WT_OK(weft_params_copy_refresh(m.ps, ctx));
	step(&m, 1, 1, &fresh);
	WT_CHECK(same(&fresh, &rounded));
	fprintf(stderr, "refresh: loss %.6f before the update, %.6f stale, %.6f refreshed\n",
		(double)before.loss, (double)stale.loss, (double)fresh.loss);
	weft_ctx_free(ctx);
	weft_params_free(m.ps);
}

static void test_errors(void)
{
	int64_t ws[2] = { C, C };
	weft_params *ps;
	weft_tensor *w;
	weft_ctx *ctx;

	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_OK(weft_params_create(WEFT_CPU, &ps));
	WT_OK(weft_params_add(ps, "w", WEFT_F32, 2, ws, &w));
	WT_FAILS(weft_params_copy_enable(ps, WEFT_BF16), WEFT_ERR_INVALID_ARG, "not been finalized",
		 "weft_params_finalize first");
	WT_OK(weft_params_finalize(ps, 0));
	WT_CHECK(weft_params_copy(ps) == NULL);
	WT_FAILS(weft_ctx_use_params_copy(ctx, ps), WEFT_ERR_INVALID_ARG, "keeps no 16-bit copy",
		 "weft_params_copy_enable first");
	WT_FAILS(weft_params_copy_refresh(ps, ctx), WEFT_ERR_INVALID_ARG, "keeps no 16-bit copy");
	WT_FAILS(weft_params_copy_enable(ps, WEFT_F32), WEFT_ERR_DTYPE, "F32 copy",
		 "BF16 or F16");
	WT_OK(weft_params_copy_enable(ps, WEFT_F16));
	WT_FAILS(weft_params_copy_enable(ps, WEFT_BF16), WEFT_ERR_DTYPE, "already keeps",
		 "one copy per set");
	WT_OK(weft_ctx_use_params_copy(ctx, ps));
	WT_OK(weft_ctx_use_params_copy(ctx, NULL)); /* back to rounding */
	weft_params_free(ps);
	/* no F32 master weights to copy */
	WT_OK(weft_params_create(WEFT_CPU, &ps));
	WT_OK(weft_params_add(ps, "w16", WEFT_BF16, 2, ws, &w));
	WT_OK(weft_params_finalize(ps, 0));
	WT_FAILS(weft_params_copy_enable(ps, WEFT_BF16), WEFT_ERR_INVALID_ARG,
		 "has no F32 parameters", "F32 master weights");
	weft_params_free(ps);
	weft_ctx_free(ctx);
}

int main(void)
{
	WT_OK(weft_kernels_get(WEFT_CPU, &cpu));
	counting = *cpu;
	counting.convert = count_convert;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &counting));
	test_same_bits(1);
	test_same_bits(0);
	test_refresh();
	test_errors();
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
	return wt_done("test_weight_copy");
}
