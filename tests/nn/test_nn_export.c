/* Writes a weft-initialised GPT (model.safetensors, as a checkpoint holds
 * it) and one batch with weft's loss, for torch_load_check.py to load into
 * PyTorch's nanoGPT-style reference and compare. The C side checks what it
 * can alone: the saved file loads back into the same config. */
#include "nn_test_util.h"

int main(void)
{
	static const weft_gpt_config cfg = { .n_layer = 2, .n_head = 4, .n_embd = 32,
					     .vocab_size = 64, .block_size = 16, .bias = 1 };
	weft_model_options opt = { .seed = 99 };
	weft_ctx_options copt = { 0 };
	weft_model *m, *back;
	weft_ctx *ctx;
	weft_tensor *ids, *tg;
	weft_model_output o;
	int64_t shape[2] = { 3, 10 };
	weft_st_entry e[3];

	WT_OK(weft_model_create_gpt(&cfg, &opt, &m));
	WT_OK(weft_ctx_create(&copt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "idx", WEFT_I64, 2, shape, &ids));
	WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 2, shape, &tg));
	for (int i = 0; i < 30; i++) {
		((int64_t *)ids->data)[i] = (i * 37 + 5) % 64;
		((int64_t *)tg->data)[i] = (i * 11 + 3) % 64;
	}
	((int64_t *)tg->data)[7] = -1; /* ignored, as nanoGPT does */
	WT_OK(weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &o));
	WT_OK(weft_model_save_safetensors(m, "nn_export_model.safetensors"));
	e[0] = (weft_st_entry){ "idx", WEFT_I64, 2, shape, ids->data };
	e[1] = (weft_st_entry){ "targets", WEFT_I64, 2, shape, tg->data };
	e[2] = (weft_st_entry){ "loss", WEFT_F32, 0, NULL, o.loss->data };
	WT_OK(weft_st_write("nn_export_batch.safetensors", e, 3));
	WT_OK(weft_model_create_gpt(&cfg, NULL, &back));
	WT_OK(weft_model_load_safetensors(back, "nn_export_model.safetensors"));
	WT_CHECK(!memcmp(weft_params_at(weft_model_params(m), 0)->data,
			 weft_params_at(weft_model_params(back), 0)->data,
			 (size_t)weft_model_num_params(m) * 4));
	weft_model_free(back);
	weft_ctx_free(ctx);
	weft_model_free(m);
	return wt_done("test_nn_export");
}
