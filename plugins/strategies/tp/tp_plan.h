/* strategy tp's memory plan (tp_plan.c) and what it reads of the strategy. */
#ifndef WEFT_STRATEGY_TP_PLAN_H
#define WEFT_STRATEGY_TP_PLAN_H

#include "weft/strategy.h"

/* weft/strategy.h, memory_plan, for the mesh create read (tp.c passes it):
 * tp size, dp replicas, dp_strategy zero_1. */
weft_status tp_plan_compute(int32_t size, int32_t dp, int zero, const weft_plan_query *q,
			    weft_plan_result *out);

#endif
