/* plan/plan_budget.h - the plan against a memory budget: `weft plan
 * --memory 80GB` and weft fit's check before launch.
 *
 * A rank's total is what the plan predicts it holds at its peak: params,
 * grads, optim, the strategy's and the backend's comm buffers, the working
 * sets and, where predicted, the activations. Against a budget the
 * verdict is one line: it fits (with the headroom), or it does not and
 * what to change: the ZeRO stage (the paper's formulas for the same
 * model, ranks and optimizer), activation checkpointing (the plan's own
 * prediction with trainer.activation_checkpointing: full), and the
 * micro-batch (the largest data.batch_size that fits); the first of those
 * that fits alone, else the three together, else that the model needs
 * more ranks. */
#ifndef WEFT_PLAN_PLAN_BUDGET_H
#define WEFT_PLAN_PLAN_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"
#include "plan/plan_act.h"
#include "weft/status.h"

/* Parses a byte count: a number (decimals allowed) and an optional unit,
 * B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of
 * 1024), case-insensitive, a space allowed before it: "80GB", "24 GiB",
 * "1500000000". `what` names the source for the error ("--memory").
 * Errors: WEFT_ERR_INVALID_ARG naming `what`, the text and the units. */
weft_status weft_plan_parse_bytes(const char *what, const char *text, int64_t *out);

/* The bytes rank p->rank (the largest) holds at its peak: the plan's
 * categories, working sets and backend buffers, plus act->bytes where act
 * is non-NULL and predicted; or the strategy's setup peak plus the backend
 * buffers when that is larger. */
int64_t weft_plan_rank_total(const weft_plan *p, const weft_plan_act *act);

/* The what-to-change inputs beside the plan: the activations with full
 * checkpointing (NULL, or not predicted, where unknown or already on). */
typedef struct weft_plan_alt {
	const weft_plan_act *act_full;
} weft_plan_alt;

/* Writes the one-line verdict of plan p (with act, may be NULL) for opts
 * o against `budget` bytes into buf (no newline). Returns 1 when it fits,
 * 0 when it does not. */
int weft_plan_verdict(const weft_plan_opts *o, const weft_plan *p, const weft_plan_act *act,
		      const weft_plan_alt *alt, int64_t budget, char *buf, size_t n);

#endif /* WEFT_PLAN_PLAN_BUDGET_H */
