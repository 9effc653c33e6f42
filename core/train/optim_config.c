/* The optimizer section keys the host owns, and the weight-decay rule. */
#include <fnmatch.h>
#include <math.h>
#include "train/optim_config.h"

weft_status weft_optim_config_parse(const weft_cfg *section, weft_optim_config *out)
{
	weft_optim_config oc = { .section = section };
	const weft_cfg *node;
	weft_status st;

	if (!section)
		return weft_error_set(WEFT_ERR_CONFIG,
				      "the config has no optimizer section; add one like "
				      "optimizer: {name: adamw, lr: 3.0e-4}");
	if (weft_cfg_kind_of(section) != WEFT_CFG_MAP)
		return weft_cfg_error(section,
				      "must be a mapping naming the optimizer, like "
				      "optimizer: {name: adamw, lr: 3.0e-4}");
	node = weft_cfg_get(section, "name");
	if (!node || weft_cfg_kind_of(node) == WEFT_CFG_NULL)
		return weft_cfg_error(section,
				      "needs a name: the optimizer plugin to use (built in: sgd, "
				      "adam, adamw, lion)");
	st = weft_cfg_as_str(node, &oc.name);
	if (st != WEFT_OK)
		return st;

	st = weft_cfg_float(section, "lr", 1e-3, &oc.lr);
	if (st != WEFT_OK)
		return st;
	if (!isfinite(oc.lr) || oc.lr < 0)
		return weft_cfg_error(weft_cfg_get(section, "lr"),
				      "must be a finite number >= 0, got %g; the learning rate is "
				      "the step size (typical 1e-4 to 1e-2 for adamw, 0.01 to 0.1 "
				      "for sgd)",
				      oc.lr);

	node = weft_cfg_get(section, "no_decay");
	if (node && weft_cfg_kind_of(node) != WEFT_CFG_NULL) {
		if (weft_cfg_kind_of(node) != WEFT_CFG_SEQ)
			return weft_cfg_error(node,
					      "must be a list of name globs, like no_decay: "
					      "['*.bias', '*ln_*']");
		for (size_t i = 0; i < weft_cfg_size(node); i++) {
			const weft_cfg *item = weft_cfg_at(node, i);
			const char *glob;

			st = weft_cfg_as_str(item, &glob);
			if (st != WEFT_OK)
				return st;
			if (!glob[0])
				return weft_cfg_error(item,
						      "is an empty pattern; give a glob matched "
						      "against dotted parameter names, like '*.bias'");
		}
		oc.no_decay = node;
	}
	*out = oc;
	return WEFT_OK;
}

int weft_optim_decays(const weft_optim_config *oc, const char *name, int ndim)
{
	if (!oc->no_decay)
		return ndim >= 2;
	for (size_t i = 0; i < weft_cfg_size(oc->no_decay); i++) {
		const char *glob = weft_cfg_scalar(weft_cfg_at(oc->no_decay, i));

		if (glob && name && fnmatch(glob, name, 0) == 0)
			return 0;
	}
	return 1;
}

void weft_optim_set_decay(const weft_optim_config *oc, weft_optim_segment *segs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		segs[i].decay = weft_optim_decays(oc, segs[i].name, segs[i].ndim);
}
