/* Dropout: the mask depends only on (seed, step, call, global element), so
 * data-parallel ranks holding slices of the batch draw exactly the masks of
 * the single-process run; rate, scaling and backward follow the mask. */
#include "tensor_testutil.h"

enum { ROWS = 8, COLS = 50 };

/* Runs `steps` steps of two dropout calls on rows [r0, r0 + nrows) of x,
 * as a rank whose batch slice starts at global row r0; returns the second
 * call's output of the last step in out. */
static void run_rank(uint64_t seed, int64_t r0, int64_t nrows, const float *x, int steps,
		     float *out)
{
	weft_ctx_options opt = { .seed = seed };
	weft_ctx *ctx;
	weft_tensor *t, *y1, *y2;
	int64_t shape[2] = { nrows, COLS };

	WT_OK(weft_ctx_create(&opt, &ctx));
	weft_ctx_set_rng(ctx, seed, r0);
	for (int s = 0; s < steps; s++) {
		weft_ctx_step_begin(ctx);
		WT_OK(weft_ctx_tensor(ctx, "x", WEFT_F32, 2, shape, &t));
		memcpy(t->data, x + r0 * COLS, (size_t)(nrows * COLS) * sizeof(float));
		WT_OK(weft_op_dropout(ctx, t, 0.5f, &y1));
		WT_OK(weft_op_dropout(ctx, y1, 0.5f, &y2));
	}
	memcpy(out, y2->data, (size_t)(nrows * COLS) * sizeof(float));
	weft_ctx_free(ctx);
}

static void test_ranks_agree(void)
{
	static float x[ROWS * COLS], one[ROWS * COLS], split[ROWS * COLS], other[ROWS * COLS];
	int differ = 0, zeros = 0;

	for (int i = 0; i < ROWS * COLS; i++)
		x[i] = 1.0f + (float)i; /* nonzero, so zero means dropped */
	run_rank(42, 0, ROWS, x, 3, one);
	/* 2 ranks of 4 rows, then 3 uneven ranks of 3, 3, 2 rows */
	run_rank(42, 0, 4, x, 3, split);
	run_rank(42, 4, 4, x, 3, split + 4 * COLS);
	WT_CHECK(!memcmp(one, split, sizeof(one)));
	run_rank(42, 0, 3, x, 3, split);
	run_rank(42, 3, 3, x, 3, split + 3 * COLS);
	run_rank(42, 6, 2, x, 3, split + 6 * COLS);
	WT_CHECK(!memcmp(one, split, sizeof(one)));
	/* another seed, or another step, gives another mask */
	run_rank(43, 0, ROWS, x, 3, other);
	for (int i = 0; i < ROWS * COLS; i++) {
		differ += (one[i] == 0) != (other[i] == 0);
		zeros += one[i] == 0;
	}
	/* two independent masks keeping 1/4 each disagree on 2*(1/4)(3/4) = 37.5%
	 * of 400 elements (150, sd 9.7); 60 is 9 sd below */
	WT_CHECK(differ > 60);
	run_rank(42, 0, ROWS, x, 2, other);
	WT_CHECK(memcmp(one, other, sizeof(one)) != 0);
	/* two calls at p = 0.5 keep 1/4: 300 of 400 dropped (sd 8.7) */
	WT_CHECK(zeros > 250 && zeros < 350);
}

static void test_rate_scale_backward(void)
{
	enum { N = 100000 };
	const float p = 0.3f;
	weft_ctx *ctx;
	weft_tensor *x, *y, *dy, *same;
	int64_t n = N, kept = 0;
	int bad_scale = 0, bad_grad = 0;

	WT_OK(weft_ctx_create(NULL, &ctx));
	weft_ctx_step_begin(ctx);
	x = tu_rand("x", 1, &n, 0.5f, 1.5f, 0);
	weft_tensor_requires_grad(x, 1);
	WT_OK(weft_op_dropout(ctx, x, p, &y));
	WT_OK(weft_ctx_tensor(ctx, "dy", WEFT_F32, 1, &n, &dy));
	for (int i = 0; i < N; i++)
		((float *)dy->data)[i] = tu_uniform(-1, 1);
	WT_OK(weft_backward_from(ctx, y, dy));
	for (int i = 0; i < N; i++) {
		float xv = ((float *)x->data)[i], yv = ((float *)y->data)[i];
		float g = ((float *)x->grad->data)[i], d = ((float *)dy->data)[i];

		if (yv != 0.0f) {
			kept++;
			bad_scale += fabsf(yv - xv / (1.0f - p)) > 1e-6f * xv;
			bad_grad += fabsf(g - d / (1.0f - p)) > 1e-6f;
		} else {
			bad_grad += g != 0.0f;
		}
	}
	WT_CHECK(bad_scale == 0);
	WT_CHECK(bad_grad == 0);
	/* kept fraction: 1 - p with sd sqrt(p (1 - p) / N) = 0.00145; 5 sd */
	WT_CLOSE((double)kept / N, 1.0 - p, 0, 0.0073);
	/* outside training, and at p = 0, dropout is the identity, unrecorded */
	weft_ctx_set_training(ctx, 0);
	WT_OK(weft_op_dropout(ctx, x, p, &same));
	WT_CHECK(same == x);
	weft_ctx_set_training(ctx, 1);
	WT_OK(weft_op_dropout(ctx, x, 0.0f, &same));
	WT_CHECK(same == x);
	weft_tensor_free(x);
	weft_ctx_free(ctx);
}

int main(void)
{
	test_ranks_agree();
	test_rate_scale_backward();
	return wt_done("test_tensor_dropout");
}
