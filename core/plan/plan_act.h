/* plan/plan_act.h - the activation term of `weft plan`: the bytes of the
 * activation arenas each rank holds once training has reached its steady
 * size.
 *
 * A GPT's step allocates, per micro-batch (the context is stepped before
 * each), the same bytes for every block, and bytes that grow linearly
 * with the micro-batch: its arena's peak is a + b L + c B + d B L over the
 * block count L and the micro-batch B, exactly, for a given sequence
 * length, model width, precision and checkpointing mode. The plan
 * measures it rather than modelling every op: it runs one training
 * forward and backward of the model with 1 and 2 blocks at micro-batch 1
 * and 2 on the CPU (the kernels' real outputs, scratch and gradients, the
 * recomputes of activation checkpointing), solves for a..d, and takes the
 * arena's rule for the block it settles in (weft_arena_steady_bytes) for
 * the device arena and the host tape arena. Kernel scratch is included
 * (it comes from the same arena); it is the CPU kernels' (the CUDA
 * kernels take theirs from the same arena, of similar size). */
#ifndef WEFT_PLAN_PLAN_ACT_H
#define WEFT_PLAN_PLAN_ACT_H

#include <stdint.h>

#include "plan/plan.h"
#include "weft/config.h"
#include "weft/module.h"

typedef struct weft_plan_act {
	int predicted;          /* 0: no prediction (why in `why`) */
	char why[160];
	int64_t micro_batch;    /* rows per rank per micro-batch (data.batch_size) */
	int64_t seq_len;        /* positions (data.block_size, else model.block_size) */
	int64_t n_layer;        /* blocks the rank runs */
	const char *mode;       /* trainer.activation_checkpointing */
	const char *precision;  /* trainer.precision */
	int64_t contexts;       /* activation contexts per rank */
	int64_t arena_peak;     /* one micro-batch step's device arena peak */
	int64_t tape_peak;      /* its host tape arena peak */
	int64_t bytes;          /* the "activations" category per rank, steady */
	int64_t arena_h[2][2];  /* the trial peaks at 1-2 blocks x micro-batch 1-2 */
	int64_t tape_h[2][2];
} weft_plan_act;

/* The "activations" bytes per rank the same run would hold at another
 * micro-batch (rows per rank), from the trial steps a prediction made;
 * 0 for a plan without a prediction or a micro_batch < 1. */
int64_t weft_plan_act_bytes_at(const weft_plan_act *a, int64_t micro_batch);

/* Predicts the activation bytes per rank of a run of config `root` (after
 * weft_config_compat) for plan options `o`, the model built with `mo` (as
 * weft_plan_model_options gives it). Strategies whose ranks run the whole
 * model on their own micro-batch (single, ddp, zero_*) are predicted;
 * others (tp, pp, hybrid, dp) and non-GPT models set predicted 0 with the
 * reason. Runs four small training steps on the CPU (see above); blocks.
 * Errors: WEFT_ERR_CONFIG for a bad data.batch_size / block_size or
 * checkpointing mode (file:line:col); the model's and the ops' errors. */
weft_status weft_plan_activations(const weft_cfg *root, const weft_plan_opts *o,
				  const weft_model_options *mo, weft_plan_act *out);

#endif /* WEFT_PLAN_PLAN_ACT_H */
