/* core/pipeline: GPT pipeline stages for a trainer.
 *
 * The trainer's side of weft_strategy_env's stage callbacks (stage_create,
 * stage_forward, stage_free in weft/strategy.h), shared by core/train and
 * the strategy test harness so both build and run stages the same way: a
 * stage is a GPT of the whole model's shape (weft_model_gpt_config) holding
 * blocks [layer_begin, layer_end) and the parts the WEFT_STAGE_* bits name,
 * built with the whole model's options (device, seed; tensor-parallel
 * fields when the trainer built a split model).
 */
#ifndef WEFT_PIPELINE_STAGE_H
#define WEFT_PIPELINE_STAGE_H

#include "weft/module.h"
#include "weft/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_pp_stage weft_pp_stage;

/* Builds a stage of `whole` (borrowed, only read here): `opt` gives the
 * device, seed and tensor-parallel plan (its stage fields are ignored; the
 * tp size, rank and flags are the whole model's: a stage of a tp shard is
 * the same shard of those blocks, its tp ops unbound until the caller
 * binds them with weft_tp_group_bind or the host's tp_bind),
 * `parts` the WEFT_STAGE_* bits, [layer_begin, layer_end) the blocks.
 * Parameter values are those the whole model was initialised with (same
 * names, same seed), not what it holds now. *out is a new stage, freed
 * with weft_pp_stage_free; *params is borrowed until then. Blocking.
 * Errors: WEFT_ERR_UNSUPPORTED when `whole` is not a GPT (naming its
 * class); weft_model_create_gpt's (a range that does not fit n_layer);
 * WEFT_ERR_NOMEM. */
weft_status weft_pp_stage_create(const weft_model *whole, const weft_model_options *opt,
				 uint32_t parts, int64_t layer_begin, int64_t layer_end,
				 weft_pp_stage **out, weft_params **params);

/* Runs micro-batch b through the stage on ctx, as stage_forward in
 * weft/strategy.h describes: x is the previous stage's hidden state or
 * NULL on the EMBED stage; train 1 turns grad and training mode on (both
 * restored after), with the dropout keys (seed, b->row_offset) and, when
 * step_key > 0, the context's step counter set to step_key (the trainer's
 * key for the micro-batch, so masks do not depend on which pooled context
 * runs it). A stage without HEAD gives its hidden state in *out; a HEAD
 * stage gives its mean loss times loss_scale in *out, the unscaled loss
 * in *loss and, when not training, adds to *rep (if not NULL) what the
 * trainer's evaluate adds for the whole model: loss times the targets
 * counted, and those targets as rows. *out is borrowed from ctx's arena.
 * Errors: those of weft_model_forward, weft_model_loss, weft_model_eval. */
weft_status weft_pp_stage_forward(weft_pp_stage *s, weft_ctx *ctx, uint64_t seed,
				  uint64_t step_key, const weft_micro_batch *b, weft_tensor *x,
				  int train, double loss_scale, weft_tensor **out, double *loss,
				  weft_eval_report *rep);

/* Frees a stage. NULL is ignored. */
void weft_pp_stage_free(weft_pp_stage *s);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PIPELINE_STAGE_H */
