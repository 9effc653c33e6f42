/* The ops with 16-bit kernels under the gate (lowp.c): the linear layer
 * (bias, and GELU with its backward, in the product's epilogue), layernorm
 * with the residual add in front, the loss over 16-bit logits with the
 * gradient written over them. */
#include <math.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "weft/gemm_ex.h"

#define DT(t) ((weft_dtype)(t)->dtype)

static int64_t last_dim(const weft_tensor *t)
{
	return t->ndim ? t->shape[t->ndim - 1] : 1;
}

/* ---- linear, linear + GELU ----
 *
 * The node: in x, w, b; i[0..2] rows, in_f, out_f; i[3] the 16-bit dtype;
 * saved[0] x in 16 bits (x's own data when it is), saved[1] w rounded,
 * saved[2] GELU's pre-activation (aux) or NULL; u[0] 1 once a consumer's
 * backward has applied GELU's derivative to the output's gradient (the
 * DGELU epilogue of its dx product). */

static weft_status lowp_linear_backward(weft_ctx *ctx, weft_tape_node *n);

/* Whether x, the input of a linear node under the gate, is the GELU output
 * of a linear + GELU node whose gradient this backward alone makes and
 * writes whole: its dx product then takes the DGELU epilogue and gives the
 * pre-activation's gradient, which that node reads as its own. */
static weft_tape_node *gelu_producer(const weft_ctx *ctx, const weft_tape_node *n)
{
	const weft_tensor *x = n->in[0];
	weft_tape_node *p = x->producer;

	if (!p || x->ag_stamp != ctx->stamp || p->backward != lowp_linear_backward ||
	    !p->saved[2] || p->done || x->ag_pending != 1 || !bw_first(n, 0) ||
	    DT(x) != (weft_dtype)n->i[3])
		return NULL;
	return p;
}

/* dpre = dy gelu'(aux), all 16-bit, through F32 (a GELU output whose
 * gradient did not come through a fused product). */
static weft_status dgelu_apart(weft_ctx *ctx, weft_dtype lo, int64_t count, const void *aux,
			       const void *dy, void **dpre)
{
	size_t bytes = (size_t)count * sizeof(float);
	void *af, *df, *pf;
	weft_status st;

	if ((st = op_scratch(ctx, "linear_gelu backward", bytes, &af)) ||
	    (st = op_scratch(ctx, "linear_gelu backward", bytes, &df)) ||
	    (st = op_scratch(ctx, "linear_gelu backward", bytes, &pf)) ||
	    (st = op_scratch(ctx, "linear_gelu backward", (size_t)count * weft_dtype_size(lo),
			     dpre)) ||
	    (st = ctx->k->convert(ctx->kctx, count, lo, aux, WEFT_F32, af)) ||
	    (st = ctx->k->convert(ctx->kctx, count, lo, dy, WEFT_F32, df)) ||
	    (st = ctx->k->zero(ctx->kctx, pf, bytes)) ||
	    (st = ctx->k->gelu_backward(ctx->kctx, WEFT_F32, count, af, df, pf)))
		return st;
	return ctx->k->convert(ctx->kctx, count, WEFT_F32, pf, lo, *dpre);
}

/* Whether the table's gemm_lowp_ex sums the bias gradient in the weight
 * gradient's product (WEFT_EPI_BGRAD, since ABI 1.7). */
static int lowp_bgrad(const weft_ctx *ctx)
{
	return (weft_gemm_ex_epilogues(ctx->k) & (1u << WEFT_EPI_BGRAD)) != 0;
}

/* The gradients of a product y = x w^T under the gate from dy (row stride
 * ldy >= out_f, only out_f columns read), with the node fields of
 * lowp_linear_node: dx = dy w (gemm_lowp_ex in x's dtype, the epilogue epi
 * with aux), dw = dy^T x (F32), db = dy's column sums (F32); each written
 * on its first contribution, else added. dw and db are one product (its
 * BGRAD epilogue, dy read once) where the table has it and both are
 * written or both added; else db is sum_rows_lowp's, into db zeroed first
 * on its first contribution. NULL dx, dw or db: not wanted (db only where
 * ldy is out_f). */
static weft_status lowp_linear_grads(weft_ctx *ctx, const char *op, weft_tape_node *n,
				     const void *dy, int64_t ldy, void *dx, void *dw, void *db,
				     int32_t epi, void *aux)
{
	weft_dtype lo = (weft_dtype)n->i[3];
	int64_t rows = n->i[0], in_f = n->i[1], out_f = n->i[2];
	int fused = dw && db && lowp_bgrad(ctx) && bw_first(n, 1) == bw_first(n, 2);
	weft_status st = WEFT_OK;

	if (dx) /* dx = dy w, in x's dtype */
		st = ctx->k->gemm_lowp_ex(ctx->kctx, lo, 0, 0, rows, in_f, out_f, 1.0f, dy, ldy,
					  n->saved[1], in_f, bw_first(n, 0) ? 0.0f : 1.0f,
					  DT(n->in[0]), dx, in_f, NULL, epi, aux);
	if (!st && fused) /* dw = dy^T x, F32, and db in its epilogue */
		st = ctx->k->gemm_lowp_ex(ctx->kctx, lo, 1, 0, out_f, in_f, rows, 1.0f, dy, ldy,
					  n->saved[0], in_f, bw_first(n, 1) ? 0.0f : 1.0f,
					  WEFT_F32, dw, in_f, NULL, WEFT_EPI_BGRAD, db);
	else if (!st && dw) /* dw = dy^T x, F32 */
		st = autocast_gemm(ctx, op, lo, 1, 0, out_f, in_f, rows, dy, ldy, n->saved[0],
				   in_f, bw_first(n, 1) ? 0.0f : 1.0f, dw, in_f);
	if (st || !db || fused)
		return st;
	if (bw_first(n, 2) && out_f)
		st = ctx->k->zero(ctx->kctx, db, (size_t)out_f * sizeof(float));
	if (!st && rows)
		st = ctx->k->sum_rows_lowp(ctx->kctx, lo, rows, out_f, dy, db);
	return st;
}

static weft_status lowp_linear_backward(weft_ctx *ctx, weft_tape_node *n)
{
	int64_t rows = n->i[0], out_f = n->i[2];
	weft_dtype lo = (weft_dtype)n->i[3];
	const void *dy = n->out->grad->data;
	void *dx = bw_grad(n, 0), *db = bw_grad(n, 2), *aux = NULL;
	int32_t epi = WEFT_EPI_NONE;
	weft_tape_node *p = NULL;
	weft_status st = WEFT_OK;

	if (n->saved[2] && !n->u[0] && rows && out_f) /* GELU's derivative not applied yet */
		st = dgelu_apart(ctx, lo, rows * out_f, n->saved[2], dy, (void **)&dy);
	n->u[0] = 0;
	if (!st && dx && (p = gelu_producer(ctx, n))) {
		epi = WEFT_EPI_DGELU;
		aux = p->saved[2];
	}
	if (!st)
		st = lowp_linear_grads(ctx, "linear backward (16-bit)", n, dy, out_f, dx,
				       bw_grad(n, 1), db, epi, aux);
	if (!st && p)
		p->u[0] = 1;
	return st;
}

/* The operands of y = x w^T under the gate: x in lo (*xl: x's own data
 * when it has lo, else rounded into the arena) and w in lo (*wl: the
 * weight copy, else rounded; autocast_weight). */
static weft_status lowp_operands(weft_ctx *ctx, const char *op, weft_dtype lo,
				 const weft_tensor *x, int64_t rows, const weft_tensor *w,
				 void **xl, void **wl)
{
	weft_status st;

	*xl = x->data;
	if (DT(x) != lo && (st = autocast_round(ctx, op, x->data, rows * w->shape[1], lo, xl)))
		return st;
	return autocast_weight(ctx, op, w, lo, wl);
}

/* The fields every node of a product under the gate has (lowp_linear_grads
 * reads them). */
static void lowp_linear_node(weft_tape_node *node, int64_t rows, int64_t in_f, int64_t out_f,
			     weft_dtype lo, void *xl, void *wl)
{
	node->i[0] = rows;
	node->i[1] = in_f;
	node->i[2] = out_f;
	node->i[3] = lo;
	node->saved[0] = xl;
	node->saved[1] = wl;
	node->overwrites = 1u << 0 | 1u << 1; /* dx, dw: products with beta 0 */
}

/* Whether the product of x and w goes under the gate: w and b F32, x F32
 * or the context's 16-bit dtype. */
int lowp_takes(const weft_ctx *ctx, const weft_tensor *x, const weft_tensor *w,
		      const weft_tensor *b)
{
	weft_dtype lo = (weft_dtype)ctx->lowp;

	return lo != WEFT_F32 && DT(w) == WEFT_F32 && (!b || DT(b) == WEFT_F32) &&
	       (DT(x) == WEFT_F32 || DT(x) == lo);
}

weft_status lowp_linear(weft_ctx *ctx, const char *op, weft_tensor *x, weft_tensor *w,
			weft_tensor *b, int gelu, weft_tensor **out, int *handled)
{
	weft_dtype lo = (weft_dtype)ctx->lowp;
	int64_t shape[WEFT_MAX_DIMS], rows = 1, in_f = w->shape[1], out_f = w->shape[0];
	weft_tensor *in[3] = { x, w, b }, *y;
	weft_tape_node *node;
	void *xl, *wl = NULL, *aux = NULL;
	weft_status st = WEFT_OK;

	*handled = lowp_takes(ctx, x, w, b);
	if (!*handled)
		return WEFT_OK;
	for (int32_t i = 0; i < x->ndim - 1; i++)
		rows *= x->shape[i];
	memcpy(shape, x->shape, sizeof(shape));
	shape[x->ndim - 1] = out_f;
	if ((st = op_output(ctx, op, lo, x->ndim, shape, &y)) ||
	    (gelu && (st = op_scratch(ctx, op, (size_t)(rows * out_f) * weft_dtype_size(lo),
				      &aux))) ||
	    (st = lowp_operands(ctx, op, lo, x, rows, w, &xl, &wl)))
		return st;
	if (rows && out_f)
		st = ctx->k->gemm_lowp_ex(ctx->kctx, lo, 0, 1, rows, out_f, in_f, 1.0f, xl, in_f,
					  wl, in_f, 0.0f, lo, y->data, out_f, b ? b->data : NULL,
					  gelu ? WEFT_EPI_GELU : WEFT_EPI_NONE, aux);
	if (st)
		return weft_error_wrap(st, "%s (16-bit)", op);
	if ((st = op_record(ctx, op, lowp_linear_backward, y, 3, in, &node)))
		return st;
	if (node) {
		lowp_linear_node(node, rows, in_f, out_f, lo, xl, wl);
		node->saved[2] = aux;
		node->u[0] = 0;
		if (b) /* db: written by the BGRAD product or after a zero fill */
			node->overwrites |= 1u << 2;
	}
	*out = y;
	return WEFT_OK;
}

/* ---- layernorm, residual add + layernorm ---- */

/* The residual sum's node: the gradient of x + r is each input's (the
 * kernel wrote the sum in the layernorm's pass). */
static weft_status sum_backward(weft_ctx *ctx, weft_tape_node *n)
{
	int64_t count = weft_tensor_numel(n->out);
	const void *dy = n->out->grad->data;
	weft_status st = WEFT_OK;

	for (int32_t i = 0; i < 2 && !st; i++) {
		void *d = bw_grad(n, i);

		if (d && bw_first(n, i))
			st = ctx->k->copy(ctx->kctx, d, dy, weft_tensor_nbytes(n->out),
					  WEFT_COPY_DEVICE_TO_DEVICE);
		else if (d)
			st = op_axpy(ctx, DT(n->out), count, 1.0f, dy, d);
	}
	return st;
}

/* in: s (the sum, or x), w, b; i[0..1] rows, cols; saved[0..1] mean, rstd. */
static weft_status lowp_layernorm_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *s = n->in[0], *w = n->in[1];
	void *dx = bw_grad(n, 0);

	if (!n->i[0] || !n->i[1])
		return WEFT_OK;
	return ctx->k->layernorm_lowp_backward(ctx->kctx, DT(s), n->i[0], n->i[1], s->data,
					       w->data, n->saved[0], n->saved[1],
					       n->out->grad->data, dx, bw_first(n, 0), bw_grad(n, 1),
					       bw_grad(n, 2));
}

weft_status lowp_layernorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *r, weft_tensor *w,
			   weft_tensor *b, float eps, weft_tensor **sum, weft_tensor **out,
			   int *handled)
{
	const char *op = r ? "add_layernorm" : "layernorm";
	weft_dtype lo = (weft_dtype)ctx->lowp;
	weft_tensor *pair[2] = { x, r }, *s = x, *y, *in[3];
	weft_tape_node *node;
	int64_t cols = last_dim(x), rows;
	void *mean, *rstd;
	weft_status st;

	*handled = lo != WEFT_F32 && w && DT(w) == WEFT_F32 && (!b || DT(b) == WEFT_F32) &&
		   DT(x) == lo && (!r || DT(r) == lo);
	if (!*handled)
		return WEFT_OK;
	rows = cols ? weft_tensor_numel(x) / cols : 0;
	if ((r && (st = op_output(ctx, op, lo, x->ndim, x->shape, &s))) ||
	    (st = op_output(ctx, op, lo, x->ndim, x->shape, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)rows * sizeof(float), &mean)) ||
	    (st = op_scratch(ctx, op, (size_t)rows * sizeof(float), &rstd)))
		return st;
	if (rows && cols)
		st = ctx->k->layernorm_lowp_forward(ctx->kctx, lo, rows, cols, eps, x->data,
						    r ? r->data : NULL, r ? s->data : NULL,
						    w->data, b ? b->data : NULL, y->data, mean,
						    rstd);
	if (st)
		return weft_error_wrap(st, "%s (16-bit)", op);
	if (r && (st = op_record(ctx, "add", sum_backward, s, 2, pair, &node)))
		return st;
	if (r && node) /* both gradients are dy's, as add's */
		node->overwrites = node->passes = 1u << 0 | 1u << 1;
	in[0] = s;
	in[1] = w;
	in[2] = b;
	if ((st = op_record(ctx, op, lowp_layernorm_backward, y, 3, in, &node)))
		return st;
	if (node) {
		node->i[0] = rows;
		node->i[1] = cols;
		node->saved[0] = mean;
		node->saved[1] = rstd;
		node->overwrites = 1u << 0; /* dx_write */
	}
	if (sum)
		*sum = s;
	*out = y;
	return WEFT_OK;
}

/* ---- cross-entropy over 16-bit logits ---- */

/* The node of op_record_loss, saved[0] the lse. The gradient is written whole
 * (0 on ignored rows), over the logits when this is their last use. */
static weft_status lowp_ce_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *z = n->in[0];
	void *dz = bw_grad(n, 0), *dst = dz;
	weft_status st = WEFT_OK;

	if (!dz || !n->i[0])
		return WEFT_OK;
	/* a gradient with another contribution already: written apart, added */
	if (!bw_first(n, 0))
		st = op_scratch(ctx, "cross_entropy backward", weft_tensor_nbytes(z), &dst);
	if (!st)
		st = ctx->k->cross_entropy_lowp_backward(ctx->kctx, DT(z), n->i[0], n->i[1], n->i[1],
							 z->data, (weft_dtype)n->i[2], n->saved[1],
							 n->i[3], n->saved[0], n->out->grad->data,
							 n->saved[2], dst);
	if (!st && dst != dz)
		st = op_axpy(ctx, DT(z), weft_tensor_numel(z), 1.0f, dst, dz);
	return st;
}

/* The 16-bit loss kernels do not check targets (kernels.h): on the host's
 * memory the op does, as the F32 kernel would; on a device the trainer's
 * data check (weft_data_module_check_ids) has. */
static weft_status check_host_targets(const weft_ctx *ctx, const weft_tensor *targets,
				      int64_t rows, int64_t vocab, int64_t ignore_index)
{
	if (ctx->dev.type != WEFT_DEVICE_CPU)
		return WEFT_OK;
	for (int64_t r = 0; r < rows; r++) {
		int64_t t = targets->dtype == WEFT_I32 ? ((const int32_t *)targets->data)[r] :
							 ((const int64_t *)targets->data)[r];

		if (t != ignore_index && (t < 0 || t >= vocab))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "cross_entropy: row %lld has "
					      "target %lld, outside [0, %lld) and not the "
					      "ignore_index %lld; check the data's token ids "
					      "against the model's vocab_size", (long long)r,
					      (long long)t, (long long)vocab,
					      (long long)ignore_index);
	}
	return WEFT_OK;
}

weft_status lowp_cross_entropy(weft_ctx *ctx, weft_tensor *logits, weft_tensor *targets,
			       int64_t ignore_index, weft_tensor **out, int *handled)
{
	const char *op = "cross_entropy";
	int64_t V = last_dim(logits), rows = weft_tensor_numel(targets);
	weft_tensor *y;
	weft_tape_node *node;
	void *lse, *count;
	weft_status st;

	*handled = ctx->lowp != WEFT_F32 && DT(logits) == (weft_dtype)ctx->lowp;
	if (!*handled)
		return WEFT_OK;
	if ((st = check_host_targets(ctx, targets, rows, V, ignore_index)) ||
	    (st = op_output(ctx, op, WEFT_F32, 0, NULL, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)(rows ? rows : 1) * sizeof(float), &lse)) ||
	    (st = op_scratch(ctx, op, sizeof(float), &count)))
		return st;
	st = ctx->k->cross_entropy_lowp_forward(ctx->kctx, DT(logits), rows, V, V, logits->data,
						DT(targets), targets->data, ignore_index, lse,
						y->data, count);
	if (st)
		return weft_error_wrap(st, "%s (16-bit logits)", op);
	if ((st = op_record_loss(ctx, op, lowp_ce_backward, y, logits, targets, ignore_index, lse,
				 count, &node)))
		return st;
	if (node) {
		node->overwrites = 1u << 0;
		node->in_place = 1u << 0;
	}
	*out = y;
	return WEFT_OK;
}

/* ---- the classifier head and its loss in one op ----
 *
 * Under the gate the logits live only in arena scratch, rows of V with the
 * row stride ld = V rounded up to a multiple of LOGITS_ALIGN elements, so
 * that every product over them has aligned leading dimensions (a 16-bit
 * row of 50257 is not, and sends the tensor cores' fused epilogue to an
 * F32 product written and read again). The padding columns are never
 * written and never read: the forward product writes n = V columns, the
 * loss kernels read V, and the backward's products take k = V (dx) or
 * m = V (dw) of them.
 *
 * When the op records a node and the table has the fused classifier (ABI
 * 1.7), the forward's one pass over the logits also writes the loss's
 * gradient over them, for the upstream gradient the context expects
 * (ctx->loss_grad_hint: 1, or the trainer's loss scale); the backward then
 * only corrects it on the device (nothing runs over the logits when the
 * real upstream gradient is the hint) before the products. Evaluation (no
 * node) and tables without it keep the forward alone, the gradient made
 * in the backward. */

#define LOGITS_ALIGN 128

/* What the head's backward needs beyond lowp_linear_node's fields (host,
 * in the tape arena; saved[2] of the node). */
typedef struct head_loss {
	void *logits;       /* rows x ld, lo; the gradient replaces them */
	int64_t ld;
	float *lse, *count; /* the loss kernel's statistics (device) */
	const void *targets;
	weft_dtype idx_dt;
	int64_t ignore_index;
	int fused;          /* the forward wrote the gradient for `hint` */
	float hint;
} head_loss;

/* Whether the head's forward makes the loss's gradient too (the fused
 * classifier, ABI 1.7): it records a node (x or w wants a gradient), the
 * table has both members, and the context's expected upstream gradient
 * is one they take (finite, not 0). */
static int head_fuses(const weft_ctx *ctx, const weft_tensor *x, const weft_tensor *w)
{
	const weft_kernel_table *k = ctx->k;
	float h = ctx->loss_grad_hint;

	return (op_needs_grad(ctx, x) || op_needs_grad(ctx, w)) &&
	       WEFT_HAS_MEMBER(k, weft_kernel_table, cross_entropy_lowp_regrad) &&
	       k->cross_entropy_lowp_fused && k->cross_entropy_lowp_regrad && isfinite(h) &&
	       h != 0.0f;
}

/* dlogits in place of the logits (fused: the forward's, corrected on the
 * device when the upstream gradient is not the hint), then dx and dw from
 * them with the padded stride. */
static weft_status head_loss_backward(weft_ctx *ctx, weft_tape_node *n)
{
	const head_loss *hl = n->saved[2];
	weft_dtype lo = (weft_dtype)n->i[3];
	void *dx = bw_grad(n, 0), *dw = bw_grad(n, 1);
	weft_status st;

	if ((!dx && !dw) || !n->i[0])
		return WEFT_OK;
	if (hl->fused)
		st = ctx->k->cross_entropy_lowp_regrad(ctx->kctx, lo, n->i[0], n->i[2], hl->ld,
						       hl->logits, hl->idx_dt, hl->targets,
						       hl->ignore_index, hl->hint,
						       n->out->grad->data);
	else
		st = ctx->k->cross_entropy_lowp_backward(ctx->kctx, lo, n->i[0], n->i[2], hl->ld,
							 hl->logits, hl->idx_dt, hl->targets,
							 hl->ignore_index, hl->lse,
							 n->out->grad->data, hl->count,
							 hl->logits);
	if (!st)
		st = lowp_linear_grads(ctx, "linear_cross_entropy backward (16-bit)", n,
				       hl->logits, hl->ld, dx, dw, NULL, WEFT_EPI_NONE, NULL);
	return st;
}

/* The fused head under the gate; x (rows, C) of F32 or lo, w (V, C) F32,
 * shapes checked by the caller. */
weft_status lowp_head_loss(weft_ctx *ctx, const char *op, weft_tensor *x, weft_tensor *w,
			   weft_tensor *targets, int64_t ignore_index, weft_tensor **out)
{
	weft_dtype lo = (weft_dtype)ctx->lowp;
	int64_t rows = weft_tensor_numel(targets), C = w->shape[1], V = w->shape[0];
	weft_tensor *in[2] = { x, w }, *y;
	weft_tape_node *node;
	head_loss *hl;
	void *xl, *wl;
	weft_status st;

	if ((st = weft_arena_alloc(ctx->tape_arena, sizeof(*hl), 0, (void **)&hl)))
		return weft_error_wrap(st, "%s: the tape", op);
	hl->ld = (V + LOGITS_ALIGN - 1) / LOGITS_ALIGN * LOGITS_ALIGN;
	hl->targets = targets->data;
	hl->idx_dt = DT(targets);
	hl->ignore_index = ignore_index;
	hl->fused = head_fuses(ctx, x, w);
	hl->hint = ctx->loss_grad_hint;
	if ((st = check_host_targets(ctx, targets, rows, V, ignore_index)) ||
	    (st = op_output(ctx, op, WEFT_F32, 0, NULL, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)(rows * hl->ld) * weft_dtype_size(lo),
			     &hl->logits)) ||
	    (st = op_scratch(ctx, op, (size_t)(rows ? rows : 1) * sizeof(float),
			     (void **)&hl->lse)) ||
	    (st = op_scratch(ctx, op, sizeof(float), (void **)&hl->count)) ||
	    (st = lowp_operands(ctx, op, lo, x, rows, w, &xl, &wl)))
		return st;
	if (rows && V)
		st = ctx->k->gemm_lowp_ex(ctx->kctx, lo, 0, 1, rows, V, C, 1.0f, xl, C, wl, C, 0.0f,
					  lo, hl->logits, hl->ld, NULL, WEFT_EPI_NONE, NULL);
	if (!st && hl->fused)
		st = ctx->k->cross_entropy_lowp_fused(ctx->kctx, lo, rows, V, hl->ld, hl->logits,
						      hl->idx_dt, hl->targets, ignore_index,
						      hl->hint, hl->lse, y->data, hl->count);
	else if (!st)
		st = ctx->k->cross_entropy_lowp_forward(ctx->kctx, lo, rows, V, hl->ld, hl->logits,
							hl->idx_dt, hl->targets, ignore_index,
							hl->lse, y->data, hl->count);
	if (st)
		return weft_error_wrap(st, "%s (16-bit)", op);
	if ((st = op_record(ctx, op, head_loss_backward, y, 2, in, &node)))
		return st;
	if (node) {
		lowp_linear_node(node, rows, C, V, lo, xl, wl);
		node->saved[2] = hl;
	}
	*out = y;
	return WEFT_OK;
}

/* Whether x, w and targets fit the fused head: x (..., C), w (V, C),
 * targets x's shape without its last dim. */
