/* ZeRO stages 1-3 on real ranks over gloo.
 *
 *   test_strategy_zero equiv STAGE MODEL NRANKS ACCUM CLIP
 *       Each rank runs the same training twice, as zero_STAGE and as ddp
 *       (same seed, data, optimizer), 20 steps: every step's loss and every
 *       final weight of zero against ddp, all ranks' weights identical, and
 *       the elements each step moved against the ZeRO paper's counts.
 *   test_strategy_zero memory STAGE NRANKS
 *       Allocator peaks of params + grads + optimizer state over the steps
 *       against the paper's fp32-Adam formulas; every rank's peak up to the
 *       end of setup (the model built as the strategy's build plan says)
 *       within weft plan's total.
 *   test_strategy_zero reshard
 *       zero_3 on 4 ranks saves after 10 of 20 steps; ddp on 2 ranks and
 *       zero_1 on 3 ranks resume from it and follow the loss curve of the
 *       4-rank run that never stopped.
 *   test_strategy_zero errors
 *       option errors read as advice; offload_optimizer: {device: cpu} on
 *       accelerator: cpu is a no-op (bit-identical losses and weights, one
 *       log line saying so).
 *
 * Tolerances (all written down here, measured worst in the comments):
 * - loss of every step within 1e-5 relative of ddp. ZeRO sums each
 *   gradient in another order than ddp (reduce-scatter per unit, per
 *   micro-batch for stages 2 and 3, instead of one all-reduce of the
 *   accumulated gradient): a few float32 ulps per step.
 * - weights: SGD (momentum 0.9) every weight within 1e-5 of ddp's,
 *   relative to max(|w|, 1e-2) (biases start at 0, hence the floor);
 *   AdamW within 1e-5 in relative L2 norm over the whole vector. Adam's
 *   first update is lr * sign(g): an element whose gradient is zero up to
 *   rounding can move by +-lr in one run and -+lr in the other (see
 *   test_strategy_ddp.c), so single elements are not held to 1e-5, the
 *   vector is. A wrong shard, a stale bucket or a missing average moves
 *   the loss by 1e-3 or more.
 * - comm: exact element counts from the unit layout (padding to N equal
 *   chunks per unit adds < N elements per unit), and within 1% of
 *   2 Psi (N-1)/N (stages 1, 2) or 3 Psi (N-1)/N (stage 3) per rank.
 * - memory: within 5% of 8Psi + 8Psi/N, 4Psi + 12Psi/N, 16Psi/N (+ the
 *   gathered working set, reported on its own line) bytes. Setup's peak at
 *   most 5% above the plan's total, the comm backend's buffers apart
 *   (measured: 0% on every case but zero_3 x4, 0.4% under; a setup that
 *   made its optimizer slots beside the model's whole parameters and
 *   gradients ran 38% (zero_2 x2) to 155% (zero_3 x4) over). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "plan/plan.h"
#include "plan/plan_budget.h"
#include "weft/log.h"
#include "weft/module.h"
#include "weft_test.h"

#define TOL 1e-5
#define WEIGHT_FLOOR 1e-2
#define MEM_TOL 0.05

static h_model_kind parse_model(const char *s)
{
	if (!strcmp(s, "gpt") || !strcmp(s, "llama"))
		return H_MODEL_GPT;
	if (!strcmp(s, "mlp"))
		return H_MODEL_MLP;
	return H_MODEL_TOY;
}

static char yaml[512];

/* Small buckets, so even these tiny models have many units. Stage 3:
 * nothing persists unless asked (exact comm counts), prefetch one unit. */
static const char *zero_yaml(int stage, int persist)
{
	snprintf(yaml, sizeof(yaml),
		 "{name: zero_%d, reduce_bucket_size: 4096, allgather_bucket_size: 8192, "
		 "zero_optimization: {stage3_param_persistence_threshold: %d, "
		 "stage3_prefetch_bucket_size: 6000, overlap_comm: true}}", stage, persist);
	return yaml;
}

/* `weft plan`'s numbers for a model like the harness's and a zero section
 * (parsed as the plugin reads it). */
static void plan_for(const char *model, int64_t n_layer, int64_t n_embd, int64_t vocab,
		     const char *section, int world, int accum, weft_plan *out)
{
	char text[768];
	weft_config *cfg = NULL;
	weft_model *m = NULL;
	weft_model_options mo = { .device = WEFT_CPU, .seed = 1, .no_grads = 1 };
	weft_plan_opts o;

	snprintf(text, sizeof(text), "{trainer: {strategy: %s, accumulate_grad_batches: %d}}",
		 section, accum);
	WT_OK(weft_config_load_string("plan", text, strlen(text), &cfg));
	WT_OK(weft_plan_opts_from_config(weft_config_root(cfg), world, &o));
	o.n_slots = 2;
	if (!strcmp(model, "gpt")) {
		weft_gpt_config g = { .n_layer = n_layer, .n_head = 2, .n_embd = n_embd,
				      .vocab_size = vocab, .block_size = 16, .bias = 1 };

		WT_OK(weft_model_create_gpt(&g, &mo, &m));
	} else if (!strcmp(model, "llama")) {
		/* config_for's shape: llama3-tiny at width 64 over 4 heads */
		char mt[256];
		weft_config *mc = NULL;

		snprintf(mt, sizeof(mt), "{preset: llama3-tiny, n_layer: %lld, n_head: 4, "
			 "n_embd: 64, vocab_size: %lld, block_size: 16}", (long long)n_layer,
			 (long long)vocab);
		WT_OK(weft_config_load_string("model", mt, strlen(mt), &mc));
		WT_OK(weft_model_from_config(weft_config_root(mc), &mo, &m));
		weft_config_free(mc);
	} else {
		weft_mlp_config mc = { .in_features = 784, .hidden = { 64 }, .n_hidden = 1,
				       .out_features = 10, .activation = WEFT_ACT_RELU };

		WT_OK(weft_model_create_mlp(&mc, &mo, &m));
	}
	WT_OK(weft_plan_compute(weft_model_params(m), &o, out));
	weft_model_free(m);
	weft_config_free(cfg);
}

static const char *memory_yaml(int stage)
{
	snprintf(yaml, sizeof(yaml), "{name: zero, stage: %d, reduce_bucket_size: 1100, "
		 "allgather_bucket_size: 1100, stage3_param_persistence_threshold: 0, "
		 "stage3_prefetch_bucket_size: 1100}", stage);
	return yaml;
}

static h_config base_config(h_model_kind model, int accum)
{
	return (h_config){
		.model = model,
		.batch = model == H_MODEL_GPT ? 2 : 4,
		.n_micro = accum,
		.steps = 20,
		.seed = 1234,
		.lr = 1e-3,
		.toy_unused_rank = -1,
	};
}

/* base_config of the model named on the command line: "llama" is the
 * llama3-tiny preset (RMSNorm, RoPE, SwiGLU, 4 heads on 2 KV heads, an
 * untied head) at width 64. */
static h_config config_for(const char *model, int accum)
{
	h_config c = base_config(parse_model(model), accum);

	if (!strcmp(model, "llama")) {
		c.gpt_preset = "llama3-tiny";
		c.gpt_n_head = 4;
		c.gpt_n_embd = 64;
	}
	return c;
}

static int write_result(const h_result *r, const char *prefix, const char *tag)
{
	char path[512];

	snprintf(path, sizeof(path), "%s-%s-rank%d.bin", prefix, tag, r->rank);
	if (h_result_write(r, path)) {
		fprintf(stderr, "cannot write %s\n", path);
		return 1;
	}
	return 0;
}

static int run_and_write(h_config *c, const char *prefix, const char *tag)
{
	h_result r;
	weft_status st = h_run(c, &r);
	int rc;

	if (st) {
		fprintf(stderr, "rank failed (%s): %s: %s\n", tag, weft_status_str(st),
			weft_error_last());
		return 3;
	}
	rc = write_result(&r, prefix, tag);
	h_result_free(&r);
	return rc;
}

/* rank MODE STAGE MODEL ACCUM CLIP SGD PREFIX */
static int rank_main(int argc, char **argv)
{
	const char *mode, *prefix;
	int stage, accum, sgd;
	h_config c;

	if (argc < 9)
		return 2;
	mode = argv[2];
	stage = atoi(argv[3]);
	accum = atoi(argv[5]);
	sgd = !strcmp(argv[7], "sgd");
	prefix = argv[8];
	c = config_for(argv[4], accum);
	c.clip = atof(argv[6]);
	c.sgd = sgd;
	if (!strcmp(mode, "equiv")) {
		/* stage 0: the ddp reference (one communicator per process, so
		 * the two runs are two jobs) */
		if (stage == 0) {
			c.strategy = "ddp";
			return run_and_write(&c, prefix, "ddp");
		}
		c.strategy = stage == 1 ? "zero_1" : stage == 2 ? "zero_2" : "zero_3";
		c.strategy_yaml = zero_yaml(stage, argc > 9 ? atoi(argv[9]) : 0);
		return run_and_write(&c, prefix, "zero");
	}
	if (!strcmp(mode, "memory")) {
		/* deep and narrow: no single tensor is a large part of the model
		 * (the largest, mlp.c_fc.weight, is 1024 of ~54k elements), so
		 * buckets of ~1100 elements are ~2% of it: the formulas speak of
		 * models much larger than a bucket */
		c.gpt_n_layer = 16;
		c.gpt_n_embd = 16;
		c.gpt_n_head = 2;
		c.gpt_vocab = 32;
		c.steps = 3;
		c.strategy = stage == 1 ? "zero_1" : stage == 2 ? "zero_2" : "zero_3";
		c.strategy_yaml = memory_yaml(stage);
		return run_and_write(&c, prefix, "mem");
	}
	if (!strcmp(mode, "reshard")) {
		/* argv[3]: the phase: 0 = zero_3 x4 whole, 3 = its first half
		 * saved; 1 = ddp, 2 = zero_1 resuming */
		static char dir[512];

		snprintf(dir, sizeof(dir), "%s-ckpt", prefix);
		c.batch = 12 / atoi(argv[5]);
		c.n_micro = 1;
		if (stage == 0 || stage == 3) {
			c.strategy = "zero_3";
			c.strategy_yaml = zero_yaml(3, 0);
			if (stage == 0)
				return run_and_write(&c, prefix, "whole");
			c.steps = 10;
			c.save_dir = dir;
			return run_and_write(&c, prefix, "first");
		}
		c.strategy = stage == 1 ? "ddp" : "zero_1";
		c.strategy_yaml = stage == 1 ? NULL : zero_yaml(1, 0);
		c.first_step = 10;
		c.steps = 10;
		c.load_dir = dir;
		return run_and_write(&c, prefix, stage == 1 ? "ddp" : "zero1");
	}
	return 2;
}

static void spawn(const char *self, int n, char **args, h_spawn_result *sp)
{
	char *argv[16];
	int k = 0;

	argv[k++] = (char *)self;
	for (; args[k - 1] && k < 15; k++)
		argv[k] = args[k - 1];
	argv[k] = NULL;
	WT_REQUIRE(h_spawn(n, argv, 120, sp) == 0);
	WT_CHECK(!sp->hung);
}

static int read_all(const h_spawn_result *sp, int n, const char *prefix, const char *tag,
		    h_result *got)
{
	for (int r = 0; r < n; r++) {
		char path[512];

		WT_REQUIRE(h_spawn_ok(sp, r));
		snprintf(path, sizeof(path), "%s-%s-rank%d.bin", prefix, tag, r);
		WT_REQUIRE(h_result_read(&got[r], path) == 0);
		unlink(path);
	}
	return 0;
}

/* ZeRO's collectives per step in units of the padded model (sum over units
 * of N * chunk): the caller knows the multiplier. */
static int64_t param_elems(const h_result *r, int n)
{
	const weft_step_report *rep = &r->rep[0];

	return rep->comm_elements - rep->metric_comm_bytes / 8 * (n > 1);
}

static void compare(const h_result *z, const h_result *d, int steps, int sgd, const char *what)
{
	double worst_loss = 0.0, worst_w, l2;
	int64_t at;

	for (int s = 0; s < steps; s++) {
		double rel = fabs(z->loss[s] - d->loss[s]) / fabs(d->loss[s]);

		if (rel > worst_loss)
			worst_loss = rel;
		WT_CLOSE(z->loss[s], d->loss[s], TOL, 0.0);
	}
	worst_w = h_max_rel(z->weights, d->weights, d->numel, WEIGHT_FLOOR, &at);
	l2 = h_rel_l2(z->weights, d->weights, d->numel);
	fprintf(stderr, "%s: %lld params, worst loss rel %.3g, worst weight rel %.3g (element "
		"%lld), weights l2 rel %.3g\n", what, (long long)d->numel, worst_loss, worst_w,
		(long long)at, l2);
	if (sgd)
		WT_CHECK(worst_w <= TOL);
	else
		WT_CHECK(l2 <= TOL);
}

static int equiv_one(const char *self, int stage, const char *model, int n, int accum,
		     const char *clip, int sgd, int persist)
{
	h_result z[H_MAX_RANKS], d[H_MAX_RANKS];
	h_spawn_result sp;
	char prefix[128], ss[8], as[8], ps[16], what[160];
	char *args[] = { "rank", "equiv", ss, (char *)model, as, (char *)clip,
			 sgd ? "sgd" : "adamw", prefix, ps, NULL };
	char *ddp_args[] = { "rank", "equiv", "0", (char *)model, as, (char *)clip,
			     sgd ? "sgd" : "adamw", prefix, ps, NULL };

	snprintf(prefix, sizeof(prefix), "zero-%d-%d-%s-%d-%d", (int)getpid(), stage, model, n,
		 accum);
	snprintf(ss, sizeof(ss), "%d", stage);
	snprintf(as, sizeof(as), "%d", accum);
	snprintf(ps, sizeof(ps), "%d", persist);
	spawn(self, n, args, &sp);
	read_all(&sp, n, prefix, "zero", z);
	spawn(self, n, ddp_args, &sp);
	read_all(&sp, n, prefix, "ddp", d);
	snprintf(what, sizeof(what), "zero_%d %s %s x%d accum %d clip %s persist %d", stage,
		 sgd ? "sgd" : "adamw", model, n, accum, clip, persist);
	WT_REQUIRE(z[0].steps == 20 && d[0].steps == 20 && z[0].numel == d[0].numel);
	compare(&z[0], &d[0], 20, sgd, what);
	for (int r = 1; r < n; r++)
		WT_CHECK(!memcmp(z[r].weights, z[0].weights, (size_t)z[0].numel * sizeof(float)));
	if (atof(clip) > 0)
		for (int s = 0; s < 20; s++)
			WT_CLOSE(z[0].rep[s].grad_norm, d[0].rep[s].grad_norm, TOL, 0.0);
	{
		/* elements moved per rank: a reduce-scatter or all-gather of a unit
		 * (N chunks) moves (N-1) chunks from each rank */
		double psi = (double)z[0].numel, moved, theory;
		int64_t e = param_elems(&z[0], n);
		int mult = stage == 1 ? 2 : stage == 2 ? accum + 1 : 3 * accum;

		moved = (double)e * (n - 1) / n;
		/* the paper's count per step: stage 1 one reduce-scatter and one
		 * all-gather; stage 2 reduce-scatters every micro-batch; stage 3
		 * gathers twice and reduce-scatters once per micro-batch */
		theory = (double)mult * psi * (n - 1) / n;
		fprintf(stderr, "%s: step moves %.0f elements per rank; %d Psi (N-1)/N = %.0f\n",
			what, moved, mult, theory);
		for (int s = 1; s < 20; s++)
			WT_CHECK(param_elems(&z[0], n) == z[0].rep[s].comm_elements -
				 z[0].rep[s].metric_comm_bytes / 8);
		if (!strcmp(model, "mlp") || stage < 3 || !strcmp(model, "llama")) {
			/* weft plan predicts the collectives exactly (the tied
			 * head of the GPT under stage 3 excepted, below; the
			 * llama preset's head is untied) */
			weft_plan pl;

			plan_for(model, 2, 32, 64, zero_yaml(stage, persist), n, accum, &pl);
			WT_CHECK(pl.collective_elements == e);
			WT_CHECK(pl.moved_elements == e * (n - 1) / n);
		}
		if (!strcmp(model, "mlp") && !persist) {
			/* every unit moves exactly `mult` times: e / mult is the
			 * padded model, at most N - 1 elements per unit over Psi */
			WT_CHECK(e % mult == 0);
			WT_CHECK(e / mult >= z[0].numel && e / mult <= z[0].numel + 64 * n);
			WT_CHECK(moved >= theory && moved <= theory * 1.01);
		} else if (!strcmp(model, "gpt") && stage < 3) {
			WT_CHECK(e % mult == 0);
			WT_CHECK(e / mult >= z[0].numel && e / mult <= z[0].numel + 64 * n);
			WT_CHECK(moved >= theory && moved <= theory * 1.01);
		} else if (!strcmp(model, "gpt")) {
			/* the tied head gathers transformer.wte.weight (V x C =
			 * 64 x 32) once more in forward and once more in backward */
			double lower = 3.0 * accum * psi * (n - 1) / n;
			double extra = 2.0 * 64 * 32 * accum * (n - 1) / n;

			WT_CHECK(moved >= lower && moved <= (lower + extra) * 1.01);
		}
	}
	for (int r = 0; r < n; r++) {
		h_result_free(&z[r]);
		h_result_free(&d[r]);
	}
	return 0;
}

static int equiv(const char *self, int stage, const char *model, int n, int accum,
		 const char *clip, int persist)
{
	equiv_one(self, stage, model, n, accum, clip, 1, persist);
	equiv_one(self, stage, model, n, accum, clip, 0, persist);
	return wt_done("test_strategy_zero equiv");
}

/* Peak bytes of params + grads + optimizer state per rank against the
 * paper's formulas in their fp32-Adam form (4 bytes of parameter, 4 of
 * gradient, 8 of Adam state per element). */
static int memory(const char *self, int stage, int n)
{
	h_result got[H_MAX_RANKS];
	h_spawn_result sp;
	char prefix[128], ss[8];
	char *args[] = { "rank", "memory", ss, "gpt", "1", "0", "adamw", prefix, NULL };

	weft_plan pl;

	snprintf(prefix, sizeof(prefix), "zero-mem-%d-%d-%d", (int)getpid(), stage, n);
	snprintf(ss, sizeof(ss), "%d", stage);
	spawn(self, n, args, &sp);
	read_all(&sp, n, prefix, "mem", got);
	plan_for("gpt", 16, 16, 32, memory_yaml(stage), n, 1, &pl);
	for (int r = 0; r < n; r++) {
		const h_result *g = &got[r];
		double psi = (double)g->numel;
		double formula = stage == 1 ? 8 * psi + 8 * psi / n :
				 stage == 2 ? 4 * psi + 12 * psi / n : 16 * psi / n;
		double ws = (double)g->rep[g->steps - 1].working_set_bytes;
		double measured = (double)(g->mem_peak[WEFT_MEM_PARAMS] + g->mem_peak[WEFT_MEM_GRADS] +
					   g->mem_peak[WEFT_MEM_OPTIM]);
		double model_part = stage == 3 ? measured - ws : measured;

		fprintf(stderr, "zero_%d x%d rank %d: Psi %.0f; measured params %lld + grads %lld + "
			"optim %lld = %.0f bytes; formula %.0f bytes; %s%.0f bytes (%+.2f%%)\n",
			stage, n, r, psi, (long long)g->mem_peak[WEFT_MEM_PARAMS],
			(long long)g->mem_peak[WEFT_MEM_GRADS],
			(long long)g->mem_peak[WEFT_MEM_OPTIM], measured, formula,
			stage == 3 ? "without the working set " : "", model_part,
			100.0 * (model_part - formula) / formula);
		if (stage == 3)
			fprintf(stderr, "zero_3 x%d rank %d: gathered working set %.0f bytes "
				"(%.1f%% of the model's 4 Psi)\n", n, r, ws, 100.0 * ws / (4 * psi));
		WT_CHECK(fabs(model_part - formula) <= MEM_TOL * formula);
		{
			/* weft plan against the measurement: its resident part
			 * (plus, for stage 2, its bucket estimate, which the
			 * formula counts in) */
			double planned = (double)(pl.bytes[WEFT_MEM_PARAMS] + pl.bytes[WEFT_MEM_GRADS] +
						  pl.bytes[WEFT_MEM_OPTIM]) +
					 (stage == 2 ? (double)pl.working_grads : 0.0);

			fprintf(stderr, "zero_%d x%d rank %d: weft plan %.0f bytes (%+.2f%% of the "
				"measurement)\n", stage, n, r, planned,
				100.0 * (planned - model_part) / model_part);
			if (r == 0)
				WT_CHECK(fabs(planned - model_part) <= MEM_TOL * model_part);
		}
		if (stage == 3)
			WT_CHECK(ws > 0 && ws < 4 * psi);
		{
			/* setup's peak (model built as the build plan says,
			 * through the strategy's setup) within the plan's
			 * total, which counts it where it is the larger: the
			 * pre-launch check refuses what setup cannot hold.
			 * Both without the comm backend's buffers (planned
			 * exactly, 2-4 MB, most of these small totals) and the
			 * measurement without "other" (the contexts' and
			 * harness's bookkeeping, which the plan leaves out) */
			double backend = (double)pl.comm_backend_bytes;
			double total = (double)weft_plan_rank_total(&pl, NULL) - backend;
			double setup = (double)(g->setup_peak_total - g->setup_current[WEFT_MEM_OTHER]) -
				       backend;

			fprintf(stderr, "zero_%d x%d rank %d: setup peak %.0f bytes, weft plan's "
				"total %.0f bytes (its setup peak %lld) (%+.2f%%), comm backend "
				"apart\n", stage, n, r, setup, total, (long long)pl.setup_bytes,
				100.0 * (setup - total) / total);
			WT_CHECK(setup <= (1.0 + MEM_TOL) * total);
		}
		h_result_free(&got[r]);
	}
	return wt_done("test_strategy_zero memory");
}

/* zero_3 x4 saves at step 10; ddp x2 and zero_1 x3 resume and follow the
 * curve of the run that never stopped. */
static int reshard(const char *self)
{
	h_result whole[4], first[4], ddp[2], z1[3];
	h_spawn_result sp;
	char prefix[128], dir[160];

	snprintf(prefix, sizeof(prefix), "zero-reshard-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s-ckpt", prefix);
	WT_REQUIRE(mkdir(dir, 0755) == 0);
	{
		char *args[] = { "rank", "reshard", "0", "gpt", "4", "1", "adamw", prefix, NULL };

		spawn(self, 4, args, &sp);
		read_all(&sp, 4, prefix, "whole", whole);
		args[2] = "3";
		spawn(self, 4, args, &sp);
		read_all(&sp, 4, prefix, "first", first);
	}
	{
		char *args[] = { "rank", "reshard", "1", "gpt", "2", "1", "adamw", prefix, NULL };

		spawn(self, 2, args, &sp);
		read_all(&sp, 2, prefix, "ddp", ddp);
	}
	{
		char *args[] = { "rank", "reshard", "2", "gpt", "3", "1", "adamw", prefix, NULL };

		spawn(self, 3, args, &sp);
		read_all(&sp, 3, prefix, "zero1", z1);
	}
	for (int s = 0; s < 10; s++) {
		WT_CLOSE(first[0].loss[s], whole[0].loss[s], TOL, 0.0);
		WT_CLOSE(ddp[0].loss[s], whole[0].loss[10 + s], TOL, 0.0);
		WT_CLOSE(z1[0].loss[s], whole[0].loss[10 + s], TOL, 0.0);
	}
	fprintf(stderr, "reshard: step 11 loss: whole %.7f, ddp x2 %.7f, zero_1 x3 %.7f; step 20: "
		"%.7f %.7f %.7f; weights l2 rel ddp %.3g zero_1 %.3g\n", whole[0].loss[10],
		ddp[0].loss[0], z1[0].loss[0], whole[0].loss[19], ddp[0].loss[9], z1[0].loss[9],
		h_rel_l2(ddp[0].weights, whole[0].weights, whole[0].numel),
		h_rel_l2(z1[0].weights, whole[0].weights, whole[0].numel));
	WT_CHECK(h_rel_l2(ddp[0].weights, whole[0].weights, whole[0].numel) <= TOL);
	WT_CHECK(h_rel_l2(z1[0].weights, whole[0].weights, whole[0].numel) <= TOL);
	for (int r = 0; r < 4; r++) {
		h_result_free(&whole[r]);
		h_result_free(&first[r]);
	}
	for (int r = 0; r < 2; r++)
		h_result_free(&ddp[r]);
	for (int r = 0; r < 3; r++)
		h_result_free(&z1[r]);
	{
		char path[256];

		snprintf(path, sizeof(path), "%s/model.safetensors", dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
		unlink(path);
		rmdir(dir);
	}
	return wt_done("test_strategy_zero reshard");
}

/* One option error: h_run fails at create with the message. */
static void option_error(const char *strategy, const char *section, const char *want1,
			 const char *want2)
{
	h_config c = base_config(H_MODEL_TOY, 1);
	h_result r;

	c.steps = 1;
	c.strategy = strategy;
	c.strategy_yaml = section;
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, want1, want2);
	h_result_free(&r);
}

/* offload_optimizer: {device: cpu} on accelerator: cpu changes nothing:
 * the same losses and weights bit for bit (tolerance 0: the same code
 * runs), and one info line says so. */
static void offload_cpu_noop(void)
{
	char logp[] = "/tmp/weft_zero_offload_log_XXXXXX", text[4096] = "";
	h_config c = base_config(H_MODEL_TOY, 1);
	h_result a, b;
	int fd = mkstemp(logp), saved = dup(2);
	FILE *f;

	WT_REQUIRE(fd >= 0 && saved >= 0);
	c.steps = 3;
	c.strategy = "zero";
	c.strategy_yaml = "{name: zero, zero_optimization: {stage: 2}}";
	WT_OK(h_run(&c, &a));
	c.strategy_yaml = "{name: zero, zero_optimization: {stage: 2, "
			  "offload_optimizer: {device: cpu, pin_memory: true}}}";
	weft_log_set_level(WEFT_LOG_INFO);
	fflush(stderr);
	dup2(fd, 2);
	WT_OK(h_run(&c, &b));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	weft_log_set_level(WEFT_LOG_WARN);
	WT_CHECK(a.steps == 3 && b.steps == 3 && a.numel == b.numel);
	for (int s = 0; s < a.steps && s < b.steps; s++)
		WT_CHECK(a.loss[s] == b.loss[s]);
	WT_CHECK(a.numel == b.numel &&
		 !memcmp(a.weights, b.weights, (size_t)a.numel * sizeof(float)));
	f = fopen(logp, "r");
	WT_REQUIRE(f != NULL);
	text[fread(text, 1, sizeof(text) - 1, f)] = 0;
	fclose(f);
	unlink(logp);
	WT_CHECK(strstr(text, "offload_optimizer {device: cpu} changes nothing on "
			      "accelerator: cpu") != NULL);
	h_result_free(&a);
	h_result_free(&b);
}

static int errors(void)
{
	option_error("zero", "{name: zero, stage: 4}", "stage must be 1, 2 or 3", "1:");
	option_error("zero_2", "{name: zero_2, stage: 3}", "contradicts the strategy name",
		     "name: zero with stage: 3");
	option_error("zero", "{name: zero, reduce_bucket_size: 2.5}", "whole number of elements",
		     "DeepSpeed counts elements");
	option_error("zero", "{name: zero, stage: 2, zero_optimization: {stage: 2}}",
		     "also set at", "either in the strategy mapping or in zero_optimization");
	option_error("zero", "{name: zero, zero_optimization: {offload_optimizer: {device: nvme}}}",
		     "offload_optimizer must be {device: cpu}", "got device nvme");
	option_error("zero", "{name: zero, zero_optimization: {offload_param: {device: cpu}}}",
		     "offload_param is not supported", "offload_optimizer: {device: cpu}");
	option_error("zero", "{name: zero, zero_optimization: [1, 2]}",
		     "zero_optimization must be a mapping", "{stage: 2");
	{
		/* what the env cannot serve: an optimizer without a device
		 * kernel on a GPU, several ranks without a communicator */
		h_config c = base_config(H_MODEL_TOY, 1);
		h_result r;

		c.steps = 1;
		c.strategy = "zero_3";
		c.env_cuda = 1;
		c.lion = 1;
		WT_FAILS(h_run(&c, &r), WEFT_ERR_UNSUPPORTED, "optimizer 'lion' has no device kernel",
			 "use optimizer adam, adamw or sgd, or accelerator: cpu");
		h_result_free(&r);
		c.lion = 0;
		c.env_cuda = 0;
		c.env_world_size = 2;
		WT_FAILS(h_run(&c, &r), WEFT_ERR_UNSUPPORTED, "world size is 2", "set trainer.comm");
		h_result_free(&r);
	}
	{
		/* a DeepSpeed block as DeepSpeed writes it runs as it is, alone */
		h_config c = base_config(H_MODEL_TOY, 1);
		h_result r;

		c.steps = 2;
		c.strategy = "zero";
		c.strategy_yaml = "{name: zero, zero_optimization: {stage: 3, overlap_comm: true, "
				  "contiguous_gradients: true, reduce_bucket_size: 5e8, "
				  "stage3_prefetch_bucket_size: 5e7, "
				  "stage3_param_persistence_threshold: 1e5, "
				  "stage3_max_live_parameters: 1e9, sub_group_size: 1e9, "
				  "stage3_gather_16bit_weights_on_model_save: true, "
				  "offload_optimizer: {device: none}}}";
		WT_OK(h_run(&c, &r));
		WT_CHECK(r.steps == 2);
		h_result_free(&r);
	}
	offload_cpu_noop();
	return wt_done("test_strategy_zero errors");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "rank"))
		return rank_main(argc, argv);
	if (argc >= 7 && !strcmp(argv[1], "equiv"))
		return equiv(argv[0], atoi(argv[2]), argv[3], atoi(argv[4]), atoi(argv[5]), argv[6],
			     argc > 7 ? atoi(argv[7]) : 0);
	if (argc >= 4 && !strcmp(argv[1], "memory"))
		return memory(argv[0], atoi(argv[2]), atoi(argv[3]));
	if (argc >= 2 && !strcmp(argv[1], "reshard"))
		return reshard(argv[0]);
	if (argc >= 2 && !strcmp(argv[1], "errors"))
		return errors();
	fprintf(stderr, "usage: test_strategy_zero equiv STAGE MODEL N ACCUM CLIP [PERSIST] | "
		"memory STAGE N | reshard | errors\n");
	return 2;
}
