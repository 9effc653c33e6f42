/* Internals of the CUDA kernel table, shared by its C files (context,
 * memory, cuBLAS calls) and its .cu files (the kernels, each behind an
 * extern "C" table function). Never installed. */
#ifndef WEFT_CUDA_IMPL_H
#define WEFT_CUDA_IMPL_H

#include <cuda_runtime_api.h>
#include <cublas_v2.h>

#include "weft/device.h"
#include "kernels_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The context one weft_ctx computes on (weft_kernel_table.ctx_create):
 * one device, one compute stream, one cuBLAS handle bound to the stream.
 * The stream is a blocking stream (not cudaStreamNonBlocking), so work on
 * the legacy default stream - copies made with a NULL context, comm gloo's
 * staging copies - is ordered after it. A comm stream orders itself after
 * it with the context's own event (`order`, through the extras'
 * stream_wait_compute): every live context is on the `live` list. */
typedef struct cuda_ctx {
	int32_t index;
	cudaStream_t stream;
	cublasHandle_t blas;
	/* Index checks (embedding, cross-entropy, accuracy): a kernel writes
	 * the first bad position with atomicMin into check_dev[0]; check_dev[1]
	 * and [2] are counters (accuracy). check_host is pinned. */
	unsigned long long *check_dev;
	unsigned long long *check_host;
	/* Per-row float scratch for loss reductions and the embedding
	 * gradient's sort, grown on demand (at least doubling, counted under
	 * WEFT_MEM_OTHER) and kept: steady state allocates nothing. A block it
	 * outgrew is kept on `retired` until ctx_destroy, never freed while
	 * the context lives: cudaFree waits for the whole device, which may be
	 * stuck behind a collective of a lost peer. */
	float *rows;
	size_t rows_bytes;
	struct cuda_retired *retired;
	/* WEFT_CUDA_SYNC_CHECK=1 when the context was made: cuda_launched waits
	 * for every kernel, so a fault is reported by the kernel that caused it
	 * rather than by a later call. */
	int sync_check;
	/* Recorded on `stream` by stream_wait_compute and waited for by the
	 * caller's stream; reused (a wait takes the record current at its
	 * call). */
	cudaEvent_t order;
	/* The live contexts (cuda_table.c's list, under its lock). */
	struct cuda_ctx *live_prev, *live_next;
	/* gemm_lowp_ex's cuBLASLt handle, workspace and plans (cuda_gemm_lt.c),
	 * made at its first call and kept; NULL before. */
	struct cuda_lt *lt;
	/* Whether the tensor-core flash kernels have code for this context's
	 * device (cuda_flash_tc_takes): 0 not asked yet, 1 no, 2 yes. */
	int flash_tc;
} cuda_ctx;

/* A row scratch block outgrown by cuda_rows_reserve, freed at ctx_destroy. */
struct cuda_retired {
	void *ptr;
	size_t bytes;
	struct cuda_retired *next;
};

/* ---- cuda_common.c: shared by every file, below them all ---- */

/* The host services from the entry call; set once before any table use. */
extern const weft_host *cuda_host;

/* Counts `delta` bytes of device memory under `cat`: with the host's
 * mem_account_device (ABI 1.5), else, on an older host, with mem_account
 * (in the totals only). Pinned host memory is counted with mem_account. */
void cuda_account_device(weft_mem_category cat, int64_t delta);

/* The status for a CUDA error: WEFT_ERR_NOMEM for allocation failures,
 * WEFT_ERR_UNSUPPORTED when the device, driver or this build's GPU code
 * cannot run here, else WEFT_ERR_INTERNAL. */
weft_status cuda_status_for(cudaError_t err);

/* Sets the last error for a failed CUDA call made by `kernel` and returns
 * the matching status (WEFT_ERR_NOMEM for allocation failures,
 * WEFT_ERR_UNSUPPORTED when the GPU has no code in this build, else
 * WEFT_ERR_INTERNAL). The message names the kernel, the sizes (fmt), the
 * device and CUDA's error name and string. */
weft_status cuda_fail(const char *kernel, int32_t index, cudaError_t err, const char *fmt, ...)
	WEFT_PRINTF(4, 5);

/* As cuda_fail for a cuBLAS status. */
weft_status cuda_blas_fail(const char *kernel, int32_t index, cublasStatus_t err,
			   const char *fmt, ...) WEFT_PRINTF(4, 5);

/* After a kernel launch: WEFT_OK, or an error naming `kernel` and the
 * sizes (fmt). With c->sync_check it also waits for the kernel, so a fault
 * while it runs is reported as its own ("failed while running"); without,
 * a fault of a running kernel surfaces at some later call, and the message
 * says so and how to find the kernel (WEFT_CUDA_SYNC_CHECK=1). */
weft_status cuda_launched(const cuda_ctx *c, const char *kernel, const char *fmt, ...)
	WEFT_PRINTF(3, 4);

/* A context must be given to compute members (the stream and cuBLAS
 * handle live in it). WEFT_ERR_INVALID_ARG naming the kernel otherwise. */
weft_status cuda_need_ctx(const cuda_ctx *c, const char *kernel);

/* Makes c->rows hold at least `bytes` (its old contents are not kept).
 * Never frees: an outgrown block goes to c->retired. Errors: cuda_fail
 * (NOMEM). */
weft_status cuda_rows_reserve(cuda_ctx *c, const char *kernel, size_t bytes);

/* Resets check_dev[0..3) to (ULLONG_MAX, 0, 0) on the stream. */
weft_status cuda_check_reset(cuda_ctx *c, const char *kernel);

/* Copies check_dev to check_host and waits for it. */
weft_status cuda_check_fetch(cuda_ctx *c, const char *kernel);

/* Reads WEFT_CUDA_SYNC_CHECK into *on: unset, empty or "0" is 0, "1" is 1;
 * another value is WEFT_ERR_INVALID_ARG saying what to set. */
weft_status cuda_sync_check_env(int *on);

/* Bytes of one element of a floating dtype (4 or 2). */
static inline size_t cuda_dt_size(weft_dtype dt)
{
	return dt == WEFT_F32 ? 4u : 2u;
}

/* Short dtype name for messages. */
static inline const char *cuda_dt_name(weft_dtype dt)
{
	switch (dt) {
	case WEFT_F32: return "f32";
	case WEFT_F16: return "f16";
	case WEFT_BF16: return "bf16";
	case WEFT_I32: return "i32";
	case WEFT_I64: return "i64";
	default: return "?";
	}
}

/* -- the table's members, by file -- */

/* cuda_blas.c */
weft_status cuda_gemm(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m, int64_t n,
		      int64_t k, float alpha, const void *a, int64_t lda, int64_t stride_a,
		      const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
		      int64_t ldc, int64_t stride_c, int64_t batch);
/* gemm_lowp (weft_kernel_table): 16-bit A and B, F32 C. */
weft_status cuda_gemm_lowp(void *kctx, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
			   int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			   int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
			   float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch,
			   void *scratch);
/* A GEMM with separate input and output dtypes (in_dt for A and B, out_dt
 * for C), fp32 accumulation; what attention uses to keep scores in F32. */
weft_status cuda_gemm_ex(cuda_ctx *c, const char *kernel, weft_dtype in_dt, weft_dtype out_dt,
			 int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
			 const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
			 int64_t stride_b, float beta, void *cm, int64_t ldc, int64_t stride_c,
			 int64_t batch);

/* cuda_gemm_lt.c: gemm_lowp_ex (weft_kernel_table), through cuBLASLt's
 * fused epilogues or, where they cannot take a call, cuda_gemm_ex and
 * cuda_gemm_epilogue; and the release of c->lt at ctx_destroy. */
weft_status cuda_gemm_lowp_ex(void *kctx, weft_dtype in_dt, int trans_a, int trans_b,
			      int64_t m, int64_t n, int64_t k, float alpha, const void *a,
			      int64_t lda, const void *b, int64_t ldb, float beta, weft_dtype c_dt,
			      void *c, int64_t ldc, const float *bias, int32_t epilogue, void *aux);
void cuda_lt_release(cuda_ctx *c);
/* cuda_gemm_epi.cu: gemm_lowp_ex's epilogue on an F32 product d (rows ldd
 * apart), per element (r, j): v = d + C (add_c) + bias[j] (bias non-NULL;
 * rounded to dt first when dt is 16-bit),
 * aux = v and C = gelu_tanh(v) (GELU), C = d * gelu_tanh'(aux) (DGELU),
 * C = v (NONE); C and aux of dt with leading dimension ldc, stored rounded
 * once. d may be C itself when dt is F32 (in place). */
weft_status cuda_gemm_epilogue(cuda_ctx *c, int64_t m, int64_t n, const float *d, int64_t ldd,
			       int add_c, weft_dtype dt, void *cm, int64_t ldc, const float *bias,
			       int32_t epilogue, void *aux);
/* BGRAD's bias gradient apart from the product (cuda_gemm_epi.cu): aux[i]
 * (m floats) = (add: aux[i] +) the sum over kk < k of op(A)[i][kk], A of
 * dt with gemm's conventions, kk in order (a thread per i). */
weft_status cuda_gemm_bgrad(cuda_ctx *c, weft_dtype dt, int trans_a, int64_t m, int64_t k,
			    const void *a, int64_t lda, int add, float *aux);

/* cuda_elementwise.cu */
weft_status cuda_sum_rows(void *kctx, weft_dtype dt, int64_t rows, int64_t cols, const void *x,
			  void *y);
weft_status cuda_add(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
		     const void *b, void *out);
weft_status cuda_mul(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
		     const void *b, void *out);
weft_status cuda_mul_backward(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
			      const void *b, const void *dy, void *da, void *db);
weft_status cuda_scale(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x,
		       void *out);
weft_status cuda_axpy(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x, void *y);
weft_status cuda_fill(void *kctx, weft_dtype dt, int64_t n, float value, void *out);
weft_status cuda_convert(void *kctx, int64_t n, weft_dtype src_dt, const void *src,
			 weft_dtype dst_dt, void *dst);
weft_status cuda_relu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out);
weft_status cuda_relu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
			       const void *dy, void *dx);
weft_status cuda_gelu_forward(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out);
weft_status cuda_gelu_erf_forward(void *kctx, weft_dtype dt, int64_t n, const void *x,
				  void *out);
weft_status cuda_gelu_erf_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
				   const void *dy, void *dx);
weft_status cuda_gelu_backward(void *kctx, weft_dtype dt, int64_t n, const void *x,
			       const void *dy, void *dx);
weft_status cuda_dropout_forward(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
				 int64_t first, const void *x, void *out);
weft_status cuda_dropout_backward(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
				  int64_t first, const void *dy, void *dx);
/* C_b[r, j] = beta * C_b[r, j] (beta == 0 writes zeros) for r < m, j < n,
 * b < batch, with leading dimension ldc and batch stride stride_c. */
weft_status cuda_scale_matrix(cuda_ctx *c, weft_dtype dt, int64_t m, int64_t n, int64_t ldc,
			      int64_t stride_c, int64_t batch, float beta, void *cm);

/* cuda_rows.cu */
weft_status cuda_softmax_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				 const void *x, void *y);
weft_status cuda_softmax_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				  const void *y, const void *dy, void *dx);
weft_status cuda_layernorm_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				   float eps, const void *x, const void *w, const void *b,
				   void *out, float *mean, float *rstd);
weft_status cuda_layernorm_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				    const void *x, const void *w, const float *mean,
				    const float *rstd, const void *dy, void *dx, void *dw,
				    void *db);
/* Causal softmax for attention: src holds nh * T rows of T F32 scores
 * (row r is query r % T); writes probabilities (dst, dtype dt), zero right
 * of the diagonal. */
weft_status cuda_causal_softmax(cuda_ctx *c, weft_dtype dt, int64_t heads, int64_t T,
				const float *src, void *dst);
/* Through the causal softmax and the score scale: for the nh * T rows,
 * ds = att * (da - sum_j att_j da_j) * scale (j <= row), 0 right of the
 * diagonal; da is F32, att and ds have dtype dt. */
weft_status cuda_causal_softmax_backward(cuda_ctx *c, weft_dtype dt, int64_t heads, int64_t T,
					 float scale, const void *att, const float *da, void *ds);

/* cuda_loss.cu */
weft_status cuda_embedding_forward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
				   weft_dtype idx_dt, const void *idx, int64_t vocab,
				   const void *table, void *out);
weft_status cuda_embedding_backward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
				    weft_dtype idx_dt, const void *idx, const void *dy,
				    void *dtable);
weft_status cuda_cross_entropy_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				       const void *logits, weft_dtype idx_dt, const void *targets,
				       int64_t ignore_index, void *probs, float *loss,
				       float *count);
weft_status cuda_cross_entropy_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
					const void *probs, weft_dtype idx_dt, const void *targets,
					int64_t ignore_index, const float *dloss,
					const float *count, void *dlogits);
weft_status cuda_accuracy(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
			  const void *logits, weft_dtype idx_dt, const void *targets,
			  int64_t ignore_index, int64_t *correct, int64_t *counted);
weft_status cuda_vocab_ce_stats(void *kctx, int64_t rows, int64_t vocab, const float *logits,
				weft_dtype idx_dt, const void *targets, int64_t begin,
				const double *max, double *stats);
weft_status cuda_vocab_ce_backward(void *kctx, int64_t rows, int64_t vocab, const float *logits,
				   weft_dtype idx_dt, const void *targets, int64_t ignore_index,
				   int64_t begin, const double *max, const double *sum,
				   double scale, float *dlogits);

/* cuda_attention.c */
weft_status cuda_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				   int64_t nh, const void *qkv, void *out, void *att,
				   void *scratch);
weft_status cuda_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				    int64_t nh, const void *qkv, const void *att,
				    const void *dout, void *dqkv, void *scratch);
size_t cuda_attention_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t C, int64_t nh);
weft_status cuda_attention_gqa_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
				       int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				       void *out, void *att, void *scratch);
weft_status cuda_attention_gqa_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
					const void *att, const void *dout, void *dqkv,
					void *scratch);
size_t cuda_attention_gqa_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv,
				  int64_t hs);

/* cuda_llama.cu: RMSNorm, rotary embeddings, SwiGLU (since ABI 1.4) */
weft_status cuda_rmsnorm_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				 float eps, const void *x, const void *w, void *out, float *rstd);
weft_status cuda_rmsnorm_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				  const void *x, const void *w, const float *rstd, const void *dy,
				  void *dx, void *dw);
weft_status cuda_rope_forward(void *kctx, weft_dtype dt, const weft_rope *rope, int64_t B,
			      int64_t T, int64_t width, int64_t n_rot, int64_t head_dim,
			      int64_t pos_offset, const void *x, void *out);
weft_status cuda_rope_backward(void *kctx, weft_dtype dt, const weft_rope *rope, int64_t B,
			       int64_t T, int64_t width, int64_t n_rot, int64_t head_dim,
			       int64_t pos_offset, const void *dy, void *dx);
weft_status cuda_swiglu_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				const void *gate, const void *up, int64_t ld, void *out);
weft_status cuda_swiglu_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				 const void *gate, const void *up, int64_t ld, const void *dy,
				 void *dgate, void *dup);

/* cuda_flash.cu: fused causal attention (since ABI 1.4) */
weft_status cuda_flash_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					 int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
					 void *out, float *lse);
weft_status cuda_flash_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					  int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
					  const void *out, const float *lse, const void *dout,
					  void *dqkv);
/* (since ABI 1.7) */
weft_status cuda_flash_attention_backward_write(void *kctx, weft_dtype dt, int64_t B, int64_t T,
						int64_t nh, int64_t nkv, int64_t hs,
						const void *qkv, const void *out,
						const float *lse, const void *dout, void *dqkv);

/* cuda_lowp.cu: 16-bit activations (since ABI 1.6) */
weft_status cuda_sum_rows_lowp(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
			       const void *x, float *out);
weft_status cuda_layernorm_lowp_forward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					float eps, const void *x, const void *r, void *sum,
					const float *w, const float *b, void *y, float *mean,
					float *rstd);
weft_status cuda_layernorm_lowp_backward(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					 const void *s, const float *w, const float *mean,
					 const float *rstd, const void *dy, void *dx,
					 int32_t dx_write, float *dw, float *db);
weft_status cuda_cross_entropy_lowp_forward(void *kctx, weft_dtype dt, int64_t rows,
					    int64_t vocab, int64_t ld, const void *logits,
					    weft_dtype idx_dt, const void *targets,
					    int64_t ignore_index, float *lse, float *loss,
					    float *count);
weft_status cuda_cross_entropy_lowp_backward(void *kctx, weft_dtype dt, int64_t rows,
					     int64_t vocab, int64_t ld, const void *logits,
					     weft_dtype idx_dt, const void *targets,
					     int64_t ignore_index, const float *lse,
					     const float *dloss, const float *count,
					     void *dlogits);
weft_status cuda_cross_entropy_lowp_fused(void *kctx, weft_dtype dt, int64_t rows,
					  int64_t vocab, int64_t ld, void *logits,
					  weft_dtype idx_dt, const void *targets,
					  int64_t ignore_index, float dloss_hint, float *lse,
					  float *loss, float *count);
weft_status cuda_cross_entropy_lowp_regrad(void *kctx, weft_dtype dt, int64_t rows,
					   int64_t vocab, int64_t ld, void *dlogits,
					   weft_dtype idx_dt, const void *targets,
					   int64_t ignore_index, float dloss_hint,
					   const float *dloss);

/* cuda_optim.cu: see kernels_cuda.h */
weft_status cuda_adamw_step(void *kctx, const weft_cuda_adamw_coef *coef, int64_t n,
			    float *param, weft_dtype grad_dt, const void *grad, float *exp_avg,
			    float *exp_avg_sq, weft_dtype copy_dt, void *param_copy);
weft_status cuda_unscale_check(void *kctx, weft_dtype dt, int64_t n, void *grad, float factor,
			       float *found_nonfinite);
weft_status cuda_sum_squares(void *kctx, int64_t n, const float *x, double *out);
/* the device services of strategies (weft/device.h, since ABI 1.3) */
weft_status cuda_sum_squares_ranges(void *kctx, const float *x, const weft_elem_range *ranges,
				    size_t n, double *out);
weft_status cuda_optim_step(void *kctx, const weft_optim_kernel *k,
			    const weft_optim_range *ranges, size_t n, float *params,
			    const float *grads, float *const *slots);
weft_status cuda_copy_ranges(void *kctx, size_t elem_bytes, const weft_copy_range *ranges,
			     size_t n, void *dst, const void *src);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_CUDA_IMPL_H */
