/* tensor/checkpoint.h - activation checkpointing: run a function of one
 * tensor without keeping what it makes in between, and make it again in
 * backward.
 *
 * Core-internal (the GPT's blocks and attention use it; no plugin ABI). */
#ifndef WEFT_TENSOR_CHECKPOINT_H
#define WEFT_TENSOR_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "weft/autograd.h"
#include "weft/tensor.h"

/* The function checkpointed: *out = f(x) in ctx's arena, with ops that
 * record on the tape when grad is on. It must be deterministic given the
 * context's random state (dropout keys come from the context's seed,
 * step, row offset and dropout call count, which the recompute restores),
 * read nothing that changes between the forward and the backward besides
 * the parameters, and close every module it opens, also on error. */
typedef weft_status (*weft_checkpoint_fn)(weft_ctx *ctx, void *user, weft_tensor *x,
					  weft_tensor **out);

/* *out = fn(x), of dtype x's and shape out_shape[0..out_ndim), keeping
 * only x and *out: fn runs with grad off in a region of the arenas that is
 * freed when it returns, and one tape node is recorded whose backward runs
 * fn again with grad on (the same random numbers: the same dropout masks),
 * back-propagates *out's gradient through what it recorded (the
 * parameters' gradients and hooks as without checkpointing) into x's
 * gradient, and frees that region again. `user` (user_bytes) is copied
 * into the step's tape arena and handed to both runs. With grad off only
 * fn(x) is kept (in the region's place), nothing recorded. The same gradients, bit for bit, as fn without
 * checkpointing. Errors: fn's; WEFT_ERR_INTERNAL when fn's result is not
 * of the declared shape and dtype; WEFT_ERR_NOMEM from the arenas. */
weft_status weft_checkpoint(weft_ctx *ctx, const char *name, weft_checkpoint_fn fn,
			    const void *user, size_t user_bytes, weft_tensor *x, int32_t out_ndim,
			    const int64_t *out_shape, weft_tensor **out);

#endif /* WEFT_TENSOR_CHECKPOINT_H */
