/* core/config: typed reads, defaults, choices and reader-made errors. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cfg_test_util.h"

static const char *doc = "trainer:\n"
			 "  devices: two\n"
			 "  steps: 1_000\n"
			 "  mask: 0xFF\n"
			 "  neg: -42\n"
			 "  big: 9223372036854775807\n"
			 "  small: -9223372036854775808\n"
			 "  over: 9223372036854775808\n"
			 "  under: -9223372036854775809\n"
			 "  sci: 1e5\n"
			 "  half: 2.5\n"
			 "  none:\n"
			 "  list: [1]\n"
			 "optim:\n"
			 "  lr: 1e-3\n"
			 "  eps: .5\n"
			 "  inf: -.inf\n"
			 "  nan: .NaN\n"
			 "  huge: 1e999\n"
			 "  word: fast\n"
			 "  on: on\n"
			 "  no: No\n"
			 "  t: TRUE\n"
			 "  maybe: perhaps\n"
			 "strategy: zero2\n"
			 "other: zzz\n";

static void test_ints(const weft_config *cfg)
{
	const weft_cfg *t = weft_cfg_get(weft_config_root(cfg), "trainer");
	int64_t v = 0;

	WT_OK(weft_cfg_int(t, "steps", 0, &v));
	WT_CHECK(v == 1000);
	WT_OK(weft_cfg_int(t, "mask", 0, &v));
	WT_CHECK(v == 255);
	WT_OK(weft_cfg_int(t, "neg", 0, &v));
	WT_CHECK(v == -42);
	WT_OK(weft_cfg_int(t, "big", 0, &v));
	WT_CHECK(v == INT64_MAX);
	WT_OK(weft_cfg_int(t, "small", 0, &v));
	WT_CHECK(v == INT64_MIN);
	WT_OK(weft_cfg_int(t, "sci", 0, &v));
	WT_CHECK(v == 100000);
	/* absent and null keys take the default */
	WT_OK(weft_cfg_int(t, "absent", 7, &v));
	WT_CHECK(v == 7);
	WT_OK(weft_cfg_int(t, "none", 8, &v));
	WT_CHECK(v == 8);
	WT_OK(weft_cfg_int(NULL, "x", 9, &v));
	WT_CHECK(v == 9);

	WT_FAILS(weft_cfg_int(t, "devices", 1, &v), WEFT_ERR_CONFIG,
		 "cfg.yaml:2:12: 'trainer.devices' must be an integer, got 'two'");
	WT_FAILS(weft_cfg_int(t, "over", 1, &v), WEFT_ERR_CONFIG,
		 "cfg.yaml:8:9: 'trainer.over' must be an integer from", "out of range");
	WT_FAILS(weft_cfg_int(t, "under", 1, &v), WEFT_ERR_CONFIG, "'trainer.under'",
		 "out of range");
	WT_FAILS(weft_cfg_int(t, "half", 1, &v), WEFT_ERR_CONFIG,
		 "'trainer.half' must be an integer, got '2.5'");
	WT_FAILS(weft_cfg_int(t, "list", 1, &v), WEFT_ERR_CONFIG,
		 "cfg.yaml:13:9: 'trainer.list' must be an integer, got a sequence");
	WT_FAILS(weft_cfg_as_int(weft_cfg_get(t, "none"), &v), WEFT_ERR_CONFIG,
		 "'trainer.none' must be an integer, got null");
	WT_FAILS(weft_cfg_as_int(NULL, &v), WEFT_ERR_INVALID_ARG, "absent");
	/* a section that is not a mapping is an error, not a silent default */
	WT_FAILS(weft_cfg_int(weft_cfg_get(t, "neg"), "x", 1, &v), WEFT_ERR_CONFIG,
		 "cfg.yaml:5:8: 'trainer.neg' must be a mapping (it should hold 'x'), got '-42'");
}

static void test_floats_bools_strings(const weft_config *cfg)
{
	const weft_cfg *o = weft_cfg_get(weft_config_root(cfg), "optim");
	double d = 0;
	int b = -1;
	const char *s = NULL;

	WT_OK(weft_cfg_float(o, "lr", 0, &d));
	WT_CHECK(d == 1e-3);
	WT_OK(weft_cfg_float(o, "eps", 0, &d));
	WT_CHECK(d == 0.5);
	WT_OK(weft_cfg_float(o, "inf", 0, &d));
	WT_CHECK(isinf(d) && d < 0);
	WT_OK(weft_cfg_float(o, "nan", 0, &d));
	WT_CHECK(isnan(d));
	WT_OK(weft_cfg_float(o, "absent", 0.25, &d));
	WT_CHECK(d == 0.25);
	WT_OK(weft_cfg_float(weft_cfg_get(weft_config_root(cfg), "trainer"), "mask", 0, &d));
	WT_CHECK(d == 255.0);
	WT_FAILS(weft_cfg_float(o, "huge", 0, &d), WEFT_ERR_CONFIG,
		 "cfg.yaml:19:9: 'optim.huge' must be a number, got '1e999'", "out of the range");
	WT_FAILS(weft_cfg_float(o, "word", 0, &d), WEFT_ERR_CONFIG,
		 "cfg.yaml:20:9: 'optim.word' must be a number, got 'fast'");

	WT_OK(weft_cfg_bool(o, "on", 0, &b));
	WT_CHECK(b == 1);
	WT_OK(weft_cfg_bool(o, "no", 1, &b));
	WT_CHECK(b == 0);
	WT_OK(weft_cfg_bool(o, "t", 0, &b));
	WT_CHECK(b == 1);
	WT_OK(weft_cfg_bool(o, "absent", 1, &b));
	WT_CHECK(b == 1);
	WT_FAILS(weft_cfg_bool(o, "maybe", 0, &b), WEFT_ERR_CONFIG,
		 "cfg.yaml:24:10: 'optim.maybe' must be true or false, got 'perhaps'");

	WT_OK(weft_cfg_str(o, "word", NULL, &s));
	WT_CHECK(s && strcmp(s, "fast") == 0);
	WT_OK(weft_cfg_str(o, "absent", "dflt", &s));
	WT_CHECK(strcmp(s, "dflt") == 0);
	WT_OK(weft_cfg_str(o, "absent", NULL, &s));
	WT_CHECK(s == NULL);
	WT_FAILS(weft_cfg_as_str(weft_config_root(cfg), &s), WEFT_ERR_CONFIG,
		 "the top level must be a string, got a mapping");
}

static void test_choice(const weft_config *cfg)
{
	static const char *const strategies[] = { "ddp", "zero_1", "zero2x", "tp", NULL };
	static const char *const names[] = { "alpha", "beta", NULL };
	const weft_cfg *root = weft_config_root(cfg);
	int idx = -1;

	WT_FAILS(weft_cfg_choice(root, "strategy", strategies, "ddp", &idx), WEFT_ERR_CONFIG,
		 "cfg.yaml:25:11: 'strategy' must be one of: ddp, zero_1, zero2x, tp, got 'zero2'",
		 "(did you mean 'zero2x'?)");
	WT_FAILS(weft_cfg_choice(root, "other", names, "beta", &idx), WEFT_ERR_CONFIG,
		 "'other' must be one of: alpha, beta, got 'zzz'");
	WT_CHECK(strstr(weft_error_last(), "did you mean") == NULL);
	WT_OK(weft_cfg_choice(root, "absent", strategies, "tp", &idx));
	WT_CHECK(idx == 3);
	WT_FAILS(weft_cfg_choice(root, "absent", strategies, NULL, &idx), WEFT_ERR_CONFIG,
		 "the top level needs 'absent', one of: ddp, zero_1, zero2x, tp");
	WT_FAILS(weft_cfg_choice(root, "absent", strategies, "nope", &idx), WEFT_ERR_INVALID_ARG,
		 "default 'nope'");
	WT_FAILS(weft_cfg_choice(root, "trainer", strategies, "ddp", &idx), WEFT_ERR_CONFIG,
		 "'trainer' must be one of", "got a mapping");
}

static void test_cfg_error(const weft_config *cfg)
{
	const weft_cfg *lr = weft_cfg_get(weft_cfg_get(weft_config_root(cfg), "optim"), "lr");

	WT_FAILS(weft_cfg_error(lr, "must be >= 0, got %g", -1.0), WEFT_ERR_CONFIG,
		 "cfg.yaml:15:7: 'optim.lr' must be >= 0, got -1");
}

int main(void)
{
	weft_config *cfg = load(doc);

	test_ints(cfg);
	test_floats_bools_strings(cfg);
	test_choice(cfg);
	test_cfg_error(cfg);
	weft_config_free(cfg);
	return wt_done("test_config_types");
}
