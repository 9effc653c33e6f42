/* Row kernels on CUDA against the CPU: softmax and layernorm forward and
 * backward (with and without the affine part, gradients accumulating into
 * non-zero buffers, NULL gradients skipped), embedding forward and backward
 * (i32 and i64 ids, repeated ids), cross-entropy with ignore_index, and
 * accuracy with ties; the out-of-range errors read as the CPU's. */
#include <stdint.h>

#include "cuda_test.h"

static void test_softmax(weft_dtype dt)
{
	static const int64_t shapes[][2] = { { 37, 7 }, { 5, 1000 }, { 2, 50257 }, { 300, 64 } };

	for (size_t s = 0; s < 4; s++) {
		int64_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
		float *x = ct_random(100 + s, n, -4.0f, 4.0f, dt);
		float *dy = ct_random(110 + s, n, -1.0f, 1.0f, dt);
		float *dx0 = ct_random(120 + s, n, -1.0f, 1.0f, dt);
		float *y[2], *dx[2];
		ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };

		for (int k = 0; k < 2; k++) {
			ct_dev *d = &sides[k];
			void *xd = ct_in(d, x, n), *yd = ct_alloc(d, (size_t)n * ct_size(d->dt));
			void *dyd = ct_in(d, dy, n), *dxd = ct_in(d, dx0, n);

			y[k] = malloc((size_t)n * sizeof(float));
			dx[k] = malloc((size_t)n * sizeof(float));
			WT_OK(d->t->softmax_forward(d->kctx, d->dt, rows, cols, xd, yd));
			/* backward from the CPU's y on both sides (same inputs) */
			if (k == 1) {
				void *y_cpu = ct_in(d, y[0], n);

				WT_OK(d->t->softmax_backward(d->kctx, d->dt, rows, cols, y_cpu, dyd, dxd));
			} else {
				WT_OK(d->t->softmax_backward(d->kctx, d->dt, rows, cols, yd, dyd, dxd));
			}
			WT_OK(d->t->softmax_backward(d->kctx, d->dt, rows, cols, yd, dyd, NULL));
			ct_out(d, yd, n, y[k]);
			ct_out(d, dxd, n, dx[k]);
			ct_release(d);
		}
		/* probabilities down to ~1e-5: relative error, tiny floor */
		ct_expect_close("softmax_forward", dt, y[1], y[0], n, ct_tol_rel(dt, 1e-7));
		/* the CPU's y rounded to dt on the GPU side: one more rounding */
		ct_expect_close("softmax_backward", dt, dx[1], dx[0], n, ct_tol_for(dt, 2.0));
		for (int k = 0; k < 2; k++) {
			free(y[k]);
			free(dx[k]);
		}
		free(x);
		free(dy);
		free(dx0);
	}
}

static void test_layernorm(weft_dtype dt)
{
	const int64_t rows = 67, cols = 768, n = rows * cols;

	for (int affine = 0; affine < 2; affine++) {
		float *x = ct_random(200, n, -2.0f, 3.0f, dt);
		float *w = ct_random(201, cols, 0.5f, 1.5f, dt);
		float *b = ct_random(202, cols, -0.5f, 0.5f, dt);
		float *dy = ct_random(203, n, -1.0f, 1.0f, dt);
		float *dx0 = ct_random(204, n, -1.0f, 1.0f, dt);
		float *dw0 = ct_random(205, cols, -1.0f, 1.0f, dt);
		float *db0 = ct_random(206, cols, -1.0f, 1.0f, dt);
		float *out[2], *mean[2], *rstd[2], *dx[2], *dw[2], *db[2];
		ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };

		for (int k = 0; k < 2; k++) {
			ct_dev *d = &sides[k];
			void *xd = ct_in(d, x, n), *wd = affine ? ct_in(d, w, cols) : NULL;
			void *bd = affine ? ct_in(d, b, cols) : NULL;
			void *od = ct_alloc(d, (size_t)n * ct_size(d->dt));
			float *md = ct_alloc(d, (size_t)rows * 4), *rd = ct_alloc(d, (size_t)rows * 4);
			void *dyd = ct_in(d, dy, n), *dxd = ct_in(d, dx0, n);
			void *dwd = ct_in(d, dw0, cols), *dbd = ct_in(d, db0, cols);

			out[k] = malloc((size_t)n * 4);
			dx[k] = malloc((size_t)n * 4);
			mean[k] = malloc((size_t)rows * 4);
			rstd[k] = malloc((size_t)rows * 4);
			dw[k] = malloc((size_t)cols * 4);
			db[k] = malloc((size_t)cols * 4);
			WT_OK(d->t->layernorm_forward(d->kctx, d->dt, rows, cols, 1e-5f, xd, wd, bd, od,
						      md, rd));
			WT_OK(d->t->layernorm_backward(d->kctx, d->dt, rows, cols, xd, wd, md, rd, dyd,
						       dxd, affine ? dwd : NULL,
						       affine ? dbd : NULL));
			/* every gradient NULL: nothing is written */
			WT_OK(d->t->layernorm_backward(d->kctx, d->dt, rows, cols, xd, wd, md, rd, dyd,
						       NULL, NULL, NULL));
			ct_out(d, od, n, out[k]);
			ct_out(d, dxd, n, dx[k]);
			ct_out(d, dwd, cols, dw[k]);
			ct_out(d, dbd, cols, db[k]);
			ct_out_f32(d, md, rows, mean[k]);
			ct_out_f32(d, rd, rows, rstd[k]);
			ct_release(d);
		}
		ct_expect_close("layernorm_forward out", dt, out[1], out[0], n, ct_tol_for(dt, 4.0));
		/* statistics are F32 whatever dt; sums of 768 terms */
		ct_expect_close("layernorm_forward mean", WEFT_F32, mean[1], mean[0], rows,
				ct_tol_for(WEFT_F32, 10.0));
		ct_expect_close("layernorm_forward rstd", WEFT_F32, rstd[1], rstd[0], rows,
				ct_tol_for(WEFT_F32, 10.0));
		ct_expect_close("layernorm_backward dx", dt, dx[1], dx[0], n, ct_tol_for(dt, 4.0));
		/* dw, db sum 67 rows */
		ct_expect_close("layernorm_backward dw", dt, dw[1], dw[0], cols,
				ct_tol_for(dt, sqrt((double)rows)));
		ct_expect_close("layernorm_backward db", dt, db[1], db[0], cols,
				ct_tol_for(dt, sqrt((double)rows)));
		for (int k = 0; k < 2; k++) {
			free(out[k]);
			free(dx[k]);
			free(mean[k]);
			free(rstd[k]);
			free(dw[k]);
			free(db[k]);
		}
		free(x);
		free(w);
		free(b);
		free(dy);
		free(dx0);
		free(dw0);
		free(db0);
	}
}

static void fill_ids(weft_dtype idx_dt, void *ids, int64_t n, int64_t vocab, uint64_t seed)
{
	for (int64_t i = 0; i < n; i++) {
		int64_t v = (int64_t)(weft_rng_hash(seed, (uint64_t)i) % (uint64_t)vocab);

		if (idx_dt == WEFT_I64)
			((int64_t *)ids)[i] = v;
		else
			((int32_t *)ids)[i] = (int32_t)v;
	}
}

static void set_id(weft_dtype idx_dt, void *ids, int64_t i, int64_t v)
{
	if (idx_dt == WEFT_I64)
		((int64_t *)ids)[i] = v;
	else
		((int32_t *)ids)[i] = (int32_t)v;
}

static void test_embedding(weft_dtype dt, weft_dtype idx_dt)
{
	/* 300 ids over a vocab of 50: every row is hit several times */
	const int64_t n = 300, dim = 96, vocab = 50;
	size_t isz = idx_dt == WEFT_I64 ? 8 : 4;
	void *ids = malloc((size_t)n * isz);
	float *table = ct_random(300, vocab * dim, -1.0f, 1.0f, dt);
	float *dy = ct_random(301, n * dim, -1.0f, 1.0f, dt);
	float *dt0 = ct_random(302, vocab * dim, -1.0f, 1.0f, dt);
	float *out[2], *dtab[2];
	ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };
	char expect[128];

	WT_REQUIRE(ids != NULL);
	fill_ids(idx_dt, ids, n, vocab, 303);
	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		void *idd = ct_in_raw(d, ids, (size_t)n * isz), *td = ct_in(d, table, vocab * dim);
		void *od = ct_alloc(d, (size_t)(n * dim) * ct_size(d->dt));
		void *dyd = ct_in(d, dy, n * dim), *dtd = ct_in(d, dt0, vocab * dim);

		out[k] = malloc((size_t)(n * dim) * 4);
		dtab[k] = malloc((size_t)(vocab * dim) * 4);
		WT_OK(d->t->embedding_forward(d->kctx, d->dt, n, dim, idx_dt, idd, vocab, td, od));
		WT_OK(d->t->embedding_backward(d->kctx, d->dt, n, dim, idx_dt, idd, dyd, dtd));
		ct_out(d, od, n * dim, out[k]);
		ct_out(d, dtd, vocab * dim, dtab[k]);
		ct_release(d);
	}
	/* a gather is exact */
	ct_expect_close("embedding_forward", dt, out[1], out[0], n * dim, (ct_tol){ 0.0, 0.0 });
	/* each row sums ~6 gradients; in bf16/f16 each atomic add rounds */
	ct_expect_close("embedding_backward", dt, dtab[1], dtab[0], vocab * dim,
			ct_tol_for(dt, 6.0));

	/* an id out of range: the CPU names the first bad position and its
	 * value; CUDA does not wait to look (kernels.h, since ABI 1.6: the
	 * trainer checks ids on the host) and gives those rows as zeros, the
	 * others exactly */
	set_id(idx_dt, ids, 17, vocab);
	set_id(idx_dt, ids, 200, -3);
	{
		ct_dev *d = &sides[0];
		void *idd = ct_in_raw(d, ids, (size_t)n * isz), *td = ct_in(d, table, vocab * dim);
		void *od = ct_alloc(d, (size_t)(n * dim) * ct_size(d->dt));

		snprintf(expect, sizeof(expect), "id %lld at position 17 is outside the table's "
			 "vocab [0, %lld)", (long long)vocab, (long long)vocab);
		WT_FAILS(d->t->embedding_forward(d->kctx, d->dt, n, dim, idx_dt, idd, vocab, td, od),
			 WEFT_ERR_INVALID_ARG, expect, "check the tokenizer or the vocab_size");
		ct_release(d);
	}
	{
		ct_dev *d = &sides[1];
		void *idd = ct_in_raw(d, ids, (size_t)n * isz), *td = ct_in(d, table, vocab * dim);
		void *od = ct_alloc(d, (size_t)(n * dim) * ct_size(d->dt));
		int rows_ok = 1;

		WT_OK(d->t->embedding_forward(d->kctx, d->dt, n, dim, idx_dt, idd, vocab, td, od));
		ct_out(d, od, n * dim, out[1]);
		for (int64_t i = 0; i < n * dim; i++) {
			int64_t r = i / dim;
			float want = r == 17 || r == 200 ? 0.0f : out[0][i];

			rows_ok &= out[1][i] == want;
		}
		WT_CHECK(rows_ok);
		ct_release(d);
	}
	for (int k = 0; k < 2; k++) {
		free(out[k]);
		free(dtab[k]);
	}
	free(ids);
	free(table);
	free(dy);
	free(dt0);
}

static void test_cross_entropy(weft_dtype dt, weft_dtype idx_dt)
{
	const int64_t rows = 70, vocab = 1003, ignore = -100, n = rows * vocab;
	size_t isz = idx_dt == WEFT_I64 ? 8 : 4;
	void *tg = malloc((size_t)rows * isz);
	float *logits = ct_random(400, n, -5.0f, 5.0f, dt);
	float *dl0 = ct_random(401, n, -0.01f, 0.01f, dt);
	float dloss = 1.7f, loss[2], count[2], *probs[2], *dl[2];
	int64_t correct[2], counted[2];
	ct_dev sides[2] = { ct_cpu_dev(), ct_gpu_dev(dt) };

	WT_REQUIRE(tg != NULL);
	fill_ids(idx_dt, tg, rows, vocab, 402);
	for (int64_t r = 0; r < rows; r += 7)
		set_id(idx_dt, tg, r, ignore);
	/* ties for accuracy: row 1's two largest logits equal, target the later */
	logits[1 * vocab + 10] = 9.0f;
	logits[1 * vocab + 20] = 9.0f;
	set_id(idx_dt, tg, 1, 20);
	/* row 2 predicted right */
	logits[2 * vocab + 33] = 9.5f;
	set_id(idx_dt, tg, 2, 33);
	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		void *td = ct_in_raw(d, tg, (size_t)rows * isz), *ld = ct_in(d, logits, n);
		void *pd = ct_alloc(d, (size_t)n * ct_size(d->dt)), *dld = ct_in(d, dl0, n);
		float *lossd = ct_alloc(d, 4), *countd = ct_alloc(d, 4);
		float *dlossd = ct_in_raw(d, &dloss, 4);

		probs[k] = malloc((size_t)n * 4);
		dl[k] = malloc((size_t)n * 4);
		WT_OK(d->t->cross_entropy_forward(d->kctx, d->dt, rows, vocab, ld, idx_dt, td, ignore,
						  pd, lossd, countd));
		WT_OK(d->t->cross_entropy_backward(d->kctx, d->dt, rows, vocab, pd, idx_dt, td,
						   ignore, dlossd, countd, dld));
		WT_OK(d->t->accuracy(d->kctx, d->dt, rows, vocab, ld, idx_dt, td, ignore,
				     &correct[k], &counted[k]));
		ct_out(d, pd, n, probs[k]);
		ct_out(d, dld, n, dl[k]);
		ct_out_f32(d, lossd, 1, &loss[k]);
		ct_out_f32(d, countd, 1, &count[k]);
		ct_release(d);
	}
	ct_expect_close("cross_entropy_forward probs", dt, probs[1], probs[0], n,
			ct_tol_rel(dt, 1e-7));
	/* the loss is a mean of 60 terms of size ~7 computed from dt logits */
	WT_CLOSE(loss[1], loss[0], 1e-5, 1e-5);
	WT_CHECK(count[0] == 60.0f && count[1] == 60.0f);
	/* gradients ~0.01 (dloss / count = 0.028): relative error, small floor */
	ct_expect_close("cross_entropy_backward", dt, dl[1], dl[0], n, ct_tol_rel(dt, 1e-6));
	WT_CHECK(counted[0] == 60 && counted[1] == 60);
	WT_CHECK(correct[1] == correct[0] && correct[0] >= 1);

	/* a target out of range and not the ignore index: the CPU refuses it,
	 * naming row and target; CUDA does not wait to look (kernels.h, since
	 * ABI 1.6: the trainer checks targets on the host) and counts the row
	 * as ignored: 59 rows count; accuracy, which waits anyway, refuses it */
	set_id(idx_dt, tg, 5, vocab + 4);
	for (int k = 0; k < 2; k++) {
		ct_dev *d = &sides[k];
		void *td = ct_in_raw(d, tg, (size_t)rows * isz), *ld = ct_in(d, logits, n);
		void *pd = ct_alloc(d, (size_t)n * ct_size(d->dt));
		float *lossd = ct_alloc(d, 4), *countd = ct_alloc(d, 4);
		int64_t c1 = -1, c2 = -1;

		if (k == 0) {
			WT_FAILS(d->t->cross_entropy_forward(d->kctx, d->dt, rows, vocab, ld, idx_dt,
							     td, ignore, pd, lossd, countd),
				 WEFT_ERR_INVALID_ARG, "target 1007 at row 5 is outside [0, 1003)",
				 "not the ignore index -100");
		} else {
			WT_OK(d->t->cross_entropy_forward(d->kctx, d->dt, rows, vocab, ld, idx_dt, td,
							  ignore, pd, lossd, countd));
			ct_out_f32(d, countd, 1, &count[1]);
			WT_CHECK(count[1] == 59.0f);
		}
		WT_FAILS(d->t->accuracy(d->kctx, d->dt, rows, vocab, ld, idx_dt, td, ignore, &c1,
					&c2),
			 WEFT_ERR_INVALID_ARG, "target 1007 at row 5");
		WT_CHECK(c1 == 0 && c2 == 0);
		ct_release(d);
	}
	for (int k = 0; k < 2; k++) {
		free(probs[k]);
		free(dl[k]);
	}
	free(tg);
	free(logits);
	free(dl0);
}

int main(void)
{
	ct_setup("test_cuda_rows");
	for (int i = 0; i < CT_NDTYPES; i++) {
		weft_dtype dt = ct_float_dtypes[i];

		test_softmax(dt);
		test_layernorm(dt);
		test_embedding(dt, WEFT_I32);
		test_embedding(dt, WEFT_I64);
		test_cross_entropy(dt, WEFT_I32);
		test_cross_entropy(dt, WEFT_I64);
	}
	ct_teardown();
	return wt_done("test_cuda_rows");
}
