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
 * - two runs on fresh tables are bit-identical.
 *
 * And the sort the kernel sums in: 5000 positions (not a power of two, so
 * padded to 8192 keys, above the 2048 of a shared-memory chunk) over 300
 * ids, one call in F32 on a zero table: bit-identical to the CPU's, which
 * adds each id's rows to the table in position order, starting from 0, as
 * the GPU sums them before its one add to 0 (a run out of position order
 * rounds differently; a run split or missed is off by whole rows). Under
 * the emulator, its EMU_COUNTS: the call launches 8 kernels (the keys, the
 * sort in 1 + (1 + 1) + (2 + 1) launches: stages up to 2048 in one launch,
 * then per stage 4096 and 8192 its steps across chunks and one launch for
 * the rest; the sums), where a launch per compare-exchange step took 91
 * for the sort. Skips (77) without a GPU. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

enum { N_SORT = 5000, V_SORT = 300 };

/* dtable after one embedding_backward call of the N_SORT ids; between the
 * marks "embed begin" and "embed end" when mark is set. */
static void run_once(ct_dev *d, const int32_t *ids, const float *dy, float *out,
		     void (*mark)(const char *))
{
	void *idd = ct_in_raw(d, ids, (size_t)N_SORT * sizeof(*ids));
	void *dyd = ct_in(d, dy, (int64_t)N_SORT * DIM);
	void *tab = ct_alloc(d, (size_t)V_SORT * DIM * ct_size(d->dt));

	if (mark)
		mark("embed begin");
	WT_OK(d->t->embedding_backward(d->kctx, d->dt, N_SORT, DIM, WEFT_I32, idd, dyd, tab));
	if (mark)
		mark("embed end");
	ct_out(d, tab, (int64_t)V_SORT * DIM, out);
	ct_release(d);
}

static void test_position_order(const char *counts, void (*mark)(const char *))
{
	int32_t ids[N_SORT];
	float *dy = ct_random(13, (int64_t)N_SORT * DIM, -1.0f, 1.0f, WEFT_F32);
	static float want[V_SORT * DIM], got[V_SORT * DIM];
	ct_dev cpu = ct_cpu_dev(), gpu = ct_gpu_dev(WEFT_F32);
	int differ = 0;

	for (int64_t i = 0; i < N_SORT; i++)
		ids[i] = (int32_t)((int64_t)(weft_rng_uniform(17, (uint64_t)i) * V_SORT) % V_SORT);
	run_once(&cpu, ids, dy, want, NULL);
	run_once(&gpu, ids, dy, got, mark);
	for (int64_t i = 0; i < V_SORT * DIM; i++)
		differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
	wt_checks++;
	if (differ) {
		wt_failures++;
		fprintf(stderr, "embedding_backward of %d positions over %d ids (F32): %d of %d "
			"sums differ in their bits from the CPU's (position order)\n", N_SORT,
			V_SORT, differ, V_SORT * DIM);
	}
	if (mark) {
		ct_span sc = ct_count_span(counts, "embed begin", "embed end", NULL);

		fprintf(stderr, "embedding_backward of %d positions: %d kernel launches (%s)\n",
			N_SORT, sc.k, sc.k_names);
		WT_CHECK(sc.k == 8);
	}
	free(dy);
}

int main(void)
{
	char path[] = "/tmp/weft_embed_counts_XXXXXX";
	void (*mark)(const char *) = NULL;
	int fd = mkstemp(path);

	WT_REQUIRE(fd >= 0);
	close(fd);
	setenv("EMU_COUNTS", path, 1); /* before any device work; only the emulator reads it */
	ct_setup("test_cuda_embedding_backward");
	*(void **)&mark = dlsym(RTLD_DEFAULT, "emu_count_mark");
	for (int i = 0; i < CT_NDTYPES; i++) {
		test_frequent_token(ct_float_dtypes[i], WEFT_I32);
		test_frequent_token(ct_float_dtypes[i], WEFT_I64);
	}
	test_position_order(path, mark);
	ct_teardown();
	unlink(path);
	return wt_done("test_cuda_embedding_backward");
}
