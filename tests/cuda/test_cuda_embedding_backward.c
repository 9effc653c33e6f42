/* Embedding backward on CUDA when one token dominates the batch: the
 * gradient of the frequent token's row is a sum of thousands of rows of dy.
 * Added one by one in BF16 or F16 (atomicAdd on the table), the sum stops
 * growing once each addend is below half an ulp of it (bf16 near 256: ulp
 * 2; f16 near 2048: ulp 2, and dy here is in [0.25, 0.75]), so the row
 * would come out 4 to 8 times too small, and in an order that changes from
 * run to run. The kernel must sum in F32 and round once.
 *
 * Checked, for F32, BF16 and F16, and i32 and i64 ids:
 * - the table gradient against the CPU kernel's (F32, same rounded dy),
 *   after two accumulating calls. Tolerance: F32 1e-5 relative (the first
 *   call adds in position order on both sides; in the second the CPU adds
 *   each row to the running sum near 3840..7680, the GPU its F32 sum once:
 *   7680 roundings of at most 2^-12 each, unbiased, a random walk of about
 *   0.01, 2e-6 relative); BF16 and F16 on top of that the two roundings of
 *   the table to the dtype (after each call, half an ulp: 2^-9 and 2^-12
 *   relative each), so 2^-8 and 2^-10 relative;
 * - two runs on fresh tables are bit-identical. */
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

enum { N = 8192, DIM = 4, VOCAB = 16, HOT = 3 };

static void make_ids(weft_dtype idx_dt, void *ids)
{
	for (int64_t i = 0; i < N; i++) {
		/* 15 of 16 positions are the hot token, the others spread */
		float u = weft_rng_uniform(7, (uint64_t)i);
		int64_t id = i % 16 ? HOT : (int64_t)(u * VOCAB) % VOCAB;

		if (idx_dt == WEFT_I64)
			((int64_t *)ids)[i] = id;
		else
			((int32_t *)ids)[i] = (int32_t)id;
	}
}

/* dtable after two embedding_backward calls on d, as floats in out. */
static void run(ct_dev *d, weft_dtype idx_dt, const void *ids, const float *dy, float *out,
		void *raw)
{
	size_t isz = idx_dt == WEFT_I64 ? 8 : 4;
	void *idd = ct_in_raw(d, ids, (size_t)N * isz), *dyd = ct_in(d, dy, (int64_t)N * DIM);
	void *tab = ct_alloc(d, (size_t)VOCAB * DIM * ct_size(d->dt));

	WT_OK(d->t->embedding_backward(d->kctx, d->dt, N, DIM, idx_dt, idd, dyd, tab));
	WT_OK(d->t->embedding_backward(d->kctx, d->dt, N, DIM, idx_dt, idd, dyd, tab));
	ct_out(d, tab, (int64_t)VOCAB * DIM, out);
	if (raw)
		WT_OK(d->t->copy(d->kctx, raw, tab, (size_t)VOCAB * DIM * ct_size(d->dt),
				 WEFT_COPY_DEVICE_TO_HOST));
	ct_release(d);
}

static void test_frequent_token(weft_dtype dt, weft_dtype idx_dt)
{
	static const double rtol[] = { [WEFT_F32] = 1e-5, [WEFT_BF16] = 1.0 / 256,
				       [WEFT_F16] = 1.0 / 1024 };
	int64_t ids[N];
	float *dy = ct_random(11, (int64_t)N * DIM, 0.25f, 0.75f, dt);
	float want[VOCAB * DIM], got[VOCAB * DIM], again[VOCAB * DIM];
	unsigned char raw1[VOCAB * DIM * 4], raw2[VOCAB * DIM * 4];
	ct_dev cpu = ct_cpu_dev(), gpu = ct_gpu_dev(dt);
	char what[96];

	make_ids(idx_dt, ids);
	run(&cpu, idx_dt, ids, dy, want, NULL);
	run(&gpu, idx_dt, ids, dy, got, raw1);
	run(&gpu, idx_dt, ids, dy, again, raw2);
	/* the hot row really is large: 2 x 7680 x ~0.5 */
	WT_CHECK(want[HOT * DIM] > 5000.0f);
	snprintf(what, sizeof(what), "embedding_backward, one token at 15/16 of %d positions, "
		 "%s ids", N, idx_dt == WEFT_I64 ? "i64" : "i32");
	ct_expect_close(what, dt, got, want, VOCAB * DIM, (ct_tol){ rtol[dt], 1e-6 });
	wt_checks++;
	if (memcmp(raw1, raw2, (size_t)VOCAB * DIM * ct_size(dt))) {
		wt_failures++;
		fprintf(stderr, "%s (%s): two runs on the same inputs differ in their bits\n", what,
			ct_name(dt));
	}
	free(dy);
}

int main(void)
{
	ct_setup("test_cuda_embedding_backward");
	for (int i = 0; i < CT_NDTYPES; i++) {
		test_frequent_token(ct_float_dtypes[i], WEFT_I32);
		test_frequent_token(ct_float_dtypes[i], WEFT_I64);
	}
	ct_teardown();
	return wt_done("test_cuda_embedding_backward");
}
