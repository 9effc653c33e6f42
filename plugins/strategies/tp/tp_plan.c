/* strategy tp's memory plan (weft/strategy.h, memory_plan). The planner
 * builds the model as tp rank 0's shards (tp's build plan), so the
 * parameter list already holds what a rank keeps: column- and row-split
 * weights (and a vocabulary-parallel embedding) at 1/size, the rest whole.
 * Every tp rank holds as much as rank 0 up to rounding of uneven splits.
 * Per rank: parameters and gradients of its shard; optimizer state of its
 * shard, or of its 1/dp share of it under dp_strategy zero_1; one
 * all-reduce of its gradients over the dp replicas per step (the tp
 * collectives inside forward and backward move activations, which depend
 * on the batch and are not counted); the tp and dp communicators it
 * splits off the world (the plan adds the backend's buffers of each).
 * Activations are the plan's own term (core/plan/plan_act.c runs the
 * shards' trial steps). */
#include <stddef.h>
#include <stdio.h>

#include "tp_plan.h"

weft_status tp_plan_compute(int32_t size, int32_t dp, int zero, const weft_plan_query *q,
			    weft_plan_result *out)
{
	int64_t local = 0, whole = 0, split = 0;
	int64_t slots = (int64_t)q->n_slots;

	for (size_t i = 0; i < q->n_params; i++) {
		const weft_plan_param *p = &q->params[i];

		if (p->dtype != WEFT_F32)
			continue;
		local += p->numel;
		whole += p->full_numel;
		split += p->split != 0;
	}
	out->rank = 0;
	out->numel = whole;
	out->bytes[WEFT_MEM_PARAMS] = 4 * local;
	out->bytes[WEFT_MEM_GRADS] = 4 * local;
	out->bytes[WEFT_MEM_OPTIM] = 4 * slots * (zero && dp > 1 ? (local + dp - 1) / dp : local);
	/* the tp group and the dp group, split off the world (tp_setup.c, setup_comms) */
	if (out->struct_size >= offsetof(weft_plan_result, sub_comm_size) +
				sizeof(out->sub_comm_size)) {
		if (size > 1)
			out->sub_comm_size[out->n_sub_comms++] = size;
		if (dp > 1)
			out->sub_comm_size[out->n_sub_comms++] = dp;
	}
	if (dp > 1) {
		out->collective_elements = local;
		out->moved_elements = 2 * local * (dp - 1) / dp;
		snprintf(out->comm_formula, sizeof(out->comm_formula),
			 "ring all-reduce over dp %d: 2 shard(dp-1)/dp = %lld", (int)dp,
			 (long long)out->moved_elements);
	}
	snprintf(out->layout, sizeof(out->layout), "tp %d x dp %d, %lld of %zu parameters split, "
		 "dp_strategy %s", (int)size, (int)dp,
		 (long long)split, q->n_params, zero && dp > 1 ? "zero_1" : "ddp");
	return WEFT_OK;
}
