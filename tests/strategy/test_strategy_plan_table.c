/* `weft plan` against `weft fit`'s measured per-rank peaks, strategy by
 * strategy: the memory table.
 *
 *   test_strategy_plan_table SHAPE NRANKS
 *       For GPT shape SHAPE (a: 6 blocks, n_embd 48, 6 heads, 12
 *       positions, micro-batch 4; b: 12 blocks, n_embd 24, 6 heads, 24
 *       positions, micro-batch 2; both byte-level, vocabulary 256) on
 *       NRANKS ranks over gloo, runs `weft fit` (AdamW, 3 steps on a
 *       generated text, no checkpoint) for ddp, zero_1, zero_2 and zero_3
 *       without and with full activation checkpointing, tp (plain, and
 *       sequence parallel, with the vocabulary-parallel loss where the
 *       vocabulary divides), and pp over 6 micro-batches (1f1b; gpipe on
 *       shape a, interleaved_1f1b with 2 virtual stages on shape b), and
 *       On shape llama (a llama3-tiny preset of 2 blocks, n_embd 64, 4
 *       heads, SwiGLU of 512, one key/value head, 32 positions,
 *       micro-batch 4) only ddp and zero (tp and pp split GPT-2's blocks
 *       only). On 4 ranks (shape b) the meshes instead: tp 2 x dp 2,
 *       hybrid dp 2 x pp 2 and tp 2 x pp 2 (1f1b), and dp 2 x pp 2
 *       interleaved with full checkpointing. For each run it
 *       reads summary.json: the steady peaks (from the third step on, max
 *       over ranks per category) and the plan's bytes the run wrote beside
 *       them. It asserts, for every run:
 *       - the measured total of the planned categories (params, grads,
 *         optim, activations, comm) within 5% of the plan's total;
 *       - params + grads + optim within 5% of the paper's fp32 AdamW
 *         formula plus the working set the options configure (as `weft
 *         plan` sizes it): ddp 16Psi, ZeRO-1 8Psi + 8Psi/N, ZeRO-2 4Psi +
 *         12Psi/N, ZeRO-3 16Psi/N; tp 16 x the rank's shard; pp 16 x the
 *         largest pipeline rank's stages (the last stage with its copy of
 *         the tied embedding) plus 4 x the trainer's model (Psi; its tp
 *         shard under hybrid tp), which every pp rank keeps (parameters
 *         only) to save checkpoints from.
 *       It prints one row per run: strategy, ranks, shape, plan, measured,
 *       difference.
 *
 *   test_strategy_plan_table errors
 *       A pipeline schedule the run could not play (interleaved_1f1b
 *       with micro-batches that are not a multiple of the pipeline
 *       ranks): the activation plan is a config error naming the
 *       schedule, the key and the counts that would do.
 *
 * Tolerance 5%, the bound the plan is held to: the parameter, gradient,
 * optimizer and backend terms are exact, the activation term extrapolates
 * trial steps exactly up to the arenas' alignment; what is not planned is
 * pp's message buffers (a few micro-batches' hidden states, up to 5% of
 * the comm row, 1.5% of the total: how many depends on the order messages
 * arrive in), tp's packed partial gradients under sequence parallelism (a
 * few KiB) and the 4-byte spare of pp's state block. Measured: every
 * total within 1.5%, every params + grads + optim within 0.01%.
 * The "other" category (loaders, bookkeeping) is not planned and not
 * compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan/plan.h"
#include "plan/plan_act.h"
#include "weft/config.h"
#include "weft/module.h"
#include "weft/status.h"
#include "cli_run.h"
#include "weft_test.h"

#define TOL 0.05

typedef struct shape {
	const char *name;
	int64_t n_layer, n_embd, n_head, T, batch;
	const char *arch;      /* more of the model section (a Llama preset), or "" */
} shape;

static const shape shapes[] = {
	{ "a", 6, 48, 6, 12, 4, "" },
	{ "b", 12, 24, 6, 24, 2, "" },
	/* RMSNorm, RoPE, SwiGLU of 8 x n_embd, one key/value head, untied */
	{ "llama", 2, 64, 4, 32, 4, "preset: llama3-tiny, intermediate_size: 512, n_kv_head: 1, " },
};

enum { F_DDP, F_ZERO1, F_ZERO2, F_ZERO3, F_TP, F_PP };

typedef struct row {
	const char *label;
	const char *strategy;  /* trainer.strategy (a name or a flow mapping); NULL: tp */
	int sp;                /* tp: sequence parallel (and vocabulary parallel where
				* the vocabulary divides) */
	const char *ckpt;      /* trainer.activation_checkpointing */
	int formula;
	int n_micro;           /* accumulate_grad_batches */
	int pp, v;             /* F_PP: pipeline ranks (0: all) and stages per rank (0: 1) */
} row;

static char weft_bin[1024], work[256], corpus[320];

/* A text of words from a fixed list, long enough for every run's batches. */
static void write_corpus(void)
{
	static const char *const words[] = { "the", "pipeline", "holds", "a", "stage",
					     "of", "blocks", "and", "sends", "its", "state",
					     "on", "every", "rank", "gradient", "shard" };
	FILE *f = fopen(corpus, "w");
	uint32_t x = 12345;

	WT_REQUIRE(f);
	for (int i = 0; i < 6000; i++) {
		x = x * 1103515245u + 12345u;
		fprintf(f, "%s%s", words[(x >> 16) % 16], i % 12 == 11 ? ".\n" : " ");
	}
	fclose(f);
}

static void write_config(const char *path, const shape *s, int n, const row *r,
			 const char *strategy)
{
	FILE *f = fopen(path, "w");

	WT_REQUIRE(f);
	fprintf(f, "seed_everything: 7\n"
		"trainer:\n"
		"  accelerator: cpu\n"
		"  devices: %d\n"
		"  strategy: %s\n"
		"  threads: 1\n"
		"  max_steps: 3\n"
		"  accumulate_grad_batches: %d\n"
		"  activation_checkpointing: %s\n"
		"  enable_checkpointing: false\n"
		"  enable_progress_bar: false\n"
		"  limit_val_batches: 0\n"
		"  log_every_n_steps: 1\n"
		"  default_root_dir: %s/runs\n"
		"model: {class: gpt, %sn_layer: %lld, n_head: %lld, n_embd: %lld, vocab_size: 256,\n"
		"        block_size: %lld, dropout: 0.0}\n"
		"data: {class: text, paths: [%s], block_size: %lld, batch_size: %lld,\n"
		"       val_fraction: 0.1}\n"
		"optimizer: {name: adamw, lr: 0.001}\n",
		n, strategy, r->n_micro, r->ckpt, work, s->arch, (long long)s->n_layer,
		(long long)s->n_head, (long long)s->n_embd, (long long)s->T, corpus,
		(long long)s->T, (long long)s->batch);
	fclose(f);
}

static const char *const cats[] = { "params", "grads", "optim", "activations", "comm" };

/* summary.json's `section` (steady_peak_bytes or plan_bytes), by category. */
static void read_bytes(const weft_cfg *root, const char *section, int64_t *out)
{
	const weft_cfg *sec = weft_cfg_get(root, section);

	WT_REQUIRE(sec);
	for (int c = 0; c < 5; c++) {
		out[c] = -1;
		WT_REQUIRE(!weft_cfg_int(sec, cats[c], -1, &out[c]));
		WT_REQUIRE(out[c] >= 0);
	}
}

/* The parameters of rank r's pipeline stages under pp's uniform split of
 * `blocks` blocks into S stages over p ranks (stage k * p + r on rank r):
 * its blocks, the embedding (wte, wpe) on stage 0, ln_f and a copy of the
 * tied wte on the last. */
static int64_t stage_share(const weft_params *ps, int64_t blocks, int S, int p, int r)
{
	int64_t share = 0, per = blocks / S;

	for (size_t i = 0; i < weft_params_count(ps); i++) {
		const weft_tensor *t = weft_params_at(ps, i);
		int64_t n = weft_tensor_numel(t);
		long long b;

		if (sscanf(t->name, "transformer.h.%lld.", &b) == 1) {
			if ((b / per) % p == r)
				share += n;
		} else if (!strcmp(t->name, "transformer.wte.weight")) {
			share += (r == 0 ? n : 0) + (r == (S - 1) % p ? n : 0);
		} else if (!strncmp(t->name, "transformer.wpe", 15)) {
			share += r == 0 ? n : 0;
		} else {
			share += r == (S - 1) % p ? n : 0; /* ln_f */
		}
	}
	return share;
}

/* The paper's params + grads + optim for the row, with the plan's working
 * set, from `weft plan` of the same config in this process. */
static double formula_for(const char *cfg_path, const row *r, int n, int pp, int S,
			  double *psi)
{
	weft_config *cfg = NULL;
	weft_plan_opts o;
	weft_model_options mo = { .device = WEFT_CPU, .no_grads = 1 };
	weft_model *m = NULL;
	weft_plan p;
	double f = 0.0, ws;
	int64_t local = 0;

	WT_OK(weft_config_load_file(cfg_path, &cfg));
	WT_OK(weft_plan_opts_from_config(weft_config_root(cfg), n, &o));
	o.n_slots = 2;
	WT_OK(weft_plan_model_options(&o, &mo));
	WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m));
	WT_OK(weft_plan_compute(weft_model_params(m), &o, &p));
	*psi = (double)p.numel;
	ws = (double)(p.working_params + p.working_grads);
	for (size_t i = 0; i < weft_params_count(weft_model_params(m)); i++)
		local += weft_tensor_numel(weft_params_at(weft_model_params(m), i));
	switch (r->formula) {
	case F_DDP: f = 16 * *psi; break;
	case F_ZERO1: f = 8 * *psi + 8 * *psi / n; break;
	case F_ZERO2: f = 4 * *psi + 12 * *psi / n; break;
	case F_ZERO3: f = 16 * *psi / n; break;
	case F_TP: f = 16.0 * (double)local; break;
	case F_PP: {
		int64_t most = 0;

		for (int q = 0; q < pp; q++) {
			int64_t s = stage_share(weft_model_params(m), weft_model_gpt_config(m)->n_layer,
						S, pp, q);

			most = s > most ? s : most;
		}
		f = 16.0 * (double)most + 4.0 * (double)local;
		break;
	}
	}
	weft_model_free(m);
	weft_config_free(cfg);
	return f + ws;
}

static void one(const shape *s, int n, const row *r, int *k)
{
	char cfg[512], summary[600], strategy[256];
	weft_config *sum = NULL;
	int64_t meas[5], plan[5], mt = 0, pt = 0, core;
	double psi, want, rel_total, rel_core;
	int pp = r->pp ? r->pp : n, S = pp * (r->v ? r->v : 1);

	if (r->strategy)
		snprintf(strategy, sizeof(strategy), "%s", r->strategy);
	else
		snprintf(strategy, sizeof(strategy), "{name: tp, size: %d%s%s}", n,
			 r->sp ? ", sequence_parallel: true" : "",
			 r->sp && 256 % n == 0 ? ", vocab_parallel: true" : "");
	snprintf(cfg, sizeof(cfg), "%s/run%d.yaml", work, *k);
	write_config(cfg, s, n, r, strategy);
	WT_REQUIRE(cli_run("rm -rf %s/runs", work) == 0);
	if (cli_run("%s fit --config %s --memory off", weft_bin, cfg) != 0) {
		fprintf(stderr, "%s", cli_out);
		WT_REQUIRE(0);
	}
	snprintf(summary, sizeof(summary), "%s/runs/run%d/version_0/summary.json", work, *k);
	(*k)++;
	WT_OK(weft_config_load_file(summary, &sum));
	read_bytes(weft_config_root(sum), "steady_peak_bytes", meas);
	read_bytes(weft_config_root(sum), "plan_bytes", plan);
	weft_config_free(sum);
	for (int c = 0; c < 5; c++) {
		mt += meas[c];
		pt += plan[c];
	}
	rel_total = (double)(pt - mt) / (double)mt;
	core = meas[0] + meas[1] + meas[2];
	want = formula_for(cfg, r, n, pp, S, &psi);
	rel_core = ((double)core - want) / want;
	fprintf(stderr, "| %-22s | %d | %s | %10lld | %10lld | %+6.2f%% | params+grads+optim "
		"%9lld vs formula %9.0f (%+.2f%%); activations %lld vs %lld, comm %lld vs %lld\n",
		r->label, n, s->name, (long long)pt, (long long)mt, 100.0 * rel_total,
		(long long)core, want, 100.0 * rel_core, (long long)plan[3], (long long)meas[3],
		(long long)plan[4], (long long)meas[4]);
	WT_CHECK(fabs(rel_total) <= TOL);
	WT_CHECK(fabs(rel_core) <= TOL);
}

/* A pipeline schedule the run could not play: the plan says so, naming
 * the schedule, the micro-batches and the key, with what would do. */
static int errors(void)
{
	static const char yaml[] =
		"trainer: {devices: 2, accumulate_grad_batches: 3,\n"
		"          strategy: {name: pp, schedule: interleaved_1f1b, virtual_stages: 2}}\n"
		"model: {class: gpt, n_layer: 4, n_head: 2, n_embd: 16, vocab_size: 64,\n"
		"        block_size: 8}\n"
		"data: {batch_size: 2}\n";
	weft_config *cfg = NULL;
	weft_plan_opts o;
	weft_model_options mo = { .device = WEFT_CPU };
	weft_plan_act act;

	WT_OK(weft_config_load_string("bad.yaml", yaml, strlen(yaml), &cfg));
	WT_OK(weft_plan_opts_from_config(weft_config_root(cfg), 0, &o));
	o.n_slots = 2;
	WT_OK(weft_plan_model_options(&o, &mo));
	WT_CHECK(weft_plan_activations(weft_config_root(cfg), &o, &mo, &act) == WEFT_ERR_CONFIG);
	WT_STR_CONTAINS(weft_error_last(), "interleaved_1f1b schedule over 2 ranks with 3 "
			"micro-batches per step (trainer.accumulate_grad_batches)");
	WT_STR_CONTAINS(weft_error_last(), "use 2 or 4 micro-batches");
	weft_config_free(cfg);
	return wt_done("test_strategy_plan_table errors");
}

int main(int argc, char **argv)
{
	static const row rows[] = {
		{ "ddp", "ddp", 0, "none", F_DDP, 1, 0, 0 },
		{ "zero_1", "zero_1", 0, "none", F_ZERO1, 1, 0, 0 },
		{ "zero_2", "zero_2", 0, "none", F_ZERO2, 1, 0, 0 },
		{ "zero_3", "zero_3", 0, "none", F_ZERO3, 1, 0, 0 },
		{ "ddp ckpt full", "ddp", 0, "full", F_DDP, 1, 0, 0 },
		{ "zero_1 ckpt full", "zero_1", 0, "full", F_ZERO1, 1, 0, 0 },
		{ "zero_2 ckpt full", "zero_2", 0, "full", F_ZERO2, 1, 0, 0 },
		{ "zero_3 ckpt full", "zero_3", 0, "full", F_ZERO3, 1, 0, 0 },
		{ "tp", NULL, 0, "none", F_TP, 1, 0, 0 },
		{ "tp sequence parallel", NULL, 1, "none", F_TP, 1, 0, 0 },
		{ "pp 1f1b", "{name: pp, schedule: 1f1b}", 0, "none", F_PP, 6, 0, 1 },
	};
	static const row gpipe = { "pp gpipe", "{name: pp, schedule: gpipe}", 0, "none", F_PP, 6,
				   0, 1 };
	static const row inter = { "pp interleaved_1f1b", "{name: pp, schedule: interleaved_1f1b, "
				   "virtual_stages: 2}", 0, "none", F_PP, 6, 0, 2 };
	/* on 4 ranks: the meshes */
	static const row meshes[] = {
		{ "tp 2 x dp 2", "{name: tp, size: 2}", 0, "none", F_TP, 1, 0, 0 },
		{ "hybrid dp 2 x pp 2", "{name: hybrid, dp: 2, pp: 2, schedule: 1f1b}", 0, "none",
		  F_PP, 6, 2, 1 },
		{ "hybrid tp 2 x pp 2", "{name: hybrid, tp: 2, pp: 2, schedule: 1f1b}", 0, "none",
		  F_PP, 6, 2, 1 },
		{ "hybrid dp 2 x pp 2 int.", "{name: hybrid, dp: 2, pp: 2, schedule: "
		  "interleaved_1f1b, virtual_stages: 2}", 0, "full", F_PP, 6, 2, 2 },
	};
	const char *bd = getenv("WEFT_BUILD_DIR");
	const shape *s = NULL;
	int n, k = 0;

	if (argc == 2 && !strcmp(argv[1], "errors"))
		return errors();
	if (argc != 3) {
		fprintf(stderr, "usage: test_strategy_plan_table SHAPE(a|b|llama) NRANKS | "
			"errors\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strcmp(argv[1], shapes[i].name))
			s = &shapes[i];
	n = atoi(argv[2]);
	WT_REQUIRE(s && n >= 2 && bd);
	snprintf(weft_bin, sizeof(weft_bin), "%s/bin/weft", bd);
	snprintf(work, sizeof(work), "/tmp/weft-plan-table-%d", (int)getpid());
	WT_REQUIRE(mkdir(work, 0755) == 0);
	snprintf(corpus, sizeof(corpus), "%s/corpus.txt", work);
	write_corpus();
	fprintf(stderr, "| strategy | ranks | shape | plan B | measured B | difference |\n");
	if (n == 4) {
		WT_REQUIRE(!s->arch[0]);
		for (size_t i = 0; i < sizeof(meshes) / sizeof(meshes[0]); i++)
			one(s, n, &meshes[i], &k);
	} else {
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			if (!s->arch[0] || rows[i].formula <= F_ZERO3) /* tp, pp: GPT-2's */
				one(s, n, &rows[i], &k);
		if (!s->arch[0])
			one(s, n, !strcmp(s->name, "a") ? &gpipe : &inter, &k);
	}
	WT_CHECK(cli_run("rm -rf %s", work) == 0);
	return wt_done("test_strategy_plan_table");
}
