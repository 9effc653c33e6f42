/* The layer ops of Llama-family models: RMSNorm, rotary position
 * embeddings, SwiGLU and causal attention with grouped-query heads;
 * forward and backward, on the kernel table's members since ABI 1.4. */
#include <math.h>
#include <string.h>

#include "tensor/tensor_impl.h"

#define DT(t) ((weft_dtype)(t)->dtype)

static weft_status begin(weft_ctx *ctx, const char *op, weft_tensor **out)
{
	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if (!ctx)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the context is NULL", op);
	return WEFT_OK;
}

/* Whether the context's kernel table has `member` (present: the member's
 * pointer is set, when the table is new enough to have it); otherwise an
 * error naming the table, its ABI and the member. */
#define HAS_KERNEL(k, member) \
	(WEFT_HAS_MEMBER((k), weft_kernel_table, member) && (k)->member != NULL)

static weft_status no_kernel(weft_ctx *ctx, const char *op, const char *member)
{
	const weft_kernel_table *k = ctx->k;
	char dev[32];

	return weft_error_set(WEFT_ERR_UNSUPPORTED, "%s: the '%s' kernel table (device %s, ABI "
			      "%u.%u) has no %s; the layers of Llama-family models need kernels "
			      "of ABI 1.4 that provide it: rebuild that kernel library against "
			      "this weft's SDK, or run on a device whose table has it (cpu does)",
			      op, k->head.name ? k->head.name : "?",
			      weft_device_str(ctx->dev, dev, sizeof(dev)),
			      WEFT_ABI_VERSION_MAJOR(k->head.abi_version),
			      WEFT_ABI_VERSION_MINOR(k->head.abi_version), member);
}

#define NEED_KERNEL(ctx, op, member) \
	(HAS_KERNEL((ctx)->k, member) ? WEFT_OK : no_kernel((ctx), (op), #member))

/* ---- RMSNorm ---- */

static weft_status rmsnorm_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *x = n->in[0], *w = n->in[1];

	return ctx->k->rmsnorm_backward(ctx->kctx, DT(x), n->i[0], n->i[1], x->data,
					w ? w->data : NULL, n->saved[0], n->out->grad->data,
					bw_grad(n, 0), bw_grad(n, 1));
}

static weft_status rmsnorm_op(weft_ctx *ctx, weft_tensor *x, weft_tensor *w, float eps,
			      weft_tensor **out)
{
	const char *op = "rmsnorm";
	char dx[256], dw[256];
	weft_tensor *in[2] = { x, w }, *y;
	weft_tape_node *node;
	int64_t rows, cols;
	void *rstd;
	weft_status st;

	if ((st = begin(ctx, op, out)) || (st = op_check(ctx, op, "x", x, 1)) ||
	    (st = NEED_KERNEL(ctx, op, rmsnorm_forward)) ||
	    (st = NEED_KERNEL(ctx, op, rmsnorm_backward)))
		return st;
	op_desc(x, "x", dx, sizeof(dx));
	if (x->ndim < 1)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s needs at least 1 dim", op, dx);
	cols = x->shape[x->ndim - 1];
	if (w) {
		if ((st = op_check(ctx, op, "w", w, 1)) || (st = op_same_dtype(op, "x", x, "w", w)))
			return st;
		if (w->ndim != 1 || w->shape[0] != cols)
			return weft_error_set(WEFT_ERR_SHAPE, "%s: %s does not fit %s: it must be "
					      "[%lld] (x's last dim)", op,
					      op_desc(w, "w", dw, sizeof(dw)), dx, (long long)cols);
	}
	if (!(eps > 0.0f) || !isfinite(eps))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: eps is %g; it must be a positive "
				      "number such as 1e-5 (Llama's rms_norm_eps)", op, (double)eps);
	rows = cols ? weft_tensor_numel(x) / cols : 0;
	if ((st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_pre_use(ctx, op, w, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(x), x->ndim, x->shape, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)rows * sizeof(float), &rstd)))
		return st;
	if (rows && cols)
		st = ctx->k->rmsnorm_forward(ctx->kctx, DT(x), rows, cols, eps, x->data,
					     w ? w->data : NULL, y->data, rstd);
	if (st || (st = op_record(ctx, op, rmsnorm_backward, y, 2, in, &node)))
		return st;
	if (node) {
		node->i[0] = rows;
		node->i[1] = cols;
		node->saved[0] = rstd;
	}
	*out = y;
	return WEFT_OK;
}

/* ---- rotary position embeddings ---- */

/* The node keeps the weft_rope in the tape arena (saved[0]). */
/* RMSNorm takes 16-bit activations widened (its weight is F32): F32 out */
weft_status weft_op_rmsnorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *w, float eps,
			    weft_tensor **out)
{
	weft_tensor *in[2] = { x, w };
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, in, 2, &narrow);

	return st ? st : op_lowp_out(ctx, rmsnorm_op(ctx, in[0], w, eps, out), narrow, out);
}

static weft_status rope_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *x = n->in[0];

	return ctx->k->rope_backward(ctx->kctx, DT(x), n->saved[0], x->shape[0], x->shape[1],
				     x->shape[2], n->i[0], n->i[1], n->i[2], n->out->grad->data,
				     bw_grad(n, 0));
}

static weft_status check_rope(const char *op, const weft_rope *rope)
{
	if (!rope)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: rope is NULL", op);
	if (rope->struct_size < sizeof(weft_rope))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: rope.struct_size is %u, smaller "
				      "than this weft's weft_rope (%zu): set it to sizeof(weft_rope)",
				      op, rope->struct_size, sizeof(weft_rope));
	if (!(rope->theta > 1.0) || !isfinite(rope->theta))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: rope theta is %g; it must be a "
				      "finite number above 1 (Llama: 10000 or 500000)", op,
				      rope->theta);
	if (rope->scaling == WEFT_ROPE_PLAIN)
		return WEFT_OK;
	if (rope->scaling != WEFT_ROPE_LLAMA3)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: rope scaling %d is unknown; use "
				      "WEFT_ROPE_PLAIN (0) or WEFT_ROPE_LLAMA3 (1)", op,
				      (int)rope->scaling);
	if (!(rope->factor > 0.0) || !(rope->original_max_positions > 0.0) ||
	    !(rope->low_freq_factor > 0.0) || !(rope->high_freq_factor > rope->low_freq_factor) ||
	    !isfinite(rope->factor) || !isfinite(rope->original_max_positions) ||
	    !isfinite(rope->high_freq_factor))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: llama3 rope scaling with factor "
				      "%g, low_freq_factor %g, high_freq_factor %g, "
				      "original_max_position_embeddings %g: each must be positive "
				      "and high_freq_factor above low_freq_factor (Llama 3.1: 8, 1, "
				      "4, 8192)", op, rope->factor, rope->low_freq_factor,
				      rope->high_freq_factor, rope->original_max_positions);
	return WEFT_OK;
}

static weft_status rope_op(weft_ctx *ctx, weft_tensor *x, const weft_rope *rope, int64_t n_rot,
			   int64_t head_dim, int64_t pos_offset, weft_tensor **out)
{
	const char *op = "rope";
	char dx[256];
	weft_tensor *y;
	weft_tape_node *node;
	weft_rope *saved = NULL;
	weft_status st;

	if ((st = begin(ctx, op, out)) || (st = op_check(ctx, op, "x", x, 1)) ||
	    (st = check_rope(op, rope)) || (st = NEED_KERNEL(ctx, op, rope_forward)) ||
	    (st = NEED_KERNEL(ctx, op, rope_backward)))
		return st;
	op_desc(x, "x", dx, sizeof(dx));
	if (x->ndim != 3)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s must be 3-D (batch, time, heads * "
				      "head_dim)", op, dx);
	if (head_dim < 2 || head_dim % 2)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: head_dim is %lld; it must be even "
				      "and at least 2 (pairs i, i + head_dim / 2 rotate together)",
				      op, (long long)head_dim);
	if (n_rot < 0 || n_rot * head_dim > x->shape[2])
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s cannot hold %lld rotated heads of %lld "
				      "(%lld elements a row): rotate at most %lld heads", op, dx,
				      (long long)n_rot, (long long)head_dim,
				      (long long)(n_rot * head_dim),
				      (long long)(x->shape[2] / head_dim));
	if (pos_offset < 0 || pos_offset > ((int64_t)1 << 24) - x->shape[1])
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: positions %lld to %lld: they must "
				      "lie in [0, 2^24), where a float holds each exactly", op,
				      (long long)pos_offset, (long long)(pos_offset + x->shape[1] - 1));
	if ((st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(x), 3, x->shape, &y)))
		return st;
	/* the backward's copy of the frequencies, before anything is recorded */
	if (op_needs_grad(ctx, x)) {
		if ((st = weft_arena_alloc(ctx->tape_arena, sizeof(*saved), 0, (void **)&saved)))
			return weft_error_wrap(st, "%s: saving the frequencies", op);
		*saved = *rope;
		saved->struct_size = (uint32_t)sizeof(*saved);
	}
	if (weft_tensor_numel(x))
		st = ctx->k->rope_forward(ctx->kctx, DT(x), rope, x->shape[0], x->shape[1],
					  x->shape[2], n_rot, head_dim, pos_offset, x->data, y->data);
	if (st || (st = op_record(ctx, op, rope_backward, y, 1, &x, &node)))
		return st;
	if (node) {
		node->saved[0] = saved;
		node->i[0] = n_rot;
		node->i[1] = head_dim;
		node->i[2] = pos_offset;
	}
	*out = y;
	return WEFT_OK;
}

/* ---- SwiGLU ---- */

/* i[0] rows, i[1] cols, i[2] ld; packed (one input) when n_in is 1. */
weft_status weft_op_rope(weft_ctx *ctx, weft_tensor *x, const weft_rope *rope, int64_t n_rot,
			 int64_t head_dim, int64_t pos_offset, weft_tensor **out)
{
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, &x, 1, &narrow);

	if (st)
		return st;
	return op_lowp_out(ctx, rope_op(ctx, x, rope, n_rot, head_dim, pos_offset, out), narrow,
			   out);
}

static weft_status swiglu_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *g = n->in[0], *u = n->in[1];
	size_t half = (size_t)n->i[1] * weft_dtype_size(DT(g));
	char *dg = bw_grad(n, 0), *du = u ? bw_grad(n, 1) : (dg ? dg + half : NULL);
	const char *ud = u ? u->data : (const char *)g->data + half;

	return ctx->k->swiglu_backward(ctx->kctx, DT(g), n->i[0], n->i[1], g->data, ud, n->i[2],
				       n->out->grad->data, dg, du);
}

static weft_status swiglu_op(weft_ctx *ctx, weft_tensor *gate, weft_tensor *up,
			     weft_tensor **out)
{
	const char *op = "swiglu";
	char dg[256], du[256];
	int64_t shape[WEFT_MAX_DIMS], cols, rows, ld;
	weft_tensor *in[2] = { gate, up }, *y;
	weft_tape_node *node;
	const char *ud;
	weft_status st;

	if ((st = begin(ctx, op, out)) || (st = op_check(ctx, op, "gate", gate, 1)) ||
	    (st = NEED_KERNEL(ctx, op, swiglu_forward)) ||
	    (st = NEED_KERNEL(ctx, op, swiglu_backward)))
		return st;
	op_desc(gate, "gate", dg, sizeof(dg));
	if (gate->ndim < 1)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s needs at least 1 dim", op, dg);
	memcpy(shape, gate->shape, sizeof(shape));
	ld = gate->shape[gate->ndim - 1];
	if (up) {
		if ((st = op_check(ctx, op, "up", up, 1)) ||
		    (st = op_same_dtype(op, "gate", gate, "up", up)))
			return st;
		if (up->ndim != gate->ndim ||
		    memcmp(up->shape, gate->shape, (size_t)gate->ndim * sizeof(int64_t)))
			return weft_error_set(WEFT_ERR_SHAPE, "%s: %s and %s must have one shape", op,
					      dg, op_desc(up, "up", du, sizeof(du)));
		cols = ld;
	} else {
		if (ld % 2)
			return weft_error_set(WEFT_ERR_SHAPE, "%s: %s is one packed [gate | up] "
					      "tensor (no up given), so its last dim must be even "
					      "(2 x the intermediate size); pass up to use two "
					      "tensors", op, dg);
		cols = ld / 2;
		shape[gate->ndim - 1] = cols;
	}
	rows = ld ? weft_tensor_numel(gate) / ld : 0;
	ud = up ? up->data : (const char *)gate->data + (size_t)cols * weft_dtype_size(DT(gate));
	if ((st = op_pre_use(ctx, op, gate, WEFT_PASS_FORWARD)) ||
	    (st = op_pre_use(ctx, op, up, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(gate), gate->ndim, shape, &y)))
		return st;
	if (rows && cols)
		st = ctx->k->swiglu_forward(ctx->kctx, DT(gate), rows, cols, gate->data, ud, ld,
					    y->data);
	if (st || (st = op_record(ctx, op, swiglu_backward, y, up ? 2 : 1, in, &node)))
		return st;
	if (node) {
		node->i[0] = rows;
		node->i[1] = cols;
		node->i[2] = ld;
	}
	*out = y;
	return WEFT_OK;
}

/* ---- attention with grouped-query heads ---- */

static weft_status attention_gqa_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *qkv = n->in[0];
	int64_t B = qkv->shape[0], T = qkv->shape[1], nh = n->i[0], nkv = n->i[1], hs = n->i[2];
	size_t bytes = ctx->k->attention_gqa_scratch(DT(qkv), B, T, nh, nkv, hs);
	void *scratch = NULL;
	weft_status st;

	if (bytes && (st = op_scratch(ctx, "attention_gqa backward", bytes, &scratch)))
		return st;
	return ctx->k->attention_gqa_backward(ctx->kctx, DT(qkv), B, T, nh, nkv, hs, qkv->data,
					      n->saved[0], n->out->grad->data, bw_grad(n, 0),
					      scratch);
}

/* The fused path (the table's flash_attention_*): backward recomputes the
 * probabilities from the saved log-sum-exp and the op's own output. */
static weft_status attention_flash_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *qkv = n->in[0];
	/* the first contribution to dqkv is written, not added to zeros
	 * (node->overwrites, set where the table has the write mode) */
	weft_status (*bw)(void *, weft_dtype, int64_t, int64_t, int64_t, int64_t, int64_t,
			  const void *, const void *, const float *, const void *, void *) =
		bw_first(n, 0) ? ctx->k->flash_attention_backward_write :
				 ctx->k->flash_attention_backward;

	return bw(ctx->kctx, DT(qkv), qkv->shape[0], qkv->shape[1], n->i[0], n->i[1], n->i[2],
		  qkv->data, n->out->data, n->saved[0], n->out->grad->data, bw_grad(n, 0));
}

int op_flash_fits(const weft_ctx *ctx, int64_t hs)
{
	return HAS_KERNEL(ctx->k, flash_attention_forward) &&
	       HAS_KERNEL(ctx->k, flash_attention_backward) && hs >= 1 &&
	       hs <= WEFT_FLASH_MAX_HEAD_DIM;
}

weft_status op_attention_flash(weft_ctx *ctx, const char *op, weft_tensor *qkv, int64_t n_head,
			       int64_t n_kv_head, int64_t hs, weft_tensor **out)
{
	int64_t B = qkv->shape[0], T = qkv->shape[1], shape[3] = { B, T, n_head * hs };
	weft_tensor *y;
	weft_tape_node *node;
	void *lse;
	weft_status st;

	if ((st = op_pre_use(ctx, op, qkv, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(qkv), 3, shape, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)(B * n_head * T) * sizeof(float), &lse)))
		return st;
	if (B && T)
		st = ctx->k->flash_attention_forward(ctx->kctx, DT(qkv), B, T, n_head, n_kv_head,
						     hs, qkv->data, y->data, lse);
	if (st || (st = op_record(ctx, op, attention_flash_backward, y, 1, &qkv, &node)))
		return st;
	if (node) {
		node->i[0] = n_head;
		node->i[1] = n_kv_head;
		node->i[2] = hs;
		node->saved[0] = lse;
		if (HAS_KERNEL(ctx->k, flash_attention_backward_write))
			node->overwrites = 1u << 0;
	}
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_swiglu(weft_ctx *ctx, weft_tensor *gate, weft_tensor *up,
			   weft_tensor **out)
{
	weft_tensor *in[2] = { gate, up };
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, in, 2, &narrow);

	return st ? st : op_lowp_out(ctx, swiglu_op(ctx, in[0], in[1], out), narrow, out);
}

static weft_status attention_gqa_op(weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
				    int64_t n_kv_head, weft_tensor **out)
{
	const char *op = "attention_gqa";
	char dq[256];
	int64_t B, T, hs, shape[3];
	weft_tensor *y;
	weft_tape_node *node;
	void *att, *scratch = NULL;
	size_t bytes;
	weft_status st;

	if ((st = begin(ctx, op, out)) || (st = op_check(ctx, op, "qkv", qkv, 1)) ||
	    (st = NEED_KERNEL(ctx, op, attention_gqa_forward)) ||
	    (st = NEED_KERNEL(ctx, op, attention_gqa_backward)) ||
	    (st = NEED_KERNEL(ctx, op, attention_gqa_scratch)))
		return st;
	op_desc(qkv, "qkv", dq, sizeof(dq));
	if (qkv->ndim != 3)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s must be 3-D (batch, time, (n_head + "
				      "2 n_kv_head) * head_dim)", op, dq);
	if (n_head < 1 || n_kv_head < 1 || n_head % n_kv_head)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: n_head %lld and n_kv_head %lld: "
				      "both must be at least 1 and n_kv_head must divide n_head "
				      "(MHA: equal; MQA: n_kv_head 1)", op, (long long)n_head,
				      (long long)n_kv_head);
	if (qkv->shape[2] % (n_head + 2 * n_kv_head) || qkv->shape[2] == 0)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s with %lld query and %lld kv heads: "
				      "the last dim must be (n_head + 2 n_kv_head) * head_dim, a "
				      "positive multiple of %lld", op, dq, (long long)n_head,
				      (long long)n_kv_head, (long long)(n_head + 2 * n_kv_head));
	B = qkv->shape[0];
	T = qkv->shape[1];
	hs = qkv->shape[2] / (n_head + 2 * n_kv_head);
	shape[0] = B;
	shape[1] = T;
	shape[2] = n_head * hs;
	if (op_flash_fits(ctx, hs))
		return op_attention_flash(ctx, op, qkv, n_head, n_kv_head, hs, out);
	bytes = ctx->k->attention_gqa_scratch(DT(qkv), B, T, n_head, n_kv_head, hs);
	if ((st = op_pre_use(ctx, op, qkv, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, DT(qkv), 3, shape, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)(B * n_head * T * T) * weft_dtype_size(DT(qkv)),
			     &att)) ||
	    (bytes && (st = op_scratch(ctx, op, bytes, &scratch))))
		return st;
	if (B && T)
		st = ctx->k->attention_gqa_forward(ctx->kctx, DT(qkv), B, T, n_head, n_kv_head, hs,
						   qkv->data, y->data, att, scratch);
	if (st || (st = op_record(ctx, op, attention_gqa_backward, y, 1, &qkv, &node)))
		return st;
	if (node) {
		node->i[0] = n_head;
		node->i[1] = n_kv_head;
		node->i[2] = hs;
		node->saved[0] = att;
	}
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_attention_gqa(weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
				  int64_t n_kv_head, weft_tensor **out)
{
	weft_dtype narrow;
	weft_status st = op_lowp_in(ctx, &qkv, 1, &narrow);

	if (st)
		return st;
	return op_lowp_out(ctx, attention_gqa_op(ctx, qkv, n_head, n_kv_head, out), narrow, out);
}
