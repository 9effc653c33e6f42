/* weft/ops.h - differentiable operations.
 *
 * Every op follows one contract:
 * - It runs on the context's device; every input must be on that device.
 *   Floating inputs of one op share one dtype that the device's kernel
 *   table supports (F32 on the CPU); index inputs (embedding ids,
 *   cross-entropy targets) are I32 or I64.
 * - *out receives a new tensor in the context's activation arena, borrowed,
 *   valid until the next weft_ctx_step_begin. Its name is the op's name.
 * - When grad is enabled and an input requires a gradient, the op is
 *   recorded on the tape and its output requires a gradient; the
 *   PARAM_PRE_USE hook fires first for every parameter input.
 * - Errors never crash and never record anything; *out is NULL:
 *   WEFT_ERR_SHAPE / WEFT_ERR_DTYPE / WEFT_ERR_INVALID_ARG with a message
 *   that names the op, the tensor (its name, or its role: "x", "w") and the
 *   shapes, and says what would fit; WEFT_ERR_NOMEM when the arena cannot
 *   grow; a hook's or a kernel's status.
 * - Inputs are not modified (autograd state aside). No op allocates once the
 *   arena is warm.
 */
#ifndef WEFT_OPS_H
#define WEFT_OPS_H

#include <stdint.h>
#include "weft/status.h"
#include "weft/tensor.h"
#include "weft/autograd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Matrix product. a: (..., M, K); b: (K, N) shared by every batch, or
 * (..., K, N) with exactly a's leading dims. out: (..., M, N). Batches run
 * as one batched GEMM. */
WEFT_API weft_status weft_op_matmul(weft_ctx *ctx, weft_tensor *a, weft_tensor *b,
				    weft_tensor **out);

/* y = x @ w^T + b, PyTorch's layout: x (..., in), w (out, in), b (out) or
 * NULL. out: (..., out). */
WEFT_API weft_status weft_op_linear(weft_ctx *ctx, weft_tensor *x, weft_tensor *w,
				    weft_tensor *b, weft_tensor **out);

/* gelu(x @ w^T + b), GELU's tanh form: weft_op_linear then weft_op_gelu,
 * in one product with the bias and GELU in its epilogue under 16-bit
 * activations (weft_ctx_set_lowp_activations), where the pre-activation is
 * kept and the backward of the linear layer reading the output applies
 * GELU's derivative in its own product. */
WEFT_API weft_status weft_op_linear_gelu(weft_ctx *ctx, weft_tensor *x, weft_tensor *w,
					 weft_tensor *b, weft_tensor **out);

/* a + b and a * b elementwise. b has a's shape or a trailing part of it
 * (b of shape (T, C) broadcasts over a (B, T, C)). out: a's shape. */
WEFT_API weft_status weft_op_add(weft_ctx *ctx, weft_tensor *a, weft_tensor *b,
				 weft_tensor **out);
WEFT_API weft_status weft_op_mul(weft_ctx *ctx, weft_tensor *a, weft_tensor *b,
				 weft_tensor **out);

/* alpha * x. */
WEFT_API weft_status weft_op_scale(weft_ctx *ctx, weft_tensor *x, float alpha,
				   weft_tensor **out);

/* x + b with b 1-D of x's last dim (a bias). */
WEFT_API weft_status weft_op_bias(weft_ctx *ctx, weft_tensor *x, weft_tensor *b,
				  weft_tensor **out);

/* max(x, 0); GELU (tanh form, as GPT-2 and nn.GELU(approximate="tanh")). */
WEFT_API weft_status weft_op_relu(weft_ctx *ctx, weft_tensor *x, weft_tensor **out);
WEFT_API weft_status weft_op_gelu(weft_ctx *ctx, weft_tensor *x, weft_tensor **out);
/* GELU's exact form, x Phi(x) (nn.GELU(), F.gelu, transformers' "gelu");
 * since ABI 1.5. Errors: WEFT_ERR_UNSUPPORTED naming the kernel table when
 * it lacks gelu_erf_forward/backward; otherwise as weft_op_gelu. */
WEFT_API weft_status weft_op_gelu_erf(weft_ctx *ctx, weft_tensor *x, weft_tensor **out);

/* Softmax over the last dim. */
WEFT_API weft_status weft_op_softmax(weft_ctx *ctx, weft_tensor *x, weft_tensor **out);

/* LayerNorm over the last dim (biased variance, eps inside the sqrt, as
 * PyTorch); w and b of the last dim's size, either may be NULL. */
WEFT_API weft_status weft_op_layernorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *w,
				       weft_tensor *b, float eps, weft_tensor **out);

/* A residual add and the LayerNorm after it: *sum = x + r (x's shape) and
 * *out = layernorm(*sum) as weft_op_layernorm, both kept (the sum is the
 * residual stream, the norm the next layer's input); one pass under 16-bit
 * activations (weft_ctx_set_lowp_activations). */
WEFT_API weft_status weft_op_add_layernorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *r,
					   weft_tensor *w, weft_tensor *b, float eps,
					   weft_tensor **sum, weft_tensor **out);

/* x converted to dt (F32, or the context's 16-bit activation dtype, or
 * one its kernels compute in), rounded to nearest even; x itself when it
 * has dt already. The gradient is converted back to x's dtype. */
WEFT_API weft_status weft_op_cast(weft_ctx *ctx, weft_tensor *x, weft_dtype dt,
				  weft_tensor **out);

/* Row lookup: ids (any shape, I32 or I64) into table (vocab, dim).
 * out: ids' shape + (dim). Gradient flows to the table only.
 * Errors also: WEFT_ERR_INVALID_ARG naming the position and id when an id
 * is outside [0, vocab). */
WEFT_API weft_status weft_op_embedding(weft_ctx *ctx, weft_tensor *ids, weft_tensor *table,
				       weft_tensor **out);

/* Multi-head causal self-attention on nanoGPT's packed projection:
 * qkv (B, T, 3C) = q | k | v, n_head heads of C / n_head. out: (B, T, C).
 * Saves the (B, n_head, T, T) probabilities for backward.
 * Errors also: WEFT_ERR_SHAPE when 3C is not divisible by 3 * n_head. */
WEFT_API weft_status weft_op_attention(weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
				       weft_tensor **out);

/* ---- the layers of Llama-family models (kernel-table members since ABI
 * 1.4). Each also fails with WEFT_ERR_UNSUPPORTED, naming the kernel
 * table and the member, on a device whose kernel table lacks it. ---- */

/* RMSNorm over the last dim: x * rstd * w with rstd = 1 / sqrt(mean(x^2) +
 * eps) in F32 (torch.nn.functional.rms_norm, LlamaRMSNorm); w of the last
 * dim's size, or NULL. Errors also: INVALID_ARG for eps not positive. */
WEFT_API weft_status weft_op_rmsnorm(weft_ctx *ctx, weft_tensor *x, weft_tensor *w, float eps,
				     weft_tensor **out);

/* Rotary position embedding, rotate-half layout (Hugging Face's Llama):
 * x (B, T, W); in each row the first n_rot heads of head_dim elements are
 * rotated (pairs i and i + head_dim / 2 by the angle (pos_offset + t) *
 * weft_rope_inv_freq(rope, head_dim, i)), the rest of the row is passed
 * through: x may be a packed q | k | v with n_rot = n_head + n_kv_head.
 * pos_offset is the first row's position (the tokens already in a KV
 * cache when generating; 0 in training). rope (weft/device.h) is copied.
 * Errors also: INVALID_ARG for an odd head_dim, bad frequencies or
 * positions past 2^24; SHAPE when n_rot heads do not fit in W. */
WEFT_API weft_status weft_op_rope(weft_ctx *ctx, weft_tensor *x, const weft_rope *rope,
				  int64_t n_rot, int64_t head_dim, int64_t pos_offset,
				  weft_tensor **out);

/* SwiGLU: silu(gate) * up. Two tensors of one shape (out: that shape), or
 * up NULL and gate one packed tensor (..., 2I) whose rows are [gate | up]
 * (out: (..., I)). Under tensor parallelism each rank's gate and up are
 * column slices, so either form stays rank-local. Errors also: SHAPE for
 * different shapes, or an odd packed last dim. */
WEFT_API weft_status weft_op_swiglu(weft_ctx *ctx, weft_tensor *gate, weft_tensor *up,
				    weft_tensor **out);

/* Causal self-attention with grouped-query heads on a packed projection:
 * qkv (B, T, (n_head + 2 n_kv_head) hs) = q (n_head heads) | k (n_kv_head)
 * | v (n_kv_head); query head h attends with kv head h / (n_head /
 * n_kv_head) (PyTorch's repeat_interleave, HF's repeat_kv). n_kv_head ==
 * n_head is multi-head attention, 1 multi-query. out: (B, T, n_head hs).
 * Saves the (B, n_head, T, T) probabilities for backward. Errors also:
 * INVALID_ARG when n_kv_head does not divide n_head; SHAPE when the last
 * dim is not a multiple of n_head + 2 n_kv_head. */
WEFT_API weft_status weft_op_attention_gqa(weft_ctx *ctx, weft_tensor *qkv, int64_t n_head,
					   int64_t n_kv_head, weft_tensor **out);

/* Inverted dropout with probability p in [0, 1): in training mode drops
 * each element with probability p and scales the rest by 1 / (1 - p); the
 * mask comes from the context's counter-based RNG (weft_ctx_set_rng). Out
 * of training mode, or with p == 0, out is x itself (no copy, no record).
 * Errors also: WEFT_ERR_INVALID_ARG for p outside [0, 1). */
WEFT_API weft_status weft_op_dropout(weft_ctx *ctx, weft_tensor *x, float p, weft_tensor **out);

/* Mean cross-entropy of logits (..., V) against targets (...) (I32/I64),
 * skipping targets equal to ignore_index (PyTorch uses -100). out: an F32
 * scalar; 0 when every target is ignored.
 * Errors also: WEFT_ERR_INVALID_ARG naming the row and the target when a
 * target is outside [0, V). */
WEFT_API weft_status weft_op_cross_entropy(weft_ctx *ctx, weft_tensor *logits,
					   weft_tensor *targets, int64_t ignore_index,
					   weft_tensor **out);

/* A classifier head and its loss in one op, since ABI 1.6: the mean
 * cross-entropy of x @ w^T against targets, x (..., C), w (V, C) with no
 * bias, targets x's shape without its last dim; what weft_op_linear then
 * weft_op_cross_entropy give, with no logits tensor. Under 16-bit
 * activations (weft_ctx_set_lowp_activations; w F32, x F32 or the 16-bit
 * dtype) the logits live only in the step's arena, rows padded to a
 * multiple of 128 elements so every product over them has aligned leading
 * dimensions, and the loss's gradient is written over them before the
 * backward's two products read it. Elsewhere it is those two ops, whose
 * errors it gives. Errors: as weft_op_linear and weft_op_cross_entropy. */
WEFT_API weft_status weft_op_linear_cross_entropy(weft_ctx *ctx, weft_tensor *x, weft_tensor *w,
						  weft_tensor *targets, int64_t ignore_index,
						  weft_tensor **out);

/* Counts rows of logits (..., V) whose arg-max equals the target, skipping
 * ignore_index; never recorded. *correct and *counted are host integers.
 * Blocks until they are known. */
WEFT_API weft_status weft_op_accuracy(weft_ctx *ctx, weft_tensor *logits, weft_tensor *targets,
				      int64_t ignore_index, int64_t *correct, int64_t *counted);

/* The same data with another shape of the same numel (no copy); recorded
 * so gradients flow through. Errors: WEFT_ERR_SHAPE naming both shapes. */
WEFT_API weft_status weft_op_reshape(weft_ctx *ctx, weft_tensor *x, int32_t ndim,
				     const int64_t *shape, weft_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_OPS_H */
