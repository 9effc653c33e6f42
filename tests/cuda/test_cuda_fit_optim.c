/* The optimizer step of `weft fit` on CUDA (plugins/strategies/ddp/
 * replicated_device.c), on a GPU:
 *   - the extras' sum_squares (clipping's norm) equals a sum in double on
 *     the host within 1e-10 relative (both sum in double; only the order
 *     differs: positive terms, so at most ~log2(n) * 1e-16 relative with
 *     pairwise sums, n * 1e-16 with the host's running sum: 1e-10 for
 *     n = 1e6 in the worst case, ~1e-13 in practice for random terms; a
 *     block or element left out is off by 1e-6 or more) and
 *     gives the same bits twice (fixed order);
 *   - `weft fit` of a small GPT, 8 steps with gradient clipping at 0.5 (so
 *     the norm is taken on the device), runs on cuda with adamw (logged
 *     "(fused kernel)") and with sgd momentum ("host-staged"), and every
 *     step's train loss is within 2e-4 relative of the same run on the CPU.
 *     Why 2e-4: both are F32 (cuBLAS without TF32 matches the CPU within
 *     1e-5 relative per sqrt(k)), so each step's gradients differ by
 *     ~1e-5 relative; AdamW's first steps move each weight by about lr
 *     whatever the gradient's size, so those differences reach the weights
 *     as ~1e-5 x lr and the loss by far less than 1e-4. A wrong optimizer
 *     does not hide under it: at lr 3e-3 one step moves the loss by ~1e-2,
 *     so missing bias correction, decay, clipping or a step not taken
 *     changes the losses by 1e-3 or more within 8 steps.
 * Skips (77) without a GPU. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"
#include "cuda/kernels_cuda.h"

#define STEPS 8

static const weft_cuda_extras *extras;

static void test_sum_squares(int64_t n)
{
	ct_dev gpu = ct_gpu_dev(WEFT_F32);
	float *x = ct_random(900 + (uint64_t)n, n, -3.0f, 3.0f, WEFT_F32);
	void *dx = ct_in(&gpu, x, n);
	double want = 0.0, got = -1.0, again = -2.0;

	for (int64_t i = 0; i < n; i++)
		want += (double)x[i] * (double)x[i];

	WT_OK(extras->sum_squares(ct_kctx, n, dx, &got));
	WT_OK(extras->sum_squares(ct_kctx, n, dx, &again));
	WT_CLOSE(got, want, 1e-10, 0.0);
	WT_CHECK(memcmp(&got, &again, sizeof(got)) == 0);
	if (n == 0)
		WT_CHECK(got == 0.0);
	ct_release(&gpu);
	free(x);
}

/* Writes the config of a run into dir/NAME.yaml; returns 0 on success. */
static int write_config(const char *dir, const char *name, const char *corpus,
			const char *optimizer)
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
		"  devices: 1\n"
		"  max_steps: %d\n"
		"  log_every_n_steps: 1\n"
		"  limit_val_batches: 0\n"
		"  enable_checkpointing: false\n"
		"  enable_progress_bar: false\n"
		"  gradient_clip_val: 0.5\n"
		"  default_root_dir: %s/runs\n"
		"model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 64, vocab_size: 256,\n"
		"        block_size: 32, bias: true, dropout: 0.0}\n"
		"data: {class: text, paths: [%s], block_size: 32, batch_size: 8,\n"
		"       val_fraction: 0.1, shuffle: false}\n"
		"optimizer: %s\n",
		STEPS, dir, corpus, optimizer);
	return fclose(f);
}

static void test_fit(const char *dir, const char *corpus, const char *name, const char *optimizer,
		     const char *path_logged)
{
	char cmd[4096], log[1200], cname[64], gname[64];
	double cpu[STEPS], gpu[STEPS];
	int nc, ng, rc;

	snprintf(cname, sizeof(cname), "%s_cpu", name);
	snprintf(gname, sizeof(gname), "%s_cuda", name);
	WT_REQUIRE(write_config(dir, name, corpus, optimizer) == 0);
	snprintf(cmd, sizeof(cmd), "'%s' fit --config '%s/%s.yaml' --trainer.name=%s "
		 "> '%s/%s.log' 2>&1", WEFT_CLI, dir, name, cname, dir, cname);
	rc = system(cmd);
	WT_CHECK(rc == 0);
	snprintf(cmd, sizeof(cmd), "'%s' fit --config '%s/%s.yaml' --trainer.name=%s "
		 "--trainer.accelerator=cuda > '%s/%s.log' 2>&1", WEFT_CLI, dir, name, gname, dir,
		 gname);
	rc = system(cmd);
	WT_CHECK(rc == 0);
	snprintf(log, sizeof(log), "%s/%s.log", dir, gname);
	if (rc != 0) {
		snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", log);
		if (system(cmd) != 0)
			fprintf(stderr, "%s: no log at %s\n", name, log);
	}
	WT_CHECK(ct_file_has(log, path_logged) && ct_file_has(log, "on cuda:0"));
	nc = ct_read_metrics(dir, cname, 0, cpu, NULL, STEPS);
	ng = ct_read_metrics(dir, gname, 0, gpu, NULL, STEPS);
	WT_CHECK(nc == STEPS && ng == STEPS);
	for (int s = 0; s < nc && s < ng; s++)
		WT_CLOSE(gpu[s], cpu[s], 2e-4, 0.0);
	/* the runs trained: the loss fell */
	WT_CHECK(nc == STEPS && cpu[STEPS - 1] < cpu[0] - 1e-2);
}

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_fit_optim_XXXXXX", corpus[256];
	void *kh;
	weft_cuda_extras_fn fn;

	ct_setup("test_cuda_fit_optim");
	kh = ct_kernels_handle(ct_gpu);
	WT_REQUIRE(kh != NULL); /* loaded by weft_kernels_get in ct_setup */
	fn = (weft_cuda_extras_fn)(uintptr_t)dlsym(kh, WEFT_CUDA_EXTRAS_SYMBOL);
	WT_REQUIRE(fn != NULL);
	extras = fn();
	WT_REQUIRE(WEFT_HAS_MEMBER(extras, weft_cuda_extras, sum_squares) && extras->sum_squares);
	test_sum_squares(0);
	test_sum_squares(1);
	test_sum_squares(1000003);
	ct_teardown();
	dlclose(kh);

	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	test_fit(dir, corpus, "adamw", "{name: adamw, lr: 3.0e-3, weight_decay: 0.1}",
		 "(fused kernel)");
	test_fit(dir, corpus, "sgd", "{name: sgd, lr: 0.05, momentum: 0.9}", "(host-staged");
	ct_finish_dir(dir);
	return wt_done("test_cuda_fit_optim");
}
