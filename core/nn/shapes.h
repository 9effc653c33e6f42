/* nn/shapes.h - a model's parameters as declared, without storage.
 *
 * Planning a run (`weft plan`, weft fit's memory check before launch)
 * needs the names, dtypes and shapes of the parameters a rank would hold
 * (and their tensor-parallel splits), not their values: a model built
 * here declares every parameter exactly as weft_model_from_config would,
 * then allocates no parameter or gradient buffer, initialises nothing and
 * loads no init_from weights (an HF directory's config.json is still read
 * for its shapes). Building GPT-2 xl this way takes milliseconds and a
 * few hundred KiB instead of 6 GB and the initialisation of 1.5 billion
 * values. */
#ifndef WEFT_NN_SHAPES_H
#define WEFT_NN_SHAPES_H

#include "weft/config.h"
#include "weft/module.h"

/* The model of section `sec` as weft_model_from_config(sec, opt) would
 * declare it, shapes only: weft_model_params gives its parameters (count,
 * names, dtypes, shapes, tp splits) with NULL data and no gradients; the
 * model's config getters (weft_model_gpt_config ...) answer as usual.
 * Such a model must not run, be saved, loaded or trained. Free with
 * weft_model_free. Errors: those of weft_model_from_config's config
 * checks. */
weft_status nn_model_shapes_from_config(const weft_cfg *sec, const weft_model_options *opt,
					weft_model **out);

/* The transformer of cfg with the choices `arch` (NULL: GPT-2's) as
 * nn_model_create_transformer builds it, its parameters (and
 * gradients) allocated and zeroed but not initialised: for trial steps
 * that measure memory, which does not depend on the values (weft plan's
 * activation term), where drawing the initial weights of a 50k-token
 * embedding would take most of the time. Errors: nn_model_create_transformer's. */
struct nn_arch;
weft_status nn_model_create_transformer_uninit(const weft_gpt_config *cfg,
					       const struct nn_arch *arch,
					       const weft_model_options *opt, weft_model **out);

/* 1 for a model built by nn_model_shapes_from_config. */
int nn_model_is_shapes_only(const weft_model *m);

#endif /* WEFT_NN_SHAPES_H */
