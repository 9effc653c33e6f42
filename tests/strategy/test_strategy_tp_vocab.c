/* Vocabulary parallelism (strategy tp, vocab_parallel: true; core/tp's
 * ops_vocab.c) at the level of one training step, on real ranks over
 * gloo.
 *
 *   test_strategy_tp_vocab equiv T SP   T ranks, each building the whole
 *       GPT and its tp-T shard with a vocabulary-split wte (SP 1: with
 *       sequence parallelism), the tp group bound to the world: the loss
 *       of one batch, every parameter's gradient (shards gathered, the
 *       partial ones of sequence parallelism summed), eval loss and
 *       accuracy against the whole model; the tp collectives of the step
 *       against the count below; wte's bytes per rank 1/T of the whole;
 *       an id or target outside the vocabulary is refused naming it.
 *   test_strategy_tp_vocab errors       vocab_size not divisible by T.
 *
 * Model: GPT, 2 layers, n_embd 32, 4 heads, block 16, vocab 64, bias;
 * B = 2 rows, two targets set to the GPT's ignore index (-1).
 *
 * Tolerances: the split changes only the order of float32 sums (logits in
 * column blocks, the row log-sum-exp assembled from per-rank parts in
 * double), measured ~1e-7; loss within 1e-5 relative, each gradient
 * element within 1e-5 of its parameter's largest |gradient| (a missing
 * all-reduce, a wrong owner or a lost mask is off by the gradient's own
 * size). Accuracy counts are exact (same arg-max; ties: lowest index).
 *
 * Communication of the step (b*s*h = 2*16*32 elements; L = 2 blocks):
 * without SP, forward: 2L all-reduces in the blocks (g) + 1 summing the
 * embedding's parts (b*s*h) + 2 of the cross-entropy (row maxima: b*s
 * F64, sums and target logits: 2*b*s F64); backward: 2L (f before
 * c_attn and c_fc) + 1 (f before the vocab-parallel head), each b*s*h.
 * With SP, forward: 2L + 1 all-gathers (blocks, the head's input), 2L
 * reduce-scatters, 3 all-reduces (embedding, cross-entropy); backward:
 * 2L + 1 all-gathers (blocks, the embedding's split), 2L + 1
 * reduce-scatters (blocks, the head's gathered input), none all-reduced. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "weft_test.h"

#include "dist/dist.h"
#include "dist/pg.h"
#include "plugin/registry.h"
#include "tp/tp.h"
#include "weft/module.h"
#include "weft/ops.h"

#define TOL 1e-5
#define ROWS 2
#define N_LAYER 2
#define N_EMBD 32
#define SEQ 16
#define VOCAB 64

static weft_gpt_config gpt(int64_t vocab)
{
	return (weft_gpt_config){ .n_layer = N_LAYER, .n_head = 4, .n_embd = N_EMBD,
				  .vocab_size = vocab, .block_size = SEQ, .bias = 1 };
}

static void fill(weft_tensor *x, weft_tensor *y)
{
	int64_t *xi = x->data, *yi = y->data;

	for (int64_t k = 0; k < ROWS * SEQ; k++) {
		xi[k] = (int64_t)(weft_rng_hash(0x70cab, 2 * (uint64_t)k) % VOCAB);
		yi[k] = (int64_t)(weft_rng_hash(0x70cab, 2 * (uint64_t)k + 1) % VOCAB);
	}
	yi[3] = yi[SEQ + 7] = -1; /* the GPT's ignore index */
}

/* One step of loss + backward; *loss the value. */
static weft_status step(weft_model *m, weft_ctx *ctx, weft_batch *b, double *loss)
{
	weft_model_output o;
	float v;
	weft_status st;

	weft_ctx_step_begin(ctx);
	weft_ctx_set_grad_enabled(ctx, 1);
	weft_ctx_set_training(ctx, 1);
	if ((st = weft_params_zero_grad(weft_model_params(m))) ||
	    (st = weft_model_loss(m, ctx, b, &o)) ||
	    (st = weft_tensor_copy_to_host(o.loss, &v, sizeof(v))))
		return st;
	*loss = v;
	return weft_backward(ctx, o.loss);
}

/* Every gradient of the split model, gathered whole (partial gradients of
 * sequence parallelism summed first), against the whole model's. */
static void check_grads(weft_pg *pg, weft_model *whole, weft_model *split)
{
	weft_params *wp = weft_model_params(whole), *sp = weft_model_params(split);
	weft_tp_group *g = weft_tp_group_find(sp);

	WT_REQUIRE(weft_params_count(wp) == weft_params_count(sp));
	for (size_t i = 0; i < weft_params_count(sp); i++) {
		weft_tensor *p = weft_params_at(sp, i), *q = weft_params_at(wp, i);
		int64_t n = weft_tensor_numel(q);
		float *got = malloc((size_t)n * sizeof(float)), *want = q->grad->data;
		double big = 0.0, worst = 0.0;

		WT_REQUIRE(got);
		if (weft_tp_group_partial(g, i)) {
			weft_comm_buf b = { .data = p->grad->data, .count = n,
					    .dtype = WEFT_COMM_F32 };

			WT_OK(weft_pg_ops(pg)->all_reduce(weft_pg_comm(pg), &b, &b, WEFT_COMM_SUM,
							  NULL));
		}
		WT_OK(weft_tp_gather_param(g, sp, i, 1, got));
		for (int64_t k = 0; k < n; k++)
			big = fmax(big, fabs(want[k]));
		for (int64_t k = 0; k < n; k++)
			worst = fmax(worst, fabs(got[k] - want[k]));
		if (worst > TOL * big)
			fprintf(stderr, "  %s: gradient off by %.3g (largest %.3g)\n", p->name, worst,
				big);
		WT_CHECK(big > 0.0);
		WT_CHECK(worst <= TOL * big);
		free(got);
	}
}

static void check_comm(const weft_tp_stats *s, int sp)
{
	int64_t bsh = (int64_t)ROWS * SEQ * N_EMBD, bs = (int64_t)ROWS * SEQ, L = N_LAYER;
	const int F = 0, B = 1;

	if (!sp) {
		WT_CHECK(s->calls[F][WEFT_TP_ALL_REDUCE] == 2 * L + 3);
		WT_CHECK(s->elements[F][WEFT_TP_ALL_REDUCE] == (2 * L + 1) * bsh + 3 * bs);
		WT_CHECK(s->bytes[F][WEFT_TP_ALL_REDUCE] == (2 * L + 1) * bsh * 4 + 3 * bs * 8);
		WT_CHECK(s->calls[B][WEFT_TP_ALL_REDUCE] == 2 * L + 1);
		WT_CHECK(s->elements[B][WEFT_TP_ALL_REDUCE] == (2 * L + 1) * bsh);
		for (int pass = 0; pass < 2; pass++) {
			WT_CHECK(s->calls[pass][WEFT_TP_ALL_GATHER] == 0);
			WT_CHECK(s->calls[pass][WEFT_TP_REDUCE_SCATTER] == 0);
		}
		return;
	}
	WT_CHECK(s->calls[F][WEFT_TP_ALL_REDUCE] == 3);
	WT_CHECK(s->elements[F][WEFT_TP_ALL_REDUCE] == bsh + 3 * bs);
	WT_CHECK(s->calls[F][WEFT_TP_ALL_GATHER] == 2 * L + 1);
	WT_CHECK(s->calls[F][WEFT_TP_REDUCE_SCATTER] == 2 * L);
	WT_CHECK(s->calls[B][WEFT_TP_ALL_REDUCE] == 0);
	WT_CHECK(s->calls[B][WEFT_TP_ALL_GATHER] == 2 * L + 1);
	WT_CHECK(s->calls[B][WEFT_TP_REDUCE_SCATTER] == 2 * L + 1);
	WT_CHECK(s->elements[B][WEFT_TP_REDUCE_SCATTER] == (2 * L + 1) * bsh);
}

static int rank_main(int T, int sp)
{
	weft_dist_env de;
	weft_store_client *store = NULL;
	weft_registry *reg = NULL;
	weft_pg *pg = NULL;
	weft_model *whole = NULL, *split = NULL;
	weft_ctx *c1 = NULL, *c2 = NULL;
	weft_tensor *x = NULL, *y = NULL;
	weft_gpt_config gc = gpt(VOCAB);
	weft_ctx_options co = { .seed = 1 };
	int64_t shape[2] = { ROWS, SEQ };
	double l_whole, l_split;
	weft_eval_result e1, e2;
	weft_tp_stats stats;
	const void *vt;
	int rank;

	weft_cpu_set_threads(1);
	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_default_paths(reg));
	WT_OK(weft_dist_env_detect(&de));
	WT_OK(weft_store_connect(de.store_host, de.store_port, de.secret, 30000, &store));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_COMM, "gloo", &vt, NULL));
	WT_OK(weft_pg_create(vt, store, de.rank, de.world_size, "world", 30000, "127.0.0.1", &pg));
	rank = weft_pg_rank(pg);
	WT_REQUIRE(weft_pg_size(pg) == T);
	{
		weft_model_options wo = { .seed = 1234 };
		weft_model_options so = { .seed = 1234, .tp_size = T, .tp_rank = rank,
					  .tp_flags = WEFT_TP_VOCAB_PARALLEL |
						      (sp ? WEFT_TP_SEQUENCE_PARALLEL : 0u) };
		weft_params *ps;
		weft_tensor *wte = NULL;

		WT_OK(weft_model_create_gpt(&gc, &wo, &whole));
		WT_OK(weft_model_create_gpt(&gc, &so, &split));
		ps = weft_model_params(split);
		WT_OK(weft_tp_group_bind(weft_tp_group_find(ps), weft_pg_ops(pg), weft_pg_comm(pg)));
		/* wte: this rank's V/T rows, 1/T of the whole table's bytes */
		for (size_t i = 0; i < weft_params_count(ps); i++)
			if (!strcmp(weft_params_at(ps, i)->name, "transformer.wte.weight"))
				wte = weft_params_at(ps, i);
		WT_REQUIRE(wte);
		WT_CHECK(wte->shape[0] == VOCAB / T && wte->shape[1] == N_EMBD);
		WT_CHECK((int64_t)weft_tensor_nbytes(wte) * T == (int64_t)VOCAB * N_EMBD * 4);
		WT_CHECK(weft_tp_whole_numel(ps) ==
			 weft_params_numel(weft_model_params(whole), WEFT_F32));
	}
	WT_OK(weft_ctx_create(&co, &c1));
	WT_OK(weft_ctx_create(&co, &c2));
	WT_OK(weft_tensor_alloc("x", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, &x));
	WT_OK(weft_tensor_alloc("y", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, &y));
	fill(x, y);
	{
		weft_batch b = { .inputs = x, .targets = y };
		weft_tp_group *g = weft_tp_group_find(weft_model_params(split));

		WT_OK(step(whole, c1, &b, &l_whole));
		weft_tp_group_reset_stats(g);
		WT_OK(step(split, c2, &b, &l_split));
		weft_tp_group_stats(g, &stats);
		WT_CLOSE(l_split, l_whole, TOL, 0.0);
		check_grads(pg, whole, split);
		check_comm(&stats, sp);
		WT_OK(weft_model_eval(whole, c1, &b, &e1));
		WT_OK(weft_model_eval(split, c2, &b, &e2));
		WT_CLOSE(e2.loss, e1.loss, TOL, 0.0);
		WT_CHECK(e1.counted == ROWS * SEQ - 2);
		WT_CHECK(e2.counted == e1.counted && e2.correct == e1.correct);
		if (rank == 0)
			fprintf(stderr, "tp %d sp %d: loss %.7f (whole %.7f), eval %.7f, accuracy "
				"%lld/%lld\n", T, sp, l_split, l_whole, e2.loss,
				(long long)e2.correct, (long long)e2.counted);
		/* outside the vocabulary: a target, then an id */
		((int64_t *)y->data)[5] = VOCAB;
		weft_ctx_step_begin(c2);
		{
			weft_model_output o;

			WT_FAILS(weft_model_loss(split, c2, &b, &o), WEFT_ERR_INVALID_ARG,
				 "row 5 has target 64", "outside [0, 64)");
			((int64_t *)x->data)[9] = VOCAB + 3;
			weft_ctx_step_begin(c2);
			WT_FAILS(weft_model_loss(split, c2, &b, &o), WEFT_ERR_INVALID_ARG,
				 "position 9 holds id 67", "outside the vocabulary [0, 64)");
		}
	}
	weft_tensor_free(x);
	weft_tensor_free(y);
	weft_ctx_free(c1);
	weft_ctx_free(c2);
	weft_tp_group_bind(weft_tp_group_find(weft_model_params(split)), NULL, NULL);
	weft_model_free(split);
	weft_model_free(whole);
	weft_pg_destroy(pg);
	weft_store_client_close(store);
	weft_registry_free(reg);
	return wt_failures ? 3 : 0;
}

static int equiv_main(const char *self, const char *T, const char *sp)
{
	char *argv[] = { (char *)self, "rank", (char *)T, (char *)sp, NULL };
	h_spawn_result res;
	int n = atoi(T);

	WT_REQUIRE(n >= 2 && n <= H_MAX_RANKS);
	WT_REQUIRE(h_spawn(n, argv, 90.0, &res) == 0);
	WT_REQUIRE(!res.hung);
	for (int k = 0; k < n; k++)
		WT_CHECK(h_spawn_ok(&res, k));
	return wt_done("test_strategy_tp_vocab");
}

static int errors_main(void)
{
	weft_gpt_config gc = gpt(VOCAB - 1);
	weft_model_options mo = { .seed = 1, .tp_size = 2, .tp_rank = 0,
				  .tp_flags = WEFT_TP_VOCAB_PARALLEL };
	weft_model *m = NULL;

	WT_FAILS(weft_model_create_gpt(&gc, &mo, &m), WEFT_ERR_CONFIG,
		 "vocab_size 63 is not divisible by the tensor-parallel size 2",
		 "pad vocab_size to a multiple of 2 (64)", "vocab_parallel: false");
	/* without vocab_parallel the same vocabulary is fine (wte whole) */
	mo.tp_flags = 0;
	WT_OK(weft_model_create_gpt(&gc, &mo, &m));
	weft_model_free(m);
	return wt_done("test_strategy_tp_vocab errors");
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "rank"))
		return rank_main(atoi(argv[2]), atoi(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "equiv"))
		return equiv_main(argv[0], argv[2], argv[3]);
	if (argc >= 2 && !strcmp(argv[1], "errors"))
		return errors_main();
	fprintf(stderr, "usage: %s equiv T SP | errors\n", argv[0]);
	return 2;
}
