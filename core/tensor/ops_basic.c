/* Ops on matrices and elements: matmul, linear, add, mul, scale, bias,
 * relu, gelu, softmax, reshape; forward and backward. */
#include <string.h>

#include "tensor/tensor_impl.h"

#define DT(t) ((weft_dtype)(t)->dtype)

static int64_t last_dim(const weft_tensor *t)
{
	return t->ndim ? t->shape[t->ndim - 1] : 1;
}

/* ---- matmul ---- */

static weft_status matmul_backward(weft_ctx *ctx, weft_tape_node *n)
{
	const weft_kernel_table *k = ctx->k;
	weft_tensor *a = n->in[0], *b = n->in[1];
	int64_t M = n->i[0], K = n->i[1], N = n->i[2], batch = n->i[3];
	int b_shared = b->ndim == 2;
	const void *dy = n->out->grad->data;
	void *da = bw_grad(n, 0), *db = bw_grad(n, 1);
	weft_status st = WEFT_OK;

	float beta_a = bw_first(n, 0) ? 0.0f : 1.0f, beta_b = bw_first(n, 1) ? 0.0f : 1.0f;

	if (da && b_shared)
		st = k->gemm(ctx->kctx, DT(a), 0, 1, batch * M, K, N, 1.0f, dy, N, 0, b->data, N, 0,
			     beta_a, da, K, 0, 1);
	else if (da)
		st = k->gemm(ctx->kctx, DT(a), 0, 1, M, K, N, 1.0f, dy, N, M * N, b->data, N, K * N,
			     beta_a, da, K, M * K, batch);
	if (st)
		return st;
	/* a shared b sums over the batch in one GEMM; a batched one writes each
	 * slice of db once */
	if (db && b_shared)
		st = k->gemm(ctx->kctx, DT(a), 1, 0, K, N, batch * M, 1.0f, a->data, K, 0, dy, N, 0,
			     beta_b, db, N, 0, 1);
	else if (db)
		st = k->gemm(ctx->kctx, DT(a), 1, 0, K, N, M, 1.0f, a->data, K, M * K, dy, N, M * N,
			     beta_b, db, N, K * N, batch);
	return st;
}

static weft_status matmul_op(weft_ctx *ctx, weft_tensor *a, weft_tensor *b, weft_tensor **out)
{
	const char *op = "matmul";
	char da[256], db[256];
	int64_t shape[WEFT_MAX_DIMS], M, K, N, batch;
	weft_tensor *in[2] = { a, b }, *y;
	weft_tape_node *node;
	int shared;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if ((st = op_check(ctx, op, "a", a, 1)) || (st = op_check(ctx, op, "b", b, 1)) ||
	    (st = op_same_dtype(op, "a", a, "b", b)))
		return st;
	op_desc(a, "a", da, sizeof(da));
	op_desc(b, "b", db, sizeof(db));
	if (a->ndim < 2 || b->ndim < 2)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s: both need at least 2 dims",
				      op, da, db);
	M = a->shape[a->ndim - 2];
	K = a->shape[a->ndim - 1];
	N = b->shape[b->ndim - 1];
	shared = b->ndim == 2;
	if (b->shape[b->ndim - 2] != K)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s do not fit: a's last dim %lld "
				      "must equal b's dim %d (%lld)", op, da, db, (long long)K,
				      b->ndim - 2, (long long)b->shape[b->ndim - 2]);
	if (!shared && (b->ndim != a->ndim ||
			memcmp(a->shape, b->shape, (size_t)(a->ndim - 2) * sizeof(int64_t))))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s: b must be 2-D or have a's "
				      "leading (batch) dims", op, da, db);
	batch = 1;
	for (int32_t i = 0; i < a->ndim - 2; i++)
		batch *= a->shape[i];
	memcpy(shape, a->shape, sizeof(shape));
	shape[a->ndim - 1] = N;
	if ((st = op_pre_use(ctx, op, a, WEFT_PASS_FORWARD)) ||
	    (st = op_pre_use(ctx, op, b, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(a), a->ndim, shape, &y)))
		return st;
	if (shared)
		st = ctx->k->gemm(ctx->kctx, DT(a), 0, 0, batch * M, N, K, 1.0f, a->data, K, 0,
				  b->data, N, 0, 0.0f, y->data, N, 0, 1);
	else
		st = ctx->k->gemm(ctx->kctx, DT(a), 0, 0, M, N, K, 1.0f, a->data, K, M * K, b->data,
				  N, K * N, 0.0f, y->data, N, M * N, batch);
	if (st || (st = op_record(ctx, op, matmul_backward, y, 2, in, &node)))
		return st;
	if (node) {
		node->i[0] = M;
		node->i[1] = K;
		node->i[2] = N;
		node->i[3] = batch;
		node->overwrites = 1u << 0 | 1u << 1; /* GEMMs with beta 0 */
	}
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_matmul(weft_ctx *ctx, weft_tensor *a, weft_tensor *b, weft_tensor **out)
{
	weft_tensor *in[2] = { a, b };
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, in, 2, &narrow);

	return st ? st : op_lowp_out(ctx, matmul_op(ctx, in[0], in[1], out), narrow, out);
}

/* ---- linear ---- */

static weft_status linear_backward(weft_ctx *ctx, weft_tape_node *n)
{
	const weft_kernel_table *k = ctx->k;
	weft_tensor *x = n->in[0], *w = n->in[1];
	int64_t rows = n->i[0], in_f = n->i[1], out_f = n->i[2];
	const void *dy = n->out->grad->data;
	void *dx = bw_grad(n, 0), *dw = bw_grad(n, 1), *db = bw_grad(n, 2);
	weft_status st = WEFT_OK;

	if (n->saved[0]) /* recorded under autocast */
		return autocast_linear_backward(ctx, n);
	if (dx)
		st = k->gemm(ctx->kctx, DT(x), 0, 0, rows, in_f, out_f, 1.0f, dy, out_f, 0, w->data,
			     in_f, 0, bw_first(n, 0) ? 0.0f : 1.0f, dx, in_f, 0, 1);
	if (!st && dw && db && WEFT_HAS_MEMBER(k, weft_kernel_table, gemm_tn_sum) &&
	    k->gemm_tn_sum)
		/* dw and db in one pass over dy */
		return k->gemm_tn_sum(ctx->kctx, DT(x), out_f, in_f, rows, 1.0f, dy, out_f,
				      x->data, in_f, bw_first(n, 1) ? 0.0f : 1.0f, dw, in_f, db);
	if (!st && dw)
		st = k->gemm(ctx->kctx, DT(x), 1, 0, out_f, in_f, rows, 1.0f, dy, out_f, 0, x->data,
			     in_f, 0, bw_first(n, 1) ? 0.0f : 1.0f, dw, in_f, 0, 1);
	if (!st && db)
		st = k->sum_rows(ctx->kctx, DT(x), rows, out_f, dy, db);
	return st;
}

/* The linear layer, with GELU (tanh form) after it when gelu is set: one
 * product with both in its epilogue under 16-bit activations (lowp.c),
 * else linear then gelu. */
static weft_status linear_op(weft_ctx *ctx, const char *op, weft_tensor *x, weft_tensor *w,
			     weft_tensor *b, int gelu, weft_tensor **out)
{
	char dx[256], dw[256], dbias[256];
	int64_t shape[WEFT_MAX_DIMS], rows, in_f, out_f;
	weft_tensor *in[3] = { x, w, b }, *y;
	weft_tape_node *node;
	void *low[2] = { NULL, NULL };
	int lowp;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if ((st = op_check(ctx, op, "x", x, OP_FLOAT_OR_LOWP)) ||
	    (st = op_check(ctx, op, "w", w, 1)))
		return st;
	lowp = ctx->lowp != WEFT_F32 && x->dtype == ctx->lowp && w->dtype == WEFT_F32;
	if (!lowp && (st = op_same_dtype(op, "x", x, "w", w)))
		return st;
	if (b && ((st = op_check(ctx, op, "b", b, 1)) || (st = op_same_dtype(op, "w", w, "b", b))))
		return st;
	op_desc(x, "x", dx, sizeof(dx));
	op_desc(w, "w", dw, sizeof(dw));
	if (x->ndim < 1 || w->ndim != 2)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s: x needs at least 1 dim and w "
				      "exactly 2 (out_features, in_features)", op, dx, dw);
	in_f = w->shape[1];
	out_f = w->shape[0];
	if (last_dim(x) != in_f)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s do not fit: x's last dim %lld "
				      "must equal w's in_features (dim 1) %lld", op, dx, dw,
				      (long long)last_dim(x), (long long)in_f);
	if (b && (b->ndim != 1 || b->shape[0] != out_f))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s does not fit %s: the bias must be "
				      "[%lld] (out_features)", op, op_desc(b, "b", dbias, sizeof(dbias)),
				      dw, (long long)out_f);
	rows = 1;
	for (int32_t i = 0; i < x->ndim - 1; i++)
		rows *= x->shape[i];
	memcpy(shape, x->shape, sizeof(shape));
	shape[x->ndim - 1] = out_f;
	if ((st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_pre_use(ctx, op, w, WEFT_PASS_FORWARD)) ||
	    (st = op_pre_use(ctx, op, b, WEFT_PASS_FORWARD)) ||
	    (st = lowp_linear(ctx, op, x, w, b, gelu, out, &lowp)))
		return st;
	if (lowp)
		return WEFT_OK;
	if ((st = op_output(ctx, op, DT(x), x->ndim, shape, &y)))
		return st;
	if (ctx->autocast != WEFT_F32 && DT(x) == WEFT_F32) {
		st = autocast_linear_forward(ctx, x, w, b, rows, in_f, out_f, y, low);
	} else if (b && WEFT_HAS_MEMBER(ctx->k, weft_kernel_table, gemm_bias) &&
		   ctx->k->gemm_bias) {
		/* the bias in the product's own pass (the CPU table: as its kernel
		 * writes y, or copied into y before the product adds to it) */
		st = ctx->k->gemm_bias(ctx->kctx, DT(x), 0, 1, rows, out_f, in_f, 1.0f, x->data,
				       in_f, w->data, in_f, b->data, y->data, out_f);
	} else {
		st = ctx->k->gemm(ctx->kctx, DT(x), 0, 1, rows, out_f, in_f, 1.0f, x->data, in_f,
				  0, w->data, in_f, 0, 0.0f, y->data, out_f, 0, 1);
		if (!st && b)
			st = ctx->k->add(ctx->kctx, DT(x), rows * out_f, y->data, out_f, b->data,
					 y->data);
	}
	if (st || (st = op_record(ctx, op, linear_backward, y, 3, in, &node)))
		return st;
	if (node) {
		node->i[0] = rows;
		node->i[1] = in_f;
		node->i[2] = out_f;
		node->i[3] = ctx->autocast;
		node->saved[0] = low[0]; /* x and w rounded (autocast), or NULL */
		node->saved[1] = low[1];
		node->overwrites = 1u << 0 | 1u << 1; /* dx, dw: GEMMs with beta 0 */
	}
	*out = y;
	return gelu ? weft_op_gelu(ctx, y, out) : WEFT_OK;
}

weft_status weft_op_linear(weft_ctx *ctx, weft_tensor *x, weft_tensor *w, weft_tensor *b,
			   weft_tensor **out)
{
	return linear_op(ctx, "linear", x, w, b, 0, out);
}

weft_status weft_op_linear_gelu(weft_ctx *ctx, weft_tensor *x, weft_tensor *w, weft_tensor *b,
				weft_tensor **out)
{
	return linear_op(ctx, "linear_gelu", x, w, b, 1, out);
}

/* ---- add, mul, bias: b broadcasts over a's leading dims ---- */

static weft_status add_backward(weft_ctx *ctx, weft_tape_node *n)
{
	int64_t nn = weft_tensor_numel(n->out), nb = weft_tensor_numel(n->in[1]);
	const void *dy = n->out->grad->data;
	void *da = bw_grad(n, 0), *db = bw_grad(n, 1);
	weft_status st = WEFT_OK;

	if (da && bw_first(n, 0))
		st = ctx->k->copy(ctx->kctx, da, dy, weft_tensor_nbytes(n->out),
				  WEFT_COPY_DEVICE_TO_DEVICE);
	else if (da)
		st = ctx->k->axpy(ctx->kctx, DT(n->out), nn, 1.0f, dy, da);
	if (!st && db && bw_first(n, 1)) /* only when b has out's shape */
		st = ctx->k->copy(ctx->kctx, db, dy, weft_tensor_nbytes(n->out),
				  WEFT_COPY_DEVICE_TO_DEVICE);
	else if (!st && db && nb)
		st = ctx->k->sum_rows(ctx->kctx, DT(n->out), nn / nb, nb, dy, db);
	return st;
}

static weft_status mul_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *a = n->in[0], *b = n->in[1];

	return ctx->k->mul_backward(ctx->kctx, DT(a), weft_tensor_numel(a), a->data,
				    weft_tensor_numel(b), b->data, n->out->grad->data,
				    bw_grad(n, 0), bw_grad(n, 1));
}

static weft_status binary_op(weft_ctx *ctx, const char *op, const char *rb, weft_tensor *a,
			     weft_tensor *b, int is_mul, weft_tensor **out)
{
	char da[256], db[256];
	weft_tensor *in[2] = { a, b }, *y;
	weft_tape_node *node;
	int fits;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if ((st = op_check(ctx, op, "a", a, 1)) || (st = op_check(ctx, op, rb, b, 1)) ||
	    (st = op_same_dtype(op, "a", a, rb, b)))
		return st;
	fits = b->ndim <= a->ndim &&
	       !memcmp(a->shape + a->ndim - b->ndim, b->shape, (size_t)b->ndim * sizeof(int64_t));
	if (!fits && !strcmp(rb, "bias"))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s does not fit %s: the bias must be 1-D "
				      "of a's last dim", op, op_desc(b, rb, db, sizeof(db)),
				      op_desc(a, "a", da, sizeof(da)));
	if (!fits)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s do not fit: b must have a's "
				      "shape or its trailing dims (it broadcasts over the leading "
				      "ones)", op, op_desc(a, "a", da, sizeof(da)),
				      op_desc(b, rb, db, sizeof(db)));
	if ((st = op_pre_use(ctx, op, a, WEFT_PASS_FORWARD)) ||
	    (st = op_pre_use(ctx, op, b, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(a), a->ndim, a->shape, &y)))
		return st;
	if (weft_tensor_numel(a))
		st = (is_mul ? ctx->k->mul : ctx->k->add)(ctx->kctx, DT(a), weft_tensor_numel(a),
							  a->data, weft_tensor_numel(b), b->data,
							  y->data);
	if (st || (st = op_record(ctx, op, is_mul ? mul_backward : add_backward, y, 2, in, &node)))
		return st;
	/* add's gradients are copies of dy: a's always, b's when b is not
	 * broadcast (a broadcast b sums rows) */
	if (node && !is_mul) {
		node->overwrites = 1u << 0 |
				   (weft_tensor_numel(b) == weft_tensor_numel(a) ? 1u << 1 : 0u);
		node->passes = node->overwrites;
	}
	*out = y;
	return WEFT_OK;
}

/* binary_op, with 16-bit inputs the table cannot take widened (lowp.c) */
static weft_status binary(weft_ctx *ctx, const char *op, const char *rb, weft_tensor *a,
			  weft_tensor *b, int is_mul, weft_tensor **out)
{
	weft_tensor *in[2] = { a, b };
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, in, 2, &narrow);

	if (st)
		return st;
	return op_lowp_out(ctx, binary_op(ctx, op, rb, in[0], in[1], is_mul, out), narrow, out);
}

weft_status weft_op_add(weft_ctx *ctx, weft_tensor *a, weft_tensor *b, weft_tensor **out)
{
	return binary(ctx, "add", "b", a, b, 0, out);
}

weft_status weft_op_mul(weft_ctx *ctx, weft_tensor *a, weft_tensor *b, weft_tensor **out)
{
	return binary(ctx, "mul", "b", a, b, 1, out);
}

weft_status weft_op_bias(weft_ctx *ctx, weft_tensor *x, weft_tensor *b, weft_tensor **out)
{
	if (b && x && b->ndim != 1 && out) {
		char dx[256], db[256];

		*out = NULL;
		return weft_error_set(WEFT_ERR_SHAPE, "bias: %s does not fit %s: the bias must be "
				      "1-D of x's last dim", op_desc(b, "bias", db, sizeof(db)),
				      op_desc(x, "x", dx, sizeof(dx)));
	}
	return binary(ctx, "bias", "bias", x, b, 0, out);
}

/* ---- scale ---- */

static weft_status scale_backward(weft_ctx *ctx, weft_tape_node *n)
{
	if (bw_first(n, 0))
		return ctx->k->scale(ctx->kctx, DT(n->out), weft_tensor_numel(n->out), n->f[0],
				     n->out->grad->data, bw_grad(n, 0));
	return ctx->k->axpy(ctx->kctx, DT(n->out), weft_tensor_numel(n->out), n->f[0],
			    n->out->grad->data, bw_grad(n, 0));
}

static weft_status scale_op(weft_ctx *ctx, weft_tensor *x, float alpha, weft_tensor **out)
{
	const char *op = "scale";
	weft_tensor *y;
	weft_tape_node *node;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if ((st = op_check(ctx, op, "x", x, 1)) ||
	    (st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(x), x->ndim, x->shape, &y)))
		return st;
	if (weft_tensor_numel(x))
		st = ctx->k->scale(ctx->kctx, DT(x), weft_tensor_numel(x), alpha, x->data, y->data);
	if (st || (st = op_record(ctx, op, scale_backward, y, 1, &x, &node)))
		return st;
	if (node) {
		node->f[0] = alpha;
		node->overwrites = 1u << 0;
	}
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_scale(weft_ctx *ctx, weft_tensor *x, float alpha, weft_tensor **out)
{
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, &x, 1, &narrow);

	return st ? st : op_lowp_out(ctx, scale_op(ctx, x, alpha, out), narrow, out);
}

/* ---- relu, gelu, softmax ---- */

static weft_status relu_backward(weft_ctx *ctx, weft_tape_node *n)
{
	return ctx->k->relu_backward(ctx->kctx, DT(n->out), weft_tensor_numel(n->out),
				     n->in[0]->data, n->out->grad->data, bw_grad(n, 0));
}

static weft_status gelu_backward(weft_ctx *ctx, weft_tape_node *n)
{
	/* bw_first only where the forward found gelu_backward_write */
	return (bw_first(n, 0) ? ctx->k->gelu_backward_write : ctx->k->gelu_backward)(
		ctx->kctx, DT(n->out), weft_tensor_numel(n->out), n->in[0]->data,
		n->out->grad->data, bw_grad(n, 0));
}

static weft_status gelu_erf_backward(weft_ctx *ctx, weft_tape_node *n)
{
	return ctx->k->gelu_erf_backward(ctx->kctx, DT(n->out), weft_tensor_numel(n->out),
					 n->in[0]->data, n->out->grad->data, bw_grad(n, 0));
}

static weft_status softmax_backward(weft_ctx *ctx, weft_tape_node *n)
{
	int64_t cols = last_dim(n->out);

	return ctx->k->softmax_backward(ctx->kctx, DT(n->out),
					cols ? weft_tensor_numel(n->out) / cols : 0, cols,
					n->out->data, n->out->grad->data, bw_grad(n, 0));
}

enum unary_kind { UNARY_RELU, UNARY_GELU, UNARY_SOFTMAX, UNARY_GELU_ERF };

/* Whether the context's table has GELU's exact form (since ABI 1.5,
 * optional); otherwise an error naming the table, its ABI and the member. */
static weft_status need_gelu_erf(weft_ctx *ctx, const char *op)
{
	const weft_kernel_table *k = ctx->k;
	char dev[32];

	if (WEFT_HAS_MEMBER(k, weft_kernel_table, gelu_erf_backward) && k->gelu_erf_forward &&
	    k->gelu_erf_backward)
		return WEFT_OK;
	return weft_error_set(WEFT_ERR_UNSUPPORTED, "%s: the '%s' kernel table (device %s, ABI "
			      "%u.%u) has no gelu_erf_forward/gelu_erf_backward (GELU's exact "
			      "form, since ABI 1.5): rebuild that kernel library against this "
			      "weft's SDK, run on a device whose table has them (cpu does), or "
			      "use GELU's tanh form (model.mlp: gelu_tanh)", op,
			      k->head.name ? k->head.name : "?",
			      weft_device_str(ctx->dev, dev, sizeof(dev)),
			      WEFT_ABI_VERSION_MAJOR(k->head.abi_version),
			      WEFT_ABI_VERSION_MINOR(k->head.abi_version));
}

static weft_status unary_op(weft_ctx *ctx, const char *op, enum unary_kind kind,
			    weft_tensor *x, weft_tensor **out)
{
	static const tape_backward_fn bw[] = { relu_backward, gelu_backward, softmax_backward,
					       gelu_erf_backward };
	weft_tensor *y;
	weft_tape_node *node;
	int64_t n, cols;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if ((st = op_check(ctx, op, "x", x, 1)) ||
	    (st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (kind == UNARY_GELU_ERF && (st = need_gelu_erf(ctx, op))) ||
	    (st = op_output(ctx, op, DT(x), x->ndim, x->shape, &y)))
		return st;
	n = weft_tensor_numel(x);
	cols = last_dim(x);
	if (n && kind == UNARY_RELU)
		st = ctx->k->relu_forward(ctx->kctx, DT(x), n, x->data, y->data);
	else if (n && kind == UNARY_GELU)
		st = ctx->k->gelu_forward(ctx->kctx, DT(x), n, x->data, y->data);
	else if (n && kind == UNARY_GELU_ERF)
		st = ctx->k->gelu_erf_forward(ctx->kctx, DT(x), n, x->data, y->data);
	else if (n)
		st = ctx->k->softmax_forward(ctx->kctx, DT(x), n / cols, cols, x->data, y->data);
	if (st || (st = op_record(ctx, op, bw[kind], y, 1, &x, &node)))
		return st;
	if (node && kind == UNARY_GELU &&
	    WEFT_HAS_MEMBER(ctx->k, weft_kernel_table, gelu_backward_write) &&
	    ctx->k->gelu_backward_write)
		node->overwrites = 1u << 0;
	*out = y;
	return WEFT_OK;
}

/* unary_op, with a 16-bit x the table cannot take widened (lowp.c) */
static weft_status unary(weft_ctx *ctx, const char *op, enum unary_kind kind, weft_tensor *x,
			 weft_tensor **out)
{
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, &x, 1, &narrow);

	return st ? st : op_lowp_out(ctx, unary_op(ctx, op, kind, x, out), narrow, out);
}

weft_status weft_op_relu(weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	return unary(ctx, "relu", UNARY_RELU, x, out);
}

weft_status weft_op_gelu(weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	return unary(ctx, "gelu", UNARY_GELU, x, out);
}

weft_status weft_op_gelu_erf(weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	return unary(ctx, "gelu_erf", UNARY_GELU_ERF, x, out);
}

weft_status weft_op_softmax(weft_ctx *ctx, weft_tensor *x, weft_tensor **out)
{
	return unary(ctx, "softmax", UNARY_SOFTMAX, x, out);
}

/* ---- reshape ---- */

static weft_status reshape_backward(weft_ctx *ctx, weft_tape_node *n)
{
	if (!bw_wants(n, 0))
		return WEFT_OK; /* handed the output's gradient (or none wanted) */
	if (bw_first(n, 0))
		return ctx->k->copy(ctx->kctx, bw_grad(n, 0), n->out->grad->data,
				    weft_tensor_nbytes(n->out), WEFT_COPY_DEVICE_TO_DEVICE);
	return op_axpy(ctx, DT(n->out), weft_tensor_numel(n->out), 1.0f, n->out->grad->data,
		       bw_grad(n, 0));
}

weft_status weft_op_reshape(weft_ctx *ctx, weft_tensor *x, int32_t ndim, const int64_t *shape,
			    weft_tensor **out)
{
	const char *op = "reshape";
	char dx[256], sh[160];
	weft_tensor *y;
	weft_tape_node *node;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if ((st = op_check(ctx, op, "x", x, OP_FLOAT_OR_LOWP)))
		return st;
	if (!shape && ndim)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: shape is NULL", op);
	st = weft_arena_alloc(ctx->tape_arena, sizeof(*y), 16, (void **)&y);
	if (st)
		return weft_error_wrap(st, "%s: output", op);
	st = weft_tensor_init(y, DT(x), ndim, shape, x->device, x->data);
	if (st)
		return weft_error_wrap(st, "%s", op);
	if (weft_tensor_numel(y) != weft_tensor_numel(x))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s has %lld elements; %s has %lld", op,
				      op_desc(x, "x", dx, sizeof(dx)), (long long)weft_tensor_numel(x),
				      weft_shape_str(y, sh, sizeof(sh)),
				      (long long)weft_tensor_numel(y));
	y->base = x->base;
	y->offset = x->offset;
	y->flags = WEFT_TENSOR_IN_ARENA;
	y->name = op;
	y->ag_stamp = ctx->stamp;
	if ((st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_record(ctx, op, reshape_backward, y, 1, &x, &node)))
		return st;
	if (node)
		node->overwrites = node->passes = 1u << 0;
	*out = y;
	return WEFT_OK;
}
