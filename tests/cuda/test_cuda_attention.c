/* Causal self-attention on CUDA against the CPU: the output, the saved
 * probabilities (zero right of the diagonal) and the accumulated gradient
 * of the packed qkv, for odd and tile-sized sequence lengths, in F32, BF16
 * and F16. Each side's backward uses its own saved probabilities, as in
 * training. */
#include "cuda_test.h"

static void attention_case(weft_dtype dt, int64_t B, int64_t T, int64_t C, int64_t nh)
{
	int64_t nq = B * T * 3 * C, no = B * T * C, na = B * nh * T * T;
	float *qkv = ct_random(500 + T, nq, -1.0f, 1.0f, dt);
	float *dout = ct_random(501 + T, no, -1.0f, 1.0f, dt);
	float *dq0 = ct_random(502 + T, nq, -0.5f, 0.5f, dt);
	float *out[2], *att[2], *dq[2];
	ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };
	char what[128];
	int64_t upper_nonzero = 0;

	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		size_t sb = d->t->attention_scratch(d->dt, B, T, C, nh);
		void *qd = ct_in(d, qkv, nq), *od = ct_alloc(d, (size_t)no * ct_size(d->dt));
		void *ad = ct_alloc(d, (size_t)na * ct_size(d->dt));
		void *dod = ct_in(d, dout, no), *dqd = ct_in(d, dq0, nq);
		void *scratch = ct_alloc(d, sb);

		out[k] = malloc((size_t)no * 4);
		att[k] = malloc((size_t)na * 4);
		dq[k] = malloc((size_t)nq * 4);
		WT_REQUIRE(out[k] && att[k] && dq[k]);
		WT_OK(d->t->attention_forward(d->kctx, d->dt, B, T, C, nh, qd, od, ad, scratch));
		WT_OK(d->t->attention_backward(d->kctx, d->dt, B, T, C, nh, qd, ad, dod, dqd,
					       scratch));
		ct_out(d, od, no, out[k]);
		ct_out(d, ad, na, att[k]);
		ct_out(d, dqd, nq, dq[k]);
		ct_release(d);
	}
	for (int64_t bh = 0; bh < B * nh; bh++)
		for (int64_t i = 0; i < T; i++)
			for (int64_t j = i + 1; j < T; j++)
				upper_nonzero += att[1][(bh * T + i) * T + j] != 0.0f;
	WT_CHECK(upper_nonzero == 0);
	snprintf(what, sizeof(what), "attention B %lld T %lld C %lld nh %lld", (long long)B,
		 (long long)T, (long long)C, (long long)nh);
	/* probabilities: relative, with a small floor */
	ct_expect_close(what, dt, att[1], att[0], na, ct_tol_rel(dt, 1e-6));
	/* out and dqkv: a few GEMMs over T and hs terms of size <= 1, fp32
	 * accumulation; BF16/F16 round the probabilities and dS in between */
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
	ct_setup("test_cuda_attention");
	for (int i = 0; i < CT_NDTYPES; i++) {
		attention_case(ct_float_dtypes[i], 2, 37, 48, 4);
		attention_case(ct_float_dtypes[i], 1, 128, 64, 2);
		attention_case(ct_float_dtypes[i], 3, 1, 24, 3);
	}
	ct_teardown();
	return wt_done("test_cuda_attention");
}
