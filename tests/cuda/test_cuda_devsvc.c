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
 *   - copy_ranges: a pack then an unpack gives the CPU's bytes exactly;
 *   - vocab_ce_stats and vocab_ce_backward (since ABI 1.4), on rank 1 of
 *     3 of a vocabulary split (37 rows of 300 columns, targets inside
 *     and outside this rank's columns, an ignored row): the row maxima
 *     and target logits equal to the CPU's exactly (no arithmetic), the
 *     sums of exp within 1e-12 relative (both in double, only the order
 *     of the sums differs), the gradients within 1e-6 relative (each
 *     element is one double expression rounded to float once, which a
 *     last-bit difference of the sum can round the other way: 6e-8; a
 *     one-hot at the wrong column or a row not skipped is off by the
 *     scale, 0.37) and the ignored row untouched.
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

static void vocab(void)
{
	enum { R = 37, V = 300 };
	const int64_t begin = 300, ignore = -100;
	ct_dev gpu = ct_gpu_dev(WEFT_F32);
	float *z = ct_random(91, R * V, -8.0f, 8.0f, WEFT_F32);
	float *d0 = ct_random(92, R * V, -1.0f, 1.0f, WEFT_F32);
	float want_d[R * V], got_d[R * V];
	int64_t tg[R];
	double want_mx[R], got_mx[R], gmax[R], want[2 * R], got[2 * R];
	void *dz, *dtg, *dmx, *dst, *dd;

	for (int64_t r = 0; r < R; r++) /* a third in this rank's columns */
		tg[r] = r == 5 ? ignore : (r * 131) % (3 * V);
	dz = ct_in(&gpu, z, R * V);
	dd = ct_in(&gpu, d0, R * V);
	dtg = ct_in_raw(&gpu, tg, sizeof(tg));
	dmx = ct_alloc(&gpu, sizeof(gmax));
	dst = ct_alloc(&gpu, sizeof(got));
	WT_OK(ct_cpu->vocab_ce_stats(NULL, R, V, z, WEFT_I64, tg, begin, NULL, want_mx));
	WT_OK(ct_gpu->vocab_ce_stats(ct_kctx, R, V, dz, WEFT_I64, dtg, begin, NULL, dmx));
	WT_OK(ct_gpu->copy(ct_kctx, got_mx, dmx, sizeof(got_mx), WEFT_COPY_DEVICE_TO_HOST));
	WT_CHECK(memcmp(got_mx, want_mx, sizeof(got_mx)) == 0);
	/* the global maxima: another rank's larger ones for some rows */
	for (int64_t r = 0; r < R; r++)
		gmax[r] = want_mx[r] + (r % 3 == 0 ? 0.5 : 0.0);
	WT_OK(ct_gpu->copy(ct_kctx, dmx, gmax, sizeof(gmax), WEFT_COPY_HOST_TO_DEVICE));
	WT_OK(ct_cpu->vocab_ce_stats(NULL, R, V, z, WEFT_I64, tg, begin, gmax, want));
	WT_OK(ct_gpu->vocab_ce_stats(ct_kctx, R, V, dz, WEFT_I64, dtg, begin, dmx, dst));
	WT_OK(ct_gpu->copy(ct_kctx, got, dst, sizeof(got), WEFT_COPY_DEVICE_TO_HOST));
	for (int64_t r = 0; r < R; r++) {
		WT_CLOSE(got[r], want[r], 1e-12, 0.0);
		WT_CHECK(got[R + r] == want[R + r]);
	}
	memcpy(want_d, d0, sizeof(want_d));
	WT_OK(ct_cpu->vocab_ce_backward(NULL, R, V, z, WEFT_I64, tg, ignore, begin, gmax, want,
					0.37, want_d));
	WT_OK(ct_gpu->vocab_ce_backward(ct_kctx, R, V, dz, WEFT_I64, dtg, ignore, begin, dmx, dst,
					0.37, dd));
	ct_out(&gpu, dd, R * V, got_d);
	ct_expect_close("vocab_ce_backward", WEFT_F32, got_d, want_d, R * V,
			(ct_tol){ 1e-6, 1e-9 });
	ct_expect_close("vocab_ce_backward (ignored row)", WEFT_F32, got_d + 5 * V, d0 + 5 * V, V,
			(ct_tol){ 0.0, 0.0 });
	free(z);
	free(d0);
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
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, vocab_ce_backward) &&
		   ct_gpu->vocab_ce_stats && ct_gpu->vocab_ce_backward);
	vocab();
	ct_teardown();
	return wt_done("test_cuda_devsvc");
}
