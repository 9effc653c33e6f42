/* Bad input gives a status and a message naming the op or tensor and the
 * shapes, and what to do; never a crash, never a recorded op. */
#include "tensor_testutil.h"

static weft_tensor *f32(const char *name, int32_t ndim, const int64_t *shape)
{
	return tu_rand(name, ndim, shape, -1, 1, 0);
}

static void test_shapes(weft_ctx *ctx)
{
	int64_t s48[2] = { 4, 8 }, s169[2] = { 16, 9 }, s5[1] = { 5 }, s16_8[2] = { 16, 8 };
	int64_t s3x3[2] = { 3, 3 }, s235[3] = { 2, 3, 5 }, s7[1] = { 7 }, s24[2] = { 2, 4 };
	weft_tensor *x = f32("x", 2, s48), *w = f32("fc1.weight", 2, s169), *b = f32("b", 1, s5);
	weft_tensor *w2 = f32("w", 2, s16_8), *m = f32("m", 2, s3x3), *q = f32("qkv", 3, s235);
	weft_tensor *v7 = f32("v", 1, s7), *out = (weft_tensor *)1;

	weft_ctx_step_begin(ctx);
	WT_FAILS(weft_op_linear(ctx, x, w, NULL, &out), WEFT_ERR_SHAPE, "linear: ", "x [4, 8]",
		 "w 'fc1.weight' [16, 9]", "last dim 8", "in_features");
	WT_CHECK(out == NULL);
	WT_FAILS(weft_op_linear(ctx, x, w2, b, &out), WEFT_ERR_SHAPE, "linear", "b [5]",
		 "must be [16]");
	WT_FAILS(weft_op_matmul(ctx, x, m, &out), WEFT_ERR_SHAPE, "matmul", "a 'x' [4, 8]",
		 "b 'm' [3, 3]", "last dim 8");
	WT_FAILS(weft_op_add(ctx, x, m, &out), WEFT_ERR_SHAPE, "add", "[4, 8]", "[3, 3]",
		 "trailing dims");
	WT_FAILS(weft_op_mul(ctx, x, v7, &out), WEFT_ERR_SHAPE, "mul", "[4, 8]", "[7]");
	WT_FAILS(weft_op_bias(ctx, x, v7, &out), WEFT_ERR_SHAPE, "bias", "[7]", "last dim");
	WT_FAILS(weft_op_layernorm(ctx, x, v7, NULL, 1e-5f, &out), WEFT_ERR_SHAPE, "layernorm",
		 "w 'v' [7]", "must be [8]");
	WT_FAILS(weft_op_layernorm(ctx, x, NULL, NULL, 0.0f, &out), WEFT_ERR_INVALID_ARG,
		 "layernorm", "eps is 0", "1e-5");
	WT_FAILS(weft_op_attention(ctx, q, 2, &out), WEFT_ERR_SHAPE, "attention", "[2, 3, 5]",
		 "2 heads", "divisible by 6");
	WT_FAILS(weft_op_attention(ctx, x, 1, &out), WEFT_ERR_SHAPE, "attention", "must be 3-D");
	WT_FAILS(weft_op_reshape(ctx, x, 2, s3x3, &out), WEFT_ERR_SHAPE, "reshape", "[4, 8]",
		 "32 elements", "[3, 3] has 9");
	WT_FAILS(weft_op_dropout(ctx, x, 1.0f, &out), WEFT_ERR_INVALID_ARG, "dropout", "p is 1",
		 "[0, 1)");
	WT_FAILS(weft_op_softmax(ctx, NULL, &out), WEFT_ERR_INVALID_ARG, "softmax", "x is NULL");
	WT_FAILS(weft_op_relu(ctx, x, NULL), WEFT_ERR_INVALID_ARG, "relu", "out is NULL");
	{ /* cross-entropy: targets' shape, range; embedding: id range */
		weft_tensor *t, *ids;

		WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 1, s5, &t));
		WT_FAILS(weft_op_cross_entropy(ctx, x, t, -100, &out), WEFT_ERR_SHAPE,
			 "cross_entropy", "logits 'x' [4, 8]", "targets [5]", "without the last");
		WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 1, s48, &t));
		((int64_t *)t->data)[2] = 8;
		WT_FAILS(weft_op_cross_entropy(ctx, x, t, -100, &out), WEFT_ERR_INVALID_ARG,
			 "cross_entropy", "target 8 at row 2", "[0, 8)");
		WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I32, 2, s24, &ids));
		((int32_t *)ids->data)[5] = 4;
		WT_FAILS(weft_op_embedding(ctx, ids, x, &out), WEFT_ERR_INVALID_ARG, "embedding",
			 "id 4 at position 5", "[0, 4)", "table 'x' [4, 8]");
		WT_FAILS(weft_op_embedding(ctx, x, x, &out), WEFT_ERR_DTYPE, "embedding",
			 "ids 'x' [4, 8] is F32", "I32 or I64");
	}
	weft_tensor_free(x);
	weft_tensor_free(w);
	weft_tensor_free(b);
	weft_tensor_free(w2);
	weft_tensor_free(m);
	weft_tensor_free(q);
	weft_tensor_free(v7);
}

static void test_dtypes_devices(weft_ctx *ctx)
{
	int64_t s[2] = { 2, 3 };
	uint16_t half[6] = { 0 };
	float data[6] = { 0 };
	weft_tensor h, bad, gpu, ok, *out;
	weft_dtype dt;

	WT_OK(weft_tensor_init(&h, WEFT_BF16, 2, s, WEFT_CPU, half));
	h.name = "h";
	WT_OK(weft_tensor_init(&ok, WEFT_F32, 2, s, WEFT_CPU, data));
	WT_FAILS(weft_op_gelu(ctx, &h, &out), WEFT_ERR_DTYPE, "gelu", "x 'h' [2, 3] is BF16",
		 "cpu kernels", "use F32");
	WT_FAILS(weft_op_add(ctx, &ok, &h, &out), WEFT_ERR_DTYPE, "add");
	bad = ok;
	bad.dtype = 42;
	WT_FAILS(weft_op_relu(ctx, &bad, &out), WEFT_ERR_DTYPE, "relu", "unknown dtype 42");
	WT_FAILS(weft_tensor_init(&bad, (weft_dtype)42, 2, s, WEFT_CPU, data), WEFT_ERR_DTYPE,
		 "unknown dtype 42", "F32, F16, BF16");
	WT_FAILS(weft_dtype_parse("F8", &dt), WEFT_ERR_DTYPE, "unknown dtype 'F8'", "BF16", "U16");
	gpu = ok;
	gpu.device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 1 };
	WT_FAILS(weft_op_relu(ctx, &gpu, &out), WEFT_ERR_INVALID_ARG, "relu", "on cuda:1",
		 "context runs on cpu");
	{
		weft_ctx_options o = { .device = { .type = WEFT_DEVICE_CUDA, .index = 0 } };
		weft_ctx *c2 = (weft_ctx *)1;

		setenv("WEFT_PLUGIN_PATH", "/nonexistent", 1);
		WT_FAILS(weft_ctx_create(&o, &c2), WEFT_ERR_UNSUPPORTED, "no kernels for device cuda:0",
			 "accelerator: cpu");
		WT_CHECK(c2 == NULL);
	}
	{
		int64_t neg[2] = { 2, -1 };
		WT_FAILS(weft_tensor_init(&bad, WEFT_F32, 2, neg, WEFT_CPU, data), WEFT_ERR_SHAPE,
			 "dim 1 is -1");
		WT_FAILS(weft_tensor_init(&bad, WEFT_F32, 9, s, WEFT_CPU, data), WEFT_ERR_SHAPE,
			 "9 dims", "0 to 8");
	}
}

/* Failed allocations at every point of an op give NOMEM naming the op and
 * shape, and leave the context usable. */
static void test_out_of_memory(void)
{
	int64_t s48[2] = { 4, 8 }, s68[2] = { 6, 8 }, big[2] = { 1000, 1000 };
	weft_ctx_options opt = { .arena_bytes = 256, .tape_bytes = 256 };
	weft_tensor *x = f32("x", 2, s48), *w = f32("w", 2, s68), *out = NULL, *t, *t_ce;
	int64_t s4[1] = { 4 };
	weft_params *ps;
	weft_ctx *ctx;
	int failures = 0;

	WT_OK(weft_ctx_create(&opt, &ctx));
	weft_tensor_requires_grad(x, 1);
	weft_ctx_step_begin(ctx);
	/* the big output needs a new block, and the allocator refuses it */
	weft_mem_fail_after(1);
	WT_FAILS(weft_op_linear(ctx, x, w, NULL, &out), WEFT_ERR_NOMEM, "linear: output F32 [4, 6]",
		 "out of memory", "activations");
	weft_mem_fail_after(0);
	WT_CHECK(out == NULL);
	WT_OK(weft_tensor_alloc("targets", WEFT_I32, 1, s4, WEFT_CPU, WEFT_MEM_OTHER, &t_ce));
	/* every allocation in a forward + backward failing in turn: each is an
	 * error, never a crash; then it works */
	for (int k = 1; k < 40; k++) {
		weft_tensor *y, *l;
		weft_ctx *c;
		weft_status st;

		weft_mem_fail_after(k);
		st = weft_ctx_create(&opt, &c);
		if (!st) {
			weft_ctx_step_begin(c);
			st = weft_op_linear(c, x, w, NULL, &y);
			if (!st)
				st = weft_op_softmax(c, y, &l);
			if (!st)
				st = weft_op_cross_entropy(c, l, t_ce, -100, &l);
			if (!st)
				st = weft_backward(c, l);
			weft_ctx_free(c);
		}
		weft_mem_fail_after(0);
		failures += st == WEFT_ERR_NOMEM;
		WT_CHECK(st == WEFT_OK || st == WEFT_ERR_NOMEM);
		if (st == WEFT_ERR_NOMEM)
			WT_STR_CONTAINS(weft_error_last(), "out of memory");
	}
	WT_CHECK(failures > 3);
	weft_mem_fail_after(2); /* the first allocation is the struct, the second the data */
	WT_FAILS(weft_tensor_alloc("huge", WEFT_F32, 2, big, WEFT_CPU, WEFT_MEM_PARAMS, &t),
		 WEFT_ERR_NOMEM, "tensor 'huge' F32 [1000, 1000]", "4000000 bytes for params");
	weft_mem_fail_after(0);
	WT_OK(weft_params_create(WEFT_CPU, &ps));
	WT_OK(weft_params_add(ps, "a.weight", WEFT_F32, 2, big, &t));
	WT_FAILS(weft_params_add(ps, "a.weight", WEFT_F32, 2, big, &t), WEFT_ERR_INVALID_ARG,
		 "'a.weight' is declared twice");
	weft_mem_fail_after(1);
	WT_FAILS(weft_params_finalize(ps, 1), WEFT_ERR_NOMEM, "flat params buffer",
		 "1000000 F32 parameters");
	weft_mem_fail_after(2);
	WT_FAILS(weft_params_finalize(ps, 1), WEFT_ERR_NOMEM, "flat grads buffer");
	weft_mem_fail_after(0);
	WT_OK(weft_params_finalize(ps, 1)); /* nothing was kept from the failures */
	weft_params_free(ps);
	weft_tensor_free(t_ce);
	weft_tensor_free(x);
	weft_tensor_free(w);
	weft_ctx_free(ctx);
}

static void test_misuse(weft_ctx *ctx)
{
	int64_t s[2] = { 2, 3 };
	weft_tensor *x = f32("x", 2, s), *y;
	weft_tensor *view;
	int m;

	weft_tensor_requires_grad(x, 1);
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_relu(ctx, x, &y));
	WT_FAILS(weft_backward(ctx, y), WEFT_ERR_INVALID_ARG, "backward", "'relu' [2, 3]",
		 "not a scalar", "weft_backward_from");
	{
		int64_t s32[2] = { 3, 2 };
		weft_tensor *g;

		WT_OK(weft_ctx_tensor(ctx, "g", WEFT_F32, 2, s32, &g));
		WT_FAILS(weft_backward_from(ctx, y, g), WEFT_ERR_SHAPE, "backward_from",
			 "out 'relu' [2, 3]", "grad 'g' [3, 2]", "same shape");
	}
	WT_FAILS(weft_module_end(ctx, "block", &m), WEFT_ERR_INVALID_ARG, "no module is open");
	WT_OK(weft_module_begin(ctx, "block.0", &m));
	WT_FAILS(weft_module_end(ctx, "block.1", &m), WEFT_ERR_INVALID_ARG, "'block.1'",
		 "open module 'block.0'");
	WT_FAILS(weft_tensor_view(x, 5, 1, s, &view), WEFT_ERR_SHAPE, "view [2]", "element 5",
		 "'x' [2, 3]");
	weft_tensor_free(x);
}

int main(void)
{
	weft_ctx *ctx;

	WT_OK(weft_ctx_create(NULL, &ctx));
	test_shapes(ctx);
	test_dtypes_devices(ctx);
	test_misuse(ctx);
	weft_ctx_free(ctx);
	test_out_of_memory();
	return wt_done("test_tensor_errors");
}
