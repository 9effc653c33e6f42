/* The activation term of `weft plan` (core/plan/plan_act.c) against the
 * allocator: for strategies single (1 process) and ddp (2 ranks over
 * gloo), activation checkpointing none, full and selective, and two GPT
 * shapes, the "activations" peak of steps 3-4 (the arenas at their steady
 * size: weft_mem_reset_peaks after step 2) on every rank is within 5% of
 * weft_plan_activations' prediction for the same config. Why 5%: the
 * issue's bound; the prediction measures the same ops on small trial
 * models and extrapolates exactly, so it misses only by the alignment
 * padding the extrapolation smooths (measured: under 0.5%). Prints each
 * figure. Skipped (77) without the gloo plugin.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "nn/act_ckpt.h"
#include "plan/plan_act.h"
#include "weft/config.h"
#include "weft/memory.h"
#include "weft/status.h"
#include "weft_test.h"

#define TOL 0.05

typedef struct shape {
	int64_t n_layer, n_embd, n_head, T, vocab, batch;
} shape;

static const shape shapes[] = {
	{ 4, 64, 2, 64, 256, 8 },
	{ 6, 96, 4, 32, 128, 6 },
};

static const char *const modes[] = { "none", "full", "selective" };

static h_config config(int si, int mode)
{
	const shape *s = &shapes[si];

	return (h_config){
		.strategy = "ddp", .model = H_MODEL_GPT, .batch = s->batch, .n_micro = 1,
		.steps = 4, .seed = 3, .lr = 1e-3, .gpt_n_layer = s->n_layer,
		.gpt_n_embd = s->n_embd, .gpt_n_head = s->n_head, .gpt_block = s->T,
		.gpt_vocab = s->vocab, .threads = 1, .dropout = 0.1, .mem_peaks_after = 2,
		.act_ckpt = mode,
	};
}

/* The plan's prediction for shape si, mode, strategy on `world` ranks. */
static int64_t predict(int si, int mode, const char *strategy, int world)
{
	const shape *s = &shapes[si];
	char yaml[1024];
	weft_config *cfg = NULL;
	weft_plan_opts o;
	weft_model_options mo = { .device = WEFT_CPU };
	weft_plan_act act;

	snprintf(yaml, sizeof(yaml),
		 "seed_everything: 3\n"
		 "trainer: {devices: %d, strategy: %s, threads: 1, activation_checkpointing: %s}\n"
		 "model: {class: gpt, n_layer: %lld, n_head: %lld, n_embd: %lld, vocab_size: %lld,\n"
		 "        block_size: %lld, bias: true, dropout: 0.1}\n"
		 "data: {class: text, batch_size: %lld, block_size: %lld}\n",
		 world, strategy, modes[mode], (long long)s->n_layer, (long long)s->n_head,
		 (long long)s->n_embd, (long long)s->vocab, (long long)s->T, (long long)s->batch,
		 (long long)s->T);
	WT_OK(weft_config_load_string("plan.yaml", yaml, strlen(yaml), &cfg));
	WT_OK(weft_plan_opts_from_config(weft_config_root(cfg), 0, &o));
	WT_OK(weft_plan_activations(weft_config_root(cfg), &o, &mo, &act));
	WT_CHECK(act.predicted);
	weft_config_free(cfg);
	return act.bytes;
}

static void check(const char *what, int si, int mode, int rank, int64_t measured,
		  int64_t predicted)
{
	double rel = fabs((double)(measured - predicted)) / (double)measured;

	fprintf(stderr, "%s shape %d (L %lld, C %lld, T %lld, B %lld) %-9s rank %d: measured "
		"%lld B, plan %lld B (%+.2f%%)\n", what, si, (long long)shapes[si].n_layer,
		(long long)shapes[si].n_embd, (long long)shapes[si].T, (long long)shapes[si].batch,
		modes[mode], rank, (long long)measured, (long long)predicted,
		100.0 * (double)(predicted - measured) / (double)measured);
	WT_CHECK(measured > 0 && rel <= TOL);
}

static void single(int si, int mode)
{
	h_config c = config(si, mode);
	h_result r;

	c.strategy = "single";
	memset(&r, 0, sizeof(r));
	WT_OK(h_run(&c, &r));
	check("single", si, mode, 0, r.mem_peak[WEFT_MEM_ACTIVATIONS], predict(si, mode, "single",
										 1));
	h_result_free(&r);
}

static void ddp(const char *self, int si, int mode)
{
	char prefix[128], a_si[8], a_mode[8], path[512];
	char *argv[] = { (char *)self, "rank", a_si, a_mode, prefix, NULL };
	int64_t want = predict(si, mode, "ddp", 2);
	h_spawn_result sp;

	snprintf(prefix, sizeof(prefix), "actplan-%d", (int)getpid());
	snprintf(a_si, sizeof(a_si), "%d", si);
	snprintf(a_mode, sizeof(a_mode), "%d", mode);
	WT_REQUIRE(h_spawn(2, argv, 120, &sp) == 0);
	WT_CHECK(!sp.hung);
	for (int r = 0; r < 2; r++) {
		h_result got;

		memset(&got, 0, sizeof(got));
		snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, r);
		if (h_spawn_ok(&sp, r) && h_result_read(&got, path) == 0) {
			check("ddp", si, mode, r, got.mem_peak[WEFT_MEM_ACTIVATIONS], want);
			h_result_free(&got);
		} else {
			WT_CHECK(0);
		}
		unlink(path);
	}
}

int main(int argc, char **argv)
{
	const char *pd = getenv("WEFT_PLUGIN_DIR");
	char gloo[1024];

	if (argc == 5 && !strcmp(argv[1], "rank")) {
		h_config c = config(atoi(argv[2]), atoi(argv[3]));
		h_result r;
		char path[512];
		weft_status st;

		memset(&r, 0, sizeof(r));
		st = h_run(&c, &r);
		if (st) {
			fprintf(stderr, "rank failed: %s: %s\n", weft_status_str(st), weft_error_last());
			return 3;
		}
		snprintf(path, sizeof(path), "%s-rank%d.bin", argv[4], r.rank);
		if (h_result_write(&r, path) != 0)
			return 4;
		h_result_free(&r);
		return 0;
	}
	snprintf(gloo, sizeof(gloo), "%s/comm_gloo.so", pd ? pd : "");
	if (!pd || access(gloo, R_OK) != 0) {
		fprintf(stderr, "skipped: %s was not built\n", gloo);
		return 77;
	}
	for (int si = 0; si < 2; si++)
		for (int mode = 0; mode < 3; mode++) {
			single(si, mode);
			ddp(argv[0], si, mode);
		}
	return wt_done("test_strategy_act_plan");
}
