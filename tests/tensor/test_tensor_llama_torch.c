/* The Llama-family layer ops against PyTorch and Hugging Face transformers:
 * tests/fixtures/llama_ops holds, per case, float32 inputs, an upstream
 * gradient dy, and the forward output and input gradients that
 * gen_llama_ops.py computed in float64 with F.rms_norm, transformers'
 * LlamaRotaryEmbedding (llama3 scaling) and apply_rotary_pos_emb,
 * F.silu(gate) * up, and F.scaled_dot_product_attention(enable_gqa=True);
 * and GELU's exact form against F.gelu. No Python at test time.
 *
 * Tolerance: |weft - torch| <= 1e-5 + 1e-4 |torch|, elementwise. weft
 * computes in float32: each value sums at most ~40 terms of magnitude
 * <= ~8, so its rounding error is ~40 * 6e-8 * 8 ~ 2e-5 relative to the
 * largest term in the worst case and ~1e-6 typically; exp and cos add
 * ~2e-7 relative. 1e-4 relative leaves that a margin, yet a wrong
 * frequency band, a misplaced head or a missing term is off by 1e-2 or
 * more. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"

#ifndef LLAMA_FIXTURES
#define LLAMA_FIXTURES "tests/fixtures/llama_ops"
#endif

/* Reads a little-endian float32 .npy (format 1.0 or 2.0, C order) into a
 * new heap tensor named `name`. */
static weft_tensor *load_npy(const char *kase, const char *name)
{
	char path[512], *hdr;
	unsigned char pre[12];
	int64_t shape[WEFT_MAX_DIMS];
	int32_t ndim = 0;
	uint32_t hlen;
	size_t pre_len;
	weft_tensor *t;
	const char *p;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s.npy", LLAMA_FIXTURES, kase, name);
	f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		WT_REQUIRE(f);
	}
	WT_REQUIRE(fread(pre, 1, 10, f) == 10 && memcmp(pre, "\x93NUMPY", 6) == 0);
	if (pre[6] == 1) {
		hlen = pre[8] | (uint32_t)pre[9] << 8;
		pre_len = 10;
	} else {
		WT_REQUIRE(fread(pre + 10, 1, 2, f) == 2);
		hlen = pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 |
		       (uint32_t)pre[11] << 24;
		pre_len = 12;
	}
	(void)pre_len;
	hdr = calloc(1, hlen + 1);
	WT_REQUIRE(hdr && fread(hdr, 1, hlen, f) == hlen);
	WT_REQUIRE(strstr(hdr, "'descr': '<f4'") && strstr(hdr, "'fortran_order': False"));
	p = strstr(hdr, "'shape': (");
	WT_REQUIRE(p);
	p += strlen("'shape': (");
	while (*p && *p != ')') {
		char *end;
		long long v = strtoll(p, &end, 10);

		if (end == p) {
			p++;
			continue;
		}
		WT_REQUIRE(ndim < WEFT_MAX_DIMS);
		shape[ndim++] = v;
		p = end;
	}
	free(hdr);
	WT_OK(weft_tensor_alloc(name, WEFT_F32, ndim, shape, WEFT_CPU, WEFT_MEM_OTHER, &t));
	WT_REQUIRE(fread(t->data, 1, weft_tensor_nbytes(t), f) == weft_tensor_nbytes(t));
	fclose(f);
	return t;
}

/* Compares n floats with the tolerance above; reports the worst. */
static void near(const char *what, const float *got, const weft_tensor *want)
{
	const float *w = want->data;
	int64_t n = weft_tensor_numel(want), bad = 0, worst = 0;
	double worst_err = 0.0;

	for (int64_t i = 0; i < n; i++) {
		double err = fabs((double)got[i] - (double)w[i]);

		if (err > worst_err) {
			worst_err = err;
			worst = i;
		}
		if (!(err <= 1e-5 + 1e-4 * fabs((double)w[i])))
			bad++;
	}
	wt_checks++;
	if (bad) {
		wt_failures++;
		fprintf(stderr, "%s: %lld of %lld elements off; worst at %lld: weft %.8g, torch "
			"%.8g\n", what, (long long)bad, (long long)n, (long long)worst,
			(double)got[worst], (double)w[worst]);
	}
}

/* A forward under test: inputs (F32 tensors needing gradients, NULL
 * allowed) to one output. */
typedef weft_status (*fwd_fn)(weft_ctx *ctx, weft_tensor **in, weft_tensor **out);

static weft_rope g_rope;
static int64_t g_a, g_b, g_c;

static weft_status f_rmsnorm(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_rmsnorm(c, in[0], in[1], 1e-5f, out);
}

static weft_status f_rope(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_rope(c, in[0], &g_rope, g_a, g_b, g_c, out);
}

static weft_status f_swiglu(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_swiglu(c, in[0], in[1], out);
}

static weft_status f_gelu_erf(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_gelu_erf(c, in[0], out);
}

static weft_status f_gqa(weft_ctx *c, weft_tensor **in, weft_tensor **out)
{
	return weft_op_attention_gqa(c, in[0], g_a, g_b, out);
}

/* Runs the case: loads the inputs, runs forward and backward from dy, and
 * compares out and each input's gradient (fixture "d" + input name). */
static void run_case(weft_ctx *ctx, const char *kase, fwd_fn f, const char *const *names, int n)
{
	weft_tensor *in[4] = { 0 }, *dy = load_npy(kase, "dy"), *out, *want;
	char what[128], gname[64];

	for (int i = 0; i < n; i++) {
		in[i] = load_npy(kase, names[i]);
		weft_tensor_requires_grad(in[i], 1);
	}
	weft_ctx_step_begin(ctx);
	WT_OK(f(ctx, in, &out));
	want = load_npy(kase, "out");
	WT_CHECK(weft_tensor_numel(out) == weft_tensor_numel(want));
	snprintf(what, sizeof(what), "%s: out", kase);
	near(what, out->data, want);
	weft_tensor_free(want);
	WT_OK(weft_backward_from(ctx, out, dy));
	for (int i = 0; i < n; i++) {
		snprintf(gname, sizeof(gname), "d%s", names[i]);
		want = load_npy(kase, gname);
		WT_REQUIRE(in[i]->grad);
		snprintf(what, sizeof(what), "%s: %s", kase, gname);
		near(what, in[i]->grad->data, want);
		weft_tensor_free(want);
		weft_tensor_free(in[i]);
	}
	weft_tensor_free(dy);
}

int main(void)
{
	static const char *const x_w[] = { "x", "w" }, *const x[] = { "x" };
	static const char *const gu[] = { "gate", "up" }, *const qkv[] = { "qkv" };
	weft_ctx *ctx;
	weft_ctx_options opt = { .seed = 1 };

	WT_OK(weft_ctx_create(&opt, &ctx));
	run_case(ctx, "rmsnorm", f_rmsnorm, x_w, 2);
	/* rope_type llama3: theta 1e4, factor 8, low 1, high 4, original 64; head_dim 8,
	 * 3 query + 1 kv head rotated in a packed qkv of width 40, positions from 5 */
	g_rope = (weft_rope){ .struct_size = sizeof(weft_rope), .scaling = WEFT_ROPE_LLAMA3,
			      .theta = 10000.0, .factor = 8.0, .low_freq_factor = 1.0,
			      .high_freq_factor = 4.0, .original_max_positions = 64.0 };
	g_a = 4;
	g_b = 8;
	g_c = 5;
	run_case(ctx, "rope_llama3", f_rope, x, 1);
	/* plain rope, theta 5e5; head_dim 6, 2 heads, positions from 0 */
	g_rope = (weft_rope){ .struct_size = sizeof(weft_rope), .theta = 500000.0 };
	g_a = 2;
	g_b = 6;
	g_c = 0;
	run_case(ctx, "rope_plain", f_rope, x, 1);
	run_case(ctx, "swiglu", f_swiglu, gu, 2);
	g_a = 4; /* 4 query heads, 2 kv heads, head size 5 */
	g_b = 2;
	run_case(ctx, "attn_gqa", f_gqa, qkv, 1);
	g_a = 3; /* multi-query: 3 query heads, 1 kv head */
	g_b = 1;
	run_case(ctx, "attn_mqa", f_gqa, qkv, 1);
	g_a = 2; /* multi-head */
	g_b = 2;
	run_case(ctx, "attn_mha", f_gqa, qkv, 1);
	run_case(ctx, "gelu_erf", f_gelu_erf, x, 1);
	weft_ctx_free(ctx);
	return wt_done("test_tensor_llama_torch");
}
