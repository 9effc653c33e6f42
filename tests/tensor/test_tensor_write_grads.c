/* The write forms of the CPU kernel table's backward kernels
 * (gelu_backward_write, attention_backward_write) against their
 * accumulating forms, and the autograd's choice between the two.
 *
 * Kernels: the write form, into a buffer of NaNs (any element it fails to
 * write stays NaN, any element it reads poisons its output), must equal
 * the accumulating form run into zeros; and the accumulating form into a
 * prefilled P must equal P + the write form. GELU: the same float
 * operations in the same order, so bit-identical (tolerance 0). Attention:
 * the same products, but the accumulating form adds P into each product's
 * sum before it rounds (and, where OpenBLAS does the products, in blocks
 * of 64 rows), so the two can differ by float32 roundings: 1e-5 relative
 * + 1e-6 absolute (a few roundings of sums of size ~1, ~1e-7 each, with
 * margin).
 *
 * Autograd: x feeds both gelu and a multiply; the multiply's backward runs
 * first (the tape runs backwards), so gelu must add to x's gradient, and
 * the result must be c1 * gelu'(x) + c2 computed here in double, within
 * 1e-6 + 1e-5 |want|: gelu' of the kernel's float tanh is off by up to
 * ~3e-7 absolute near x = -2.5, where 1 + tanh cancels (measured worst
 * 1.6e-7 over the excess of 1e-5 |want|).
 *
 * Autograd, handing over buffers: where an op's input gradient is its
 * output's (add's, reshape's) and nothing else will add to the output's
 * gradient, the first such input without a gradient takes the output's
 * buffer (its gradient's data is the same pointer) and the other input
 * gets a copy; not when the input is passed twice (x + x), nor when it
 * already has a gradient. The other input shares the buffer when its
 * producer's backward runs next and it has no other use (a residual
 * branch), and then contributions to the first input made after that
 * backward must not reach the branch's producer: it reads dz, not dz plus
 * them. An op recorded between the branch and the add rules sharing out
 * (and test_tensor_autograd's x x + x, where the branch's producer adds
 * to the owner's gradient, rules it out too).
 * The values are exact (copies and sums of small integers): tolerance 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_testutil.h"
#include "weft/device.h"

/* 1 when every |a - b| <= atol + rtol |b| (NaN fails), else 0 after
 * printing the first offending element. */
static int close_array(const char *what, const float *a, const float *b, int64_t n,
		       double rtol, double atol)
{
	for (int64_t i = 0; i < n; i++)
		if (!(fabs((double)a[i] - (double)b[i]) <= atol + rtol * fabs((double)b[i]))) {
			fprintf(stderr, "%s: element %lld: %.9g against %.9g (rtol %g, atol %g)\n",
				what, (long long)i, (double)a[i], (double)b[i], rtol, atol);
			return 0;
		}
	return 1;
}

static void fill_nan(float *p, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		p[i] = NAN;
}

static void check_gelu(const weft_kernel_table *k)
{
	enum { N = 70001 };
	static float x[N], dy[N], p[N], w[N], acc[N], zero_acc[N];

	for (int i = 0; i < N; i++) {
		x[i] = tu_uniform(-4, 4);
		dy[i] = tu_uniform(-1, 1);
		p[i] = tu_uniform(-1, 1);
	}
	fill_nan(w, N);
	memcpy(acc, p, sizeof(p));
	memset(zero_acc, 0, sizeof(zero_acc));
	WT_OK(k->gelu_backward_write(NULL, WEFT_F32, N, x, dy, w));
	WT_OK(k->gelu_backward(NULL, WEFT_F32, N, x, dy, acc));
	WT_OK(k->gelu_backward(NULL, WEFT_F32, N, x, dy, zero_acc));
	WT_CHECK(close_array("gelu write vs add into zeros", w, zero_acc, N, 0, 0));
	for (int i = 0; i < N; i++)
		zero_acc[i] = p[i] + w[i];
	WT_CHECK(close_array("gelu add into P vs P + write", acc, zero_acc, N, 0, 0));
}

static void check_attention(const weft_kernel_table *k, int64_t B, int64_t T, int64_t C,
			    int64_t nh)
{
	int64_t n_qkv = B * T * 3 * C, n_out = B * T * C;
	size_t scratch_bytes = k->attention_scratch(WEFT_F32, B, T, C, nh);
	float *qkv = malloc((size_t)n_qkv * sizeof(float)), *out = malloc((size_t)n_out * 4);
	float *att = malloc((size_t)(B * nh * T * T) * sizeof(float));
	float *dout = malloc((size_t)n_out * sizeof(float)), *w = malloc((size_t)n_qkv * 4);
	float *acc = malloc((size_t)n_qkv * 4), *zacc = malloc((size_t)n_qkv * 4);
	float *p = malloc((size_t)n_qkv * 4), *want = malloc((size_t)n_qkv * 4);
	void *scratch = scratch_bytes ? malloc(scratch_bytes) : NULL;

	WT_REQUIRE(qkv && out && att && dout && w && acc && zacc && p && want &&
		   (scratch || !scratch_bytes));
	for (int64_t i = 0; i < n_qkv; i++) {
		qkv[i] = tu_uniform(-1, 1);
		p[i] = tu_uniform(-1, 1);
	}
	for (int64_t i = 0; i < n_out; i++)
		dout[i] = tu_uniform(-1, 1);
	WT_OK(k->attention_forward(NULL, WEFT_F32, B, T, C, nh, qkv, out, att, scratch));
	fill_nan(w, n_qkv);
	memcpy(acc, p, (size_t)n_qkv * sizeof(float));
	memset(zacc, 0, (size_t)n_qkv * sizeof(float));
	WT_OK(k->attention_backward_write(NULL, WEFT_F32, B, T, C, nh, qkv, att, dout, w,
					  scratch));
	WT_OK(k->attention_backward(NULL, WEFT_F32, B, T, C, nh, qkv, att, dout, acc, scratch));
	WT_OK(k->attention_backward(NULL, WEFT_F32, B, T, C, nh, qkv, att, dout, zacc, scratch));
	WT_CHECK(close_array("attention write vs add into zeros", w, zacc, n_qkv, 1e-5, 1e-6));
	for (int64_t i = 0; i < n_qkv; i++)
		want[i] = p[i] + w[i];
	WT_CHECK(close_array("attention add into P vs P + write", acc, want, n_qkv, 1e-5, 1e-6));
	free(qkv);
	free(out);
	free(att);
	free(dout);
	free(w);
	free(acc);
	free(zacc);
	free(p);
	free(want);
	free(scratch);
}

static double gelu_grad_ref(double v)
{
	const double s = 0.7978845608028654, c = 0.044715;
	double t = tanh(s * (v + c * v * v * v));

	return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * s * (1.0 + 3.0 * c * v * v);
}

static void check_autograd_accumulates(void)
{
	int64_t shape[1] = { 4099 };
	weft_tensor *x = tu_rand("x", 1, shape, -3, 3, 0);
	weft_tensor *c1 = tu_rand("c1", 1, shape, -1, 1, 0);
	weft_tensor *c2 = tu_rand("c2", 1, shape, -1, 1, 0);
	weft_tensor *ones = tu_rand("ones", 1, shape, 1, 1, 0);
	weft_tensor *g, *a, *b, *y;
	weft_ctx *ctx;
	const float *gx, *xv, *c1v, *c2v;
	double worst = -1;

	weft_tensor_requires_grad(x, 1);
	WT_OK(weft_ctx_create(NULL, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_gelu(ctx, x, &g));
	WT_OK(weft_op_mul(ctx, g, c1, &a));
	WT_OK(weft_op_mul(ctx, x, c2, &b));
	WT_OK(weft_op_add(ctx, a, b, &y));
	WT_OK(weft_backward_from(ctx, y, ones));
	WT_REQUIRE(x->grad);
	gx = x->grad->data;
	xv = x->data;
	c1v = c1->data;
	c2v = c2->data;
	for (int64_t i = 0; i < shape[0]; i++) {
		double t1 = c1v[i] * gelu_grad_ref(xv[i]), want = t1 + c2v[i];
		double err = fabs(gx[i] - want) - 1e-5 * fabs(want);

		worst = err > worst ? err : worst;
	}
	fprintf(stderr, "gelu after another writer: worst |error| - 1e-5 |want|: %.2e\n", worst);
	WT_CHECK(worst <= 1e-6);
	weft_ctx_free(ctx);
	weft_tensor_free(x);
	weft_tensor_free(c1);
	weft_tensor_free(c2);
	weft_tensor_free(ones);
}

/* u = x c and v = q c (v recorded last when branch_next), z = x + v,
 * w = z d + u: the add's backward hands dz (= d = 3) to x, and shares it
 * with v when v's producer runs next (dq = c dz = 6); u's backward then
 * adds c to x's gradient (5), which must not reach dq. With an op recorded
 * between the branch and the add, v gets a copy. */
static void check_branch(weft_ctx *ctx, int branch_next, weft_tensor *x, weft_tensor *q,
			 weft_tensor *c, weft_tensor *d, weft_tensor *ones)
{
	weft_tensor *u, *v, *z, *s, *w;
	int64_t wrong = 0;

	weft_ctx_step_begin(ctx);
	if (branch_next) {
		WT_OK(weft_op_mul(ctx, x, c, &u));
		WT_OK(weft_op_mul(ctx, q, c, &v));
	} else {
		WT_OK(weft_op_mul(ctx, q, c, &v));
		WT_OK(weft_op_mul(ctx, x, c, &u));
	}
	WT_OK(weft_op_add(ctx, x, v, &z));
	WT_OK(weft_op_mul(ctx, z, d, &s));
	WT_OK(weft_op_add(ctx, s, u, &w));
	WT_OK(weft_backward_from(ctx, w, ones));
	for (int64_t i = 0; i < weft_tensor_numel(x); i++)
		wrong += ((float *)x->grad->data)[i] != 5.0f || ((float *)q->grad->data)[i] != 6.0f;
	WT_CHECK(wrong == 0);
	WT_CHECK((v->grad->data == x->grad->data) == branch_next); /* shared, or a copy */
}

/* z = x + y, used by two products: x takes z's gradient buffer once both
 * products are back-propagated, y a copy; r = reshape(q) hands q r's;
 * x + x and an input with a gradient already do not take it. */
static void check_handover(void)
{
	int64_t shape[1] = { 1000 }, shape2[2] = { 10, 100 };
	weft_tensor *x = tu_rand("x", 1, shape, -1, 1, 0), *y = tu_rand("y", 1, shape, -1, 1, 0);
	weft_tensor *q = tu_rand("q", 1, shape, -1, 1, 0), *c = tu_rand("c", 1, shape, 2, 2, 0);
	weft_tensor *d = tu_rand("d", 1, shape, 3, 3, 0), *ones = tu_rand("1", 1, shape, 1, 1, 0);
	weft_tensor *z, *u, *v, *s, *r, *r2, *w, *xx, *t;
	weft_ctx *ctx;
	int64_t wrong = 0;

	weft_tensor_requires_grad(x, 1);
	weft_tensor_requires_grad(y, 1);
	weft_tensor_requires_grad(q, 1);
	WT_OK(weft_ctx_create(NULL, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_add(ctx, x, y, &z));
	WT_OK(weft_op_mul(ctx, z, c, &u));
	WT_OK(weft_op_mul(ctx, z, d, &v));
	WT_OK(weft_op_add(ctx, u, v, &s)); /* ds/dx = ds/dy = c + d = 5 */
	WT_OK(weft_op_reshape(ctx, q, 2, shape2, &r));
	WT_OK(weft_op_reshape(ctx, r, 1, shape, &r2));
	WT_OK(weft_op_add(ctx, s, r2, &w)); /* dw/dq = 1 */
	WT_OK(weft_backward_from(ctx, w, ones));
	WT_REQUIRE(x->grad && y->grad && q->grad && z->grad && r->grad);
	for (int64_t i = 0; i < shape[0]; i++)
		wrong += ((float *)x->grad->data)[i] != 5.0f || ((float *)y->grad->data)[i] != 5.0f ||
			 ((float *)q->grad->data)[i] != 1.0f;
	WT_CHECK(wrong == 0);
	WT_CHECK(x->grad->data == z->grad->data); /* handed over */
	WT_CHECK(y->grad->data != z->grad->data); /* a copy */
	WT_CHECK(q->grad->data == r->grad->data);

	/* x + x: one buffer cannot be both terms; x already has a gradient */
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_add(ctx, x, x, &xx));
	WT_OK(weft_op_mul(ctx, x, c, &u));
	WT_OK(weft_op_add(ctx, y, u, &t)); /* y, first, takes t's */
	WT_OK(weft_op_add(ctx, xx, t, &w)); /* dw/dx = 2 + c = 4 */
	WT_OK(weft_backward_from(ctx, w, ones));
	wrong = 0;
	for (int64_t i = 0; i < shape[0]; i++)
		wrong += ((float *)x->grad->data)[i] != 4.0f || ((float *)y->grad->data)[i] != 1.0f;
	WT_CHECK(wrong == 0);
	WT_CHECK(x->grad->data != xx->grad->data);
	WT_CHECK(y->grad->data == t->grad->data);

	check_branch(ctx, 1, x, q, c, d, ones);
	check_branch(ctx, 0, x, q, c, d, ones);
	weft_ctx_free(ctx);
	weft_tensor_free(x);
	weft_tensor_free(y);
	weft_tensor_free(q);
	weft_tensor_free(c);
	weft_tensor_free(d);
	weft_tensor_free(ones);
}

int main(void)
{
	const weft_kernel_table *k;

	WT_OK(weft_kernels_get(WEFT_CPU, &k));
	WT_REQUIRE(WEFT_HAS_MEMBER(k, weft_kernel_table, attention_backward_write));
	WT_REQUIRE(k->gelu_backward_write && k->attention_backward_write);
	check_gelu(k);
	check_attention(k, 2, 150, 64, 4); /* T not a multiple of the 64-row tile */
	check_attention(k, 1, 64, 32, 2);  /* one tile */
	check_attention(k, 1, 1, 32, 2);
	check_autograd_accumulates();
	check_handover();
	return wt_done("test_tensor_write_grads");
}
