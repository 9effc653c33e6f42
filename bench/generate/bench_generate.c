/* bench_generate: tokens/s of greedy generation with the transformer's KV
 * cache and without it (the forward over the whole window per token), on
 * random weights, on the CPU:
 *
 *   build/bin/bench_generate [MODEL_YAML] [PROMPT_TOKENS] [NEW_TOKENS]
 *
 * MODEL_YAML is a flow mapping of a model section (default: the model of
 * examples/gpt_char.yaml); both runs must pick the same tokens, which is
 * checked. Prints one line per path and the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate/generate.h"
#include "weft/autograd.h"
#include "weft/config.h"
#include "weft/weft.h"

static int fail(const char *what)
{
	fprintf(stderr, "bench_generate: %s: %s\n", what, weft_error_last());
	return 1;
}

int main(int argc, char **argv)
{
	const char *model = argc > 1 ? argv[1] : "{class: gpt, n_layer: 4, n_head: 4, n_embd: 128, "
		"vocab_size: 256, block_size: 128, bias: false}";
	int64_t np = argc > 2 ? atoll(argv[2]) : 16, nn = argc > 3 ? atoll(argv[3]) : 100;
	char yaml[1024];
	weft_config *cfg;
	weft_model *m;
	weft_ctx *ctx;
	weft_model_options mo = { .seed = 1, .no_grads = 1 };
	weft_ctx_options co = { 0 };
	weft_token_ids out[2] = { { 0 }, { 0 } };
	weft_gen_stats st[2];
	uint32_t *prompt;
	const weft_gpt_config *g;

	snprintf(yaml, sizeof(yaml), "model: %s\n", model);
	if (weft_config_load_string("model.yaml", yaml, strlen(yaml), &cfg) ||
	    weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m))
		return fail("model");
	if (weft_ctx_create(&co, &ctx))
		return fail("context");
	g = weft_model_gpt_config(m);
	prompt = malloc((size_t)np * sizeof(*prompt));
	if (!g || !prompt || np < 1)
		return fail("a gpt model and a prompt of at least one token");
	for (int64_t i = 0; i < np; i++)
		prompt[i] = (uint32_t)((i * 31 + 7) % g->vocab_size);
	for (int k = 0; k < 2; k++) {
		weft_gen_options o = { .max_new_tokens = nn, .context = g->block_size,
				       .temperature = 0, .top_p = 1, .eos_id = -1,
				       .no_kv_cache = k };

		if (weft_generate(m, ctx, prompt, (size_t)np, &o, &out[k], &st[k]))
			return fail("generate");
		printf("%-28s %4lld prompt + %4lld new tokens in %7.3f s: %9.1f tokens/s\n",
		       k ? "full forward per token" : "KV cache", (long long)np,
		       (long long)st[k].new_tokens, st[k].seconds,
		       (double)st[k].new_tokens / st[k].seconds);
	}
	printf("speed-up with the cache: %.2fx; same tokens: %s\n", st[1].seconds / st[0].seconds,
	       out[0].n == out[1].n && !memcmp(out[0].ids, out[1].ids, out[0].n * 4) ? "yes" : "NO");
	free(out[0].ids);
	free(out[1].ids);
	free(prompt);
	weft_ctx_free(ctx);
	weft_model_free(m);
	weft_config_free(cfg);
	return 0;
}
