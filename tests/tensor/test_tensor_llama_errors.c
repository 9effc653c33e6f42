/* Every error a caller can cause with the Llama-family layer ops ends in
 * one message that names the op, the tensor and the sizes, and says what
 * would fit; and a kernel table without these layers (a NULL member, or a
 * table built before ABI 1.4) is named with the member it lacks, as is one
 * without GELU's exact form (before ABI 1.5). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"

static weft_tensor *f32(const char *name, int32_t ndim, const int64_t *shape)
{
	weft_tensor *t;

	WT_OK(weft_tensor_alloc(name, WEFT_F32, ndim, shape, WEFT_CPU, WEFT_MEM_OTHER, &t));
	memset(t->data, 0, weft_tensor_nbytes(t));
	return t;
}

static void test_args(weft_ctx *ctx)
{
	int64_t s2[2] = { 4, 8 }, s3[3] = { 2, 3, 16 }, s7[1] = { 7 }, s9[3] = { 2, 3, 9 };
	int64_t s2b[2] = { 4, 6 }, s1[1] = { 16 };
	weft_tensor *x = f32("x", 2, s2), *w7 = f32("w", 1, s7), *q = f32("qkv", 3, s3);
	weft_tensor *odd = f32("gate_up", 3, s9), *g = f32("gate", 2, s2), *u = f32("up", 2, s2b);
	weft_tensor *v = f32("v", 1, s1), *out = (weft_tensor *)1;
	weft_rope rope = { .struct_size = sizeof(weft_rope), .theta = 10000.0 };
	weft_rope bad;

	weft_ctx_step_begin(ctx);
	/* rmsnorm */
	WT_FAILS(weft_op_rmsnorm(ctx, x, w7, 1e-5f, &out), WEFT_ERR_SHAPE, "rmsnorm", "w [7]",
		 "x [4, 8]", "must be [8]");
	WT_CHECK(out == NULL);
	WT_FAILS(weft_op_rmsnorm(ctx, x, NULL, 0.0f, &out), WEFT_ERR_INVALID_ARG, "rmsnorm",
		 "eps is 0", "positive");
	/* rope */
	WT_FAILS(weft_op_rope(ctx, x, &rope, 1, 8, 0, &out), WEFT_ERR_SHAPE, "rope", "x [4, 8]",
		 "3-D");
	WT_FAILS(weft_op_rope(ctx, q, &rope, 2, 7, 0, &out), WEFT_ERR_INVALID_ARG, "rope",
		 "head_dim is 7", "even");
	WT_FAILS(weft_op_rope(ctx, q, &rope, 3, 8, 0, &out), WEFT_ERR_SHAPE, "rope",
		 "x 'qkv' [2, 3, 16]", "3 rotated heads of 8", "at most 2 heads");
	WT_FAILS(weft_op_rope(ctx, q, &rope, 2, 8, -1, &out), WEFT_ERR_INVALID_ARG, "rope",
		 "positions -1 to 1");
	WT_FAILS(weft_op_rope(ctx, q, NULL, 2, 8, 0, &out), WEFT_ERR_INVALID_ARG, "rope is NULL");
	bad = rope;
	bad.struct_size = 8;
	WT_FAILS(weft_op_rope(ctx, q, &bad, 2, 8, 0, &out), WEFT_ERR_INVALID_ARG,
		 "rope.struct_size is 8", "sizeof(weft_rope)");
	bad = rope;
	bad.theta = 0.5;
	WT_FAILS(weft_op_rope(ctx, q, &bad, 2, 8, 0, &out), WEFT_ERR_INVALID_ARG,
		 "theta is 0.5", "10000 or 500000");
	bad = rope;
	bad.scaling = 7;
	WT_FAILS(weft_op_rope(ctx, q, &bad, 2, 8, 0, &out), WEFT_ERR_INVALID_ARG,
		 "rope scaling 7 is unknown", "WEFT_ROPE_LLAMA3");
	bad = rope;
	bad.scaling = WEFT_ROPE_LLAMA3;
	bad.factor = 8.0;
	bad.low_freq_factor = 4.0;
	bad.high_freq_factor = 1.0;
	bad.original_max_positions = 8192.0;
	WT_FAILS(weft_op_rope(ctx, q, &bad, 2, 8, 0, &out), WEFT_ERR_INVALID_ARG,
		 "low_freq_factor 4, high_freq_factor 1", "above low_freq_factor");
	/* swiglu */
	WT_FAILS(weft_op_swiglu(ctx, g, u, &out), WEFT_ERR_SHAPE, "swiglu", "gate [4, 8]",
		 "up [4, 6]", "one shape");
	WT_FAILS(weft_op_swiglu(ctx, odd, NULL, &out), WEFT_ERR_SHAPE, "swiglu",
		 "gate 'gate_up' [2, 3, 9]", "must be even");
	/* attention_gqa */
	WT_FAILS(weft_op_attention_gqa(ctx, q, 3, 2, &out), WEFT_ERR_INVALID_ARG,
		 "attention_gqa", "n_head 3 and n_kv_head 2", "must divide");
	WT_FAILS(weft_op_attention_gqa(ctx, q, 4, 1, &out), WEFT_ERR_SHAPE, "attention_gqa",
		 "qkv [2, 3, 16]", "4 query and 1 kv heads", "multiple of 6");
	WT_FAILS(weft_op_attention_gqa(ctx, x, 1, 1, &out), WEFT_ERR_SHAPE, "attention_gqa",
		 "qkv 'x' [4, 8]", "3-D");
	WT_CHECK(out == NULL);
	weft_tensor_free(x);
	weft_tensor_free(w7);
	weft_tensor_free(q);
	weft_tensor_free(odd);
	weft_tensor_free(g);
	weft_tensor_free(u);
	weft_tensor_free(v);
}

/* A copy of the CPU table with `member` set NULL (or cut to ABI 1.3's
 * size), installed for contexts made from now on. */
static weft_kernel_table g_table;

static void test_missing_kernels(void)
{
	const weft_kernel_table *cpu;
	weft_ctx *ctx;
	weft_ctx_options opt = { .seed = 1 };
	int64_t s3[3] = { 1, 2, 16 };
	weft_tensor *q = f32("qkv", 3, s3), *out;
	weft_rope rope = { .struct_size = sizeof(weft_rope), .theta = 10000.0 };

	WT_OK(weft_kernels_get(WEFT_CPU, &cpu));
	g_table = *cpu;
	g_table.rmsnorm_backward = NULL;
	g_table.swiglu_forward = NULL;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &g_table));
	WT_OK(weft_ctx_create(&opt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_FAILS(weft_op_rmsnorm(ctx, q, NULL, 1e-5f, &out), WEFT_ERR_UNSUPPORTED,
		 "rmsnorm: the 'cpu' kernel table", "has no rmsnorm_backward", "ABI 1.4",
		 "rebuild");
	WT_FAILS(weft_op_swiglu(ctx, q, NULL, &out), WEFT_ERR_UNSUPPORTED,
		 "has no swiglu_forward");
	WT_OK(weft_op_rope(ctx, q, &rope, 2, 8, 0, &out));
	weft_ctx_free(ctx);

	/* a table built before ABI 1.4 ends at optim_step */
	g_table = *cpu;
	g_table.head.struct_size = (uint32_t)(offsetof(weft_kernel_table, optim_step) +
					      sizeof(g_table.optim_step));
	g_table.head.abi_version = WEFT_ABI_MAKE(1, 3);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &g_table));
	WT_OK(weft_ctx_create(&opt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_FAILS(weft_op_attention_gqa(ctx, q, 1, 1, &out), WEFT_ERR_UNSUPPORTED,
		 "attention_gqa: the 'cpu' kernel table (device cpu, ABI 1.3)",
		 "has no attention_gqa_forward");
	WT_FAILS(weft_op_rope(ctx, q, &rope, 2, 8, 0, &out), WEFT_ERR_UNSUPPORTED,
		 "has no rope_forward");
	weft_ctx_free(ctx);

	/* GELU's exact form: a table built before ABI 1.5 (ending at
	 * flash_attention_backward), and one whose member is NULL */
	g_table = *cpu;
	g_table.head.struct_size = (uint32_t)(offsetof(weft_kernel_table,
						       flash_attention_backward) +
					      sizeof(g_table.flash_attention_backward));
	g_table.head.abi_version = WEFT_ABI_MAKE(1, 4);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &g_table));
	WT_OK(weft_ctx_create(&opt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_FAILS(weft_op_gelu_erf(ctx, q, &out), WEFT_ERR_UNSUPPORTED,
		 "gelu_erf: the 'cpu' kernel table (device cpu, ABI 1.4)",
		 "has no gelu_erf_forward/gelu_erf_backward", "since ABI 1.5",
		 "model.mlp: gelu_tanh");
	weft_ctx_free(ctx);
	g_table = *cpu;
	g_table.gelu_erf_backward = NULL;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &g_table));
	WT_OK(weft_ctx_create(&opt, &ctx));
	weft_ctx_step_begin(ctx);
	WT_FAILS(weft_op_gelu_erf(ctx, q, &out), WEFT_ERR_UNSUPPORTED,
		 "has no gelu_erf_forward/gelu_erf_backward");
	weft_ctx_free(ctx);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
	weft_tensor_free(q);
}

int main(void)
{
	weft_ctx *ctx;
	weft_ctx_options opt = { .seed = 1 };

	WT_OK(weft_ctx_create(&opt, &ctx));
	test_args(ctx);
	weft_ctx_free(ctx);
	test_missing_kernels();
	return wt_done("test_tensor_llama_errors");
}
