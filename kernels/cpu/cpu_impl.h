/* Kernel functions of the CPU table, one file per family. All take F32
 * data (the table's float_dtypes); see weft_kernel_table for contracts. */
#ifndef WEFT_CPU_IMPL_H
#define WEFT_CPU_IMPL_H

#include <math.h>
#include <string.h>

#include "weft/device.h"

/* Hot loops are compiled three times, for AVX-512 (x86-64-v4), AVX2 + FMA
 * (x86-64-v3) and baseline x86-64, and the loader picks the best the CPU
 * runs (function multiversioning through an ifunc), so the build
 * stays portable (no -march) while the loops run 16 floats wide where they
 * can. Elsewhere one portable version. The v3/v4 versions contract a*b+c
 * into FMA, so their results may differ from the baseline one in the last
 * bit; each machine always runs the same version. WEFT_TARGET_CLONES is
 * set where the compiler names the ifunc after the function, so another
 * file (cpu_table.c) can call it (cmake/target_clones.cmake: clang 14 does
 * not, and gets the portable version). */
#if defined(__x86_64__) && defined(WEFT_TARGET_CLONES)
#define CPU_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_HOT
#endif

/* Lanes of the partial sums of cpu_sum: 16 floats, one AVX-512 register. */
#define CPU_LANES 16

/* A kernel's work on items [begin, end) of its range. */
typedef void (*cpu_range_fn)(void *arg, int64_t begin, int64_t end);

/* Runs fn over [0, n) in contiguous parts (boundaries on multiples of 16
 * items), one part per CPU thread (weft_kernels_cpu_get_threads) with at
 * least `grain` items each, this thread taking the first; fewer parts when
 * n is small, and just fn(arg, 0, n) at 1 thread. Blocks until all parts
 * are done. A thread that cannot be started leaves its part to this one. */
void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *arg);

/* Runs fn(arg, t, t + 1) for each task t of [0, n) at once, one thread a
 * task (task 0 on this one), on the threads cpu_parallel_for uses; n is
 * capped at 64, and the count that ran is returned. */
int64_t cpu_parallel_tasks(int64_t n, cpu_range_fn fn, void *arg);

/* Items per thread below which splitting costs more than it saves (a
 * thread start is some 20 us; 64 Ki floats take about that to stream). */
#define CPU_GRAIN (1 << 16)

weft_status cpu_gemm(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m, int64_t n,
		     int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
		     const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
		     int64_t ldc, int64_t stride_c, int64_t batch);
/* The calling thread's buffer `slot` of at least `bytes` (kept for the
 * thread's next calls, counted under WEFT_MEM_OTHER); NULL when it cannot
 * be had (no memory, or no thread key left). In cpu_parallel.c, with the
 * threads. CPU_BUF_PACK holds the packed operands of the products
 * (cpu_pack_buffer); CPU_BUF_EPILOGUE the widened operands and F32 result
 * of gemm_lowp_ex, which calls those products while it holds it. */
enum cpu_buf { CPU_BUF_PACK, CPU_BUF_EPILOGUE, CPU_BUF_COUNT };
void *cpu_thread_buffer(int slot, size_t bytes);
static inline void *cpu_pack_buffer(size_t bytes)
{
	return cpu_thread_buffer(CPU_BUF_PACK, bytes);
}
/* The AVX-512 F32 product (cpu_sgemm.c): whether this CPU runs it, and
 * C = alpha op(A) op(B) + beta C (row-major, beta 0: C not read), or, with
 * a bias (n floats), alpha op(A) op(B) + bias in every row (beta unused,
 * C not read), on `threads` threads (0: the kernel threads; 1: this one
 * alone); 0 when this CPU lacks AVX-512 or the packing space cannot be
 * had (nothing done). */
int cpu_sgemm_usable(void);
int cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
	      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
	      const float *bias, float *c, int64_t ldc, int64_t threads);

/* Products with a triangle (causal attention's), indices i, j, l counted
 * from 0 in C (i, j) and op(A) (i, l):
 *  - CPU_TRI_C_LOWER: only C(i, j) with j <= i is wanted; right of the
 *    diagonal, C is left as it was or written with the product's value.
 *  - CPU_TRI_A_LOWER: op(A)(i, l) is 0 for l > i; row i of op(A) is read
 *    no further than column roundup(i + 1, CPU_TRI_TILE) - 1, so from i + 1
 *    to there it must hold zeros (past there, anything).
 *  - CPU_TRI_A_UPPER: op(A)(i, l) is 0 for l < i; row i of op(A) is read
 *    from column rounddown(i, CPU_TRI_TILE) on, zeros from there to i - 1.
 * Every element computed is the same sum as without the triangle (the
 * terms left out are products with zeros). */
enum cpu_tri { CPU_TRI_NONE, CPU_TRI_C_LOWER, CPU_TRI_A_LOWER, CPU_TRI_A_UPPER };
#define CPU_TRI_TILE 64
/* cpu_sgemm with trans_a (C = alpha A^T B + beta C, A k x m) that also
 * adds A's rows to sum (m floats: sum[i] += A(l, i), l in order, as
 * cpu_sum_rows adds them): a linear layer's weight and bias gradients
 * in one pass over dy. */
int cpu_sgemm_tn_sum(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
		     const float *b, int64_t ldb, float beta, float *c, int64_t ldc, float *sum,
		     int64_t threads);
/* The table's gemm_tn_sum (cpu_blas.c). */
weft_status cpu_gemm_tn_sum(void *kctx, weft_dtype dt, int64_t m, int64_t n, int64_t k,
			    float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
			    float beta, void *c, int64_t ldc, void *sum);
/* cpu_sgemm with a triangle (bias NULL). */
int cpu_sgemm_tri(int tri, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		  float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
		  const float *bias, float *c, int64_t ldc, int64_t threads);
/* The table's gemm_bias (cpu_blas.c). */
weft_status cpu_gemm_bias(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m,
			  int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			  const void *b, int64_t ldb, const void *bias, void *c, int64_t ldc);
/* The table's copy and zero of host memory, split over the threads when
 * large (cpu_elementwise.c). */
weft_status cpu_copy(void *kctx, void *dst, const void *src, size_t bytes, weft_copy_kind kind);
weft_status cpu_zero(void *kctx, void *dst, size_t bytes);
/* The table's broadcast_rows (cpu_elementwise.c), and the same into rows of
 * dst `stride` bytes apart (>= row_bytes). */
weft_status cpu_broadcast_rows(void *kctx, int64_t rows, size_t row_bytes, const void *src,
			       void *dst);
void cpu_broadcast_rows_ld(int64_t rows, size_t row_bytes, const void *src, void *dst,
			   size_t stride);
/* One product on the calling thread, with a triangle (enum cpu_tri;
 * attention's per-head products): the AVX-512 kernel where cpu_gemm uses
 * it and every size is at least 16, else cblas_sgemm (on the OpenBLAS
 * threads the caller set) in blocks of CPU_TRI_TILE rows, each over the
 * columns of C or the k its rows need. Sizes in OpenBLAS's 32-bit range. */
void cpu_gemm_1(int tri, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
		const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
		int64_t ldc);
weft_status cpu_sum_rows(void *kctx, weft_dtype dt, int64_t rows, int64_t cols, const void *x,
			 void *y);
/* y (cols floats) += each of x's rows, ld floats apart, in row order: per
 * column y[j] + x[0][j] + x[1][j] + ..., left to right, whatever the
 * threads (cpu_blas.c; cpu_sum_rows, and gemm_lowp_ex's BGRAD). */
void cpu_sum_rows_ld(int64_t rows, int64_t cols, const float *x, int64_t ld, float *y);
/* gemm_lowp and its scratch (cpu_blas.c): F16/BF16 inputs widened into
 * scratch, then sgemm. */
weft_status cpu_gemm_lowp(void *kctx, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
			  int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			  int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
			  float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch,
			  void *scratch);
size_t cpu_gemm_lowp_scratch(weft_dtype in_dt, int64_t a_elems, int64_t b_elems);
/* The table's gemm_lowp_ex (cpu_gemm_ex.c). */
weft_status cpu_gemm_lowp_ex(void *kctx, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
			     int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			     const void *b, int64_t ldb, float beta, weft_dtype c_dt, void *c,
			     int64_t ldc, const float *bias, int32_t epilogue, void *aux);

/* BF16 matrix products on Intel AMX (cpu_amx.c). cpu_amx_usable: whether
 * this CPU has AMX-BF16 and the kernel lets the process use its tiles
 * (checked once). cpu_amx_gemm_bf16: gemm_lowp's contract for BF16 inputs
 * and k > 0, on AMX; `scratch` holds cpu_amx_scratch(m, n, k) bytes (the
 * packed operands of one batch item). */
int cpu_amx_usable(void);
size_t cpu_amx_scratch(int64_t m, int64_t n, int64_t k);
weft_status cpu_amx_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
			      float alpha, const uint16_t *a, int64_t lda, int64_t stride_a,
			      const uint16_t *b, int64_t ldb, int64_t stride_b, float beta,
			      float *c, int64_t ldc, int64_t stride_c, int64_t batch, void *scratch);

weft_status cpu_add(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
		    const void *b, void *out);
weft_status cpu_mul(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
		    const void *b, void *out);
weft_status cpu_mul_backward(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
			     const void *b, const void *dy, void *da, void *db);
weft_status cpu_scale(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x,
		      void *out);
weft_status cpu_axpy(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x, void *y);
weft_status cpu_fill(void *kctx, weft_dtype dt, int64_t n, float value, void *out);
weft_status cpu_convert(void *kctx, int64_t n, weft_dtype src_dt, const void *src,
			weft_dtype dst_dt, void *dst);
weft_status cpu_relu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out);
weft_status cpu_relu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
			      const void *dy, void *dx);
weft_status cpu_gelu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out);
weft_status cpu_gelu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
			      const void *dy, void *dx);
weft_status cpu_gelu_erf_forward(void *kctx, weft_dtype dt, int64_t n, const void *x,
				 void *out);
weft_status cpu_gelu_erf_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
				  const void *dy, void *dx);
weft_status cpu_gelu_backward_write(void *kctx, weft_dtype dt, int64_t n, const void *x,
				    const void *dy, void *dx);
weft_status cpu_dropout_forward(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
				int64_t first, const void *x, void *out);
weft_status cpu_dropout_backward(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
				 int64_t first, const void *dy, void *dx);

weft_status cpu_softmax_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				const void *x, void *y);
weft_status cpu_softmax_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				 const void *y, const void *dy, void *dx);
weft_status cpu_layernorm_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				  float eps, const void *x, const void *w, const void *b,
				  void *out, float *mean, float *rstd);
weft_status cpu_layernorm_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				   const void *x, const void *w, const float *mean,
				   const float *rstd, const void *dy, void *dx, void *dw,
				   void *db);
weft_status cpu_embedding_forward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
				  weft_dtype idx_dt, const void *idx, int64_t vocab,
				  const void *table, void *out);
weft_status cpu_embedding_backward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
				   weft_dtype idx_dt, const void *idx, const void *dy,
				   void *dtable);
weft_status cpu_cross_entropy_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				      const void *logits, weft_dtype idx_dt, const void *targets,
				      int64_t ignore_index, void *probs, float *loss,
				      float *count);
weft_status cpu_cross_entropy_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				       const void *probs, weft_dtype idx_dt, const void *targets,
				       int64_t ignore_index, const float *dloss,
				       const float *count, void *dlogits);
weft_status cpu_accuracy(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
			 const void *logits, weft_dtype idx_dt, const void *targets,
			 int64_t ignore_index, int64_t *correct, int64_t *counted);
weft_status cpu_vocab_ce_stats(void *kctx, int64_t rows, int64_t vocab, const float *logits,
			       weft_dtype idx_dt, const void *targets, int64_t begin,
			       const double *max, double *stats);
weft_status cpu_vocab_ce_backward(void *kctx, int64_t rows, int64_t vocab, const float *logits,
				  weft_dtype idx_dt, const void *targets, int64_t ignore_index,
				  int64_t begin, const double *max, const double *sum, double scale,
				  float *dlogits);

weft_status cpu_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				  int64_t nh, const void *qkv, void *out, void *att,
				  void *scratch);
weft_status cpu_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				   int64_t nh, const void *qkv, const void *att,
				   const void *dout, void *dqkv, void *scratch);
weft_status cpu_attention_backward_write(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					 int64_t C, int64_t nh, const void *qkv, const void *att,
					 const void *dout, void *dqkv, void *scratch);
size_t cpu_attention_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t C, int64_t nh);
weft_status cpu_attention_gqa_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
				      int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				      void *out, void *att, void *scratch);
weft_status cpu_attention_gqa_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
				       int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				       const void *att, const void *dout, void *dqkv,
				       void *scratch);
size_t cpu_attention_gqa_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv,
				 int64_t hs);

/* cpu_llama.c: RMSNorm, rotary embeddings and SwiGLU (weft/device.h,
 * since ABI 1.4) */
weft_status cpu_rmsnorm_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols, float eps,
				const void *x, const void *w, void *out, float *rstd);
weft_status cpu_rmsnorm_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				 const void *x, const void *w, const float *rstd, const void *dy,
				 void *dx, void *dw);
weft_status cpu_rope_forward(void *kctx, weft_dtype dt, const weft_rope *rope, int64_t B,
			     int64_t T, int64_t width, int64_t n_rot, int64_t head_dim,
			     int64_t pos_offset, const void *x, void *out);
weft_status cpu_rope_backward(void *kctx, weft_dtype dt, const weft_rope *rope, int64_t B,
			      int64_t T, int64_t width, int64_t n_rot, int64_t head_dim,
			      int64_t pos_offset, const void *dy, void *dx);
weft_status cpu_swiglu_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
			       const void *gate, const void *up, int64_t ld, void *out);
weft_status cpu_swiglu_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				const void *gate, const void *up, int64_t ld, const void *dy,
				void *dgate, void *dup);

/* cpu_lowp.c: 16-bit activations (weft/kernels.h, since ABI 1.6), F16 and
 * BF16 rows widened to F32 and computed by the F32 kernels above */
weft_status cpu_sum_rows_lowp(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
			      const void *x, float *out);
weft_status cpu_layernorm_lowp_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				       float eps, const void *x, const void *r, void *sum,
				       const float *w, const float *b, void *y, float *mean,
				       float *rstd);
weft_status cpu_layernorm_lowp_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					const void *s, const float *w, const float *mean,
					const float *rstd, const void *dy, void *dx,
					int32_t dx_write, float *dw, float *db);
weft_status cpu_cross_entropy_lowp_forward(void *kctx, weft_dtype dt, int64_t rows,
					   int64_t vocab, int64_t ld, const void *logits,
					   weft_dtype idx_dt, const void *targets,
					   int64_t ignore_index, float *lse, float *loss,
					   float *count);
weft_status cpu_cross_entropy_lowp_backward(void *kctx, weft_dtype dt, int64_t rows,
					    int64_t vocab, int64_t ld, const void *logits,
					    weft_dtype idx_dt, const void *targets,
					    int64_t ignore_index, const float *lse,
					    const float *dloss, const float *count, void *dlogits);
weft_status cpu_cross_entropy_lowp_fused(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
					 int64_t ld, void *logits, weft_dtype idx_dt,
					 const void *targets, int64_t ignore_index,
					 float dloss_hint, float *lse, float *loss, float *count);
weft_status cpu_cross_entropy_lowp_regrad(void *kctx, weft_dtype dt, int64_t rows,
					  int64_t vocab, int64_t ld, void *dlogits,
					  weft_dtype idx_dt, const void *targets,
					  int64_t ignore_index, float dloss_hint,
					  const float *dloss);

/* exp(x) in float, branch-free so loops over it vectorize (libm's expf
 * does not, without -ffast-math): x = n ln2 + r with |r| <= ln2 / 2,
 * exp(r) by Cephes' degree-6 polynomial, 2^n built in the exponent bits.
 * Relative error about 2e-7; inputs clamp to [-87, 88] (so no
 * denormals, no infinities; exp(-87) ~ 1.6e-38 stands in for 0). */
static inline float cpu_expf(float x)
{
	float t, n, r, p, scale;
	int32_t ni, bits;

	x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
	t = x * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
	n = t - 12582912.0f;
	memcpy(&ni, &t, sizeof(ni));
	ni -= 0x4B400000;
	r = x - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	bits = (ni + 127) << 23;
	memcpy(&scale, &bits, sizeof(scale));
	return p * scale;
}

/* tanh(u) = 1 - 2 / (1 + exp(2u)), through cpu_expf; absolute error ~2e-7. */
static inline float cpu_tanhf(float u)
{
	return 1.0f - 2.0f / (1.0f + cpu_expf(2.0f * u));
}

/* GELU, tanh form (GPT-2's): gelu(v) = 0.5 v (1 + tanh(sqrt(2 / pi) (v +
 * 0.044715 v^3))), and its derivative; the one definition the CPU's
 * gelu_forward / gelu_backward and gemm_lowp_ex's epilogues compute. */
#define CPU_GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define CPU_GELU_C 0.044715f

static inline float cpu_gelu_tanh(float v)
{
	float u = CPU_GELU_S * (v + CPU_GELU_C * v * v * v);

	return 0.5f * v * (1.0f + cpu_tanhf(u));
}

static inline float cpu_gelu_tanh_grad(float v)
{
	float u = CPU_GELU_S * (v + CPU_GELU_C * v * v * v);
	float t = cpu_tanhf(u);
	float du = CPU_GELU_S * (1.0f + 3.0f * CPU_GELU_C * v * v);

	return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
}

/* Sum of x[0..n) in a fixed order that vectorizes: CPU_LANES partial sums
 * (lane l adds x[l], x[l + 16], ...), then the lanes added pairwise. The
 * order is the same on every machine, whatever the vector width. */
static inline float cpu_sum(const float *restrict x, int64_t n)
{
	float acc[CPU_LANES] = { 0 };
	int64_t j = 0;

	for (; j + CPU_LANES <= n; j += CPU_LANES)
		for (int l = 0; l < CPU_LANES; l++)
			acc[l] += x[j + l];
	for (int l = 0; j + l < n; l++)
		acc[l] += x[j + l];
	for (int w = CPU_LANES / 2; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			acc[l] += acc[l + w];
	return acc[0];
}

/* Largest of x[0..n), in lanes as cpu_sum does; -inf when n is 0. */
static inline float cpu_max(const float *restrict x, int64_t n)
{
	float acc[CPU_LANES];
	int64_t j = 0;

	if (n < 1)
		return -INFINITY;
	for (int l = 0; l < CPU_LANES; l++)
		acc[l] = x[0];
	for (; j + CPU_LANES <= n; j += CPU_LANES)
		for (int l = 0; l < CPU_LANES; l++)
			acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
	for (int l = 0; j + l < n; l++)
		acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
	for (int w = CPU_LANES / 2; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
	return acc[0];
}

/* Sum of a[j] * b[j], in lanes as cpu_sum does. */
static inline float cpu_dot(const float *restrict a, const float *restrict b, int64_t n)
{
	float acc[CPU_LANES] = { 0 };
	int64_t j = 0;

	for (; j + CPU_LANES <= n; j += CPU_LANES)
		for (int l = 0; l < CPU_LANES; l++)
			acc[l] += a[j + l] * b[j + l];
	for (int l = 0; j + l < n; l++)
		acc[l] += a[j + l] * b[j + l];
	for (int w = CPU_LANES / 2; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			acc[l] += acc[l + w];
	return acc[0];
}

/* Reads element i of an I32 or I64 index array. */
static inline int64_t cpu_index(weft_dtype idx_dt, const void *idx, int64_t i)
{
	return idx_dt == WEFT_I64 ? ((const int64_t *)idx)[i] : ((const int32_t *)idx)[i];
}

/* cpu_devsvc.c: the device services of strategies (weft/device.h, since
 * ABI 1.3) */
weft_status cpu_copy_ranges(void *kctx, size_t elem_bytes, const weft_copy_range *ranges,
			    size_t n, void *dst, const void *src);
weft_status cpu_sum_squares_ranges(void *kctx, const float *x, const weft_elem_range *ranges,
				   size_t n, double *out);
weft_status cpu_optim_step(void *kctx, const weft_optim_kernel *k, const weft_optim_range *ranges,
			   size_t n, float *params, const float *grads, float *const *slots);

#endif /* WEFT_CPU_IMPL_H */
