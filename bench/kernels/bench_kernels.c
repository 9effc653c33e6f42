/* Kernel benchmark: sgemm GFLOP/s, then forward+backward of the GPT ops
 * and of the Llama-family layers (GQA attention with a third of the heads
 * as kv heads, RMSNorm, RoPE, SwiGLU) through weft's ops and tape, each as GFLOP/s (matrix ops) or GB/s (row
 * ops), with the matrix ops as a fraction of sgemm. Times are CPU time of
 * the process (all threads), best of REPS: on a machine shared with other
 * work a 1-thread run then measures what a quiet core would do.
 *
 *     bench_kernels [threads]      (default: weft_cpu_threads_resolve)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sgemm_bench.h"
#include "weft/autograd.h"
#include "weft/ops.h"

#define REPS 5

static weft_tensor *input(weft_ctx *ctx, int32_t ndim, const int64_t *shape, int grad)
{
	weft_tensor *t;

	if (weft_ctx_tensor(ctx, "in", WEFT_F32, ndim, shape, &t)) {
		fprintf(stderr, "bench_kernels: %s\n", weft_error_last());
		exit(1);
	}
	for (int64_t i = 0; i < weft_tensor_numel(t); i++)
		((float *)t->data)[i] = (float)((i * 7919) % 1000) * 0.001f - 0.5f;
	weft_tensor_requires_grad(t, grad);
	return t;
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef enum { OP_LINEAR, OP_ATTENTION, OP_LAYERNORM, OP_GELU, OP_GQA, OP_RMSNORM, OP_ROPE,
	       OP_SWIGLU } which;

/* One timed forward + backward; returns seconds (best of REPS). */
static double time_op(weft_ctx *ctx, which op, int64_t B, int64_t T, int64_t C, int64_t nh)
{
	double best = 1e30;

	for (int r = 0; r < REPS + 1; r++) {
		int64_t sx[3] = { B, T, C }, sqkv[3] = { B, T, 3 * C }, sw[2] = { 4 * C, C },
			sc[1] = { C }, sgqa[3] = { B, T, C + 2 * (C / 3) }, sgu[3] = { B, T, 2 * C };
		const int64_t *shape = op == OP_ATTENTION ? sqkv : op == OP_GQA || op == OP_ROPE ? sgqa
				     : op == OP_SWIGLU ? sgu : sx;
		weft_rope rope = { .struct_size = sizeof(rope), .scaling = WEFT_ROPE_LLAMA3,
				   .theta = 500000.0, .factor = 32.0, .low_freq_factor = 1.0,
				   .high_freq_factor = 4.0, .original_max_positions = 8192.0 };
		weft_tensor *x, *w, *g, *bb, *y;
		double t0;
		weft_status st;

		weft_ctx_step_begin(ctx);
		x = input(ctx, 3, shape, 1);
		w = input(ctx, 2, sw, 1);
		g = input(ctx, 1, sc, 1);
		bb = input(ctx, 1, sc, 1);
		t0 = cpu_now();
		switch (op) {
		case OP_LINEAR: st = weft_op_linear(ctx, x, w, NULL, &y); break;
		case OP_ATTENTION: st = weft_op_attention(ctx, x, nh, &y); break;
		case OP_LAYERNORM: st = weft_op_layernorm(ctx, x, g, bb, 1e-5f, &y); break;
		case OP_GQA: st = weft_op_attention_gqa(ctx, x, nh, nh / 3, &y); break;
		case OP_RMSNORM: st = weft_op_rmsnorm(ctx, x, g, 1e-5f, &y); break;
		case OP_ROPE: st = weft_op_rope(ctx, x, &rope, nh + nh / 3, C / nh, 0, &y); break;
		case OP_SWIGLU: st = weft_op_swiglu(ctx, x, NULL, &y); break;
		default: st = weft_op_gelu(ctx, x, &y); break;
		}
		if (!st)
			st = weft_backward_from(ctx, y, y);
		if (st) {
			fprintf(stderr, "bench_kernels: %s\n", weft_error_last());
			exit(1);
		}
		if (r > 0 && cpu_now() - t0 < best)
			best = cpu_now() - t0;
	}
	return best;
}

int main(int argc, char **argv)
{
	int64_t threads = weft_cpu_threads_resolve(argc > 1 ? atoll(argv[1]) : 0, 1);
	int64_t B = 4, T = 256, C = 384, nh = 6, BT = B * T;
	weft_ctx *ctx;
	double sg, s, fl;

	weft_cpu_set_threads(threads);
	if (weft_ctx_create(NULL, &ctx)) {
		fprintf(stderr, "bench_kernels: %s\n", weft_error_last());
		return 1;
	}
	printf("threads %lld; shapes B %lld T %lld C %lld heads %lld\n", (long long)threads,
	       (long long)B, (long long)T, (long long)C, (long long)nh);
	sg = weft_bench_sgemm_gflops(BT, 4 * C, C, 0.5, NULL, NULL);
	printf("%-28s %8.1f GFLOP/s\n", "sgemm (BT x C) @ (C x 4C)", sg);
	printf("%-28s %8.1f GFLOP/s\n", "sgemm 1024^3", weft_bench_sgemm_gflops(1024, 1024, 1024, 0.5, NULL, NULL));

	s = time_op(ctx, OP_LINEAR, B, T, C, nh);
	fl = 3 * 2.0 * BT * 4 * C * C; /* forward + two backward GEMMs */
	printf("%-28s %8.3f ms %8.1f GFLOP/s  %5.1f%% of sgemm\n", "linear C->4C fwd+bwd",
	       s * 1e3, fl / s / 1e9, 100.0 * fl / s / 1e9 / sg);
	s = time_op(ctx, OP_ATTENTION, B, T, C, nh);
	fl = 3 * 2.0 * 2.0 * B * T * T * C * 0.5; /* QK^T and AV, causal half; bwd 2x */
	printf("%-28s %8.3f ms %8.1f GFLOP/s  %5.1f%% of sgemm (causal FLOPs)\n",
	       "attention fwd+bwd", s * 1e3, fl / s / 1e9, 100.0 * fl / s / 1e9 / sg);
	s = time_op(ctx, OP_LAYERNORM, B, T, C, nh);
	printf("%-28s %8.3f ms %8.1f GB/s\n", "layernorm fwd+bwd", s * 1e3,
	       6.0 * BT * C * 4 / s / 1e9);
	s = time_op(ctx, OP_GELU, B, T, C, nh);
	printf("%-28s %8.3f ms %8.1f GB/s\n", "gelu fwd+bwd", s * 1e3, 5.0 * BT * C * 4 / s / 1e9);
	s = time_op(ctx, OP_GQA, B, T, C, nh);
	fl = 3 * 2.0 * 2.0 * B * T * T * C * 0.5;
	printf("%-28s %8.3f ms %8.1f GFLOP/s  %5.1f%% of sgemm (causal FLOPs)\n",
	       "attention gqa (kv nh/3)", s * 1e3, fl / s / 1e9, 100.0 * fl / s / 1e9 / sg);
	s = time_op(ctx, OP_RMSNORM, B, T, C, nh);
	printf("%-28s %8.3f ms %8.1f GB/s\n", "rmsnorm fwd+bwd", s * 1e3,
	       5.0 * BT * C * 4 / s / 1e9);
	s = time_op(ctx, OP_ROPE, B, T, C, nh);
	printf("%-28s %8.3f ms %8.1f GB/s\n", "rope (llama3) fwd+bwd", s * 1e3,
	       4.0 * BT * (C + 2 * (C / 3)) * 4 / s / 1e9);
	s = time_op(ctx, OP_SWIGLU, B, T, C, nh);
	printf("%-28s %8.3f ms %8.1f GB/s\n", "swiglu packed fwd+bwd", s * 1e3,
	       8.0 * BT * C * 4 / s / 1e9);
	weft_ctx_free(ctx);
	return 0;
}
