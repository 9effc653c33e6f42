/* The Llama-family layers on CUDA against the CPU (weft/device.h, since
 * ABI 1.4): RMSNorm with and without a weight, rotary embeddings (llama3
 * scaling at generation positions, and plain), SwiGLU as two tensors and
 * packed, and attention with GQA, MQA and MHA heads, forward and the
 * accumulated backward, in F32, BF16 and F16. Both sides read the same
 * inputs (rounded to the dtype); the CPU computes in F32.
 *
 * Tolerances (ct_tol_for: 1e-5 F32, 2e-3 F16, 1.6e-2 BF16 relative and
 * absolute for values about 1, times a scale): elementwise results
 * (rope, swiglu) round once in the storage dtype: scale 1, 2 for the
 * backward's sum with the old gradient. RMSNorm reduces a row in F32 in
 * another order: scale 2 forward, 4 backward (dw sums 37 rows). Attention
 * as test_cuda_attention: 2 forward, 4 backward, probabilities rounded to
 * the dtype in between. */
#include "cuda_test.h"

static void rmsnorm_case(weft_dtype dt, int64_t rows, int64_t cols, int with_w)
{
	int64_t n = rows * cols;
	float *x = ct_random(700 + cols, n, -2.0f, 2.0f, dt);
	float *w = ct_random(701 + cols, cols, 0.5f, 1.5f, dt);
	float *dy = ct_random(702 + cols, n, -1.0f, 1.0f, dt);
	float *dx0 = ct_random(703 + cols, n, -0.5f, 0.5f, dt);
	float *dw0 = ct_random(704 + cols, cols, -0.5f, 0.5f, dt);
	float *out[2], *rstd[2], *dx[2], *dw[2];
	ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };
	char what[128];

	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		void *xd = ct_in(d, x, n), *wd = with_w ? ct_in(d, w, cols) : NULL;
		void *od = ct_alloc(d, (size_t)n * ct_size(d->dt)), *dyd = ct_in(d, dy, n);
		void *dxd = ct_in(d, dx0, n), *dwd = with_w ? ct_in(d, dw0, cols) : NULL;
		float *rd = ct_alloc(d, (size_t)rows * 4);

		out[k] = malloc((size_t)n * 4);
		rstd[k] = malloc((size_t)rows * 4);
		dx[k] = malloc((size_t)n * 4);
		dw[k] = calloc((size_t)cols, 4);
		WT_REQUIRE(out[k] && rstd[k] && dx[k] && dw[k]);
		WT_OK(d->t->rmsnorm_forward(d->kctx, d->dt, rows, cols, 1e-5f, xd, wd, od, rd));
		WT_OK(d->t->rmsnorm_backward(d->kctx, d->dt, rows, cols, xd, wd, rd, dyd, dxd,
					     dwd));
		ct_out(d, od, n, out[k]);
		ct_out_f32(d, rd, rows, rstd[k]);
		ct_out(d, dxd, n, dx[k]);
		if (with_w)
			ct_out(d, dwd, cols, dw[k]);
		ct_release(d);
	}
	snprintf(what, sizeof(what), "rmsnorm rows %lld cols %lld%s", (long long)rows,
		 (long long)cols, with_w ? "" : " (no weight)");
	ct_expect_close(what, dt, rstd[1], rstd[0], rows, ct_tol_for(WEFT_F32, 2.0));
	ct_expect_close(what, dt, out[1], out[0], n, ct_tol_for(dt, 2.0));
	ct_expect_close(what, dt, dx[1], dx[0], n, ct_tol_for(dt, 4.0));
	ct_expect_close(what, dt, dw[1], dw[0], cols, ct_tol_for(dt, 4.0));
	for (int k = 0; k < 2; k++) {
		free(out[k]);
		free(rstd[k]);
		free(dx[k]);
		free(dw[k]);
	}
	free(x);
	free(w);
	free(dy);
	free(dx0);
	free(dw0);
}

static void rope_case(weft_dtype dt, const weft_rope *rope, int64_t B, int64_t T, int64_t width,
		      int64_t n_rot, int64_t hs, int64_t pos)
{
	int64_t n = B * T * width;
	float *x = ct_random(710 + hs, n, -2.0f, 2.0f, dt);
	float *dy = ct_random(711 + hs, n, -1.0f, 1.0f, dt);
	float *dx0 = ct_random(712 + hs, n, -0.5f, 0.5f, dt);
	float *out[2], *dx[2];
	ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };
	char what[160];

	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		void *xd = ct_in(d, x, n), *od = ct_alloc(d, (size_t)n * ct_size(d->dt));
		void *dyd = ct_in(d, dy, n), *dxd = ct_in(d, dx0, n);

		out[k] = malloc((size_t)n * 4);
		dx[k] = malloc((size_t)n * 4);
		WT_REQUIRE(out[k] && dx[k]);
		WT_OK(d->t->rope_forward(d->kctx, d->dt, rope, B, T, width, n_rot, hs, pos, xd, od));
		WT_OK(d->t->rope_backward(d->kctx, d->dt, rope, B, T, width, n_rot, hs, pos, dyd,
					  dxd));
		ct_out(d, od, n, out[k]);
		ct_out(d, dxd, n, dx[k]);
		ct_release(d);
	}
	snprintf(what, sizeof(what), "rope %s B %lld T %lld width %lld heads %lld of %lld from %lld",
		 rope->scaling == WEFT_ROPE_LLAMA3 ? "llama3" : "plain", (long long)B, (long long)T,
		 (long long)width, (long long)n_rot, (long long)hs, (long long)pos);
	ct_expect_close(what, dt, out[1], out[0], n, ct_tol_for(dt, 1.0));
	ct_expect_close(what, dt, dx[1], dx[0], n, ct_tol_for(dt, 2.0));
	for (int k = 0; k < 2; k++) {
		free(out[k]);
		free(dx[k]);
	}
	free(x);
	free(dy);
	free(dx0);
}

/* packed: one (rows, 2 cols) input [gate | up] and its gradient */
static void swiglu_case(weft_dtype dt, int64_t rows, int64_t cols, int packed)
{
	int64_t n = rows * cols, ni = packed ? 2 * n : n, ld = packed ? 2 * cols : cols;
	float *g = ct_random(720 + cols, ni, -4.0f, 4.0f, dt);
	float *u = ct_random(721 + cols, ni, -2.0f, 2.0f, dt);
	float *dy = ct_random(722 + cols, n, -1.0f, 1.0f, dt);
	float *dg0 = ct_random(723 + cols, ni, -0.5f, 0.5f, dt);
	float *out[2], *dg[2], *du[2];
	ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };
	char what[128];

	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		size_t es = ct_size(d->dt);
		char *gd = ct_in(d, g, ni), *ud = packed ? gd + (size_t)cols * es : ct_in(d, u, ni);
		char *dgd = ct_in(d, dg0, ni), *dud = packed ? dgd + (size_t)cols * es
							      : ct_in(d, dg0, ni);
		void *od = ct_alloc(d, (size_t)n * es), *dyd = ct_in(d, dy, n);

		out[k] = malloc((size_t)n * 4);
		dg[k] = malloc((size_t)ni * 4);
		du[k] = malloc((size_t)ni * 4);
		WT_REQUIRE(out[k] && dg[k] && du[k]);
		WT_OK(d->t->swiglu_forward(d->kctx, d->dt, rows, cols, gd, ud, ld, od));
		WT_OK(d->t->swiglu_backward(d->kctx, d->dt, rows, cols, gd, ud, ld, dyd, dgd, dud));
		ct_out(d, od, n, out[k]);
		ct_out(d, dgd, ni, dg[k]);
		if (!packed)
			ct_out(d, dud, ni, du[k]);
		else
			memcpy(du[k], dg[k], (size_t)ni * 4);
		ct_release(d);
	}
	snprintf(what, sizeof(what), "swiglu rows %lld cols %lld%s", (long long)rows,
		 (long long)cols, packed ? " packed" : "");
	ct_expect_close(what, dt, out[1], out[0], n, ct_tol_for(dt, 2.0));
	ct_expect_close(what, dt, dg[1], dg[0], ni, ct_tol_for(dt, 4.0));
	ct_expect_close(what, dt, du[1], du[0], ni, ct_tol_for(dt, 4.0));
	for (int k = 0; k < 2; k++) {
		free(out[k]);
		free(dg[k]);
		free(du[k]);
	}
	free(g);
	free(u);
	free(dy);
	free(dg0);
}

static void gqa_case(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv, int64_t hs)
{
	int64_t nq = B * T * (nh + 2 * nkv) * hs, no = B * T * nh * hs, na = B * nh * T * T;
	float *qkv = ct_random(730 + T, nq, -1.0f, 1.0f, dt);
	float *dout = ct_random(731 + T, no, -1.0f, 1.0f, dt);
	float *dq0 = ct_random(732 + T, nq, -0.5f, 0.5f, dt);
	float *out[2], *att[2], *dq[2];
	ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };
	char what[128];

	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		size_t sb = d->t->attention_gqa_scratch(d->dt, B, T, nh, nkv, hs);
		void *qd = ct_in(d, qkv, nq), *od = ct_alloc(d, (size_t)no * ct_size(d->dt));
		void *ad = ct_alloc(d, (size_t)na * ct_size(d->dt));
		void *dod = ct_in(d, dout, no), *dqd = ct_in(d, dq0, nq);
		void *scratch = ct_alloc(d, sb);

		out[k] = malloc((size_t)no * 4);
		att[k] = malloc((size_t)na * 4);
		dq[k] = malloc((size_t)nq * 4);
		WT_REQUIRE(out[k] && att[k] && dq[k]);
		WT_OK(d->t->attention_gqa_forward(d->kctx, d->dt, B, T, nh, nkv, hs, qd, od, ad,
						  scratch));
		WT_OK(d->t->attention_gqa_backward(d->kctx, d->dt, B, T, nh, nkv, hs, qd, ad, dod,
						   dqd, scratch));
		ct_out(d, od, no, out[k]);
		ct_out(d, ad, na, att[k]);
		ct_out(d, dqd, nq, dq[k]);
		ct_release(d);
	}
	snprintf(what, sizeof(what), "attention_gqa B %lld T %lld nh %lld nkv %lld hs %lld",
		 (long long)B, (long long)T, (long long)nh, (long long)nkv, (long long)hs);
	ct_expect_close(what, dt, att[1], att[0], na, ct_tol_rel(dt, 1e-6));
	ct_expect_close(what, dt, out[1], out[0], no, ct_tol_for(dt, 2.0));
	ct_expect_close(what, dt, dq[1], dq[0], nq, ct_tol_for(dt, 4.0));
	for (int k = 0; k < 2; k++) {
		free(out[k]);
		free(att[k]);
		free(dq[k]);
	}
	free(qkv);
	free(dout);
	free(dq0);
}

int main(void)
{
	/* Llama 3.2's: theta 5e5, factor 32, low 1, high 4, original 8192 */
	weft_rope llama3 = { .struct_size = sizeof(weft_rope), .scaling = WEFT_ROPE_LLAMA3,
			     .theta = 500000.0, .factor = 32.0, .low_freq_factor = 1.0,
			     .high_freq_factor = 4.0, .original_max_positions = 8192.0 };
	weft_rope plain = { .struct_size = sizeof(weft_rope), .theta = 10000.0 };

	ct_setup("test_cuda_llama");
	WT_REQUIRE(WEFT_HAS_MEMBER(ct_gpu, weft_kernel_table, attention_gqa_scratch));
	for (int i = 0; i < CT_NDTYPES; i++) {
		weft_dtype dt = ct_float_dtypes[i];

		rmsnorm_case(dt, 37, 100, 1);
		rmsnorm_case(dt, 5, 7, 0);
		/* 2 query + 1 kv head of 64 rotated, v passing through, at positions
		 * 4090.. (a KV cache); then plain, head_dim 6, every head */
		rope_case(dt, &llama3, 2, 9, 4 * 64, 3, 64, 4090);
		rope_case(dt, &plain, 1, 5, 12, 2, 6, 0);
		swiglu_case(dt, 13, 27, 0);
		swiglu_case(dt, 7, 9, 1);
		gqa_case(dt, 2, 37, 4, 2, 12);
		gqa_case(dt, 1, 128, 3, 1, 16);
		gqa_case(dt, 3, 1, 3, 3, 8);
	}
	ct_teardown();
	return wt_done("test_cuda_llama");
}
