/* The f64 sums over the groups a pipeline rank belongs to: the in-place
 * sum itself (pp_f64_sum), over its pipeline (pp_sum) and, on a hybrid
 * mesh with tp > 1, over its stage replica's tp shards (pp_tp_sum). Below
 * the step (pp.c), the stage state (pp_stage.c) and the dp replicas
 * (pp_dp.c, whose sum counts its bytes apart), which all sum over them. */
#include "pp.h"

weft_status pp_f64_sum(pp_strategy *s, weft_comm *comm, double *v, int n)
{
	weft_comm_buf b = { .data = v, .count = n, .dtype = WEFT_COMM_F64,
			    .device = WEFT_COMM_DEVICE_CPU };

	return s->g.ops->all_reduce(comm, &b, &b, WEFT_COMM_SUM, NULL);
}

weft_status pp_sum(pp_strategy *s, double *v, int n)
{
	weft_status st;

	if (s->g.size == 1)
		return WEFT_OK;
	st = pp_f64_sum(s, s->g.comm, v, n);
	s->msgs.calls++;
	return st ? g_host->error_wrap(st, "strategy 'pp': all-reduce over the pipeline") : WEFT_OK;
}

weft_status pp_tp_sum(pp_strategy *s, double *v, int n)
{
	weft_status st;

	if (!s->tp_comm)
		return WEFT_OK;
	st = pp_f64_sum(s, s->tp_comm, v, n);
	s->msgs.calls++;
	return st ? g_host->error_wrap(st, "strategy hybrid: all-reduce over the tp group") :
		    WEFT_OK;
}
