/* The classifier head and its loss in one op (weft_op_linear_cross_entropy)
 * on the CPU's reference kernels with 16-bit activations forced on
 * (weft_ctx_set_lowp_activations ON, bf16 autocast).
 *
 * Against the unfused path on the same inputs (the 16-bit linear layer,
 * then the loss over its 16-bit logits): the loss and the gradients of
 * everything upstream of the head (the hidden state's producer P, its
 * input x) and of the head's weight W agree within one bf16 rounding of
 * each tensor's largest element (2^-8 of max |ref|). Both paths run the
 * same products on the same 16-bit operands in the same order; only the
 * logits' row stride differs (V rounded up to 128 in the fused op), which
 * the CPU kernels do not see in their arithmetic, so the measured
 * difference is 0 (printed); a lost term, a wrong stride or a read of the
 * padding is off by order 1 of the gradient.
 *
 * Cases: V a multiple of 128 (ld = V) and not (ld > V); a tied head (W is
 * also the embedding the hidden state comes from, so W's gradient sums the
 * head's and the lookup's) and an untied one; rows whose target is the
 * ignore_index. The padding columns are filled with NaN before the loss
 * kernels could read them (a kernel table whose forward product poisons
 * them): a read would make the loss or a gradient NaN.
 *
 * Also: off the gate the op is the linear layer then the loss (bit for
 * bit). (A target outside the vocabulary: test_lowp_act's gate test.) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/kernels.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"

enum { ROWS = 12, C = 16, IGNORE = -100 };

static const weft_kernel_table *cpu;
static weft_kernel_table poisoning;
static int n_padded_products;

/* The CPU's 16-bit product; a product that writes rows of n columns with a
 * longer stride (the fused head's logits) then fills columns n..ldc-1 with
 * NaN, so a kernel that reads the padding gives NaN. */
static weft_status poison_gemm_ex(void *kctx, weft_dtype in_dt, int ta, int tb, int64_t m,
				  int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
				  const void *b, int64_t ldb, float beta, weft_dtype c_dt, void *c,
				  int64_t ldc, const float *bias, int32_t epi, void *aux)
{
	weft_status st = cpu->gemm_lowp_ex(kctx, in_dt, ta, tb, m, n, k, alpha, a, lda, b, ldb,
					   beta, c_dt, c, ldc, bias, epi, aux);

	if (st || ldc == n || c_dt != WEFT_BF16)
		return st;
	n_padded_products++;
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = n; j < ldc; j++)
			((uint16_t *)c)[i * ldc + j] = 0x7fc0; /* bf16 quiet NaN */
	return st;
}

static float val(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void fill(weft_tensor *t, uint32_t seed, float scale)
{
	for (int64_t i = 0; i < weft_tensor_numel(t); i++)
		((float *)t->data)[i] = scale * val(&seed);
}

typedef struct run_out {
	double loss;
	float dp[C * C], dx[ROWS * C], *dw; /* dw: V x C */
} run_out;

/* One forward and backward: h = linear(x or embedding(ids, W), P) (16-bit
 * under the gate), loss of h @ W^T against the targets, fused or not. */
static void run(int64_t V, int tied, int fused, int lowp, run_out *o)
{
	int64_t xs[2] = { ROWS, C }, ps[2] = { C, C }, ws[2] = { V, C }, ts[1] = { ROWS };
	weft_tensor *x, *p, *w, *ids, *tg, *in, *h, *z, *loss;
	weft_ctx *ctx;

	WT_OK(weft_ctx_create(NULL, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_BF16));
	WT_OK(weft_ctx_set_lowp_activations(ctx, lowp ? WEFT_LOWP_ACT_ON : WEFT_LOWP_ACT_OFF));
	WT_OK(weft_tensor_alloc("x", WEFT_F32, 2, xs, WEFT_CPU, WEFT_MEM_OTHER, &x));
	WT_OK(weft_tensor_alloc("p", WEFT_F32, 2, ps, WEFT_CPU, WEFT_MEM_OTHER, &p));
	WT_OK(weft_tensor_alloc("w", WEFT_F32, 2, ws, WEFT_CPU, WEFT_MEM_OTHER, &w));
	fill(x, 1, 2.0f);
	fill(p, 2, 1.0f);
	fill(w, 3, 2.0f);
	weft_tensor_requires_grad(x, 1);
	weft_tensor_requires_grad(p, 1);
	weft_tensor_requires_grad(w, 1);
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I64, 1, ts, &ids));
	WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 1, ts, &tg));
	for (int64_t r = 0; r < ROWS; r++) {
		((int64_t *)ids->data)[r] = (r * 5 + 1) % V;
		/* rows 3 and 8 ignored; the others spread over the vocabulary,
		 * the last ones in its top columns (next to the padding) */
		((int64_t *)tg->data)[r] = r == 3 || r == 8 ? IGNORE : (V - 1 - r * 7) % V;
	}
	in = x;
	if (tied)
		WT_OK(weft_op_embedding(ctx, ids, w, &in));
	WT_OK(weft_op_linear(ctx, in, p, NULL, &h));
	WT_CHECK(h->dtype == (lowp ? WEFT_BF16 : WEFT_F32));
	if (fused) {
		WT_OK(weft_op_linear_cross_entropy(ctx, h, w, tg, IGNORE, &loss));
	} else {
		WT_OK(weft_op_linear(ctx, h, w, NULL, &z));
		WT_OK(weft_op_cross_entropy(ctx, z, tg, IGNORE, &loss));
	}
	WT_REQUIRE(loss->dtype == WEFT_F32 && weft_tensor_numel(loss) == 1);
	o->loss = *(const float *)loss->data;
	WT_OK(weft_backward(ctx, loss));
	WT_REQUIRE(p->grad && w->grad && (tied || x->grad));
	memcpy(o->dp, p->grad->data, sizeof(o->dp));
	if (!tied)
		memcpy(o->dx, x->grad->data, sizeof(o->dx));
	memcpy(o->dw, w->grad->data, (size_t)(V * C) * sizeof(float));
	weft_ctx_free(ctx);
	weft_tensor_free(x);
	weft_tensor_free(p);
	weft_tensor_free(w);
}

/* max |a - b| over n, against one bf16 rounding of max |b|; prints both. */
static void check_close(const char *what, const float *a, const float *b, int64_t n)
{
	double d = 0, m = 0;

	for (int64_t i = 0; i < n; i++) {
		WT_CHECK(isfinite(a[i]));
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	WT_CHECK(m > 0);
	WT_CHECK(d <= m / 256.0);
	fprintf(stderr, "  %-4s max |fused - unfused| %.3g (max |unfused| %.3g)\n", what, d, m);
}

static void test_against_unfused(int64_t V, int tied)
{
	static float dw_f[256 * C], dw_u[256 * C];
	run_out f = { .dw = dw_f }, u = { .dw = dw_u };

	WT_REQUIRE(V <= 256);
	fprintf(stderr, "V %lld, %s head:\n", (long long)V, tied ? "tied" : "untied");
	n_padded_products = 0;
	run(V, tied, 1, 1, &f);
	/* the logits' rows are padded exactly when V is not a multiple of 128 */
	WT_CHECK(n_padded_products == (V % 128 ? 1 : 0));
	run(V, tied, 0, 1, &u);
	WT_CHECK(isfinite(f.loss) && f.loss > 0);
	WT_CHECK(fabs(f.loss - u.loss) <= fabs(u.loss) / 256.0);
	fprintf(stderr, "  loss fused %.9g, unfused %.9g\n", f.loss, u.loss);
	check_close("dP", f.dp, u.dp, C * C);
	if (!tied)
		check_close("dx", f.dx, u.dx, ROWS * C);
	check_close("dW", f.dw, u.dw, V * C);
}

/* Off the gate the op is linear then cross_entropy, the same bits. */
static void test_off_gate(void)
{
	static float dw_f[100 * C], dw_u[100 * C];
	run_out f = { .dw = dw_f }, u = { .dw = dw_u };

	run(100, 0, 1, 0, &f);
	run(100, 0, 0, 0, &u);
	WT_CHECK(f.loss == u.loss);
	WT_CHECK(!memcmp(f.dp, u.dp, sizeof(f.dp)) && !memcmp(f.dx, u.dx, sizeof(f.dx)));
	WT_CHECK(!memcmp(dw_f, dw_u, sizeof(dw_f)));
}

int main(void)
{
	WT_OK(weft_kernels_get(WEFT_CPU, &cpu));
	poisoning = *cpu;
	poisoning.gemm_lowp_ex = poison_gemm_ex;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &poisoning));
	test_against_unfused(128, 0);
	test_against_unfused(128, 1);
	test_against_unfused(100, 0);
	test_against_unfused(100, 1);
	test_against_unfused(200, 1);
	test_off_gate();
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
	return wt_done("test_lowp_head");
}
