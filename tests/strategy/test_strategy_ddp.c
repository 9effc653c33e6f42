/* ddp against the one-process run of the same global batch, on real ranks
 * over gloo.
 *
 *   test_strategy_ddp equiv MODEL NRANKS ACCUM [HOOK | dropout]
 *       N ranks of ddp with B rows each against strategy single with B * N
 *       rows: every step's loss and every final weight, the bytes each step
 *       all-reduced (4 x parameters), and all ranks' weights bit-identical.
 *   test_strategy_ddp unused NRANKS       a parameter with no gradient
 *
 * Tolerances. Each equivalence runs twice, with SGD (momentum 0.9) and with
 * AdamW (lr 1e-3, eps 1e-8), 6 steps each (20 before: the 31 ddp and dp
 * tests took 27 s of CPU under ASan, 12 s with 6; a missing,
 * stale or misrouted bucket or a wrong average moves the loss of step 2
 * and every weight after step 1 by far more than the tolerances, and 6
 * steps let AdamW's second moments leave their first update's sign-like
 * regime, as in test_strategy_pp.c):
 * - loss of every step within 1e-5 relative (both optimizers);
 * - SGD: every weight within 1e-5 of the reference, relative to
 *   max(|w|, 1e-2) (weights start near 0.02; biases start at 0, where a
 *   relative measure means nothing, hence the floor). ddp sums each
 *   gradient in another order (per-rank partial sums, then the
 *   all-reduce), a few float32 ulps (~1e-7) per step; SGD is linear in the
 *   gradient, so that is all it sees (measured worst: ~2e-7);
 * - AdamW: the whole weight vector within 1e-4 in relative L2 norm. Adam
 *   divides by sqrt(v): its first update is lr * sign(g), so a gradient
 *   element that is zero up to rounding (cancelling terms) gets +-lr in
 *   one run and possibly -+lr in the other; single elements can then differ
 *   by ~1e-4 absolute (measured: ~1e-6..2e-5 relative L2), whatever the
 *   strategy. A bug (a missing or stale bucket, a wrong average) moves
 *   the loss by 1e-3 or more and fails the loss check at once.
 * The 16-bit comm hooks round every gradient to 8 (bf16) or 11 (fp16)
 * bits: their loss is held to 2e-2 relative and their weights to 5e-2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "weft_test.h"

#define TOL 1e-5
#define WEIGHT_FLOOR 1e-2

static h_model_kind parse_model(const char *s)
{
	if (!strcmp(s, "gpt") || !strcmp(s, "llama"))
		return H_MODEL_GPT;
	if (!strcmp(s, "mlp"))
		return H_MODEL_MLP;
	return H_MODEL_TOY;
}

static h_config base_config(h_model_kind model, int accum)
{
	return (h_config){
		.strategy = "ddp",
		.model = model,
		.batch = model == H_MODEL_GPT ? 2 : 4,
		.n_micro = accum,
		.steps = 6,
		.seed = 1234,
		.lr = 1e-3,
		.toy_unused_rank = -1,
		/* the toy model also runs with gradient clipping, which must see
		 * the global (all-reduced) norm; 0.05 is below its gradient norm
		 * in every step, so every step clips */
		.clip = model == H_MODEL_TOY ? 0.05 : 0.0,
	};
}

/* base_config of the model named on the command line: "llama" is the
 * llama3-tiny preset (RMSNorm, RoPE with Llama 3 scaling, SwiGLU, 4 heads
 * on 2 KV heads, untied head) at width 64. */
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

static char yaml[256];

/* The ddp section for a test: small buckets so that even tiny models have
 * several (and the first-bucket rule is exercised). */
static const char *ddp_yaml(const char *hook)
{
	snprintf(yaml, sizeof(yaml), "{name: ddp, bucket_cap_mb: 0.01, first_bucket_mb: 0.002, "
		 "comm_hook: %s}", hook ? hook : "none");
	return yaml;
}

/* A rank: runs the config the arguments describe and writes its result. */
static int rank_main(int argc, char **argv)
{
	h_config c;
	h_result r;
	char path[512];
	weft_status st;

	if (argc < 7)
		return 2;
	c = config_for(argv[3], atoi(argv[5]));
	if (!strcmp(argv[2], "uneven")) {
		c.uneven_rank = 1;
		c.strategy_yaml = "{name: ddp}";
		c.steps = 1;
	} else if (!strcmp(argv[2], "unused")) {
		c.toy_unused = 1;
		c.toy_unused_rank = atoi(argv[5]);
		c.strategy_yaml = argc > 7 && !strcmp(argv[7], "find") ?
				  "{name: ddp, find_unused_parameters: true}" : "{name: ddp}";
		c.n_micro = 1;
		c.steps = 3;
	} else {
		if (argc > 7 && !strcmp(argv[7], "dropout"))
			c.dropout = 0.1;
		c.strategy_yaml = ddp_yaml(c.dropout > 0 ? NULL : argc > 7 ? argv[7] : NULL);
		c.sgd = argc > 8 && !strcmp(argv[8], "sgd");
	}
	st = h_run(&c, &r);
	if (st) {
		fprintf(stderr, "rank failed: %s: %s\n", weft_status_str(st), weft_error_last());
		return 3;
	}
	snprintf(path, sizeof(path), "%s-rank%d.bin", argv[6], r.rank);
	if (h_result_write(&r, path)) {
		fprintf(stderr, "cannot write %s\n", path);
		return 1;
	}
	h_result_free(&r);
	return 0;
}

static void spawn_ranks(const char *self, int n, char **args, h_spawn_result *sp)
{
	char *argv[12];
	int k = 0;

	argv[k++] = (char *)self;
	for (; args[k - 1] && k < 11; k++)
		argv[k] = args[k - 1];
	argv[k] = NULL;
	WT_REQUIRE(h_spawn(n, argv, 90, sp) == 0);
	WT_CHECK(!sp->hung);
}

static int equiv_one(const char *self, const char *model, int n, int accum, const char *hook,
		     int sgd)
{
	h_config c = config_for(model, accum);
	h_result ref, got[H_MAX_RANKS];
	h_spawn_result sp;
	char prefix[128], ns[8], as[8];
	int half = hook && strcmp(hook, "none") && strcmp(hook, "dropout");
	double loss_tol = half ? 2e-2 : TOL;

	/* the reference: one process, the whole global batch */
	c.strategy = "single";
	c.batch *= n;
	c.sgd = sgd;
	/* "dropout": no hook, GPT dropout 0.1; each rank must draw the masks
	 * the one-process run draws for its rows (row_offset) */
	if (hook && !strcmp(hook, "dropout"))
		c.dropout = 0.1;
	WT_OK(h_run(&c, &ref));
	if (c.dropout > 0) {
		/* dropout is really on: the same run without it differs */
		h_config c0 = c;
		h_result plain;

		c0.dropout = 0.0;
		c0.steps = 1;
		WT_OK(h_run(&c0, &plain));
		WT_CHECK(fabs(plain.loss[0] - ref.loss[0]) > 1e-3 * fabs(ref.loss[0]));
		h_result_free(&plain);
	}

	snprintf(prefix, sizeof(prefix), "ddp-%d-%s-%d-%d", (int)getpid(), model, n, accum);
	snprintf(ns, sizeof(ns), "%d", n);
	snprintf(as, sizeof(as), "%d", accum);
	{
		char *args[] = { "rank", "equiv", (char *)model, ns, as, prefix,
				 (char *)(hook ? hook : "none"), sgd ? "sgd" : "adamw", NULL };

		spawn_ranks(self, n, args, &sp);
	}
	for (int r = 0; r < n; r++) {
		char path[256];

		WT_REQUIRE(h_spawn_ok(&sp, r));
		snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, r);
		WT_REQUIRE(h_result_read(&got[r], path) == 0);
		unlink(path);
		WT_CHECK(got[r].world == n);
		WT_CHECK(got[r].steps == c.steps);
		WT_REQUIRE(got[r].numel == ref.numel);
	}
	{
		double worst_loss = 0.0, worst_w, l2;
		int64_t at;

		for (int s = 0; s < c.steps; s++) {
			double d = fabs(got[0].loss[s] - ref.loss[s]) / fabs(ref.loss[s]);

			if (d > worst_loss)
				worst_loss = d;
			WT_CLOSE(got[0].loss[s], ref.loss[s], loss_tol, 0.0);
		}
		worst_w = h_max_rel(got[0].weights, ref.weights, ref.numel, WEIGHT_FLOOR, &at);
		l2 = h_rel_l2(got[0].weights, ref.weights, ref.numel);
		fprintf(stderr, "%s %s x%d accum %d hook %s: %lld params, worst loss rel %.3g, "
			"worst weight rel %.3g (element %lld), weights l2 rel %.3g\n",
			sgd ? "sgd" : "adamw", model, n, accum, hook ? hook : "none",
			(long long)ref.numel, worst_loss, worst_w, (long long)at, l2);
		if (half)
			WT_CHECK(worst_w <= 5e-2);
		else if (sgd)
			WT_CHECK(worst_w <= TOL);
		else
			WT_CHECK(l2 <= 1e-4);
	}
	/* every rank holds bit-identical weights: they applied the same
	 * all-reduced gradients */
	for (int r = 1; r < n; r++)
		WT_CHECK(!memcmp(got[r].weights, got[0].weights, (size_t)ref.numel * sizeof(float)));
	/* bytes all-reduced per step: every gradient once, 4 bytes (f32) or
	 * 2 (bf16/fp16) each, plus the loss and row count (2 doubles) */
	for (int s = 0; s < c.steps; s++) {
		const weft_step_report *rep = &got[0].rep[s];

		WT_CHECK(rep->comm_bytes - rep->metric_comm_bytes == (half ? 2 : 4) * ref.numel);
		WT_CHECK(rep->metric_comm_bytes == 16);
		WT_CHECK(rep->comm_elements == ref.numel + 2);
		WT_CHECK(rep->comm_calls >= 2);
		/* the MLP's buckets at the test's caps (first 0.002 MB = 524
		 * floats, then 0.01 MB = 2621 floats), from the end backward:
		 * [layers.1.weight, layers.1.bias] (650 >= 524), [layers.0.bias]
		 * (closed where the tail begins), [layers.0.weight] (the tail:
		 * the leading parameters up to first_bucket_mb), plus the loss */
		if (c.model == H_MODEL_MLP)
			WT_CHECK(rep->comm_calls == 4);
		if (c.clip > 0) {
			WT_CHECK(rep->grad_norm > c.clip);
			WT_CLOSE(rep->grad_norm, ref.rep[s].grad_norm, 1e-5, 0.0);
		}
		WT_CHECK(rep->comm_ns > 0 && rep->exposed_comm_ns >= 0 && rep->compute_ns > 0);
		/* waiting is only ever for a collective in flight */
		WT_CHECK(rep->exposed_comm_ns <= rep->comm_ns);
	}
	for (int r = 0; r < n; r++)
		h_result_free(&got[r]);
	h_result_free(&ref);
	return 0;
}

static int equiv(const char *self, const char *model, int n, int accum, const char *hook)
{
	equiv_one(self, model, n, accum, hook, 1);
	if (!hook || !strcmp(hook, "none") || !strcmp(hook, "dropout"))
		equiv_one(self, model, n, accum, hook, 0);
	return wt_done("test_strategy_ddp equiv");
}

/* A parameter that gets no gradient: an error naming it (and the rank),
 * on every rank that lacks it; with find_unused_parameters the steps run
 * and, with the parameter unused on rank 1 only, every rank still ends
 * with the same weights. */
static int unused(const char *self, int n)
{
	h_spawn_result sp;
	char ns[8], prefix[128], path[256];
	h_result got[H_MAX_RANKS];

	snprintf(ns, sizeof(ns), "%d", n);
	snprintf(prefix, sizeof(prefix), "ddp-unused-%d", (int)getpid());
	{
		char *args[] = { "rank", "unused", "toy", ns, "-1", prefix, "strict", NULL };

		spawn_ranks(self, n, args, &sp);
		for (int r = 0; r < n; r++) {
			WT_CHECK(WIFEXITED(sp.status[r]) && WEXITSTATUS(sp.status[r]) == 3);
			WT_STR_CONTAINS(sp.err[r], "'unused.weight'");
			WT_STR_CONTAINS(sp.err[r], "received no gradient");
			WT_STR_CONTAINS(sp.err[r], "find_unused_parameters: true");
		}
	}
	{
		char *args[] = { "rank", "unused", "toy", ns, "1", prefix, "find", NULL };

		spawn_ranks(self, n, args, &sp);
		for (int r = 0; r < n; r++) {
			WT_REQUIRE(h_spawn_ok(&sp, r));
			snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, r);
			WT_REQUIRE(h_result_read(&got[r], path) == 0);
			unlink(path);
			WT_CHECK(got[r].steps == 3);
		}
		for (int r = 1; r < n; r++)
			WT_CHECK(!memcmp(got[r].weights, got[0].weights,
					 (size_t)got[0].numel * sizeof(float)));
		for (int r = 0; r < n; r++)
			h_result_free(&got[r]);
	}
	{
		/* unused on every rank, find_unused_parameters: the same run as
		 * one process (where the parameter's gradient is zero too) */
		char *args[] = { "rank", "unused", "toy", ns, "-1", prefix, "find", NULL };
		h_config c = base_config(H_MODEL_TOY, 1);
		h_result ref;

		c.strategy = "single";
		c.toy_unused = 1;
		c.batch *= n;
		c.steps = 3;
		WT_OK(h_run(&c, &ref));
		spawn_ranks(self, n, args, &sp);
		for (int r = 0; r < n; r++) {
			WT_REQUIRE(h_spawn_ok(&sp, r));
			snprintf(path, sizeof(path), "%s-rank%d.bin", prefix, r);
			WT_REQUIRE(h_result_read(&got[r], path) == 0);
			unlink(path);
		}
		WT_REQUIRE(got[0].numel == ref.numel);
		for (int s = 0; s < 3; s++)
			WT_CLOSE(got[0].loss[s], ref.loss[s], TOL, 0.0);
		WT_CHECK(h_rel_l2(got[0].weights, ref.weights, ref.numel) <= 1e-4);
		for (int r = 0; r < n; r++)
			h_result_free(&got[r]);
		h_result_free(&ref);
	}
	return wt_done("test_strategy_ddp unused");
}

/* Ranks with different row counts: ddp's plain average would weight rows
 * unequally, so it refuses, naming the rank and the counts. */
static int uneven(const char *self)
{
	h_spawn_result sp;
	char prefix[128];
	char *args[] = { "rank", "uneven", "toy", "2", "1", prefix, NULL };

	snprintf(prefix, sizeof(prefix), "ddp-uneven-%d", (int)getpid());
	spawn_ranks(self, 2, args, &sp);
	for (int r = 0; r < 2; r++) {
		WT_CHECK(WIFEXITED(sp.status[r]) && WEXITSTATUS(sp.status[r]) == 3);
		WT_STR_CONTAINS(sp.err[r], "all ranks together had 9, not 2 x");
		WT_STR_CONTAINS(sp.err[r], "same rows per step");
	}
	WT_STR_CONTAINS(sp.err[1], "rank 1 had 5 rows");
	return wt_done("test_strategy_ddp uneven");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "rank"))
		return rank_main(argc, argv);
	if (argc >= 5 && !strcmp(argv[1], "equiv"))
		return equiv(argv[0], argv[2], atoi(argv[3]), atoi(argv[4]),
			     argc > 5 ? argv[5] : NULL);
	if (argc >= 2 && !strcmp(argv[1], "uneven"))
		return uneven(argv[0]);
	if (argc >= 3 && !strcmp(argv[1], "unused"))
		return unused(argv[0], atoi(argv[2]));
	fprintf(stderr, "usage: test_strategy_ddp equiv MODEL NRANKS ACCUM [HOOK] | unused N\n");
	return 2;
}
