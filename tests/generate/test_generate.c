/* weft_generate: greedy generation is deterministic and equals, token for
 * token, an arg-max over a full forward computed here (also past the block
 * size, where the window slides); seeded sampling repeats itself and
 * another seed does not; top_k = 1 is greedy at any temperature; the stop
 * id ends generation; the sampler's frequencies follow softmax(logits / T)
 * restricted by top-k and top-p within 0.015 over 20000 draws (4 standard
 * errors); bad options are refused with their value. */
#include <math.h>

#include "generate/generate.h"
#include "weft/autograd.h"
#include "weft/weft.h"
#include "weft_test.h"

#define NEW 24 /* 5 prompt ids + 24 > block size 16 */

static const uint32_t prompt[5] = { 1, 2, 3, 4, 5 };

static weft_gen_options opts(void)
{
	return (weft_gen_options){ .max_new_tokens = NEW, .context = 16, .temperature = 0,
				   .top_k = 0, .top_p = 1, .seed = 7, .eos_id = -1 };
}

static weft_token_ids gen(weft_model *m, weft_ctx *ctx, const weft_gen_options *o,
			  weft_gen_stats *stats)
{
	weft_token_ids out = { 0 };
	weft_gen_stats s;

	WT_OK(weft_generate(m, ctx, prompt, 5, o, &out, stats ? stats : &s));
	return out;
}

static int same(const weft_token_ids *a, const weft_token_ids *b)
{
	return a->n == b->n && !memcmp(a->ids, b->ids, a->n * sizeof(uint32_t));
}

/* The reference: a full forward over the window, arg-max of the last row. */
static void reference_greedy(weft_model *m, weft_ctx *ctx, uint32_t *out)
{
	int32_t seq[5 + NEW];
	size_t n = 5;

	for (size_t i = 0; i < 5; i++)
		seq[i] = (int32_t)prompt[i];
	weft_ctx_set_grad_enabled(ctx, 0);
	for (int k = 0; k < NEW; k++) {
		size_t w = n < 16 ? n : 16;
		int64_t shape[2] = { 1, (int64_t)w };
		weft_tensor x, *logits;
		const float *row;
		int64_t v, best = 0;

		weft_ctx_step_begin(ctx);
		WT_OK(weft_tensor_init(&x, WEFT_I32, 2, shape, WEFT_CPU, seq + n - w));
		WT_OK(weft_model_forward(m, ctx, &x, &logits));
		WT_REQUIRE(logits->ndim == 3 && logits->shape[1] == (int64_t)w);
		v = logits->shape[2];
		row = (const float *)logits->data + (w - 1) * (size_t)v;
		for (int64_t i = 1; i < v; i++)
			if (row[i] > row[best])
				best = i;
		out[k] = (uint32_t)best;
		seq[n++] = (int32_t)best;
	}
	weft_ctx_set_grad_enabled(ctx, 1);
}

static void test_model(void)
{
	weft_gpt_config c = { .n_layer = 2, .n_head = 2, .n_embd = 16, .vocab_size = 64,
			      .block_size = 16, .bias = 1, .dropout = 0 };
	weft_model_options mo = { .seed = 3, .no_grads = 1 };
	weft_ctx_options co = { 0 };
	weft_model *m;
	weft_ctx *ctx;
	weft_gen_options o = opts();
	weft_gen_stats st;
	weft_token_ids g1, g2, s1, s2, s3, k1;
	uint32_t ref[NEW];

	WT_OK(weft_model_create_gpt(&c, &mo, &m));
	WT_OK(weft_ctx_create(&co, &ctx));
	g1 = gen(m, ctx, &o, &st);
	WT_CHECK(g1.n == NEW && st.new_tokens == NEW && !st.stopped_at_eos);
	g2 = gen(m, ctx, &o, NULL);
	WT_CHECK(same(&g1, &g2));
	reference_greedy(m, ctx, ref);
	WT_CHECK(g1.n == NEW && !memcmp(g1.ids, ref, sizeof(ref)));

	o.temperature = 1.0;
	s1 = gen(m, ctx, &o, NULL);
	s2 = gen(m, ctx, &o, NULL);
	o.seed = 8;
	s3 = gen(m, ctx, &o, NULL);
	WT_CHECK(same(&s1, &s2));
	WT_CHECK(!same(&s1, &s3));
	WT_CHECK(!same(&s1, &g1)); /* near-uniform logits: sampling is no arg-max */

	o.temperature = 1.5;
	o.top_k = 1;
	k1 = gen(m, ctx, &o, NULL);
	WT_CHECK(same(&k1, &g1));

	/* stop at the id greedy picks first: one id, then nothing */
	o = opts();
	o.eos_id = g1.ids[0];
	free(k1.ids);
	k1 = gen(m, ctx, &o, &st);
	WT_CHECK(k1.n == 1 && st.new_tokens == 1 && st.stopped_at_eos);

	o = opts();
	{
		weft_token_ids out = { 0 };
		uint32_t bad = 64;

		WT_FAILS(weft_generate(m, ctx, prompt, 0, &o, &out, &st), WEFT_ERR_INVALID_ARG,
			 "prompt");
		o.top_p = 0;
		WT_FAILS(weft_generate(m, ctx, prompt, 5, &o, &out, &st), WEFT_ERR_INVALID_ARG,
			 "top_p must be in (0, 1], got 0");
		o = opts();
		o.temperature = -1;
		WT_FAILS(weft_generate(m, ctx, prompt, 5, &o, &out, &st), WEFT_ERR_INVALID_ARG,
			 "temperature must be >= 0");
		o = opts();
		WT_CHECK(weft_generate(m, ctx, &bad, 1, &o, &out, &st) != WEFT_OK);
		WT_STR_CONTAINS(weft_error_last(), "64");
		free(out.ids);
	}
	free(g1.ids);
	free(g2.ids);
	free(s1.ids);
	free(s2.ids);
	free(s3.ids);
	free(k1.ids);
	weft_ctx_free(ctx);
	weft_model_free(m);
}

/* Frequencies of 20000 draws against the expected probabilities. */
static void check_freq(double temperature, int64_t top_k, double top_p, const double *want)
{
	const float logits[3] = { logf(0.5f), logf(0.3f), logf(0.2f) };
	weft_gen_options o = opts();
	char scratch[64];
	uint64_t rng = 99;
	int count[3] = { 0 };

	o.temperature = temperature;
	o.top_k = top_k;
	o.top_p = top_p;
	WT_REQUIRE(weft_gen_scratch_bytes(3) <= sizeof(scratch));
	for (int i = 0; i < 20000; i++)
		count[weft_gen_sample(logits, 3, &o, &rng, scratch)]++;
	for (int k = 0; k < 3; k++) {
		WT_CLOSE(count[k] / 20000.0, want[k], 0, 0.015);
		if (want[k] == 0)
			WT_CHECK(count[k] == 0);
	}
}

int main(void)
{
	test_model();
	check_freq(1.0, 0, 1.0, (const double[]){ 0.5, 0.3, 0.2 });
	check_freq(0.5, 0, 1.0, (const double[]){ 0.25 / 0.38, 0.09 / 0.38, 0.04 / 0.38 });
	check_freq(1.0, 2, 1.0, (const double[]){ 0.625, 0.375, 0 });
	check_freq(1.0, 0, 0.5, (const double[]){ 1, 0, 0 });
	check_freq(1.0, 0, 0.7, (const double[]){ 0.625, 0.375, 0 });
	return wt_done("test_generate");
}
