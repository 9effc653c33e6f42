/* Every error a user can hit in the example plugins, and host->find_plugin
 * (ABI 1.1): the examples are loaded through a registry from their in-tree
 * build (fixtures/current), as weft fit loads them. */
#include <string.h>

#include "plugin/registry.h"
#include "weft/comm.h"
#include "weft/config.h"
#include "weft/strategy.h"
#include "weft_test.h"

static weft_config *cfg;

/* The node at `key` of a config made from `yaml`. */
static const weft_cfg *node(const char *yaml, const char *key)
{
	weft_config_free(cfg);
	cfg = NULL;
	WT_OK(weft_config_load_string("ex.yaml", yaml, strlen(yaml), &cfg));
	return weft_cfg_get(weft_config_root(cfg), key);
}

static void test_counting(const weft_comm_ops *ops)
{
	weft_comm_init_args args = { .struct_size = sizeof(args), .rank = 0, .size = 2,
				     .name = "world", .timeout_ms = 1000 };
	weft_comm *c = NULL;

	args.options = node("comm: {name: counting, inner: counting}", "comm");
	WT_FAILS(ops->init(&args, &c), WEFT_ERR_CONFIG,
		 "comm 'counting': inner: counting would wrap itself", "inner: gloo");
	args.options = node("comm: {name: counting, inner: glo}", "comm");
	WT_FAILS(ops->init(&args, &c), WEFT_ERR_NOT_FOUND, "comm 'counting': inner backend",
		 "no comm plugin named 'glo' (did you mean 'gloo'?)");
	args.options = node("comm:\n  name: counting\n  log_each: maybe\n", "comm");
	WT_FAILS(ops->init(&args, &c), WEFT_ERR_CONFIG, "ex.yaml:3:13", "'comm.log_each'");
	WT_CHECK(c == NULL);
}

static void test_local_sgd(const weft_strategy_ops *ops)
{
	weft_strategy_env env = { .struct_size = sizeof(env), .rank = 0, .world_size = 1 };
	void *s = NULL;

	WT_FAILS(ops->create(node("strategy:\n  name: local_sgd\n  k: 0\n", "strategy"), &env, &s),
		 WEFT_ERR_CONFIG, "ex.yaml:3:6", "'strategy.k' must be a number of optimizer steps",
		 "got 0", "k: 1 averages after every step");
	env.world_size = 2;
	WT_FAILS(ops->create(NULL, &env, &s), WEFT_ERR_UNSUPPORTED,
		 "strategy 'local_sgd': world size is 2 but the trainer gave no communicator",
		 "set trainer.comm");
	env.world_size = 1;
	WT_OK(ops->create(node("strategy: {name: local_sgd, k: 3}", "strategy"), &env, &s));
	ops->destroy(s);
}

/* find_plugin answers from the active registry, and says so when none is. */
static void test_find_plugin(weft_registry *reg)
{
	const weft_host *host = weft_host_services();
	const void *vt = NULL, *direct = NULL;

	WT_REQUIRE(WEFT_HAS_MEMBER(host, weft_host, find_plugin));
	WT_CHECK(weft_registry_active() == reg);
	WT_OK(host->find_plugin(WEFT_PLUGIN_STRATEGY, "local_sgd", &vt));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "local_sgd", &direct, NULL));
	WT_CHECK(vt == direct);
	WT_FAILS(host->find_plugin(WEFT_PLUGIN_OPTIM, "local_sgd", &vt), WEFT_ERR_NOT_FOUND,
		 "no optim plugin named 'local_sgd' (there is a strategy plugin of that name)");
	WT_FAILS(host->find_plugin(WEFT_PLUGIN_COMM, NULL, &vt), WEFT_ERR_INVALID_ARG,
		 "name and vtable must not be NULL");
}

int main(void)
{
	const weft_comm_ops *counting = NULL;
	const weft_strategy_ops *local_sgd = NULL;
	weft_registry *reg = NULL;
	const void *vt = NULL;

	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_dir(reg, SDK_FX "/current"));
	WT_OK(weft_registry_add_default_paths(reg));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_COMM, "counting", (const void **)&counting,
				 NULL));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_STRATEGY, "local_sgd",
				 (const void **)&local_sgd, NULL));
	test_counting(counting);
	test_local_sgd(local_sgd);
	test_find_plugin(reg);
	weft_registry_free(reg);
	WT_CHECK(weft_registry_active() == NULL);
	WT_FAILS(weft_host_services()->find_plugin(WEFT_PLUGIN_COMM, "gloo", &vt),
		 WEFT_ERR_UNSUPPORTED, "find_plugin('gloo'): no plugin registry is active");
	weft_config_free(cfg);
	return wt_done("sdk_example_errors");
}
