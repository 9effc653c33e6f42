/* trainer.activation_checkpointing on CUDA, on a GPU or under the CUDA
 * emulator: `weft fit` of a 2-layer GPT with dropout 0.1 on accelerator
 * cuda, strategy single on one process and ddp on 2 ranks over comm gloo,
 * each with none, full and selective: every step's train loss equal (==)
 * and the final model.safetensors and optimizer.bin equal byte for byte.
 * Tolerance 0: the recompute runs the same kernels on the same inputs
 * with the same dropout keys, and nothing in a step sums in an order that
 * changes between runs (the loss kernel's atomics count integers).
 * Skips (77) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

#define STEPS 3

static const char *const modes[] = { "none", "full", "selective" };

static int write_config(const char *dir, const char *corpus)
{
	char path[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/ac.yaml", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"seed_everything: 5\n"
		"trainer:\n"
		"  comm: gloo\n"
		"  max_steps: %d\n"
		"  log_every_n_steps: 1\n"
		"  limit_val_batches: 0\n"
		"  enable_progress_bar: false\n"
		"  default_root_dir: %s/runs\n"
		"model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, vocab_size: 256,\n"
		"        block_size: 8, bias: true, dropout: 0.1}\n"
		"data: {class: text, paths: [%s], block_size: 8, batch_size: 2,\n"
		"       val_fraction: 0.1, shuffle: false}\n"
		"optimizer: {name: adamw, lr: 3.0e-3}\n",
		STEPS, dir, corpus);
	return fclose(f);
}

static void test_strategy(const char *dir, const char *strategy, int devices)
{
	double base[STEPS], loss[STEPS];
	int nb = 0;

	for (int m = 0; m < 3; m++) {
		char run[64], extra[256];
		int n;

		snprintf(run, sizeof(run), "%s_%s", strategy, modes[m]);
		snprintf(extra, sizeof(extra), "--trainer.devices=%d --trainer.strategy=%s "
			 "--trainer.activation_checkpointing=%s", devices, strategy, modes[m]);
		WT_CHECK(ct_fit(dir, "ac", run, "cuda", extra) == 0);
		n = ct_read_metrics(dir, run, 0, m ? loss : base, NULL, STEPS);
		WT_CHECK(n == STEPS);
		if (!m) {
			nb = n;
			continue;
		}
		for (int s = 0; s < n && s < nb; s++) {
			WT_CHECK(loss[s] == base[s]);
			if (loss[s] != base[s])
				fprintf(stderr, "%s: step %d loss %.9g (none) vs %.9g\n", run, s + 1,
					base[s], loss[s]);
		}
		for (int f = 0; f < 2; f++) {
			const char *file = f ? "optimizer.bin" : "model.safetensors";
			char cmd[2048];

			snprintf(cmd, sizeof(cmd), "cmp -s '%s/runs/%s_none/version_0/checkpoints/last/"
				 "%s' '%s/runs/%s/version_0/checkpoints/last/%s'", dir, strategy, file,
				 dir, run, file);
			WT_CHECK(system(cmd) == 0);
		}
	}
}

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_act_ckpt_XXXXXX", corpus[256];

	ct_setup("test_cuda_act_ckpt");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	WT_REQUIRE(write_config(dir, corpus) == 0);
	test_strategy(dir, "single", 1);
	test_strategy(dir, "ddp", 2);
	ct_finish_dir(dir);
	return wt_done("test_cuda_act_ckpt");
}
