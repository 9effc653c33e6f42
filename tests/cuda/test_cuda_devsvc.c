/* The device services of strategies on the CUDA table (weft/device.h,
 * since ABI 1.3) against the CPU table's, on the same inputs:
 *   - optim_step (Adam with L2 decay, AdamW, AdamW with amsgrad, SGD with
 *     and without momentum, Nesterov and decay; ranges
 *     with and without decay, gradients and state packed at other offsets
 *     than the parameters): parameters and slots equal to the CPU's bit
 *     for bit after 4 steps (both round every operation in the plugin's
 *     order, without fused multiply-adds: tolerance 0), and elements no
 *     range covers untouched;
 *   - sum_squares_ranges: within 1e-12 relative of the CPU's (both sum
 *     in double; only the order differs: positive terms, ~log2(n) x 1e-16
 *     with tree sums; a range left out or counted twice is off by 1e-3 or
 *     more here) and the same bits twice;
 *   - copy_ranges: a pack then an unpack gives the CPU's bytes exactly.
 * Skips (77) without a GPU. */
#include <string.h>

#include "cuda_test.h"

#define N 3000
#define STEPS 4

static void fillr(float *x, int64_t n, uint32_t seed, float scale)
{
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = scale * ((float)(seed >> 8) / 8388608.0f - 1.0f);
	}
}

static const weft_optim_range ranges[] = {
	{ .param = 5, .grad = 0, .state = 1, .count = 700, .decay = 1 },
	{ .param = 705, .grad = 700, .state = 701, .count = 33, .decay = 0 },
	{ .param = 740, .grad = 733, .state = 734, .count = 2000, .decay = 1 },
	{ .param = 2800, .grad = 2733, .state = 2734, .count = 150, .decay = 0 },
};
#define NR (sizeof(ranges) / sizeof(ranges[0]))

/* sgd > 0: SGD (1 plain with decay, 2 momentum and dampening, 3
 * Nesterov) instead of Adam. */
static void optim(int decoupled, int amsgrad, double wd, int sgd)
{
	ct_dev gpu = ct_gpu_dev(WEFT_F32);
	float *p = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
	float *cs[3], *gs[3], *out = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
	float *dp, *dg;
	int nslots = sgd == 1 ? 0 : sgd ? 1 : amsgrad ? 3 : 2;

	WT_REQUIRE(p && g && out && want);
	fillr(p, N, 1, 1.0f);
	dp = ct_in(&gpu, p, N);
	for (int i = 0; i < nslots; i++) {
		cs[i] = calloc(N, sizeof(float));
		WT_REQUIRE(cs[i]);
		gs[i] = ct_alloc(&gpu, N * sizeof(float));
	}
	dg = ct_alloc(&gpu, N * sizeof(float));
	for (int step = 1; step <= STEPS; step++) {
		weft_optim_kernel k;

		if (sgd)
			weft_optim_kernel_sgd(&k, sgd == 1 ? 0.0 : 0.9, sgd == 2 ? 0.1 : 0.0, sgd == 3,
					      wd, 2e-2 * step, step, 0.6);
		else
			weft_optim_kernel_adam(&k, decoupled, amsgrad, 0.9, 0.95, 1e-8, wd,
					       2e-3 * step, step, 0.6);
		fillr(g, N, 50 + (uint32_t)step, 3.0f);
		WT_OK(ct_gpu->copy(ct_kctx, dg, g, N * sizeof(float), WEFT_COPY_HOST_TO_DEVICE));
		WT_OK(ct_cpu->optim_step(NULL, &k, ranges, NR, p, g, cs));
		WT_OK(ct_gpu->optim_step(ct_kctx, &k, ranges, NR, dp, dg, gs));
	}
	ct_out(&gpu, dp, N, out);
	WT_CHECK(memcmp(out, p, N * sizeof(float)) == 0);
	for (int i = 0; i < nslots; i++) {
		ct_out(&gpu, gs[i], N, out);
		WT_CHECK(memcmp(out, cs[i], N * sizeof(float)) == 0);
	}
	/* the parameters no range covers kept their first values */
	fillr(want, N, 1, 1.0f);
	WT_CHECK(p[0] == want[0] && p[4] == want[4] && p[2999] == want[2999]);
	for (int i = 0; i < nslots; i++)
		free(cs[i]);
	free(p);
	free(g);
	free(out);
	free(want);
	ct_release(&gpu);
}

static void sums(void)
{
	ct_dev gpu = ct_gpu_dev(WEFT_F32);
	int64_t n = 400000;
	float *x = ct_random(77, n, -2.0f, 2.0f, WEFT_F32);
	void *dx = ct_in(&gpu, x, n);
	weft_elem_range r[4] = { { 3, 0 }, { 10, 1000 }, { 2000, 300000 }, { 399000, 1000 } };
	double want = -1, got = -2, again = -3;

	WT_OK(ct_cpu->sum_squares_ranges(NULL, x, r, 4, &want));
	WT_OK(ct_gpu->sum_squares_ranges(ct_kctx, dx, r, 4, &got));
	WT_OK(ct_gpu->sum_squares_ranges(ct_kctx, dx, r, 4, &again));
	WT_CLOSE(got, want, 1e-12, 0.0);
	WT_CHECK(memcmp(&got, &again, sizeof(got)) == 0);
	WT_OK(ct_gpu->sum_squares_ranges(ct_kctx, dx, r, 0, &got));
	WT_CHECK(got == 0.0);
	free(x);
	ct_release(&gpu);
}

static void copies(void)
{
	ct_dev gpu = ct_gpu_dev(WEFT_F32);
	float src[64], packed[16], back[64], got[64];
	weft_copy_range pack[3] = { { 0, 3, 4 }, { 4, 17, 5 }, { 9, 57, 7 } };
	weft_copy_range unpack[3] = { { 3, 0, 4 }, { 17, 4, 5 }, { 57, 9, 7 } };
	void *ds, *dp, *db;

	fillr(src, 64, 5, 1.0f);
	memset(back, 0, sizeof(back));
	ds = ct_in(&gpu, src, 64);
	dp = ct_alloc(&gpu, sizeof(packed));
	db = ct_alloc(&gpu, sizeof(back));
	WT_OK(ct_cpu->copy_ranges(NULL, 4, pack, 3, packed, src));
	WT_OK(ct_cpu->copy_ranges(NULL, 4, unpack, 3, back, packed));
	WT_OK(ct_gpu->copy_ranges(ct_kctx, 4, pack, 3, dp, ds));
	WT_OK(ct_gpu->copy_ranges(ct_kctx, 4, unpack, 3, db, dp));
	ct_out(&gpu, db, 64, got);
	WT_CHECK(memcmp(got, back, sizeof(back)) == 0);
	WT_FAILS(ct_gpu->copy_ranges(ct_kctx, 3, pack, 3, dp, ds), WEFT_ERR_INVALID_ARG,
		 "elements of 3 bytes", "1, 2, 4 or 8");
	ct_release(&gpu);
}

int main(void)
{
	ct_setup("test_cuda_devsvc");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, optim_step) && ct_gpu->optim_step &&
		   ct_gpu->copy_ranges && ct_gpu->sum_squares_ranges);
	optim(1, 0, 0.1, 0);
	optim(0, 0, 0.05, 0);
	optim(1, 1, 0.1, 0);
	optim(0, 0, 0.01, 1);
	optim(0, 0, 0.01, 2);
	optim(0, 0, 0.0, 3);
	sums();
	copies();
	ct_teardown();
	return wt_done("test_cuda_devsvc");
}
