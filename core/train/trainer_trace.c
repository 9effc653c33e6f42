/* The trainer's step timeline (weft fit --trace) and the pipeline bubble
 * it reports in summary.json (trainer_impl.h). */
#include <math.h>
#include <stdio.h>

#include "pipeline/timeline.h"
#include "train/trainer_impl.h"

weft_status weft_trainer_trace_start(weft_trainer *t)
{
	if (!t->opts.trace_path || t->opts.mode != WEFT_RUN_FIT)
		return WEFT_OK;
	return weft_timeline_create(t->pg ? weft_pg_ops(t->pg) : NULL,
				    t->pg ? weft_pg_comm(t->pg) : NULL, t->rank, t->world,
				    &t->timeline);
}

weft_status weft_trainer_record_step(weft_trainer *t, const weft_step_report *rep, double t0,
				     double t1)
{
	/* the step being recorded is global_step + 1 (not yet counted) */
	int64_t step = t->global_step + 1;

	if (rep->bubble_fraction > 0) {
		if (step == 1)
			t->bubble_first = rep->bubble_fraction;
		else {
			t->bubble_sum += rep->bubble_fraction;
			t->bubble_steps++;
		}
	}
	if (!t->timeline)
		return WEFT_OK;
	if (rep->events && rep->n_events)
		return weft_timeline_add(t->timeline, step, rep->events, rep->n_events);
	return weft_timeline_add(t->timeline, step, &(weft_step_event){
					 .track = WEFT_TRACK_COMPUTE, .kind = WEFT_EVENT_STEP,
					 .micro = -1, .stage = -1, .cpu_ns = -1,
					 .t0_ns = (int64_t)llround(t0 * 1e9),
					 .t1_ns = (int64_t)llround(t1 * 1e9) }, 1);
}

weft_status weft_trainer_trace_finish(weft_trainer *t)
{
	weft_status st;

	if (!t->timeline)
		return WEFT_OK;
	st = weft_timeline_write_trace(t->timeline, t->opts.trace_path);
	if (!st && t->rank == 0)
		fprintf(stderr, "trace: %s (%zu intervals on rank 0; open it in Perfetto)\n",
			t->opts.trace_path, weft_timeline_count(t->timeline));
	weft_timeline_free(t->timeline);
	t->timeline = NULL;
	return st;
}

/* The first step fills the pipeline's buffer pools: it counts only when
 * it is the only one. */
weft_status weft_trainer_pipeline_summary(weft_trainer *t, weft_metric *m, size_t *n)
{
	double v[3] = { t->bubble_steps ? t->bubble_sum / (double)t->bubble_steps : t->bubble_first,
			(double)t->bubble_steps, t->bubble_steps || t->bubble_first > 0 ? 1.0 : 0.0 };
	weft_comm_buf b = { .data = v, .count = 3, .dtype = WEFT_COMM_F64 };
	weft_status st;

	*n = 0;
	if (v[2] == 0.0)
		v[0] = 0.0;
	/* every rank takes part, measured or not: the sum of the flags says
	 * how many did */
	if (t->pg) {
		st = weft_pg_all_reduce(t->pg, &b, &b, WEFT_COMM_SUM, NULL);
		if (st)
			return weft_error_wrap(st, "summary: the pipeline bubble over the ranks");
	}
	if (v[2] == 0.0)
		return WEFT_OK;
	m[(*n)++] = (weft_metric){ "bubble_fraction", v[0] / v[2] };
	m[(*n)++] = (weft_metric){ "steps_measured", v[1] / v[2] };
	m[(*n)++] = (weft_metric){ "ranks", v[2] };
	return WEFT_OK;
}
