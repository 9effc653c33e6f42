/* A Hugging Face LlamaForCausalLM directory (save_pretrained: GQA, an
 * untied head, RoPE with Llama 3's scaling) loads into weft's transformer
 * and gives transformers' logits (tests/fixtures/gen_hf_llama_fixture.py);
 * a run's config that differs from config.json is refused naming both. */
#include <math.h>

#include "nn_test_util.h"

static const char *hf(const char *file, char *buf, size_t len)
{
	const char *src = getenv("WEFT_SOURCE_DIR");

	snprintf(buf, len, "%s/tests/fixtures/hf/%s", src ? src : ".", file);
	return buf;
}

static weft_status build_in(const char *fixture, const char *extra, weft_model **m)
{
	char dir[1024], yaml[2048];
	weft_config *cfg;
	weft_status st;

	snprintf(yaml, sizeof(yaml), "model: {class: gpt, %sinit_from: '%s'}\n", extra,
		 hf(fixture, dir, sizeof(dir)));
	*m = NULL;
	WT_OK(weft_config_load_string("m.yaml", yaml, strlen(yaml), &cfg));
	st = weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), NULL, m);
	if (!st)
		st = weft_config_check_unused(cfg);
	weft_config_free(cfg);
	if (st) {
		weft_model_free(*m);
		*m = NULL;
	}
	return st;
}

static weft_status build(const char *extra, weft_model **m)
{
	return build_in("llama", extra, m);
}

/* transformers' logits were computed in float64 from the float32 weights:
 * the difference is weft's float32 alone, held to 1e-4 relative + 1e-5
 * absolute (the 1e-4; logits are O(1)). */
static void test_logits(void)
{
	char path[1024];
	weft_ctx_options copt = { 0 };
	weft_st_file *f;
	weft_tensor *ids, *want, *logits;
	weft_model *m;
	weft_ctx *ctx;

	WT_OK(build("", &m));
	WT_CHECK(weft_model_gpt_config(m)->n_embd == 64 &&
		 weft_model_gpt_config(m)->block_size == 64 && !weft_model_gpt_config(m)->bias);
	WT_REQUIRE(weft_params_find(weft_model_params(m), "lm_head.weight") != NULL);
	WT_OK(weft_st_open(hf("llama_logits.safetensors", path, sizeof(path)), &f));
	ids = golden_tensor(f, "ids");
	want = golden_tensor(f, "logits");
	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_model_forward(m, ctx, ids, &logits));
	WT_REQUIRE(weft_tensor_numel(logits) == weft_tensor_numel(want));
	CHECK_ALL_CLOSE("llama logits", (const float *)logits->data, (const float *)want->data,
			weft_tensor_numel(logits), 1e-4, 1e-5);
	weft_ctx_free(ctx);
	weft_tensor_free(ids);
	weft_tensor_free(want);
	weft_st_close(f);
	weft_model_free(m);
}

static void test_refusals(void)
{
	weft_model *m;

	WT_FAILS(build("n_kv_head: 4, ", &m), WEFT_ERR_INVALID_ARG,
		 "config.json: \"num_key_value_heads\" gives 2 but the model has 4",
		 "leave model.n_kv_head out");
	WT_FAILS(build("tie_embeddings: true, ", &m), WEFT_ERR_INVALID_ARG,
		 "\"tie_word_embeddings\" gives false but the model has true");
	WT_FAILS(build("rope_theta: 10000, ", &m), WEFT_ERR_INVALID_ARG,
		 "\"rope_parameters\" gives theta 500000, llama3 but the model has theta 10000");
	WT_FAILS(build("n_embd: 32, ", &m), WEFT_ERR_INVALID_ARG,
		 "\"hidden_size\" is 64 but the model's n_embd is 32");
	WT_FAILS(build("norm: layernorm, ", &m), WEFT_ERR_INVALID_ARG,
		 "gives rmsnorm but the model has layernorm");
}

/* A Qwen2ForCausalLM (gen_hf_qwen2_fixture.py): Llama's layout with biases
 * on q, k and v alone, a tied head, RoPE theta 1e6; its logits within the
 * tolerance of test_logits, and a run's config without the biases refused. */
static void test_qwen2(void)
{
	char path[1024];
	weft_ctx_options copt = { 0 };
	weft_st_file *f;
	weft_tensor *ids, *want, *logits;
	const weft_params *ps;
	weft_model *m;
	weft_ctx *ctx;

	WT_OK(build_in("qwen2", "", &m));
	ps = weft_model_params(m);
	WT_CHECK(weft_params_find(ps, "transformer.h.1.attn.c_attn.bias") != NULL);
	WT_CHECK(weft_params_find(ps, "transformer.h.1.attn.c_proj.bias") == NULL);
	WT_CHECK(weft_params_find(ps, "transformer.h.1.mlp.c_fc.bias") == NULL);
	WT_CHECK(weft_params_find(ps, "lm_head.weight") == NULL); /* tied */
	WT_OK(weft_st_open(hf("qwen2_logits.safetensors", path, sizeof(path)), &f));
	ids = golden_tensor(f, "ids");
	want = golden_tensor(f, "logits");
	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_model_forward(m, ctx, ids, &logits));
	WT_REQUIRE(weft_tensor_numel(logits) == weft_tensor_numel(want));
	CHECK_ALL_CLOSE("qwen2 logits", (const float *)logits->data, (const float *)want->data,
			weft_tensor_numel(logits), 1e-4, 1e-5);
	weft_ctx_free(ctx);
	weft_tensor_free(ids);
	weft_tensor_free(want);
	weft_st_close(f);
	weft_model_free(m);
	WT_FAILS(build_in("qwen2", "qkv_bias: false, ", &m), WEFT_ERR_INVALID_ARG,
		 "gives true but the model has false", "leave model.qkv_bias out");
	/* the tiny preset has the fixture's choices: its weights load into it */
	{
		char dir[1024], yaml[2048];
		weft_config *cfg;

		snprintf(yaml, sizeof(yaml), "model: {preset: qwen2.5-tiny, block_size: 64}\n");
		WT_OK(weft_config_load_string("m.yaml", yaml, strlen(yaml), &cfg));
		WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), NULL,
					     &m));
		weft_config_free(cfg);
		WT_OK(weft_model_load_safetensors(m, hf("qwen2", dir, sizeof(dir))));
		weft_model_free(m);
	}
}

int main(void)
{
	test_logits();
	test_refusals();
	test_qwen2();
	return wt_done("test_nn_hf_llama");
}
