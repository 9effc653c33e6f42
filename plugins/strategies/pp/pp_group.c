/* The f64 sums over the groups a pipeline rank belongs to: its pipeline
 * (pp_sum) and, on a hybrid mesh with tp > 1, its stage replica's tp
 * shards (pp_tp_sum). Below the step (pp.c) and the stage state
 * (pp_stage.c), which both sum over them; the dp group's sum, which
 * counts its bytes apart, is pp_dp.c's. */
#include "pp.h"

weft_status pp_sum(pp_strategy *s, double *v, int n)
{
	weft_comm_buf b = { .data = v, .count = n, .dtype = WEFT_COMM_F64,
			    .device = WEFT_COMM_DEVICE_CPU };
	weft_status st;

	if (s->g.size == 1)
		return WEFT_OK;
	st = s->g.ops->all_reduce(s->g.comm, &b, &b, WEFT_COMM_SUM, NULL);
	s->msgs.calls++;
	return st ? g_host->error_wrap(st, "strategy 'pp': all-reduce over the pipeline") : WEFT_OK;
}

weft_status pp_tp_sum(pp_strategy *s, double *v, int n)
{
	weft_comm_buf b = { .data = v, .count = n, .dtype = WEFT_COMM_F64,
			    .device = WEFT_COMM_DEVICE_CPU };
	weft_status st;

	if (!s->tp_comm)
		return WEFT_OK;
	st = s->g.ops->all_reduce(s->tp_comm, &b, &b, WEFT_COMM_SUM, NULL);
	s->msgs.calls++;
	return st ? g_host->error_wrap(st, "strategy hybrid: all-reduce over the tp group") :
		    WEFT_OK;
}
