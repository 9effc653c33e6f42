/* ddp's bf16 and fp16 comm hooks on CUDA (plugins/strategies/ddp/ddp.c:
 * the casts are the kernel table's convert on the compute stream, the
 * 16-bit buffer is device memory tagged WEFT_COMM_DEVICE_CUDA), on a GPU or
 * under the CUDA emulator: `weft fit` of a small GPT on 2 ranks over comm
 * gloo (which stages the device buffers through host memory), 3 steps with
 * AdamW, logs every step's train loss within 2e-2 relative of the same run
 * on accelerator: cpu.
 * Why 2e-2: it is the tolerance tests/strategy/test_strategy_ddp states
 * for the 16-bit hooks on the CPU (every gradient rounded to 8 or 11
 * mantissa bits). Here both runs round the same way, so they differ far
 * less (the GEMMs' sums in another order can move a gradient across a
 * rounding boundary: one 16-bit ulp on a few elements; the measured worst
 * is printed). A hook whose cast back is missing or reads the buffer
 * before the all-reduce wrote it trains on zeros or one rank's gradients
 * and fails even that bound by step 2 or 3, and without device casts the
 * cuda run is refused at create.
 * Skips (77) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

#define STEPS 3
#define HOOK_TOL 2e-2

static int write_config(const char *dir, const char *name, const char *corpus, const char *hook)
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
		"  strategy: {name: ddp, comm_hook: %s, bucket_cap_mb: 0.004,\n"
		"             first_bucket_mb: 0.002}\n"
		"  max_steps: %d\n"
		"  log_every_n_steps: 1\n"
		"  limit_val_batches: 0\n"
		"  enable_checkpointing: false\n"
		"  enable_progress_bar: false\n"
		"  default_root_dir: %s/runs\n"
		"model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256,\n"
		"        block_size: 8, bias: true, dropout: 0.0}\n"
		"data: {class: text, paths: [%s], block_size: 8, batch_size: 2,\n"
		"       val_fraction: 0.1, shuffle: false}\n"
		"optimizer: {name: adamw, lr: 3.0e-3, weight_decay: 0.1}\n",
		hook, STEPS, dir, corpus);
	return fclose(f);
}

static void test_hook(const char *dir, const char *corpus, const char *hook)
{
	char cname[64], gname[64];
	double cl[STEPS], gl[STEPS], worst = 0.0;
	int nc, ng;

	snprintf(cname, sizeof(cname), "ddp_%s_cpu", hook);
	snprintf(gname, sizeof(gname), "ddp_%s_cuda", hook);
	WT_REQUIRE(write_config(dir, cname, corpus, hook) == 0);
	WT_CHECK(ct_fit(dir, cname, cname, "cpu", "") == 0);
	WT_CHECK(ct_fit(dir, cname, gname, "cuda", "") == 0);
	nc = ct_read_metrics(dir, cname, 0, cl, NULL, STEPS);
	ng = ct_read_metrics(dir, gname, 0, gl, NULL, STEPS);
	WT_CHECK(nc == STEPS && ng == STEPS);
	for (int s = 0; s < nc && s < ng; s++) {
		double rel = fabs(gl[s] - cl[s]) / fabs(cl[s]);

		WT_CLOSE(gl[s], cl[s], HOOK_TOL, 0.0);
		worst = rel > worst ? rel : worst;
	}
	fprintf(stderr, "ddp comm_hook %s: cuda vs cpu worst loss rel %.3g over %d steps\n",
		hook, worst, nc < ng ? nc : ng);
	/* the runs trained */
	WT_CHECK(nc == STEPS && cl[STEPS - 1] < cl[0]);
}

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_ddp_hooks_XXXXXX", corpus[256];

	ct_setup("test_cuda_ddp_hooks");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	test_hook(dir, corpus, "bf16");
	test_hook(dir, corpus, "fp16");
	ct_finish_dir(dir);
	return wt_done("test_cuda_ddp_hooks");
}
