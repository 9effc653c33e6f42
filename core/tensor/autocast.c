/* Autocast: mixed precision's matrix products (bf16-mixed, 16-mixed).
 *
 * Parameters, gradients, optimizer state and every op but the linear
 * layer's products stay F32. Under autocast a linear layer rounds its input
 * x and weight w to the context's 16-bit dtype (into the step's arena) and
 * multiplies them with the kernel table's gemm_lowp, which accumulates in
 * F32: what a tensor core does with bf16/f16 operands (cublasGemmEx with
 * 16-bit A and B, F32 C). The backward rounds dy the same way and reuses
 * the rounded x and w of the forward, so each weight is cast once per
 * forward - or never, when the context reads the parameters' 16-bit copy
 * (weft_ctx_use_params_copy: one copy of every F32 weight, kept across
 * steps and refreshed after each optimizer step; weft_params_copy_refresh
 * rounds the whole flat buffer in one conversion, as a product here would
 * round each weight, so the products see the same bits). On the CPU
 * gemm_lowp is a reference (widen, then sgemm), so the same path runs, and
 * is tested, without a GPU. With 16-bit activations
 * on (lowp.c, ops_lowp.c) the linear layer takes the 16-bit path there
 * instead; this one serves F32 activations (the CPU's default). */
#include <stdint.h>

#include "tensor/tensor_impl.h"

weft_status weft_ctx_set_autocast(weft_ctx *ctx, weft_dtype dt)
{
	char dev[32];

	if (dt != WEFT_F32 && dt != WEFT_BF16 && dt != WEFT_F16)
		return weft_error_set(WEFT_ERR_DTYPE, "autocast to %s: matrix products can take "
				      "their inputs in bf16 or f16 (or f32: off)",
				      weft_dtype_name(dt));
	if (dt != WEFT_F32 &&
	    (!WEFT_HAS_MEMBER(ctx->k, weft_kernel_table, gemm_lowp) || !ctx->k->gemm_lowp))
		return weft_error_set(WEFT_ERR_UNSUPPORTED,
				      "autocast to %s: the %s kernels have no low-precision matrix "
				      "product (gemm_lowp); run with precision 32-true on this "
				      "device", weft_dtype_name(dt),
				      weft_device_str(ctx->dev, dev, sizeof(dev)));
	ctx->autocast = (int32_t)dt;
	lowp_update(ctx);
	return WEFT_OK;
}

weft_dtype weft_ctx_autocast(const weft_ctx *ctx)
{
	return (weft_dtype)ctx->autocast;
}

weft_status weft_ctx_use_params_copy(weft_ctx *ctx, const weft_params *ps)
{
	weft_tensor *copy = ps ? weft_params_copy(ps) : NULL, *flat = NULL;

	if (!ctx)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "use_params_copy: the context is NULL");
	ctx->copy_src = NULL;
	ctx->copy_numel = 0;
	ctx->copy = NULL;
	ctx->copy_dt = WEFT_F32;
	if (!ps)
		return WEFT_OK;
	weft_params_flat(ps, WEFT_F32, &flat, NULL);
	if (!copy || !flat)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "use_params_copy: the parameter set "
				      "keeps no 16-bit copy; call weft_params_copy_enable first");
	if (copy->device.type != ctx->dev.type || copy->device.index != ctx->dev.index)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "use_params_copy: the parameters live on "
				      "another device than the context; use the model's context");
	ctx->copy_src = flat->data;
	ctx->copy_numel = weft_tensor_numel(flat);
	ctx->copy = copy->data;
	ctx->copy_dt = copy->dtype;
	return WEFT_OK;
}

weft_status weft_params_copy_refresh(const weft_params *ps, weft_ctx *ctx)
{
	weft_tensor *copy = ps ? weft_params_copy(ps) : NULL, *flat = NULL;

	if (!ctx || !copy)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "params_copy_refresh: %s",
				      ctx ? "the parameter set keeps no 16-bit copy; call "
					    "weft_params_copy_enable first" : "the context is NULL");
	weft_params_flat(ps, WEFT_F32, &flat, NULL);
	return ctx->k->convert(ctx->kctx, weft_tensor_numel(flat), WEFT_F32, flat->data,
			       (weft_dtype)copy->dtype, copy->data);
}

weft_status autocast_weight(weft_ctx *ctx, const char *op, const weft_tensor *w, weft_dtype lo,
			    void **out)
{
	uintptr_t p = (uintptr_t)w->data, src = (uintptr_t)ctx->copy_src;
	int64_t n = weft_tensor_numel(w), at = (int64_t)((p - src) / sizeof(float));

	/* w inside the mirrored buffer: its elements [at, at + n) of it */
	if (ctx->copy && (weft_dtype)ctx->copy_dt == lo && w->dtype == WEFT_F32 && p >= src &&
	    (p - src) % sizeof(float) == 0 && at < ctx->copy_numel &&
	    n <= ctx->copy_numel - at) {
		*out = (char *)ctx->copy + (size_t)at * weft_dtype_size(lo);
		return WEFT_OK;
	}
	return autocast_round(ctx, op, w->data, n, lo, out);
}

weft_status autocast_round(weft_ctx *ctx, const char *op, const void *src, int64_t n,
			  weft_dtype lo, void **out)
{
	weft_status st = op_scratch(ctx, op, (size_t)n * weft_dtype_size(lo), out);

	if (!st)
		st = ctx->k->convert(ctx->kctx, n, WEFT_F32, src, lo, *out);
	return st;
}

weft_status autocast_gemm(weft_ctx *ctx, const char *op, weft_dtype lo, int trans_a,
			  int trans_b, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
			  const void *b, int64_t ldb, float beta, void *c, int64_t ldc)
{
	const weft_kernel_table *kt = ctx->k;
	int64_t na = weft_gemm_span(trans_a ? k : m, trans_a ? m : k, lda, 0, 1);
	int64_t nb = weft_gemm_span(trans_b ? n : k, trans_b ? k : n, ldb, 0, 1);
	size_t bytes = kt->gemm_lowp_scratch ? kt->gemm_lowp_scratch(lo, na, nb) : 0;
	void *scratch = NULL;
	weft_status st;

	if (bytes && (st = op_scratch(ctx, op, bytes, &scratch)))
		return st;
	return kt->gemm_lowp(ctx->kctx, lo, trans_a, trans_b, m, n, k, 1.0f, a, lda, 0, b, ldb,
			     0, beta, c, ldc, 0, 1, scratch);
}

weft_status autocast_linear_forward(weft_ctx *ctx, const weft_tensor *x, const weft_tensor *w,
				    const weft_tensor *b, int64_t rows, int64_t in_f,
				    int64_t out_f, weft_tensor *y, void **saved)
{
	weft_dtype lo = (weft_dtype)ctx->autocast;
	weft_status st;

	saved[0] = saved[1] = NULL;
	if ((st = autocast_round(ctx, "linear (autocast x)", x->data, rows * in_f, lo, &saved[0])) ||
	    (st = autocast_weight(ctx, "linear (autocast w)", w, lo, &saved[1])) ||
	    (st = autocast_gemm(ctx, "linear (autocast)", lo, 0, 1, rows, out_f, in_f, saved[0], in_f,
			   saved[1], in_f, 0.0f, y->data, out_f)))
		return st;
	if (b)
		st = ctx->k->add(ctx->kctx, WEFT_F32, rows * out_f, y->data, out_f, b->data, y->data);
	return st;
}

weft_status autocast_linear_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_dtype lo = (weft_dtype)n->i[3];
	int64_t rows = n->i[0], in_f = n->i[1], out_f = n->i[2];
	const void *dy = n->out->grad->data;
	void *dx = bw_grad(n, 0), *dw = bw_grad(n, 1), *db = bw_grad(n, 2), *dyl = NULL;
	weft_status st = WEFT_OK;

	if (dx || dw)
		st = autocast_round(ctx, "linear backward (autocast dy)", dy, rows * out_f, lo, &dyl);
	if (!st && dx) /* dx = dy w */
		st = autocast_gemm(ctx, "linear backward (autocast)", lo, 0, 0, rows, in_f, out_f, dyl,
			      out_f, n->saved[1], in_f, bw_first(n, 0) ? 0.0f : 1.0f, dx, in_f);
	if (!st && dw) /* dw = dy^T x */
		st = autocast_gemm(ctx, "linear backward (autocast)", lo, 1, 0, out_f, in_f, rows, dyl,
			      out_f, n->saved[0], in_f, bw_first(n, 1) ? 0.0f : 1.0f, dw, in_f);
	if (!st && db)
		st = ctx->k->sum_rows(ctx->kctx, WEFT_F32, rows, out_f, dy, db);
	return st;
}
