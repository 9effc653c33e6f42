/* The plan beside the measured peaks in summary.json (trainer_impl.h,
 * weft_trainer_planned_bytes): `weft plan`'s numbers for this run. */
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan.h"
#include "plan/plan_act.h"
#include "train/trainer_common.h"
#include "train/trainer_impl.h"
#include "weft/module.h"
#include "weft/log.h"
#include "weft/status.h"

void weft_trainer_planned_bytes(weft_trainer *t, int64_t planned[WEFT_MEM_NUM_CATEGORIES])
{
	weft_plan_opts o;
	weft_plan p;
	weft_plan_act act;
	weft_model_options mo = { .device = WEFT_CPU };
	char why[512];

	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++)
		planned[c] = -1;
	/* the world as weft plan sees it: the devices a one-process strategy drives */
	if (weft_plan_opts_from_config(t->root, weft_trainer_one_process_strategy(t) ?
					t->tc.devices * t->tc.num_nodes : t->world, &o))
		goto no_plan;
	o.n_slots = t->optim_ops->state_slots(t->optim);
	if (weft_plan_compute(weft_model_params(t->model), &o, &p))
		goto no_plan;
	planned[WEFT_MEM_PARAMS] = p.bytes[WEFT_MEM_PARAMS] + p.working_params;
	planned[WEFT_MEM_GRADS] = p.bytes[WEFT_MEM_GRADS] + p.working_grads;
	planned[WEFT_MEM_OPTIM] = p.bytes[WEFT_MEM_OPTIM];
	/* the backend's buffers only where the plan knows them */
	if (t->world <= 1 || p.comm_backend_bytes > 0)
		planned[WEFT_MEM_COMM] = p.bytes[WEFT_MEM_COMM] + p.comm_backend_bytes;
	/* the activation term where the plan predicts it (its trial steps run
	 * now, after the peaks were read) */
	if (weft_plan_model_options(&o, &mo) || weft_plan_activations(t->root, &o, &mo, &act)) {
		snprintf(why, sizeof(why), "%s", weft_error_last());
		weft_log(WEFT_LOG_DEBUG, "summary.json: no activation plan: %s", why);
		return;
	}
	if (act.predicted)
		planned[WEFT_MEM_ACTIVATIONS] = act.bytes;
	return;
no_plan:
	snprintf(why, sizeof(why), "%s", weft_error_last());
	weft_log(WEFT_LOG_DEBUG, "summary.json: no plan to write beside the peaks: %s", why);
}

void weft_trainer_plan_check(const int64_t planned[WEFT_MEM_NUM_CATEGORIES],
			     const weft_mem_stats *measured, const int64_t *rank)
{
	for (int c = 0; c < WEFT_MEM_NUM_CATEGORIES; c++) {
		double want = (double)planned[c], got = (double)measured->peak[c];

		if (planned[c] < 0 || (want == 0 && got == 0))
			continue;
		if (got > 0 && want / got <= 1.1 && want / got >= 1.0 / 1.1)
			continue;
		weft_log(WEFT_LOG_WARN, "memory: the %s peak was %.3f MiB (rank %lld) where weft "
			 "plan predicts %.3f MiB (%+.0f%%); summary.json has both (plan_bytes, "
			 "peak_bytes)", weft_mem_category_name((weft_mem_category)c),
			 got / 1048576.0, (long long)rank[c], want / 1048576.0,
			 got > 0 ? 100.0 * (want - got) / got : 100.0);
	}
}
