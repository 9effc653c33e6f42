/* Hugging Face checkpoints through the command line, both ways:
 *   1. `weft fit` fine-tunes from a transformers GPT-2 directory
 *      (model.init_from, the shape taken from its config.json);
 *   2. `weft ckpt export CKPT OUT` holds lm_head.weight, a copy of the tied
 *      transformer.wte.weight, as nanoGPT's strict load_state_dict wants;
 *   3. `weft ckpt export CKPT DIR --format hf` writes config.json and
 *      model.safetensors that load back into weft bit for bit (round trip,
 *      no tolerance), as does the default export;
 *   4. a checkpoint without the head count in its metadata (weft before it
 *      recorded it) is refused with advice, and exports with --n-head;
 *      bad options are refused.
 * The exports and weft's logits on them are left in hf_export/ of the
 * test's directory for hf_export_check.py (transformers' from_pretrained
 * and nanoGPT's strict load; skipped without them).
 */
#include "ckpt_test.h"

#include "weft/config.h"
#include "weft/module.h"
#include "weft/ops.h"
#include "nn/safetensors.h"
#include "nn/nn_test_util.h"

#define LAST "runs/hf/version_0/checkpoints/last"

/* The model of init_from `from`, with the run's shape (a weft file) or
 * without (a Hugging Face directory says it). */
static weft_model *load(const char *from, int shape)
{
	return model_init_from(shape ? "n_layer: 2, n_head: 4, n_embd: 32, vocab_size: 256, "
			       "block_size: 16, " : "", from);
}

/* m's logits on a fixed batch, with the batch, to `path` (for the Python
 * check). */
static void write_logits(weft_model *m, const char *path)
{
	int64_t shape[2] = { 2, 12 };
	weft_ctx_options copt = { 0 };
	weft_ctx *ctx;
	weft_tensor *ids, *logits;
	weft_st_entry e[2];

	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I64, 2, shape, &ids));
	for (int i = 0; i < 24; i++)
		((int64_t *)ids->data)[i] = (i * 53 + 7) % 256;
	WT_OK(weft_model_forward(m, ctx, ids, &logits));
	e[0] = (weft_st_entry){ "ids", WEFT_I64, 2, ids->shape, ids->data };
	e[1] = (weft_st_entry){ "logits", WEFT_F32, logits->ndim, logits->shape, logits->data };
	WT_OK(weft_st_write(path, e, 2));
	weft_ctx_free(ctx);
}

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	char yaml[2048], cwd[TT_PATH], out_dir[TT_PATH + 16], p[TT_PATH + 64];
	weft_model *ck, *back, *flat;
	weft_st_file *f;
	int rc;

	WT_REQUIRE(src && getcwd(cwd, sizeof(cwd)));
	snprintf(out_dir, sizeof(out_dir), "%s/hf_export", cwd);
	mkdir(out_dir, 0777);
	tt_scratch("weft_train_hf");
	tt_make_text(20000);
	snprintf(yaml, sizeof(yaml),
		 "seed_everything: 5\n"
		 "trainer: {max_steps: 3, enable_progress_bar: false, log_every_n_steps: 1}\n"
		 "model: {class: gpt, init_from: %s/tests/fixtures/hf/gpt2}\n"
		 "data: {class: text, paths: [corpus.txt], block_size: 16, batch_size: 4}\n"
		 "optimizer: {name: adamw, lr: 1.0e-3}\n", src);
	tt_write_text(tt_path("hf.yaml"), yaml);
	rc = tt_weft("fit", "fit", "--config", "hf.yaml");
	WT_REQUIRE(tt_expect_ok("fit", rc));

	/* the default export: lm_head.weight equal to wte */
	snprintf(p, sizeof(p), "%s/nanogpt.safetensors", out_dir);
	rc = tt_weft("export", "ckpt", "export", LAST, p);
	WT_CHECK(tt_expect_ok("export", rc));
	WT_OK(weft_st_open(p, &f));
	{
		const weft_st_tensor *h = weft_st_find(f, "lm_head.weight");
		const weft_st_tensor *w = weft_st_find(f, "transformer.wte.weight");

		WT_REQUIRE(h && w && h->end - h->begin == w->end - w->begin);
		WT_CHECK(!memcmp(h->data, w->data, h->end - h->begin));
		WT_CHECK(weft_st_meta(f, "weft.n_head") &&
			 !strcmp(weft_st_meta(f, "weft.n_head"), "4"));
	}
	weft_st_close(f);

	/* --format hf, and back: bit for bit */
	rc = tt_weft("export_hf", "ckpt", "export", LAST, out_dir, "--format", "hf");
	WT_CHECK(tt_expect_ok("export_hf", rc));
	WT_STR_CONTAINS(tt_output("export_hf", "out"), "transformers GPT2LMHeadModel: n_layer 2, "
			"n_head 4, n_embd 32, vocab_size 256, n_positions 16");
	ck = load(tt_path(LAST "/model.safetensors"), 1);
	back = load(out_dir, 0);
	flat = load(p, 1);
	WT_CHECK(same_weights(ck, back));
	WT_CHECK(same_weights(ck, flat));
	snprintf(p, sizeof(p), "%s/weft_logits.safetensors", out_dir);
	write_logits(back, p);
	weft_model_free(flat);
	weft_model_free(back);

	/* a checkpoint that does not record n_head: refused, then --n-head */
	ckpt_copy(tt_path(LAST), "old");
	{
		const weft_params *ps = weft_model_params(ck);
		weft_st_entry e[64];
		size_t n = weft_params_count(ps);

		WT_REQUIRE(n <= 64);
		for (size_t i = 0; i < n; i++) {
			const weft_tensor *t = weft_params_at(ps, i);

			e[i] = (weft_st_entry){ t->name, (weft_dtype)t->dtype, t->ndim, t->shape,
						t->data };
		}
		WT_OK(weft_st_write(tt_path("old/model.safetensors"), e, n));
		ckpt_write_manifest(tt_path("old"), ckpt_files, 3);
	}
	rc = tt_weft("old_hf", "ckpt", "export", "old", "old_hf", "--format", "hf");
	ckpt_expect_error("old_hf", rc, "checkpoint 'old' does not record its head count");
	WT_STR_CONTAINS(tt_output("old_hf", "err"), "give it with --n-head N");
	rc = tt_weft("old_hf2", "ckpt", "export", "old", "old_hf", "--format", "hf", "--n-head",
		     "4");
	WT_CHECK(tt_expect_ok("old_hf2", rc));
	back = load(tt_path("old_hf"), 0);
	WT_CHECK(same_weights(ck, back));
	weft_model_free(back);
	weft_model_free(ck);

	rc = tt_weft("nhead", "ckpt", "export", LAST, "x", "--format", "hf", "--n-head", "2");
	ckpt_expect_error("nhead", rc, "records n_head 4 but --n-head is 2");

	/* options */
	rc = tt_weft("fmt", "ckpt", "export", LAST, "x", "--format", "onnx");
	WT_CHECK(rc == 2);
	WT_STR_CONTAINS(tt_output("fmt", "err"), "--format 'onnx' is not known; give "
			"safetensors");
	rc = tt_weft("fmt_opt", "ckpt", "export", LAST, "x", "--format", "hf", "--optimizer");
	WT_CHECK(rc == 2);
	WT_STR_CONTAINS(tt_output("fmt_opt", "err"), "--optimizer goes with --format safetensors");
	rc = tt_weft("fmt_file", "ckpt", "export", LAST, "hf.yaml", "--format", "hf");
	ckpt_expect_error("fmt_file", rc, "cannot make the directory 'hf.yaml' (a file of that "
			  "name exists)");
	tt_cleanup();
	return wt_done("test_train_hf");
}
