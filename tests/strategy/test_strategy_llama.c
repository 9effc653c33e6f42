/* The Llama-style transformer (the llama3-tiny preset: RMSNorm, RoPE with
 * Llama 3's scaling, SwiGLU, grouped-query attention, an untied lm_head)
 * under the strategies that split the model, against the one-process run
 * of the same global batch, on real ranks over gloo. One program, one
 * row per ctest test:
 *
 *   test_strategy_llama pp P SCHEDULE V KV SGD   strategy pp on P ranks
 *       (gpipe | 1f1b | interleaved_1f1b with V virtual stages), stages cut
 *       by parameters (uneven: the first holds wte, the last the final
 *       norm and lm_head), n_kv_head KV; SGD 1: SGD with momentum, 0:
 *       AdamW.
 *   test_strategy_llama tp T SP VP KV SGD   strategy tp of size T on T
 *       ranks, sequence_parallel SP, vocab_parallel VP (wte and lm_head
 *       split by vocabulary rows). KV >= T splits the key/value heads, KV
 *       < T (1: MQA; 2 at T 4, each rank picking its head) replicates them
 *       (shared parts, their gradients summed over the group). T 4 runs a
 *       model of 8 heads, n_embd 64, intermediate size 80.
 *   test_strategy_llama hybrid DP TP PP SCHEDULE KV SGD   strategy hybrid
 *       dp x tp x pp (dp_strategy ddp) on DP * TP * PP ranks.
 *   test_strategy_llama errors   the sizes tensor parallelism cannot split
 *       this model by, each refused with one message naming them; the
 *       shards of every tp size reassembling to the whole model.
 *
 * Model (odd shapes on purpose): 6 blocks, n_embd 48, 6 query heads of 8
 * channels, n_kv_head 3 (GQA: 2 query heads per key/value head), 2 or 1
 * (MQA), an MLP of intermediate size 42 (not a power of two), vocabulary
 * 96, T 12, untied head; 4 steps of 6 micro-batches of 2 rows per data
 * rank.
 *
 * What is compared, and the tolerances (test_strategy_pp.c and
 * test_strategy_tp.c argue them for the GPT; the same hold here: the
 * stages sum each gradient over micro-batches in the reference's order, a
 * tp shard's row-parallel products are summed by all-reduce instead of in
 * one matmul, a few float32 ulps per step; the loss is reduced in double;
 * an untied head adds no gradient exchange at all):
 * - the loss of every step within 1e-5 relative of one process;
 * - SGD runs clip every step at a norm below the gradient's (asserted), so
 *   the norm - split shards' squares summed over tp, replicated and shared
 *   ones once - is compared, within 1e-5 relative;
 * - SGD: every weight after the run within 1e-5 relative to
 *   max(|w|, 1e-2) (RMSNorm weights start at 1, the rest near 0.02);
 *   under tp the ranks' shards are put back into whole tensors through
 *   core/tp's split of each parameter (what a checkpoint's gather does),
 *   and each rank's shard must be exactly its part of that whole;
 * - AdamW: the weight vector within 1e-4 in relative L2 (Adam's first
 *   update is lr * sign(g): an element whose gradient is zero up to
 *   rounding can flip);
 * - every rank's gathered weights (pp) bit-identical. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tp/tp.h"
#include "weft/module.h"
#include "weft_test.h"

#define TOL 1e-5
#define WEIGHT_FLOOR 1e-2
#define N_LAYER 6
#define N_EMBD 48
#define N_HEAD 6
#define INTER 42
#define VOCAB 96
#define SEQ 12
#define STEPS 4
#define MICRO 6
#define CLIP 0.05

static char yaml[256];

static h_config llama_config(int64_t kv, int sgd)
{
	return (h_config){
		.strategy = "single",
		.model = H_MODEL_GPT,
		.gpt_preset = "llama3-tiny",
		.gpt_n_layer = N_LAYER,
		.gpt_n_embd = N_EMBD,
		.gpt_n_head = N_HEAD,
		.gpt_kv_head = kv,
		.gpt_inter = INTER,
		.gpt_vocab = VOCAB,
		.gpt_block = SEQ,
		.batch = 2,
		.n_micro = MICRO,
		.steps = STEPS,
		.seed = 4321,
		.lr = sgd ? 0.05 : 1e-3,
		.sgd = sgd,
		.clip = sgd ? CLIP : 0.0,
		.toy_unused_rank = -1,
		.data_ranks = 1,
	};
}

/* tp 4 does not divide 6 heads: there the model has 8 heads of 8
 * (n_embd 64) and an intermediate size of 80, and KV 2 is the shared
 * layout where each rank picks one of two key/value heads. */
static void tp_shape(h_config *c, int T)
{
	if (N_HEAD % T == 0)
		return;
	c->gpt_n_head = 8;
	c->gpt_n_embd = 64;
	c->gpt_inter = 80;
}

/* A rank: argv = self rank MODE ... PREFIX */
static int rank_main(int argc, char **argv)
{
	h_config c;

	if (argc < 8)
		return 2;
	if (!strcmp(argv[2], "pp")) {
		/* pp SCHED V KV SGD PREFIX */
		c = llama_config(atoll(argv[5]), atoi(argv[6]));
		snprintf(yaml, sizeof(yaml), "{name: pp, schedule: %s, virtual_stages: %s, "
			 "partition: parameters}", argv[3],
			 argv[4]);
		c.strategy = "pp";
	} else if (!strcmp(argv[2], "tp") && argc >= 9) {
		/* tp T SP VP KV SGD PREFIX */
		c = llama_config(atoll(argv[6]), atoi(argv[7]));
		c.gpt_tp = atoi(argv[3]);
		tp_shape(&c, c.gpt_tp);
		c.gpt_tp_flags = (atoi(argv[4]) ? WEFT_TP_SEQUENCE_PARALLEL : 0u) |
				 (atoi(argv[5]) ? WEFT_TP_VOCAB_PARALLEL : 0u);
		c.data_stride = c.gpt_tp; /* one data rank: the tp ranks read the same rows */
		snprintf(yaml, sizeof(yaml), "{name: tp, size: %s, sequence_parallel: %s, "
			 "vocab_parallel: %s}", argv[3], atoi(argv[4]) ? "true" : "false",
			 atoi(argv[5]) ? "true" : "false");
		c.strategy = "tp";
	} else if (!strcmp(argv[2], "hybrid") && argc >= 10) {
		/* hybrid DP TP PP SCHED KV SGD PREFIX: rank r is tp r % TP, dp
		 * (r / TP) % DP */
		c = llama_config(atoll(argv[7]), atoi(argv[8]));
		c.data_ranks = atoi(argv[3]);
		c.data_stride = atoi(argv[4]);
		c.gpt_tp = atoi(argv[4]);
		snprintf(yaml, sizeof(yaml), "{name: hybrid, dp: %s, tp: %s, pp: %s, schedule: %s, "
			 "dp_strategy: ddp, virtual_stages: %d, partition: parameters}", argv[3],
			 argv[4], argv[5], argv[6], strcmp(argv[6], "interleaved_1f1b") ? 1 : 2);
		c.strategy = "hybrid";
	} else {
		return 2;
	}
	c.strategy_yaml = yaml;
	return h_rank_write(&c, argv[argc - 1]);
}

/* Every step's loss (and, clipped SGD runs, gradient norm) of run `got`
 * against the reference. */
static void compare_steps(const h_result *ref, const h_result *got, int sgd)
{
	WT_REQUIRE(got->steps == ref->steps);
	for (int s = 0; s < ref->steps; s++) {
		WT_CLOSE(got->loss[s], ref->loss[s], TOL, 0);
		if (sgd) {
			WT_CHECK(ref->rep[s].grad_norm > CLIP);
			WT_CLOSE(got->rep[s].grad_norm, ref->rep[s].grad_norm, TOL, 0);
		}
	}
	WT_CHECK(got->rep[0].comm_bytes > 0);
}

/* The weight error of w against the reference's n weights: max relative
 * (SGD) or relative L2 (AdamW); checked against the tolerance. */
static double weight_error(const float *w, const float *ref, int64_t n, int sgd, const char *who)
{
	double e = h_weight_error(w, ref, n, sgd, WEIGHT_FLOOR, sgd ? TOL : 1e-4, who);

	WT_CHECK(e <= (sgd ? TOL : 1e-4));
	return e;
}

/* pp: every rank's gathered (whole) weights against the reference and
 * bit-identical across ranks; the worst error. */
static double compare(const h_result *ref, h_result *got, int n, int sgd)
{
	double worst = 0.0;

	for (int r = 0; r < n; r++) {
		double w;

		WT_REQUIRE(got[r].numel == ref->numel);
		compare_steps(ref, &got[r], sgd);
		w = weight_error(got[r].weights, ref->weights, ref->numel, sgd, "pp rank");
		if (w > worst)
			worst = w;
		WT_CHECK(!memcmp(got[r].weights, got[0].weights, (size_t)ref->numel * 4));
	}
	return worst;
}

/* tp shards: got[r] holds tp rank r % T's shard of every parameter (in the
 * shard model's flat order). Each tp group's shards are put back into the
 * whole model through core/tp's record of each parameter's split, which
 * must give the reference's weights; and each rank's shard must be
 * exactly its part of that whole (a shared part the same on every rank).
 * Returns the worst error. */
static double compare_shards(const h_config *c, const h_result *ref, h_result *got, int n, int T,
			     int sgd)
{
	weft_model_options wo = { .seed = c->seed };
	weft_model *whole = NULL, *part[8] = { NULL };
	float *asm_w = malloc((size_t)ref->numel * sizeof(float)), *back = NULL;
	weft_tensor *wf = NULL;
	double worst = 0.0;

	WT_REQUIRE(asm_w && T <= 8);
	WT_OK(h_model_create(c, &wo, &whole));
	WT_REQUIRE(whole);
	weft_params_flat(weft_model_params(whole), WEFT_F32, &wf, NULL);
	WT_REQUIRE(weft_tensor_numel(wf) == ref->numel);
	for (int t = 0; t < T; t++) {
		weft_model_options so = { .seed = c->seed, .tp_size = T, .tp_rank = t,
					  .tp_flags = c->gpt_tp_flags };

		WT_OK(h_model_create(c, &so, &part[t]));
		WT_REQUIRE(part[t]);
	}
	for (int base = 0; base < n; base += T) {
		for (int t = 0; t < T; t++) {
			weft_params *ps = weft_model_params(part[t]);
			weft_tp_group *g = weft_tp_group_find(ps);
			weft_tensor *sf = NULL;

			weft_params_flat(ps, WEFT_F32, &sf, NULL);
			WT_REQUIRE(g && got[base + t].numel == weft_tensor_numel(sf));
			compare_steps(ref, &got[base + t], sgd);
			for (size_t i = 0; i < weft_params_count(ps); i++) {
				weft_tensor *p = weft_params_at(ps, i);
				weft_tensor *q = weft_params_at(weft_model_params(whole), i);

				WT_REQUIRE(!strcmp(p->name, q->name));
				weft_tp_group_put_shard(g, i, t, got[base + t].weights +
							((float *)p->data - (float *)sf->data),
							asm_w + ((float *)q->data - (float *)wf->data));
			}
		}
		{
			double w = weight_error(asm_w, ref->weights, ref->numel, sgd, "tp shards");

			if (w > worst)
				worst = w;
		}
		for (int t = 0; t < T; t++) {
			weft_params *ps = weft_model_params(part[t]);
			weft_tp_group *g = weft_tp_group_find(ps);
			weft_tensor *sf = NULL;
			int64_t sn;

			weft_params_flat(ps, WEFT_F32, &sf, NULL);
			sn = weft_tensor_numel(sf);
			free(back);
			back = malloc((size_t)sn * sizeof(float));
			WT_REQUIRE(back);
			for (size_t i = 0; i < weft_params_count(ps); i++) {
				weft_tensor *p = weft_params_at(ps, i);
				weft_tensor *q = weft_params_at(weft_model_params(whole), i);

				weft_tp_group_take_shard(g, i, t,
							 asm_w + ((float *)q->data - (float *)wf->data),
							 back + ((float *)p->data - (float *)sf->data));
			}
			WT_CHECK(!memcmp(back, got[base + t].weights, (size_t)sn * sizeof(float)));
		}
	}
	free(back);
	free(asm_w);
	for (int t = 0; t < T; t++)
		weft_model_free(part[t]);
	weft_model_free(whole);
	return worst;
}

static void run_pp(const char *self, int p, const char *sched, int v, int64_t kv, int sgd)
{
	h_config c = llama_config(kv, sgd);
	h_result ref, got[H_MAX_RANKS];
	int ran;
	char prefix[128], vs[8], ks[8], sg[8];
	char *args[] = { "pp", (char *)sched, vs, ks, sg, prefix, NULL };
	double worst;

	WT_OK(h_run(&c, &ref));
	snprintf(prefix, sizeof(prefix), "llama-pp-%d", (int)getpid());
	snprintf(vs, sizeof(vs), "%d", v);
	snprintf(ks, sizeof(ks), "%lld", (long long)kv);
	snprintf(sg, sizeof(sg), "%d", sgd);
	ran = h_run_ranks(self, p, args, H_JOB_DEADLINE_S, got);
	WT_CHECK(ran);
	if (!ran)
		return;
	worst = compare(&ref, got, p, sgd);
	fprintf(stderr, "llama pp %d %s v=%d kv %lld %s: step-%d loss %.6f (ref %.6f), worst "
		"weight error %.3g\n", p, sched, v, (long long)kv, sgd ? "sgd" : "adamw", STEPS,
		got[0].loss[STEPS - 1], ref.loss[STEPS - 1], worst);
	for (int r = 0; r < p; r++)
		h_result_free(&got[r]);
	h_result_free(&ref);
}

static void run_tp(const char *self, int T, int sp, int vp, int64_t kv, int sgd)
{
	h_config c = llama_config(kv, sgd);
	h_result ref, got[H_MAX_RANKS];
	int ran;
	char prefix[128], ts[8], sps[8], vps[8], ks[8], sg[8];
	char *args[] = { "tp", ts, sps, vps, ks, sg, prefix, NULL };
	double worst;

	tp_shape(&c, T);
	WT_OK(h_run(&c, &ref));
	c.gpt_tp = T;
	c.gpt_tp_flags = (sp ? WEFT_TP_SEQUENCE_PARALLEL : 0u) | (vp ? WEFT_TP_VOCAB_PARALLEL : 0u);
	snprintf(prefix, sizeof(prefix), "llama-tp-%d", (int)getpid());
	snprintf(ts, sizeof(ts), "%d", T);
	snprintf(sps, sizeof(sps), "%d", sp);
	snprintf(vps, sizeof(vps), "%d", vp);
	snprintf(ks, sizeof(ks), "%lld", (long long)kv);
	snprintf(sg, sizeof(sg), "%d", sgd);
	ran = h_run_ranks(self, T, args, H_JOB_DEADLINE_S, got);
	WT_CHECK(ran);
	if (!ran)
		return;
	worst = compare_shards(&c, &ref, got, T, T, sgd);
	fprintf(stderr, "llama tp %d sp %d vocab %d kv %lld (%s) %s: step-%d loss %.6f (ref %.6f), "
		"grad norm %.5f (ref %.5f), worst weight error %.3g\n", T, sp, vp, (long long)kv,
		kv >= T ? "split" : "shared", sgd ? "sgd+clip" : "adamw", STEPS,
		got[0].loss[STEPS - 1], ref.loss[STEPS - 1], got[0].rep[STEPS - 1].grad_norm,
		ref.rep[STEPS - 1].grad_norm, worst);
	for (int r = 0; r < T; r++)
		h_result_free(&got[r]);
	h_result_free(&ref);
}

static void run_hybrid(const char *self, int dp, int tp, int pp, const char *sched, int64_t kv,
		       int sgd)
{
	h_config c = llama_config(kv, sgd);
	h_result ref, got[H_MAX_RANKS];
	int ran;
	char prefix[128], ds[8], ts[8], ps[8], ks[8], sg[8];
	char *args[] = { "hybrid", ds, ts, ps, (char *)sched, ks, sg, prefix, NULL };
	int n = dp * tp * pp;
	double worst;

	c.batch *= dp;
	WT_OK(h_run(&c, &ref));
	c.gpt_tp = tp;
	snprintf(prefix, sizeof(prefix), "llama-hy-%d", (int)getpid());
	snprintf(ds, sizeof(ds), "%d", dp);
	snprintf(ts, sizeof(ts), "%d", tp);
	snprintf(ps, sizeof(ps), "%d", pp);
	snprintf(ks, sizeof(ks), "%lld", (long long)kv);
	snprintf(sg, sizeof(sg), "%d", sgd);
	ran = h_run_ranks(self, n, args, H_JOB_DEADLINE_S, got);
	WT_CHECK(ran);
	if (!ran)
		return;
	worst = tp > 1 ? compare_shards(&c, &ref, got, n, tp, sgd) : compare(&ref, got, n, sgd);
	fprintf(stderr, "llama hybrid dp %d x tp %d x pp %d %s kv %lld %s: step-%d loss %.6f (ref "
		"%.6f), worst weight error %.3g, %d ranks\n", dp, tp, pp, sched, (long long)kv,
		sgd ? "sgd+clip" : "adamw", STEPS, got[0].loss[STEPS - 1], ref.loss[STEPS - 1],
		worst, n);
	for (int r = 0; r < n; r++)
		h_result_free(&got[r]);
	h_result_free(&ref);
}

/* A tp shard of the test model with n_head / n_kv_head / intermediate
 * size overridden: the model's own check, no communication. */
static weft_status tp_shard(int T, int64_t n_head, int64_t n_embd, int64_t kv, int64_t inter,
			    weft_model **m)
{
	h_config c = llama_config(kv, 1);
	weft_model_options o = { .seed = 1, .tp_size = T, .tp_rank = 0 };

	c.gpt_n_head = n_head;
	c.gpt_n_embd = n_embd;
	c.gpt_inter = inter;
	*m = NULL;
	return h_model_create(&c, &o, m);
}

static void test_errors(void)
{
	weft_model *m = NULL;

	WT_FAILS(tp_shard(4, N_HEAD, N_EMBD, 3, INTER, &m), WEFT_ERR_CONFIG,
		 "n_head 6 is not divisible by the tensor-parallel size 4", "divides 6");
	weft_model_free(m);
	WT_FAILS(tp_shard(2, N_HEAD, N_EMBD, 3, INTER, &m), WEFT_ERR_CONFIG,
		 "n_kv_head 3 is neither a multiple nor a divisor of the tensor-parallel size 2",
		 "split over the ranks when n_kv_head is a multiple of it",
		 "replicated when it divides it");
	weft_model_free(m);
	WT_FAILS(tp_shard(3, N_HEAD, N_EMBD, 3, 40, &m), WEFT_ERR_CONFIG,
		 "intermediate_size 40 is not divisible by the tensor-parallel size 3",
		 "gate, up and down projections", "multiple of 3");
	weft_model_free(m);
	WT_FAILS(tp_shard(4, 3, 42, 1, 48, &m), WEFT_ERR_CONFIG,
		 "n_embd 42 is not divisible by the tensor-parallel size 4", "divides 42");
	weft_model_free(m);
	/* what can be split is: every size and key/value layout builds */
	WT_OK(tp_shard(2, N_HEAD, N_EMBD, 2, INTER, &m));
	weft_model_free(m);
	WT_OK(tp_shard(3, N_HEAD, N_EMBD, 1, INTER, &m));
	weft_model_free(m);
	WT_OK(tp_shard(4, 8, 64, 2, 80, &m));
	weft_model_free(m);
}

/* Shards of each tp size and key/value layout (split, shared with one
 * head, shared with two: each rank picks its own) reassemble to the whole
 * model's initial values, bit for bit: the initialisation draws the whole
 * tensor and keeps the shard, and put_shard is its inverse. */
static void test_shards(void)
{
	static const struct { int T; int64_t nh, C, kv, inter; } rows[] = {
		{ 2, N_HEAD, N_EMBD, 2, INTER }, { 2, N_HEAD, N_EMBD, 1, INTER },
		{ 3, N_HEAD, N_EMBD, 3, INTER }, { 3, N_HEAD, N_EMBD, 1, INTER },
		{ 4, 8, 64, 2, 80 },
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		h_config c = llama_config(rows[k].kv, 1);
		weft_model_options wo = { .seed = c.seed };
		weft_model *whole = NULL;
		weft_tensor *wf = NULL;
		float *asm_w;

		c.gpt_n_head = rows[k].nh;
		c.gpt_n_embd = rows[k].C;
		c.gpt_inter = rows[k].inter;
		WT_OK(h_model_create(&c, &wo, &whole));
		WT_REQUIRE(whole);
		weft_params_flat(weft_model_params(whole), WEFT_F32, &wf, NULL);
		asm_w = calloc((size_t)weft_tensor_numel(wf), sizeof(float));
		WT_REQUIRE(asm_w);
		for (int t = 0; t < rows[k].T; t++) {
			weft_model_options so = { .seed = c.seed, .tp_size = rows[k].T, .tp_rank = t,
						  .tp_flags = WEFT_TP_VOCAB_PARALLEL };
			weft_model *part = NULL;
			weft_tensor *sf = NULL;
			weft_params *ps;

			WT_OK(h_model_create(&c, &so, &part));
			WT_REQUIRE(part);
			ps = weft_model_params(part);
			weft_params_flat(ps, WEFT_F32, &sf, NULL);
			for (size_t i = 0; i < weft_params_count(ps); i++) {
				weft_tensor *p = weft_params_at(ps, i);
				weft_tensor *q = weft_params_at(weft_model_params(whole), i);

				weft_tp_group_put_shard(weft_tp_group_find(ps), i, t, p->data,
							asm_w + ((float *)q->data - (float *)wf->data));
			}
			weft_model_free(part);
		}
		WT_CHECK(!memcmp(asm_w, wf->data, weft_tensor_nbytes(wf)));
		free(asm_w);
		weft_model_free(whole);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "rank"))
		return rank_main(argc, argv);
	if (argc > 6 && !strcmp(argv[1], "pp"))
		run_pp(argv[0], atoi(argv[2]), argv[3], atoi(argv[4]), atoll(argv[5]),
		       atoi(argv[6]));
	else if (argc > 6 && !strcmp(argv[1], "tp"))
		run_tp(argv[0], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoll(argv[5]),
		       atoi(argv[6]));
	else if (argc > 7 && !strcmp(argv[1], "hybrid"))
		run_hybrid(argv[0], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5],
			   atoll(argv[6]), atoi(argv[7]));
	else if (argc > 1 && !strcmp(argv[1], "errors")) {
		test_errors();
		test_shards();
	} else {
		fprintf(stderr, "usage: %s pp P SCHEDULE V KV SGD | tp T SP VP KV SGD | hybrid DP TP "
			"PP SCHEDULE KV SGD | errors\n", argv[0]);
		return 2;
	}
	return wt_done("test_strategy_llama");
}
