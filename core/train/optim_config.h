/* train/optim_config.h - the optimizer section keys the host owns.
 *
 * The `optimizer` section is shared: the host reads `name` (which plugin),
 * `lr` (the base learning rate the schedule scales) and `no_decay` (which
 * tensors get no weight decay); the plugin reads the rest (weft/optim.h).
 *
 * The weight-decay rule is decided here, once per tensor, and handed to
 * the plugin as weft_optim_segment.decay:
 * - default (no `no_decay` key): nanoGPT's rule, a tensor decays when it
 *   has 2 or more dimensions (matmul and embedding weights) and does not
 *   when it has fewer (biases, LayerNorm/RMSNorm weights, scalars);
 * - `no_decay: [GLOB, ...]`: a tensor is exempt when its dotted name
 *   matches one of the fnmatch(3) globs ('*' also crosses dots), and every
 *   other tensor decays whatever its shape; `no_decay: []` decays all
 *   (plain PyTorch with a single parameter group).
 */
#ifndef WEFT_TRAIN_OPTIM_CONFIG_H
#define WEFT_TRAIN_OPTIM_CONFIG_H

#include <stddef.h>
#include "weft/config.h"
#include "weft/optim.h"
#include "weft/status.h"

typedef struct weft_optim_config {
	const char *name;         /* the optimizer plugin's name; borrowed from the config */
	double lr;                /* base learning rate, >= 0 */
	const weft_cfg *no_decay; /* sequence of globs, or NULL for the ndim rule */
	const weft_cfg *section;  /* the whole section, handed to the plugin's create */
} weft_optim_config;

/* Reads name (required), lr (default 1e-3) and no_decay from the
 * `optimizer` section. Nodes stay borrowed from the config. Errors:
 * WEFT_ERR_CONFIG with file:line:col for a missing section or name, a
 * negative or non-finite lr, or a no_decay that is not a list of
 * non-empty strings. */
weft_status weft_optim_config_parse(const weft_cfg *section, weft_optim_config *out);

/* Whether the tensor named `name` with `ndim` dimensions gets weight
 * decay under the rule above (1 or 0). */
int weft_optim_decays(const weft_optim_config *oc, const char *name, int ndim);

/* Sets segs[i].decay for every segment from its name and ndim. */
void weft_optim_set_decay(const weft_optim_config *oc, weft_optim_segment *segs, size_t n);

#endif /* WEFT_TRAIN_OPTIM_CONFIG_H */
