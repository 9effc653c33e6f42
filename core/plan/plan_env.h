/* plan/plan_env.h - the strategy env `weft plan` creates strategies with
 * (internal to core/plan). */
#ifndef WEFT_PLAN_PLAN_ENV_H
#define WEFT_PLAN_PLAN_ENV_H

#include "weft/strategy.h"

/* The stand-in world communicator: it knows its size and refuses every call. */
typedef struct plan_comm {
	int32_t size;
} plan_comm;

/* Fills *env for planning `world` ranks as rank 0 on the CPU over `ps`:
 * comm_ops and world are a communicator (*comm, which must outlive env)
 * whose every call fails with WEFT_ERR_UNSUPPORTED, and so do the
 * trainer callbacks (forward_backward, replicas, stages, grads_check);
 * ctx and the optimizer are NULL (weft/strategy.h, memory_plan). */
void plan_env_init(weft_strategy_env *env, plan_comm *comm, int32_t world, weft_params *ps);

#endif
