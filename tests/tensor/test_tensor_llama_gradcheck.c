/* The Llama-family layer ops' gradients against central finite
 * differences (tu_gradcheck, tolerances justified there), on small odd
 * shapes: RMSNorm with and without a weight, RoPE plain and with Llama 3
 * scaling on a packed q | k | v (v passing through) at a position offset,
 * SwiGLU as two tensors and packed, and attention with MHA, GQA and MQA
 * heads, one case past a causal tile. Also: attention_gqa with as many kv
 * heads as query heads is GPT's attention, bit for bit; and a block's
 * output and gradients are the same bits at 1 and at 3 kernel threads. */
#include <stdlib.h>
#include <string.h>

#include "tensor_testutil.h"

static int64_t g_nh, g_nkv, g_rot, g_hs, g_pos;
static weft_rope g_rope;

static weft_status f_rmsnorm(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_rmsnorm(c, in[0], in[1], 1e-5f, out);
}

static weft_status f_rope(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_rope(c, in[0], &g_rope, g_rot, g_hs, g_pos, out);
}

static weft_status f_swiglu(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_swiglu(c, in[0], in[1], out);
}

static weft_status f_gqa(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_attention_gqa(c, in[0], g_nh, g_nkv, out);
}

/* A block as a model uses them: rmsnorm, rope on the packed projection,
 * GQA attention, then swiglu of the attention output with itself. */
static weft_status f_block(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	weft_tensor *n, *r, *a;
	weft_status st;

	if ((st = weft_op_rmsnorm(c, in[0], in[1], 1e-5f, &n)) ||
	    (st = weft_op_rope(c, n, &g_rope, g_nh + g_nkv, g_hs, 0, &r)) ||
	    (st = weft_op_attention_gqa(c, r, g_nh, g_nkv, &a)))
		return st;
	return weft_op_swiglu(c, a, NULL, out);
}

static void check(const char *name, weft_ctx *ctx, tu_forward f, weft_tensor **in, int n,
		  int max_checks)
{
	for (int i = 0; i < n; i++)
		if (in[i])
			weft_tensor_requires_grad(in[i], 1);
	tu_gradcheck(name, ctx, f, in, n, max_checks);
	for (int i = 0; i < n; i++)
		weft_tensor_free(in[i]);
}

static void gqa_case(weft_ctx *ctx, const char *name, int64_t B, int64_t T, int64_t nh,
		     int64_t nkv, int64_t hs, int max_checks)
{
	int64_t s[3] = { B, T, (nh + 2 * nkv) * hs };
	weft_tensor *in[1] = { tu_rand("qkv", 3, s, -1, 1, 0) };

	g_nh = nh;
	g_nkv = nkv;
	check(name, ctx, f_gqa, in, 1, max_checks);
}

/* attention_gqa(nh, nh) and attention(nh) on one qkv: the same output and
 * the same gradient, bit for bit (one implementation). */
static void gqa_is_mha(weft_ctx *ctx)
{
	int64_t s[3] = { 2, 9, 3 * 3 * 5 };
	weft_tensor *qkv = tu_rand("qkv", 3, s, -1, 1, 0), *a, *b, *da;
	size_t bytes;

	weft_tensor_requires_grad(qkv, 1);
	weft_ctx_step_begin(ctx);
	WT_OK(weft_op_attention(ctx, qkv, 3, &a));
	WT_OK(weft_backward_from(ctx, a, a));
	bytes = weft_tensor_nbytes(qkv);
	da = NULL;
	WT_OK(weft_tensor_alloc("da", WEFT_F32, 3, s, WEFT_CPU, WEFT_MEM_OTHER, &da));
	memcpy(da->data, qkv->grad->data, bytes);
	{
		weft_tensor *ga;

		WT_OK(weft_tensor_alloc("a", WEFT_F32, 3, a->shape, WEFT_CPU, WEFT_MEM_OTHER, &ga));
		memcpy(ga->data, a->data, weft_tensor_nbytes(a));
		weft_ctx_step_begin(ctx);
		WT_OK(weft_op_attention_gqa(ctx, qkv, 3, 3, &b));
		WT_OK(weft_backward_from(ctx, b, b));
		WT_CHECK(memcmp(ga->data, b->data, weft_tensor_nbytes(b)) == 0);
		WT_CHECK(memcmp(da->data, qkv->grad->data, bytes) == 0);
		weft_tensor_free(ga);
	}
	weft_tensor_free(da);
	weft_tensor_free(qkv);
}

/* Rows enough for the row kernels to split over threads: rmsnorm, rope
 * (2 heads of 8 rotated), packed swiglu. */
static weft_status f_rows(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	weft_tensor *n, *r;
	weft_status st;

	if ((st = weft_op_rmsnorm(c, in[0], in[1], 1e-5f, &n)) ||
	    (st = weft_op_rope(c, n, &g_rope, 2, 8, 7, &r)))
		return st;
	return weft_op_swiglu(c, r, NULL, out);
}

/* A forward and backward at `threads`: copies of the output and of
 * the two inputs' gradients into one malloc'd buffer. */
static float *block_at(weft_ctx *ctx, tu_forward f, weft_tensor **in, int64_t threads,
		       size_t *bytes)
{
	weft_tensor *y;
	size_t ny, nx, nw;
	float *buf;

	weft_cpu_set_threads(threads);
	weft_ctx_step_begin(ctx);
	WT_OK(f(ctx, in, &y));
	WT_OK(weft_backward_from(ctx, y, y));
	ny = weft_tensor_nbytes(y);
	nx = weft_tensor_nbytes(in[0]);
	nw = weft_tensor_nbytes(in[1]);
	*bytes = ny + nx + nw;
	buf = malloc(*bytes);
	WT_REQUIRE(buf);
	memcpy(buf, y->data, ny);
	memcpy((char *)buf + ny, in[0]->grad->data, nx);
	memcpy((char *)buf + ny + nx, in[1]->grad->data, nw);
	WT_OK(weft_tensor_zero(in[0]->grad));
	WT_OK(weft_tensor_zero(in[1]->grad));
	return buf;
}

static void agree(weft_ctx *ctx, const char *name, tu_forward f, int32_t ndim,
		  const int64_t *sx, const int64_t *sw)
{
	weft_tensor *in[2] = { tu_rand("x", ndim, sx, -2, 2, 0), tu_rand("w", 1, sw, 0.5f, 1.5f, 0) };
	int64_t before = weft_cpu_get_threads();
	size_t b1, b3;
	float *one, *three;

	weft_tensor_requires_grad(in[0], 1);
	weft_tensor_requires_grad(in[1], 1);
	one = block_at(ctx, f, in, 1, &b1);
	three = block_at(ctx, f, in, 3, &b3);
	if (!(b1 == b3 && memcmp(one, three, b1) == 0))
		fprintf(stderr, "%s: 1 and 3 threads differ\n", name);
	WT_CHECK(b1 == b3 && memcmp(one, three, b1) == 0);
	weft_cpu_set_threads(before);
	free(one);
	free(three);
	weft_tensor_free(in[0]);
	weft_tensor_free(in[1]);
}

static void threads_agree(weft_ctx *ctx)
{
	/* a block: 3 x 37 rows, 4 query + 2 kv heads of 8 (attention's groups
	 * split over the threads) */
	int64_t sx[3] = { 3, 37, (4 + 2 * 2) * 8 }, sw[1] = { (4 + 2 * 2) * 8 };
	/* 24000 rows of 16: the row kernels split (RMSNorm's weight gradient
	 * over 750 blocks of 32 rows) */
	int64_t sr[3] = { 8, 3000, 16 }, swr[1] = { 16 };

	g_rope = (weft_rope){ .struct_size = sizeof(weft_rope), .scaling = WEFT_ROPE_LLAMA3,
			      .theta = 500000.0, .factor = 32.0, .low_freq_factor = 1.0,
			      .high_freq_factor = 4.0, .original_max_positions = 8192.0 };
	g_nh = 4;
	g_nkv = 2;
	g_hs = 8;
	agree(ctx, "llama block", f_block, 3, sx, sw);
	agree(ctx, "row kernels", f_rows, 3, sr, swr);
}

int main(void)
{
	weft_ctx *ctx;
	weft_ctx_options opt = { .seed = 1 };

	WT_OK(weft_ctx_create(&opt, &ctx));
	{ /* rmsnorm: odd rows and columns, with and without a weight */
		int64_t sx[3] = { 2, 3, 7 }, sw[1] = { 7 };
		weft_tensor *in[2] = { tu_rand("x", 3, sx, -2, 2, 0), tu_rand("w", 1, sw, 0.5f, 1.5f, 0) };
		check("rmsnorm", ctx, f_rmsnorm, in, 2, 1000);
		weft_tensor *in2[2] = { tu_rand("x", 3, sx, -2, 2, 0), NULL };
		check("rmsnorm plain", ctx, f_rmsnorm, in2, 2, 1000);
		/* more than one block of 32 rows for the weight's partial sums */
		int64_t sx3[2] = { 67, 5 }, sw3[1] = { 5 };
		weft_tensor *in3[2] = { tu_rand("x", 2, sx3, -2, 2, 0),
					tu_rand("w", 1, sw3, 0.5f, 1.5f, 0) };
		check("rmsnorm blocks", ctx, f_rmsnorm, in3, 2, 1000);
	}
	{ /* rope: llama3 scaling (all three bands at head_dim 8), packed q | k | v of
	   * 3 query heads and 1 kv head, v passing through, positions from 5 */
		int64_t s[3] = { 2, 5, (3 + 2) * 8 };
		weft_tensor *in[1] = { tu_rand("qkv", 3, s, -2, 2, 0) };

		g_rope = (weft_rope){ .struct_size = sizeof(weft_rope), .scaling = WEFT_ROPE_LLAMA3,
				      .theta = 10000.0, .factor = 8.0, .low_freq_factor = 1.0,
				      .high_freq_factor = 4.0, .original_max_positions = 64.0 };
		g_rot = 4;
		g_hs = 8;
		g_pos = 5;
		check("rope llama3", ctx, f_rope, in, 1, 1000);
		/* plain, head_dim 6 (3 pairs), every head rotated */
		int64_t s2[3] = { 1, 3, 12 };
		weft_tensor *in2[1] = { tu_rand("q", 3, s2, -2, 2, 0) };
		g_rope = (weft_rope){ .struct_size = sizeof(weft_rope), .theta = 10000.0 };
		g_rot = 2;
		g_hs = 6;
		g_pos = 0;
		check("rope plain", ctx, f_rope, in2, 1, 1000);
	}
	{ /* swiglu: two tensors, and one packed [gate | up] */
		int64_t s[2] = { 3, 5 }, sp[3] = { 1, 3, 14 };
		weft_tensor *in[2] = { tu_rand("gate", 2, s, -4, 4, 0), tu_rand("up", 2, s, -2, 2, 0) };
		check("swiglu", ctx, f_swiglu, in, 2, 1000);
		weft_tensor *in2[2] = { tu_rand("gate_up", 3, sp, -4, 4, 0), NULL };
		check("swiglu packed", ctx, f_swiglu, in2, 2, 1000);
	}
	/* attention: MHA, GQA, MQA at odd head sizes; past one causal tile */
	gqa_case(ctx, "attention_gqa mha", 2, 5, 2, 2, 3, 1000);
	gqa_case(ctx, "attention_gqa gqa", 2, 5, 6, 2, 3, 1000);
	gqa_case(ctx, "attention_gqa mqa", 1, 7, 3, 1, 5, 1000);
	gqa_case(ctx, "attention_gqa tiled", 1, 70, 2, 1, 2, 60);
	{ /* a block: rmsnorm -> rope -> GQA attention -> swiglu */
		int64_t sx[3] = { 2, 4, (4 + 2 * 2) * 4 }, sw[1] = { (4 + 2 * 2) * 4 };
		weft_tensor *in[2] = { tu_rand("x", 3, sx, -2, 2, 0), tu_rand("w", 1, sw, 0.5f, 1.5f, 0) };

		g_rope = (weft_rope){ .struct_size = sizeof(weft_rope), .theta = 500000.0 };
		g_nh = 4;
		g_nkv = 2;
		g_hs = 4;
		check("llama block", ctx, f_block, in, 2, 1000);
	}
	gqa_is_mha(ctx);
	threads_agree(ctx);
	weft_ctx_free(ctx);
	return wt_done("test_tensor_llama_gradcheck");
}
