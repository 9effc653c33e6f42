/* The fused (flash) causal attention of the CUDA table against the CPU's
 * materialized attention_gqa (weft/device.h, since ABI 1.4): output, the
 * saved log-sum-exp and the accumulated dqkv (dq, dk and dv, a kv head's
 * summed over its group), B 2, nh 4 with nkv 4, 2 and 1 (MHA, GQA, MQA),
 * head dims 64 and 128 (and 24, a smaller multiple of 8), at T 1, 7, 65
 * and 130 (one row; within a tile; a tile and one row past it; past four
 * tiles), in F32, BF16 and F16. Both sides read the same inputs (rounded
 * to the dtype); the CPU computes in F32 and rounds its probabilities to
 * the dtype, flash keeps them in F32. Also: the backward gives the same
 * bits twice (no atomics), a head dim above WEFT_FLASH_MAX_HEAD_DIM is
 * refused with a message naming it, and the core op weft_op_attention_gqa
 * takes the fused path on CUDA (its activations hold no T x T block) with
 * the CPU context's output and gradient.
 *
 * Tolerances (ct_tol_for: 1e-5 F32, 2e-3 F16, 1.6e-2 BF16, relative and
 * absolute for values about 1, times a scale): F32 output and LSE 1e-5
 * (scale 1: the same sums in another order); gradients scale 2 (two
 * chained reductions, over keys and over the head dim). BF16 and F16: as
 * test_cuda_attention, 2 forward and 4 backward (the CPU rounds the
 * probabilities and dS to the dtype, flash does not). The LSE is compared
 * with a double-precision sum of the rounded inputs: 1e-5 relative and
 * absolute in every dtype (it is F32 whatever the storage). */
#include <math.h>

#include "cuda_test.h"
#include "weft/autograd.h"
#include "weft/ops.h"
#include "weft/status.h"
#include "weft/tensor.h"

/* lse[b][h][t] in double from the host copy of qkv. */
static void lse_reference(const float *qkv, int64_t B, int64_t T, int64_t nh, int64_t nkv,
			  int64_t hs, float *lse)
{
	int64_t L = (nh + 2 * nkv) * hs, g = nh / nkv;
	double scale = 1.0 / sqrt((double)hs);

	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < nh; h++)
			for (int64_t t = 0; t < T; t++) {
				const float *q = qkv + (b * T + t) * L + h * hs;
				double m = -INFINITY, sum = 0.0, s[256];

				WT_REQUIRE(T <= 256);
				for (int64_t j = 0; j <= t; j++) {
					const float *k = qkv + (b * T + j) * L + (nh + h / g) * hs;
					double acc = 0.0;

					for (int64_t d = 0; d < hs; d++)
						acc += (double)q[d] * (double)k[d];
					s[j] = acc * scale;
					m = s[j] > m ? s[j] : m;
				}
				for (int64_t j = 0; j <= t; j++)
					sum += exp(s[j] - m);
				lse[(b * nh + h) * T + t] = (float)(m + log(sum));
			}
}

static void flash_case(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv, int64_t hs,
		       int twice)
{
	int64_t nq = B * T * (nh + 2 * nkv) * hs, no = B * T * nh * hs, nl = B * nh * T;
	float *qkv = ct_random(900 + T + hs, nq, -2.0f, 2.0f, dt);
	float *dout = ct_random(901 + T + hs, no, -1.0f, 1.0f, dt);
	float *dq0 = ct_random(902 + T + hs, nq, -0.5f, 0.5f, dt);
	float *out[2], *dq[2], *lse = malloc((size_t)nl * 4), *lse_ref = malloc((size_t)nl * 4);
	float *dq_again = malloc((size_t)nq * 4);
	ct_dev cpu = ct_cpu_dev(), gpu = ct_gpu_dev(dt);
	char what[160];

	WT_REQUIRE(lse && lse_ref && dq_again);
	for (int k = 0; k < 2; k++) {
		out[k] = malloc((size_t)no * 4);
		dq[k] = malloc((size_t)nq * 4);
		WT_REQUIRE(out[k] && dq[k]);
	}
	/* the reference: the CPU's materialized attention */
	{
		size_t sb = cpu.t->attention_gqa_scratch(WEFT_F32, B, T, nh, nkv, hs);
		void *qd = ct_in(&cpu, qkv, nq), *od = ct_alloc(&cpu, (size_t)no * 4);
		void *ad = ct_alloc(&cpu, (size_t)(B * nh * T * T) * 4);
		void *dod = ct_in(&cpu, dout, no), *dqd = ct_in(&cpu, dq0, nq);
		void *scratch = ct_alloc(&cpu, sb);

		WT_OK(cpu.t->attention_gqa_forward(NULL, WEFT_F32, B, T, nh, nkv, hs, qd, od, ad,
						   scratch));
		WT_OK(cpu.t->attention_gqa_backward(NULL, WEFT_F32, B, T, nh, nkv, hs, qd, ad, dod,
						    dqd, scratch));
		ct_out(&cpu, od, no, out[0]);
		ct_out(&cpu, dqd, nq, dq[0]);
		ct_release(&cpu);
	}
	/* flash on the CUDA table */
	{
		void *qd = ct_in(&gpu, qkv, nq), *od = ct_alloc(&gpu, (size_t)no * ct_size(dt));
		float *ld = ct_alloc(&gpu, (size_t)nl * 4);
		void *dod = ct_in(&gpu, dout, no), *dqd = ct_in(&gpu, dq0, nq);

		WT_OK(gpu.t->flash_attention_forward(gpu.kctx, dt, B, T, nh, nkv, hs, qd, od, ld));
		WT_OK(gpu.t->flash_attention_backward(gpu.kctx, dt, B, T, nh, nkv, hs, qd, od, ld,
						      dod, dqd));
		ct_out(&gpu, od, no, out[1]);
		ct_out_f32(&gpu, ld, nl, lse);
		ct_out(&gpu, dqd, nq, dq[1]);
		if (twice) {
			void *dqd2 = ct_in(&gpu, dq0, nq);

			WT_OK(gpu.t->flash_attention_backward(gpu.kctx, dt, B, T, nh, nkv, hs, qd,
							      od, ld, dod, dqd2));
			ct_out(&gpu, dqd2, nq, dq_again);
		}
		ct_release(&gpu);
	}
	lse_reference(qkv, B, T, nh, nkv, hs, lse_ref);
	snprintf(what, sizeof(what), "flash_attention B %lld T %lld nh %lld nkv %lld hs %lld",
		 (long long)B, (long long)T, (long long)nh, (long long)nkv, (long long)hs);
	ct_expect_close(what, dt, out[1], out[0], no, ct_tol_for(dt, dt == WEFT_F32 ? 1.0 : 2.0));
	ct_expect_close(what, WEFT_F32, lse, lse_ref, nl, ct_tol_for(WEFT_F32, 1.0));
	ct_expect_close(what, dt, dq[1], dq[0], nq, ct_tol_for(dt, dt == WEFT_F32 ? 2.0 : 4.0));
	if (twice) {
		wt_checks++;
		if (memcmp(dq_again, dq[1], (size_t)nq * 4)) {
			wt_failures++;
			fprintf(stderr, "%s (%s): a second backward gave other bits\n", what,
				ct_name(dt));
		}
	}
	for (int k = 0; k < 2; k++) {
		free(out[k]);
		free(dq[k]);
	}
	free(lse);
	free(lse_ref);
	free(dq_again);
	free(qkv);
	free(dout);
	free(dq0);
}

/* weft_op_attention_gqa forward and backward on a context of `dev`: the
 * output and qkv's gradient into y and dqkv; *arena_bytes: the activation
 * arena's bytes the op took. */
static void op_run(weft_device dev, int64_t B, int64_t T, int64_t nh, int64_t nkv, int64_t hs,
		   const float *qkv_h, const float *gy_h, float *y_h, float *dqkv_h,
		   size_t *arena_bytes)
{
	int64_t s[3] = { B, T, (nh + 2 * nkv) * hs }, so[3] = { B, T, nh * hs };
	weft_ctx_options o = { .device = dev };
	weft_ctx *ctx = NULL;
	weft_tensor *qkv, *gy, *y;
	weft_arena_stats before, after;

	WT_OK(weft_ctx_create(&o, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "qkv", WEFT_F32, 3, s, &qkv));
	WT_OK(weft_ctx_tensor(ctx, "gy", WEFT_F32, 3, so, &gy));
	WT_OK(weft_tensor_copy_from_host(qkv, qkv_h, weft_tensor_nbytes(qkv)));
	WT_OK(weft_tensor_copy_from_host(gy, gy_h, weft_tensor_nbytes(gy)));
	weft_tensor_requires_grad(qkv, 1);
	weft_arena_get_stats(weft_ctx_arena(ctx), &before);
	WT_OK(weft_op_attention_gqa(ctx, qkv, nh, nkv, &y));
	weft_arena_get_stats(weft_ctx_arena(ctx), &after);
	*arena_bytes = after.used - before.used;
	WT_OK(weft_backward_from(ctx, y, gy));
	WT_REQUIRE(qkv->grad != NULL);
	WT_OK(weft_tensor_copy_to_host(y, y_h, weft_tensor_nbytes(y)));
	WT_OK(weft_tensor_copy_to_host(qkv->grad, dqkv_h, weft_tensor_nbytes(qkv)));
	weft_ctx_free(ctx);
}

/* The op on CUDA against the op on the CPU, F32 (tolerances as
 * flash_case's). The CPU's activations hold the (B, nh, T, T)
 * probabilities; CUDA's only the output and the (B, nh, T) LSE. */
static void op_case(int64_t B, int64_t T, int64_t nh, int64_t nkv, int64_t hs)
{
	int64_t nq = B * T * (nh + 2 * nkv) * hs, no = B * T * nh * hs;
	size_t probs = (size_t)(B * nh * T * T) * 4, bytes[2];
	float *qkv = ct_random(950 + T, nq, -2.0f, 2.0f, WEFT_F32);
	float *gy = ct_random(951 + T, no, -1.0f, 1.0f, WEFT_F32);
	float *y[2], *dq[2];
	char what[160];

	for (int k = 0; k < 2; k++) {
		y[k] = malloc((size_t)no * 4);
		dq[k] = malloc((size_t)nq * 4);
		WT_REQUIRE(y[k] && dq[k]);
		op_run(k ? (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 } : WEFT_CPU, B, T,
		       nh, nkv, hs, qkv, gy, y[k], dq[k], &bytes[k]);
	}
	snprintf(what, sizeof(what), "weft_op_attention_gqa B %lld T %lld nh %lld nkv %lld hs %lld",
		 (long long)B, (long long)T, (long long)nh, (long long)nkv, (long long)hs);
	ct_expect_close(what, WEFT_F32, y[1], y[0], no, ct_tol_for(WEFT_F32, 1.0));
	ct_expect_close(what, WEFT_F32, dq[1], dq[0], nq, ct_tol_for(WEFT_F32, 2.0));
	WT_CHECK(bytes[0] >= probs);
	WT_CHECK(bytes[1] < probs);
	for (int k = 0; k < 2; k++) {
		free(y[k]);
		free(dq[k]);
	}
	free(qkv);
	free(gy);
}

int main(void)
{
	static const int64_t Ts[] = { 1, 7, 65, 130 }, nkvs[] = { 4, 2, 1 }, hss[] = { 64, 128 };

	ct_setup("test_cuda_flash");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, flash_attention_backward));
	WT_REQUIRE(ct_gpu->flash_attention_forward && ct_gpu->flash_attention_backward);
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
	flash_case(WEFT_F32, 2, 33, 4, 1, 24, 1);
	op_case(2, 70, 4, 2, 64);
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
