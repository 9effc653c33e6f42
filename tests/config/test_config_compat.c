/* Lightning's and DeepSpeed's spellings (core/train/compat.c): each family
 * resolves to weft's own value, as weft fit, weft plan and --print-config
 * see it; a DeepSpeed JSON translates key by key, its batch triple is
 * solved and checked against the world as DeepSpeed does, and a value it
 * gives that the YAML contradicts is an error naming both places. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cfg_test_util.h"
#include "train/compat.h"
#include "train/trainer_config.h"

static char tmp[64];

/* Applies the compat pass to `yaml` (with the DeepSpeed text `ds`, or
 * NULL); returns the config, or NULL with the status in *st. */
static weft_config *compat(const char *yaml, const char *ds, weft_status *st)
{
	weft_config *cfg = load(yaml);
	char path[128];

	if (ds) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/ds_config.json", tmp);
		f = fopen(path, "w");
		WT_REQUIRE(f != NULL);
		fputs(ds, f);
		fclose(f);
	}
	*st = weft_config_compat(cfg, NULL, ds ? path : NULL);
	if (*st) {
		weft_config_free(cfg);
		return NULL;
	}
	return cfg;
}

/* The scalar at `path` after the compat pass of `yaml` (static buffer). */
static const char *resolved(const char *yaml, const char *path)
{
	static char buf[128];
	weft_status st;
	weft_config *cfg = compat(yaml, NULL, &st);
	const char *s;

	if (!cfg) {
		fprintf(stderr, "compat of '%s' failed: %s\n", yaml, weft_error_last());
		return "(error)";
	}
	s = weft_cfg_scalar(at_path(cfg, path));
	snprintf(buf, sizeof(buf), "%s", s ? s : "(none)");
	weft_config_free(cfg);
	return buf;
}

static weft_status compat_err(const char *yaml, const char *ds)
{
	weft_status st;
	weft_config *cfg = compat(yaml, ds, &st);

	weft_config_free(cfg);
	return st;
}

static void test_strategies(void)
{
	static const char *const pairs[][2] = {
		{ "deepspeed", "zero_2" }, { "deepspeed_stage_1", "zero_1" },
		{ "deepspeed_stage_2", "zero_2" }, { "deepspeed_stage_3", "zero_3" },
		{ "fsdp", "zero_3" }, { "ddp_spawn", "ddp" }, { "ddp", "ddp" },
		{ "ddp_find_unused_parameters_false", "ddp" }, { "zero_2", "zero_2" },
	};
	char yaml[128];
	weft_trainer_config tc;
	weft_config *cfg;
	weft_status st;

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		snprintf(yaml, sizeof(yaml), "trainer: {devices: 2, strategy: %s}\n", pairs[i][0]);
		WT_CHECK(!strcmp(resolved(yaml, "trainer.strategy"), pairs[i][1]));
		/* the mapping form's name too */
		snprintf(yaml, sizeof(yaml), "trainer: {strategy: {name: %s}}\n", pairs[i][0]);
		WT_CHECK(!strcmp(resolved(yaml, "trainer.strategy.name"), pairs[i][1]));
	}
	/* the trainer reads the resolved name */
	cfg = compat("trainer: {devices: 2, strategy: deepspeed_stage_3}\n", NULL, &st);
	WT_REQUIRE(cfg != NULL);
	WT_OK(weft_trainer_config_parse(weft_config_root(cfg), "cfg", &tc));
	WT_CHECK(!strcmp(tc.strategy_name, "zero_3"));
	weft_config_free(cfg);
	/* ddp's unused-parameter check, in both forms */
	cfg = compat("trainer: {strategy: ddp_find_unused_parameters_true}\n", NULL, &st);
	WT_REQUIRE(cfg != NULL);
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "trainer.strategy.name")), "ddp"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "trainer.strategy.find_unused_parameters")),
			 "true"));
	weft_config_free(cfg);
	WT_CHECK(!strcmp(resolved("trainer: {strategy: {name: ddp_find_unused_parameters_true, "
				  "bucket_cap_mb: 25}}\n",
				  "trainer.strategy.find_unused_parameters"), "true"));
	WT_FAILS(compat_err("trainer: {strategy: {name: ddp_find_unused_parameters_true, "
			    "find_unused_parameters: false}}\n", NULL),
		 WEFT_ERR_CONFIG, "cfg.yaml:1:", "find_unused_parameters", "drop one");
	/* parameter offload is refused with the stage to use instead */
	WT_FAILS(compat_err("trainer: {strategy: deepspeed_stage_3_offload}\n", NULL),
		 WEFT_ERR_CONFIG, "cfg.yaml:1:21", "deepspeed_stage_3'",
		 "offload_optimizer: {device: cpu}");
	/* stage 2's offload is the optimizer's: zero_2 with it on the host */
	WT_CHECK(!strcmp(resolved("trainer: {strategy: deepspeed_stage_2_offload}\n",
				  "trainer.strategy.name"), "zero_2"));
	WT_CHECK(!strcmp(resolved("trainer: {strategy: {name: deepspeed_stage_2_offload, "
				  "reduce_bucket_size: 1000}}\n",
				  "trainer.strategy.offload_optimizer.device"), "cpu"));
	/* idempotent: a second pass changes nothing */
	cfg = compat("trainer: {strategy: fsdp}\n", NULL, &st);
	WT_REQUIRE(cfg != NULL);
	WT_OK(weft_config_compat(cfg, NULL, NULL));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "trainer.strategy")), "zero_3"));
	weft_config_free(cfg);
}

static void test_precisions(void)
{
	static const char *const pairs[][2] = {
		{ "16", "16-mixed" }, { "'16'", "16-mixed" }, { "16-mixed", "16-mixed" },
		{ "32", "32-true" }, { "32-true", "32-true" }, { "bf16", "bf16-mixed" },
		{ "bf16-mixed", "bf16-mixed" },
	};
	char yaml[128];
	weft_trainer_config tc;
	weft_config *cfg;
	weft_status st;

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		snprintf(yaml, sizeof(yaml), "trainer: {precision: %s}\n", pairs[i][0]);
		cfg = compat(yaml, NULL, &st);
		WT_REQUIRE(cfg != NULL);
		WT_OK(weft_trainer_config_parse(weft_config_root(cfg), "cfg", &tc));
		WT_CHECK(!strcmp(tc.precision, pairs[i][1]));
		weft_config_free(cfg);
	}
	WT_FAILS(compat_err("trainer: {precision: bf16-true}\n", NULL), WEFT_ERR_CONFIG,
		 "cfg.yaml:1:22", "float32", "bf16-mixed");
	WT_FAILS(compat_err("trainer: {precision: 16-true}\n", NULL), WEFT_ERR_CONFIG,
		 "float32", "16-mixed");
}

static void test_accelerators(void)
{
	const char *a = resolved("trainer: {accelerator: auto}\n", "trainer.accelerator");
	weft_trainer_config tc;
	weft_config *cfg;
	weft_status st;

	WT_CHECK(!strcmp(resolved("trainer: {accelerator: gpu}\n", "trainer.accelerator"),
			 "cuda"));
	WT_CHECK(!strcmp(resolved("trainer: {accelerator: cpu}\n", "trainer.accelerator"), "cpu"));
	WT_CHECK(!strcmp(a, "cpu") || !strcmp(a, "cuda"));
	cfg = compat("trainer: {accelerator: gpu}\n", NULL, &st);
	WT_REQUIRE(cfg != NULL);
	WT_OK(weft_trainer_config_parse(weft_config_root(cfg), "cfg", &tc));
	WT_CHECK(!strcmp(tc.accelerator, "cuda") && tc.device.type == WEFT_DEVICE_CUDA);
	weft_config_free(cfg);
	/* devices: -1 on the CPU is refused, as Lightning does */
	WT_FAILS(compat_err("trainer: {accelerator: cpu, devices: -1}\n", NULL), WEFT_ERR_CONFIG,
		 "cfg.yaml:1:38", "every visible GPU", "devices: 4");
	WT_FAILS(compat_err("trainer: {devices: -1}\n", NULL), WEFT_ERR_CONFIG, "every visible");
	/* devices: auto on the CPU stays auto (the launcher's world, else 1) */
	WT_CHECK(!strcmp(resolved("trainer: {devices: auto}\n", "trainer.devices"), "auto"));
}

static void test_optimizer_shape(void)
{
	weft_config *cfg;
	weft_status st;

	cfg = compat("optimizer: {type: AdamW, params: {lr: 0.0001, betas: [0.9, 0.999], "
		     "eps: 1.0e-8}}\n", NULL, &st);
	WT_REQUIRE(cfg != NULL);
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "optimizer.name")), "adamw"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "optimizer.lr")), "0.0001"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "optimizer.betas.1")), "0.999"));
	/* DeepSpeed's Adam/AdamW default weight decay is 0 */
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "optimizer.weight_decay")), "0.0"));
	/* the values keep their place in the YAML */
	WT_CHECK(!strcmp(where(at_path(cfg, "optimizer.lr")), "cfg.yaml:1:39"));
	WT_CHECK(at_path(cfg, "optimizer.type") == NULL && at_path(cfg, "optimizer.params") == NULL);
	weft_config_free(cfg);
	/* DeepSpeed's Adam is AdamW unless adam_w_mode is false */
	WT_CHECK(!strcmp(resolved("optimizer: {type: Adam, params: {lr: 0.1}}\n",
				  "optimizer.name"), "adamw"));
	WT_CHECK(!strcmp(resolved("optimizer: {type: Adam, params: {lr: 0.1, adam_w_mode: "
				  "false}}\n", "optimizer.name"), "adam"));
	WT_CHECK(!strcmp(resolved("optimizer: {type: SGD, params: {lr: 0.1, momentum: 0.9}}\n",
				  "optimizer.momentum"), "0.9"));
	/* names in any case */
	WT_CHECK(!strcmp(resolved("optimizer: {name: AdamW, lr: 0.1}\n", "optimizer.name"),
			 "adamw"));
	WT_CHECK(!strcmp(resolved("optimizer: {name: LION, lr: 0.1}\n", "optimizer.name"),
			 "lion"));
	WT_FAILS(compat_err("optimizer: {type: AdamW, name: adamw}\n", NULL), WEFT_ERR_CONFIG,
		 "cfg.yaml:1:19", "keep one");
	WT_FAILS(compat_err("optimizer: {type: AdamW, lr: 0.1, params: {lr: 0.2}}\n", NULL),
		 WEFT_ERR_CONFIG, "given twice");
}

static const char guide[] =
	"{\"train_batch_size\": 64, \"gradient_accumulation_steps\": 1,\n"
	" \"zero_optimization\": {\"stage\": 2, \"allgather_partitions\": true, "
	"\"reduce_scatter\": true,\n"
	"                       \"overlap_comm\": true, \"contiguous_gradients\": true},\n"
	" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.0001, \"betas\": [0.9, "
	"0.999], \"eps\": 1e-8}},\n"
	" \"fp16\": {\"enabled\": true}}\n";

static const char *ds_resolved(const char *yaml, const char *ds, const char *path)
{
	static char buf[128];
	weft_status st;
	weft_config *cfg = compat(yaml, ds, &st);
	const char *s;

	if (!cfg) {
		fprintf(stderr, "compat with '%s' failed: %s\n", ds, weft_error_last());
		return "(error)";
	}
	s = weft_cfg_scalar(at_path(cfg, path));
	snprintf(buf, sizeof(buf), "%s", s ? s : "(none)");
	weft_config_free(cfg);
	return buf;
}

static void test_deepspeed(void)
{
	const char *y4 = "trainer: {devices: 4}\n";
	weft_trainer_config tc;
	weft_config *cfg;
	weft_status st;
	char want[128];

	cfg = compat(y4, guide, &st);
	WT_REQUIRE(cfg != NULL);
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "data.batch_size")), "16"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "trainer.accumulate_grad_batches")), "1"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "trainer.strategy.name")), "zero_2"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "trainer.strategy.zero_optimization."
						   "overlap_comm")), "true"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "optimizer.name")), "adamw"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "optimizer.eps")), "1e-8"));
	/* grafted values point into the JSON */
	snprintf(want, sizeof(want), "%s/ds_config.json:4:50", tmp);
	WT_CHECK(!strcmp(where(at_path(cfg, "optimizer.lr")), want));
	WT_OK(weft_trainer_config_parse(weft_config_root(cfg), "cfg", &tc));
	WT_CHECK(!strcmp(tc.precision, "16-mixed") && tc.loss_scale.enabled);
	WT_CHECK(tc.devices == 4 && !strcmp(tc.strategy_name, "zero_2"));
	weft_config_free(cfg);

	/* the triple: any two give the third */
	WT_CHECK(!strcmp(ds_resolved(y4, "{\"train_batch_size\": 64, "
				     "\"train_micro_batch_size_per_gpu\": 8}",
				     "trainer.accumulate_grad_batches"), "2"));
	WT_CHECK(!strcmp(ds_resolved(y4, "{\"train_batch_size\": 64, "
				     "\"gradient_accumulation_steps\": 4}", "data.batch_size"), "4"));
	WT_CHECK(!strcmp(ds_resolved(y4, "{\"train_micro_batch_size_per_gpu\": 3, "
				     "\"gradient_accumulation_steps\": 2}", "data.batch_size"), "3"));
	/* three that disagree with the world: all three values and the world */
	WT_FAILS(compat_err(y4, "{\"train_batch_size\": 60, \"train_micro_batch_size_per_gpu\": 16, "
			    "\"gradient_accumulation_steps\": 1}"), WEFT_ERR_CONFIG,
		 "ds_config.json:1:", "train_batch_size 60", "train_micro_batch_size_per_gpu 16",
		 "gradient_accumulation_steps 1", "world of 4 ranks");
	WT_FAILS(compat_err(y4, "{\"train_batch_size\": 60, \"train_micro_batch_size_per_gpu\": 16}"),
		 WEFT_ERR_CONFIG, "world of 4 ranks");
	WT_FAILS(compat_err(y4, "{\"train_batch_size\": 10}"), WEFT_ERR_CONFIG, "world of 4");
	/* a value the YAML contradicts: both places */
	WT_FAILS(compat_err("trainer: {devices: 4}\ndata: {batch_size: 8}\n", guide),
		 WEFT_ERR_CONFIG, "ds_config.json:1:", "cfg.yaml:2:20", "data.batch_size");
	WT_FAILS(compat_err("trainer: {devices: 4, precision: bf16-mixed}\n", guide),
		 WEFT_ERR_CONFIG, "ds_config.json:5:22", "cfg.yaml:1:34", "16-mixed");
	WT_FAILS(compat_err("trainer: {devices: 4, strategy: zero_3}\n", guide), WEFT_ERR_CONFIG,
		 "zero_2", "cfg.yaml:1:33");
	WT_FAILS(compat_err("trainer: {devices: 4}\noptimizer: {name: sgd}\n", guide),
		 WEFT_ERR_CONFIG, "given twice", "cfg.yaml:2:12");
	/* values the YAML repeats are fine */
	WT_CHECK(!strcmp(ds_resolved("trainer: {devices: 4, precision: 16}\ndata: {batch_size: 16}\n",
				     guide, "trainer.precision"), "16-mixed"));

	/* fp16's loss scaler, clipping, printing, bf16, the scheduler */
	cfg = compat("trainer: {devices: 1}\n",
		     "{\"fp16\": {\"enabled\": true, \"loss_scale\": 0, \"initial_scale_power\": 12,"
		     " \"loss_scale_window\": 500, \"hysteresis\": 3, \"min_loss_scale\": 2},"
		     " \"gradient_clipping\": 1.0, \"steps_per_print\": 10,"
		     " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 0,"
		     " \"warmup_max_lr\": 0.001, \"warmup_num_steps\": 100}},"
		     " \"wall_clock_breakdown\": false, \"flops_profiler\": {\"enabled\": false}}",
		     &st);
	WT_REQUIRE(cfg != NULL);
	WT_OK(weft_trainer_config_parse(weft_config_root(cfg), "cfg", &tc));
	WT_CHECK(tc.loss_scale.initial_scale_power == 12 && tc.loss_scale.window == 500 &&
		 tc.loss_scale.hysteresis == 3 && tc.loss_scale.min_scale == 2.0);
	WT_CHECK(tc.gradient_clip_val == 1.0 && tc.log_every_n_steps == 10);
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "lr_scheduler.name")), "WarmupLR"));
	WT_CHECK(!strcmp(weft_cfg_scalar(at_path(cfg, "lr_scheduler.warmup_num_steps")), "100"));
	weft_config_free(cfg);
	WT_CHECK(!strcmp(ds_resolved("{}\n", "{\"bf16\": {\"enabled\": true}}", "trainer.precision"),
			 "bf16-mixed"));
	WT_CHECK(!strcmp(ds_resolved("{}\n", "{\"zero_optimization\": {\"stage\": 0}}",
				     "trainer.strategy"), "ddp"));
	/* refused: what would change the run */
	WT_FAILS(compat_err("{}\n", "{\"fp16\": {\"enabled\": true, \"loss_scale\": 128}}"),
		 WEFT_ERR_CONFIG, "fixed loss scale");
	WT_FAILS(compat_err("{}\n", "{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {}}}"),
		 WEFT_ERR_CONFIG, "OneCycle", "WarmupCosineLR");
	WT_FAILS(compat_err("{}\n", "{\"gradient_predivide_factor\": 2.0}"), WEFT_ERR_CONFIG,
		 "gradient_predivide_factor", "would change");
	WT_FAILS(compat_err("{}\n", "{\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}"),
		 WEFT_ERR_CONFIG, "both enabled");
	/* an unknown key inside a grafted block is reported in the JSON */
	cfg = compat("{}\n", "{\"zero_optimization\": {\"stage\": 2, \"stage_two\": 1}}", &st);
	WT_REQUIRE(cfg != NULL);
	WT_CHECK(at_path(cfg, "trainer.strategy.zero_optimization.stage_two") != NULL);
	weft_config_free(cfg);
	/* --deepspeed and a deepspeed: key together */
	WT_FAILS(compat_err("deepspeed: other.json\n", guide), WEFT_ERR_CONFIG,
		 "cfg.yaml:1:12", "--deepspeed");
	WT_FAILS(compat_err("{}\n", "{\"fp16\": {\"enabled\": \"auto\"}}"), WEFT_ERR_CONFIG,
		 "ds_config.json:1:22", "true or false");
	WT_CHECK(!strcmp(ds_resolved("{}\n", "{\"fp16\": {\"enabled\": false, \"loss_scale\": 128}}",
				     "trainer.precision"), "(none)"));
	WT_FAILS(compat_err("{}\n", "[1, 2]"), WEFT_ERR_CONFIG, "the DeepSpeed config", "must be a mapping");
}

int main(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/weft_compat_XXXXXX");
	WT_REQUIRE(mkdtemp(tmp) != NULL);
	test_strategies();
	test_precisions();
	test_accelerators();
	test_optimizer_shape();
	test_deepspeed();
	{
		char path[128];

		snprintf(path, sizeof(path), "%s/ds_config.json", tmp);
		unlink(path);
		rmdir(tmp);
	}
	return wt_done("test_config_compat");
}
