/* The fused (flash) causal attention of the CUDA table against the CPU's
 * materialized attention_gqa (weft/kernels.h, since ABI 1.4; the
 * reference is cuda_test.h's ct_attention_ref, F32 on the same inputs
 * rounded to the dtype): output, the saved log-sum-exp and the
 * accumulated dqkv (dq, dk and dv, a kv head's summed over its group),
 * B 2, nh 4 with nkv 4, 2 and 1 (MHA, GQA, MQA), head dims 64 and 128, at
 * T 1, 7, 65 and 130 (one row; within a tile; a 64-row tile and a row
 * past it; two tiles and two rows), in F32 (the scalar kernels) and BF16
 * and F16 (at these head dims the tensor-core kernels: the forward of
 * cuda_flash_mma_fwd.cu, the backward of cuda_flash_mma_bwd.cu); also hs
 * 24 in F32 and BF16 (the scalar kernels, which keep every head dim the
 * tensor cores do not take), and B 1, nh 6, nkv 2 (groups of 3), hs 128,
 * T 97; for the tensor-core forward's tiles of 64 query rows and 64 (hs
 * 64) or 32 (hs 128) keys: T 64, T 33 at hs 128, T 200 at hs 128 (GQA 2),
 * B 3, T 100, nh 4 over nkv 1 (GQA 4); for the backward's 64-row tiles
 * (hs 128 in two column passes), each twice: T 128 (whole tiles: only the
 * diagonal masked) with groups of 4, B 3 with T 64, groups of 4 and hs
 * 128; and tensors 2 bytes off 16-byte alignment (both passes move
 * 16-byte pieces, so the scalar kernels take them; under the emulator a
 * misaligned 128-bit access kills the process). Also: the backward gives
 * the same bits twice (no atomics; BF16 and F16 on tensor cores, F32),
 * flash_attention_backward_write (since ABI 1.7) over a dqkv full of other
 * values gives the bits flash_attention_backward adds into zeros (in the
 * cases run twice and the misaligned one: tensor cores and scalar), and
 * the core op's backward takes it for qkv's first contribution, zeroing
 * nothing, a
 * head dim above WEFT_FLASH_MAX_HEAD_DIM is refused with a message naming
 * it, and the core op weft_op_attention_gqa takes the fused path on CUDA
 * (its activations hold no T x T block) with the CPU context's output and
 * gradient. Each case prints the share of its tolerances the worst
 * element used.
 *
 * Tolerances, relative and absolute. F32 (ct_tol_for: 1e-5 for values
 * about 1, times a scale): output scale 1 (the same sums in another
 * order), gradients scale 2 (two chained reductions, over keys and over
 * the head dim). Tensor cores, u the dtype's unit roundoff (2^-8 BF16,
 * 2^-11 F16): output rtol 2u, atol 4u: the output is rounded once to the
 * dtype (u relative) and P is rounded to the dtype as the operand of P V
 * (at most u of sum_j p_j |v_j| <= max |v| = 2, absolute), with a margin
 * of 2 for the F32 sums in another order; dqkv rtol 4u, atol 8u: the
 * stored sum dq0 + grad is rounded once (u) and both P and dS are rounded
 * as operands of sums over up to group x T terms of either sign (a few u
 * in all), margin 2. Other 16-bit cases (the scalar kernels): as
 * test_cuda_attention, ct_tol_for scale 2 forward and 4 backward. The
 * LSE is compared with a double-precision sum of the rounded inputs: 1e-5
 * relative and absolute in every dtype (F32 scores and statistics
 * whatever the storage). */
#include <math.h>

#include "cuda_test.h"

/* The share of `tol` the worst element uses: max |got - want| / (atol +
 * rtol |want|); above 1 fails. */
static double tol_used(const float *got, const float *want, int64_t n, ct_tol tol)
{
	double worst = 0.0;

	for (int64_t i = 0; i < n; i++)
		worst = fmax(worst, fabs((double)got[i] - (double)want[i]) /
					    (tol.atol + tol.rtol * fabs((double)want[i])));
	return worst;
}

/* A device copy of h[0..n) that starts `shift` elements past a 16-byte
 * boundary (its allocation's start). */
static void *in_shifted(ct_dev *d, const float *h, int64_t n, int shift)
{
	float *t = calloc((size_t)(n + shift), 4);
	void *p;

	WT_REQUIRE(t);
	memcpy(t + shift, h, (size_t)n * 4);
	p = ct_in(d, t, n + shift);
	free(t);
	return (char *)p + (size_t)shift * ct_size(d->dt);
}

/* One case; `shift` > 0 puts every tensor that many elements off 16-byte
 * alignment (the tensor-core kernels move 16-byte pieces: such calls take
 * the scalar kernels, held to their tolerances). */
static void flash_case_at(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv,
			  int64_t hs, int twice, int shift)
{
	int64_t nq = B * T * (nh + 2 * nkv) * hs, no = B * T * nh * hs, nl = B * nh * T;
	float *qkv = ct_random(900 + T + hs, nq, -2.0f, 2.0f, dt);
	float *dout = ct_random(901 + T + hs, no, -1.0f, 1.0f, dt);
	float *dq0 = ct_random(902 + T + hs, nq, -0.5f, 0.5f, dt);
	float *out[2], *dq[2], *lse = malloc((size_t)nl * 4), *lse_ref = malloc((size_t)nl * 4);
	float *dq_again = malloc((size_t)nq * 4);
	float *dq_zero = malloc((size_t)nq * 4), *dq_write = malloc((size_t)nq * 4);
	ct_dev gpu = ct_gpu_dev(dt);
	char what[160];
	int tc = dt != WEFT_F32 && (hs == 64 || hs == 128) && !shift;
	double u = dt == WEFT_BF16 ? 0x1p-8 : 0x1p-11; /* 16-bit unit roundoff */
	ct_tol tol_out = tc ? (ct_tol){ 2 * u, 4 * u } : ct_tol_for(dt, dt == WEFT_F32 ? 1.0 : 2.0);
	ct_tol tol_grad = tc ? (ct_tol){ 4 * u, 8 * u } : ct_tol_for(dt, dt == WEFT_F32 ? 2.0 : 4.0);
	ct_tol tol_lse = ct_tol_for(WEFT_F32, 1.0);

	WT_REQUIRE(lse && lse_ref && dq_again);
	for (int k = 0; k < 2; k++) {
		out[k] = malloc((size_t)no * 4);
		dq[k] = malloc((size_t)nq * 4);
		WT_REQUIRE(out[k] && dq[k]);
	}
	/* the reference: the CPU's materialized attention */
	ct_attention_ref(B, T, nh, nkv, hs, qkv, dout, dq0, out[0], dq[0]);
	/* flash on the CUDA table */
	{
		void *qd = in_shifted(&gpu, qkv, nq, shift);
		void *od = (char *)ct_alloc(&gpu, (size_t)(no + shift) * ct_size(dt)) +
			   (size_t)shift * ct_size(dt);
		float *ld = ct_alloc(&gpu, (size_t)nl * 4);
		void *dod = in_shifted(&gpu, dout, no, shift), *dqd = in_shifted(&gpu, dq0, nq, shift);

		WT_OK(gpu.t->flash_attention_forward(gpu.kctx, dt, B, T, nh, nkv, hs, qd, od, ld));
		WT_OK(gpu.t->flash_attention_backward(gpu.kctx, dt, B, T, nh, nkv, hs, qd, od, ld,
						      dod, dqd));
		ct_out(&gpu, od, no, out[1]);
		ct_out_f32(&gpu, ld, nl, lse);
		ct_out(&gpu, dqd, nq, dq[1]);
		if (twice) {
			void *dqd2 = in_shifted(&gpu, dq0, nq, shift);

			WT_OK(gpu.t->flash_attention_backward(gpu.kctx, dt, B, T, nh, nkv, hs, qd,
							      od, ld, dod, dqd2));
			ct_out(&gpu, dqd2, nq, dq_again);
		}
		if (twice || shift) {
			/* the write mode over dq0 (not read) against adding into zeros */
			float *zeros = calloc((size_t)nq, 4);
			void *dqz, *dqw;

			WT_REQUIRE(zeros && dq_zero && dq_write);
			dqz = in_shifted(&gpu, zeros, nq, shift);
			dqw = in_shifted(&gpu, dq0, nq, shift);
			WT_OK(gpu.t->flash_attention_backward(gpu.kctx, dt, B, T, nh, nkv, hs, qd,
							      od, ld, dod, dqz));
			WT_OK(gpu.t->flash_attention_backward_write(gpu.kctx, dt, B, T, nh, nkv, hs,
								    qd, od, ld, dod, dqw));
			ct_out(&gpu, dqz, nq, dq_zero);
			ct_out(&gpu, dqw, nq, dq_write);
			free(zeros);
		}
		ct_release(&gpu);
	}
	ct_attention_lse_ref(qkv, B, T, nh, nkv, hs, lse_ref);
	snprintf(what, sizeof(what), "flash_attention B %lld T %lld nh %lld nkv %lld hs %lld%s",
		 (long long)B, (long long)T, (long long)nh, (long long)nkv, (long long)hs,
		 shift ? " (tensors off 16-byte alignment)" : "");
	ct_expect_close(what, dt, out[1], out[0], no, tol_out);
	ct_expect_close(what, WEFT_F32, lse, lse_ref, nl, tol_lse);
	ct_expect_close(what, dt, dq[1], dq[0], nq, tol_grad);
	fprintf(stderr, "%s %s%s: share of the tolerance used: out %.3f, lse %.3f, dqkv %.3f\n",
		what, ct_name(dt), tc ? " (tensor cores)" : "",
		tol_used(out[1], out[0], no, tol_out), tol_used(lse, lse_ref, nl, tol_lse),
		tol_used(dq[1], dq[0], nq, tol_grad));
	if (twice) {
		wt_checks++;
		if (memcmp(dq_again, dq[1], (size_t)nq * 4)) {
			wt_failures++;
			fprintf(stderr, "%s (%s): a second backward gave other bits\n", what,
				ct_name(dt));
		}
	}
	if (twice || shift) {
		wt_checks++;
		if (memcmp(dq_write, dq_zero, (size_t)nq * 4)) {
			wt_failures++;
			fprintf(stderr, "%s (%s): flash_attention_backward_write over a filled dqkv "
				"differs from flash_attention_backward into zeros\n", what, ct_name(dt));
		}
	}
	for (int k = 0; k < 2; k++) {
		free(out[k]);
		free(dq[k]);
	}
	free(dq_zero);
	free(dq_write);
	free(lse);
	free(lse_ref);
	free(dq_again);
	free(qkv);
	free(dout);
	free(dq0);
}

static void flash_case(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv, int64_t hs,
		       int twice)
{
	flash_case_at(dt, B, T, nh, nkv, hs, twice, 0);
}

/* The core's use of the write mode: a counting copy of the CUDA table
 * installed while weft_op_attention_gqa's backward runs on a fresh leaf
 * qkv (its gradient's first contribution). The backward must call
 * flash_attention_backward_write once, the accumulating form never, and
 * zero nothing (before ABI 1.7 the core zero-filled dqkv, then added). */
static const weft_kernel_table *real_table;
static int n_bw_write, n_bw_add, n_zero;

static weft_status count_bw_write(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t nh,
				  int64_t nkv, int64_t hs, const void *qkv, const void *out,
				  const float *lse, const void *dout, void *dqkv)
{
	n_bw_write++;
	return real_table->flash_attention_backward_write(kctx, dt, B, T, nh, nkv, hs, qkv, out,
							  lse, dout, dqkv);
}

static weft_status count_bw_add(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t nh,
				int64_t nkv, int64_t hs, const void *qkv, const void *out,
				const float *lse, const void *dout, void *dqkv)
{
	n_bw_add++;
	return real_table->flash_attention_backward(kctx, dt, B, T, nh, nkv, hs, qkv, out, lse,
						    dout, dqkv);
}

static weft_status count_zero(void *kctx, void *dst, size_t bytes)
{
	n_zero++;
	return real_table->zero(kctx, dst, bytes);
}

static void op_takes_write_mode(void)
{
	static weft_kernel_table counting;
	int64_t B = 1, T = 70, nh = 4, nkv = 2, hs = 64, s[3] = { B, T, (nh + 2 * nkv) * hs };
	int64_t so[3] = { B, T, nh * hs };
	float *qkv_h = ct_random(960, B * T * (nh + 2 * nkv) * hs, -2.0f, 2.0f, WEFT_BF16);
	float *gy_h = ct_random(961, B * T * nh * hs, -1.0f, 1.0f, WEFT_BF16);
	weft_ctx_options o = { .device = { .type = WEFT_DEVICE_CUDA, .index = 0 } };
	weft_ctx *ctx = NULL;
	weft_tensor *qkv, *qkv16, *gy, *y;

	WT_REQUIRE(qkv_h && gy_h);
	real_table = ct_gpu;
	counting = *ct_gpu;
	counting.flash_attention_backward_write = count_bw_write;
	counting.flash_attention_backward = count_bw_add;
	counting.zero = count_zero;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CUDA, &counting));
	WT_OK(weft_ctx_create(&o, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "qkv", WEFT_F32, 3, s, &qkv));
	WT_OK(weft_ctx_tensor(ctx, "gy", WEFT_BF16, 3, so, &gy));
	WT_OK(weft_tensor_copy_from_host(qkv, qkv_h, weft_tensor_nbytes(qkv)));
	WT_OK(weft_op_cast(ctx, qkv, WEFT_BF16, &qkv16));
	weft_tensor_requires_grad(qkv16, 1);
	WT_OK(weft_op_attention_gqa(ctx, qkv16, nh, nkv, &y));
	n_bw_write = n_bw_add = n_zero = 0;
	WT_OK(weft_backward_from(ctx, y, gy));
	WT_CHECK(n_bw_write == 1);
	WT_CHECK(n_bw_add == 0);
	WT_CHECK(n_zero == 0);
	fprintf(stderr, "weft_op_attention_gqa backward (bf16, hs 64): %d write-mode call(s), %d "
		"accumulating, %d zero fill(s)\n", n_bw_write, n_bw_add, n_zero);
	weft_ctx_free(ctx);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CUDA, ct_gpu));
	free(qkv_h);
	free(gy_h);
}

int main(void)
{
	static const int64_t Ts[] = { 1, 7, 65, 130 }, nkvs[] = { 4, 2, 1 }, hss[] = { 64, 128 };

	ct_setup("test_cuda_flash");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, flash_attention_backward));
	WT_REQUIRE(ct_gpu->flash_attention_forward && ct_gpu->flash_attention_backward);
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, flash_attention_backward_write) &&
		   ct_gpu->flash_attention_backward_write);
	/* the CPU table has none: the core op keeps its materialized path */
	WT_CHECK(!ct_cpu->flash_attention_forward && !ct_cpu->flash_attention_backward);
	for (int i = 0; i < CT_NDTYPES; i++) {
		weft_dtype dt = ct_float_dtypes[i];

		for (size_t a = 0; a < sizeof(Ts) / sizeof(Ts[0]); a++)
			for (size_t c = 0; c < sizeof(hss) / sizeof(hss[0]); c++)
				for (size_t k = 0; k < sizeof(nkvs) / sizeof(nkvs[0]); k++) {
					/* BF16 and F16: every T and hs, the nkv in turn */
					if (dt != WEFT_F32 && k != (a + c) % 3)
						continue;
					flash_case(dt, 2, Ts[a], 4, nkvs[k], hss[c], 0);
				}
	}
	flash_case(WEFT_BF16, 2, 130, 4, 2, 64, 1);
	flash_case(WEFT_F16, 2, 65, 4, 1, 128, 1);
	flash_case(WEFT_BF16, 1, 97, 6, 2, 128, 1);
	/* the backward's 64-row tiles: T two tiles exactly, groups of 4; one
	 * tile exactly, B 3, groups of 4 at hs 128 (two column passes); both
	 * passes with tensors off 16-byte alignment */
	flash_case(WEFT_BF16, 2, 128, 4, 1, 64, 1);
	flash_case(WEFT_F16, 3, 64, 8, 2, 128, 1);
	flash_case_at(WEFT_BF16, 1, 70, 4, 2, 64, 0, 1);
	flash_case(WEFT_F32, 2, 33, 4, 1, 24, 1);
	flash_case(WEFT_BF16, 1, 33, 2, 1, 24, 0);
	/* the tensor-core forward's tiling: 64 query rows a block, key tiles
	 * of 64 (hs 64) or 32 (hs 128): T one tile exactly, T 33 (a key tile
	 * and one row at hs 128), T 200 (four query tiles, the last of 8
	 * rows, seven key tiles), B 3 with groups of 4 query heads (two
	 * query tiles) */
	flash_case(WEFT_BF16, 2, 64, 4, 1, 64, 0);
	flash_case(WEFT_BF16, 2, 33, 4, 4, 128, 0);
	flash_case(WEFT_F16, 1, 200, 4, 2, 128, 0);
	flash_case(WEFT_F16, 3, 100, 4, 1, 64, 0);
	ct_attention_op_case(2, 70, 4, 2, 64, 1, 950 + 70);
	op_takes_write_mode();
	{
		void *qkv = NULL;
		float *lse = NULL;
		ct_dev gpu = ct_gpu_dev(WEFT_F32);

		qkv = ct_alloc(&gpu, 4);
		lse = ct_alloc(&gpu, 4);
		WT_FAILS(ct_gpu->flash_attention_forward(ct_kctx, WEFT_F32, 1, 1, 1, 1,
							 WEFT_FLASH_MAX_HEAD_DIM + 8, qkv, qkv,
							 lse),
			 WEFT_ERR_UNSUPPORTED, "flash_attention_forward", "head_dim 136",
			 "attention_gqa_forward");
		ct_release(&gpu);
	}
	ct_teardown();
	return wt_done("test_cuda_flash");
}
