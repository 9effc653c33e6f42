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
 * kernels take theirs from the same arena, of similar size).
 *
 * Tensor parallelism (strategy tp, a model built as tp shards): the trial
 * steps run tp rank 0's shards with a stand-in communicator whose
 * collectives move the right number of elements (this rank's own
 * contribution), so every op allocates what it does in the real run:
 * sequence-parallel regions at T/size positions, the vocabulary-parallel
 * loss's logits shard, the gathered and scattered activations.
 *
 * Pipelines (pp and hybrid, whose plan names its stages and schedule,
 * weft_plan_pipeline): each stage kind (the first with the embedding, a
 * middle one, the last with the head) gets its own four trial steps,
 * run as the pipeline runs a micro-batch's stage (the received hidden
 * state and its gradient in the stage's context); the schedule of each
 * pipeline rank is then played through the strategy's reuse of contexts
 * (one per micro-batch in flight, taken when its forward starts, given
 * back when its backward is done), which says how many contexts the rank
 * holds and which stages each has run: each holds the arena of the
 * largest. gpipe holds all m micro-batches, 1f1b at most pp - rank,
 * interleaved 1f1b what its warm-up keeps in flight. The rank with the
 * most is the one reported. */
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
	int32_t rank;           /* the world rank `bytes` is for (the most) */
	int32_t tp_size;        /* tensor-parallel shards of the model (1: whole) */
	int64_t n_micro;        /* micro-batches per step (a pipeline's schedule) */
	weft_plan_pipeline pipeline; /* pp > 0: the stages (contexts is the rank's) */
	/* a pipeline's trial peaks per stage kind (bit 0: the embedding,
	 * bit 1: the head), as arena_h and tape_h */
	int64_t stage_arena_h[4][2][2];
	int64_t stage_tape_h[4][2][2];
} weft_plan_act;

/* The "activations" bytes per rank the same run would hold at another
 * micro-batch (rows per rank), from the trial steps a prediction made (a
 * pipeline's on its largest rank at that micro-batch); 0 for a plan
 * without a prediction, a micro_batch < 1, or when the memory to replay a
 * pipeline's schedule runs out. */
int64_t weft_plan_act_bytes_at(const weft_plan_act *a, int64_t micro_batch);

/* Predicts the activation bytes per rank of a run of config `root` (after
 * weft_config_compat) for plan options `o`, the model built with `mo` (as
 * weft_plan_model_options gives it). Strategies whose ranks run the whole
 * model on their own micro-batch (single, ddp, zero_*), tp, and the
 * pipelines whose memory_plan names their stages (pp, hybrid) are
 * predicted; others (dp, strategies that do not say) and non-GPT models
 * set predicted 0 with the reason. Runs four small training steps on the
 * CPU per model or stage kind (see above); blocks. Errors:
 * WEFT_ERR_CONFIG for a bad data.batch_size / block_size or checkpointing
 * mode (file:line:col), or a schedule the pipeline cannot run with this
 * accumulate_grad_batches; the strategy's plan errors; the model's and
 * the ops' errors. */
weft_status weft_plan_activations(const weft_cfg *root, const weft_plan_opts *o,
				  const weft_model_options *mo, weft_plan_act *out);

#endif /* WEFT_PLAN_PLAN_ACT_H */
