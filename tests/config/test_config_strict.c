/* core/config: after setup, every key nobody read is reported at its place
 * with a "did you mean" drawn from the keys code asked for. */
#include <string.h>

#include "cfg_test_util.h"

/* The reads a trainer would make of its section. */
static void read_trainer(const weft_config *cfg)
{
	const weft_cfg *t = weft_cfg_get(weft_config_root(cfg), "trainer");
	int64_t v;
	const char *s;

	WT_OK(weft_cfg_int(t, "devices", 1, &v));
	WT_OK(weft_cfg_str(t, "strategy", "ddp", &s));
	WT_OK(weft_cfg_int(t, "max_steps", 100, &v));
}

static void test_typo_in_section(void)
{
	weft_config *cfg = load("trainer:\n"
				"  devices: 2\n"
				"  stratgy: zero\n");

	read_trainer(cfg);
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:3: unknown key 'stratgy' in 'trainer' (did you mean 'strategy'?)");
	weft_config_free(cfg);
}

static void test_top_level(void)
{
	weft_config *cfg = load("trainer:\n  devices: 2\ntrainr:\n  devices: 4\n");

	read_trainer(cfg);
	/* a whole section nobody looked into is reported at its key */
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:1: unknown key 'trainr' in the top level (did you mean 'trainer'?)");
	weft_config_free(cfg);
}

static void test_no_close_candidate(void)
{
	weft_config *cfg = load("trainer:\n  devices: 2\n  colour: blue\n");

	read_trainer(cfg);
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:3: unknown key 'colour' in 'trainer' "
		 "(known keys: devices, strategy, max_steps)");
	weft_config_free(cfg);

	/* nothing reads the top level at all */
	cfg = load("foo: 1\n");
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "cfg.yaml:1:1: unknown key 'foo' in the top level", "remove it");
	weft_config_free(cfg);
}

/* Two levels down: the strategy reads its own mapping; 'stag' was meant
 * to be 'stage'. */
static void test_nested_strategy(void)
{
	weft_config *cfg = load("trainer: {strategy: {name: zero, stag: 2}}\n");
	const weft_cfg *st = at_path(cfg, "trainer.strategy");
	const char *name;
	int64_t stage;

	WT_OK(weft_cfg_str(st, "name", NULL, &name));
	WT_OK(weft_cfg_int(st, "stage", 1, &stage));
	WT_CHECK(strcmp(name, "zero") == 0);
	WT_CHECK(stage == 1);
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "cfg.yaml:1:34: unknown key 'stag' in 'trainer.strategy' (did you mean 'stage'?)");
	weft_config_free(cfg);
}

/* A mapping code reached but never looked into: its first key is reported. */
static void test_mapping_never_read(void)
{
	weft_config *cfg = load("trainer:\n  devices: 1\n  callbacks:\n    csv: true\n");

	read_trainer(cfg);
	weft_cfg_get(at_path(cfg, "trainer"), "callbacks");
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "cfg.yaml:4:5: unknown key 'csv' in 'trainer.callbacks'");
	weft_config_free(cfg);
}

static void test_first_in_document_order(void)
{
	weft_config *cfg = load("zeta: 1\ntrainer:\n  devics: 1\nalpha: 2\n");

	read_trainer(cfg);
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "cfg.yaml:1:1:", "'zeta'");
	weft_cfg_get(weft_config_root(cfg), "zeta");
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "cfg.yaml:3:3:",
		 "'devics' in 'trainer' (did you mean 'devices'?)");
	weft_config_free(cfg);
}

static void test_all_read(void)
{
	weft_config *cfg = load("trainer:\n  devices: 2\n  strategy: ddp\n"
				"data:\n  files: [{path: a, weight: 1}, {path: b}]\n"
				"extra: {x: 1, y: [1, 2]}\n");
	const weft_cfg *files;

	read_trainer(cfg);
	files = at_path(cfg, "data.files");
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "'path' in 'data.files.0'");
	for (size_t i = 0; i < weft_cfg_size(files); i++) {
		const weft_cfg *f = weft_cfg_at(files, i);
		const char *p;
		int64_t w;

		WT_OK(weft_cfg_str(f, "path", NULL, &p));
		WT_OK(weft_cfg_int(f, "weight", 1, &w));
	}
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "cfg.yaml:6:1:", "'extra'");
	/* iterating a mapping by index reads its keys */
	{
		const weft_cfg *extra = weft_cfg_get(weft_config_root(cfg), "extra");

		WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "'x' in 'extra'");
		for (size_t i = 0; i < weft_cfg_size(extra); i++)
			WT_CHECK(weft_cfg_at(extra, i) != NULL);
	}
	WT_OK(weft_config_check_unused(cfg));
	weft_config_free(cfg);

	cfg = load("a: {b: {c: 1}}\nd: [1, {e: 2}]\n");
	weft_cfg_mark_used(weft_config_root(cfg));
	WT_OK(weft_config_check_unused(cfg));
	weft_config_free(cfg);
}

static void test_case_and_transposition(void)
{
	weft_config *cfg = load("optim:\n  LR: 0.1\n  wieght_decay: 0.0\n");
	const weft_cfg *o = at_path(cfg, "optim");
	double v;

	WT_OK(weft_cfg_float(o, "lr", 0.01, &v));
	WT_OK(weft_cfg_float(o, "weight_decay", 0.0, &v));
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "'LR' in 'optim'",
		 "(did you mean 'lr'?)");
	weft_cfg_get(o, "LR");
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG,
		 "'wieght_decay' in 'optim' (did you mean 'weight_decay'?)");
	weft_config_free(cfg);
}

int main(void)
{
	test_typo_in_section();
	test_top_level();
	test_no_close_candidate();
	test_nested_strategy();
	test_mapping_never_read();
	test_first_in_document_order();
	test_all_read();
	test_case_and_transposition();
	return wt_done("test_config_strict");
}
