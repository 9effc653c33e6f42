/* The memory plans of the replicated strategies (replicated_plan.c). */
#ifndef WEFT_STRATEGY_REPLICATED_PLAN_H
#define WEFT_STRATEGY_REPLICATED_PLAN_H

#include "weft/strategy.h"

weft_status single_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out);
weft_status ddp_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out);
weft_status dp_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out);

#endif
