/* `weft plan --config FILE [--deepspeed DS.json] [--world-size N] [--KEY.PATH=VALUE ...]`: the
 * bytes each rank will hold per memory category and the elements it will
 * move per step, before anything runs (core/plan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plan/plan.h"
#include "plan/plan_act.h"
#include "plugin/registry.h"
#include "train/compat.h"
#include "train/trainer.h"
#include "weft/module.h"
#include "weft/optim.h"
#include "weft/weft.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: weft plan --config FILE [--deepspeed DS.json] [--world-size N] "
		"[--KEY.PATH=VALUE ...]\n"
		"\nprints, for the strategy the config selects (trainer.strategy) and the\n"
		"world size (trainer.devices x trainer.num_nodes, or --world-size), the bytes\n"
		"each rank will hold for parameters, gradients, optimizer state and\n"
		"communication buffers, and the elements it will move per optimizer step.\n"
		"Nothing is trained; the model is built on the CPU to read its shapes.\n"
		"--deepspeed reads a DeepSpeed config as weft fit --deepspeed does.\n");
}

/* The optimizer's state slots per element, from its plugin. */
static weft_status optim_slots(const weft_cfg *root, size_t *out)
{
	const weft_cfg *sec = weft_cfg_get(root, "optimizer");
	const char *name = "adamw";
	weft_registry *reg = NULL;
	const void *vt = NULL;
	void *state = NULL;
	weft_status st;

	if (sec && weft_cfg_str(sec, "name", "adamw", &name))
		return weft_error_last_status();
	st = weft_registry_create(&reg);
	if (!st)
		st = weft_registry_add_default_paths(reg);
	if (!st)
		st = weft_registry_find(reg, WEFT_PLUGIN_OPTIM, name, &vt, NULL);
	if (!st)
		st = ((const weft_optim_ops *)vt)->create(sec, &state);
	if (!st) {
		*out = ((const weft_optim_ops *)vt)->state_slots(state);
		((const weft_optim_ops *)vt)->destroy(state);
	}
	weft_registry_free(reg);
	return st;
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
	printf("  (micro-batch %lld x %lld positions, %lld blocks, %s, checkpointing %s:\n"
	       "   one micro-batch's arena peak %lld B + tape %lld B, measured on small\n"
	       "   trial steps; the arenas hold an eighth more once grown)\n",
	       (long long)a->micro_batch, (long long)a->seq_len, (long long)a->n_layer,
	       a->precision, a->mode, (long long)a->arena_peak, (long long)a->tape_peak);
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
	row("grads", p->bytes[WEFT_MEM_GRADS]);
	row("optim", p->bytes[WEFT_MEM_OPTIM]);
	row("comm buffers: strategy", p->bytes[WEFT_MEM_COMM]);
	row("comm buffers: backend", p->comm_backend_bytes);
	printf("  (backend: %s)\n", p->comm_backend);
	row("params + grads + optim", core);
	if (p->formula[0])
		printf("  %-28s %14.0f B  (%s)\n", "formula", p->formula_bytes, p->formula);
	if (p->working_grads || p->working_params) {
		row("working set: grad buckets", p->working_grads);
		if (p->working_params)
			row("working set: gathered params", p->working_params);
		printf("  (the working set: buffers the strategy makes at setup, gradient\n"
		       "   buckets, gathered-parameter buffers and persistent units;\n"
		       "   summary.json reports the measured peaks beside these)\n");
	}
	printf("communication per step per rank: %lld elements moved (%lld bytes)",
	       (long long)p->moved_elements, (long long)p->moved_elements * 4);
	if (p->comm_formula[0])
		printf("; %s", p->comm_formula);
	printf("\n");
}

int weft_cmd_plan(int argc, char **argv)
{
	const char *config = NULL, *optim = "adamw", *ds = NULL;
	char arg[1024];
	int32_t world = 0;
	weft_config *cfg = NULL;
	weft_model *m = NULL;
	weft_model_options mo = { .device = WEFT_CPU, .no_grads = 1 };
	weft_plan_opts o;
	weft_plan p;
	weft_plan_act act;
	weft_status st = WEFT_OK;
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
		st = weft_plan_opts_from_config(weft_config_root(cfg), world, &o);
	if (!st)
		st = optim_slots(weft_config_root(cfg), &o.n_slots);
	if (!st) {
		const weft_cfg *sec = weft_cfg_get(weft_config_root(cfg), "optimizer");

		if (sec)
			weft_cfg_str(sec, "name", "adamw", &optim);
		st = weft_plan_model_options(&o, &mo);
		if (!st)
			st = weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"),
						    &mo, &m);
	}
	if (!st)
		st = weft_plan_compute(weft_model_params(m), &o, &p);
	if (!st)
		st = weft_plan_activations(weft_config_root(cfg), &o, &mo, &act);
	/* the rest of the config as a run of that world would read it: an
	 * unknown key ('stratgy') is an error here as it is in weft fit */
	if (!st)
		st = weft_trainer_check_config(cfg, &(weft_run_opts){ .config_path = config },
					       o.world);
	if (!st) {
		print_plan(&o, &p, optim);
		print_activations(&act);
		rc = 0;
	} else {
		rc = weft_cli_fail();
	}
	weft_model_free(m);
	weft_config_free(cfg);
	return rc;
}
