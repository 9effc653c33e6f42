/* strategy "hybrid": the pipeline of strategy pp (pp.c) on a dp x pp
 * mesh, optionally x tp (Megatron's order: tp fastest, then dp, then pp).
 * The dp replicas keep in step through pp_dp.c; tp > 1 shards every stage
 * (pp_tp.c). It shares pp's runtime: only its name, its create and its
 * plan (the model the trainer builds for this rank) are its own. */
#include "pp.h"

static weft_status hybrid_create(const weft_cfg *section, const weft_strategy_env *env,
				 void **out)
{
	return pp_create_as("hybrid", section, env, out);
}

/* Under tp > 1 the trainer builds this rank's tp shard of the model (its
 * tp coordinate, no sequence or vocabulary split): the stages are built
 * from it with the same shards. */
static weft_status hybrid_plan(const weft_cfg *section, int32_t rank, int32_t world,
			       weft_model_options *mo, int32_t *data_rank, int32_t *data_world)
{
	weft_strategy_env env = { .struct_size = sizeof(env), .rank = rank, .world_size = world };
	pp_options o;
	weft_status st;

	st = pp_plan_as("hybrid", section, rank, world, data_rank, data_world);
	if (!st)
		st = pp_options_parse(section, &env, "hybrid", &o);
	if (st)
		return st;
	mo->no_grads = 1; /* the stages hold the gradients */
	if (o.tp > 1) {
		mo->tp_size = o.tp;
		mo->tp_rank = rank % o.tp;
		mo->tp_flags = 0;
		mo->tp_plan = NULL;
	}
	return WEFT_OK;
}

const weft_strategy_ops weft_strategy_hybrid = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "hybrid"),
	.create = hybrid_create,
	.setup = pp_setup,
	.train_step = pp_train_step,
	.eval_step = pp_eval_step,
	.state = pp_state,
	.destroy = pp_destroy,
	.gather_params = pp_gather_params,
	.plan = hybrid_plan,
	.memory_plan = pp_memory_plan,
};
