/* Shared by the strategies that keep a full replica of the parameters and
 * of the optimizer state on every rank (single, dp, ddp): the optimizer
 * state, gradient clipping and the optimizer step over the whole flat
 * buffer. */
#ifndef WEFT_STRATEGY_REPLICATED_H
#define WEFT_STRATEGY_REPLICATED_H

#include "weft/strategy.h"

extern const weft_host *g_host;

typedef struct replicated {
	const weft_strategy_env *env;
	float *params;      /* flat F32 parameters (borrowed from env->params) */
	float *grads;       /* flat F32 gradients (borrowed) */
	int64_t numel;
	size_t n_slots;
	float *slot_mem;    /* n_slots * numel floats, WEFT_MEM_OPTIM */
	float *slots[8];
	int last_skipped;   /* the last replicated_step skipped the optimizer (16-mixed overflow) */
} replicated;

/* Finds the flat buffers and allocates zeroed optimizer state.
 * Errors: WEFT_ERR_UNSUPPORTED (no F32 parameters, or too many slots),
 * WEFT_ERR_NOMEM. */
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

/* Fills the checkpoint view: this rank holds every element of every slot. */
void replicated_state(const replicated *r, weft_strategy_state *out);

/* Nanoseconds on a monotonic clock. */
int64_t replicated_now_ns(void);

#endif
