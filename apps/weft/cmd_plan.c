/* `weft plan --config FILE [--deepspeed DS.json] [--world-size N] [--memory SIZE]
 * [--KEY.PATH=VALUE ...]`: the
 * bytes each rank will hold per memory category and the elements it will
 * move per step, before anything runs (core/plan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plan_check.h"
#include "plan/plan.h"
#include "plan/plan_act.h"
#include "weft/pp_schedule.h"
#include "plan/plan_budget.h"
#include "plugin/registry.h"
#include "train/compat.h"
#include "train/trainer.h"
#include "weft/module.h"
#include "weft/optim.h"
#include "weft/weft.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: weft plan --config FILE [--deepspeed DS.json] [--world-size N] "
		"[--memory SIZE] [--KEY.PATH=VALUE ...]\n"
		"\nprints, for the strategy the config selects (trainer.strategy) and the\n"
		"world size (trainer.devices x trainer.num_nodes, or --world-size), the bytes\n"
		"each rank will hold for parameters, gradients, optimizer state and\n"
		"communication buffers, and the elements it will move per optimizer step.\n"
		"Nothing is trained; the model is built on the CPU to read its shapes.\n"
		"--deepspeed reads a DeepSpeed config as weft fit --deepspeed does.\n"
		"--memory SIZE (80GB, 24GiB: GB = 1e9 bytes, GiB = 2^30) ends with a one-line\n"
		"verdict: whether the largest rank fits in SIZE, and if not, what to change\n"
		"(ZeRO stage, activation checkpointing, micro-batch).\n");
}

static void row(const char *what, int64_t bytes)
{
	printf("  %-28s %14lld B  %10.3f MiB\n", what, (long long)bytes,
	       (double)bytes / 1048576.0);
}

static void print_activations(const weft_plan_act *a)
{
	if (!a->predicted) {
		printf("  %-28s not predicted: %s\n", "activations", a->why);
		return;
	}
	row("activations", a->bytes);
	if (a->pipeline.pp) {
		printf("  (micro-batch %lld x %lld positions, %s, checkpointing %s, %s over\n"
		       "   %lld micro-batches: the largest, world rank %d, holds %lld context%s, each\n"
		       "   with the arenas of the largest stage it runs, measured on small trial\n"
		       "   steps of each stage kind%s)\n",
		       (long long)a->micro_batch, (long long)a->seq_len, a->precision, a->mode,
		       weft_pp_kind_name((weft_pp_kind)a->pipeline.schedule),
		       (long long)a->n_micro, (int)a->rank, (long long)a->contexts,
		       a->contexts == 1 ? "" : "s", a->tp_size > 1 ? " as tp shards" : "");
		return;
	}
	printf("  (micro-batch %lld x %lld positions, %lld blocks, %s, checkpointing %s:\n"
	       "   one micro-batch's arena peak %lld B + tape %lld B, measured on small\n"
	       "   trial steps; the arenas hold an eighth more once grown)\n",
	       (long long)a->micro_batch, (long long)a->seq_len, (long long)a->n_layer,
	       a->precision, a->mode, (long long)a->arena_peak, (long long)a->tape_peak);
	if (a->tp_size > 1)
		printf("  (tp rank 0's shards of %d, with a stand-in communicator)\n",
		       (int)a->tp_size);
}

static void print_plan(const weft_plan_opts *o, const weft_plan *p, const char *optim)
{
	int64_t core = p->bytes[WEFT_MEM_PARAMS] + p->bytes[WEFT_MEM_GRADS] +
		       p->bytes[WEFT_MEM_OPTIM];

	printf("strategy %s", o->strategy);
	if (p->layout[0])
		printf(" (%s)", p->layout);
	printf(", world size %d, %lld micro-batch%s per step\n", (int)o->world,
	       (long long)o->n_micro, o->n_micro == 1 ? "" : "es");
	printf("model: %lld float32 parameters (Psi); optimizer %s: %zu state slot%s per element\n",
	       (long long)p->numel, optim, o->n_slots, o->n_slots == 1 ? "" : "s");
	printf("per rank (the largest: rank %d):\n", (int)p->rank);
	row("params", p->bytes[WEFT_MEM_PARAMS]);
	if (p->weight_copy_bytes)
		printf("  (of params: the %s copy of the weights the linear layers read, %lld B; "
		       "trainer.weight_copy)\n", weft_dtype_name(o->weight_copy),
		       (long long)p->weight_copy_bytes);
	row("grads", p->bytes[WEFT_MEM_GRADS]);
	row("optim", p->bytes[WEFT_MEM_OPTIM]);
	row("comm buffers: strategy", p->bytes[WEFT_MEM_COMM]);
	row("comm buffers: backend", p->comm_backend_bytes);
	printf("  (backend: %s)\n", p->comm_backend);
	row("params + grads + optim", core);
	if (p->formula[0])
		printf("  %-28s %14.0f B  (%s)\n", "formula", p->formula_bytes, p->formula);
	if (p->host_bytes[WEFT_MEM_PARAMS] || p->host_bytes[WEFT_MEM_GRADS] ||
	    p->host_bytes[WEFT_MEM_OPTIM]) {
		static const struct { const char *name; int cat; } cats[] = {
			{ "params", WEFT_MEM_PARAMS }, { "grads", WEFT_MEM_GRADS },
			{ "optim", WEFT_MEM_OPTIM },
		};

		printf("  (offload_optimizer: host memory / device memory per category)\n");
		for (size_t i = 0; i < sizeof(cats) / sizeof(cats[0]); i++)
			printf("  %-28s %14lld B host %14lld B device\n", cats[i].name,
			       (long long)p->host_bytes[cats[i].cat],
			       (long long)(p->bytes[cats[i].cat] - p->host_bytes[cats[i].cat]));
	}
	if (p->working_grads || p->working_params) {
		row("working set: grad buckets", p->working_grads);
		if (p->working_params)
			row("working set: gathered params", p->working_params);
		printf("  (the working set: buffers the strategy makes at setup, gradient\n"
		       "   buckets, gathered-parameter buffers and persistent units;\n"
		       "   summary.json reports the measured peaks beside these)\n");
	}
	if (p->setup_bytes)
		row("setup peak (before step 1)", p->setup_bytes);
	printf("communication per step per rank: %lld elements moved (%lld bytes)",
	       (long long)p->moved_elements, (long long)p->moved_elements * 4);
	if (p->comm_formula[0])
		printf("; %s", p->comm_formula);
	printf("\n");
}

/* The verdict line against --memory: what full checkpointing would hold
 * is asked of the plan only when the run does not fit without it. */
static int verdict(weft_config *cfg, const weft_cli_plan *cp, int64_t budget)
{
	char line[1024];

	if (weft_cli_plan_verdict(cfg, cp, budget, line, sizeof(line)) < 0)
		return weft_cli_fail();
	printf("verdict: %s\n", line);
	return 0;
}

int weft_cmd_plan(int argc, char **argv)
{
	const char *config = NULL, *ds = NULL;
	char arg[1024];
	int32_t world = 0;
	weft_config *cfg = NULL;
	weft_cli_plan cp;
	weft_status st = WEFT_OK;
	int64_t budget = 0;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
		if ((!strcmp(argv[i], "--config") || !strcmp(argv[i], "-c")) && i + 1 < argc)
			config = argv[++i];
		else if (!strncmp(argv[i], "--config=", 9))
			config = argv[i] + 9;
		else if (!strcmp(argv[i], "--deepspeed") && i + 1 < argc)
			ds = argv[++i];
		else if (!strncmp(argv[i], "--deepspeed=", 12))
			ds = argv[i] + 12;
	}
	if (!config) {
		fprintf(stderr, "weft plan: --config FILE is required\n");
		usage(stderr);
		return 2;
	}
	if (weft_config_load_file(config, &cfg))
		return weft_cli_fail();
	for (int i = 1; i < argc && !st; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--config") || !strcmp(a, "-c") || !strcmp(a, "--deepspeed")) {
			i++;
			continue;
		}
		if (!strncmp(a, "--config=", 9) || !strncmp(a, "--deepspeed=", 12))
			continue;
		if (!strcmp(a, "--memory") || !strncmp(a, "--memory=", 9)) {
			const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : "");

			if (weft_plan_parse_bytes("weft plan --memory", v, &budget)) {
				fprintf(stderr, "%s\n", weft_error_last());
				weft_config_free(cfg);
				return 2;
			}
			continue;
		}
		if (!strcmp(a, "--world-size") || !strncmp(a, "--world-size=", 13)) {
			const char *v = a[12] == '=' ? a + 13 : (i + 1 < argc ? argv[++i] : "");
			char *end;
			long w = strtol(v, &end, 10);

			if (!*v || *end || w < 1 || w > 1000000) {
				fprintf(stderr, "weft plan: --world-size wants a number of ranks >= 1, "
					"got '%s'\n", v);
				weft_config_free(cfg);
				return 2;
			}
			world = (int32_t)w;
			continue;
		}
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "weft plan: unexpected argument '%s'\n", a);
			weft_config_free(cfg);
			usage(stderr);
			return 2;
		}
		if (!strchr(a, '=') && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
			snprintf(arg, sizeof(arg), "%s=%s", a, argv[++i]);
			a = arg;
		}
		st = weft_config_override(cfg, a);
	}
	/* Lightning's and DeepSpeed's spellings, resolved as weft fit does */
	if (!st)
		st = weft_config_compat(cfg, config, ds);
	if (!st)
		st = weft_cli_plan_compute(cfg, world, &cp);
	/* the rest of the config as a run of that world would read it: an
	 * unknown key ('stratgy') is an error here as it is in weft fit */
	if (!st)
		st = weft_trainer_check_config(cfg, &(weft_run_opts){ .config_path = config },
					       cp.o.world);
	if (!st) {
		print_plan(&cp.o, &cp.p, cp.optim);
		print_activations(&cp.act);
		rc = 0;
		if (budget > 0)
			rc = verdict(cfg, &cp, budget);
	} else {
		rc = weft_cli_fail();
	}
	weft_config_free(cfg);
	return rc;
}
