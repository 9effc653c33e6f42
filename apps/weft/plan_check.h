/* plan_check.h - the plan of a resolved config (core/plan) for `weft plan`
 * and for weft fit's memory check before it starts the ranks. */
#ifndef WEFT_APPS_PLAN_CHECK_H
#define WEFT_APPS_PLAN_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"
#include "plan/plan_act.h"
#include "plan/plan_budget.h"
#include "weft/config.h"

typedef struct weft_cli_plan {
	weft_plan_opts o;       /* borrowed from the config */
	weft_plan p;
	weft_plan_act act;
	weft_model_options mo;  /* as the trainer builds rank 0's model */
	const char *optim;      /* the optimizer's name */
} weft_cli_plan;

/* The plan of config `cfg` (after weft_config_compat) for `world` ranks (0:
 * the config's): the strategy's bytes and the activation term. Blocks on
 * loading plugins and the activation trial steps. Errors: those of
 * weft_plan_opts_from_config, weft_plan_compute, weft_plan_activations and
 * the optimizer's and model's configs. */
weft_status weft_cli_plan_compute(weft_config *cfg, int32_t world, weft_cli_plan *out);

/* The verdict line of cp against `budget` bytes per rank (plan_budget.h),
 * asking the plan for full checkpointing's activations when that could
 * help (it overrides trainer.activation_checkpointing in cfg). Returns 1
 * fits, 0 does not, -1 on an error (in the last error). */
int weft_cli_plan_verdict(weft_config *cfg, const weft_cli_plan *cp, int64_t budget, char *line,
			  size_t n);

/* weft fit's check before it starts, in the process that starts the ranks
 * (not in a rank: WEFT_RANK / RANK set): the plan of cfg against `memory`
 * (weft fit --memory SIZE, per rank; "off" skips), else, on the CPU, the
 * memory the machine has available now (MemAvailable; its physical memory
 * when that is unknown) over the ranks on it. A config the plan cannot read is left to the
 * trainer to report. Returns 0 to go on; 1 (after printing why and what
 * to change) when it does not fit; 2 for a bad SIZE. */
int weft_cli_fit_memory_check(const weft_config *cfg, const char *memory);

#endif /* WEFT_APPS_PLAN_CHECK_H */
