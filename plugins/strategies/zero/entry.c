/* The ZeRO strategies plugin: "zero" (stage from the options, default 2)
 * and "zero_1", "zero_2", "zero_3" (zero.h has the design). */
#include "zero.h"

static weft_status plan_any(const weft_cfg *section, int32_t rank, int32_t world,
			    weft_model_options *mo, int32_t *data_rank, int32_t *data_world)
{
	(void)rank, (void)world, (void)data_rank, (void)data_world;
	return zero_build_plan_stage(section, 0, mo);
}

static weft_status create_any(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	return zero_create_stage(section, env, 0, out);
}

static weft_status plan_1(const weft_cfg *section, int32_t rank, int32_t world,
			    weft_model_options *mo, int32_t *data_rank, int32_t *data_world)
{
	(void)rank, (void)world, (void)data_rank, (void)data_world;
	return zero_build_plan_stage(section, 1, mo);
}

static weft_status create_1(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	return zero_create_stage(section, env, 1, out);
}

static weft_status plan_2(const weft_cfg *section, int32_t rank, int32_t world,
			    weft_model_options *mo, int32_t *data_rank, int32_t *data_world)
{
	(void)rank, (void)world, (void)data_rank, (void)data_world;
	return zero_build_plan_stage(section, 2, mo);
}

static weft_status create_2(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	return zero_create_stage(section, env, 2, out);
}

static weft_status plan_3(const weft_cfg *section, int32_t rank, int32_t world,
			    weft_model_options *mo, int32_t *data_rank, int32_t *data_world)
{
	(void)rank, (void)world, (void)data_rank, (void)data_world;
	return zero_build_plan_stage(section, 3, mo);
}

static weft_status create_3(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	return zero_create_stage(section, env, 3, out);
}

#define ZERO_OPS(var, nm, create_fn, plan_fn)                                 \
	static const weft_strategy_ops var = {                                \
		.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, nm),              \
		.create = create_fn,                                          \
		.setup = zero_setup,                                          \
		.train_step = zero_train_step,                                \
		.eval_step = zero_eval_step,                                  \
		.state = zero_state,                                          \
		.destroy = zero_destroy,                                      \
		.gather_params = zero_gather_params,                          \
		.memory_plan = zero_memory_plan,                              \
		.params_visit = zero_params_visit,                            \
		.plan = plan_fn,                                              \
	}

ZERO_OPS(zero_any, "zero", create_any, plan_any);
ZERO_OPS(zero_1, "zero_1", create_1, plan_1);
ZERO_OPS(zero_2, "zero_2", create_2, plan_2);
ZERO_OPS(zero_3, "zero_3", create_3, plan_3);

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &zero_any },
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &zero_1 },
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &zero_2 },
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &zero_3 },
};

WEFT_PLUGIN_NAMES("strategy:zero strategy:zero_1 strategy:zero_2 strategy:zero_3");

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "zero strategies"),
	.count = sizeof(items) / sizeof(items[0]),
	.items = items,
};

WEFT_PLUGIN_ENTRY(host)
{
	g_host = host;
	return &desc;
}
