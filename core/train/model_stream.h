/* train/model_stream.h - model.safetensors written as a sharding strategy
 * makes its parameters whole, a few at a time.
 *
 * A strategy with the params_visit member (weft/strategy.h, since ABI 1.4:
 * zero) never holds the whole model to save it: the writer rank builds the
 * safetensors header from the parameters' names and shapes, then appends
 * each parameter's bytes as the visit makes it whole. The file is byte for
 * byte the one weft_model_save_safetensors writes of the whole model. */
#ifndef WEFT_TRAIN_MODEL_STREAM_H
#define WEFT_TRAIN_MODEL_STREAM_H

#include "nn/safetensors.h"
#include "weft/strategy.h"

/* Whether ops has a params_visit to stream with. */
int weft_model_stream_available(const weft_strategy_ops *ops);

/* Writes `path` (created or truncated) on the rank where `writer` is
 * nonzero, from ops->params_visit over `ps` (the strategy's env->params),
 * with `meta`'s pairs in __metadata__ (weft_model_st_meta of the model, so
 * the file equals weft_model_save_safetensors'; NULL for none).
 * Collective: every rank of the strategy calls it; a writer's I/O error
 * does not stop the visit (the other ranks are in it too) and is returned
 * after it. Blocking. Errors: WEFT_ERR_IO naming the path (disk full, no
 * such directory); WEFT_ERR_NOMEM; the strategy's. */
weft_status weft_model_stream_save(const weft_strategy_ops *ops, void *strategy,
				   const weft_params *ps, const weft_model_meta *meta, int writer,
				   const char *path);

#endif
