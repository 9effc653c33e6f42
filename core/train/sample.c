/* Text sampled after validation (sample.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate/generate.h"
#include "nn/gpt_decode.h"
#include "text/tokenizer.h"
#include "train/sample.h"
#include "train/trainer_impl.h"
#include "weft/log.h"

struct weft_trainer_sampler {
	weft_tokenizer *tok;       /* NULL: bytes */
	weft_token_ids prompt;
	int64_t validations;       /* seen so far */
	int noted;                 /* the pipeline note was printed */
	weft_ctx *ctx;             /* rank 0's, on the model's device, made at first use */
};

weft_status weft_trainer_sample_parse(const weft_cfg *tr, weft_sample_config *c)
{
	const weft_cfg *s = tr ? weft_cfg_get(tr, "sample") : NULL;
	weft_status st;

	memset(c, 0, sizeof(*c));
	if (!s)
		return WEFT_OK;
	if (weft_cfg_kind_of(s) != WEFT_CFG_MAP)
		return weft_cfg_error(s, "must be a mapping ({every_n_val: 1, prompt: \"...\", "
				      "max_new_tokens: 64, ...}); leave it out for no samples");
	c->enabled = 1;
	c->section = s;
	if ((st = weft_cfg_int(s, "every_n_val", 1, &c->every_n_val)) ||
	    (st = weft_cfg_int(s, "num_samples", 1, &c->num_samples)) ||
	    (st = weft_cfg_int(s, "max_new_tokens", 64, &c->max_new_tokens)) ||
	    (st = weft_cfg_float(s, "temperature", 1.0, &c->temperature)) ||
	    (st = weft_cfg_int(s, "top_k", 0, &c->top_k)) ||
	    (st = weft_cfg_float(s, "top_p", 1.0, &c->top_p)) ||
	    (st = weft_cfg_int(s, "seed", 0, &c->seed)) ||
	    (st = weft_cfg_str(s, "prompt", "\n", &c->prompt)))
		return st;
	if (c->every_n_val < 1)
		return weft_cfg_error(weft_cfg_get(s, "every_n_val"), "must be >= 1 (1: after "
				      "every validation), got %lld", (long long)c->every_n_val);
	if (c->num_samples < 1 || c->num_samples > 100)
		return weft_cfg_error(weft_cfg_get(s, "num_samples"), "must be in 1..100, got %lld",
				      (long long)c->num_samples);
	if (c->max_new_tokens < 1 || c->max_new_tokens > 100000)
		return weft_cfg_error(weft_cfg_get(s, "max_new_tokens"), "must be in 1..100000, "
				      "got %lld", (long long)c->max_new_tokens);
	if (!(c->temperature >= 0 && c->temperature <= 1e6))
		return weft_cfg_error(weft_cfg_get(s, "temperature"), "must be >= 0 (0: greedy), "
				      "got %g", c->temperature);
	if (c->top_k < 0)
		return weft_cfg_error(weft_cfg_get(s, "top_k"), "must be >= 0 (0: no limit), got "
				      "%lld", (long long)c->top_k);
	if (!(c->top_p > 0 && c->top_p <= 1))
		return weft_cfg_error(weft_cfg_get(s, "top_p"), "must be in (0, 1], got %g",
				      c->top_p);
	if (c->seed < 0)
		return weft_cfg_error(weft_cfg_get(s, "seed"), "must be >= 0, got %lld",
				      (long long)c->seed);
	return WEFT_OK;
}

weft_status weft_trainer_sample_setup(weft_trainer *t)
{
	const weft_sample_config *c = &t->tc.sample;
	const weft_gpt_config *g = weft_model_gpt_config(t->model);
	const weft_cfg *data = weft_cfg_get(t->root, "data");
	const weft_cfg *tp = data ? weft_cfg_get(data, "tokenizer") : NULL;
	const char *tok_path = tp ? weft_cfg_scalar(tp) : NULL;
	struct weft_trainer_sampler *s;
	weft_tokenizer_encoder *enc = NULL;
	weft_status st = WEFT_OK;

	if (!c->enabled || t->sampler)
		return WEFT_OK;
	if (!g)
		return weft_cfg_error(c->section, "samples text from a language model, but "
				      "model.class is not gpt; leave trainer.sample out");
	if (!tok_path && g->vocab_size != 256)
		return weft_cfg_error(c->section, "needs text for the model's %lld ids: give "
				      "data.tokenizer (a tokenizer.json), or use a byte-level "
				      "vocabulary (vocab_size 256)", (long long)g->vocab_size);
	s = calloc(1, sizeof(*s));
	if (!s)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory for trainer.sample");
	t->sampler = s;
	if (tok_path) {
		st = weft_tokenizer_load(tok_path, &s->tok);
		if (!st)
			st = weft_tokenizer_encoder_create(s->tok, &enc);
		if (!st)
			st = weft_tokenizer_encode(enc, c->prompt, strlen(c->prompt), &s->prompt);
		weft_tokenizer_encoder_free(enc);
		if (st)
			return weft_error_wrap(st, "trainer.sample: data.tokenizer");
	} else {
		size_t n = strlen(c->prompt);

		s->prompt.ids = malloc((n ? n : 1) * sizeof(uint32_t));
		if (!s->prompt.ids)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory for trainer.sample");
		for (size_t i = 0; i < n; i++)
			s->prompt.ids[i] = (uint8_t)c->prompt[i];
		s->prompt.n = s->prompt.cap = n;
	}
	if (s->prompt.n == 0)
		return weft_cfg_error(weft_cfg_get(c->section, "prompt"), "is empty; give at least "
				      "one character to start from (nanoGPT starts from \"\\n\")");
	return WEFT_OK;
}

void weft_trainer_sample_free(weft_trainer *t)
{
	struct weft_trainer_sampler *s = t->sampler;

	if (!s)
		return;
	weft_tokenizer_free(s->tok);
	free(s->prompt.ids);
	weft_ctx_free(s->ctx);
	free(s);
	t->sampler = NULL;
}

/* The ids as text: through the tokenizer, or as bytes. */
static char *to_text(const struct weft_trainer_sampler *s, const weft_token_ids *ids,
		     size_t *len)
{
	char *out = NULL;

	if (s->tok) {
		if (weft_tokenizer_decode(s->tok, ids->ids, ids->n, 1, &out, len))
			return NULL;
		return out;
	}
	out = malloc(ids->n + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < ids->n; i++)
		out[i] = (char)(uint8_t)ids->ids[i];
	out[ids->n] = '\0';
	*len = ids->n;
	return out;
}

/* Rank 0: num_samples samples from m into stderr and samples.txt. */
static weft_status sample_now(weft_trainer *t, weft_model *m)
{
	const weft_sample_config *c = &t->tc.sample;
	struct weft_trainer_sampler *s = t->sampler;
	const weft_gpt_config *g = weft_model_gpt_config(m);
	weft_gen_options o = { .max_new_tokens = c->max_new_tokens, .context = g->block_size,
			       .temperature = c->temperature, .top_k = c->top_k,
			       .top_p = c->top_p, .eos_id = -1 };
	char path[WEFT_TRAINER_PATH + 16];
	FILE *f = NULL;
	weft_status st = WEFT_OK;

	if (!s->ctx) {
		weft_ctx_options co = { .device = t->tc.device, .seed = t->tc.seed };

		if ((st = weft_ctx_create(&co, &s->ctx)))
			return st;
	}
	if (s->tok)
		o.eos_id = weft_tokenizer_eos_id(s->tok);
	if (t->run_dir[0]) {
		snprintf(path, sizeof(path), "%s/samples.txt", t->run_dir);
		f = fopen(path, "a");
		if (!f)
			weft_log(WEFT_LOG_WARN, "trainer.sample: cannot append to %s; the samples "
				 "go to the log only", path);
	}
	for (int64_t k = 0; k < c->num_samples && !st; k++) {
		weft_token_ids all = { 0 };
		weft_gen_stats gs;
		char *text = NULL;
		size_t len = 0;

		/* one stream per (seed, step, sample): a run repeats its samples */
		o.seed = (uint64_t)c->seed * 0x9e3779b97f4a7c15ull +
			 (uint64_t)t->global_step * 1000003u + (uint64_t)k;
		all.ids = malloc(s->prompt.n * sizeof(uint32_t));
		if (!all.ids) {
			st = weft_error_set(WEFT_ERR_NOMEM, "out of memory sampling");
			break;
		}
		memcpy(all.ids, s->prompt.ids, s->prompt.n * sizeof(uint32_t));
		all.n = all.cap = s->prompt.n;
		st = weft_generate(m, s->ctx, s->prompt.ids, s->prompt.n, &o, &all, &gs);
		if (!st)
			text = to_text(s, &all, &len);
		if (!st && !text)
			st = weft_error_last_status() ? weft_error_last_status() : WEFT_ERR_NOMEM;
		if (!st) {
			fprintf(stderr, "step %lld: sample %lld of %lld (%lld new tokens, %.1f "
				"tokens/s):\n%s\n", (long long)t->global_step, (long long)k + 1,
				(long long)c->num_samples, (long long)gs.new_tokens,
				gs.seconds > 0 ? (double)gs.new_tokens / gs.seconds : 0.0, text);
			if (f)
				fprintf(f, "--- step %lld sample %lld\n%s\n",
					(long long)t->global_step, (long long)k + 1, text);
		}
		free(text);
		free(all.ids);
	}
	if (f && fclose(f))
		weft_log(WEFT_LOG_WARN, "trainer.sample: writing %s failed", path);
	return st;
}

/* Whether the model is whole on this rank or a tensor-parallel shard
 * (assembled whole by weft_model_gather_whole): not a pipeline stage. */
static int samplable(const weft_model *m)
{
	return nn_gpt_decode_supported(m) || m->tp;
}

weft_status weft_trainer_sample_after_val(weft_trainer *t)
{
	const weft_strategy_ops *ops = t->strat_ops;
	struct weft_trainer_sampler *s = t->sampler;
	int gather = WEFT_HAS_MEMBER(ops, weft_strategy_ops, gather_params) &&
		     ops->gather_params;
	weft_model *whole = NULL;
	weft_status st, st2;

	if (!s || ++s->validations % t->tc.sample.every_n_val)
		return WEFT_OK;
	if (!samplable(t->model)) {
		if (t->rank == 0 && !s->noted)
			fprintf(stderr, "trainer.sample: the model is split into pipeline stages, "
				"so no rank holds it whole to sample from; no samples in this "
				"run (weft generate samples from its checkpoints)\n");
		s->noted = 1;
		return WEFT_OK;
	}
	st = gather ? ops->gather_params(t->strat, 1) : WEFT_OK;
	if (!st)
		st = weft_model_gather_whole(t->model, &whole);
	/* a failed sample (rank 0 alone) is reported, not fatal: the other
	 * ranks go on training, and so does rank 0 */
	if (!st && t->rank == 0 && sample_now(t, whole ? whole : t->model))
		weft_log(WEFT_LOG_WARN, "trainer.sample at step %lld failed: %s; training goes on",
			 (long long)t->global_step, weft_error_last());
	weft_model_free(whole);
	st2 = gather ? ops->gather_params(t->strat, 0) : WEFT_OK;
	return st ? st : st2;
}
