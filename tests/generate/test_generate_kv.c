/* The transformer's KV cache (core/nn/gpt_decode.c) for GPT-2 (learned
 * positions, LayerNorm, GELU, multi-head, tied) and a Llama (RoPE with
 * Llama 3's scaling, RMSNorm, SwiGLU, 4 query heads on 2 KV heads, an
 * untied head):
 * - each step's logits (prefill, then one token at a time up to the block
 *   size) equal the last row of the forward over the whole sequence within
 *   1e-4 relative + 1e-5 absolute (float32 sums in another order over
 *   logits of O(1));
 * - greedy generation with the cache equals it without, token for token,
 *   also past the block size (where the window slides);
 * - seeded sampling with the cache repeats itself and equals the uncached
 *   sample of the same seed;
 * - feeding past the block size is refused, saying what to do. */
#include <math.h>

#include "generate/generate.h"
#include "nn/gpt_decode.h"
#include "weft/autograd.h"
#include "weft/config.h"
#include "weft/weft.h"
#include "weft_test.h"

#define BLOCK 16
#define NEW 30 /* 5 prompt ids + 30 > BLOCK: 20 steps with a slid window */

static const uint32_t prompt[5] = { 7, 1, 42, 3, 60 };

static weft_model *build(const char *model_yaml)
{
	weft_model_options mo = { .seed = 5, .no_grads = 1 };
	weft_config *cfg;
	weft_model *m = NULL;

	WT_OK(weft_config_load_string("m.yaml", model_yaml, strlen(model_yaml), &cfg));
	WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m));
	weft_config_free(cfg);
	WT_REQUIRE(m != NULL);
	return m;
}

static weft_token_ids gen(weft_model *m, weft_ctx *ctx, const weft_gen_options *o,
			  int want_cache)
{
	weft_token_ids out = { 0 };
	weft_gen_stats s;

	WT_OK(weft_generate(m, ctx, prompt, 5, o, &out, &s));
	WT_CHECK(s.kv_cache == want_cache);
	WT_CHECK(out.n == (size_t)o->max_new_tokens);
	return out;
}

static int same(const weft_token_ids *a, const weft_token_ids *b)
{
	return a->n == b->n && !memcmp(a->ids, b->ids, a->n * sizeof(uint32_t));
}

/* Step by step against the forward's last row. */
static void check_logits(weft_model *m, weft_ctx *ctx, const char *what)
{
	int32_t seq[BLOCK];
	uint32_t useq[BLOCK];
	nn_kv_cache *c;
	double worst = 0;

	WT_OK(nn_kv_cache_create(m, 0, &c));
	for (int i = 0; i < BLOCK; i++) {
		seq[i] = (int32_t)((i * 37 + 11) % 64);
		useq[i] = (uint32_t)seq[i];
	}
	weft_ctx_set_grad_enabled(ctx, 0);
	for (int64_t n = 5; n <= BLOCK; n++) {
		int64_t shape[2] = { 1, n }, v;
		weft_tensor x, *full;
		const float *got, *want;
		size_t from = n == 5 ? 0 : (size_t)n - 1;

		weft_ctx_step_begin(ctx);
		WT_OK(nn_gpt_decode(m, ctx, c, useq + from, (size_t)n - from, &got, &v));
		WT_CHECK(nn_kv_cache_len(c) == n);
		weft_ctx_step_begin(ctx);
		WT_OK(weft_tensor_init(&x, WEFT_I32, 2, shape, WEFT_CPU, seq));
		WT_OK(weft_model_forward(m, ctx, &x, &full));
		WT_REQUIRE(full->shape[2] == v);
		want = (const float *)full->data + (n - 1) * v;
		for (int64_t i = 0; i < v; i++) {
			double r = fabs((double)got[i] - want[i]) / (1e-5 + 1e-4 * fabs(want[i]));

			worst = r > worst ? r : worst;
		}
	}
	if (!(worst <= 1.0))
		fprintf(stderr, "%s: cached logits off by %.3g x the tolerance\n", what, worst);
	WT_CHECK(worst <= 1.0);
	{
		const float *l;
		int64_t v;
		uint32_t one = 1;

		WT_FAILS(nn_gpt_decode(m, ctx, c, &one, 1, &l, &v), WEFT_ERR_INVALID_ARG,
			 "1 new tokens after the 16 cached do not fit the cache's 16 positions",
			 "reset the cache and run the last window");
	}
	weft_ctx_set_grad_enabled(ctx, 1);
	nn_kv_cache_free(c);
}

static void test_arch(const char *what, const char *yaml)
{
	weft_model *m = build(yaml);
	weft_ctx_options co = { 0 };
	weft_ctx *ctx;
	weft_gen_options o = { .max_new_tokens = NEW, .context = BLOCK, .temperature = 0,
			       .top_k = 0, .top_p = 1, .seed = 3, .eos_id = -1 };
	weft_token_ids g_kv, g_full, s_kv, s_kv2, s_full;

	WT_OK(weft_ctx_create(&co, &ctx));
	check_logits(m, ctx, what);
	g_kv = gen(m, ctx, &o, 1);
	o.no_kv_cache = 1;
	g_full = gen(m, ctx, &o, 0);
	if (!same(&g_kv, &g_full))
		fprintf(stderr, "%s: greedy with and without the cache differ\n", what);
	WT_CHECK(same(&g_kv, &g_full));
	o.temperature = 1.0;
	s_full = gen(m, ctx, &o, 0);
	o.no_kv_cache = 0;
	s_kv = gen(m, ctx, &o, 1);
	s_kv2 = gen(m, ctx, &o, 1);
	WT_CHECK(same(&s_kv, &s_kv2));
	WT_CHECK(same(&s_kv, &s_full));
	WT_CHECK(!same(&s_kv, &g_kv)); /* near-uniform logits: sampling is no arg-max */
	free(g_kv.ids);
	free(g_full.ids);
	free(s_kv.ids);
	free(s_kv2.ids);
	free(s_full.ids);
	weft_ctx_free(ctx);
	weft_model_free(m);
}

int main(void)
{
	test_arch("gpt2", "model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, "
		  "vocab_size: 64, block_size: 16, bias: true}\n");
	test_arch("llama", "model: {class: gpt, preset: llama3-tiny, n_embd: 32, "
		  "vocab_size: 64, block_size: 16, rope_original_max_positions: 8}\n");
	return wt_done("test_generate_kv");
}
