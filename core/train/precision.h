/* train/precision.h - trainer.precision: what each mode computes in, and
 * 16-mixed's dynamic loss scaling (as DeepSpeed's DynamicLossScaler and
 * PyTorch's GradScaler).
 *
 * bf16-mixed and 16-mixed keep parameters, gradients and optimizer state in
 * F32; the linear layers' matrix products take bf16 / f16 inputs and
 * accumulate in F32 (autocast, weft_ctx_set_autocast). f16 has a narrow
 * range, so 16-mixed multiplies the loss by a scale S before backward (the
 * small gradients stay representable) and divides the gradients by S
 * before clipping and the optimizer. A step whose gradients hold an inf or
 * a NaN on any rank is skipped on every rank (weft_strategy_env.grads_check)
 * and the scale adapts:
 *   - an overflow uses up one of `hysteresis` tolerated overflows; once
 *     they are used up the scale halves at this and each further overflow
 *     (never below min_loss_scale); a clean step gives them all back
 *     (so the scale halves after `hysteresis` consecutive overflows);
 *   - after loss_scale_window consecutive clean steps the scale doubles.
 */
#ifndef WEFT_TRAIN_PRECISION_H
#define WEFT_TRAIN_PRECISION_H

#include <stddef.h>
#include <stdint.h>

#include "weft/config.h"
#include "weft/device.h"
#include "weft/status.h"

/* trainer.loss_scale (16-mixed only); docs/config.md lists the keys. */
typedef struct weft_loss_scale_config {
	int enabled;                  /* precision 16-mixed */
	int64_t initial_scale_power;  /* the first scale is 2^this (default 16) */
	int64_t window;               /* loss_scale_window: clean steps per doubling (1000) */
	int64_t hysteresis;           /* overflows tolerated before halving (2) */
	double min_scale;             /* min_loss_scale: the floor (1) */
} weft_loss_scale_config;

/* The scaler's state; saved in trainer_state.json. */
typedef struct weft_loss_scaler {
	weft_loss_scale_config cfg;
	double scale;                 /* the loss is multiplied by this */
	int64_t good_steps;           /* consecutive clean steps since the scale last
				       * changed or a step overflowed */
	int64_t hysteresis_left;      /* overflows still tolerated before halving */
	int64_t skipped;              /* optimizer steps skipped over the run */
} weft_loss_scaler;

/* Reads trainer.precision's consequences: *autocast gets F32 (32-true),
 * BF16 (bf16-mixed) or F16 (16-mixed) from `precision` (as resolved by the
 * trainer config), and *ls the trainer.loss_scale mapping of `trainer`
 * (defaults when absent; enabled for 16-mixed). Errors: WEFT_ERR_CONFIG at
 * file:line:col for a loss_scale with another precision, an unknown key
 * (by the config's strictness check later) or a value out of range. */
weft_status weft_precision_parse(const weft_cfg *trainer, const char *precision,
				 weft_dtype *autocast, weft_loss_scale_config *ls);

/* Starts a scaler at 2^initial_scale_power with every hysteresis left. */
void weft_loss_scaler_init(weft_loss_scaler *s, const weft_loss_scale_config *c);

/* Records one step: `overflow` nonzero when its gradients held an inf or a
 * NaN (the step was skipped; counted in s->skipped). Halves or doubles the
 * scale as the header says. Returns 1 when the scale changed, else 0. */
int weft_loss_scaler_update(weft_loss_scaler *s, int overflow);

/* 1 when any of the n arrays (lens[i] floats each) holds an inf or a NaN. */
int weft_grads_nonfinite(const float *const *arrays, const int64_t *lens, size_t n);

struct weft_ctx;

/* The same test on ctx's device (precision_device.c): host memory on the
 * CPU; on CUDA the arrays are device memory, checked on ctx's stream by the
 * CUDA library's unscale_check (factor 1) and one flag copied back, so the
 * call blocks until the work queued on ctx before it is done. *found: 1
 * when an inf or a NaN was seen. Errors: WEFT_ERR_UNSUPPORTED when the
 * CUDA library has no unscale_check (naming the file); device errors. */
weft_status weft_grads_nonfinite_on(struct weft_ctx *ctx, const float *const *arrays,
				    const int64_t *lens, size_t n, int *found);

#endif /* WEFT_TRAIN_PRECISION_H */
