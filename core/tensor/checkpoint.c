/* Activation checkpointing (checkpoint.h): a function run twice, its
 * intermediates freed in between. */
#include <string.h>

#include "tensor/checkpoint.h"
#include "tensor/tensor_impl.h"

/* What the backward needs to run fn again as the forward did; in the tape
 * arena, saved[0] of the node. */
typedef struct ckpt_rec {
	weft_checkpoint_fn fn;
	void *user;
	uint64_t seed, step, dropout_calls;
	int64_t row_offset;
	int training;
} ckpt_rec;

typedef struct ckpt_region {
	arena_pos dev, tape;
} ckpt_region;

static void region_begin(weft_ctx *ctx, ckpt_region *r)
{
	arena_mark(ctx->arena, &r->dev);
	arena_mark(ctx->tape_arena, &r->tape);
}

static void region_end(weft_ctx *ctx, const ckpt_region *r)
{
	arena_release(ctx->arena, &r->dev);
	arena_release(ctx->tape_arena, &r->tape);
}

/* The context's random state and switches as the forward had them. */
typedef struct ckpt_state {
	uint64_t seed, step, dropout_calls;
	int64_t row_offset;
	int training, grad;
	weft_tape_node *tail;
	uint64_t pass;
} ckpt_state;

static void state_save(const weft_ctx *ctx, ckpt_state *s)
{
	*s = (ckpt_state){ .seed = ctx->seed, .step = ctx->step,
			   .dropout_calls = ctx->dropout_calls, .row_offset = ctx->row_offset,
			   .training = ctx->training, .grad = ctx->grad_enabled,
			   .tail = ctx->tail, .pass = ctx->pass };
}

static void state_restore(weft_ctx *ctx, const ckpt_state *s)
{
	ctx->seed = s->seed;
	ctx->step = s->step;
	ctx->dropout_calls = s->dropout_calls;
	ctx->row_offset = s->row_offset;
	ctx->training = s->training;
	ctx->grad_enabled = s->grad;
	ctx->tail = s->tail;
	ctx->pass = s->pass;
}

static weft_status check_result(const char *name, const weft_tensor *want, const weft_tensor *got)
{
	char a[160], b[160];

	if (got && got->dtype == want->dtype && got->ndim == want->ndim &&
	    !memcmp(got->shape, want->shape, (size_t)want->ndim * sizeof(want->shape[0])))
		return WEFT_OK;
	return weft_error_set(WEFT_ERR_INTERNAL, "checkpoint '%s': the function returned %s where "
			      "%s was declared", name, got ? weft_shape_str(got, a, sizeof(a)) : "NULL",
			      weft_shape_str(want, b, sizeof(b)));
}

static weft_status ckpt_backward(weft_ctx *ctx, weft_tape_node *n)
{
	const ckpt_rec *rec = n->saved[0];
	weft_tensor *x = n->in[0], *y = n->out, *r = NULL;
	int write_x = bw_first(n, 0);
	ckpt_region region;
	ckpt_state outer;
	weft_status st;

	region_begin(ctx, &region);
	state_save(ctx, &outer);
	ctx->seed = rec->seed;
	ctx->step = rec->step;
	ctx->dropout_calls = rec->dropout_calls;
	ctx->row_offset = rec->row_offset;
	ctx->training = rec->training;
	ctx->grad_enabled = 1;
	ctx->tail = NULL; /* the recompute's own tape, walked below */
	/* x's gradient (allocated before the region) stays unwritten when the
	 * outer walk lets this node write it, so the recomputed ops write or
	 * add exactly as they would have without checkpointing */
	if (write_x)
		x->grad->flags |= TENSOR_GRAD_UNWRITTEN;
	st = rec->fn(ctx, rec->user, x, &r);
	ctx->seed = outer.seed;
	ctx->step = outer.step;
	ctx->dropout_calls = outer.dropout_calls;
	ctx->row_offset = outer.row_offset;
	ctx->training = outer.training;
	if (!st)
		st = check_result(n->op, y, r);
	if (!st && r->producer && r->ag_stamp == ctx->stamp)
		st = weft_backward_from(ctx, r, y->grad);
	if (!st && write_x && (x->grad->flags & TENSOR_GRAD_UNWRITTEN) &&
	    weft_tensor_nbytes(x->grad))
		st = ctx->k->zero(ctx->kctx, x->grad->data, weft_tensor_nbytes(x->grad));
	if (write_x)
		x->grad->flags &= ~TENSOR_GRAD_UNWRITTEN;
	state_restore(ctx, &outer);
	region_end(ctx, &region);
	return st ? weft_error_wrap(st, "recomputing checkpoint '%s'", n->op) : WEFT_OK;
}

/* fn(x) with grad off, keeping only its result: nothing to record. */
static weft_status run_freed(weft_ctx *ctx, const char *name, weft_checkpoint_fn fn, void *user,
			     weft_tensor *x, int32_t out_ndim, const int64_t *out_shape,
			     weft_tensor **out)
{
	weft_tensor *y, *r = NULL;
	ckpt_region region;
	weft_status st = op_output(ctx, name, (weft_dtype)x->dtype, out_ndim, out_shape, &y);

	if (st)
		return st;
	region_begin(ctx, &region);
	st = fn(ctx, user, x, &r);
	if (!st)
		st = check_result(name, y, r);
	if (!st && weft_tensor_nbytes(y))
		st = ctx->k->copy(ctx->kctx, y->data, r->data, weft_tensor_nbytes(y),
				  WEFT_COPY_DEVICE_TO_DEVICE);
	region_end(ctx, &region);
	if (!st)
		*out = y;
	return st;
}

weft_status weft_checkpoint(weft_ctx *ctx, const char *name, weft_checkpoint_fn fn,
			    const void *user, size_t user_bytes, weft_tensor *x, int32_t out_ndim,
			    const int64_t *out_shape, weft_tensor **out)
{
	weft_tensor *y = NULL;
	weft_tape_node *node;
	ckpt_rec *rec;
	int grad;
	weft_status st;

	*out = NULL;
	if ((st = op_check(ctx, name, "x", x, OP_FLOAT_OR_LOWP)))
		return st;
	if (!ctx->grad_enabled)
		return run_freed(ctx, name, fn, (void *)user, x, out_ndim, out_shape, out);
	st = weft_arena_alloc(ctx->tape_arena, sizeof(*rec), 16, (void **)&rec);
	if (!st) {
		memset(rec, 0, sizeof(*rec));
		if (user_bytes)
			st = weft_arena_alloc(ctx->tape_arena, user_bytes, 16, &rec->user);
	}
	if (st)
		return weft_error_wrap(st, "checkpoint '%s': its record", name);
	if (user_bytes)
		memcpy(rec->user, user, user_bytes);
	rec->fn = fn;
	rec->seed = ctx->seed;
	rec->step = ctx->step;
	rec->dropout_calls = ctx->dropout_calls;
	rec->row_offset = ctx->row_offset;
	rec->training = ctx->training;
	grad = weft_ctx_set_grad_enabled(ctx, 0);
	st = run_freed(ctx, name, fn, rec->user, x, out_ndim, out_shape, &y);
	weft_ctx_set_grad_enabled(ctx, grad);
	if (st || (st = op_record_always(ctx, name, ckpt_backward, y, 1, &x, &node)))
		return st;
	node->saved[0] = rec;
	/* the recompute writes x's gradient where the ops would have */
	node->overwrites = 1u << 0;
	*out = y;
	return WEFT_OK;
}
