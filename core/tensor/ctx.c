/* The execution context: device, arenas, switches, hooks, module markers,
 * and the helpers every op uses to check, allocate and record. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor_impl.h"

static atomic_ullong stamp_source = 1;

static uint64_t next_stamp(void)
{
	return (uint64_t)atomic_fetch_add(&stamp_source, 1) + 1;
}

weft_status weft_ctx_create(const weft_ctx_options *opt, weft_ctx **out)
{
	weft_ctx_options o = { 0 };
	weft_ctx *ctx;
	weft_status st;

	*out = NULL;
	if (opt)
		o = *opt;
	ctx = weft_mem_calloc(WEFT_MEM_OTHER, sizeof(*ctx));
	if (!ctx)
		return weft_error_wrap(WEFT_ERR_NOMEM, "creating a context");
	ctx->dev = o.device;
	st = weft_kernels_get(o.device, &ctx->k);
	if (st)
		goto out_free_ctx;
	if (ctx->k->ctx_create) {
		st = ctx->k->ctx_create(o.device.index, &ctx->kctx);
		if (st)
			goto out_free_ctx;
	}
	st = weft_arena_create(o.device, WEFT_MEM_ACTIVATIONS, o.arena_bytes, &ctx->arena);
	if (st)
		goto out_free_kctx;
	st = weft_arena_create(WEFT_CPU, WEFT_MEM_ACTIVATIONS,
			       o.tape_bytes ? o.tape_bytes : CTX_TAPE_DEFAULT_BYTES, &ctx->tape_arena);
	if (st)
		goto out_free_arena;
	ctx->seed = o.seed;
	ctx->grad_enabled = 1;
	ctx->training = 1;
	ctx->loss_grad_hint = 1.0f;
	ctx->stamp = next_stamp();
	ctx->next_handle = 1;
	*out = ctx;
	return WEFT_OK;

out_free_arena:
	weft_arena_free(ctx->arena);
out_free_kctx:
	if (ctx->k->ctx_destroy)
		ctx->k->ctx_destroy(ctx->kctx);
out_free_ctx:
	weft_mem_free(ctx);
	return st;
}

void weft_ctx_free(weft_ctx *ctx)
{
	if (!ctx)
		return;
	weft_arena_free(ctx->tape_arena);
	weft_arena_free(ctx->arena);
	if (ctx->k->ctx_destroy)
		ctx->k->ctx_destroy(ctx->kctx);
	weft_mem_free(ctx->hooks);
	weft_mem_free(ctx);
}

void weft_ctx_step_begin(weft_ctx *ctx)
{
	weft_arena_reset(ctx->arena);
	weft_arena_reset(ctx->tape_arena);
	ctx->tail = NULL;
	ctx->stamp = next_stamp();
	ctx->step++;
	ctx->dropout_calls = 0;
	ctx->module_depth = 0;
}

uint64_t weft_ctx_step(const weft_ctx *ctx) { return ctx->step; }
void weft_ctx_set_step(weft_ctx *ctx, uint64_t step) { ctx->step = step; }
weft_device weft_ctx_device(const weft_ctx *ctx) { return ctx->dev; }
const weft_kernel_table *weft_ctx_kernels(const weft_ctx *ctx) { return ctx->k; }
void *weft_ctx_kctx(const weft_ctx *ctx) { return ctx->kctx; }
weft_arena *weft_ctx_arena(const weft_ctx *ctx) { return ctx->arena; }
weft_arena *weft_ctx_tape_arena(const weft_ctx *ctx) { return ctx->tape_arena; }
int weft_ctx_grad_enabled(const weft_ctx *ctx) { return ctx->grad_enabled; }
int weft_ctx_training(const weft_ctx *ctx) { return ctx->training; }

int weft_ctx_set_grad_enabled(weft_ctx *ctx, int enabled)
{
	int old = ctx->grad_enabled;

	ctx->grad_enabled = !!enabled;
	return old;
}

int weft_ctx_set_training(weft_ctx *ctx, int training)
{
	int old = ctx->training;

	ctx->training = !!training;
	return old;
}

void weft_ctx_set_rng(weft_ctx *ctx, uint64_t seed, int64_t row_offset)
{
	ctx->seed = seed;
	ctx->row_offset = row_offset;
}

void weft_tensor_requires_grad(weft_tensor *t, int on)
{
	if (on)
		t->flags |= WEFT_TENSOR_REQUIRES_GRAD;
	else
		t->flags &= ~(uint32_t)WEFT_TENSOR_REQUIRES_GRAD;
}

/* ---- hooks ---- */

weft_status weft_ctx_add_hook(weft_ctx *ctx, weft_hook_kind kind, weft_hook_fn fn, void *user,
			      int64_t *handle)
{
	if ((unsigned)kind >= WEFT_HOOK_KIND_COUNT || !fn)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "add_hook: hook kind %d is unknown or "
				      "the function is NULL", (int)kind);
	if (ctx->n_hooks == ctx->cap_hooks) {
		size_t cap = ctx->cap_hooks ? ctx->cap_hooks * 2 : 8;
		hook_entry *h = weft_mem_alloc(WEFT_MEM_OTHER, cap * sizeof(*h));

		if (!h)
			return weft_error_wrap(WEFT_ERR_NOMEM, "adding a hook");
		if (ctx->n_hooks)
			memcpy(h, ctx->hooks, ctx->n_hooks * sizeof(*h));
		weft_mem_free(ctx->hooks);
		ctx->hooks = h;
		ctx->cap_hooks = cap;
	}
	ctx->hooks[ctx->n_hooks] = (hook_entry){ .kind = kind, .fn = fn, .user = user,
						 .handle = ctx->next_handle };
	if (handle)
		*handle = ctx->next_handle;
	ctx->next_handle++;
	ctx->n_hooks++;
	return WEFT_OK;
}

weft_status weft_ctx_remove_hook(weft_ctx *ctx, int64_t handle)
{
	for (size_t i = 0; i < ctx->n_hooks; i++) {
		if (ctx->hooks[i].handle != handle)
			continue;
		memmove(&ctx->hooks[i], &ctx->hooks[i + 1],
			(ctx->n_hooks - i - 1) * sizeof(ctx->hooks[0]));
		ctx->n_hooks--;
		return WEFT_OK;
	}
	return weft_error_set(WEFT_ERR_NOT_FOUND, "remove_hook: no hook has handle %lld",
			      (long long)handle);
}

weft_status hooks_fire(weft_ctx *ctx, const weft_hook_event *ev)
{
	weft_status st;

	for (size_t i = 0; i < ctx->n_hooks; i++) {
		if (ctx->hooks[i].kind != ev->kind)
			continue;
		st = ctx->hooks[i].fn(ctx, ev, ctx->hooks[i].user);
		if (st)
			return st;
	}
	return WEFT_OK;
}

/* ---- module markers ---- */

static weft_status record_marker(weft_ctx *ctx, tape_kind kind, const char *name, void *ptr)
{
	weft_tape_node *n;
	weft_status st;

	if (!ctx->grad_enabled)
		return WEFT_OK;
	st = weft_arena_alloc(ctx->tape_arena, sizeof(*n), 16, (void **)&n);
	if (st)
		return weft_error_wrap(st, "recording module '%s'", name);
	memset(n, 0, sizeof(*n));
	n->kind = kind;
	n->op = name;
	n->module_ptr = ptr;
	n->prev = ctx->tail;
	ctx->tail = n;
	return WEFT_OK;
}

weft_status weft_module_begin(weft_ctx *ctx, const char *name, void *module_ptr)
{
	weft_hook_event ev = { .kind = WEFT_HOOK_MODULE_FORWARD_BEGIN, .pass = WEFT_PASS_FORWARD,
			       .module = name, .module_ptr = module_ptr };
	weft_status st;

	if (ctx->module_depth == MODULE_MAX_DEPTH)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "module_begin '%s': modules nest deeper "
				      "than %d; is a module_end missing?", name ? name : "",
				      MODULE_MAX_DEPTH);
	st = hooks_fire(ctx, &ev);
	if (st)
		return st;
	st = record_marker(ctx, TAPE_MODULE_BEGIN, name, module_ptr);
	if (st)
		return st;
	ctx->module_names[ctx->module_depth] = name;
	ctx->module_ptrs[ctx->module_depth] = module_ptr;
	ctx->module_depth++;
	return WEFT_OK;
}

weft_status weft_module_end(weft_ctx *ctx, const char *name, void *module_ptr)
{
	weft_hook_event ev = { .kind = WEFT_HOOK_MODULE_FORWARD_END, .pass = WEFT_PASS_FORWARD,
			       .module = name, .module_ptr = module_ptr };
	const char *open;
	weft_status st;

	if (ctx->module_depth == 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "module_end '%s': no module is open; "
				      "call weft_module_begin first", name ? name : "");
	open = ctx->module_names[ctx->module_depth - 1];
	if (ctx->module_ptrs[ctx->module_depth - 1] != module_ptr ||
	    (open != name && (!open || !name || strcmp(open, name))))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "module_end '%s' does not match the open "
				      "module '%s': end modules in reverse order of begin",
				      name ? name : "", open ? open : "");
	st = record_marker(ctx, TAPE_MODULE_END, name, module_ptr);
	if (st)
		return st;
	ctx->module_depth--;
	return hooks_fire(ctx, &ev);
}

/* ---- op helpers ---- */

const char *op_desc(const weft_tensor *t, const char *role, char *buf, size_t len)
{
	char sh[160];

	if (t->name && strcmp(t->name, role))
		snprintf(buf, len, "%s '%s' %s", role, t->name, weft_shape_str(t, sh, sizeof(sh)));
	else
		snprintf(buf, len, "%s %s", role, weft_shape_str(t, sh, sizeof(sh)));
	return buf;
}

weft_status op_check(weft_ctx *ctx, const char *op, const char *role, const weft_tensor *t,
		     int want_float)
{
	char d[256], a[32], b[32];

	if (!ctx)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: the context is NULL", op);
	if (!t)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: input %s is NULL", op, role);
	op_desc(t, role, d, sizeof(d));
	if ((unsigned)t->dtype >= WEFT_DTYPE_COUNT)
		return weft_error_set(WEFT_ERR_DTYPE, "%s: %s has unknown dtype %d", op, d,
				      (int)t->dtype);
	if (t->ndim < 0 || t->ndim > WEFT_MAX_DIMS)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %s has %d dims (at most %d)", op, role,
				      (int)t->ndim, WEFT_MAX_DIMS);
	/* a parameter may get its data from a pre-use hook (ZeRO-3 gathers it
	 * there); op_pre_use checks it afterwards */
	if (!t->data && weft_tensor_numel(t) && !(t->flags & WEFT_TENSOR_PARAM))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: %s has no data (a parameter "
				      "before weft_params_finalize?)", op, d);
	if (!weft_device_equal(t->device, ctx->dev))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: %s is on %s but the context runs "
				      "on %s: copy it there first", op, d,
				      weft_device_str(t->device, a, sizeof(a)),
				      weft_device_str(ctx->dev, b, sizeof(b)));
	if (want_float && !(ctx->k->float_dtypes & WEFT_DTYPE_BIT(t->dtype)) &&
	    !(want_float == OP_FLOAT_OR_LOWP && ctx->lowp != WEFT_F32 && t->dtype == ctx->lowp))
		return weft_error_set(WEFT_ERR_DTYPE, "%s: %s is %s, which the %s kernels do not "
				      "compute in%s", op, d, weft_dtype_name((weft_dtype)t->dtype),
				      ctx->k->head.name,
				      ctx->k->float_dtypes == WEFT_DTYPE_BIT(WEFT_F32) ?
				      ": use F32" : "");
	if (!want_float && t->dtype != WEFT_I32 && t->dtype != WEFT_I64)
		return weft_error_set(WEFT_ERR_DTYPE, "%s: %s is %s; indices must be I32 or I64",
				      op, d, weft_dtype_name((weft_dtype)t->dtype));
	return WEFT_OK;
}

weft_status op_same_dtype(const char *op, const char *ra, const weft_tensor *a, const char *rb,
			  const weft_tensor *b)
{
	char da[256], db[256];

	if (a->dtype == b->dtype)
		return WEFT_OK;
	return weft_error_set(WEFT_ERR_DTYPE, "%s: %s is %s but %s is %s; convert one of them",
			      op, op_desc(a, ra, da, sizeof(da)), weft_dtype_name((weft_dtype)a->dtype),
			      op_desc(b, rb, db, sizeof(db)), weft_dtype_name((weft_dtype)b->dtype));
}

weft_status op_pre_use(weft_ctx *ctx, const char *op, weft_tensor *t, weft_pass pass)
{
	weft_hook_event ev = { .kind = WEFT_HOOK_PARAM_PRE_USE, .pass = pass, .param = t,
			       .op = op };
	weft_status st;

	if (!t || !(t->flags & WEFT_TENSOR_PARAM))
		return WEFT_OK;
	st = hooks_fire(ctx, &ev);
	if (!st && !t->data && weft_tensor_numel(t))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: parameter '%s' has no data after "
				      "the pre-use hooks (before weft_params_finalize, or a sharding "
				      "strategy did not gather it)", op, t->name ? t->name : "?");
	return st;
}

int op_needs_grad(const weft_ctx *ctx, const weft_tensor *t)
{
	return ctx->grad_enabled && t && (t->flags & WEFT_TENSOR_REQUIRES_GRAD);
}

weft_status op_output(weft_ctx *ctx, const char *op, weft_dtype dt, int32_t ndim,
		      const int64_t *shape, weft_tensor **out)
{
	weft_tensor *t, tmp;
	void *data = NULL;
	char sh[160];
	weft_status st;

	*out = NULL;
	st = tensor_check_shape(op, dt, ndim, shape);
	if (st)
		return st;
	weft_tensor_init(&tmp, dt, ndim, shape, ctx->dev, NULL);
	st = weft_arena_alloc(ctx->tape_arena, sizeof(*t), 16, (void **)&t);
	if (!st)
		st = weft_arena_alloc(ctx->arena, weft_tensor_nbytes(&tmp), 64, &data);
	if (st)
		return weft_error_wrap(st, "%s: output %s %s", op, weft_dtype_name(dt),
				       weft_shape_str(&tmp, sh, sizeof(sh)));
	*t = tmp;
	t->data = t->base = data;
	t->flags = WEFT_TENSOR_IN_ARENA;
	t->name = op;
	t->ag_stamp = ctx->stamp;
	*out = t;
	return WEFT_OK;
}

weft_status op_scratch(weft_ctx *ctx, const char *op, size_t bytes, void **out)
{
	weft_status st = weft_arena_alloc(ctx->arena, bytes, 64, out);

	return st ? weft_error_wrap(st, "%s: %zu bytes of scratch", op, bytes) : WEFT_OK;
}

weft_status weft_ctx_tensor(weft_ctx *ctx, const char *name, weft_dtype dt, int32_t ndim,
			    const int64_t *shape, weft_tensor **out)
{
	weft_status st = op_output(ctx, name ? name : "ctx_tensor", dt, ndim, shape, out);

	if (st)
		return st;
	(*out)->name = name;
	if (!weft_tensor_nbytes(*out))
		return WEFT_OK;
	st = ctx->k->zero(ctx->kctx, (*out)->data, weft_tensor_nbytes(*out));
	if (st)
		*out = NULL;
	return st;
}

/* Starts this step's autograd state for t the first time the step sees it. */
static void stamp_input(weft_ctx *ctx, weft_tensor *t)
{
	if (t->ag_stamp == ctx->stamp)
		return;
	t->ag_stamp = ctx->stamp;
	t->producer = NULL;
	t->ag_pending = 0;
	if (t->flags & WEFT_TENSOR_GRAD_IN_ARENA) {
		t->grad = NULL;
		t->flags &= ~(uint32_t)WEFT_TENSOR_GRAD_IN_ARENA;
	}
}

weft_status op_record(weft_ctx *ctx, const char *op, tape_backward_fn bw, weft_tensor *out,
		      int32_t n_in, weft_tensor *const *in, weft_tape_node **node)
{
	int any = 0;

	*node = NULL;
	for (int32_t i = 0; i < n_in; i++)
		any |= op_needs_grad(ctx, in[i]);
	if (!any)
		return WEFT_OK;
	return op_record_always(ctx, op, bw, out, n_in, in, node);
}

weft_status op_record_always(weft_ctx *ctx, const char *op, tape_backward_fn bw,
			     weft_tensor *out, int32_t n_in, weft_tensor *const *in,
			     weft_tape_node **node)
{
	weft_tape_node *n;
	weft_status st;

	*node = NULL;
	st = weft_arena_alloc(ctx->tape_arena, sizeof(*n), 16, (void **)&n);
	if (st)
		return weft_error_wrap(st, "%s: recording on the tape", op);
	memset(n, 0, sizeof(*n));
	n->kind = TAPE_OP;
	n->op = op;
	n->backward = bw;
	n->n_in = n_in;
	for (int32_t i = 0; i < n_in; i++) {
		n->in[i] = in[i];
		if (!in[i])
			continue;
		stamp_input(ctx, in[i]);
		if (op_needs_grad(ctx, in[i]))
			in[i]->ag_pending++;
	}
	n->out = out;
	n->prev = ctx->tail;
	ctx->tail = n;
	out->producer = n;
	out->ag_stamp = ctx->stamp;
	out->flags |= WEFT_TENSOR_REQUIRES_GRAD;
	*node = n;
	return WEFT_OK;
}

weft_status op_record_loss(weft_ctx *ctx, const char *op, tape_backward_fn bw, weft_tensor *y,
			   weft_tensor *logits, weft_tensor *targets, int64_t ignore_index,
			   void *stat, void *count, weft_tape_node **node)
{
	weft_status st = op_record(ctx, op, bw, y, 1, &logits, node);

	if (st || !*node)
		return st;
	(*node)->i[0] = weft_tensor_numel(targets);
	(*node)->i[1] = logits->shape[logits->ndim - 1];
	(*node)->i[2] = targets->dtype;
	(*node)->i[3] = ignore_index;
	(*node)->saved[0] = stat;
	(*node)->saved[1] = targets->data;
	(*node)->saved[2] = count;
	return WEFT_OK;
}
