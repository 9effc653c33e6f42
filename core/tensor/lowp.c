/* 16-bit activations: the gate (weft_ctx_set_lowp_activations), the cast
 * op, and how ops without 16-bit kernels take 16-bit tensors (widened to
 * F32, their output rounded back as the 16-bit kernel would store it). The
 * ops with 16-bit kernels are in ops_lowp.c. */
#include "tensor/tensor_impl.h"

#define DT(t) ((weft_dtype)(t)->dtype)

int lowp_table_complete(const weft_kernel_table *k)
{
	return WEFT_HAS_MEMBER(k, weft_kernel_table, cross_entropy_lowp_backward) &&
	       k->gemm_lowp && k->gemm_lowp_ex && k->sum_rows_lowp && k->layernorm_lowp_forward &&
	       k->layernorm_lowp_backward && k->cross_entropy_lowp_forward &&
	       k->cross_entropy_lowp_backward;
}

void lowp_update(weft_ctx *ctx)
{
	weft_dtype dt = (weft_dtype)ctx->autocast;
	int on = 0;

	if (dt != WEFT_F32 && lowp_table_complete(ctx->k)) {
		if (ctx->lowp_mode == WEFT_LOWP_ACT_ON)
			on = 1;
		else if (ctx->lowp_mode == WEFT_LOWP_ACT_AUTO)
			on = (ctx->k->lowp_act_dtypes & WEFT_DTYPE_BIT(dt)) != 0;
	}
	ctx->lowp = on ? (int32_t)dt : (int32_t)WEFT_F32;
}

weft_status weft_ctx_set_lowp_activations(weft_ctx *ctx, weft_lowp_act mode)
{
	const weft_kernel_table *k;
	char dev[32];

	if (!ctx)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "lowp activations: the context is NULL");
	if (mode != WEFT_LOWP_ACT_AUTO && mode != WEFT_LOWP_ACT_ON && mode != WEFT_LOWP_ACT_OFF)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "lowp activations: unknown mode %d "
				      "(auto 0, on 1, off 2)", (int)mode);
	k = ctx->k;
	if (mode == WEFT_LOWP_ACT_ON && !lowp_table_complete(k))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "16-bit activations: the '%s' kernel "
				      "table (device %s, ABI %u.%u) lacks the members they need "
				      "(gemm_lowp_ex, sum_rows_lowp, layernorm_lowp_*, "
				      "cross_entropy_lowp_*, since ABI 1.6); rebuild that kernel "
				      "library against this weft's SDK, or set "
				      "trainer.lowp_activations to auto or false",
				      k->head.name ? k->head.name : "?",
				      weft_device_str(ctx->dev, dev, sizeof(dev)),
				      WEFT_ABI_VERSION_MAJOR(k->head.abi_version),
				      WEFT_ABI_VERSION_MINOR(k->head.abi_version));
	ctx->lowp_mode = (int32_t)mode;
	lowp_update(ctx);
	return WEFT_OK;
}

weft_dtype weft_ctx_lowp_activations(const weft_ctx *ctx)
{
	return ctx ? (weft_dtype)ctx->lowp : WEFT_F32;
}

/* ---- cast ---- */

/* dx (x's dtype) += or = dy (the output's dtype) converted. */
static weft_status cast_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_dtype xd = DT(n->in[0]), yd = DT(n->out);
	int64_t count = weft_tensor_numel(n->out);
	const void *dy = n->out->grad->data;
	void *dx = bw_grad(n, 0), *tmp;
	weft_status st;

	if (!dx || !count)
		return WEFT_OK;
	if (bw_first(n, 0))
		return ctx->k->convert(ctx->kctx, count, yd, dy, xd, dx);
	if ((st = op_scratch(ctx, "cast backward", (size_t)count * sizeof(float), &tmp)))
		return st;
	if (yd != WEFT_F32) { /* x is F32: its gradient adds the widened dy */
		st = ctx->k->convert(ctx->kctx, count, yd, dy, WEFT_F32, tmp);
		return st ? st : ctx->k->axpy(ctx->kctx, WEFT_F32, count, 1.0f, tmp, dx);
	}
	/* x is 16-bit: its gradient widened, added to, rounded once */
	if ((st = ctx->k->convert(ctx->kctx, count, xd, dx, WEFT_F32, tmp)) ||
	    (st = ctx->k->axpy(ctx->kctx, WEFT_F32, count, 1.0f, dy, tmp)))
		return st;
	return ctx->k->convert(ctx->kctx, count, WEFT_F32, tmp, xd, dx);
}

weft_status op_cast(weft_ctx *ctx, weft_tensor *x, weft_dtype dt, weft_tensor **out)
{
	const char *op = "cast";
	weft_tensor *y;
	weft_tape_node *node;
	weft_status st;

	if (DT(x) == dt) {
		*out = x;
		return WEFT_OK;
	}
	if ((st = op_pre_use(ctx, op, x, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, dt, x->ndim, x->shape, &y)))
		return st;
	if (weft_tensor_numel(x))
		st = ctx->k->convert(ctx->kctx, weft_tensor_numel(x), DT(x), x->data, dt, y->data);
	if (st || (st = op_record(ctx, op, cast_backward, y, 1, &x, &node)))
		return st;
	if (node)
		node->overwrites = 1u << 0; /* the first gradient is a conversion */
	*out = y;
	return WEFT_OK;
}

weft_status weft_op_cast(weft_ctx *ctx, weft_tensor *x, weft_dtype dt, weft_tensor **out)
{
	const char *op = "cast";
	weft_status st;

	if (!out || !ctx)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: out or the context is NULL", op);
	*out = NULL;
	if ((st = op_check(ctx, op, "x", x, OP_FLOAT_OR_LOWP)))
		return st;
	if (dt != WEFT_F32 && dt != (weft_dtype)ctx->lowp &&
	    ((unsigned)dt >= WEFT_DTYPE_COUNT || !(ctx->k->float_dtypes & WEFT_DTYPE_BIT(dt))))
		return weft_error_set(WEFT_ERR_DTYPE, "%s: to %s, which the %s kernels do not "
				      "compute in; cast to F32 or to the activations' dtype", op,
				      (unsigned)dt < WEFT_DTYPE_COUNT ? weft_dtype_name(dt) : "?",
				      ctx->k->head.name);
	return op_cast(ctx, x, dt, out);
}

/* ---- ops without 16-bit kernels ---- */

weft_status op_lowp_in(weft_ctx *ctx, weft_tensor **in, int32_t n, weft_dtype *narrow)
{
	weft_dtype lo = ctx ? (weft_dtype)ctx->lowp : WEFT_F32;
	int any_lo = 0, any_f32 = 0;
	weft_status st;

	*narrow = WEFT_F32;
	if (lo == WEFT_F32)
		return WEFT_OK;
	for (int32_t i = 0; i < n; i++) {
		if (in[i] && DT(in[i]) == lo)
			any_lo = 1;
		else if (in[i] && DT(in[i]) == WEFT_F32)
			any_f32 = 1;
	}
	if (!any_lo || (!any_f32 && (ctx->k->float_dtypes & WEFT_DTYPE_BIT(lo))))
		return WEFT_OK;
	for (int32_t i = 0; i < n; i++)
		if (in[i] && DT(in[i]) == lo && (st = op_cast(ctx, in[i], WEFT_F32, &in[i])))
			return st;
	*narrow = any_f32 ? WEFT_F32 : lo;
	return WEFT_OK;
}

weft_status op_lowp_out(weft_ctx *ctx, weft_status st, weft_dtype narrow, weft_tensor **out)
{
	if (st || narrow == WEFT_F32 || !out || !*out)
		return st;
	return op_cast(ctx, *out, narrow, out);
}

weft_status op_axpy(weft_ctx *ctx, weft_dtype dt, int64_t n, float alpha, const void *x,
		    void *y)
{
	size_t bytes = (size_t)n * sizeof(float);
	void *xf, *yf;
	weft_status st;

	if (ctx->k->float_dtypes & WEFT_DTYPE_BIT(dt))
		return ctx->k->axpy(ctx->kctx, dt, n, alpha, x, y);
	if ((st = op_scratch(ctx, "axpy (widened)", bytes, &xf)) ||
	    (st = op_scratch(ctx, "axpy (widened)", bytes, &yf)) ||
	    (st = ctx->k->convert(ctx->kctx, n, dt, x, WEFT_F32, xf)) ||
	    (st = ctx->k->convert(ctx->kctx, n, dt, y, WEFT_F32, yf)) ||
	    (st = ctx->k->axpy(ctx->kctx, WEFT_F32, n, alpha, xf, yf)))
		return st;
	return ctx->k->convert(ctx->kctx, n, WEFT_F32, yf, dt, y);
}

weft_status weft_lowp_act_parse(const weft_cfg *trainer, weft_dtype autocast, int *mode)
{
	static const char *const modes[] = { "auto", "true", "false", NULL };
	weft_status st = weft_cfg_choice(trainer, "lowp_activations", modes, "auto", mode);

	/* the choices' order is weft_lowp_act's: auto 0, on 1, off 2 */
	if (!st && *mode == WEFT_LOWP_ACT_ON && autocast == WEFT_F32)
		return weft_cfg_error(weft_cfg_get(trainer, "lowp_activations"),
				      "is true, but trainer.precision is 32-true: 16-bit "
				      "activations come with bf16-mixed or 16-mixed; set "
				      "trainer.precision: bf16-mixed, or lowp_activations: auto");
	return st;
}
