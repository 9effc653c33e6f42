/* Optimizer configuration: the host's keys (name, lr, no_decay), the
 * weight-decay rule, and every config error a user can make in the
 * optimizer section, each reported at file:line:col with advice. */
#include "train/optim_config.h"
#include "optim_test.h"

/* Parses the host keys and creates the plugin, then runs the strictness
 * check: the status of the first step that fails. */
static weft_status setup(const char *yaml)
{
	weft_config *cfg = ot_config(yaml);
	weft_optim_config oc;
	void *opt = NULL;
	weft_status st;

	st = weft_optim_config_parse(weft_cfg_get(weft_config_root(cfg), "optimizer"), &oc);
	if (st == WEFT_OK) {
		const weft_optim_ops *ops = ot_find(oc.name);

		st = ops->create(oc.section, &opt);
		if (st == WEFT_OK) {
			ops->destroy(opt);
			st = weft_config_check_unused(cfg);
		}
	}
	weft_config_free(cfg);
	return st;
}

static void errors(void)
{
	WT_OK(setup("optimizer:\n  name: adamw\n  lr: 3.0e-4\n  betas: [0.9, 0.95]\n"
		    "  eps: 1.0e-8\n  weight_decay: 0.1\n  amsgrad: false\n  no_decay: ['*.bias']\n"));

	/* negative lr: the host's key */
	WT_FAILS(setup("optimizer:\n  name: adamw\n  lr: -0.1\n"), WEFT_ERR_CONFIG, "cfg.yaml:3:7",
		 "optimizer.lr", "must be a finite number >= 0, got -0.1", "typical");
	WT_FAILS(setup("optimizer:\n  name: sgd\n  lr: .nan\n"), WEFT_ERR_CONFIG, "cfg.yaml:3:",
		 "optimizer.lr");
	/* betas outside [0, 1) */
	WT_FAILS(setup("optimizer:\n  name: adam\n  betas: [1.0, 0.999]\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:11", "optimizer.betas.0", "must be in [0, 1), got 1", "beta1");
	WT_FAILS(setup("optimizer:\n  name: lion\n  betas:\n    - 0.9\n    - -0.2\n"),
		 WEFT_ERR_CONFIG, "cfg.yaml:5:7", "optimizer.betas.1", "got -0.2", "beta2");
	WT_FAILS(setup("optimizer:\n  name: adamw\n  betas: 0.9\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "must be a list of two numbers", "[0.9, 0.999]");
	WT_FAILS(setup("optimizer:\n  name: adamw\n  betas: [0.9, 0.99, 0.999]\n"),
		 WEFT_ERR_CONFIG, "cfg.yaml:3:", "list of two numbers");
	WT_FAILS(setup("optimizer:\n  name: adamw\n  betas: [0.9, high]\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "high");
	/* other ranges */
	WT_FAILS(setup("optimizer:\n  name: adamw\n  eps: -1.0e-8\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "optimizer.eps", ">= 0, got -1e-08");
	WT_FAILS(setup("optimizer:\n  name: sgd\n  weight_decay: -0.01\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "optimizer.weight_decay", "L2 penalty");
	WT_FAILS(setup("optimizer:\n  name: sgd\n  momentum: 1.5\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "optimizer.momentum", "must be in [0, 1], got 1.5");
	WT_FAILS(setup("optimizer:\n  name: sgd\n  nesterov: true\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "optimizer.nesterov", "needs momentum > 0 and dampening 0");
	WT_FAILS(setup("optimizer:\n  name: adam\n  amsgrad: maybe\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "maybe");
	/* unknown keys, caught by the config's strictness, with did-you-mean */
	WT_FAILS(setup("optimizer:\n  name: adamw\n  weight_decai: 0.1\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:3", "weight_decai", "weight_decay");
	WT_FAILS(setup("optimizer:\n  name: sgd\n  lr: 0.1\n  betas: [0.9, 0.99]\n"),
		 WEFT_ERR_CONFIG, "cfg.yaml:4:3", "betas");
	WT_FAILS(setup("optimizer:\n  name: lion\n  amsgrad: true\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:3", "amsgrad");
	/* the host's keys */
	WT_FAILS(setup("optimizer:\n  lr: 0.1\n"), WEFT_ERR_CONFIG, "cfg.yaml:2:",
		 "needs a name", "adamw");
	WT_FAILS(setup("trainer: {}\n"), WEFT_ERR_CONFIG, "no optimizer section");
	WT_FAILS(setup("optimizer: adamw\n"), WEFT_ERR_CONFIG, "cfg.yaml:1:", "must be a mapping");
	WT_FAILS(setup("optimizer:\n  name: adamw\n  no_decay: '*.bias'\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "must be a list of name globs");
	WT_FAILS(setup("optimizer:\n  name: adamw\n  no_decay: ['*.bias', '']\n"), WEFT_ERR_CONFIG,
		 "cfg.yaml:3:", "empty pattern");
}

static void decay_rule(void)
{
	weft_config *cfg;
	weft_optim_config oc;
	weft_optim_segment segs[3] = {
		{ .name = "h.0.attn.c_attn.weight", .ndim = 2 },
		{ .name = "h.0.attn.c_attn.bias", .ndim = 1 },
		{ .name = "conv.weight", .ndim = 4 },
	};

	/* default: nanoGPT's ndim >= 2 */
	cfg = ot_config("optimizer: {name: adamw}\n");
	WT_OK(weft_optim_config_parse(weft_cfg_get(weft_config_root(cfg), "optimizer"), &oc));
	WT_CHECK(oc.lr == 1e-3 && !strcmp(oc.name, "adamw") && oc.no_decay == NULL);
	WT_CHECK(weft_optim_decays(&oc, "ln_f.weight", 1) == 0);
	WT_CHECK(weft_optim_decays(&oc, "wte.weight", 2) == 1);
	WT_CHECK(weft_optim_decays(&oc, "logit_scale", 0) == 0);
	weft_optim_set_decay(&oc, segs, 3);
	WT_CHECK(segs[0].decay == 1 && segs[1].decay == 0 && segs[2].decay == 1);
	weft_config_free(cfg);

	/* globs: matching names are exempt, everything else decays */
	cfg = ot_config("optimizer: {name: adamw, no_decay: ['*.bias', '*ln_*', wte.weight]}\n");
	WT_OK(weft_optim_config_parse(weft_cfg_get(weft_config_root(cfg), "optimizer"), &oc));
	WT_CHECK(weft_optim_decays(&oc, "h.0.attn.c_attn.bias", 1) == 0);
	WT_CHECK(weft_optim_decays(&oc, "h.11.ln_2.weight", 1) == 0);
	WT_CHECK(weft_optim_decays(&oc, "wte.weight", 2) == 0);
	WT_CHECK(weft_optim_decays(&oc, "h.0.mlp.c_fc.weight", 2) == 1);
	WT_CHECK(weft_optim_decays(&oc, "scale", 1) == 1); /* shape no longer matters */
	weft_config_free(cfg);

	/* an empty list decays everything */
	cfg = ot_config("optimizer: {name: sgd, no_decay: []}\n");
	WT_OK(weft_optim_config_parse(weft_cfg_get(weft_config_root(cfg), "optimizer"), &oc));
	weft_optim_set_decay(&oc, segs, 3);
	WT_CHECK(segs[0].decay == 1 && segs[1].decay == 1 && segs[2].decay == 1);
	weft_config_free(cfg);
}

int main(void)
{
	errors();
	decay_rule();
	ot_release();
	return wt_done("test_optim_config");
}
