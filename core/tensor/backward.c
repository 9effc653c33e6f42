/* Reverse-mode backward over the tape, with the gradient-final, pre-use and
 * module hooks. */
#include <string.h>

#include "tensor/tensor_impl.h"

/* Gives t (no gradient yet) an arena gradient over `data` (NULL: new
 * arena memory) with the given flags besides WEFT_TENSOR_IN_ARENA. */
static weft_status grad_attach(weft_ctx *ctx, weft_tensor *t, void *data, uint32_t flags)
{
	weft_tensor *g;
	weft_status st = weft_arena_alloc(ctx->tape_arena, sizeof(*g), 16, (void **)&g);

	if (!st && !data)
		st = weft_arena_alloc(ctx->arena, weft_tensor_nbytes(t), 64, &data);
	if (st)
		return weft_error_wrap(st, "backward: gradient of '%s'", t->name ? t->name : "");
	weft_tensor_init(g, (weft_dtype)t->dtype, t->ndim, t->shape, t->device, NULL);
	g->data = g->base = data;
	g->flags = WEFT_TENSOR_IN_ARENA | flags;
	g->name = "grad";
	t->grad = g;
	t->flags |= WEFT_TENSOR_GRAD_IN_ARENA;
	return WEFT_OK;
}

weft_status grad_of(weft_ctx *ctx, weft_tensor *t, void **out)
{
	weft_status st = t->grad ? WEFT_OK : grad_attach(ctx, t, NULL, TENSOR_GRAD_UNWRITTEN);

	if (!st)
		*out = t->grad->data;
	return st;
}

/* Whether input i of n is also another of n's inputs. */
static int passed_twice(const weft_tape_node *n, int32_t i)
{
	for (int32_t j = 0; j < n->n_in; j++)
		if (j != i && n->in[j] == n->in[i])
			return 1;
	return 0;
}

typedef struct open_module {
	weft_tape_node *end;
	int fired;
} open_module;

static weft_status fire_module(weft_ctx *ctx, weft_hook_kind kind, const weft_tape_node *m)
{
	weft_hook_event ev = { .kind = kind, .pass = WEFT_PASS_BACKWARD, .module = m->op,
			       .module_ptr = m->module_ptr };

	return hooks_fire(ctx, &ev);
}

static weft_status fire_grad_final(weft_ctx *ctx, weft_tensor *p)
{
	weft_hook_event ev = { .kind = WEFT_HOOK_GRAD_FINAL, .pass = WEFT_PASS_BACKWARD,
			       .param = p };

	return hooks_fire(ctx, &ev);
}

/* Zeroes t's gradient if nothing has written it yet this step. */
static weft_status grad_settle(weft_ctx *ctx, weft_tensor *t)
{
	weft_tensor *g = t->grad;
	weft_status st = WEFT_OK;

	if (!g || !(g->flags & TENSOR_GRAD_UNWRITTEN))
		return WEFT_OK;
	if (weft_tensor_nbytes(g))
		st = ctx->k->zero(ctx->kctx, g->data, weft_tensor_nbytes(g));
	g->flags &= ~TENSOR_GRAD_UNWRITTEN;
	return st;
}

/* Which inputs of n the backward must write rather than accumulate into:
 * those with an unwritten gradient that the op can write, each used once by
 * n (a tensor passed twice gets one zero fill and two additions). The other
 * unwritten gradients are zeroed here. */
static weft_status plan_writes(weft_ctx *ctx, weft_tape_node *n)
{
	weft_status st;

	n->fresh = 0;
	for (int32_t i = 0; i < n->n_in; i++) {
		weft_tensor *t = n->in[i];

		if (!bw_wants(n, i) || !(t->grad->flags & TENSOR_GRAD_UNWRITTEN))
			continue;
		if (!passed_twice(n, i) && ((n->overwrites >> i) & 1u)) {
			n->fresh |= 1u << i;
			continue;
		}
		if ((st = grad_settle(ctx, t)))
			return st;
	}
	return WEFT_OK;
}

/* Whether input i of n may take n's output gradient buffer: n's backward
 * would give it exactly that gradient (n->passes), and it has no gradient
 * yet, is not a parameter, is not passed twice, and has the output's dtype
 * and bytes. */
static int may_take(const weft_tape_node *n, int32_t i)
{
	const weft_tensor *t = n->in[i], *o = n->out;

	return ((n->passes >> i) & 1u) && t && !t->grad && (t->flags & WEFT_TENSOR_REQUIRES_GRAD) &&
	       !(t->flags & WEFT_TENSOR_PARAM) && t->dtype == o->dtype &&
	       weft_tensor_nbytes(t) == weft_tensor_nbytes(o) && !passed_twice(n, i);
}

/* Whether input i of n, which may take n's output gradient buffer, can
 * share it with another input that owns it: n is its only use, and its
 * producer's backward runs right after n's (no op in between on the tape)
 * and reads the buffer as its output gradient before anything can add to
 * it, and hands it to no input of its own (pass_grad also checks that the
 * owner is not one of that producer's inputs). */
static int may_share(const weft_ctx *ctx, const weft_tape_node *n, int32_t i)
{
	const weft_tensor *t = n->in[i];
	const weft_tape_node *next = n->prev;

	while (next && next->kind != TAPE_OP)
		next = next->prev;
	return t->ag_pending == 1 && t->ag_stamp == ctx->stamp && t->producer &&
	       t->producer == next && !next->passes;
}

/* Hands n's output gradient buffer to input i: the backward skips it. */
static weft_status hand_grad(weft_ctx *ctx, weft_tape_node *n, int32_t i)
{
	weft_status st = grad_attach(ctx, n->in[i], n->out->grad->data, 0);

	if (!st)
		n->passed |= 1u << i;
	return st;
}

/* For an op whose input's gradient is its output's (n->passes): once no
 * other use of the output is left to back-propagate, its gradient is
 * final and read by nobody after this node, so an input with no gradient
 * yet takes the buffer itself instead of a copy (preferably one that
 * cannot share it), and another input shares it where may_share says it
 * can (a residual add's branch, whose last op reads it next); any other
 * input gets its copy. */
static weft_status pass_grad(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tensor *o = n->out;
	int32_t owner = -1, sharer = -1;
	weft_status st;

	if (!n->passes || !o->grad || !(o->flags & WEFT_TENSOR_GRAD_IN_ARENA) || o->ag_pending ||
	    (o->grad->flags & TENSOR_GRAD_UNWRITTEN))
		return WEFT_OK;
	for (int32_t i = 0; i < n->n_in; i++) {
		if (!may_take(n, i))
			continue;
		if (sharer < 0 && may_share(ctx, n, i))
			sharer = i;
		else if (owner < 0)
			owner = i;
	}
	if (owner < 0) {
		owner = sharer;
		sharer = -1;
	}
	/* the sharer's producer must not add to the owner's gradient (the
	 * buffer it reads) */
	for (int32_t j = 0; sharer >= 0 && owner >= 0 && j < n->in[sharer]->producer->n_in; j++)
		if (n->in[sharer]->producer->in[j] == n->in[owner])
			sharer = -1;
	if (owner >= 0 && (st = hand_grad(ctx, n, owner)))
		return st;
	if (sharer >= 0 && (st = hand_grad(ctx, n, sharer)))
		return st;
	return WEFT_OK;
}

/* Whether input i's gradient may take its own data buffer (n->in_place):
 * n is its last use and nothing has made its gradient yet, it is an
 * arena activation of this step (not a parameter, not a leaf the caller
 * owns), and n's backward writes it whole. */
static int may_overwrite(const weft_ctx *ctx, const weft_tape_node *n, int32_t i)
{
	const weft_tensor *t = n->in[i];

	return ((n->in_place >> i) & 1u) && ((n->overwrites >> i) & 1u) && !t->grad &&
	       (t->flags & WEFT_TENSOR_REQUIRES_GRAD) && (t->flags & WEFT_TENSOR_IN_ARENA) &&
	       !(t->flags & WEFT_TENSOR_PARAM) && t->ag_pending == 1 && t->ag_stamp == ctx->stamp &&
	       t->producer && !passed_twice(n, i);
}

static weft_status run_node(weft_ctx *ctx, weft_tape_node *n, open_module *stack, int depth)
{
	weft_tensor *t;
	void *unused;
	weft_status st;

	for (int i = 0; i < depth; i++) {
		if (stack[i].fired)
			continue;
		st = fire_module(ctx, WEFT_HOOK_MODULE_BACKWARD_BEGIN, stack[i].end);
		if (st)
			return st;
		stack[i].fired = 1;
	}
	if ((st = pass_grad(ctx, n)))
		return st;
	for (int32_t i = 0; i < n->n_in; i++) {
		t = n->in[i];
		if (!t)
			continue;
		if (may_overwrite(ctx, n, i) &&
		    (st = grad_attach(ctx, t, t->data, TENSOR_GRAD_UNWRITTEN)))
			return st;
		st = op_pre_use(ctx, n->op, t, WEFT_PASS_BACKWARD);
		if (!st && (t->flags & WEFT_TENSOR_REQUIRES_GRAD))
			st = grad_of(ctx, t, &unused);
		if (st)
			return st;
	}
	st = plan_writes(ctx, n);
	if (!st)
		st = n->backward(ctx, n);
	for (int32_t i = 0; i < n->n_in; i++)
		if (bw_first(n, i))
			n->in[i]->grad->flags &= ~TENSOR_GRAD_UNWRITTEN;
	n->fresh = 0;
	n->passed = 0;
	if (st)
		return weft_error_wrap(st, "backward of %s", n->op);
	n->done = 1;
	for (int32_t i = 0; i < n->n_in; i++) {
		t = n->in[i];
		if (!t || !(t->flags & WEFT_TENSOR_REQUIRES_GRAD))
			continue;
		if (t->producer && t->ag_stamp == ctx->stamp)
			t->producer->visit = ctx->pass;
		if (t->ag_pending > 0 && --t->ag_pending == 0 && (t->flags & WEFT_TENSOR_PARAM)) {
			st = fire_grad_final(ctx, t);
			if (st)
				return st;
		}
	}
	return WEFT_OK;
}

static weft_status walk(weft_ctx *ctx)
{
	open_module stack[MODULE_MAX_DEPTH];
	int depth = 0;
	weft_status st;

	for (weft_tape_node *n = ctx->tail; n; n = n->prev) {
		switch (n->kind) {
		case TAPE_MODULE_END:
			if (depth == MODULE_MAX_DEPTH)
				return weft_error_set(WEFT_ERR_INTERNAL, "backward: modules nest "
						      "deeper than %d", MODULE_MAX_DEPTH);
			stack[depth++] = (open_module){ .end = n, .fired = 0 };
			break;
		case TAPE_MODULE_BEGIN:
			if (depth == 0)
				break;
			depth--;
			if (stack[depth].fired) {
				st = fire_module(ctx, WEFT_HOOK_MODULE_BACKWARD_END, n);
				if (st)
					return st;
			}
			break;
		case TAPE_OP:
			if (n->visit != ctx->pass || n->done)
				break;
			st = run_node(ctx, n, stack, depth);
			if (st)
				return st;
			break;
		}
	}
	return WEFT_OK;
}

static weft_status check_root(weft_ctx *ctx, const char *fn, weft_tensor *root)
{
	char sh[160];

	if (!ctx || !root)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: context or tensor is NULL", fn);
	if (!root->producer || root->ag_stamp != ctx->stamp)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: '%s' %s was not made by a recorded "
				      "op in this step (grad was off, no input required a gradient, "
				      "or step_begin ran since)", fn, root->name ? root->name : "",
				      weft_shape_str(root, sh, sizeof(sh)));
	if (root->producer->done)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: backward already ran through '%s'; "
				      "run forward again (after step_begin) for another backward",
				      fn, root->name ? root->name : "");
	return WEFT_OK;
}

static weft_status start(weft_ctx *ctx, weft_tensor *root, const void *seed)
{
	void *g;
	weft_status st = grad_of(ctx, root, &g);

	if (st)
		return st;
	if (root->grad->flags & TENSOR_GRAD_UNWRITTEN) {
		root->grad->flags &= ~TENSOR_GRAD_UNWRITTEN;
		st = ctx->k->copy(ctx->kctx, g, seed, weft_tensor_nbytes(root),
				  WEFT_COPY_DEVICE_TO_DEVICE);
	} else {
		st = op_axpy(ctx, (weft_dtype)root->dtype, weft_tensor_numel(root), 1.0f, seed, g);
	}
	if (st)
		return st;
	ctx->pass++;
	root->producer->visit = ctx->pass;
	return walk(ctx);
}

weft_status weft_backward(weft_ctx *ctx, weft_tensor *loss)
{
	char sh[160];
	void *one;
	weft_status st = check_root(ctx, "backward", loss);

	if (st)
		return st;
	if (weft_tensor_numel(loss) != 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "backward: '%s' %s is not a scalar; use "
				      "weft_backward_from with an upstream gradient, or reduce it "
				      "to a loss", loss->name ? loss->name : "",
				      weft_shape_str(loss, sh, sizeof(sh)));
	st = op_scratch(ctx, "backward", weft_dtype_size((weft_dtype)loss->dtype), &one);
	if (!st)
		st = ctx->k->fill(ctx->kctx, (weft_dtype)loss->dtype, 1, 1.0f, one);
	return st ? st : start(ctx, loss, one);
}

weft_status weft_backward_from(weft_ctx *ctx, weft_tensor *out, const weft_tensor *grad)
{
	char a[256], b[256];
	weft_status st = check_root(ctx, "backward_from", out);

	if (st)
		return st;
	st = op_check(ctx, "backward_from", "grad", grad, OP_FLOAT_OR_LOWP);
	if (st)
		return st;
	if (grad->dtype != out->dtype || weft_tensor_numel(grad) != weft_tensor_numel(out) ||
	    grad->ndim != out->ndim || memcmp(grad->shape, out->shape, sizeof(out->shape)))
		return weft_error_set(WEFT_ERR_SHAPE, "backward_from: %s (%s) and %s (%s) must have "
				      "the same shape and dtype", op_desc(out, "out", a, sizeof(a)),
				      weft_dtype_name((weft_dtype)out->dtype),
				      op_desc(grad, "grad", b, sizeof(b)),
				      weft_dtype_name((weft_dtype)grad->dtype));
	return start(ctx, out, grad->data);
}

weft_status weft_autograd_flush(weft_ctx *ctx)
{
	weft_status st;

	for (weft_tape_node *n = ctx->tail; n; n = n->prev) {
		if (n->kind != TAPE_OP)
			continue;
		for (int32_t i = 0; i < n->n_in; i++) {
			weft_tensor *t = n->in[i];

			if (!t || !(t->flags & WEFT_TENSOR_PARAM) || t->ag_stamp != ctx->stamp ||
			    t->ag_pending <= 0)
				continue;
			t->ag_pending = 0;
			st = fire_grad_final(ctx, t);
			if (st)
				return st;
		}
	}
	return WEFT_OK;
}
