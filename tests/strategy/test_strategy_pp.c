/* pp (pipeline parallelism) against the one-process run of the same
 * global batch, on real ranks over gloo.
 *
 *   test_strategy_pp equiv P SCHEDULE V   P pipeline ranks, schedule gpipe |
 *       1f1b | interleaved_1f1b with V virtual stages, against strategy
 *       single: every step's loss, every final weight (gathered through
 *       gather_params), with SGD and with AdamW, PP_STEPS (6) steps, 8
 *       micro-batches.
 *   test_strategy_pp memory P             activation peaks (allocator
 *       accounting, steady state) of GPipe and 1F1B with P ranks, m = 8:
 *       micro-batches held at once per rank, from runs holding 1 and 2.
 *   test_strategy_pp errors               config errors naming the numbers
 *       (with hybrid's tp: n_head not divisible, a model not built from
 *       the plan, stages of a sequence-parallel GPT).
 *   test_strategy_pp tp DP TP PP          strategy hybrid with tensor
 *       parallelism inside the stages (dp x tp x pp ranks, 1F1B, Megatron's
 *       order; SGD with dp_strategy ddp, AdamW with zero_1): every step's
 *       loss and gradient norm (SGD run clipped), and
 *       each rank's weight shards against the same shards of the
 *       one-process run's final weights; a tiny 4-block GPT (n_embd 32, 2
 *       heads, T 8, vocab 32) so 8 processes fit on 2 cores.
 * The bubble is measured through weft fit --trace: test_strategy_pp_bubble.sh.
 *
 * Model: the harness GPT with 8 blocks (so 8 stages for p = 4, v = 2),
 * n_embd 32, 2 heads, vocab 64, T 16, no dropout; 2 rows per micro-batch.
 *
 * Tolerances, as test_strategy_ddp.c argues them: the pipeline sums each
 * parameter's gradient over micro-batches in the same order as the
 * reference, but the tied embedding's two halves (embedding and head)
 * are summed once at the end instead of per micro-batch, and the loss is
 * reduced in double: a few float32 ulps per step.
 * - loss of every step within 1e-5 relative;
 * - SGD: every weight within 1e-5 relative to max(|w|, 1e-2);
 * - AdamW: the weight vector within 1e-4 in relative L2 (Adam's first
 *   update is lr * sign(g): an element whose gradient is zero up to
 *   rounding can flip; see test_strategy_ddp.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tp/tp.h"
#include "weft_test.h"

#define TOL 1e-5
#define WEIGHT_FLOOR 1e-2
#define TP_CLIP 0.05
/* Steps of the equiv, hybrid and tp runs: a schedule that drops, repeats
 * or misroutes a micro-batch's message, or a dp average left out, moves
 * the loss of step 2 and every weight after step 1 by far more than the
 * tolerances; 6 steps also let AdamW's second moments leave their first
 * update's sign-like regime. (20 before: under ASan the 4- and 8-rank
 * cases were the suite's longest tests.) */
#define PP_STEPS 6

static char yaml[256];

static h_config pp_config(int micro, int sgd)
{
	return (h_config){
		.strategy = "single",
		.model = H_MODEL_GPT,
		.batch = 2,
		.n_micro = micro,
		.steps = PP_STEPS,
		.seed = 1234,
		.lr = 1e-3,
		.sgd = sgd,
		.gpt_n_layer = 8,
		.toy_unused_rank = -1,
		.data_ranks = 1,
	};
}

/* The hybrid-with-tp runs' model: small enough that 8 processes share 2
 * cores (PP_STEPS steps of 8 micro-batches in a few seconds). SGD runs clip
 * at a norm every step exceeds (checked), so the norm is compared. */
static h_config tp_config(int sgd)
{
	h_config c = pp_config(8, sgd);

	c.gpt_n_layer = 4;
	c.gpt_n_embd = 32;
	c.gpt_n_head = 2;
	c.gpt_block = 8;
	c.gpt_vocab = 32;
	c.clip = sgd ? TP_CLIP : 0.0;
	return c;
}

/* A rank: argv = self rank MODE ... PREFIX */
static int rank_main(int argc, char **argv)
{
	h_config c;

	if (argc < 5)
		return 2;
	if (!strcmp(argv[2], "equiv")) {
		/* equiv SCHED V SGD MICRO PREFIX */
		c = pp_config(atoi(argv[6]), atoi(argv[5]));
		snprintf(yaml, sizeof(yaml), "{name: pp, schedule: %s, virtual_stages: %s}", argv[3],
			 argv[4]);
	} else if (!strcmp(argv[2], "hybrid")) {
		/* hybrid DP PP SCHED DP_STRATEGY SGD PREFIX: rank r is dp r % DP */
		c = pp_config(8, atoi(argv[7]));
		c.data_ranks = atoi(argv[3]);
		c.data_stride = 1;
		snprintf(yaml, sizeof(yaml), "{name: hybrid, dp: %s, tp: 1, pp: %s, schedule: %s, "
			 "dp_strategy: %s, virtual_stages: %d}", argv[3], argv[4], argv[5], argv[6],
			 strcmp(argv[5], "interleaved_1f1b") ? 1 : 2);
		c.strategy = "hybrid";
		c.strategy_yaml = yaml;
	} else if (!strcmp(argv[2], "tp")) {
		/* tp DP TP PP SGD PREFIX: rank r is dp (r / TP) % DP; SGD runs under
		 * dp_strategy ddp, AdamW under zero_1 */
		c = tp_config(atoi(argv[6]));
		c.data_ranks = atoi(argv[3]);
		c.data_stride = atoi(argv[4]);
		c.gpt_tp = atoi(argv[4]);
		snprintf(yaml, sizeof(yaml), "{name: hybrid, dp: %s, tp: %s, pp: %s, schedule: 1f1b, "
			 "dp_strategy: %s}", argv[3], argv[4], argv[5],
			 atoi(argv[6]) ? "ddp" : "zero_1");
		c.strategy = "hybrid";
		c.strategy_yaml = yaml;
	} else if (!strcmp(argv[2], "memory")) {
		/* memory SCHED MICRO PREFIX: steady-state peaks (steps 3-4) */
		c = pp_config(atoi(argv[4]), 1);
		c.gpt_n_layer = 4;
		c.steps = 4;
		c.mem_peaks_after = 2;
		snprintf(yaml, sizeof(yaml), "{name: pp, schedule: %s}", argv[3]);
	} else {
		return 2;
	}
	if (strcmp(argv[2], "hybrid") && strcmp(argv[2], "tp")) {
		c.strategy = "pp";
		c.strategy_yaml = yaml;
	}
	return h_rank_write(&c, argv[argc - 1]);
}

/* Every rank's losses and gathered weights against the reference. */
static void compare(const h_result *ref, h_result *got, int n, int sgd)
{
	for (int r = 0; r < n; r++) {
		char who[32];
		double w;

		WT_REQUIRE(got[r].steps == ref->steps && got[r].numel == ref->numel);
		for (int s = 0; s < ref->steps; s++)
			WT_CLOSE(got[r].loss[s], ref->loss[s], TOL, 0);
		snprintf(who, sizeof(who), "rank %d", r);
		w = h_weight_error(got[r].weights, ref->weights, ref->numel, sgd, WEIGHT_FLOOR,
				   sgd ? TOL : 1e-4, who);
		WT_CHECK(w <= (sgd ? TOL : 1e-4));
		/* gathered weights are the same on every rank */
		WT_CHECK(!memcmp(got[r].weights, got[0].weights, (size_t)ref->numel * 4));
		/* the pipeline moved messages every step */
		WT_CHECK(got[r].rep[0].comm_bytes > 0);
	}
}

static void equiv_one(const char *self, int p, const char *sched, int v, int sgd)
{
	h_config c = pp_config(8, sgd);
	h_result ref, got[H_MAX_RANKS];
	int ran;
	char prefix[128], vs[8], sg[8], ms[8];
	char *args[] = { "equiv", (char *)sched, vs, sg, ms, prefix, NULL };

	WT_OK(h_run(&c, &ref));
	snprintf(prefix, sizeof(prefix), "pp-%d", (int)getpid());
	snprintf(vs, sizeof(vs), "%d", v);
	snprintf(sg, sizeof(sg), "%d", sgd);
	snprintf(ms, sizeof(ms), "%d", c.n_micro);
	ran = h_run_ranks(self, p, args, H_JOB_DEADLINE_S, got);
	WT_CHECK(ran);
	if (!ran)
		return;
	compare(&ref, got, p, sgd);
	fprintf(stderr, "pp %d %s v=%d %s: step-%d loss %.6f (ref %.6f), %d ranks agree\n", p,
		sched, v, sgd ? "sgd" : "adamw", ref.steps, got[0].loss[ref.steps - 1],
		ref.loss[ref.steps - 1], p);
	for (int r = 0; r < p; r++)
		h_result_free(&got[r]);
	h_result_free(&ref);
}

/* strategy hybrid, dp x pp (tp 1) on dp * pp ranks, against one process
 * with dp times the rows per micro-batch. Same tolerances as equiv_one:
 * the dp average adds one more float32 rounding per gradient element
 * (sum of dp values, then the division), as in test_strategy_ddp.c. */
static void equiv_hybrid(const char *self, int dp, int pp, const char *sched,
			 const char *dp_strategy, int sgd)
{
	h_config c = pp_config(8, sgd);
	h_result ref, got[H_MAX_RANKS];
	int ran;
	char prefix[128], ds[8], ps[8], sg[8];
	char *args[] = { "hybrid", ds, ps, (char *)sched, (char *)dp_strategy, sg, prefix, NULL };

	c.batch *= dp;
	WT_OK(h_run(&c, &ref));
	snprintf(prefix, sizeof(prefix), "pph-%d", (int)getpid());
	snprintf(ds, sizeof(ds), "%d", dp);
	snprintf(ps, sizeof(ps), "%d", pp);
	snprintf(sg, sizeof(sg), "%d", sgd);
	ran = h_run_ranks(self, dp * pp, args, H_JOB_DEADLINE_S, got);
	WT_CHECK(ran);
	if (!ran)
		return;
	compare(&ref, got, dp * pp, sgd);
	fprintf(stderr, "hybrid dp %d x pp %d %s %s %s: step-%d loss %.6f (ref %.6f), %d ranks "
		"agree\n", dp, pp, sched, dp_strategy, sgd ? "sgd" : "adamw", ref.steps,
		got[0].loss[ref.steps - 1], ref.loss[ref.steps - 1], dp * pp);
	for (int r = 0; r < dp * pp; r++)
		h_result_free(&got[r]);
	h_result_free(&ref);
}

/* The one-process run's final weights as tp rank t of T holds them: the
 * same shard of every split parameter (core/tp's split of the harness
 * GPT, built here with tp_size T), replicated ones whole, in the shard
 * model's flat order. *numel: its length. NULL when out of memory. */
static float *ref_shard(const h_config *c, const h_result *ref, int T, int t, int64_t *numel)
{
	weft_gpt_config gc = {
		.n_layer = c->gpt_n_layer, .n_head = c->gpt_n_head, .n_embd = c->gpt_n_embd,
		.vocab_size = c->gpt_vocab, .block_size = c->gpt_block, .bias = 1,
	};
	weft_model_options wo = { .seed = c->seed }, so = { .seed = c->seed, .tp_size = T,
							     .tp_rank = t };
	weft_model *whole = NULL, *part = NULL;
	weft_tensor *wf, *sf;
	weft_tp_group *g;
	float *out = NULL;

	WT_OK(weft_model_create_gpt(&gc, &wo, &whole));
	WT_OK(weft_model_create_gpt(&gc, &so, &part));
	if (!whole || !part)
		goto out_free;
	weft_params_flat(weft_model_params(whole), WEFT_F32, &wf, NULL);
	weft_params_flat(weft_model_params(part), WEFT_F32, &sf, NULL);
	g = weft_tp_group_find(weft_model_params(part));
	WT_REQUIRE(g && weft_tensor_numel(wf) == ref->numel);
	*numel = weft_tensor_numel(sf);
	out = malloc((size_t)*numel * sizeof(float));
	if (!out)
		goto out_free;
	for (size_t i = 0; i < weft_params_count(weft_model_params(part)); i++) {
		weft_tensor *p = weft_params_at(weft_model_params(part), i);
		weft_tensor *q = weft_params_at(weft_model_params(whole), i);
		int64_t full[2], so_off = (float *)p->data - (float *)sf->data;
		int64_t wo_off = (float *)q->data - (float *)wf->data;
		weft_tp_split sp = weft_tp_group_split(g, i, NULL, full);

		WT_CHECK(!strcmp(p->name, q->name));
		if (sp == WEFT_TP_REPLICATE)
			memcpy(out + so_off, ref->weights + wo_off, weft_tensor_nbytes(p));
		else
			weft_tp_take_shard(sp, full, T, t, ref->weights + wo_off, out + so_off);
	}
out_free:
	weft_model_free(part);
	weft_model_free(whole);
	return out;
}

/* strategy hybrid dp x tp x pp on dp * tp * pp ranks (rank = (pp * dp +
 * dp_idx) * tp + tp_idx), 1F1B, against one process with dp times the
 * rows. Tolerances as equiv_hybrid's: a tp shard's forward sums the
 * row-parallel partial products over the tp group (all-reduce) where one
 * process sums them in one matmul, a few float32 ulps per step more, well
 * inside 1e-5 relative over PP_STEPS steps (measured: see the printed error).
 * The SGD run clips every step (norm > TP_CLIP, asserted), so its norm is
 * the whole model's: split shards' squares summed over tp, replicated
 * ones once (double counting them moves it by tens of percent). */
static void equiv_tp(const char *self, int dp, int tp, int pp, int sgd)
{
	h_config c = tp_config(sgd);
	h_result ref, got[H_MAX_RANKS];
	int ran;
	char prefix[128], ds[8], ts[8], ps[8], sg[8];
	char *args[] = { "tp", ds, ts, ps, sg, prefix, NULL };
	int n = dp * tp * pp;
	double worst = 0.0;

	c.batch *= dp;
	WT_OK(h_run(&c, &ref));
	snprintf(prefix, sizeof(prefix), "pptp-%d", (int)getpid());
	snprintf(ds, sizeof(ds), "%d", dp);
	snprintf(ts, sizeof(ts), "%d", tp);
	snprintf(ps, sizeof(ps), "%d", pp);
	snprintf(sg, sizeof(sg), "%d", sgd);
	ran = h_run_ranks(self, n, args, H_JOB_DEADLINE_S, got);
	WT_CHECK(ran);
	if (!ran)
		return;
	for (int t = 0; t < tp; t++) {
		int64_t numel = 0;
		float *want = ref_shard(&c, &ref, tp, t, &numel);

		WT_REQUIRE(want);
		for (int r = t; r < n; r += tp) {
			char who[32];
			double w;

			WT_REQUIRE(got[r].steps == ref.steps && got[r].numel == numel);
			for (int s = 0; s < ref.steps; s++) {
				WT_CLOSE(got[r].loss[s], ref.loss[s], TOL, 0);
				if (sgd) {
					WT_CHECK(ref.rep[s].grad_norm > TP_CLIP);
					WT_CLOSE(got[r].rep[s].grad_norm, ref.rep[s].grad_norm, TOL,
						 0);
				}
			}
			snprintf(who, sizeof(who), "rank %d (tp %d)", r, t);
			w = h_weight_error(got[r].weights, want, numel, sgd, WEIGHT_FLOOR,
					   sgd ? TOL : 1e-4, who);
			WT_CHECK(w <= (sgd ? TOL : 1e-4));
			if (w > worst)
				worst = w;
			/* the dp replicas and the pipeline's ranks end with the same shards */
			WT_CHECK(!memcmp(got[r].weights, got[t].weights, (size_t)numel * 4));
			WT_CHECK(got[r].rep[0].comm_bytes > 0);
		}
		free(want);
	}
	fprintf(stderr, "hybrid dp %d x tp %d x pp %d 1f1b %s: step-%d loss %.6f (ref %.6f), grad "
		"norm %.4f (ref %.4f), worst weight error %.3g (%s), %d ranks\n", dp, tp, pp,
		sgd ? "sgd+clip, ddp" : "adamw, zero_1", ref.steps, got[0].loss[ref.steps - 1],
		ref.loss[ref.steps - 1],
		got[0].rep[ref.steps - 1].grad_norm, ref.rep[ref.steps - 1].grad_norm, worst,
		sgd ? "max rel" : "rel L2", n);
	for (int r = 0; r < n; r++)
		h_result_free(&got[r]);
	h_result_free(&ref);
}

/* Each rank's WEFT_MEM_ACTIVATIONS peak in a p-rank run of `sched` with m
 * micro-batches. */
static int act_peaks(const char *self, int p, const char *sched, int m, int64_t *peak)
{
	h_result got[H_MAX_RANKS];
	int ran;
	char prefix[128], ms[8];
	char *args[] = { "memory", (char *)sched, ms, prefix, NULL };

	snprintf(prefix, sizeof(prefix), "ppm-%d", (int)getpid());
	snprintf(ms, sizeof(ms), "%d", m);
	ran = h_run_ranks(self, p, args, H_JOB_DEADLINE_S, got);
	WT_CHECK(ran);
	if (!ran)
		return 0;
	for (int r = 0; r < p; r++) {
		peak[r] = got[r].mem_peak[WEFT_MEM_ACTIVATIONS];
		h_result_free(&got[r]);
	}
	return 1;
}

/* Activations held at once, from the allocator's accounting: every
 * micro-batch in flight holds one context whose arena (steady after the
 * first steps: one block of its high water) is the same size on a given
 * rank, so a rank's activation peak is base + k * one. Runs with m = 1 and
 * m = 2 (GPipe: 1 and 2 in flight) give base and one per rank; then
 * k = (peak - base) / one must be what the schedule holds: GPipe all m =
 * 8, 1F1B p - r (at most p) on rank r. Tolerance 0.25 of one micro-batch:
 * the arenas' block rounding (high water + 1/8 + 4 KiB) is the same for
 * every context of a rank, so k comes out within a few percent of a whole
 * number; a schedule holding one micro-batch more or less misses it by 1. */
static void test_memory(const char *self, int p)
{
	const int m = 8;
	int64_t one_in[H_MAX_RANKS], two_in[H_MAX_RANKS], gp[H_MAX_RANKS], of[H_MAX_RANKS];

	if (!act_peaks(self, p, "gpipe", 1, one_in) || !act_peaks(self, p, "gpipe", 2, two_in) ||
	    !act_peaks(self, p, "gpipe", m, gp) || !act_peaks(self, p, "1f1b", m, of))
		return;
	for (int r = 0; r < p; r++) {
		double one = (double)(two_in[r] - one_in[r]), base = (double)one_in[r] - one;
		double k_gp = ((double)gp[r] - base) / one, k_of = ((double)of[r] - base) / one;
		int want_of = p - r < m ? p - r : m;

		fprintf(stderr, "p=%d rank %d: one micro-batch %.0f KiB (base %.0f KiB); in flight "
			"gpipe %.3f (want %d), 1f1b %.3f (want %d, at most p = %d)\n", p, r,
			one / 1024, base / 1024, k_gp, m, k_of, want_of, p);
		WT_CHECK(one > 0);
		WT_CLOSE(k_gp, m, 0, 0.25);
		WT_CLOSE(k_of, want_of, 0, 0.25);
		WT_CHECK(k_of <= p + 0.25);
	}
}

static void test_errors(void)
{
	h_config c = pp_config(8, 1);
	h_result r;

	c.strategy = "pp";
	c.steps = 1;
	c.strategy_yaml = "{name: pp, partition: [3, 3]}";
	c.gpt_n_layer = 8;
	/* one process: pp 1, one stage */
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "lists 2 stages holding 6 blocks",
		 "the model 8 blocks", "give 1 counts that sum to 8");
	h_result_free(&r);
	c.strategy_yaml = "{name: pp, pp: 2}";
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "pp is 2 but the world has 1 ranks",
		 "pp x tp x dp = 2 x 1 x 1 = 2 != 1");
	h_result_free(&r);
	c.strategy = "hybrid";
	c.strategy_yaml = "{name: hybrid, dp: 2, tp: 1, pp: 2}";
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "strategy hybrid: pp x tp x dp = 2 x 1 x 2 = 4 != 1",
		 "pick sizes whose product is 1");
	h_result_free(&r);
	c.strategy_yaml = "{name: hybrid, dp: 1, tp: 1, pp: 1, dp_strategy: zero_3}";
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "zero_3", "ddp", "zero_1");
	h_result_free(&r);
	c.strategy = "pp";
	c.strategy_yaml = "{name: pp, schedule: 1f1b, virtual_stages: 2}";
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "virtual_stages", "is 2 but schedule 1f1b");
	h_result_free(&r);
	c.strategy_yaml = "{name: pp, schedule: interleaved_1f1b, virtual_stages: 2}";
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "needs at least 2 pipeline ranks, got pp = 1");
	h_result_free(&r);
	c.strategy_yaml = "{name: pp, partition: [0]}";
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "stage 0 gets 0 blocks");
	h_result_free(&r);
	/* hybrid tp 2 with n_head 3 (n_embd 30 divides): the model's check;
	 * a model built whole (not from hybrid's plan) under tp 2. Both fail
	 * before any communication, so one process claims a world of 2. */
	c = tp_config(1);
	c.strategy = "hybrid";
	c.strategy_yaml = "{name: hybrid, dp: 1, tp: 2, pp: 1}";
	c.steps = 1;
	c.env_world_size = 2;
	c.gpt_n_head = 3;
	c.gpt_n_embd = 30;
	c.gpt_tp = 2;
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "n_head 3 is not divisible by the tensor-parallel "
		 "size 2", "tp under strategy hybrid", "divides 3");
	h_result_free(&r);
	c.gpt_n_head = 2;
	c.gpt_n_embd = 32;
	c.gpt_tp = 0;
	WT_FAILS(h_run(&c, &r), WEFT_ERR_CONFIG, "strategy 'hybrid': tp 2 puts world rank 0 at tp "
		 "rank 0, but the model was built as tp rank 0 of 1", "tp_size 2, tp_rank 0");
	h_result_free(&r);
	c = pp_config(8, 1);
	c.strategy = "pp";
	c.steps = 2;
	/* a stage of a sequence-parallel tp GPT would send split sequences */
	{
		weft_gpt_config gc = { .n_layer = 2, .n_head = 2, .n_embd = 16, .vocab_size = 32,
				       .block_size = 8, .bias = 1 };
		weft_model_options mo = { .seed = 1, .tp_size = 2, .tp_rank = 0,
					  .tp_flags = WEFT_TP_SEQUENCE_PARALLEL,
					  .stage = WEFT_STAGE_BLOCKS, .layer_begin = 0,
					  .layer_end = 1 };
		weft_model *m = NULL;

		WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_INVALID_ARG,
			 "pipeline stages of a tensor-parallel GPT (tp 2) exchange whole sequences",
			 "without sequence parallelism");
		weft_model_free(m);
	}
	/* one process, one stage: the pipeline degenerates to the model */
	c.strategy_yaml = "{name: pp, partition: parameters}";
	c.steps = 2;
	WT_OK(h_run(&c, &r));
	h_result_free(&r);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "rank"))
		return rank_main(argc, argv);
	if (argc > 4 && !strcmp(argv[1], "equiv")) {
		equiv_one(argv[0], atoi(argv[2]), argv[3], atoi(argv[4]), 1);
		equiv_one(argv[0], atoi(argv[2]), argv[3], atoi(argv[4]), 0);
	} else if (argc > 5 && !strcmp(argv[1], "hybrid")) {
		equiv_hybrid(argv[0], atoi(argv[2]), atoi(argv[3]), argv[4], argv[5], 1);
		equiv_hybrid(argv[0], atoi(argv[2]), atoi(argv[3]), argv[4], argv[5], 0);
	} else if (argc > 4 && !strcmp(argv[1], "tp")) {
		equiv_tp(argv[0], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), 1);
		equiv_tp(argv[0], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), 0);
	} else if (argc > 2 && !strcmp(argv[1], "memory")) {
		test_memory(argv[0], atoi(argv[2]));
	} else if (argc > 1 && !strcmp(argv[1], "errors")) {
		test_errors();
	} else {
		fprintf(stderr, "usage: %s equiv P SCHEDULE V | hybrid DP PP SCHEDULE DP_STRATEGY | "
			"memory P | errors | tp DP TP PP\n", argv[0]);
		return 2;
	}
	return wt_done("test_strategy_pp");
}
