/* Shared by the strategies that keep a full replica of the parameters and
 * of the optimizer state on every rank (single, dp, ddp): the optimizer
 * state, gradient clipping and the optimizer step over the whole flat
 * buffer, wherever the flat buffers live (host memory, or a CUDA device:
 * replicated_device.c). */
#ifndef WEFT_STRATEGY_REPLICATED_H
#define WEFT_STRATEGY_REPLICATED_H

#include "weft/step.h"

extern const weft_host *g_host; /* host.c */

typedef struct replicated_dev replicated_dev; /* replicated_device.c */

typedef struct replicated {
	const weft_strategy_env *env;
	float *params;      /* flat F32 parameters (borrowed from env->params; device
			     * memory when env->device is not the CPU) */
	float *grads;       /* flat F32 gradients (borrowed; same place) */
	int64_t numel;
	size_t n_slots;
	float *slot_mem;    /* host: n_slots * numel floats, WEFT_MEM_OPTIM */
	float *slots[8];    /* host slots; NULL when the state lives on the device */
	int last_skipped;   /* the last replicated_step skipped the optimizer (16-mixed overflow) */
	replicated_dev *dev; /* non-NULL: the flat buffers are device memory */
	void *copy;         /* env->params_copy (ABI 1.7): the 16-bit weights, or NULL */
	weft_dtype copy_dt;
	int copy_written;   /* the last replicated_step wrote every element of copy */
} replicated;

/* Finds the flat buffers and allocates zeroed optimizer state: host memory
 * on the CPU; on a CUDA device, what replicated_dev_init chooses (below).
 * Errors: WEFT_ERR_UNSUPPORTED (no F32 parameters, or too many slots, or
 * no CUDA kernel library in the process), WEFT_ERR_NOMEM. */
weft_status replicated_init(replicated *r, const weft_strategy_env *env);

/* Frees the optimizer state. */
void replicated_fini(replicated *r);

/* Clips the gradients (when env->gradient_clip_val > 0) and steps the
 * optimizer over every element; with 16-mixed (env->grads_check) first
 * checks them, and skips clipping and the optimizer when any rank's
 * overflowed (r->last_skipped = 1). *grad_norm gets the norm before clipping
 * (-1 when clipping is off). `grad_scale` multiplies the gradients as they
 * are read (e.g. 1/world for averaging), before the norm is taken. */
weft_status replicated_step(replicated *r, const weft_optim_step_info *info, double grad_scale,
			    double *grad_norm);

/* The step's outcome in *out: skipped (16-mixed overflow) and, where the
 * report has the member (ABI 1.7), copy_refreshed. */
void replicated_report(const replicated *r, weft_step_report *out);

/* Fills the checkpoint view: this rank holds every element of every slot,
 * in host memory (state on a device is copied to a host mirror, which the
 * next replicated_step copies back, so a checkpoint loaded into the view
 * becomes the training state). Blocking. Errors: NOMEM, device copies'. */
weft_status replicated_state(replicated *r, weft_strategy_state *out);

/* ---- replicated_device.c: the flat buffers in device memory ----
 *
 * Chooses how the optimizer runs for env->device and allocates its state:
 * the fused kernel (state on the device) when the optimizer says it is the
 * Adam family (weft_optim_ops.adam_params) in a form the kernel computes,
 * else host-staged (state in host memory; every step copies the gradients
 * and parameters to pinned host memory, clips and runs the optimizer
 * plugin there, and copies the parameters back). Logs the choice (INFO,
 * rank 0). Errors: WEFT_ERR_UNSUPPORTED (no CUDA kernel library loaded),
 * NOMEM, device errors. */
weft_status replicated_dev_init(replicated *r);

/* Frees what replicated_dev_init made. NULL r->dev is ignored. */
void replicated_dev_fini(replicated *r);

/* Clipping and the optimizer step on device-resident buffers (the part of
 * replicated_step after the overflow check); `in` already carries the
 * averaging factor in grad_scale. The fused kernel also writes r->copy
 * (r->copy_written) when its runs cover every element. Blocking for the
 * host-staged path; the fused path only waits for the clipping norm.
 * Errors: the optimizer's, device copies'. */
weft_status replicated_dev_step(replicated *r, const weft_optim_step_info *in,
				double *grad_norm);

/* replicated_state for device-resident state. */
weft_status replicated_dev_state(replicated *r, weft_strategy_state *out);

#endif
