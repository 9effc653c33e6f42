/* Hugging Face GPT-2 checkpoints into weft (model.init_from, nn/hf.h):
 * a directory saved by transformers' save_pretrained, whole and sharded,
 * and a tied nanoGPT saved by safetensors' save_model (lm_head.weight
 * alone), each give transformers' logits on the fixture's batch
 * (tests/fixtures/gen_hf_fixtures.py); every refusal a user can hit names
 * the file, the key or tensor, both values and what to do.
 *
 * Tolerance: |weft - transformers| <= 1e-4 |transformers| + 1e-5, element
 * by element. The reference logits are computed in float64 and rounded, so
 * the bound measures weft's float32 forward alone (about 1e-6 here); a
 * tensor loaded transposed, swapped or not at all, or GELU's exact form in
 * place of the tanh form, moves logits by 1e-3 or more. The three sources
 * must load the same weights bit for bit. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn_test_util.h"
#include "base/file.h"

static const char *hf(const char *file, char *buf, size_t len)
{
	const char *src = getenv("WEFT_SOURCE_DIR");

	snprintf(buf, len, "%s/tests/fixtures/hf/%s", src ? src : ".", file);
	return buf;
}

static weft_status build(const char *yaml, weft_model **m)
{
	weft_config *cfg;
	weft_status st;

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

/* The model of `init_from`, the shape given in full when `shape` is set. */
static weft_status build_from(const char *init_from, int shape, weft_model **m)
{
	char yaml[2048];

	snprintf(yaml, sizeof(yaml), "model: {class: gpt, %sinit_from: '%s'}\n",
		 shape ? "n_layer: 2, n_head: 4, n_embd: 32, vocab_size: 256, block_size: 16, " :
		 "", init_from);
	return build(yaml, m);
}

/* The model of `init_from` with the model keys `keys` ("k: v, " each). */
static weft_status build_from_keys(const char *init_from, const char *keys, weft_model **m)
{
	char yaml[2048];

	snprintf(yaml, sizeof(yaml), "model: {class: gpt, %sinit_from: '%s'}\n", keys, init_from);
	return build(yaml, m);
}

/* The model's logits on the fixture's ids (their first t positions, all
 * when t is 0) against transformers'. */
static void check_logits_t(const char *what, weft_model *m, int64_t t);

static void check_logits(const char *what, weft_model *m)
{
	check_logits_t(what, m, 0);
}

static void check_logits_t(const char *what, weft_model *m, int64_t t)
{
	char path[1024];
	weft_st_file *f;
	weft_ctx *ctx;
	weft_ctx_options copt = { 0 };
	weft_tensor *ids, *want, *logits;

	WT_OK(weft_st_open(hf("gpt2_logits.safetensors", path, sizeof(path)), &f));
	ids = golden_tensor(f, "ids");
	want = golden_tensor(f, "logits");
	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	if (t) { /* causal: the first t positions' logits do not see the rest */
		int64_t B = ids->shape[0], T = ids->shape[1], V = want->shape[2];
		int64_t shape[2] = { B, t };
		weft_tensor *cut;

		WT_OK(weft_ctx_tensor(ctx, "ids_cut", WEFT_I64, 2, shape, &cut));
		for (int64_t b = 0; b < B; b++) {
			memcpy((int64_t *)cut->data + b * t, (int64_t *)ids->data + b * T,
			       (size_t)t * sizeof(int64_t));
			memmove((float *)want->data + b * t * V, (float *)want->data + b * T * V,
				(size_t)(t * V) * sizeof(float));
		}
		WT_OK(weft_model_forward(m, ctx, cut, &logits));
		WT_REQUIRE(weft_tensor_numel(logits) == B * t * V);
	} else {
		WT_OK(weft_model_forward(m, ctx, ids, &logits));
		WT_REQUIRE(weft_tensor_numel(logits) == weft_tensor_numel(want));
	}
	CHECK_ALL_CLOSE(what, (const float *)logits->data, (const float *)want->data,
			weft_tensor_numel(logits), 1e-4, 1e-5);
	weft_ctx_free(ctx);
	weft_tensor_free(ids);
	weft_tensor_free(want);
	weft_st_close(f);
}

/* The largest |got - want| over n elements. */
static double max_diff(const float *got, const float *want, int64_t n)
{
	double worst = 0.0;

	for (int64_t i = 0; i < n; i++)
		if (fabs((double)got[i] - (double)want[i]) > worst)
			worst = fabs((double)got[i] - (double)want[i]);
	return worst;
}

/* A GPT-2 with GELU's exact form against transformers' logits with
 * activation_function "gelu" (gen_hf_gelu_fixture.py): within 1e-5
 * absolute, weft's float32 rounding alone (~1e-6 here). The fixture's two
 * GELUs move its logits apart by ~1e-4 at most (small weights keep the
 * activations near 0, where the forms agree), so the test also requires
 * weft's logits to lie at least 4x closer to the exact form's than to the
 * tanh form's: the tanh form passing for the exact one fails it. */
static void check_gelu_logits(weft_model *m)
{
	char path[1024];
	weft_st_file *f, *ft;
	weft_ctx *ctx;
	weft_ctx_options copt = { 0 };
	weft_tensor *ids, *want, *tanh_form, *logits;
	double d_exact, d_tanh;

	WT_OK(weft_st_open(hf("gpt2_gelu_logits.safetensors", path, sizeof(path)), &f));
	WT_OK(weft_st_open(hf("gpt2_logits.safetensors", path, sizeof(path)), &ft));
	ids = golden_tensor(f, "ids");
	want = golden_tensor(f, "logits");
	tanh_form = golden_tensor(ft, "logits");
	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_model_forward(m, ctx, ids, &logits));
	WT_REQUIRE(weft_tensor_numel(logits) == weft_tensor_numel(want));
	CHECK_ALL_CLOSE("exact gelu logits", (const float *)logits->data,
			(const float *)want->data, weft_tensor_numel(logits), 1e-4, 1e-5);
	d_exact = max_diff(logits->data, want->data, weft_tensor_numel(want));
	d_tanh = max_diff(logits->data, tanh_form->data, weft_tensor_numel(want));
	if (!(d_exact <= 1e-5 && 4.0 * d_exact < d_tanh))
		fprintf(stderr, "exact gelu: max |weft - exact| %.3g, |weft - tanh form| %.3g\n",
			d_exact, d_tanh);
	WT_CHECK(d_exact <= 1e-5 && 4.0 * d_exact < d_tanh);
	weft_ctx_free(ctx);
	weft_tensor_free(ids);
	weft_tensor_free(want);
	weft_tensor_free(tanh_form);
	weft_st_close(f);
	weft_st_close(ft);
}

static void test_loads(void)
{
	char path[1024];
	weft_model *dir, *sharded, *nanogpt;
	const weft_gpt_config *c;

	/* the shape comes from config.json when the run's config leaves it out */
	WT_OK(build_from(hf("gpt2", path, sizeof(path)), 0, &dir));
	c = weft_model_gpt_config(dir);
	WT_REQUIRE(c);
	WT_CHECK(c->n_layer == 2 && c->n_head == 4 && c->n_embd == 32 && c->vocab_size == 256 &&
		 c->block_size == 16 && c->bias);
	check_logits("gpt2 directory", dir);

	/* a shorter block: wpe's first rows, as nanoGPT's crop_block_size */
	{
		char yaml[2048];

		snprintf(yaml, sizeof(yaml), "model: {class: gpt, block_size: 8, init_from: '%s'}\n",
			 hf("gpt2", path, sizeof(path)));
		WT_OK(build(yaml, &sharded));
		check_logits_t("gpt2 cropped to 8 positions", sharded, 8);
		weft_model_free(sharded);
	}

	WT_OK(build_from(hf("gpt2_sharded", path, sizeof(path)), 1, &sharded));
	check_logits("gpt2 sharded", sharded);
	WT_CHECK(same_weights(dir, sharded));

	WT_OK(build_from(hf("nanogpt_save_model.safetensors", path, sizeof(path)), 1, &nanogpt));
	check_logits("nanoGPT save_model", nanogpt);
	WT_CHECK(same_weights(dir, nanogpt));

	/* weft's own file (no lm_head.weight) and one with both names */
	WT_OK(weft_model_save_safetensors(dir, "nn_scratch_hf_weft.safetensors"));
	{
		/* the head count, which no shape tells, is in the metadata */
		weft_st_file *f;

		WT_OK(weft_st_open_header("nn_scratch_hf_weft.safetensors", &f));
		WT_CHECK(weft_st_meta(f, "weft.n_head") && !strcmp(weft_st_meta(f, "weft.n_head"),
								   "4"));
		WT_CHECK(f->format && !strcmp(f->format, "pt"));
		weft_st_close(f);
	}
	weft_model_free(nanogpt);
	WT_OK(build_from("nn_scratch_hf_weft.safetensors", 1, &nanogpt));
	WT_CHECK(same_weights(dir, nanogpt));
	weft_model_free(nanogpt);
	weft_model_free(sharded);
	weft_model_free(dir);
}

/* A scratch directory `name` holding the fixture's config.json with `from`
 * replaced by `to`, and `weights` (a fixture file) as model.safetensors. */
static const char *variant(const char *name, const char *from, const char *to,
			   const char *weights)
{
	static char dir[512];
	char path[1024], cfg_path[1100], link[1100];
	size_t len = 0;
	char *text, *at;
	FILE *fp;

	snprintf(dir, sizeof(dir), "nn_scratch_hf_%s", name);
	WT_REQUIRE(mkdir(dir, 0777) == 0 || errno == EEXIST);
	WT_REQUIRE(!weft_file_read(hf("gpt2/config.json", path, sizeof(path)), WEFT_MEM_OTHER,
				    &text, &len));
	at = from ? strstr(text, from) : NULL;
	WT_REQUIRE(!from || at);
	snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", dir);
	fp = fopen(cfg_path, "w");
	WT_REQUIRE(fp);
	if (at)
		fprintf(fp, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	else
		fputs(text, fp);
	fclose(fp);
	weft_mem_free(text);
	snprintf(link, sizeof(link), "%s/model.safetensors.index.json", dir);
	unlink(link);
	snprintf(link, sizeof(link), "%s/model.safetensors", dir);
	unlink(link);
	if (weights) {
		char abs[1024];

		WT_REQUIRE(realpath(hf(weights, path, sizeof(path)), abs));
		WT_REQUIRE(symlink(abs, link) == 0);
	}
	return dir;
}

/* The fixture's HF weights with an lm_head.weight that is not wte. */
static void write_untied(const char *dir)
{
	char path[1024], out[1100];
	weft_st_file *f;
	weft_st_entry e[64];
	float *head;
	size_t n = 0;
	const weft_st_tensor *wte;

	WT_OK(weft_st_open(hf("gpt2/model.safetensors", path, sizeof(path)), &f));
	WT_REQUIRE(f->count < 63);
	for (size_t i = 0; i < f->count; i++, n++)
		e[n] = (weft_st_entry){ f->tensors[i].name, f->tensors[i].dtype, f->tensors[i].ndim,
					f->tensors[i].shape, f->tensors[i].data };
	wte = weft_st_find(f, "transformer.wte.weight");
	WT_REQUIRE(wte);
	head = malloc(wte->end - wte->begin);
	WT_REQUIRE(head);
	memcpy(head, wte->data, wte->end - wte->begin);
	head[5] += 1.0f;
	e[n++] = (weft_st_entry){ "lm_head.weight", WEFT_F32, 2, wte->shape, head };
	snprintf(out, sizeof(out), "%s/model.safetensors", dir);
	unlink(out);
	WT_OK(weft_st_write(out, e, n));
	free(head);
	weft_st_close(f);
}

static void test_refusals(void)
{
	char path[1024], yaml[2048];
	const char *d;
	weft_model *m;

	/* HF's weights without their config.json: Conv1D is [in, out] */
	WT_FAILS(build_from(hf("gpt2/model.safetensors", path, sizeof(path)), 1, &m),
		 WEFT_ERR_SHAPE, "gpt2/model.safetensors: tensor 'transformer.h.0.attn.c_attn.weight' "
		 "has shape [32, 96] in the file but the model expects [96, 32]: it looks "
		 "transposed", "give model.init_from the directory holding this file and its "
		 "config.json");
	/* the run's config against config.json: both values named */
	snprintf(yaml, sizeof(yaml), "model: {class: gpt, n_embd: 64, init_from: '%s'}\n",
		 hf("gpt2", path, sizeof(path)));
	WT_FAILS(build(yaml, &m), WEFT_ERR_INVALID_ARG, "m.yaml:1:44: model.init_from",
		 "gpt2/config.json: \"n_embd\" is 32 but the model's n_embd is 64",
		 "leave model.n_embd out of the config");
	snprintf(yaml, sizeof(yaml), "model: {class: gpt, block_size: 32, init_from: '%s'}\n",
		 hf("gpt2", path, sizeof(path)));
	WT_FAILS(build(yaml, &m), WEFT_ERR_INVALID_ARG,
		 "\"n_positions\" is 16 but the model's block_size is 32: the checkpoint has "
		 "learned 16 positions; set model.block_size to at most 16");
	snprintf(yaml, sizeof(yaml), "model: {class: gpt, bias: false, init_from: '%s'}\n",
		 hf("gpt2", path, sizeof(path)));
	WT_FAILS(build(yaml, &m), WEFT_ERR_INVALID_ARG, "GPT-2 has biases");
	/* GELU's exact form ("gelu", nanoGPT's nn.GELU()): transformers' logits */
	d = variant("gelu", "\"gelu_new\"", "\"gelu\"", "gpt2/model.safetensors");
	WT_OK(build_from(d, 0, &m));
	check_gelu_logits(m);
	weft_model_free(m);
	/* the run's model.mlp against the checkpoint's */
	WT_FAILS(build_from_keys(d, "mlp: gelu_tanh, ", &m), WEFT_ERR_INVALID_ARG,
		 "\"activation_function\" gives gelu but the model has gelu_tanh");
	/* an activation weft does not compute */
	d = variant("relu", "\"gelu_new\"", "\"relu\"", "gpt2/model.safetensors");
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_INVALID_ARG, "nn_scratch_hf_relu/config.json: "
		 "\"activation_function\" is \"relu\" but weft's GPT computes GELU's tanh form",
		 "or its exact erf form");
	/* gelu_pytorch_tanh is the same function */
	d = variant("tanh", "\"gelu_new\"", "\"gelu_pytorch_tanh\"", "gpt2/model.safetensors");
	WT_OK(build_from(d, 0, &m));
	check_logits("gelu_pytorch_tanh", m);
	weft_model_free(m);
	d = variant("eps", "1e-05", "1e-06", "gpt2/model.safetensors");
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_INVALID_ARG,
		 "\"layer_norm_epsilon\" is 1e-06 but weft's LayerNorm uses 1e-5");
	d = variant("mistral", "GPT2LMHeadModel", "MistralForCausalLM", "gpt2/model.safetensors");
	WT_FAILS(build_from(d, 1, &m), WEFT_ERR_INVALID_ARG, "config.json: the checkpoint's "
		 "architecture is \"MistralForCausalLM\", which weft does not read yet",
		 "GPT2LMHeadModel, LlamaForCausalLM and Qwen2ForCausalLM");
	d = variant("inner", "\"n_inner\": null", "\"n_inner\": 64", "gpt2/model.safetensors");
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_INVALID_ARG,
		 "\"n_inner\" is not null or 4 x n_embd (128)");
	/* an untied head cannot go into weft's tied GPT */
	d = variant("untied", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false",
		    NULL);
	write_untied(d);
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_INVALID_ARG, "\"tie_word_embeddings\": false and "
		 "'lm_head.weight' differs from 'transformer.wte.weight'");
	/* nanoGPT's layout in a transformers directory */
	d = variant("layout", NULL, NULL, "nanogpt_save_model.safetensors");
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_SHAPE, "tensor 'transformer.h.0.attn.c_attn."
		 "weight' has shape [96, 32], weft's own [out, in] layout",
		 "give model.init_from the file itself");
	/* a directory without weights, and an index naming a missing shard */
	d = variant("empty", NULL, NULL, NULL);
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_NOT_FOUND, "nn_scratch_hf_empty holds neither "
		 "model.safetensors nor model.safetensors.index.json");
	{
		FILE *fp = fopen("nn_scratch_hf_empty/model.safetensors.index.json", "w");

		WT_REQUIRE(fp);
		fputs("{\"metadata\": {}, \"weight_map\": {\"lm_head.weight\": "
		      "\"model-00001-of-00002.safetensors\"}}\n", fp);
		fclose(fp);
	}
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_NOT_FOUND,
		 "nn_scratch_hf_empty/model-00001-of-00002.safetensors: cannot open");
	{
		FILE *fp = fopen("nn_scratch_hf_empty/model.safetensors.index.json", "w");

		WT_REQUIRE(fp);
		fputs("{\"weight_map\": {\"lm_head.weight\": \"../x.safetensors\"}}\n", fp);
		fclose(fp);
	}
	WT_FAILS(build_from(d, 0, &m), WEFT_ERR_INVALID_ARG, "tensor 'lm_head.weight' maps to "
		 "'../x.safetensors', not a file name in the same directory");
}

int main(void)
{
	test_loads();
	test_refusals();
	return wt_done("test_nn_hf");
}
