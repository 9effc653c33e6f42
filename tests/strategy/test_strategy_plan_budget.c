/* `weft plan --memory`'s verdict (core/plan/plan_budget.c):
 * - sizes parse with decimal and binary units; a bad size is an error
 *   that names the flag and shows the form;
 * - a plan within the budget fits, one over it names the change that
 *   fits alone, in order: the lowest ZeRO stage whose paper formula fits
 *   (ddp, 1e8 parameters, AdamW, 2 ranks: zero_1 12 Psi, zero_2 10 Psi,
 *   zero_3 8 Psi bytes), else full activation checkpointing (the plan's own
 *   prediction of both modes on a real GPT config), else the largest
 *   micro-batch that fits (checked against the activation term one row
 *   up, which must not fit); and with no change that fits, says to add
 *   ranks;
 * - end to end (when the weft binary and the plugins are built): weft
 *   plan --memory prints the verdict line, and a bad size exits 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/plan_act.h"
#include "plan/plan_budget.h"
#include "weft/config.h"
#include "weft/status.h"
#include "cli_run.h"
#include "weft_test.h"

static void parse(void)
{
	int64_t b = 0;

	WT_OK(weft_plan_parse_bytes("--memory", "80GB", &b));
	WT_CHECK(b == 80000000000LL);
	WT_OK(weft_plan_parse_bytes("--memory", "24 GiB", &b));
	WT_CHECK(b == 24LL << 30);
	WT_OK(weft_plan_parse_bytes("--memory", "1.5mib", &b));
	WT_CHECK(b == 3LL << 19);
	WT_OK(weft_plan_parse_bytes("--memory", "123456", &b));
	WT_CHECK(b == 123456);
	const char *bad[] = { "", "80XB", "-1GB", "0", "GB", "1e30" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		WT_CHECK(weft_plan_parse_bytes("--memory", bad[i], &b) == WEFT_ERR_INVALID_ARG);
		WT_STR_CONTAINS(weft_error_last(), "--memory");
		WT_STR_CONTAINS(weft_error_last(), "e.g. 80GB");
	}
}

static weft_plan replicated(int64_t psi)
{
	weft_plan p;

	memset(&p, 0, sizeof(p));
	p.numel = psi;
	p.bytes[WEFT_MEM_PARAMS] = 4 * psi;
	p.bytes[WEFT_MEM_GRADS] = 4 * psi;
	p.bytes[WEFT_MEM_OPTIM] = 8 * psi;
	return p;
}

static void stages(void)
{
	const int64_t psi = 100000000;
	weft_plan_opts o = { .strategy = "ddp", .world = 2, .n_slots = 2 };
	weft_plan p = replicated(psi);
	char line[1024];
	const char *lp = line;

	WT_CHECK(weft_plan_verdict(&o, &p, NULL, NULL, 16 * psi, line, sizeof(line)) == 1);
	WT_STR_CONTAINS(lp, "rank 0 fits");
	WT_STR_CONTAINS(lp, "activations not included");
	WT_CHECK(weft_plan_verdict(&o, &p, NULL, NULL, 12 * psi, line, sizeof(line)) == 0);
	WT_STR_CONTAINS(lp, "does not fit");
	WT_STR_CONTAINS(lp, "change trainer.strategy: zero_1");
	WT_CHECK(weft_plan_verdict(&o, &p, NULL, NULL, 12 * psi - 1, line, sizeof(line)) == 0);
	WT_STR_CONTAINS(lp, "change trainer.strategy: zero_2");
	WT_CHECK(weft_plan_verdict(&o, &p, NULL, NULL, 9 * psi, line, sizeof(line)) == 0);
	WT_STR_CONTAINS(lp, "change trainer.strategy: zero_3");
	WT_CHECK(weft_plan_verdict(&o, &p, NULL, NULL, 7 * psi, line, sizeof(line)) == 0);
	WT_STR_CONTAINS(lp, "no change fits it");
	WT_STR_CONTAINS(lp, "--world-size");
	fprintf(stderr, "%s\n", line);
}

static void act_of(const char *mode, int64_t batch, weft_plan_act *a)
{
	char yaml[1024];
	weft_config *cfg = NULL;
	weft_plan_opts o;
	weft_model_options mo = { .device = WEFT_CPU };

	snprintf(yaml, sizeof(yaml),
		 "trainer: {devices: 2, strategy: zero_3, threads: 1, "
		 "activation_checkpointing: %s}\n"
		 "model: {class: gpt, n_layer: 4, n_head: 2, n_embd: 64, vocab_size: 256,\n"
		 "        block_size: 64, bias: true, dropout: 0.0}\n"
		 "data: {class: text, batch_size: %lld, block_size: 64}\n", mode, (long long)batch);
	WT_OK(weft_config_load_string("plan.yaml", yaml, strlen(yaml), &cfg));
	WT_OK(weft_plan_opts_from_config(weft_config_root(cfg), 0, &o));
	WT_OK(weft_plan_activations(weft_config_root(cfg), &o, &mo, a));
	WT_REQUIRE(a->predicted);
	weft_config_free(cfg);
}

/* zero_3 (no stage left to take): checkpointing, then the micro-batch. */
static void activations(void)
{
	const int64_t psi = 1000000;
	weft_plan_opts o = { .strategy = "zero_3", .world = 2, .n_slots = 2 };
	weft_plan p;
	weft_plan_act none, full, none6;
	weft_plan_alt alt = { .act_full = &full };
	int64_t core, budget, b;
	char line[1024], *at;
	const char *lp = line;

	memset(&p, 0, sizeof(p));
	p.numel = psi;
	p.bytes[WEFT_MEM_PARAMS] = 2 * psi;
	p.bytes[WEFT_MEM_GRADS] = 2 * psi;
	p.bytes[WEFT_MEM_OPTIM] = 4 * psi;
	core = 8 * psi;
	act_of("none", 8, &none);
	act_of("full", 8, &full);
	fprintf(stderr, "activations at micro-batch 8: none %lld B, full %lld B\n",
		(long long)none.bytes, (long long)full.bytes);
	WT_REQUIRE(full.bytes < none.bytes);
	WT_CHECK(weft_plan_rank_total(&p, &none) == core + none.bytes);
	budget = core + (none.bytes + full.bytes) / 2;
	WT_CHECK(weft_plan_verdict(&o, &p, &none, &alt, budget, line, sizeof(line)) == 0);
	fprintf(stderr, "%s\n", line);
	WT_STR_CONTAINS(lp, "change trainer.activation_checkpointing: full");
	/* the micro-batch: the prediction at 6 rows (its own trial steps)
	 * equals weft_plan_act_bytes_at(none, 6), and a budget just above it
	 * gives 6 */
	act_of("none", 6, &none6);
	WT_CHECK(weft_plan_act_bytes_at(&none, 6) == none6.bytes);
	budget = core + none6.bytes;
	WT_CHECK(weft_plan_verdict(&o, &p, &none, NULL, budget, line, sizeof(line)) == 0);
	fprintf(stderr, "%s\n", line);
	at = strstr(line, "change data.batch_size: ");
	WT_REQUIRE(at);
	b = strtoll(at + strlen("change data.batch_size: "), NULL, 10);
	WT_CHECK(b == 6);
	WT_CHECK(core + weft_plan_act_bytes_at(&none, b + 1) > budget);
	/* nothing fits: micro-batch 1 with checkpointing is still too much */
	WT_CHECK(weft_plan_verdict(&o, &p, &none, &alt, core, line, sizeof(line)) == 0);
	WT_STR_CONTAINS(lp, "no change fits it");
}


static void cli(void)
{
	const char *bd = getenv("WEFT_BUILD_DIR");
	char bin[1024], cfg[256], txt[300];
	FILE *f;

	if (!bd)
		return;
	snprintf(bin, sizeof(bin), "%s/bin/weft", bd);
	if (access(bin, X_OK) != 0) {
		fprintf(stderr, "cli part skipped: %s was not built\n", bin);
		return;
	}
	snprintf(cfg, sizeof(cfg), "/tmp/weft-plan-budget-%d.yaml", (int)getpid());
	f = fopen(cfg, "w");
	WT_REQUIRE(f);
	fprintf(f, "trainer: {accelerator: cpu, devices: 2, strategy: ddp, threads: 1}\n"
		"model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 32, vocab_size: 256, "
		"block_size: 32, bias: true, dropout: 0.0}\n"
		"data: {class: text, paths: [%s.txt], block_size: 32, batch_size: 4}\n"
		"optimizer: {name: adamw, lr: 1.0e-3}\n", cfg);
	fclose(f);
	snprintf(txt, sizeof(txt), "%s.txt", cfg);
	f = fopen(txt, "w");
	WT_REQUIRE(f);
	for (int i = 0; i < 200; i++)
		fprintf(f, "the warp and the weft of a plan, line %d\n", i);
	fclose(f);
	WT_CHECK(cli_run("%s plan --config %s --memory 1GB", bin, cfg) == 0);
	WT_STR_CONTAINS(cli_out, "verdict: rank 0 fits");
	WT_CHECK(cli_run("%s plan --config %s --memory=1KiB --world-size 3", bin, cfg) == 0);
	WT_STR_CONTAINS(cli_out, "verdict: rank 0 does not fit");
	WT_STR_CONTAINS(cli_out, "no change fits it");
	WT_CHECK(cli_run("%s plan --config %s --memory lots", bin, cfg) == 2);
	WT_STR_CONTAINS(cli_out, "weft plan --memory: 'lots' is not a memory size");
	unlink(cfg);
	unlink(txt);
}

int main(void)
{
	parse();
	stages();
	activations();
	cli();
	return wt_done("test_strategy_plan_budget");
}
