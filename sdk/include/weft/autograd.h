/* weft/autograd.h - the execution context, the tape, backward and hooks.
 *
 * A weft_ctx is where ops run: one device, its kernel table and device
 * context, a per-step activation arena (device memory, counted under
 * WEFT_MEM_ACTIVATIONS) and a tape arena (host memory, same category), the
 * RNG seed for dropout, the grad-enabled and training switches, and the
 * hooks strategies register.
 *
 * One step:
 *     weft_ctx_step_begin(ctx);            arenas reset, tape emptied
 *     ... weft_op_*(ctx, ...) ...          forward: outputs in the arena,
 *                                          ops recorded when grad is on
 *     weft_backward(ctx, loss);            reverse-mode, gradients accumulate
 * Tensors the ops return are borrowed from the arena and valid until the
 * next weft_ctx_step_begin. After the first step the arenas are one block
 * each and a step allocates nothing.
 *
 * Gradients: backward ACCUMULATES into parameter gradients (so micro-batch
 * accumulation is just several forward/backward pairs; zero them with
 * weft_params_zero_grad). Other tensors that require a gradient (op
 * outputs, leaves a caller marked with weft_tensor_requires_grad) get a
 * zeroed gradient in the arena on their first contribution; a tensor used
 * by several ops sums every contribution. An op output's gradient holds
 * its own value until the backward of the op that made it has run: where
 * that op's input has the same gradient (add, reshape), the input may be
 * handed the buffer, and later contributions to the input land in it.
 *
 * Hooks fire on the thread that runs the ops, in registration order.
 */
#ifndef WEFT_AUTOGRAD_H
#define WEFT_AUTOGRAD_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"
#include "weft/device.h"
#include "weft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_ctx weft_ctx; /* opaque */

/* Options for weft_ctx_create. Zero-initialize, then set what you need. */
typedef struct weft_ctx_options {
	weft_device device;        /* where ops run (zero: cpu) */
	uint64_t seed;             /* dropout seed (see weft_ctx_set_rng) */
	size_t arena_bytes;        /* first activation block (0: 1 MiB) */
	size_t tape_bytes;         /* first tape block (0: 256 KiB) */
} weft_ctx_options;

/* Makes a context: looks up the device's kernels, makes the device
 * context and the arenas (allocated on first use). Grad is enabled,
 * training mode is on, the step counter is 0. Free with weft_ctx_free.
 * Errors: weft_kernels_get's (no CUDA kernels); WEFT_ERR_NOMEM. */
WEFT_API weft_status weft_ctx_create(const weft_ctx_options *opt, weft_ctx **out);

/* Frees the context and its arenas (every tensor the ops returned becomes
 * invalid). Parameters are not touched. NULL is ignored. */
WEFT_API void weft_ctx_free(weft_ctx *ctx);

/* Starts a step: takes back everything in the arenas and empties the tape
 * (consolidating blocks, see weft_arena_reset), increments the step
 * counter, resets the dropout call counter. */
WEFT_API void weft_ctx_step_begin(weft_ctx *ctx);

/* The number of weft_ctx_step_begin calls so far. */
WEFT_API uint64_t weft_ctx_step(const weft_ctx *ctx);

/* Sets the step counter (the `s` of the dropout keys, weft_ctx_set_rng);
 * the next weft_ctx_step_begin counts on from `step`. A trainer sets it
 * from its global step and micro-batch index, so that a run resumed from
 * a checkpoint (a new context) draws the masks an unbroken run draws. */
WEFT_API void weft_ctx_set_step(weft_ctx *ctx, uint64_t step);

/* The device, the kernel table and its device context (kctx). */
WEFT_API weft_device weft_ctx_device(const weft_ctx *ctx);
WEFT_API const weft_kernel_table *weft_ctx_kernels(const weft_ctx *ctx);
WEFT_API void *weft_ctx_kctx(const weft_ctx *ctx);

/* The activation arena (device memory) and the tape arena (host memory);
 * borrowed. For statistics, or for scratch a strategy needs for one step. */
WEFT_API weft_arena *weft_ctx_arena(const weft_ctx *ctx);
WEFT_API weft_arena *weft_ctx_tape_arena(const weft_ctx *ctx);

/* Turns recording on or off and returns the previous setting. With grad
 * off (evaluation, optimizer math) ops compute but record nothing and
 * their outputs never require a gradient. */
WEFT_API int weft_ctx_set_grad_enabled(weft_ctx *ctx, int enabled);
WEFT_API int weft_ctx_grad_enabled(const weft_ctx *ctx);

/* Training mode (dropout active) on or off; returns the previous setting. */
WEFT_API int weft_ctx_set_training(weft_ctx *ctx, int training);
WEFT_API int weft_ctx_training(const weft_ctx *ctx);

/* Dropout randomness. Dropout call c of step s uses the key
 * weft_dropout_key(seed, s, c); element j (row-major) of the call's input
 * counts as global element (row_offset * row_numel + j), row_numel being
 * the elements per dim-0 row. A data-parallel rank that holds global batch
 * rows [r0, r0 + b) sets row_offset = r0, so every rank draws exactly the
 * mask the single-process run would draw for those rows. */
WEFT_API void weft_ctx_set_rng(weft_ctx *ctx, uint64_t seed, int64_t row_offset);

/* A zero-filled tensor in the activation arena, valid until the next
 * step_begin (for inputs, targets, scratch). `name` is borrowed and must
 * outlive the step. Errors: as weft_tensor_alloc. */
WEFT_API weft_status weft_ctx_tensor(weft_ctx *ctx, const char *name, weft_dtype dt,
				     int32_t ndim, const int64_t *shape, weft_tensor **out);

/* Marks a leaf tensor (not made by an op) as needing a gradient; after
 * backward its `grad` holds it (in the arena unless the caller set `grad`
 * beforehand, in which case backward accumulates into that). Pipeline
 * stages use this on the activations they receive. */
WEFT_API void weft_tensor_requires_grad(weft_tensor *t, int on);

/* Mixed precision (autocast, as torch.autocast): the matrix products of
 * F32 linear layers on ctx take their inputs rounded to `dt` (WEFT_BF16 or
 * WEFT_F16) and accumulate in F32 (the kernel table's gemm_lowp), forward
 * and backward; parameters, gradients and every other op stay F32.
 * WEFT_F32 (the default) turns it off. Takes effect for ops recorded
 * afterwards. Errors: WEFT_ERR_DTYPE for any other dtype;
 * WEFT_ERR_UNSUPPORTED when the device's kernels have no gemm_lowp. */
WEFT_API weft_status weft_ctx_set_autocast(weft_ctx *ctx, weft_dtype dt);

/* The autocast dtype of ctx (WEFT_F32: off). */
WEFT_API weft_dtype weft_ctx_autocast(const weft_ctx *ctx);

/* 16-bit activations under autocast (weft_ctx_set_lowp_activations). */
typedef enum weft_lowp_act {
	WEFT_LOWP_ACT_AUTO = 0, /* on where the device's table offers them
				 * (lowp_act_dtypes holds the autocast dtype:
				 * CUDA's), off elsewhere (the CPU's) */
	WEFT_LOWP_ACT_ON = 1,   /* on wherever the table has the members (the
				 * CPU's references included) */
	WEFT_LOWP_ACT_OFF = 2   /* activations stay F32 */
} weft_lowp_act;

/* Whether ctx keeps activations, and their gradients, in the autocast
 * dtype between layers while autocast is on: the linear layers give
 * 16-bit outputs (bias and GELU fused in their product), layernorm takes
 * the residual add in front, the loss reads 16-bit logits and writes their
 * gradient over them; every other op takes 16-bit tensors where the device
 * computes in them and otherwise widens them to F32. Parameters, their
 * gradients and the optimizer stay F32. Needs the kernel table's ABI 1.6
 * members (weft/kernels.h). Kept across weft_ctx_set_autocast; applies to
 * ops recorded afterwards. Errors: WEFT_ERR_INVALID_ARG for an unknown
 * mode; WEFT_ERR_UNSUPPORTED for WEFT_LOWP_ACT_ON on a table without the
 * members (the mode is then unchanged). */
WEFT_API weft_status weft_ctx_set_lowp_activations(weft_ctx *ctx, weft_lowp_act mode);

/* The dtype ctx keeps activations in now (WEFT_F32: F32 activations). */
WEFT_API weft_dtype weft_ctx_lowp_activations(const weft_ctx *ctx);

/* ---- since ABI 1.7: the 16-bit weight copy (weft_params_copy_enable) ---- */

/* Makes ctx's 16-bit products (autocast, and the linear layers and the
 * fused head under 16-bit activations) read each F32 weight that lies in
 * ps's flat F32 buffer from ps's 16-bit copy, when the copy's dtype is the
 * product's, instead of rounding it into the arena; the backward reuses
 * the same copy. ps NULL: back to rounding. ps must outlive the use, and
 * its copy must hold the current weights at every forward (refreshed after
 * every write of them). Takes effect for ops recorded afterwards.
 * Errors: WEFT_ERR_INVALID_ARG (ps keeps no copy, or lives on another
 * device than ctx). */
WEFT_API weft_status weft_ctx_use_params_copy(weft_ctx *ctx, const weft_params *ps);

/* Rounds every F32 parameter of ps into its copy (round to nearest even,
 * what the products would do to each weight): one convert of the whole
 * flat buffer on ctx's stream (ordered after the work queued before it).
 * Errors: WEFT_ERR_INVALID_ARG (ctx NULL, or ps keeps no copy); the
 * device's. */
WEFT_API weft_status weft_params_copy_refresh(const weft_params *ps, weft_ctx *ctx);

/* ---- backward ----------------------------------------------------------- */

/* Back-propagates from a scalar (numel 1) `loss` with d(loss) = 1.
 * Runs the backward of every recorded op the loss depends on that has not
 * run yet, in reverse recording order, and fires the hooks below.
 * Errors: WEFT_ERR_INVALID_ARG when loss is not a scalar (naming its
 * shape) or was not made by a recorded op ("grad was off, or
 * step_begin ran since"); a kernel's or a hook's status. */
WEFT_API weft_status weft_backward(weft_ctx *ctx, weft_tensor *loss);

/* As weft_backward from any recorded tensor `out` with the given upstream
 * gradient `grad` (same shape and dtype, copied): pipeline stages start
 * backward from the gradient the next stage sent. Ops are only visited when
 * `out` depends on them, so the tapes of several micro-batches can share
 * one step. Errors: as weft_backward; WEFT_ERR_SHAPE naming both shapes. */
WEFT_API weft_status weft_backward_from(weft_ctx *ctx, weft_tensor *out, const weft_tensor *grad);

/* Fires the GRAD_FINAL hook now for every parameter used in this step
 * whose hook has not fired (its remaining uses lead to no loss that was
 * back-propagated: an unused branch). Call after the step's last backward
 * when a strategy must see every used parameter's gradient. Returns a
 * hook's status. */
WEFT_API weft_status weft_autograd_flush(weft_ctx *ctx);

/* ---- hooks -------------------------------------------------------------- */

/* Kinds. Values are part of the ABI: only ever appended. */
typedef enum weft_hook_kind {
	/* A parameter's gradient is final for this step: every use recorded
	 * since step_begin has been back-propagated. Fires exactly once per
	 * parameter per step, right after its last contribution (DDP buckets,
	 * ZeRO reduce-scatter). */
	WEFT_HOOK_GRAD_FINAL = 0,
	/* A parameter is about to be read: before each forward op that takes
	 * it, and before the backward of each such op. The hook may point
	 * `param->data` at other memory of the same size (ZeRO-3 gathers the
	 * full weight here). */
	WEFT_HOOK_PARAM_PRE_USE = 1,
	/* weft_module_begin / weft_module_end in forward. */
	WEFT_HOOK_MODULE_FORWARD_BEGIN = 2,
	WEFT_HOOK_MODULE_FORWARD_END = 3,
	/* In backward: a module's backward begins before the first recorded
	 * op inside it runs its backward, and ends when the walk passes its
	 * begin marker (modules are walked in reverse). Only modules whose ops
	 * the pass visits fire. */
	WEFT_HOOK_MODULE_BACKWARD_BEGIN = 4,
	WEFT_HOOK_MODULE_BACKWARD_END = 5,
	WEFT_HOOK_KIND_COUNT = 6
} weft_hook_kind;

/* Which pass an event comes from. */
typedef enum weft_pass {
	WEFT_PASS_FORWARD = 0,
	WEFT_PASS_BACKWARD = 1
} weft_pass;

/* What a hook is told. Borrowed for the duration of the call. */
typedef struct weft_hook_event {
	weft_hook_kind kind;
	weft_pass pass;
	weft_tensor *param;      /* GRAD_FINAL, PARAM_PRE_USE; else NULL */
	const char *module;      /* module hooks: the dotted name; else NULL */
	void *module_ptr;        /* module hooks: as given to weft_module_begin */
	const char *op;          /* PARAM_PRE_USE: the op's name ("linear") */
} weft_hook_event;

/* A hook. Return WEFT_OK, or a status with the last error set: the op,
 * backward or module call that fired it stops and returns that status. */
typedef weft_status (*weft_hook_fn)(weft_ctx *ctx, const weft_hook_event *ev, void *user);

/* Registers `fn` for `kind`; `user` is passed back. *handle (may be NULL)
 * receives an id for weft_ctx_remove_hook. Not to be called from a hook.
 * Errors: WEFT_ERR_INVALID_ARG for an unknown kind; WEFT_ERR_NOMEM. */
WEFT_API weft_status weft_ctx_add_hook(weft_ctx *ctx, weft_hook_kind kind, weft_hook_fn fn,
				       void *user, int64_t *handle);

/* Removes a hook by handle. Errors: WEFT_ERR_NOT_FOUND naming the handle. */
WEFT_API weft_status weft_ctx_remove_hook(weft_ctx *ctx, int64_t handle);

/* ---- module boundaries -------------------------------------------------- */

/* Marks where a module's forward begins and ends (calls nest; `name` is
 * borrowed and must outlive the step, module names held by the model do).
 * Fires MODULE_FORWARD_BEGIN / END now and, when grad is on, records
 * markers so that backward fires MODULE_BACKWARD_BEGIN / END.
 * Errors: a hook's status; WEFT_ERR_NOMEM recording the marker;
 * WEFT_ERR_INVALID_ARG from weft_module_end when it does not match the
 * innermost open weft_module_begin (naming both). */
WEFT_API weft_status weft_module_begin(weft_ctx *ctx, const char *name, void *module_ptr);
WEFT_API weft_status weft_module_end(weft_ctx *ctx, const char *name, void *module_ptr);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_AUTOGRAD_H */
