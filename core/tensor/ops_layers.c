/* Layer ops: layernorm, embedding, attention, dropout, cross-entropy,
 * accuracy; forward and backward. */
#include <math.h>
#include <string.h>

#include "tensor/tensor_impl.h"

#define DT(t) ((weft_dtype)(t)->dtype)

static int64_t last_dim(const weft_tensor *t)
{
	return t->ndim ? t->shape[t->ndim - 1] : 1;
}

static weft_status begin(weft_ctx *ctx, const char *op, weft_tensor **out)
{
	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if (!ctx)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the context is NULL", op);
	return WEFT_OK;
}

/* ---- layernorm ---- */

static weft_status layernorm_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *x = n->in[0], *w = n->in[1];

	return ctx->k->layernorm_backward(ctx->kctx, DT(x), n->i[0], n->i[1], x->data,
					  w ? w->data : NULL, n->saved[0], n->saved[1],
					  n->out->grad->data, bw_grad(n, 0), bw_grad(n, 1),
					  bw_grad(n, 2));
}

/* Checks layernorm's x, w, b and eps (x may be the 16-bit activation
 * dtype, w and b then F32). */
static weft_status layernorm_check(weft_ctx *ctx, const char *op, weft_tensor *x, weft_tensor *w,
				   weft_tensor *b, float eps)
{
	char dx[256], dp[256];
	weft_tensor *in[3] = { x, w, b };
	int64_t cols;
	weft_status st;

	if ((st = op_check(ctx, op, "x", x, OP_FLOAT_OR_LOWP)))
		return st;
	op_desc(x, "x", dx, sizeof(dx));
	if (x->ndim < 1)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s: x needs at least 1 dim", op, dx);
	cols = last_dim(x);
	for (int i = 1; i < 3; i++) {
		const char *role = i == 1 ? "w" : "b";

		if (!in[i])
			continue;
		if ((st = op_check(ctx, op, role, in[i], 1)) ||
		    (x->dtype != ctx->lowp && (st = op_same_dtype(op, "x", x, role, in[i]))))
			return st;
		if (in[i]->ndim != 1 || in[i]->shape[0] != cols)
			return weft_error_set(WEFT_ERR_SHAPE, "%s: %s does not fit %s: it must be "
					      "[%lld] (x's last dim)", op,
					      op_desc(in[i], role, dp, sizeof(dp)), dx, (long long)cols);
	}
	if (!(eps > 0.0f) || !isfinite(eps))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: eps is %g; it must be a positive "
				      "number such as 1e-5", op, (double)eps);
	for (int i = 0; i < 3; i++)
		if ((st = op_pre_use(ctx, op, in[i], WEFT_PASS_FORWARD)))
			return st;
	return WEFT_OK;
}

static weft_status layernorm_op(weft_ctx *ctx, weft_tensor *x, weft_tensor *w, weft_tensor *b,
				float eps, weft_tensor **out)
{
	const char *op = "layernorm";
	weft_tensor *in[3] = { x, w, b }, *y;
	weft_tape_node *node;
	int64_t rows, cols;
	void *mean, *rstd;
	int lowp;
	weft_status st;

	if ((st = begin(ctx, op, out)) || (st = layernorm_check(ctx, op, x, w, b, eps)) ||
	    (st = lowp_layernorm(ctx, x, NULL, w, b, eps, NULL, out, &lowp)))
		return st;
	if (lowp)
		return WEFT_OK;
	if (x->dtype == ctx->lowp) { /* a norm without its weight: through F32 */
		weft_dtype narrow;

		if ((st = op_lowp_in(ctx, &x, 1, &narrow)))
			return st;
		in[0] = x;
	}
	cols = last_dim(x);
	rows = cols ? weft_tensor_numel(x) / cols : 0;
	if ((st = op_output(ctx, op, DT(x), x->ndim, x->shape, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)rows * sizeof(float), &mean)) ||
	    (st = op_scratch(ctx, op, (size_t)rows * sizeof(float), &rstd)))
		return st;
	if (rows && cols)
		st = ctx->k->layernorm_forward(ctx->kctx, DT(x), rows, cols, eps, x->data,
					       w ? w->data : NULL, b ? b->data : NULL, y->data,
					       mean, rstd);
	if (st || (st = op_record(ctx, op, layernorm_backward, y, 3, in, &node)))
		return st;
	if (node) {
		node->i[0] = rows;
		node->i[1] = cols;
		node->saved[0] = mean;
		node->saved[1] = rstd;
	}
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_layernorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *w, weft_tensor *b,
			      float eps, weft_tensor **out)
{
	return layernorm_op(ctx, x, w, b, eps, out);
}

weft_status weft_op_add_layernorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *r, weft_tensor *w,
				  weft_tensor *b, float eps, weft_tensor **sum, weft_tensor **out)
{
	const char *op = "add_layernorm";
	char dx[256], dr[256];
	int lowp;
	weft_status st;

	if (!sum)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: sum is NULL", op);
	*sum = NULL;
	if ((st = begin(ctx, op, out)) || (st = layernorm_check(ctx, op, x, w, b, eps)) ||
	    (st = op_check(ctx, op, "r", r, OP_FLOAT_OR_LOWP)))
		return st;
	if (r->ndim != x->ndim || memcmp(r->shape, x->shape, sizeof(x->shape)))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s must have the same shape",
				      op, op_desc(x, "x", dx, sizeof(dx)),
				      op_desc(r, "r", dr, sizeof(dr)));
	if ((st = lowp_layernorm(ctx, x, r, w, b, eps, sum, out, &lowp)))
		return st;
	if (lowp)
		return WEFT_OK;
	if ((st = weft_op_add(ctx, x, r, sum)))
		return st;
	return layernorm_op(ctx, *sum, w, b, eps, out);
}

/* ---- embedding ---- */

static weft_status embedding_backward(weft_ctx *ctx, weft_tape_node *n)
{
	void *dt = bw_grad(n, 0);

	if (!dt)
		return WEFT_OK;
	return ctx->k->embedding_backward(ctx->kctx, DT(n->in[0]), n->i[0], n->i[1],
					  (weft_dtype)n->i[2], n->saved[0], n->out->grad->data, dt);
}

weft_status weft_op_embedding(weft_ctx *ctx, weft_tensor *ids, weft_tensor *table,
			      weft_tensor **out)
{
	const char *op = "embedding";
	char di[256], dt[256];
	int64_t shape[WEFT_MAX_DIMS];
	weft_tensor *y;
	weft_tape_node *node;
	int64_t n;
	weft_status st;

	if ((st = begin(ctx, op, out)) || (st = op_check(ctx, op, "ids", ids, 0)) ||
	    (st = op_check(ctx, op, "table", table, 1)))
		return st;
	op_desc(ids, "ids", di, sizeof(di));
	op_desc(table, "table", dt, sizeof(dt));
	if (table->ndim != 2)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s must be 2-D (vocab, dim)", op, dt);
	if (ids->ndim >= WEFT_MAX_DIMS)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s has %d dims; the output adds one and "
				      "may have at most %d", op, di, (int)ids->ndim, WEFT_MAX_DIMS);
	memcpy(shape, ids->shape, sizeof(shape));
	shape[ids->ndim] = table->shape[1];
	n = weft_tensor_numel(ids);
	if ((st = op_pre_use(ctx, op, table, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(table), ids->ndim + 1, shape, &y)))
		return st;
	if (n && table->shape[1])
		st = ctx->k->embedding_forward(ctx->kctx, DT(table), n, table->shape[1], DT(ids),
					       ids->data, table->shape[0], table->data, y->data);
	if (st)
		return weft_error_wrap(st, "%s: %s into %s", op, di, dt);
	if ((st = op_record(ctx, op, embedding_backward, y, 1, &table, &node)))
		return st;
	if (node) {
		node->i[0] = n;
		node->i[1] = table->shape[1];
		node->i[2] = ids->dtype;
		node->saved[0] = ids->data;
	}
	*out = y;
	return WEFT_OK;
}

/* ---- attention ---- */

static weft_status attention_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *qkv = n->in[0];
	int64_t B = n->i[0], T = n->i[1], C = n->i[2], nh = n->i[3];
	size_t bytes = ctx->k->attention_scratch(DT(qkv), B, T, C, nh);
	void *scratch = NULL;
	weft_status st;

	if (bytes && (st = op_scratch(ctx, "attention backward", bytes, &scratch)))
		return st;
	/* bw_first only where the forward found attention_backward_write */
	return (bw_first(n, 0) ? ctx->k->attention_backward_write : ctx->k->attention_backward)(
		ctx->kctx, DT(qkv), B, T, C, nh, qkv->data, n->saved[0], n->out->grad->data,
		bw_grad(n, 0), scratch);
}

static weft_status attention_op(weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
				weft_tensor **out)
{
	const char *op = "attention";
	char dq[256];
	int64_t B, T, C, shape[3];
	weft_tensor *y;
	weft_tape_node *node;
	void *att, *scratch = NULL;
	size_t bytes;
	weft_status st;

	if ((st = begin(ctx, op, out)) || (st = op_check(ctx, op, "qkv", qkv, 1)))
		return st;
	op_desc(qkv, "qkv", dq, sizeof(dq));
	if (qkv->ndim != 3)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s must be 3-D (batch, time, 3 * "
				      "channels)", op, dq);
	if (n_head < 1 || qkv->shape[2] % (3 * n_head))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s with %lld heads: the last dim must be "
				      "3 * n_head * head_size (divisible by %lld)", op, dq,
				      (long long)n_head, (long long)(3 * (n_head < 1 ? 1 : n_head)));
	B = qkv->shape[0];
	T = qkv->shape[1];
	C = qkv->shape[2] / 3;
	shape[0] = B;
	shape[1] = T;
	shape[2] = C;
	/* A table with fused attention (CUDA's) runs GPT's attention as
	 * multi-head attention through it (one kv head per query head: the
	 * same packed q, k, v layout), saving the log-sum-exp instead of the
	 * (B, nh, T, T) probabilities; the CPU table keeps the materialized
	 * path below. */
	if (op_flash_fits(ctx, C / n_head))
		return op_attention_flash(ctx, op, qkv, n_head, n_head, C / n_head, out);
	bytes = ctx->k->attention_scratch(DT(qkv), B, T, C, n_head);
	if ((st = op_pre_use(ctx, op, qkv, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(qkv), 3, shape, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)(B * n_head * T * T) * weft_dtype_size(DT(qkv)),
			     &att)) ||
	    (bytes && (st = op_scratch(ctx, op, bytes, &scratch))))
		return st;
	if (B && T && C)
		st = ctx->k->attention_forward(ctx->kctx, DT(qkv), B, T, C, n_head, qkv->data,
					       y->data, att, scratch);
	if (st || (st = op_record(ctx, op, attention_backward, y, 1, &qkv, &node)))
		return st;
	if (node) {
		node->i[0] = B;
		node->i[1] = T;
		node->i[2] = C;
		node->i[3] = n_head;
		node->saved[0] = att;
		if (B && T && C && WEFT_HAS_MEMBER(ctx->k, weft_kernel_table,
						   attention_backward_write) &&
		    ctx->k->attention_backward_write)
			node->overwrites = 1u << 0;
	}
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_attention(weft_ctx *ctx, weft_tensor *qkv, int64_t n_head, weft_tensor **out)
{
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, &qkv, 1, &narrow);

	return st ? st : op_lowp_out(ctx, attention_op(ctx, qkv, n_head, out), narrow, out);
}

/* ---- dropout ---- */

static weft_status dropout_backward(weft_ctx *ctx, weft_tape_node *n)
{
	return ctx->k->dropout_backward(ctx->kctx, DT(n->out), weft_tensor_numel(n->out), n->f[0],
					n->u[0], n->i[0], n->out->grad->data, bw_grad(n, 0));
}

static weft_status dropout_op(weft_ctx *ctx, weft_tensor *x, float p, weft_tensor **out)
{
	const char *op = "dropout";
	weft_tensor *y;
	weft_tape_node *node;
	int64_t n, row_numel, first;
	uint64_t key;
	weft_status st;

	/* a 16-bit x reaches the kernel only on a table that takes it
	 * (weft_op_dropout widens it otherwise) */
	if ((st = begin(ctx, op, out)) || (st = op_check(ctx, op, "x", x, OP_FLOAT_OR_LOWP)))
		return st;
	if (!(p >= 0.0f && p < 1.0f))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: p is %g; it must be in [0, 1)", op,
				      (double)p);
	if (!ctx->training || p == 0.0f) {
		*out = x;
		return WEFT_OK;
	}
	n = weft_tensor_numel(x);
	row_numel = x->ndim && x->shape[0] ? n / x->shape[0] : n;
	first = ctx->row_offset * row_numel;
	key = weft_dropout_key(ctx->seed, ctx->step, ctx->dropout_calls++);
	if ((st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(x), x->ndim, x->shape, &y)))
		return st;
	if (n)
		st = ctx->k->dropout_forward(ctx->kctx, DT(x), n, p, key, first, x->data, y->data);
	if (st || (st = op_record(ctx, op, dropout_backward, y, 1, &x, &node)))
		return st;
	if (node) {
		node->f[0] = p;
		node->u[0] = key;
		node->i[0] = first;
	}
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_dropout(weft_ctx *ctx, weft_tensor *x, float p, weft_tensor **out)
{
	weft_dtype narrow;
	weft_status st;

	if (ctx && (!ctx->training || p == 0.0f))
		return dropout_op(ctx, x, p, out); /* x itself: nothing to widen */
	if ((st = op_lowp_in(ctx, &x, 1, &narrow)))
		return st;
	return op_lowp_out(ctx, dropout_op(ctx, x, p, out), narrow, out);
}

/* ---- cross-entropy and accuracy ---- */

static weft_status check_targets(const char *op, const weft_tensor *logits,
				 const weft_tensor *targets)
{
	char dl[256], dt[256];

	op_desc(logits, "logits", dl, sizeof(dl));
	op_desc(targets, "targets", dt, sizeof(dt));
	if (logits->ndim < 1)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s needs a class dim", op, dl);
	if (targets->ndim != logits->ndim - 1 ||
	    memcmp(targets->shape, logits->shape, (size_t)targets->ndim * sizeof(int64_t)))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s do not fit: targets must have "
				      "logits' shape without the last (class) dim", op, dl, dt);
	return WEFT_OK;
}

static weft_status cross_entropy_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *logits = n->in[0];

	return ctx->k->cross_entropy_backward(ctx->kctx, DT(logits), n->i[0], n->i[1],
					      n->saved[0], (weft_dtype)n->i[2], n->saved[1],
					      n->i[3], n->out->grad->data, n->saved[2],
					      bw_grad(n, 0));
}

weft_status weft_op_cross_entropy(weft_ctx *ctx, weft_tensor *logits, weft_tensor *targets,
				  int64_t ignore_index, weft_tensor **out)
{
	const char *op = "cross_entropy";
	weft_tensor *y;
	weft_tape_node *node;
	int64_t rows, V;
	void *probs, *count;
	int lowp;
	weft_status st;

	if ((st = begin(ctx, op, out)) ||
	    (st = op_check(ctx, op, "logits", logits, OP_FLOAT_OR_LOWP)) ||
	    (st = op_check(ctx, op, "targets", targets, 0)) ||
	    (st = check_targets(op, logits, targets)) ||
	    (st = op_pre_use(ctx, op, logits, WEFT_PASS_FORWARD)) ||
	    (st = lowp_cross_entropy(ctx, logits, targets, ignore_index, out, &lowp)))
		return st;
	if (lowp)
		return WEFT_OK;
	V = last_dim(logits);
	rows = weft_tensor_numel(targets);
	if ((st = op_output(ctx, op, WEFT_F32, 0, NULL, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)(rows * V) * weft_dtype_size(DT(logits)), &probs)) ||
	    (st = op_scratch(ctx, op, sizeof(float), &count)))
		return st;
	st = ctx->k->cross_entropy_forward(ctx->kctx, DT(logits), rows, V, logits->data,
					   DT(targets), targets->data, ignore_index, probs,
					   y->data, count);
	if (st)
		return weft_error_wrap(st, "%s", op);
	if ((st = op_record_loss(ctx, op, cross_entropy_backward, y, logits, targets, ignore_index,
				 probs, count, &node)))
		return st;
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_accuracy(weft_ctx *ctx, weft_tensor *logits, weft_tensor *targets,
			     int64_t ignore_index, int64_t *correct, int64_t *counted)
{
	const char *op = "accuracy";
	weft_dtype narrow;
	weft_status st;

	if (!correct || !counted)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: correct or counted is NULL", op);
	*correct = *counted = 0;
	if ((st = op_lowp_in(ctx, &logits, 1, &narrow)) ||
	    (st = op_check(ctx, op, "logits", logits, 1)) ||
	    (st = op_check(ctx, op, "targets", targets, 0)) ||
	    (st = check_targets(op, logits, targets)) ||
	    (st = op_pre_use(ctx, op, logits, WEFT_PASS_FORWARD)))
		return st;
	st = ctx->k->accuracy(ctx->kctx, DT(logits), weft_tensor_numel(targets), last_dim(logits),
			      logits->data, DT(targets), targets->data, ignore_index, correct,
			      counted);
	return st ? weft_error_wrap(st, "%s", op) : WEFT_OK;
}
