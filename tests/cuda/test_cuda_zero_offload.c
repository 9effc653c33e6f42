/* ZeRO's optimizer offload (offload_optimizer: {device: cpu}) on CUDA, on a
 * GPU or under the CUDA emulator: `weft fit` of a small GPT on 2 ranks over
 * comm gloo, zero_1, zero_2 and zero_3, AdamW with gradient clipping at 0.5
 * and 2 micro-batches per step, 3 steps, once with the state on the device
 * and once offloaded (slots, master shard and the step on the host, the
 * CPU kernel table's optim_step):
 * - every step's train loss and gradient norm within 1e-6 relative of the
 *   run without offload;
 * - the final checkpoint (model.safetensors, optimizer.bin) equal byte for
 *   byte;
 * - zero_3 (the stage whose parameter shard is reloaded from the whole
 *   parameters on resume): a run resumed with offload from the checkpoint
 *   of the run without it (2 more steps) saves the same bytes as the run
 *   resumed without it. 8 fits of 2 ranks: the emulator's budget.
 * Why 1e-6 (and bytes for the checkpoints): both runs compute the same
 * gradients on the same device in the same order; the step differs only in
 * where it runs, and the CPU table's optim_step gives the bits of the
 * device kernel and the plugin (weft/device.h's contract), so the measured
 * difference is 0. A piece stepped twice or not at all, a gradient taken
 * down before the last micro-batch was reduced, or parameters not brought
 * back up move the loss of step 2 or 3 by 1e-4 or more at lr 3e-3.
 * Skips (77) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

#define STEPS 3
#define TOL 1e-6

static int write_config(const char *dir, const char *corpus)
{
	char path[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/off.yaml", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"seed_everything: 11\n"
		"trainer:\n"
		"  devices: 2\n"
		"  comm: gloo\n"
		"  log_every_n_steps: 1\n"
		"  limit_val_batches: 0\n"
		"  enable_progress_bar: false\n"
		"  gradient_clip_val: 0.5\n"
		"  accumulate_grad_batches: 2\n"
		"  default_root_dir: %s/runs\n"
		"model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256,\n"
		"        block_size: 8, bias: true, dropout: 0.0}\n"
		"data: {class: text, paths: [%s], block_size: 8, batch_size: 2,\n"
		"       val_fraction: 0.1, shuffle: false}\n"
		"optimizer: {name: adamw, lr: 3.0e-3, weight_decay: 0.1}\n",
		dir, corpus);
	return fclose(f);
}

/* Whether DIR/runs/A and DIR/runs/B saved the same checkpoint bytes. */
static int same_ckpt(const char *dir, const char *a, const char *b)
{
	static const char *const files[] = { "model.safetensors", "optimizer.bin" };
	int same = 1;

	for (int f = 0; f < 2; f++) {
		char cmd[2048];

		snprintf(cmd, sizeof(cmd), "cmp '%s/runs/%s/version_0/checkpoints/last/%s' "
			 "'%s/runs/%s/version_0/checkpoints/last/%s' >&2", dir, a, files[f], dir, b,
			 files[f]);
		if (system(cmd) != 0)
			same = 0;
	}
	return same;
}

static void test_stage(const char *dir, int stage)
{
	static const char *const offload[] = { "none", "cpu" };
	double loss[2][STEPS], norm[2][STEPS];
	char run[2][64], rrun[2][64];
	int n[2];

	for (int o = 0; o < 2; o++) {
		char extra[1200];

		snprintf(run[o], sizeof(run[o]), "z%d_%s", stage, offload[o]);
		snprintf(extra, sizeof(extra), "--trainer.max_steps=%d --trainer.strategy='{name: "
			 "zero_%d, reduce_bucket_size: 1000, allgather_bucket_size: 1000, "
			 "stage3_param_persistence_threshold: 100, stage3_prefetch_bucket_size: "
			 "2000, offload_optimizer: {device: %s}}'", STEPS, stage, offload[o]);
		WT_CHECK(ct_fit(dir, "off", run[o], "cuda", extra) == 0);
		n[o] = ct_read_metrics(dir, run[o], 0, loss[o], norm[o], STEPS);
		WT_CHECK(n[o] == STEPS);
	}
	for (int s = 0; s < n[0] && s < n[1]; s++) {
		WT_CLOSE(loss[1][s], loss[0][s], TOL, 0.0);
		WT_CLOSE(norm[1][s], norm[0][s], TOL, 0.0);
	}
	WT_CHECK(same_ckpt(dir, run[0], run[1]));
	if (stage != 3)
		return;

	/* resume both ways from the checkpoint saved without offload */
	for (int o = 0; o < 2; o++) {
		char extra[2400];

		snprintf(rrun[o], sizeof(rrun[o]), "z%d_%s_resumed", stage, offload[o]);
		snprintf(extra, sizeof(extra), "--trainer.max_steps=%d --trainer.strategy='{name: "
			 "zero_%d, reduce_bucket_size: 1000, allgather_bucket_size: 1000, "
			 "stage3_param_persistence_threshold: 100, stage3_prefetch_bucket_size: "
			 "2000, offload_optimizer: {device: %s}}' --trainer.resume=%s/runs/%s/"
			 "version_0/checkpoints/last", STEPS + 2, stage, offload[o], dir, run[0]);
		WT_CHECK(ct_fit(dir, "off", rrun[o], "cuda", extra) == 0);
	}
	WT_CHECK(same_ckpt(dir, rrun[0], rrun[1]));
}

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_zero_offload_XXXXXX", corpus[256];

	ct_setup("test_cuda_zero_offload");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	WT_REQUIRE(write_config(dir, corpus) == 0);
	for (int stage = 1; stage <= 3; stage++)
		test_stage(dir, stage);
	ct_finish_dir(dir);
	return wt_done("test_cuda_zero_offload");
}
