/* The plan of a resolved config, shared by `weft plan` and weft fit's
 * memory check before launch (plan_check.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "nn/shapes.h"
#include "plan_check.h"
#include "plugin/registry.h"
#include "weft/log.h"
#include "weft/optim.h"
#include "weft/weft.h"

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

weft_status weft_cli_plan_compute(weft_config *cfg, int32_t world, weft_cli_plan *out)
{
	const weft_cfg *root = weft_config_root(cfg), *sec = weft_cfg_get(root, "optimizer");
	weft_model *m = NULL;
	weft_status st;

	memset(out, 0, sizeof(*out));
	out->optim = "adamw";
	out->mo = (weft_model_options){ .device = WEFT_CPU, .no_grads = 1 };
	st = weft_plan_opts_from_config(root, world, &out->o);
	if (!st)
		st = optim_slots(root, &out->o.n_slots);
	if (!st && sec)
		weft_cfg_str(sec, "name", "adamw", &out->optim);
	if (!st)
		st = weft_plan_model_options(&out->o, &out->mo);
	/* the parameters' names and shapes, not their values: nothing is
	 * allocated or initialised, so a 7B-parameter model plans in
	 * milliseconds */
	if (!st)
		st = nn_model_shapes_from_config(weft_cfg_get(root, "model"), &out->mo, &m);
	if (!st)
		st = weft_plan_compute(weft_model_params(m), &out->o, &out->p);
	if (!st)
		st = weft_plan_activations(root, &out->o, &out->mo, &out->act);
	weft_model_free(m);
	return st;
}

int weft_cli_plan_verdict(weft_config *cfg, const weft_cli_plan *cp, int64_t budget, char *line,
			  size_t n)
{
	weft_plan_act full;
	weft_plan_alt alt = { 0 };

	/* what full checkpointing would hold, asked only when it matters */
	if (weft_plan_rank_total(&cp->p, &cp->act) > budget && cp->act.predicted &&
	    !strcmp(cp->act.mode, "none")) {
		if (weft_config_override(cfg, "--trainer.activation_checkpointing=full") ||
		    weft_plan_activations(weft_config_root(cfg), &cp->o, &cp->mo, &full))
			return -1;
		alt.act_full = &full;
	}
	return weft_plan_verdict(&cp->o, &cp->p, &cp->act, &alt, budget, line, n);
}

/* A copy of cfg, through its YAML text. */
static weft_status config_copy(const weft_config *cfg, weft_config **out)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	weft_status st;

	*out = NULL;
	if (!f)
		return weft_error_set(WEFT_ERR_NOMEM, "weft fit: a copy of the config to plan");
	st = weft_config_write(cfg, f);
	fclose(f);
	if (!st)
		st = weft_config_load_string("the config (planned)", text, len, out);
	free(text);
	return st;
}

/* What a rank process holds beside the plan's categories when the budget
 * is the machine's own memory: its code, libraries, thread stacks, the
 * loader's and the allocator's own pages (GPT-2 large under zero_3: a
 * rank's resident size 0.30 GiB above its planned peak). A budget given
 * with --memory is taken as it is. */
#define RANK_OVERHEAD ((int64_t)512 << 20)

/* The memory new allocations can take now without swapping (the kernel's
 * MemAvailable, what the ranks of a shared machine can actually get), in
 * bytes; 0 when unknown. */
static int64_t available_now(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return (int64_t)kb * 1024;
}

/* This process starts the ranks itself (no launcher's rank in the env). */
static int not_launched(void)
{
	return !getenv("WEFT_RANK") && !getenv("RANK");
}

int weft_cli_fit_memory_check(const weft_config *cfg, const char *memory)
{
	weft_config *copy = NULL;
	weft_cli_plan cp;
	int64_t budget = 0, ranks_here;
	char line[1024], from[256];
	int fits;

	if (memory && !strcmp(memory, "off"))
		return 0;
	if (memory && weft_plan_parse_bytes("weft fit --memory", memory, &budget)) {
		fprintf(stderr, "weft: %s (or --memory off to skip the check)\n",
			weft_error_last());
		return 2;
	}
	/* the ranks a weft fit starts run the same command line: the
	 * process that started them has checked */
	if (!not_launched())
		return 0;
	if (!memory) {
		const char *accel = "cpu";

		weft_cfg_str(weft_cfg_get(weft_config_root(cfg), "trainer"), "accelerator", "cpu",
			     &accel);
		/* the device's memory is not known here: only the CPU's */
		if (!accel || strcmp(accel, "cpu"))
			return 0;
	}
	/* the plan reads the config as it is; the verdict may override a
	 * key, so it works on a copy */
	if (config_copy(cfg, &copy) || weft_cli_plan_compute(copy, 0, &cp)) {
		weft_log(WEFT_LOG_DEBUG, "weft fit: no memory plan to check before launch: %s",
			 weft_error_last());
		weft_config_free(copy);
		return 0;
	}
	ranks_here = cp.o.world / (cp.o.nodes > 0 ? cp.o.nodes : 1);
	if (ranks_here < 1)
		ranks_here = 1;
	if (memory) {
		snprintf(from, sizeof(from), "--memory %s per rank", memory);
	} else {
		int64_t phys = (int64_t)sysconf(_SC_PHYS_PAGES) * (int64_t)sysconf(_SC_PAGESIZE);
		int64_t avail = available_now();

		if (phys <= 0) {
			weft_config_free(copy);
			return 0;
		}
		/* what the ranks can get now: on a machine shared with other
		 * work that is less than what it has */
		if (avail > 0 && avail < phys) {
			budget = avail / ranks_here - RANK_OVERHEAD;
			snprintf(from, sizeof(from), "the %.2f GiB of memory this machine has "
				 "available now (of %.2f GiB) shared by %lld rank%s, less %.2f GiB "
				 "a rank the plan does not count",
				 (double)avail / 1073741824.0, (double)phys / 1073741824.0,
				 (long long)ranks_here, ranks_here == 1 ? "" : "s",
				 (double)RANK_OVERHEAD / 1073741824.0);
		} else {
			budget = phys / ranks_here - RANK_OVERHEAD;
			snprintf(from, sizeof(from), "this machine's %.2f GiB of memory shared by "
				 "%lld rank%s, less %.2f GiB a rank the plan does not count",
				 (double)phys / 1073741824.0, (long long)ranks_here,
				 ranks_here == 1 ? "" : "s", (double)RANK_OVERHEAD / 1073741824.0);
		}
		if (budget < 1)
			budget = 1;
	}
	fits = weft_cli_plan_verdict(copy, &cp, budget, line, sizeof(line));
	if (fits != 0) {
		weft_config_free(copy);
		return 0;
	}
	fprintf(stderr, "weft fit: refusing to start: strategy %s on %d rank%s does not fit in "
		"%s: %s. `weft plan --config ... --memory SIZE` shows the plan; --memory off "
		"skips this check\n", cp.o.strategy, (int)cp.o.world, cp.o.world == 1 ? "" : "s",
		from, line);
	weft_config_free(copy);
	return 1;
}
