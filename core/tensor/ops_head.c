/* weft_op_linear_cross_entropy: the classifier head and its loss as one
 * op. Under the gate the fused node of ops_lowp.c (logits in padded rows
 * of arena scratch, never a tensor); otherwise the linear layer, then the
 * loss. Above ops_basic.c, ops_layers.c and ops_lowp.c, which it calls. */
#include <string.h>

#include "tensor/tensor_impl.h"

static int head_shapes_fit(const weft_tensor *x, const weft_tensor *w,
			   const weft_tensor *targets)
{
	return x->ndim >= 1 && w->ndim == 2 && x->shape[x->ndim - 1] == w->shape[1] &&
	       targets->ndim == x->ndim - 1 &&
	       !memcmp(targets->shape, x->shape, (size_t)targets->ndim * sizeof(int64_t));
}

weft_status weft_op_linear_cross_entropy(weft_ctx *ctx, weft_tensor *x, weft_tensor *w,
					 weft_tensor *targets, int64_t ignore_index,
					 weft_tensor **out)
{
	const char *op = "linear_cross_entropy";
	weft_tensor *logits;
	weft_status st;

	if (!out)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out is NULL", op);
	*out = NULL;
	if (!ctx)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the context is NULL", op);
	if ((st = op_check(ctx, op, "x", x, OP_FLOAT_OR_LOWP)) ||
	    (st = op_check(ctx, op, "w", w, 1)) || (st = op_check(ctx, op, "targets", targets, 0)))
		return st;
	/* off the gate, or shapes the composed ops will name: linear, then the loss */
	if (!lowp_takes(ctx, x, w, NULL) || !head_shapes_fit(x, w, targets)) {
		st = weft_op_linear(ctx, x, w, NULL, &logits);
		return st ? st : weft_op_cross_entropy(ctx, logits, targets, ignore_index, out);
	}
	if ((st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_pre_use(ctx, op, w, WEFT_PASS_FORWARD)))
		return st;
	return lowp_head_loss(ctx, op, x, w, targets, ignore_index, out);
}
