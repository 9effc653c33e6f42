/* strategy tp's memory plan (tp_plan.c) and what it reads of the strategy. */
#ifndef WEFT_STRATEGY_TP_PLAN_H
#define WEFT_STRATEGY_TP_PLAN_H

#include "weft/strategy.h"

/* The mesh create read (tp.c): tp size, dp replicas, dp_strategy zero_1. */
void tp_mesh_of(const void *s, int32_t *size, int32_t *dp, int *zero);

/* weft/strategy.h, memory_plan. */
weft_status tp_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out);

#endif
