/* The optimizer step of `weft fit` on CUDA (plugins/strategies/ddp/
 * replicated_device.c), on a GPU:
 *   - the extras' sum_squares (clipping's norm) equals a sum in double on
 *     the host within 1e-10 relative (both sum in double; only the order
 *     differs: positive terms, so at most ~log2(n) * 1e-16 relative with
 *     pairwise sums, n * 1e-16 with the host's running sum: 1e-10 for
 *     n = 1e6 in the worst case, ~1e-13 in practice for random terms; a
 *     block or element left out is off by 1e-6 or more) and
 *     gives the same bits twice (fixed order);
 *   - `weft fit` of a small GPT (1 block of width 32, context 16), 4 steps
 *     with gradient clipping at 0.5 (so the norm is taken on the device),
 *     runs on cuda with adamw (logged "(fused kernel)") and with sgd
 *     momentum ("host-staged"), and every step's train loss and gradient
 *     norm is within 2e-4 relative of the same run on the CPU
 *     (fit_table.h), whose loss falls by more than 1e-2.
 *     Why 2e-4: both are F32 (cuBLAS without TF32 matches the CPU within
 *     1e-5 relative per sqrt(k)), so each step's gradients differ by
 *     ~1e-5 relative; AdamW's first steps move each weight by about lr
 *     whatever the gradient's size, so those differences reach the weights
 *     as ~1e-5 x lr and the loss by far less than 1e-4. A wrong optimizer
 *     does not hide under it: at lr 1e-2 one step moves the loss by ~3e-2;
 *     the subtlest defect, AdamW's decay left out of the device kernel,
 *     moves step 4's loss and norm by 5.5e-4 relative (measured under the
 *     emulator), and missing bias correction, clipping or a step not
 *     taken move them by more.
 * Skips (77) without a GPU. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit_table.h"
#include "cuda/kernels_cuda.h"

#define STEPS 4

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

/* A small GPT on one rank: 4 steps (enough to compare every step's loss
 * and norm) at rates high enough that the loss falls by more than 1e-2
 * within them. */
#define MODEL "class: gpt, n_layer: 1, n_head: 2, n_embd: 32, vocab_size: 256, bias: true"

static const ft_row rows[] = {
	{ .name = "adamw_cuda", .devices = 1, .model = MODEL, .block = 16, .steps = STEPS,
	  .optimizer = "{name: adamw, lr: 1.0e-2, weight_decay: 0.1}", .rtol = 2e-4 },
	{ .name = "sgd_cuda", .devices = 1, .model = MODEL, .block = 16, .steps = STEPS,
	  .optimizer = "{name: sgd, lr: 0.3, momentum: 0.9}", .rtol = 2e-4 },
};

/* Row r on cuda against the CPU; its log names the step's path, and the
 * reference's loss fell by more than 1e-2. */
static void test_fit(const char *dir, const char *corpus, const ft_row *r,
		     const char *path_logged)
{
	char log[1200], ref[128];
	double cl[STEPS];

	ft_check_row(dir, corpus, r, "");
	snprintf(log, sizeof(log), "%s/%s.log", dir, r->name);
	WT_CHECK(ct_file_has(log, path_logged) && ct_file_has(log, "on cuda:0"));
	ft_ref_name(r, ref, sizeof(ref));
	WT_CHECK(ct_read_metrics(dir, ref, 0, cl, NULL, STEPS) == STEPS &&
		 cl[STEPS - 1] < cl[0] - 1e-2);
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
	test_fit(dir, corpus, &rows[0], "(fused kernel)");
	test_fit(dir, corpus, &rows[1], "(host-staged");
	ct_finish_dir(dir);
	return wt_done("test_cuda_fit_optim");
}
