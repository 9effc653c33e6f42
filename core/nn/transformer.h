/* nn/transformer.h - building more of a model's transformer (for pipeline
 * stages and other copies), whatever its choices (norm, positions, MLP,
 * heads; nn_impl.h's nn_arch). */
#ifndef WEFT_NN_TRANSFORMER_H
#define WEFT_NN_TRANSFORMER_H

#include "weft/module.h"

/* A new transformer of the GPT-class model `like`'s config and choices,
 * built with `opt` (a stage, tp shards, no gradients ...); free with
 * weft_model_free. Errors: those of weft_model_create_gpt, and
 * WEFT_ERR_UNSUPPORTED naming what is missing when opt asks for tp shards
 * of a transformer other than GPT-2's (stages of every one are built). */
weft_status nn_model_create_like(const weft_model *like, const weft_model_options *opt,
				 weft_model **out);

#endif /* WEFT_NN_TRANSFORMER_H */
