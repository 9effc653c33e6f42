/* The memory plans of single, ddp and dp (weft/strategy.h, memory_plan):
 * every rank (dp: every device) holds the whole model, its gradients and
 * the optimizer state; ddp all-reduces the gradients once per step (ring:
 * 2 Psi (N-1)/N elements sent per rank), single and dp use no
 * communicator (dp sums its devices' gradients in host memory). */
#include <stdio.h>

#include "replicated.h"
#include "replicated_plan.h"

static void whole(const weft_plan_query *q, weft_plan_result *out)
{
	int64_t n = 0;

	for (size_t i = 0; i < q->n_params; i++)
		if (q->params[i].dtype == WEFT_F32)
			n += q->params[i].numel;
	out->rank = 0;
	out->numel = n;
	out->bytes[WEFT_MEM_PARAMS] = 4 * n;
	out->bytes[WEFT_MEM_GRADS] = 4 * n;
	out->bytes[WEFT_MEM_OPTIM] = 4 * (int64_t)q->n_slots * n;
}

weft_status single_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out)
{
	(void)s;
	whole(q, out);
	return WEFT_OK;
}

weft_status dp_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out)
{
	(void)s;
	whole(q, out);
	return WEFT_OK;
}

weft_status ddp_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out)
{
	int64_t w = q->world_size;
	double psi, nw = (double)w;

	(void)s;
	whole(q, out);
	if (w > 1) {
		psi = (double)out->numel;
		out->collective_elements = out->numel;
		out->moved_elements = 2 * out->numel * (w - 1) / w;
		snprintf(out->comm_formula, sizeof(out->comm_formula),
			 "ring all-reduce: 2Psi(N-1)/N = %.0f", 2 * psi * (nw - 1) / nw);
	}
	return WEFT_OK;
}
