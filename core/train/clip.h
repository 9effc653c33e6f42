/* train/clip.h - gradient clipping by global L2 norm.
 *
 * As torch.nn.utils.clip_grad_norm_(params, max_norm) with norm_type 2:
 *   norm = sqrt(sum over all gradients of g^2)
 *   coef = max_norm / (norm + 1e-6), used only when coef < 1
 *   g = g * coef                                          (in float)
 * The sum of squares is accumulated in double (PyTorch uses float), so the
 * norm is at least as accurate. A strategy whose gradients are sharded adds
 * the per-shard sums of squares across ranks (all-reduce) and then calls
 * weft_clip_coef and weft_clip_scale on its own slice. No call allocates.
 */
#ifndef WEFT_TRAIN_CLIP_H
#define WEFT_TRAIN_CLIP_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"

/* PyTorch's epsilon in the clip coefficient's denominator. */
#define WEFT_CLIP_EPS 1e-6

/* Sum of squares, in double, of n arrays: arrays[i] has lens[i] floats.
 * Partial sums from shards add up to the whole. */
double weft_clip_sum_squares(const float *const *arrays, const int64_t *lens, size_t n);

/* From a (global) sum of squares: stores the norm sqrt(sumsq) in
 * *norm_out (when not NULL) and returns the factor to multiply gradients
 * by: max_norm / (norm + 1e-6) when that is below 1, else 1. A non-finite
 * norm (an inf or NaN gradient) returns 1: clipping cannot repair it, and
 * the caller decides (skip the step, as loss scaling does). */
double weft_clip_coef(double sumsq, double max_norm, double *norm_out);

/* Multiplies every element of the arrays by (float)coef. */
void weft_clip_scale(float *const *arrays, const int64_t *lens, size_t n, double coef);

/* The single-process path: computes the global norm of the arrays, stores
 * it in *norm_out, and scales them in place when it exceeds max_norm.
 * Errors: WEFT_ERR_INVALID_ARG for max_norm <= 0 or not finite, a negative
 * length, or a NULL array with a nonzero length (nothing is changed). */
weft_status weft_clip_grad_norm(float *const *arrays, const int64_t *lens, size_t n,
				double max_norm, double *norm_out);

#endif /* WEFT_TRAIN_CLIP_H */
