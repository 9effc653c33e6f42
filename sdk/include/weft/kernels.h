/* weft/kernels.h - a device's kernel table (weft_kernel_table) and its
 * registration; the argument structs its members take (copy and element
 * ranges, optimizer-step descriptions, rotary positions) are
 * weft/kernel_args.h's, included here.
 *
 * Everything that touches tensor memory or computes on it goes through
 * the device's kernel table, a versioned vtable of plain function
 * pointers. The CPU table is built into libweft (kernels/cpu); the CUDA
 * table lives in its own shared object (kernels/cuda). Each member's
 * comment is its contract; members added after ABI 1.0 say since when,
 * and a caller checks WEFT_HAS_MEMBER before it reads one. Included by
 * weft/device.h; the dtypes and devices it uses are weft/device_types.h's.
 */
#ifndef WEFT_KERNELS_H
#define WEFT_KERNELS_H

#include "weft/device_types.h"
#include "weft/kernel_args.h"
#include "weft/memory.h"
#include "weft/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif
/* ---- kernel tables ---------------------------------------------------- */

/* Direction of a copy through weft_kernel_table.copy. */
typedef enum weft_copy_kind {
	WEFT_COPY_HOST_TO_DEVICE = 0,
	WEFT_COPY_DEVICE_TO_HOST = 1,
	WEFT_COPY_DEVICE_TO_DEVICE = 2
} weft_copy_kind;

/* The kernels of one device kind. A `static const` struct in the code that
 * provides it, valid for the life of the process. Members are only ever
 * appended (check head.struct_size with WEFT_HAS_MEMBER before using a
 * member newer than ABI 1.0).
 *
 * Conventions for every compute member:
 * - `kctx` is the device context made by ctx_create (a cuBLAS handle and
 *   stream on CUDA; NULL on the CPU). Work may be queued asynchronously on
 *   it; `synchronize` waits. copy, zero and fill also accept kctx == NULL, meaning
 *   the device's default queue (weft_tensor_copy* / zero / fill use them so,
 *   outside any context): the work is ordered after the work queued earlier
 *   on every context of the device and before the work queued on any of
 *   them later. A copy to the host returns when the data is there, a copy
 *   from host memory once the source has been read (the caller may reuse
 *   it); other work may return once queued (since ABI 1.6: before, every
 *   call without a context returned when done; the CUDA table no longer
 *   waits for a copy from pageable memory, within the device, or a zero,
 *   so a training step does not wait for the device). Pointers are device
 *   memory unless a member says "host".
 * - `dt` is the dtype of the floating-point operands; the caller (the op
 *   layer in core/tensor) only passes dtypes in `float_dtypes`. Index
 *   operands carry their own dtype (I32 or I64). Statistics a kernel saves
 *   for backward (layernorm mean/rstd, cross-entropy loss and count) are
 *   always F32.
 * - All tensors are dense, row-major and contiguous; sizes are element
 *   counts. Inputs and outputs do not overlap unless a member allows it.
 * - Backward members ACCUMULATE into gradients (dx += ...), so a tensor
 *   used several times sums its contributions. A NULL gradient pointer
 *   means "not wanted" and is skipped.
 * - The caller has validated shapes; a kernel checks only what it alone
 *   can see (an index out of range) and reports it with weft_error_set
 *   (or host->error_set from a plugin), naming the kernel and the values.
 * - Each returns WEFT_OK or a status with the last error set; none may
 *   abort. */
typedef struct weft_kernel_table {
	weft_plugin_head head; /* name: "cpu", "cuda" */

	/* Floating dtypes the compute members accept (WEFT_DTYPE_BIT mask). */
	uint32_t float_dtypes;

	/* -- context and memory -- */

	/* (optional, NULL: *kctx = NULL) Makes the context compute members run
	 * on, for device ordinal `index`. Freed with ctx_destroy. */
	weft_status (*ctx_create)(int32_t index, void **kctx);
	/* (optional) Frees a context from ctx_create; NULL is ignored. */
	void (*ctx_destroy)(void *kctx);

	/* Allocates `bytes` (64-byte aligned) on device `index`, counted under
	 * `cat` (weft_mem_account for device memory). Blocking.
	 * Errors: WEFT_ERR_NOMEM naming the bytes, category and device. */
	weft_status (*mem_alloc)(int32_t index, weft_mem_category cat, size_t bytes, void **out);
	/* Frees a block from mem_alloc with the same size and category it was
	 * allocated with (needed to undo the accounting). NULL is ignored. */
	void (*mem_free)(int32_t index, weft_mem_category cat, void *ptr, size_t bytes);
	/* Copies `bytes`; `kind` says which side is host memory. Ordered after
	 * earlier work on kctx; a copy to the host returns when the data is
	 * there. */
	weft_status (*copy)(void *kctx, void *dst, const void *src, size_t bytes, weft_copy_kind kind);
	/* Sets `bytes` bytes at dst to zero. */
	weft_status (*zero)(void *kctx, void *dst, size_t bytes);
	/* Waits for all work queued on kctx. */
	weft_status (*synchronize)(void *kctx);

	/* -- linear algebra -- */

	/* Batched row-major GEMM: for b in [0, batch):
	 *   C_b = alpha * op(A_b) @ op(B_b) + beta * C_b
	 * with op(A_b) m x k, op(B_b) k x n, C_b m x n; X_b = X + b * stride_x
	 * (elements; a stride of 0 reuses one matrix). trans_x != 0 means X_b is
	 * stored transposed. beta == 0 ignores C's old contents. */
	weft_status (*gemm)(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m,
			    int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
			    int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, float beta,
			    void *c, int64_t ldc, int64_t stride_c, int64_t batch);

	/* y[j] += sum over i of x[i * cols + j]   (x: rows x cols; y: cols). */
	weft_status (*sum_rows)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols, const void *x,
				void *y);

	/* -- elementwise; b broadcasts over a's leading dims: b[i % nb], and
	 *    nb divides n. out may alias a. -- */

	/* out[i] = a[i] + b[i % nb] */
	weft_status (*add)(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
			   const void *b, void *out);
	/* out[i] = a[i] * b[i % nb] */
	weft_status (*mul)(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
			   const void *b, void *out);
	/* da[i] += dy[i] * b[i % nb];  db[i % nb] += dy[i] * a[i] */
	weft_status (*mul_backward)(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
				    const void *b, const void *dy, void *da, void *db);
	/* out[i] = alpha * x[i]  (out may alias x) */
	weft_status (*scale)(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x,
			     void *out);
	/* y[i] += alpha * x[i] */
	weft_status (*axpy)(void *kctx, weft_dtype dt, int64_t n, float alpha, const void *x,
			    void *y);
	/* out[i] = value */
	weft_status (*fill)(void *kctx, weft_dtype dt, int64_t n, float value, void *out);
	/* Converts n elements between floating dtypes (F32, F16, BF16; round to
	 * nearest even). src and dst do not overlap. */
	weft_status (*convert)(void *kctx, int64_t n, weft_dtype src_dt, const void *src,
			       weft_dtype dst_dt, void *dst);

	/* -- activations -- */

	/* out = max(x, 0);  backward: dx += dy * (x > 0) */
	weft_status (*relu_forward)(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out);
	weft_status (*relu_backward)(void *kctx, weft_dtype dt, int64_t n, const void *x,
				     const void *dy, void *dx);
	/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
	 * backward: dx += dy * gelu'(x) */
	weft_status (*gelu_forward)(void *kctx, weft_dtype dt, int64_t n, const void *x, void *out);
	weft_status (*gelu_backward)(void *kctx, weft_dtype dt, int64_t n, const void *x,
				     const void *dy, void *dx);
	/* Softmax over each row of `cols`; backward from the forward output y:
	 * dx += y * (dy - sum_j dy_j y_j) */
	weft_status (*softmax_forward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				       const void *x, void *y);
	weft_status (*softmax_backward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					const void *y, const void *dy, void *dx);

	/* -- layers -- */

	/* LayerNorm over rows of `cols`: out = (x - mean) * rstd * w + b, with
	 * rstd = 1 / sqrt(var + eps) (biased variance). w and b (cols) may be
	 * NULL (no affine). Saves mean and rstd (F32, rows each). */
	weft_status (*layernorm_forward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					 float eps, const void *x, const void *w, const void *b,
					 void *out, float *mean, float *rstd);
	/* Accumulates dx, dw, db (each may be NULL). */
	weft_status (*layernorm_backward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					  const void *x, const void *w, const float *mean,
					  const float *rstd, const void *dy, void *dx, void *dw,
					  void *db);
	/* out[i, :] = table[idx[i], :] for i < n; idx has dtype idx_dt (I32 or
	 * I64). Errors: WEFT_ERR_INVALID_ARG naming the position and the index
	 * when an index is outside [0, vocab), on a device whose indices the
	 * host can read without waiting (the CPU). A device that would have to
	 * wait to see them (CUDA, since ABI 1.6) does not check: such a row of
	 * out is zero, and the caller has validated the ids (the trainer
	 * checks every batch on the host, core/data/batch_check.c). */
	weft_status (*embedding_forward)(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
					 weft_dtype idx_dt, const void *idx, int64_t vocab,
					 const void *table, void *out);
	/* dtable[idx[i], :] += dy[i, :] (indices were checked by forward). */
	weft_status (*embedding_backward)(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
					  weft_dtype idx_dt, const void *idx, const void *dy,
					  void *dtable);

	/* Multi-head causal self-attention on a packed projection:
	 * qkv is (B, T, 3C) holding q | k | v, each (B, T, nh, hs) with
	 * C = nh * hs; out is (B, T, C) = concat over heads of
	 * softmax(q k^T / sqrt(hs) + causal mask) v.
	 * Saves the probabilities `att` (B, nh, T, T) for backward.
	 * `scratch` holds attention_scratch(...) bytes of device memory the
	 * kernel may use freely during the call. No dropout inside. */
	weft_status (*attention_forward)(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
					 int64_t nh, const void *qkv, void *out, void *att,
					 void *scratch);
	/* Accumulates dqkv (B, T, 3C) from dout (B, T, C). */
	weft_status (*attention_backward)(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					  int64_t C, int64_t nh, const void *qkv, const void *att,
					  const void *dout, void *dqkv, void *scratch);
	/* Bytes of scratch attention_forward/backward need for these sizes. */
	size_t (*attention_scratch)(weft_dtype dt, int64_t B, int64_t T, int64_t C, int64_t nh);

	/* Inverted dropout with a counter-based RNG: element i is kept when
	 * weft_dropout_keep(key, first + i, p); kept elements are scaled by
	 * 1 / (1 - p). The mask depends only on (key, global index), so the
	 * same key gives the same mask whatever the split across ranks.
	 * backward: dx += dy * mask / (1 - p) (the mask is recomputed). */
	weft_status (*dropout_forward)(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
				       int64_t first, const void *x, void *out);
	weft_status (*dropout_backward)(void *kctx, weft_dtype dt, int64_t n, float p, uint64_t key,
					int64_t first, const void *dy, void *dx);

	/* Cross-entropy over rows of `vocab` logits against targets (idx_dt I32
	 * or I64); rows whose target equals ignore_index do not count. Writes
	 * probs (rows x vocab, softmax of logits, dtype dt), *loss (F32 device
	 * scalar, mean over counted rows, 0 when none) and *count (F32 device
	 * scalar, the number of counted rows).
	 * Errors: WEFT_ERR_INVALID_ARG naming the row and target when a
	 * target is outside [0, vocab) and not ignore_index, on a device whose
	 * targets the host can read without waiting (the CPU). A device that
	 * would have to wait (CUDA, since ABI 1.6) does not check: such a row
	 * counts as ignored (forward and backward), and the caller has
	 * validated the targets (the trainer checks every batch on the host,
	 * core/data/batch_check.c). */
	weft_status (*cross_entropy_forward)(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
					     const void *logits, weft_dtype idx_dt,
					     const void *targets, int64_t ignore_index, void *probs,
					     float *loss, float *count);
	/* dlogits += (probs - onehot(target)) * dloss / count, per counted row;
	 * dloss and count are F32 device scalars. */
	weft_status (*cross_entropy_backward)(void *kctx, weft_dtype dt, int64_t rows,
					      int64_t vocab, const void *probs, weft_dtype idx_dt,
					      const void *targets, int64_t ignore_index,
					      const float *dloss, const float *count,
					      void *dlogits);
	/* Counts rows whose arg-max logit equals the target (ties: the lowest
	 * index wins), skipping ignore_index rows. *correct and *counted are
	 * HOST memory; the call returns when they are written. */
	weft_status (*accuracy)(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				const void *logits, weft_dtype idx_dt, const void *targets,
				int64_t ignore_index, int64_t *correct, int64_t *counted);

	/* (optional, NULL: no effect) Sets the number of threads the device's
	 * host-side libraries use (OpenBLAS on the CPU). n >= 1. */
	void (*set_threads)(int64_t n);

	/* ---- since ABI 1.1: counting devices; check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, device_count) first ---- */

	/* (optional, NULL: 1 device) How many devices of this kind this
	 * process can use (CUDA: cudaGetDeviceCount, after
	 * CUDA_VISIBLE_DEVICES), in *out (>= 1 on success). Blocking.
	 * Errors: WEFT_ERR_UNSUPPORTED naming the reason when none can be. */
	weft_status (*device_count)(int32_t *out);

	/* ---- since ABI 1.1: mixed precision; check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, gemm_lowp_scratch) first ---- */

	/* (optional, NULL: the device has no low-precision matrix products,
	 * and bf16-mixed / 16-mixed cannot run on it) The matrix product of
	 * mixed precision, as tensor cores run it: the same operands,
	 * conventions and batching as `gemm`, but A and B hold `in_dt`
	 * elements (BF16 or F16; F32 makes it `gemm`) and C is F32: every
	 * product and sum is taken in F32, so the result is the F32 GEMM of
	 * the 16-bit values. `scratch` is device memory of
	 * gemm_lowp_scratch(in_dt, a_elems, b_elems) bytes the kernel may use
	 * during the call (NULL when that is 0), where a_elems and b_elems
	 * are the elements A and B span (weft_gemm_span). Asynchronous on
	 * kctx. Errors: WEFT_ERR_DTYPE for an in_dt that is not F32, F16 or
	 * BF16; sizes the device library cannot take, as gemm. */
	weft_status (*gemm_lowp)(void *kctx, weft_dtype in_dt, int trans_a, int trans_b, int64_t m,
				 int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
				 int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
				 float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch,
				 void *scratch);
	/* (optional, NULL: no scratch) Bytes of scratch gemm_lowp needs for
	 * inputs of in_dt spanning a_elems and b_elems elements. */
	size_t (*gemm_lowp_scratch)(weft_dtype in_dt, int64_t a_elems, int64_t b_elems);

	/* ---- since ABI 1.1: first-write gradients; check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, attention_backward_write) first ---- */

	/* (optional, NULL: the core zero-fills dx and calls gelu_backward)
	 * As gelu_backward, but dx = dy * gelu'(x): every element of dx is
	 * written and its previous contents are never read, which spares a
	 * gradient its zero fill and a read when this is its first writer. */
	weft_status (*gelu_backward_write)(void *kctx, weft_dtype dt, int64_t n, const void *x,
					   const void *dy, void *dx);
	/* (optional, NULL: zero fill and attention_backward) As
	 * attention_backward, but writes every element of dqkv (B, T, 3C)
	 * instead of adding to it. */
	weft_status (*attention_backward_write)(void *kctx, weft_dtype dt, int64_t B, int64_t T,
						int64_t C, int64_t nh, const void *qkv,
						const void *att, const void *dout, void *dqkv,
						void *scratch);

	/* ---- since ABI 1.1: broadcasting rows; check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, broadcast_rows) first ---- */

	/* (optional) Writes the row_bytes at src into each of `rows`
	 * consecutive rows of dst (rows * row_bytes bytes; src does not
	 * overlap dst), as a bias before the GEMM that adds to it.
	 * Asynchronous on kctx. The core no longer calls it (a table puts
	 * its bias handling in gemm_bias; the CPU table's uses it there). */
	weft_status (*broadcast_rows)(void *kctx, int64_t rows, size_t row_bytes, const void *src,
				      void *dst);

	/* ---- since ABI 1.1: the bias in the product; check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, gemm_bias) first ---- */

	/* (optional, NULL: the core calls gemm, then add) A linear layer's
	 * product with its bias: C = alpha op(A) op(B) + bias, where bias
	 * (n elements, of dt) is added to every row of C; C's previous
	 * contents are not read. One matrix (no batch); otherwise as gemm. */
	weft_status (*gemm_bias)(void *kctx, weft_dtype dt, int trans_a, int trans_b, int64_t m,
				 int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
				 const void *b, int64_t ldb, const void *bias, void *c,
				 int64_t ldc);

	/* ---- since ABI 1.1: the weight and bias gradients in one pass; check
	 * WEFT_HAS_MEMBER(k, weft_kernel_table, gemm_tn_sum) first ---- */

	/* (optional, NULL: the core calls gemm, then sum_rows) A linear
	 * layer's weight and bias gradients in one pass over dy: C = alpha
	 * A^T B + beta C (gemm with trans_a and not trans_b: A is k x m, B
	 * k x n, row-major with leading dimensions lda and ldb), and sum[i]
	 * += A[l][i] for i < m (m elements of dt, alpha not applied), the
	 * rows l added in order as sum_rows adds them. One matrix (no batch);
	 * otherwise as gemm. */
	weft_status (*gemm_tn_sum)(void *kctx, weft_dtype dt, int64_t m, int64_t n, int64_t k,
				   float alpha, const void *a, int64_t lda, const void *b,
				   int64_t ldb, float beta, void *c, int64_t ldc, void *sum);
	/* ---- since ABI 1.3: device services for strategies; check
	 * WEFT_HAS_MEMBER(k, weft_kernel_table, optim_step) first. A
	 * strategy reaches parameter, gradient, optimizer-state and message
	 * memory only through these and the members above (mem_alloc and
	 * mem_free for its buffers, counted by category; zero and fill; axpy
	 * and scale; convert for casts), so the same strategy code runs on
	 * every device. Each is stream-ordered on kctx (queued after the work
	 * issued on it before, and before the work issued after) unless it
	 * says it waits; kctx is a context from ctx_create, or NULL on the CPU
	 * (then each returns when done). Arrays of ranges are host memory,
	 * read before the call returns. ---- */

	/* (optional, NULL: none of the members below) Copies n ranges of
	 * elements of elem_bytes bytes (1, 2, 4 or 8) between two buffers of
	 * this device: ranges[i].count elements from src + ranges[i].src to
	 * dst + ranges[i].dst, in element units. Packs pieces into a
	 * contiguous buffer, unpacks them, or copies one strided view.
	 * src and dst may be the same buffer; no destination range may
	 * overlap another destination range or any source range.
	 * Errors: WEFT_ERR_INVALID_ARG for an elem_bytes not 1, 2, 4 or 8 or a
	 * negative offset or count, naming the range; the device's. */
	weft_status (*copy_ranges)(void *kctx, size_t elem_bytes, const weft_copy_range *ranges,
				   size_t n, void *dst, const void *src);

	/* (optional, NULL: as copy_ranges) The sum over the ranges of the
	 * squares of F32 elements of x: each range summed in double in an
	 * order fixed by its length alone (the same inputs give the same bits
	 * every time, at any thread count), the ranges' sums then added in
	 * range order. On the CPU each range's sum is weft's clipping sum
	 * (the host's clip_sum_squares) bit for bit. *out is HOST memory:
	 * the call waits for the result (one wait however many ranges), so
	 * it sees every gradient written on kctx before. Scratch is kept by
	 * the context (steady state allocates nothing). Errors: INVALID_ARG
	 * for a negative offset or count, naming the range; the device's. */
	weft_status (*sum_squares_ranges)(void *kctx, const float *x, const weft_elem_range *ranges,
					  size_t n, double *out);

	/* (optional, NULL: as copy_ranges) One optimizer step over n ranges
	 * of F32 parameters, gradients and state slots on this device
	 * (weft_optim_range), as *k describes (weft_optim_kernel_adam,
	 * weft_optim_kernel_sgd): slots holds the update's slot arrays (Adam:
	 * 2, 3 with amsgrad; SGD: 1 with momentum, else none), indexed
	 * by the ranges' `state` offsets. params and slots are updated in
	 * place; grads are only read. Element by element the results are
	 * the bits the built-in optimizer plugin's step() gives on the same
	 * inputs (weft/optim.h's determinism contract, whatever the ranges'
	 * split). Ranges of one array do not overlap; params, grads and slots
	 * are distinct buffers. Errors: WEFT_ERR_UNSUPPORTED for a kind this
	 * table has no kernel for (the caller then steps on host copies with
	 * the plugin); INVALID_ARG for a negative offset or count or a k
	 * whose struct_size is too small; the device's. */
	weft_status (*optim_step)(void *kctx, const weft_optim_kernel *k,
				  const weft_optim_range *ranges, size_t n, float *params,
				  const float *grads, float *const *slots);

	/* ---- since ABI 1.4: the vocabulary-parallel loss (tensor
	 * parallelism's cross-entropy over logits split by vocabulary
	 * columns, which never leave the device); check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, vocab_ce_backward) first. Both are
	 * stream-ordered on kctx. ---- */

	/* (optional, NULL: the core reads such logits on the host) Per-row
	 * statistics of `rows` rows of F32 logits, this rank's `vocab`
	 * columns of each, which are the global columns [begin, begin +
	 * vocab); targets (idx_dt I32 or I64, `rows` of them) are global
	 * column indices. With max NULL: stats[r] = the row's largest logit
	 * (NaNs skipped; -inf for an empty row). Else, max holding the rows'
	 * global maxima: stats[r] = the sum over the row of exp(z - max[r])
	 * and stats[rows + r] = the target's logit where this rank holds its
	 * column, else 0. Exponentials and sums in double, so the result
	 * differs from another order of summation only in the last bits (the
	 * CPU table sums each row in column order). max and stats are F64
	 * device memory. The targets are not checked (the caller has). */
	weft_status (*vocab_ce_stats)(void *kctx, int64_t rows, int64_t vocab, const float *logits,
				      weft_dtype idx_dt, const void *targets, int64_t begin,
				      const double *max, double *stats);
	/* (optional, with vocab_ce_stats) Its backward: for each row whose
	 * target is not ignore_index, element by element
	 *   dlogits[r][j] += (float)(exp(z[r][j] - max[r]) / sum[r] * scale)
	 * (in double, rounded once), then dlogits[r][t - begin] -= (float)scale
	 * where this rank holds the target's column t. max and sum (F64,
	 * `rows` each) are device memory, scale a host value. */
	weft_status (*vocab_ce_backward)(void *kctx, int64_t rows, int64_t vocab,
					 const float *logits, weft_dtype idx_dt, const void *targets,
					 int64_t ignore_index, int64_t begin, const double *max,
					 const double *sum, double scale, float *dlogits);

	/* ---- since ABI 1.4: the layers of Llama-family models; check
	 * WEFT_HAS_MEMBER(k, weft_kernel_table, attention_gqa_scratch) first.
	 * Every member is optional: NULL means the device lacks that layer,
	 * and the op that needs it fails naming the table and the member.
	 * Statistics saved for backward (rmsnorm's rstd) are F32; every
	 * computation is in F32 whatever the storage dtype. ---- */

	/* RMSNorm over rows of `cols`: out = x * rstd * w with rstd =
	 * 1 / sqrt(mean(x^2) + eps), the mean of squares summed in F32
	 * (torch.nn.functional.rms_norm, Llama's LlamaRMSNorm). w (cols) may
	 * be NULL (no scale). Saves rstd (F32, rows). */
	weft_status (*rmsnorm_forward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				       float eps, const void *x, const void *w, void *out,
				       float *rstd);
	/* With n = x rstd and g = dy w (dy when w is NULL): dx += rstd (g - n
	 * mean(g n)) and dw += the sum over rows of dy n. dx and dw may each be
	 * NULL. */
	weft_status (*rmsnorm_backward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					const void *x, const void *w, const float *rstd,
					const void *dy, void *dx, void *dw);

	/* Rotary position embedding in the rotate-half layout (Hugging Face's
	 * Llama): x is (B, T, width); in every row the first n_rot heads of
	 * head_dim (even) elements are rotated, the rest of the row (up to
	 * width) is copied unchanged, so a packed q | k | v projection is
	 * rotated in one call (n_rot = n_head + n_kv_head, v passes through).
	 * For head element i < head_dim / 2 at position p = pos_offset + t, with
	 * a = (float)p * weft_rope_inv_freq(rope, head_dim, i) (a float
	 * product) and c, s its cosine and sine:
	 *   out[i] = x[i] c - x[i + head_dim/2] s
	 *   out[i + head_dim/2] = x[i + head_dim/2] c + x[i] s
	 * `rope` is HOST memory, read before the call returns. out does not
	 * overlap x. */
	weft_status (*rope_forward)(void *kctx, weft_dtype dt, const struct weft_rope *rope,
				    int64_t B, int64_t T, int64_t width, int64_t n_rot,
				    int64_t head_dim, int64_t pos_offset, const void *x, void *out);
	/* The transposed rotation: dx += R^T dy on the rotated heads, dx += dy
	 * on the rest of each row. */
	weft_status (*rope_backward)(void *kctx, weft_dtype dt, const struct weft_rope *rope,
				     int64_t B, int64_t T, int64_t width, int64_t n_rot,
				     int64_t head_dim, int64_t pos_offset, const void *dy,
				     void *dx);

	/* SwiGLU: out[r][j] = silu(gate[r][j]) * up[r][j] for rows x cols, with
	 * silu(g) = g / (1 + exp(-g)). gate and up are rows of `ld` elements
	 * (ld >= cols): two tensors (ld = cols) or one packed [gate | up]
	 * tensor (up = gate + cols, ld = 2 cols). out is dense (ld cols). */
	weft_status (*swiglu_forward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				      const void *gate, const void *up, int64_t ld, void *out);
	/* dgate += dy * up * silu'(gate), dup += dy * silu(gate), in rows of
	 * `ld` as the inputs (each may be NULL; both may be halves of one
	 * packed gradient). */
	weft_status (*swiglu_backward)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				       const void *gate, const void *up, int64_t ld, const void *dy,
				       void *dgate, void *dup);

	/* Causal self-attention with grouped-query heads on a packed
	 * projection: qkv is (B, T, (nh + 2 nkv) hs) holding q (nh heads) |
	 * k (nkv heads) | v (nkv heads), each head hs elements; nkv divides
	 * nh, and query head h reads kv head h / (nh / nkv) (nkv = nh: MHA;
	 * nkv = 1: MQA). out (B, T, nh hs) = per head softmax(q k^T / sqrt(hs)
	 * + causal mask) v. Saves the probabilities `att` (B, nh, T, T) for
	 * backward; `scratch` holds attention_gqa_scratch(...) bytes. */
	weft_status (*attention_gqa_forward)(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					     int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
					     void *out, void *att, void *scratch);
	/* Accumulates dqkv (B, T, (nh + 2 nkv) hs) from dout (B, T, nh hs);
	 * a kv head's gradient sums its query heads' contributions. */
	weft_status (*attention_gqa_backward)(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					      int64_t nh, int64_t nkv, int64_t hs,
					      const void *qkv, const void *att, const void *dout,
					      void *dqkv, void *scratch);
	/* Bytes of scratch attention_gqa_forward/backward need. */
	size_t (*attention_gqa_scratch)(weft_dtype dt, int64_t B, int64_t T, int64_t nh,
					int64_t nkv, int64_t hs);

	/* ---- since ABI 1.4: fused (flash) causal attention, which saves
	 * the softmax's log-sum-exp instead of the probabilities; check
	 * WEFT_HAS_MEMBER(k, weft_kernel_table, flash_attention_backward)
	 * first. Optional, both or neither: NULL (the CPU table) means the
	 * caller uses attention_gqa_*, the reference these are tested
	 * against. Stream-ordered on kctx; statistics (max, sum, lse) and
	 * accumulation in F32 whatever the storage dtype; with BF16 or F16
	 * storage an implementation may round the probabilities and dS to
	 * that dtype as operands of its matrix products (tensor cores). ---- */

	/* As attention_gqa_forward on the same packed qkv (B, T, (nh + 2 nkv)
	 * hs) and out (B, T, nh hs), for 1 <= hs <= WEFT_FLASH_MAX_HEAD_DIM,
	 * without the probabilities: saves lse (F32, (B, nh, T)), per query
	 * row t the natural log of the sum over keys j <= t of exp(q_t k_j /
	 * sqrt(hs)). Errors: WEFT_ERR_UNSUPPORTED for a larger hs, or B or
	 * nh above 65535. */
	weft_status (*flash_attention_forward)(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					       int64_t nh, int64_t nkv, int64_t hs,
					       const void *qkv, void *out, float *lse);
	/* Accumulates dqkv (B, T, (nh + 2 nkv) hs) from dout (B, T, nh hs),
	 * as attention_gqa_backward, recomputing the probabilities from the
	 * forward's out and lse. Deterministic: the same inputs give the same
	 * bits. Needs no scratch from the caller. */
	weft_status (*flash_attention_backward)(void *kctx, weft_dtype dt, int64_t B, int64_t T,
						int64_t nh, int64_t nkv, int64_t hs,
						const void *qkv, const void *out, const float *lse,
						const void *dout, void *dqkv);

	/* ---- since ABI 1.5: GELU's exact form; check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, gelu_erf_backward) first. Optional, both or
	 * neither: NULL means the device lacks it, and weft_op_gelu_erf fails
	 * naming the table and the member. Stream-ordered on kctx; computed
	 * in F32 whatever the storage dtype. ---- */

	/* GELU, exact form: out = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
	 * (PyTorch's F.gelu, nanoGPT's nn.GELU(), transformers' "gelu");
	 * backward: dx += dy (Phi(x) + x phi(x)), phi the standard normal
	 * density. */
	weft_status (*gelu_erf_forward)(void *kctx, weft_dtype dt, int64_t n, const void *x,
					void *out);
	weft_status (*gelu_erf_backward)(void *kctx, weft_dtype dt, int64_t n, const void *x,
					 const void *dy, void *dx);

	/* ---- since ABI 1.6: 16-bit activations under autocast; check
	 * WEFT_HAS_MEMBER(k, weft_kernel_table, cross_entropy_lowp_backward)
	 * first. Under bf16-mixed / 16-mixed, when `lowp_act_dtypes` holds
	 * the autocast dtype and every member below is set, the core keeps
	 * the activations between layers, and their gradients, in that 16-bit
	 * dtype `dt`, while parameters, their gradients, norm statistics and
	 * the loss stay F32: every computation is in F32, rounded once to dt
	 * where a dt tensor is stored. Optional: 0 / NULL keeps activations
	 * in F32. All stream-ordered on kctx; none waits for the device. ---- */

	/* Mask (WEFT_DTYPE_BIT) of the 16-bit dtypes the members below take
	 * as `dt` (and gemm_lowp_ex as in_dt and c_dt). */
	uint32_t lowp_act_dtypes;

	/* A linear layer's product with 16-bit operands, as tensor cores with
	 * a fused epilogue run it. A and B hold in_dt elements, one matrix,
	 * with gemm's conventions (row-major, op() by trans_a / trans_b);
	 * every product and sum is in F32. With D = alpha op(A) op(B), per
	 * element (i, j) of the m x n result:
	 *   WEFT_EPI_NONE   C = D + bias[j] (+ C when beta is 1)
	 *   WEFT_EPI_GELU   aux = D + bias[j], C = gelu_tanh(aux)
	 *   WEFT_EPI_DGELU  C = D * gelu_tanh'(aux)  (GELU's backward)
	 *   WEFT_EPI_BGRAD  C = D (+ C when beta is 1), and ((float *)aux)[i]
	 *                   = the sum over kk < k of op(A)[i][kk] (since ABI
	 *                   1.7, where gemm_lowp_ex_epilogues has it)
	 * gelu_tanh as gelu_forward; for GELU and DGELU aux has C's dtype and
	 * leading dimension and is written by GELU (stored rounded; C is
	 * computed from the F32 value), read by DGELU. BGRAD's aux is m F32
	 * elements, the bias gradient of the product's A side (for a linear
	 * layer's dw = dy^T x: trans_a 1, A = dy, m = out features, k = rows,
	 * aux gets db): the 16-bit values of op(A) as stored, summed in F32 in
	 * an order fixed by the arguments (the same inputs, the same bits),
	 * written when beta is 0 and added to aux when beta is 1, as C is;
	 * BGRAD takes no bias and alpha 1 only (the sum is not scaled). bias:
	 * n F32 elements, or NULL for none (it must be NULL with DGELU and
	 * BGRAD); when c_dt is 16-bit, bias[j] is rounded
	 * to c_dt before it is added (as autocast rounds a linear layer's
	 * bias to the layer's dtype, and as cuBLASLt's fused bias epilogue
	 * takes it, in D's type), the sum still in F32; with an F32 C it is
	 * added as given. beta: 0 (C is not read) or 1 (NONE and BGRAD).
	 * c_dt: F32, or in_dt (C rounded once). Errors (weft_gemm_ex_check,
	 * weft/gemm_ex.h): WEFT_ERR_DTYPE for an in_dt the device does not
	 * take (the CPU and CUDA tables take BF16 and F16, whatever
	 * lowp_act_dtypes says) or a c_dt neither F32 nor in_dt; INVALID_ARG
	 * for another beta, an unknown epilogue or one the table's
	 * gemm_lowp_ex_epilogues lacks, a bias with DGELU or BGRAD, alpha
	 * other than 1 with BGRAD, a NULL aux with GELU, DGELU or BGRAD;
	 * sizes the device library cannot take, as gemm. */
	weft_status (*gemm_lowp_ex)(void *kctx, weft_dtype in_dt, int trans_a, int trans_b,
				    int64_t m, int64_t n, int64_t k, float alpha, const void *a,
				    int64_t lda, const void *b, int64_t ldb, float beta,
				    weft_dtype c_dt, void *c, int64_t ldc, const float *bias,
				    int32_t epilogue, void *aux);

	/* A bias gradient: out[j] += the sum over rows r of x[r][j] (x rows x
	 * cols of dt, out cols F32), summed in F32 in an order fixed by
	 * (rows, cols) alone, so the same inputs give the same bits. */
	weft_status (*sum_rows_lowp)(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				     const void *x, float *out);

	/* LayerNorm with the residual add in front of it, over rows of cols:
	 * s = x + r (r NULL: s = x), written to `sum` (dt; NULL allowed only
	 * when r is NULL), y = (s - mean) * rstd * w + b of dt, mean and rstd
	 * (F32, rows) saved, the mean and variance of s taken in F32 as
	 * layernorm_forward takes them (s as stored, rounded to dt). w (cols
	 * F32) is required, b (cols F32) may be NULL. y may not overlap x, r
	 * or sum; sum may be x (in place). */
	weft_status (*layernorm_lowp_forward)(void *kctx, weft_dtype dt, int64_t rows,
					      int64_t cols, float eps, const void *x,
					      const void *r, void *sum, const float *w,
					      const float *b, void *y, float *mean, float *rstd);
	/* Its backward from s (the forward's `sum`, or x) and the saved
	 * statistics: the input gradient of dt written to dx when dx_write
	 * is 1 (dx's contents are not read), else added to it (dx += ...); dw
	 * and db (cols F32; db may be NULL) accumulated, rows summed in an
	 * order fixed by (rows, cols). */
	weft_status (*layernorm_lowp_backward)(void *kctx, weft_dtype dt, int64_t rows,
					       int64_t cols, const void *s, const float *w,
					       const float *mean, const float *rstd,
					       const void *dy, void *dx, int32_t dx_write,
					       float *dw, float *db);

	/* The classifier's loss over 16-bit logits, forward: rows of `vocab`
	 * logits of dt with row stride ld >= vocab (columns vocab..ld-1 are
	 * padding, never read); targets (idx_dt I32 or I64, not checked: the
	 * caller has); rows whose target is ignore_index do not count. Writes
	 * lse[r] (F32) = log of the sum over the row of exp(z), *loss (F32
	 * device scalar) = the mean over counted rows of lse - z[target] (0
	 * when none) and *count (F32 device scalar) = the counted rows. One
	 * pass over the logits; nothing of rows x vocab size is written. */
	weft_status (*cross_entropy_lowp_forward)(void *kctx, weft_dtype dt, int64_t rows,
						  int64_t vocab, int64_t ld, const void *logits,
						  weft_dtype idx_dt, const void *targets,
						  int64_t ignore_index, float *lse, float *loss,
						  float *count);
	/* Its backward, written (not added): dlogits[r][j] (dt, row stride
	 * ld, padding columns not written) = (exp(z - lse[r]) - (j ==
	 * target)) * dloss / count for counted rows, 0 on ignore_index rows;
	 * dloss and count F32 device scalars. dlogits may be logits itself
	 * (the gradient replaces the logits in place). */
	weft_status (*cross_entropy_lowp_backward)(void *kctx, weft_dtype dt, int64_t rows,
						   int64_t vocab, int64_t ld, const void *logits,
						   weft_dtype idx_dt, const void *targets,
						   int64_t ignore_index, const float *lse,
						   const float *dloss, const float *count,
						   void *dlogits);

	/* ---- since ABI 1.7: the epilogues gemm_lowp_ex takes; read it with
	 * weft_gemm_ex_epilogues (weft/gemm_ex.h), which checks
	 * WEFT_HAS_MEMBER. ---- */

	/* Mask of 1u << WEFT_EPI_* (below) over the epilogues this
	 * table's gemm_lowp_ex computes. 0, or a table built before ABI 1.7:
	 * ABI 1.6's NONE, GELU and DGELU. */
	uint32_t gemm_lowp_ex_epilogues;

	/* ---- since ABI 1.7: the fused classifier; check WEFT_HAS_MEMBER(k,
	 * weft_kernel_table, cross_entropy_lowp_regrad) first. Optional, both
	 * or neither (NULL: the core keeps _forward then _backward). ---- */

	/* cross_entropy_lowp_forward (lse, *loss, *count, the same values)
	 * and, in the same pass over the logits, cross_entropy_lowp_backward's
	 * gradient for the upstream gradient dloss_hint (a host float, finite
	 * and not 0: else WEFT_ERR_INVALID_ARG), written over the logits in
	 * place: the bits _backward writes from a device dloss equal to the
	 * hint. The count of rows not ignored is known before any gradient
	 * (the CUDA table counts the targets first, a pass over rows
	 * indices). */
	weft_status (*cross_entropy_lowp_fused)(void *kctx, weft_dtype dt, int64_t rows,
						int64_t vocab, int64_t ld, void *logits,
						weft_dtype idx_dt, const void *targets,
						int64_t ignore_index, float dloss_hint, float *lse,
						float *loss, float *count);
	/* The correction for the real upstream gradient *dloss (F32 device
	 * scalar, read on the device): equal to dloss_hint (checked as above),
	 * nothing else is read or written; else each element g of a row not
	 * ignored becomes g (*dloss / dloss_hint) rounded to dt again: within
	 * (2u + u^2 + 2^-21) |exact| (u = 2^-8 BF16, 2^-11 F16; _backward: u
	 * + 2^-22) where g is in dt's normal range (an element that overflowed
	 * under the hint stays infinite). Ignored rows stay 0. No host wait. */
	weft_status (*cross_entropy_lowp_regrad)(void *kctx, weft_dtype dt, int64_t rows,
						 int64_t vocab, int64_t ld, void *dlogits,
						 weft_dtype idx_dt, const void *targets,
						 int64_t ignore_index, float dloss_hint,
						 const float *dloss);

	/* ---- since ABI 1.7: the flash backward's write mode; check
	 * WEFT_HAS_MEMBER(k, weft_kernel_table, flash_attention_backward_write)
	 * first. Optional (NULL: the core zeroes dqkv and calls
	 * flash_attention_backward). ---- */

	/* As flash_attention_backward, but writes dqkv (every element of the
	 * (B, T, (nh + 2 nkv) hs) tensor) instead of adding to it, without
	 * reading it: the bits flash_attention_backward adds into a dqkv of
	 * zeros (so a gradient's first contribution needs no zeroing pass). */
	weft_status (*flash_attention_backward_write)(void *kctx, weft_dtype dt, int64_t B,
						      int64_t T, int64_t nh, int64_t nkv,
						      int64_t hs, const void *qkv,
						      const void *out, const float *lse,
						      const void *dout, void *dqkv);
} weft_kernel_table;

/* gemm_lowp_ex's epilogues (since ABI 1.6; BGRAD since ABI 1.7). */
typedef enum weft_gemm_epilogue {
	WEFT_EPI_NONE = 0,  /* C = D + bias */
	WEFT_EPI_GELU = 1,  /* aux = D + bias, C = gelu_tanh(aux) */
	WEFT_EPI_DGELU = 2, /* C = D * gelu_tanh'(aux) */
	WEFT_EPI_BGRAD = 3, /* C = D, aux (m F32) = the row sums of op(A) */
} weft_gemm_epilogue;

/* The epilogues of ABI 1.6, which every table with gemm_lowp_ex takes. */
#define WEFT_GEMM_EX_EPILOGUES_1_6 \
	((1u << WEFT_EPI_NONE) | (1u << WEFT_EPI_GELU) | (1u << WEFT_EPI_DGELU))

/* The arguments of gemm_lowp_ex that its contract refuses whatever the
 * device (since ABI 1.6), checked the same way by every kernel library:
 * NULL when in_dt (one of the mask `in_dts`, the dtypes the device takes),
 * c_dt, beta, epilogue, bias and aux agree with the contract; else advice
 * (a static string: what was wrong and what to pass), with *status the
 * error to return. The caller puts its device and the member's name in
 * front, and the values after. aux is required by GELU (written) and
 * DGELU (read). Kept as ABI 1.6 wrote it, for libraries built against
 * 1.6 (which refuse WEFT_EPI_BGRAD, as their epilogue mask says); a 1.7
 * library calls weft_gemm_ex_check (weft/gemm_ex.h), which adds alpha and
 * BGRAD's rules to these. */
static inline const char *weft_gemm_ex_misuse(uint32_t in_dts, weft_dtype in_dt,
					      weft_dtype c_dt, float beta, int32_t epilogue,
					      const float *bias, const void *aux,
					      weft_status *status)
{
	*status = WEFT_ERR_DTYPE;
	if ((unsigned)in_dt >= 32u || !(in_dts & WEFT_DTYPE_BIT(in_dt)))
		return "in_dt is not a 16-bit dtype this device takes: pass BF16 or F16 "
		       "operands (F32 ones go to gemm)";
	if (c_dt != WEFT_F32 && c_dt != in_dt)
		return "c_dt must be F32 or in_dt";
	*status = WEFT_ERR_INVALID_ARG;
	if (epilogue != WEFT_EPI_NONE && epilogue != WEFT_EPI_GELU && epilogue != WEFT_EPI_DGELU)
		return "unknown epilogue: pass WEFT_EPI_NONE, WEFT_EPI_GELU or WEFT_EPI_DGELU";
	if (beta != 0.0f && beta != 1.0f)
		return "beta must be 0 (C not read) or 1 (C accumulated)";
	if (beta != 0.0f && epilogue != WEFT_EPI_NONE)
		return "beta 1 (accumulating into C) goes with WEFT_EPI_NONE only: pass beta 0";
	if (bias && epilogue == WEFT_EPI_DGELU)
		return "WEFT_EPI_DGELU takes no bias: pass bias NULL (the bias gradient is "
		       "sum_rows_lowp of the result)";
	if (!aux && epilogue != WEFT_EPI_NONE)
		return "WEFT_EPI_GELU writes and WEFT_EPI_DGELU reads aux (the pre-activation, "
		       "C's dtype and leading dimension): pass it";
	*status = WEFT_OK;
	return NULL;
}

/* The largest head dimension flash_attention_* take (since ABI 1.4). */
#define WEFT_FLASH_MAX_HEAD_DIM 128

/* The elements a GEMM operand spans: `batch` matrices `stride` apart (0:
 * one matrix reused), each `rows` rows of `ld` elements whose first `cols`
 * are used; rows and cols as stored (before any transpose). */
static inline int64_t weft_gemm_span(int64_t rows, int64_t cols, int64_t ld, int64_t stride,
				     int64_t batch)
{
	if (rows <= 0 || cols <= 0 || batch <= 0)
		return 0;
	return (stride > 0 ? (batch - 1) * stride : 0) + (rows - 1) * ld + cols;
}

/* The entry symbol a kernel shared object (kernels/cuda) exports:
 *     const weft_kernel_table *weft_kernels_entry(const weft_host *host);
 * It returns the table for its device type or NULL (with host->error_set)
 * when the device cannot be used (no driver, no GPU). */
#define WEFT_KERNELS_ENTRY_SYMBOL "weft_kernels_entry"
typedef const weft_kernel_table *(*weft_kernels_entry_fn)(const weft_host *host);

/* Installs `table` as the kernels for device type `type`, replacing any
 * earlier one (tests use this to wrap a table). The table is borrowed and
 * must outlive every use. Errors: WEFT_ERR_ABI when the table's ABI major
 * differs from WEFT_ABI_MAJOR or struct_size is smaller than ABI 1.0's
 * table; WEFT_ERR_INVALID_ARG for an unknown type. */
WEFT_API weft_status weft_kernels_register(weft_device_type type, const weft_kernel_table *table);

/* The kernels for `dev`'s type in *out. The CPU table is built in. For
 * CUDA, the first call loads weft_kernels_cuda.so from the plugin search
 * path (WEFT_PLUGIN_PATH, then weft/plugins beside libweft, else the build
 * and install plugin directories) and calls its entry symbol. Thread-safe.
 * Errors: WEFT_ERR_UNSUPPORTED naming the device when no table can be
 * found (for example a build without CUDA), with the loader's reason. */
WEFT_API weft_status weft_kernels_get(weft_device dev, const weft_kernel_table **out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_H */
