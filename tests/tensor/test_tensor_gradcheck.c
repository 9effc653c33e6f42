/* Every op's backward against central finite differences (tolerances and
 * their reasons: tu_gradcheck in tensor_testutil.h). */
#include "tensor_testutil.h"

static int64_t g_heads = 2;

static weft_status f_matmul(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_matmul(c, in[0], in[1], out);
}

static weft_status f_linear(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_linear(c, in[0], in[1], in[2], out);
}

static weft_status f_add(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_add(c, in[0], in[1], out);
}

static weft_status f_mul(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_mul(c, in[0], in[1], out);
}

static weft_status f_scale(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_scale(c, in[0], -2.5f, out);
}

static weft_status f_bias(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_bias(c, in[0], in[1], out);
}

static weft_status f_relu(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_relu(c, in[0], out);
}

static weft_status f_gelu(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_gelu(c, in[0], out);
}

static weft_status f_gelu_erf(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_gelu_erf(c, in[0], out);
}

static weft_status f_softmax(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_softmax(c, in[0], out);
}

static weft_status f_layernorm(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_layernorm(c, in[0], in[1], in[2], 1e-5f, out);
}

static weft_status f_embedding(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_embedding(c, in[1], in[0], out);
}

static weft_status f_attention(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_attention(c, in[0], g_heads, out);
}

static weft_status f_cross_entropy(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_cross_entropy(c, in[0], in[1], -100, out);
}

static weft_status f_reshape(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	const int64_t shape[2] = { 3, 8 };
	weft_tensor *r;
	weft_status st = weft_op_reshape(c, in[0], 2, shape, &r);

	/* through another op so the view's gradient must flow back */
	return st ? st : weft_op_scale(c, r, 3.0f, out);
}

/* A small MLP with a loss: layernorm -> linear -> gelu -> linear -> CE,
 * the input used twice (residual add): gradients through a whole tape. */
static weft_status f_chain(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	weft_tensor *h, *a, *g, *r, *logits;
	weft_status st;

	if ((st = weft_op_layernorm(c, in[0], in[1], NULL, 1e-5f, &h)) ||
	    (st = weft_op_linear(c, h, in[2], NULL, &a)) ||
	    (st = weft_op_gelu(c, a, &g)) ||
	    (st = weft_op_add(c, g, in[0], &r)) ||
	    (st = weft_op_linear(c, r, in[3], NULL, &logits)))
		return st;
	return weft_op_cross_entropy(c, logits, in[4], -1, out);
}

/* One tensor passed twice to one op, and one tensor reaching ops that
 * write a fresh gradient (linear, scale, add copy it or use GEMMs with beta
 * 0) and ops that add to it: x + x, a @ a, then linear(x) + 2 x + x @ w. */
static weft_status f_twice(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	weft_tensor *s, *m, *l, *k, *t;
	weft_status st;

	if ((st = weft_op_add(c, in[0], in[0], &s)) || (st = weft_op_matmul(c, s, s, &m)) ||
	    (st = weft_op_linear(c, m, in[1], NULL, &l)) || (st = weft_op_scale(c, m, 2.0f, &k)) ||
	    (st = weft_op_add(c, l, k, &t)) || (st = weft_op_matmul(c, m, in[1], &l)))
		return st;
	return weft_op_add(c, t, l, out);
}

static void leaf(weft_tensor *t)
{
	weft_tensor_requires_grad(t, 1);
}

static weft_tensor *ids_tensor(weft_dtype dt, int32_t ndim, const int64_t *shape,
			       const int64_t *vals)
{
	weft_tensor *t;

	WT_OK(weft_tensor_alloc("ids", dt, ndim, shape, WEFT_CPU, WEFT_MEM_OTHER, &t));
	for (int64_t i = 0; i < weft_tensor_numel(t); i++) {
		if (dt == WEFT_I64)
			((int64_t *)t->data)[i] = vals[i];
		else
			((int32_t *)t->data)[i] = (int32_t)vals[i];
	}
	return t;
}

static void check(const char *name, weft_ctx *ctx, tu_forward f, weft_tensor **in, int n,
		  int max_checks)
{
	for (int i = 0; i < n; i++)
		if (in[i] && in[i]->dtype == WEFT_F32)
			leaf(in[i]);
	tu_gradcheck(name, ctx, f, in, n, max_checks);
	for (int i = 0; i < n; i++)
		weft_tensor_free(in[i]);
}

int main(void)
{
	weft_ctx *ctx;
	weft_ctx_options opt = { .seed = 1 };

	WT_OK(weft_ctx_create(&opt, &ctx));
	{ /* matmul, b shared (2-D) */
		int64_t sa[3] = { 2, 3, 4 }, sb[2] = { 4, 5 };
		weft_tensor *in[2] = { tu_rand("a", 3, sa, -1, 1, 0), tu_rand("b", 2, sb, -1, 1, 0) };
		check("matmul shared", ctx, f_matmul, in, 2, 1000);
	}
	{ /* matmul, batched b */
		int64_t sa[3] = { 2, 3, 4 }, sb[3] = { 2, 4, 5 };
		weft_tensor *in[2] = { tu_rand("a", 3, sa, -1, 1, 0), tu_rand("b", 3, sb, -1, 1, 0) };
		check("matmul batched", ctx, f_matmul, in, 2, 1000);
	}
	{ /* linear with bias */
		int64_t sx[3] = { 2, 3, 4 }, sw[2] = { 5, 4 }, sb[1] = { 5 };
		weft_tensor *in[3] = { tu_rand("x", 3, sx, -1, 1, 0), tu_rand("w", 2, sw, -1, 1, 0),
				       tu_rand("b", 1, sb, -1, 1, 0) };
		check("linear", ctx, f_linear, in, 3, 1000);
	}
	{ /* linear without bias */
		int64_t sx[2] = { 3, 4 }, sw[2] = { 2, 4 };
		weft_tensor *in[3] = { tu_rand("x", 2, sx, -1, 1, 0), tu_rand("w", 2, sw, -1, 1, 0),
				       NULL };
		check("linear nobias", ctx, f_linear, in, 3, 1000);
	}
	{ /* add, same shape and broadcast */
		int64_t sa[3] = { 2, 3, 4 }, sb[2] = { 3, 4 };
		weft_tensor *in[2] = { tu_rand("a", 3, sa, -1, 1, 0), tu_rand("b", 3, sa, -1, 1, 0) };
		check("add", ctx, f_add, in, 2, 1000);
		weft_tensor *in2[2] = { tu_rand("a", 3, sa, -1, 1, 0), tu_rand("b", 2, sb, -1, 1, 0) };
		check("add broadcast", ctx, f_add, in2, 2, 1000);
	}
	{ /* mul, broadcast */
		int64_t sa[2] = { 3, 4 }, sb[1] = { 4 };
		weft_tensor *in[2] = { tu_rand("a", 2, sa, -1, 1, 0), tu_rand("b", 1, sb, -1, 1, 0) };
		check("mul broadcast", ctx, f_mul, in, 2, 1000);
		weft_tensor *in2[2] = { tu_rand("a", 2, sa, -1, 1, 0), tu_rand("b", 2, sa, -1, 1, 0) };
		check("mul", ctx, f_mul, in2, 2, 1000);
	}
	{
		int64_t s[2] = { 3, 4 }, sb[1] = { 4 };
		weft_tensor *in[1] = { tu_rand("x", 2, s, -1, 1, 0) };
		check("scale", ctx, f_scale, in, 1, 1000);
		weft_tensor *in2[2] = { tu_rand("x", 2, s, -1, 1, 0), tu_rand("b", 1, sb, -1, 1, 0) };
		check("bias", ctx, f_bias, in2, 2, 1000);
		/* |x| >= 0.05 > eps keeps every perturbation on one side of the kink */
		weft_tensor *in3[1] = { tu_rand("x", 2, s, -1, 1, 0.05f) };
		check("relu", ctx, f_relu, in3, 1, 1000);
		weft_tensor *in4[1] = { tu_rand("x", 2, s, -3, 3, 0) };
		check("gelu", ctx, f_gelu, in4, 1, 1000);
		weft_tensor *in4e[1] = { tu_rand("x", 2, s, -3, 3, 0) };
		check("gelu_erf", ctx, f_gelu_erf, in4e, 1, 1000);
		weft_tensor *in5[1] = { tu_rand("x", 2, s, -2, 2, 0) };
		check("softmax", ctx, f_softmax, in5, 1, 1000);
		weft_tensor *in6[1] = { tu_rand("x", 2, s, -2, 2, 0) };
		int64_t s3[3] = { 2, 3, 4 };
		weft_tensor_free(in6[0]);
		in6[0] = tu_rand("x", 3, s3, -2, 2, 0);
		check("reshape", ctx, f_reshape, in6, 1, 1000);
	}
	{ /* layernorm with and without affine */
		int64_t sx[2] = { 3, 6 }, sw[1] = { 6 };
		weft_tensor *in[3] = { tu_rand("x", 2, sx, -2, 2, 0), tu_rand("w", 1, sw, 0.5f, 1.5f, 0),
				       tu_rand("b", 1, sw, -1, 1, 0) };
		check("layernorm", ctx, f_layernorm, in, 3, 1000);
		weft_tensor *in2[3] = { tu_rand("x", 2, sx, -2, 2, 0), NULL, NULL };
		check("layernorm plain", ctx, f_layernorm, in2, 3, 1000);
	}
	{ /* embedding, repeated ids accumulate */
		int64_t st[2] = { 5, 3 }, si[2] = { 2, 3 }, ids[6] = { 1, 4, 1, 0, 1, 2 };
		weft_tensor *in[2] = { tu_rand("table", 2, st, -1, 1, 0),
				       ids_tensor(WEFT_I64, 2, si, ids) };
		check("embedding i64", ctx, f_embedding, in, 2, 1000);
		weft_tensor *in2[2] = { tu_rand("table", 2, st, -1, 1, 0),
					ids_tensor(WEFT_I32, 2, si, ids) };
		check("embedding i32", ctx, f_embedding, in2, 2, 1000);
	}
	{ /* attention: small T, every element */
		int64_t s[3] = { 2, 5, 24 }; /* C = 8, 2 heads of 4 */
		weft_tensor *in[1] = { tu_rand("qkv", 3, s, -1, 1, 0) };
		g_heads = 2;
		check("attention", ctx, f_attention, in, 1, 1000);
	}
	{ /* attention past one 128-row tile (the causal tiling), 60 elements */
		int64_t s[3] = { 1, 130, 6 }; /* C = 2, 1 head */
		weft_tensor *in[1] = { tu_rand("qkv", 3, s, -1, 1, 0) };
		g_heads = 1;
		check("attention tiled", ctx, f_attention, in, 1, 60);
	}
	{ /* cross-entropy with an ignored row, I64 and I32 targets */
		int64_t sl[2] = { 4, 5 }, stg[1] = { 4 }, t[4] = { 3, -100, 0, 4 };
		weft_tensor *in[2] = { tu_rand("logits", 2, sl, -2, 2, 0),
				       ids_tensor(WEFT_I64, 1, stg, t) };
		check("cross_entropy", ctx, f_cross_entropy, in, 2, 1000);
		weft_tensor *in2[2] = { tu_rand("logits", 2, sl, -2, 2, 0),
					ids_tensor(WEFT_I32, 1, stg, t) };
		check("cross_entropy i32", ctx, f_cross_entropy, in2, 2, 1000);
	}
	{ /* chain */
		int64_t sx[2] = { 3, 4 }, sw1[2] = { 4, 4 }, sg[1] = { 4 }, sw2[2] = { 3, 4 },
			st[1] = { 3 }, t[3] = { 2, 0, 1 };
		weft_tensor *in[5] = { tu_rand("x", 2, sx, -1, 1, 0), tu_rand("g", 1, sg, 0.5f, 1.5f, 0),
				       tu_rand("w1", 2, sw1, -1, 1, 0), tu_rand("w2", 2, sw2, -1, 1, 0),
				       ids_tensor(WEFT_I64, 1, st, t) };
		check("chain", ctx, f_chain, in, 5, 1000);
	}
	{ /* inputs used twice, fresh gradients written then added to */
		int64_t sx[2] = { 4, 4 };
		weft_tensor *in[2] = { tu_rand("x", 2, sx, -1, 1, 0), tu_rand("w", 2, sx, -1, 1, 0) };
		check("used twice", ctx, f_twice, in, 2, 1000);
	}
	weft_ctx_free(ctx);
	return wt_done("test_tensor_gradcheck");
}
