/* A Llama through `weft ckpt export --format hf`, and back:
 *   1. `weft fit` from the transformers Llama fixture (GQA, an untied head,
 *      RoPE with Llama 3's scaling; tests/fixtures/hf/llama) at lr 0, so
 *      the checkpoint holds the fixture's weights;
 *   2. the export is a LlamaForCausalLM directory (config.json with the
 *      run's choices, q/k/v and gate/up as their own tensors) that loads
 *      back into weft with the checkpoint's weights and logits, bit for bit
 *      (no tolerance: the export only moves bytes);
 *   3. a tied Llama (llama3-tiny with tie_embeddings) trained a step does
 *      the same, its head left out as save_pretrained leaves it; so does the
 *      Qwen2 fixture (Qwen2ForCausalLM: q, k, v biases split as the weights);
 *   4. what transformers has no class for is refused naming why: an MLP's
 *      checkpoint, a transformer mixing GPT-2's and Llama's choices.
 * The exports and weft's logits on the Llama fixture's batch are left in
 * hf_export_llama/ and hf_export_qwen2/ of the test's directory for
 * hf_llama_export_check.py
 * (transformers' from_pretrained; skipped without it).
 */
#include "ckpt_test.h"

#include "weft/config.h"
#include "weft/module.h"
#include "weft/ops.h"
#include "nn/safetensors.h"
#include "nn/nn_test_util.h"

#define LAST "runs/%s/version_0/checkpoints/last"

/* The fixture's choices as model keys, for loading a weft file of it. */
#define LLAMA_KEYS "n_layer: 2, n_head: 4, n_embd: 64, vocab_size: 256, block_size: 64, " \
	"bias: false, norm: rmsnorm, norm_eps: 1.0e-5, position: rope, rope_theta: 500000, " \
	"rope_scaling: llama3, rope_factor: 8, rope_low_freq_factor: 1, " \
	"rope_high_freq_factor: 4, rope_original_max_positions: 32, mlp: swiglu, " \
	"intermediate_size: 160, n_kv_head: 2, tie_embeddings: false, "
#define TINY_KEYS "preset: llama3-tiny, tie_embeddings: true, "
#define QWEN_KEYS "preset: qwen2.5-tiny, block_size: 64, "

/* m's logits on ids (a host I64 tensor) into a new host buffer. */
static float *logits_of(weft_model *m, const weft_tensor *ids, size_t *n)
{
	weft_ctx_options copt = { 0 };
	weft_ctx *ctx;
	weft_tensor *x, *logits;
	float *out;

	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I64, ids->ndim, ids->shape, &x));
	memcpy(x->data, ids->data, weft_tensor_nbytes(ids));
	WT_OK(weft_model_forward(m, ctx, x, &logits));
	*n = (size_t)weft_tensor_numel(logits);
	out = malloc(*n * sizeof(float));
	WT_REQUIRE(out != NULL);
	memcpy(out, logits->data, *n * sizeof(float));
	weft_ctx_free(ctx);
	return out;
}

/* The checkpoint's model and the export's give the same weights and the
 * same logits on ids, bit for bit. */
static void check_round_trip(const char *keys, const char *ckpt, const char *exported,
			     const weft_tensor *ids)
{
	weft_model *ck = model_init_from(keys, ckpt), *back = model_init_from("", exported);
	size_t na, nb;
	float *a = logits_of(ck, ids, &na), *b = logits_of(back, ids, &nb);

	WT_CHECK(same_weights(ck, back));
	WT_CHECK(na == nb && !memcmp(a, b, na * sizeof(float)));
	free(a);
	free(b);
	weft_model_free(back);
	weft_model_free(ck);
}

#define TEXT "{class: text, paths: [corpus.txt], block_size: 16, batch_size: 4}"

/* weft's logits of the export in `dir` on ids, into dir/weft_logits.safetensors
 * for the transformers check. */
static void write_logits(const char *dir, const weft_tensor *ids)
{
	weft_model *back = model_init_from("", dir);
	size_t n;
	float *l = logits_of(back, ids, &n);
	int64_t shape[3] = { ids->shape[0], ids->shape[1], 256 };
	weft_st_entry e[2] = {
		{ "ids", WEFT_I64, 2, ids->shape, ids->data },
		{ "logits", WEFT_F32, 3, shape, l },
	};
	char p[TT_PATH + 64];

	WT_REQUIRE(n == (size_t)(shape[0] * shape[1] * shape[2]));
	snprintf(p, sizeof(p), "%s/weft_logits.safetensors", dir);
	WT_OK(weft_st_write(p, e, 2));
	free(l);
	weft_model_free(back);
}

/* weft fit of `name`.yaml (runs/`name`/: 3 steps at lr) with the model and
 * data sections. */
static void fit(const char *name, const char *model, const char *data, const char *lr)
{
	char yaml[4096], file[256];
	int rc;

	snprintf(yaml, sizeof(yaml),
		 "seed_everything: 5\n"
		 "trainer: {max_steps: 3, enable_progress_bar: false, log_every_n_steps: 1}\n"
		 "model: %s\n"
		 "data: %s\n"
		 "optimizer: {name: adamw, lr: %s, weight_decay: 0.0}\n", model, data, lr);
	snprintf(file, sizeof(file), "%s.yaml", name);
	tt_write_text(tt_path("%s", file), yaml);
	rc = tt_weft(name, "fit", "--config", file);
	WT_REQUIRE(tt_expect_ok(name, rc));
}

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	char cwd[TT_PATH], out_dir[TT_PATH + 32], p[TT_PATH + 64], model[TT_PATH + 512];
	char last[256], ck[320];
	weft_st_file *f, *golden;
	const weft_st_tensor *gi;
	weft_tensor ids_t = { .dtype = WEFT_I64, .ndim = 2 }, *ids = &ids_t;
	int rc;

	WT_REQUIRE(src && getcwd(cwd, sizeof(cwd)));
	snprintf(out_dir, sizeof(out_dir), "%s/hf_export_llama", cwd);
	snprintf(p, sizeof(p), "%s/tests/fixtures/hf/llama_logits.safetensors", src);
	WT_OK(weft_st_open(p, &golden));
	gi = weft_st_find(golden, "ids");
	WT_REQUIRE(gi && gi->ndim == 2 && gi->dtype == WEFT_I64);
	ids_t.shape[0] = gi->shape[0];
	ids_t.shape[1] = gi->shape[1];
	ids_t.data = (void *)gi->data;
	tt_scratch("weft_train_hf_llama");
	tt_make_text(20000);

	/* 1-2: the fixture, unchanged by lr 0, out and back */
	snprintf(model, sizeof(model), "{class: gpt, init_from: %s/tests/fixtures/hf/llama}", src);
	fit("llama", model, TEXT, "0.0");
	snprintf(last, sizeof(last), LAST, "llama");
	rc = tt_weft("export", "ckpt", "export", last, out_dir, "--format", "hf");
	WT_CHECK(tt_expect_ok("export", rc));
	WT_STR_CONTAINS(tt_output("export", "out"), "transformers LlamaForCausalLM: "
			"num_hidden_layers 2, num_attention_heads 4, num_key_value_heads 2, "
			"hidden_size 64, intermediate_size 160, vocab_size 256, "
			"max_position_embeddings 64, tie_word_embeddings false");
	snprintf(p, sizeof(p), "%s/model.safetensors", out_dir);
	WT_OK(weft_st_open(p, &f));
	{
		static const struct {
			const char *name;
			int64_t rows, cols;
		} want[] = {
			{ "model.embed_tokens.weight", 256, 64 },
			{ "model.layers.1.self_attn.q_proj.weight", 64, 64 },
			{ "model.layers.1.self_attn.k_proj.weight", 32, 64 },
			{ "model.layers.1.self_attn.v_proj.weight", 32, 64 },
			{ "model.layers.1.mlp.gate_proj.weight", 160, 64 },
			{ "model.layers.1.mlp.up_proj.weight", 160, 64 },
			{ "model.layers.1.mlp.down_proj.weight", 64, 160 },
			{ "lm_head.weight", 256, 64 },
		};

		WT_CHECK(f->count == 2 * 9 + 3); /* 9 per layer, embedding, norm, head */
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			const weft_st_tensor *t = weft_st_find(f, want[i].name);

			WT_CHECK(t && t->ndim == 2 && t->shape[0] == want[i].rows &&
				 t->shape[1] == want[i].cols);
		}
	}
	weft_st_close(f);
	snprintf(p, sizeof(p), "%s/config.json", out_dir);
	{
		size_t len;
		char *cfg = tt_read(p, &len);

		WT_REQUIRE(cfg != NULL);
		WT_STR_CONTAINS(cfg, "\"LlamaForCausalLM\"");
		WT_STR_CONTAINS(cfg, "\"rope_theta\": 500000");
		WT_STR_CONTAINS(cfg, "\"rope_type\": \"llama3\"");
		WT_STR_CONTAINS(cfg, "\"original_max_position_embeddings\": 32");
		WT_STR_CONTAINS(cfg, "\"tie_word_embeddings\": false");
		free(cfg);
	}
	snprintf(ck, sizeof(ck), "%s/model.safetensors", tt_path("%s", last));
	check_round_trip(LLAMA_KEYS, ck, out_dir, ids);
	write_logits(out_dir, ids);

	/* 3: a tied Llama, trained, out and back */
	fit("tied", "{" TINY_KEYS "}", TEXT, "1.0e-3");
	snprintf(last, sizeof(last), LAST, "tied");
	rc = tt_weft("export_tied", "ckpt", "export", last, "tied_hf", "--format", "hf");
	WT_CHECK(tt_expect_ok("export_tied", rc));
	WT_STR_CONTAINS(tt_output("export_tied", "out"), "tie_word_embeddings true");
	WT_OK(weft_st_open(tt_path("tied_hf/model.safetensors"), &f));
	WT_CHECK(!weft_st_find(f, "lm_head.weight") && weft_st_find(f, "model.embed_tokens.weight"));
	weft_st_close(f);
	snprintf(ck, sizeof(ck), "%s/model.safetensors", tt_path("%s", last));
	check_round_trip(TINY_KEYS, ck, tt_path("tied_hf"), ids);

	/* 3b: a Qwen2 (q, k, v biases, tied), the fixture unchanged, out and back */
	snprintf(model, sizeof(model), "{class: gpt, init_from: %s/tests/fixtures/hf/qwen2}", src);
	fit("qwen2", model, TEXT, "0.0");
	snprintf(last, sizeof(last), LAST, "qwen2");
	snprintf(p, sizeof(p), "%s/hf_export_qwen2", cwd);
	rc = tt_weft("export_qwen2", "ckpt", "export", last, p, "--format", "hf");
	WT_CHECK(tt_expect_ok("export_qwen2", rc));
	WT_STR_CONTAINS(tt_output("export_qwen2", "out"), "transformers Qwen2ForCausalLM: "
			"num_hidden_layers 2, num_attention_heads 4, num_key_value_heads 2");
	{
		char wp[TT_PATH + 96];
		const weft_st_tensor *qb, *kb;

		snprintf(wp, sizeof(wp), "%s/model.safetensors", p);
		WT_OK(weft_st_open(wp, &f));
		qb = weft_st_find(f, "model.layers.0.self_attn.q_proj.bias");
		kb = weft_st_find(f, "model.layers.0.self_attn.k_proj.bias");
		WT_CHECK(qb && qb->ndim == 1 && qb->shape[0] == 64);
		WT_CHECK(kb && kb->ndim == 1 && kb->shape[0] == 32);
		WT_CHECK(!weft_st_find(f, "model.layers.0.self_attn.o_proj.bias") &&
			 !weft_st_find(f, "lm_head.weight"));
		weft_st_close(f);
	}
	snprintf(ck, sizeof(ck), "%s/model.safetensors", tt_path("%s", last));
	check_round_trip(QWEN_KEYS, ck, p, ids);
	write_logits(p, ids);

	/* 4: what no transformers class computes */
	fit("mixed", "{class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256, "
	    "block_size: 16, norm: rmsnorm}", TEXT, "1.0e-3");
	snprintf(last, sizeof(last), LAST, "mixed");
	rc = tt_weft("mixed_hf", "ckpt", "export", last, "mixed_hf", "--format", "hf");
	ckpt_expect_error("mixed_hf", rc, "the model's choices (norm rmsnorm, position learned, "
			  "mlp gelu_tanh, bias true) are neither GPT-2's");
	WT_STR_CONTAINS(tt_output("mixed_hf", "err"), "export it in the safetensors format");
	WT_CHECK(!tt_exists(tt_path("mixed_hf/config.json")));
	tt_make_npy_dataset(64, 16, 4);
	fit("mlp", "{class: mlp, in_features: 16, hidden: [8], out_features: 4}",
	    "{class: npy, x: x.npy, y: y.npy, batch_size: 8}", "1.0e-3");
	snprintf(last, sizeof(last), LAST, "mlp");
	rc = tt_weft("mlp_hf", "ckpt", "export", last, "mlp_hf", "--format", "hf");
	ckpt_expect_error("mlp_hf", rc, "holds no transformer (its model.safetensors has no "
			  "transformer.wte.weight: the weights of a model.class mlp or of a model "
			  "plugin)");
	WT_STR_CONTAINS(tt_output("mlp_hf", "err"), "export it with the default --format "
			"safetensors");

	weft_st_close(golden);
	tt_cleanup();
	return wt_done("test_train_hf_llama");
}
