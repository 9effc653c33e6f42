/* Internals shared by core/tensor's files: the context, the tape, and the
 * helpers every op uses to check inputs, fire hooks, allocate and record. */
#ifndef WEFT_TENSOR_IMPL_H
#define WEFT_TENSOR_IMPL_H

#include "weft/autograd.h"
#include "weft/config.h"
#include "weft/ops.h"
#include "weft/tensor.h"

#define TAPE_MAX_INPUTS 3
#define TAPE_MAX_SAVED 3
#define MODULE_MAX_DEPTH 64

typedef enum tape_kind {
	TAPE_OP = 0,
	TAPE_MODULE_BEGIN = 1,
	TAPE_MODULE_END = 2
} tape_kind;

struct weft_tape_node;
typedef weft_status (*tape_backward_fn)(weft_ctx *ctx, struct weft_tape_node *n);

/* One recorded op or module marker, in the tape arena. */
typedef struct weft_tape_node {
	struct weft_tape_node *prev;
	tape_kind kind;
	const char *op;                  /* op name, or the module's name */
	void *module_ptr;
	tape_backward_fn backward;
	int32_t n_in;
	weft_tensor *in[TAPE_MAX_INPUTS]; /* NULL entries allowed (no bias) */
	weft_tensor *out;
	void *saved[TAPE_MAX_SAVED];     /* arena buffers the backward reads */
	float f[2];
	int64_t i[4];
	uint64_t u[1];
	uint64_t visit;                  /* pass id that reached it */
	int done;                        /* its backward has run */
	uint32_t overwrites;             /* bit i: the backward can write input i's
					  * gradient instead of adding to it (set
					  * by the op when it records) */
	uint32_t fresh;                  /* bit i: it must write it (run_node) */
	uint32_t passes;                 /* bit i: input i's gradient is the output's,
					  * bytes for bytes (set by the op) */
	uint32_t passed;                 /* bit i: input i was handed the output's
					  * gradient buffer; the backward skips it
					  * (run_node) */
	uint32_t in_place;               /* bit i: when this node is input i's last
					  * use and its gradient is not made yet, the
					  * gradient may take input i's own data
					  * buffer (the backward writes it whole and
					  * reads nothing of input i after it; set by
					  * the op, run_node) */
} weft_tape_node;

/* Private flag of an arena gradient made by grad_of whose data has not been
 * written in this step yet (a bit above the public WEFT_TENSOR_* ones): the
 * first backward that contributes writes it (GEMM with beta 0, a copy)
 * instead of adding to a zero fill, when it can (weft_tape_node.overwrites);
 * otherwise run_node zeroes it first. */
#define TENSOR_GRAD_UNWRITTEN (1u << 31)

typedef struct hook_entry {
	weft_hook_kind kind;
	weft_hook_fn fn;
	void *user;
	int64_t handle;
} hook_entry;

struct weft_ctx {
	weft_device dev;
	const weft_kernel_table *k;
	void *kctx;
	weft_arena *arena;      /* device: activations, gradients */
	weft_arena *tape_arena; /* host: tensor structs, tape nodes */
	weft_tape_node *tail;
	uint64_t stamp;         /* unique across contexts, per step */
	uint64_t step;
	uint64_t pass;          /* backward pass counter */
	uint64_t seed;
	int64_t row_offset;
	uint64_t dropout_calls;
	int grad_enabled;
	int training;
	hook_entry *hooks;
	size_t n_hooks, cap_hooks;
	int64_t next_handle;
	int module_depth;
	const char *module_names[MODULE_MAX_DEPTH];
	void *module_ptrs[MODULE_MAX_DEPTH];
	int32_t autocast;       /* weft_dtype matrix products of F32 ops take their
				 * inputs in (autocast.c); WEFT_F32: off */
	int32_t lowp_mode;      /* weft_lowp_act the user chose (lowp.c) */
	int32_t lowp;           /* weft_dtype activations are kept in (lowp.c);
				 * WEFT_F32: off */
	float loss_grad_hint;   /* the upstream gradient a loss op expects its
				 * backward to get (default 1; the trainer sets
				 * its loss scale): the fused classifier makes
				 * its gradient for it in the forward (ops_lowp.c) */
	/* the 16-bit weight copy the products read (autocast.c,
	 * weft_ctx_use_params_copy): F32 weights inside [copy_src, copy_src +
	 * copy_numel) are read at the same element offset of copy (copy_dt);
	 * copy NULL: none, every product rounds its weight */
	const float *copy_src;
	int64_t copy_numel;
	void *copy;
	int32_t copy_dt;
};

#define ARENA_DEFAULT_BYTES (1u << 20)         /* an arena's first block */
#define CTX_TAPE_DEFAULT_BYTES (256u << 10)    /* a context's tape arena's */

/* The bytes an arena whose first block was `initial` (0: the default)
 * holds once a cycle has used `high_water`: the first block while that
 * fits, else the one block weft_arena_reset sizes to it (with an eighth
 * more for cycles that need a little more). */
size_t weft_arena_steady_bytes(size_t high_water, size_t initial);

/* A position in an arena (arena.c): what arena_release returns it to. */
typedef struct arena_pos {
	int cur;
	size_t block_used;
	size_t used;
} arena_pos;

/* Where the next allocation of a would go. */
void arena_mark(const weft_arena *a, arena_pos *out);

/* Frees, for reuse in this cycle, everything allocated from a since `pos`
 * was marked (the blocks stay; the high-water mark keeps what was
 * reached). Nothing allocated since may be used afterwards. */
void arena_release(weft_arena *a, const arena_pos *pos);

/* Checks dtype, ndim and dims; messages start with `what`. */
weft_status tensor_check_shape(const char *what, weft_dtype dt, int32_t ndim,
			       const int64_t *shape);

/* "x [4, 8]" or "w 'fc1.weight' [16, 9]" into buf. */
const char *op_desc(const weft_tensor *t, const char *role, char *buf, size_t len);

/* Checks a tensor input of `op`: present, with data, on ctx's device; a
 * float dtype the kernels support when want_float (OP_FLOAT_OR_LOWP: or
 * the context's 16-bit activation dtype, for the ops that take it on any
 * table), else I32/I64. */
#define OP_FLOAT_OR_LOWP 2
weft_status op_check(weft_ctx *ctx, const char *op, const char *role, const weft_tensor *t,
		     int want_float);

/* Checks two float inputs share a dtype. */
weft_status op_same_dtype(const char *op, const char *ra, const weft_tensor *a, const char *rb,
			  const weft_tensor *b);

/* Fires PARAM_PRE_USE for t when it is a parameter. */
weft_status op_pre_use(weft_ctx *ctx, const char *op, weft_tensor *t, weft_pass pass);

/* Whether t takes part in autograd now (grad on, t requires a gradient). */
int op_needs_grad(const weft_ctx *ctx, const weft_tensor *t);

/* A new output tensor in the arena (uninitialised data). */
weft_status op_output(weft_ctx *ctx, const char *op, weft_dtype dt, int32_t ndim,
		      const int64_t *shape, weft_tensor **out);

/* Scratch bytes from the activation arena. */
weft_status op_scratch(weft_ctx *ctx, const char *op, size_t bytes, void **out);

/* Records `out` as made by `op` from in[0..n): returns the node (to fill
 * saved/f/i) or NULL in *node when nothing needs a gradient. */
weft_status op_record(weft_ctx *ctx, const char *op, tape_backward_fn bw, weft_tensor *out,
		      int32_t n_in, weft_tensor *const *in, weft_tape_node **node);

/* op_record even when no input needs a gradient (an op whose parameters,
 * used inside it, do: checkpoint.c); grad must be on. */
weft_status op_record_always(weft_ctx *ctx, const char *op, tape_backward_fn bw,
			     weft_tensor *out, int32_t n_in, weft_tensor *const *in,
			     weft_tape_node **node);

/* Fused (flash) causal attention (ops_llama.c). op_flash_fits: the
 * context's table has flash_attention_forward and _backward (CUDA's; the
 * CPU table has neither) and they take head size hs. op_attention_flash:
 * out (B, T, n_head hs) from the packed qkv (B, T, (n_head + 2 n_kv_head)
 * hs) through them, saving the (B, n_head, T) F32 log-sum-exp instead of
 * the (B, n_head, T, T) probabilities; recorded under `op`. The caller
 * has checked the shapes and op_flash_fits. */
int op_flash_fits(const weft_ctx *ctx, int64_t hs);
weft_status op_attention_flash(weft_ctx *ctx, const char *op, weft_tensor *qkv, int64_t n_head,
			       int64_t n_kv_head, int64_t hs, weft_tensor **out);

/* Fires every hook of ev->kind. */
weft_status hooks_fire(weft_ctx *ctx, const weft_hook_event *ev);

/* The gradient buffer of t for the current step: allocated in the arena on
 * first need, marked TENSOR_GRAD_UNWRITTEN (run_node zeroes it unless the
 * first backward writes it whole). */
weft_status grad_of(weft_ctx *ctx, weft_tensor *t, void **out);

/* Whether a backward should compute the gradient of input i. */
static inline int bw_wants(const weft_tape_node *n, int32_t i)
{
	return n->in[i] && n->in[i]->grad && (n->in[i]->flags & WEFT_TENSOR_REQUIRES_GRAD) &&
	       !((n->passed >> i) & 1u);
}

static inline void *bw_grad(const weft_tape_node *n, int32_t i)
{
	return bw_wants(n, i) ? n->in[i]->grad->data : NULL;
}

/* Whether the backward of n must write input i's gradient (every element)
 * rather than add to it: only for inputs the op declared in overwrites. */
static inline int bw_first(const weft_tape_node *n, int32_t i)
{
	return (int)((n->fresh >> i) & 1u);
}

/* autocast.c: the linear layer's matrix products under autocast
 * (ctx->autocast BF16 or F16, for F32 x and w). Forward: y = x w^T (+ b)
 * with x rounded to ctx->autocast into the arena and w rounded too or
 * read from the weight copy (autocast_weight), F32 accumulation;
 * saved[0..1] receive the rounded x and w for the backward. Backward (the
 * node of such a forward): dx, dw, db as linear_backward, dy rounded too. */
weft_status autocast_linear_forward(weft_ctx *ctx, const weft_tensor *x, const weft_tensor *w,
				    const weft_tensor *b, int64_t rows, int64_t in_f,
				    int64_t out_f, weft_tensor *y, void **saved);
weft_status autocast_linear_backward(weft_ctx *ctx, weft_tape_node *n);

/* gemm_lowp of one matrix (no batch) with its scratch from the arena:
 * C (F32) = op(A) op(B) (+ C when beta is 1), A and B of `lo`. */
weft_status autocast_gemm(weft_ctx *ctx, const char *op, weft_dtype lo, int trans_a,
			  int trans_b, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
			  const void *b, int64_t ldb, float beta, void *c, int64_t ldc);

/* A product's F32 weight w (its numel elements) in lo, in *out: the
 * context's 16-bit weight copy when w lies in the flat buffer it mirrors
 * (weft_ctx_use_params_copy) and has lo, else w rounded into the arena. */
weft_status autocast_weight(weft_ctx *ctx, const char *op, const weft_tensor *w, weft_dtype lo,
			    void **out);

/* n F32 elements at src rounded to lo in a new arena buffer *out. */
weft_status autocast_round(weft_ctx *ctx, const char *op, const void *src, int64_t n,
			   weft_dtype lo, void **out);

/* ---- 16-bit activations (lowp.c, ops_lowp.c) ----
 *
 * Under the gate (ctx->lowp BF16 or F16, weft_ctx_set_lowp_activations)
 * the ops that have 16-bit kernels (ABI 1.6: the linear layer, layernorm
 * with the residual add, the loss) take and give ctx->lowp tensors. Every
 * other op goes through op_lowp_in / op_lowp_out: on a table that computes
 * in ctx->lowp (CUDA's float_dtypes) 16-bit inputs pass as they are; on one
 * that does not (the CPU's), they are widened to F32 and the output rounded
 * back, as the 16-bit kernel would store it; an op mixing 16-bit and F32
 * inputs (a norm's F32 weight) widens the 16-bit ones and gives F32, as
 * autocast's fp32 ops do. */

/* Whether the table has every ABI 1.6 member of 16-bit activations. */
int lowp_table_complete(const weft_kernel_table *k);

/* Sets ctx->lowp from ctx->autocast, ctx->lowp_mode and the table. */
void lowp_update(weft_ctx *ctx);

/* trainer.lowp_activations: auto (16-bit activations where the device's
 * kernels offer them), true (wherever they exist: the CPU's references
 * too), false; weft_lowp_act into *mode. true needs a 16-bit precision
 * (bf16-mixed, 16-mixed). The one reader of the key: core/train's trainer
 * config and core/plan's trial steps. Errors: WEFT_ERR_CONFIG naming the
 * key. */
weft_status weft_lowp_act_parse(const weft_cfg *trainer, weft_dtype autocast, int *mode);

/* y = x converted to dt (x itself when it has dt), recorded: the backward
 * converts the gradient back to x's dtype. */
weft_status op_cast(weft_ctx *ctx, weft_tensor *x, weft_dtype dt, weft_tensor **out);

/* Widens in[0..n) (NULL entries skipped) where the op cannot take them in
 * 16 bits; *narrow: the dtype op_lowp_out rounds the output to (F32:
 * none). Off the gate: nothing, *narrow F32. */
weft_status op_lowp_in(weft_ctx *ctx, weft_tensor **in, int32_t n, weft_dtype *narrow);

/* The op's result st; when st is WEFT_OK and narrow is not F32, *out is
 * cast to narrow. */
weft_status op_lowp_out(weft_ctx *ctx, weft_status st, weft_dtype narrow, weft_tensor **out);

/* y[i] += alpha x[i] for a dtype the table may not compute in (widened to
 * F32 through the arena then). */
weft_status op_axpy(weft_ctx *ctx, weft_dtype dt, int64_t n, float alpha, const void *x,
		    void *y);

/* The linear layer under the gate (ops_lowp.c): *handled 0 when it does not
 * apply (the gate off, or x or w of other dtypes). gelu: the GELU epilogue
 * (weft_op_linear_gelu). */
weft_status lowp_linear(weft_ctx *ctx, const char *op, weft_tensor *x, weft_tensor *w,
			weft_tensor *b, int gelu, weft_tensor **out, int *handled);

/* layernorm (r NULL) or residual add + layernorm under the gate; *handled 0
 * when it does not apply. */
weft_status lowp_layernorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *r, weft_tensor *w,
			   weft_tensor *b, float eps, weft_tensor **sum, weft_tensor **out,
			   int *handled);

/* Records a loss node of `op` (y from logits against targets): i[0..3]
 * rows, vocab, the targets' dtype, ignore_index; saved[0] the forward's
 * statistic for backward (probabilities, or log-sum-exp), saved[1] the
 * targets, saved[2] the count of counted rows. */
weft_status op_record_loss(weft_ctx *ctx, const char *op, tape_backward_fn bw, weft_tensor *y,
			   weft_tensor *logits, weft_tensor *targets, int64_t ignore_index,
			   void *stat, void *count, weft_tape_node **node);

/* cross-entropy over 16-bit logits under the gate; *handled 0 when it does
 * not apply. */
weft_status lowp_cross_entropy(weft_ctx *ctx, weft_tensor *logits, weft_tensor *targets,
			       int64_t ignore_index, weft_tensor **out, int *handled);

/* Whether the product of x and w (and bias b, may be NULL) goes under the
 * gate: w and b F32, x F32 or the context's 16-bit dtype (ops_lowp.c). */
int lowp_takes(const weft_ctx *ctx, const weft_tensor *x, const weft_tensor *w,
	       const weft_tensor *b);

/* The fused head and loss under the gate (ops_lowp.c): x (rows, C) of F32
 * or the 16-bit dtype, w (V, C) F32, shapes checked by the caller
 * (weft_op_linear_cross_entropy, ops_head.c). */
weft_status lowp_head_loss(weft_ctx *ctx, const char *op, weft_tensor *x, weft_tensor *w,
			   weft_tensor *targets, int64_t ignore_index, weft_tensor **out);

#endif /* WEFT_TENSOR_IMPL_H */
