/* The CPU kernels that split their range over threads (elementwise, rows,
 * columns) give bit-identical results at 1 and at 3 threads: each part
 * computes its own elements in the same order, so any difference is a part
 * boundary done twice, skipped or raced. Sizes are past the split grain
 * (64 Ki elements) and not multiples of 16 (uneven last parts). */
#include <string.h>

#include "tensor_testutil.h"
#include "weft/device.h"
#include "weft/plugin.h"

enum { ROWS = 999, COLS = 389 };

typedef struct run {
	float *out, *dx, *dw, *db;
} run;

/* y = gelu(layernorm(x; w, b) + b2 (broadcast)) * 0.5; backward from y;
 * keeps copies of y and of the gradients of x, w and b2. */
static void forward_backward(int64_t threads, weft_tensor *x, weft_tensor *w, weft_tensor *b,
			     weft_tensor *b2, run *o)
{
	int64_t n = (int64_t)ROWS * COLS;
	weft_ctx *ctx;
	weft_tensor *h, *y;

	weft_cpu_set_threads(threads);
	WT_OK(weft_ctx_create(NULL, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_layernorm(ctx, x, w, b, 1e-5f, &h));
	WT_OK(weft_op_bias(ctx, h, b2, &h));
	WT_OK(weft_op_gelu(ctx, h, &h));
	WT_OK(weft_op_scale(ctx, h, 0.5f, &y));
	WT_OK(weft_backward_from(ctx, y, y));
	WT_REQUIRE(x->grad && w->grad && b2->grad);
	memcpy(o->out, y->data, (size_t)n * sizeof(float));
	memcpy(o->dx, x->grad->data, (size_t)n * sizeof(float));
	memcpy(o->dw, w->grad->data, COLS * sizeof(float));
	memcpy(o->db, b2->grad->data, COLS * sizeof(float));
	weft_ctx_free(ctx);
}

/* The host copies, fills and row broadcasts that split over the threads
 * from 512 KiB a thread: at 3 threads over 1 999 999 bytes (uneven
 * parts) every byte is written, and only those; an overlapping copy (one
 * in-order pass) is memmove's. */
static void check_bytes_kernels(void)
{
	enum { BYTES = 1999999, ROW = 1540, NROWS = 1298 };
	const weft_kernel_table *k;
	unsigned char *src = malloc(BYTES + 2), *dst = malloc(BYTES + 2), *want = malloc(BYTES + 2);

	WT_REQUIRE(src && dst && want);
	WT_OK(weft_kernels_get(WEFT_CPU, &k));
	WT_REQUIRE(WEFT_HAS_MEMBER(k, weft_kernel_table, broadcast_rows) && k->broadcast_rows);
	weft_cpu_set_threads(3);
	for (int i = 0; i < BYTES + 2; i++)
		src[i] = (unsigned char)(i * 7 + 3);
	memset(dst, 0xAB, BYTES + 2);
	WT_OK(k->copy(NULL, dst + 1, src, BYTES, WEFT_COPY_DEVICE_TO_DEVICE));
	WT_CHECK(dst[0] == 0xAB && dst[BYTES + 1] == 0xAB && !memcmp(dst + 1, src, BYTES));
	WT_OK(k->zero(NULL, dst + 1, BYTES));
	memset(want, 0, BYTES + 2);
	want[0] = want[BYTES + 1] = 0xAB;
	WT_CHECK(!memcmp(dst, want, BYTES + 2));
	/* overlapping, forward by 1001 bytes */
	memcpy(dst, src, BYTES + 2);
	memcpy(want, src, BYTES + 2);
	memmove(want + 1001, want, BYTES - 1001);
	WT_OK(k->copy(NULL, dst + 1001, dst, BYTES - 1001, WEFT_COPY_DEVICE_TO_DEVICE));
	WT_CHECK(!memcmp(dst, want, BYTES + 2));
	/* a 1540-byte row into 1298 rows, past the end untouched */
	memset(dst, 0xAB, BYTES + 2);
	WT_OK(k->broadcast_rows(NULL, NROWS, ROW, src, dst));
	int bad = 0;

	for (int r = 0; r < NROWS; r++)
		bad += memcmp(dst + (size_t)r * ROW, src, ROW) != 0;
	WT_CHECK(bad == 0);
	WT_CHECK(dst[(size_t)NROWS * ROW] == 0xAB);
	free(src);
	free(dst);
	free(want);
}

/* Causal attention runs its heads as tasks on the threads: 3 batches of
 * 5 heads (15 heads over 3 threads, and at 4 threads an uneven share) of
 * 70 positions give bit-identical outputs and qkv gradients at 1 thread. */
static void attention_at(int64_t threads, weft_tensor *qkv, float *out, float *dqkv)
{
	enum { B = 3, T = 70, C = 40, NH = 5 };
	weft_ctx *ctx;
	weft_tensor *y;

	weft_cpu_set_threads(threads);
	WT_OK(weft_ctx_create(NULL, &ctx));
	weft_ctx_step_begin(ctx);
	qkv->grad = NULL;
	WT_OK(weft_op_attention(ctx, qkv, NH, &y));
	WT_OK(weft_backward_from(ctx, y, y));
	WT_REQUIRE(qkv->grad);
	memcpy(out, y->data, (size_t)B * T * C * sizeof(float));
	memcpy(dqkv, qkv->grad->data, (size_t)B * T * 3 * C * sizeof(float));
	weft_ctx_free(ctx);
}

static void check_attention(void)
{
	enum { B = 3, T = 70, C = 40 };
	int64_t shape[3] = { B, T, 3 * C };
	weft_tensor *qkv = tu_rand("qkv", 3, shape, -1, 1, 0);
	float *out[3], *dq[3];

	weft_tensor_requires_grad(qkv, 1);
	for (int i = 0; i < 3; i++) {
		out[i] = calloc((size_t)B * T * C, sizeof(float));
		dq[i] = calloc((size_t)B * T * 3 * C, sizeof(float));
		WT_REQUIRE(out[i] && dq[i]);
		attention_at(i == 0 ? 1 : i == 1 ? 3 : 4, qkv, out[i], dq[i]);
	}
	for (int i = 1; i < 3; i++) {
		WT_CHECK(!memcmp(out[0], out[i], (size_t)B * T * C * sizeof(float)));
		WT_CHECK(!memcmp(dq[0], dq[i], (size_t)B * T * 3 * C * sizeof(float)));
	}
	WT_CHECK(out[0][B * T * C - 1] != 0.0f && dq[0][C] != 0.0f); /* dK at position 0 */
	for (int i = 0; i < 3; i++) {
		free(out[i]);
		free(dq[i]);
	}
	qkv->grad = NULL;
	weft_tensor_free(qkv);
}

int main(void)
{
	int64_t sx[2] = { ROWS, COLS }, sc[1] = { COLS }, n = (int64_t)ROWS * COLS;
	weft_tensor *x = tu_rand("x", 2, sx, -2, 2, 0), *w = tu_rand("w", 1, sc, 0.5f, 1.5f, 0);
	weft_tensor *b = tu_rand("b", 1, sc, -1, 1, 0), *b2 = tu_rand("b2", 1, sc, -1, 1, 0);
	weft_tensor *gw, *gb2;
	run r[2];

	WT_OK(weft_tensor_alloc("gw", WEFT_F32, 1, sc, WEFT_CPU, WEFT_MEM_OTHER, &gw));
	WT_OK(weft_tensor_alloc("gb2", WEFT_F32, 1, sc, WEFT_CPU, WEFT_MEM_OTHER, &gb2));
	weft_tensor_requires_grad(x, 1);
	weft_tensor_requires_grad(w, 1);
	weft_tensor_requires_grad(b2, 1);
	for (int i = 0; i < 2; i++) {
		r[i].out = calloc((size_t)n, sizeof(float));
		r[i].dx = calloc((size_t)n, sizeof(float));
		r[i].dw = calloc(COLS, sizeof(float));
		r[i].db = calloc(COLS, sizeof(float));
		WT_REQUIRE(r[i].out && r[i].dx && r[i].dw && r[i].db);
		/* caller-owned gradients for w and b2, zeroed for each run */
		memset(gw->data, 0, COLS * sizeof(float));
		memset(gb2->data, 0, COLS * sizeof(float));
		w->grad = gw;
		b2->grad = gb2;
		forward_backward(i == 0 ? 1 : 3, x, w, b, b2, &r[i]);
	}
	WT_CHECK(!memcmp(r[0].out, r[1].out, (size_t)n * sizeof(float)));
	WT_CHECK(!memcmp(r[0].dx, r[1].dx, (size_t)n * sizeof(float)));
	WT_CHECK(!memcmp(r[0].dw, r[1].dw, COLS * sizeof(float)));
	WT_CHECK(!memcmp(r[0].db, r[1].db, COLS * sizeof(float)));
	/* and the gradients are not all zero (the runs did reach them) */
	WT_CHECK(r[0].dw[0] != 0.0f && r[0].db[COLS - 1] != 0.0f && r[0].dx[n - 1] != 0.0f);
	for (int i = 0; i < 2; i++) {
		free(r[i].out);
		free(r[i].dx);
		free(r[i].dw);
		free(r[i].db);
	}
	w->grad = b2->grad = NULL;
	weft_tensor_free(gw);
	weft_tensor_free(gb2);
	weft_tensor_free(x);
	weft_tensor_free(w);
	weft_tensor_free(b);
	weft_tensor_free(b2);
	check_bytes_kernels();
	check_attention();
	weft_cpu_set_threads(1);
	return wt_done("test_tensor_threads");
}
