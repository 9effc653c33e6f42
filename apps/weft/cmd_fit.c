/* `weft fit`, `weft validate`, `weft test`: run the trainer on a config.
 *
 *   weft fit --config FILE [--deepspeed DS.json] [--print-config] [--trace FILE]
 *            [--memory SIZE|off] [--KEY.PATH=VALUE | --KEY.PATH VALUE]...
 *   weft validate --config FILE --ckpt DIR [overrides]
 *   weft test --config FILE --ckpt DIR [overrides]
 *
 * Overrides follow LightningCLI: the value is parsed as YAML and replaces
 * (or adds) the key; unknown keys are then reported by the strict check.
 * Lightning's and DeepSpeed's spellings, and --deepspeed's JSON, are
 * translated by weft_config_compat (core/train/compat.h) after them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plan_check.h"
#include "train/compat.h"
#include "train/trainer.h"
#include "weft/weft.h"

static void usage(FILE *out, const char *cmd)
{
	if (!strcmp(cmd, "fit"))
		fprintf(out, "usage: weft fit --config FILE [--deepspeed DS.json] [--print-config] "
			"[--trace FILE] [--memory SIZE|off] [--KEY.PATH=VALUE ...]\n"
			"\ntrains the model the config describes; --trainer.devices=2 and every\n"
			"other key can be overridden on the command line (values are YAML).\n"
			"--print-config checks the whole config as a run would (unknown keys,\n"
			"values, data files) and prints it fully resolved, then exits.\n"
			"--trace FILE writes every rank's step timeline (compute and comm\n"
			"intervals, common clock) as one Chrome-trace JSON that Perfetto opens.\n"
			"--deepspeed DS.json reads a DeepSpeed config (batch sizes, optimizer,\n"
			"scheduler, fp16/bf16, clipping, zero_optimization) beside the YAML,\n"
			"which still gives the model and the data.\n"
			"Before it starts, weft fit checks weft plan's per-rank peak against\n"
			"--memory SIZE per rank (80GB, 24GiB), or on the CPU the memory this\n"
			"machine has available over its ranks, and refuses a run that does not\n"
			"fit, saying\n"
			"what to change; --memory off skips the check.\n");
	else
		fprintf(out, "usage: weft %s --config FILE --ckpt CHECKPOINT_DIR [--KEY.PATH=VALUE ...]\n"
			"\nevaluates a checkpoint on the %s data and prints the metrics.\n",
			cmd, !strcmp(cmd, "test") ? "test" : "validation");
}

static int run_mode(int argc, char **argv, weft_run_mode mode)
{
	const char *cmd = argv[0], *config = NULL, *ckpt = NULL, *trace = NULL, *ds = NULL;
	const char *memory = NULL;
	int print_config = 0, code = 0, rc = 1;
	weft_config *cfg = NULL;
	char **full = NULL;
	char arg[4096];
	weft_status st;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout, cmd);
			return 0;
		}
		if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "-c")) {
			if (++i >= argc)
				goto usage_error;
			config = argv[i];
		} else if (!strncmp(argv[i], "--config=", 9)) {
			config = argv[i] + 9;
		} else if (!strcmp(argv[i], "--deepspeed")) {
			if (++i >= argc)
				goto usage_error;
			ds = argv[i];
		} else if (!strncmp(argv[i], "--deepspeed=", 12)) {
			ds = argv[i] + 12;
		} else if (!strcmp(argv[i], "--ckpt") || !strcmp(argv[i], "--ckpt_path")) {
			if (++i >= argc)
				goto usage_error;
			ckpt = argv[i];
		} else if (!strcmp(argv[i], "--print-config") || !strcmp(argv[i], "--print_config")) {
			print_config = 1;
		} else if (mode == WEFT_RUN_FIT && !strcmp(argv[i], "--trace")) {
			if (++i >= argc)
				goto usage_error;
			trace = argv[i];
		} else if (mode == WEFT_RUN_FIT && !strncmp(argv[i], "--trace=", 8)) {
			trace = argv[i] + 8;
		} else if (mode == WEFT_RUN_FIT && !strcmp(argv[i], "--memory")) {
			if (++i >= argc)
				goto usage_error;
			memory = argv[i];
		} else if (mode == WEFT_RUN_FIT && !strncmp(argv[i], "--memory=", 9)) {
			memory = argv[i] + 9;
		}
	}
	if (!config) {
		fprintf(stderr, "weft %s: --config FILE is required\n", cmd);
		goto usage_error;
	}
	if (mode != WEFT_RUN_FIT && !ckpt) {
		fprintf(stderr, "weft %s: --ckpt CHECKPOINT_DIR is required\n", cmd);
		goto usage_error;
	}
	st = weft_config_load_file(config, &cfg);
	if (st)
		return weft_cli_fail();
	for (int i = 1; i < argc && !st; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--config") || !strcmp(a, "-c") || !strcmp(a, "--ckpt") ||
		    !strcmp(a, "--ckpt_path") || !strcmp(a, "--deepspeed") ||
		    (trace && !strcmp(a, "--trace")) || (memory && !strcmp(a, "--memory"))) {
			i++;
			continue;
		}
		if (!strncmp(a, "--config=", 9) || !strncmp(a, "--deepspeed=", 12) ||
		    !strcmp(a, "--print-config") ||
		    !strcmp(a, "--print_config") || (trace && !strncmp(a, "--trace=", 8)) ||
		    (memory && !strncmp(a, "--memory=", 9)))
			continue;
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "weft %s: unexpected argument '%s'\n", cmd, a);
			weft_config_free(cfg);
			goto usage_error;
		}
		if (!strchr(a, '=') && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
			snprintf(arg, sizeof(arg), "%s=%s", a, argv[i + 1]);
			a = arg;
			i++;
		}
		st = weft_config_override(cfg, a);
	}
	if (!st)
		st = weft_config_compat(cfg, config, ds);
	if (st)
		goto out_fail;
	if (print_config) {
		/* the config printed is one a run would accept: unknown keys,
		 * wrong values and missing files are reported instead */
		st = weft_trainer_check_config(cfg, &(weft_run_opts){ .mode = mode,
								       .config_path = config,
								       .ckpt_path = ckpt },
					       0);
		if (st)
			goto out_fail;
		st = weft_config_write(cfg, stdout);
		rc = st ? weft_cli_fail() : 0;
		goto out;
	}
	if (mode == WEFT_RUN_FIT) {
		rc = weft_cli_fit_memory_check(cfg, memory);
		if (rc)
			goto out;
		rc = 1;
	}
	full = calloc((size_t)argc + 2, sizeof(*full));
	if (!full) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory");
		goto out_fail;
	}
	full[0] = "weft";
	for (int i = 0; i < argc; i++)
		full[i + 1] = argv[i];
	st = weft_trainer_run(cfg, &(weft_run_opts){ .mode = mode, .config_path = config,
						     .ckpt_path = ckpt, .argv = full,
						     .trace_path = trace },
			      &code);
	if (st)
		goto out_fail;
	rc = code;
	goto out;
out_fail:
	rc = weft_cli_fail();
out:
	free(full);
	weft_config_free(cfg);
	return rc;
usage_error:
	usage(stderr, cmd);
	return 2;
}

int weft_cmd_fit(int argc, char **argv)
{
	return run_mode(argc, argv, WEFT_RUN_FIT);
}

int weft_cmd_validate(int argc, char **argv)
{
	return run_mode(argc, argv, WEFT_RUN_VALIDATE);
}

int weft_cmd_test(int argc, char **argv)
{
	return run_mode(argc, argv, WEFT_RUN_TEST);
}
