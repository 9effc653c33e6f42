/* ZeRO stages 1, 2 and 3 on CUDA (plugins/strategies/zero through the
 * kernel table's device services), on a GPU or under the CUDA emulator:
 * `weft fit` of a small GPT on 2 ranks over comm gloo (which stages the
 * device buffers through host memory), 3 steps with AdamW and gradient
 * clipping at 0.5, logs every step's train loss and gradient norm within
 * 1e-5 relative of the same run on accelerator: cpu.
 * Why 1e-5: both runs are F32 and step the optimizer with the same
 * rounding (optim_step is bit-identical to the plugin); they differ only
 * in the order of the GEMMs' and the norm's sums (~1e-7 relative per
 * value after 2 updates: measured 4e-8). A defect does not hide under it:
 * a piece stepped twice or not at all, a bucket added to the wrong shard
 * offset, a gather of stale parameters or a clipping factor left out each
 * move the loss of step 2 or 3 by 1e-4 or more at lr 3e-3.
 * zero_3 with sgd (momentum, decay) the same way: optim_step's SGD kernel.
 * Also: lion on cuda is refused at create with one message naming the
 * optimizers that run there.
 * Skips (77) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

#define STEPS 3

static int write_config(const char *dir, const char *name, const char *corpus,
			const char *strategy, const char *optimizer)
{
	char path[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"seed_everything: 11\n"
		"trainer:\n"
		"  accelerator: cpu\n"
		"  devices: 2\n"
		"  comm: gloo\n"
		"  strategy: {name: %s, reduce_bucket_size: 1000, allgather_bucket_size: 1000,\n"
		"             stage3_param_persistence_threshold: 100,\n"
		"             stage3_prefetch_bucket_size: 2000}\n"
		"  max_steps: %d\n"
		"  log_every_n_steps: 1\n"
		"  limit_val_batches: 0\n"
		"  enable_checkpointing: false\n"
		"  enable_progress_bar: false\n"
		"  gradient_clip_val: 0.5\n"
		"  default_root_dir: %s/runs\n"
		"model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256,\n"
		"        block_size: 8, bias: true, dropout: 0.0}\n"
		"data: {class: text, paths: [%s], block_size: 8, batch_size: 2,\n"
		"       val_fraction: 0.1, shuffle: false}\n"
		"optimizer: %s\n",
		strategy, STEPS, dir, corpus, optimizer);
	return fclose(f);
}

static void test_stage(const char *dir, const char *corpus, const char *stage,
		       const char *optimizer)
{
	char cname[64], gname[64];
	double cl[STEPS], cn[STEPS], gl[STEPS], gn[STEPS];
	int nc, ng;

	snprintf(cname, sizeof(cname), "%s_%s_cpu", stage, optimizer);
	snprintf(gname, sizeof(gname), "%s_%s_cuda", stage, optimizer);
	WT_REQUIRE(write_config(dir, cname, corpus, stage,
				!strcmp(optimizer, "sgd") ?
				"{name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.01}" :
				"{name: adamw, lr: 3.0e-3, weight_decay: 0.1}") == 0);
	WT_CHECK(ct_fit(dir, cname, cname, "cpu", "") == 0);
	WT_CHECK(ct_fit(dir, cname, gname, "cuda", "") == 0);
	nc = ct_read_metrics(dir, cname, 0, cl, cn, STEPS);
	ng = ct_read_metrics(dir, gname, 0, gl, gn, STEPS);
	WT_CHECK(nc == STEPS && ng == STEPS);
	for (int s = 0; s < nc && s < ng; s++) {
		WT_CLOSE(gl[s], cl[s], 1e-5, 0.0);
		WT_CLOSE(gn[s], cn[s], 1e-5, 0.0);
	}
	/* the runs trained: AdamW at this rate lowers the loss within 3 steps
	 * (measured 5.526 -> 5.495); SGD's 3 steps on the tests' corpus (the
	 * docs and headers, which change) need not, so only AdamW is held to it */
	if (!strcmp(optimizer, "adamw"))
		WT_CHECK(nc == STEPS && cl[STEPS - 1] < cl[0]);
}

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_zero_fit_XXXXXX", corpus[256], log[1200];

	ct_setup("test_cuda_zero_fit");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	test_stage(dir, corpus, "zero_1", "adamw");
	test_stage(dir, corpus, "zero_2", "adamw");
	test_stage(dir, corpus, "zero_3", "adamw");
	test_stage(dir, corpus, "zero_3", "sgd");

	/* an optimizer without a device kernel: one clear refusal */
	WT_REQUIRE(write_config(dir, "lion", corpus, "zero_2", "{name: lion, lr: 1.0e-4}") == 0);
	WT_CHECK(ct_fit(dir, "lion", "lion_cuda", "cuda", "") != 0);
	snprintf(log, sizeof(log), "%s/lion_cuda.log", dir);
	WT_CHECK(ct_file_has(log, "optimizer 'lion' has no device kernel") &&
		 ct_file_has(log, "use optimizer adam, adamw or sgd, or accelerator: cpu"));
	ct_finish_dir(dir);
	return wt_done("test_cuda_zero_fit");
}
