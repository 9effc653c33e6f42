/* The CUDA kernel table: entry symbol, contexts (stream + cuBLAS handle),
 * device memory with accounting, copies; on top of the kernel files, and
 * of the helpers every one of them uses (cuda_common.c). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"
#include "weft/gemm_ex.h"

/* ---- contexts ---- */

/* Every context from ctx_create not yet destroyed, for stream_wait_compute
 * (which may run on a comm thread while the trainer makes or destroys
 * contexts). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_ctx *live_head;

static void live_add(cuda_ctx *c)
{
	pthread_mutex_lock(&live_lock);
	c->live_prev = NULL;
	c->live_next = live_head;
	if (live_head)
		live_head->live_prev = c;
	live_head = c;
	pthread_mutex_unlock(&live_lock);
}

static void live_remove(cuda_ctx *c)
{
	pthread_mutex_lock(&live_lock);
	if (c->live_prev)
		c->live_prev->live_next = c->live_next;
	else if (live_head == c)
		live_head = c->live_next;
	if (c->live_next)
		c->live_next->live_prev = c->live_prev;
	c->live_prev = c->live_next = NULL;
	pthread_mutex_unlock(&live_lock);
}

/* The extras' stream_wait_compute (weft/cuda_extras.h): one event per live
 * context of the device, recorded on its stream and waited for on
 * `stream`, all under the list's lock so no context is destroyed midway.
 * A context's stream is blocking, so its event also covers the copies and
 * zeroing queued earlier without a context (on the legacy stream, not
 * waited for by the host); with no live context on the device, an event
 * of the legacy stream itself does. */
static weft_status cuda_stream_wait_compute(int32_t index, void *stream)
{
	cudaError_t err = cudaSetDevice(index); /* left current: see use_device_of */
	const char *what = "cudaSetDevice";
	cudaEvent_t legacy;
	int found = 0;

	pthread_mutex_lock(&live_lock);
	for (cuda_ctx *c = live_head; c && err == cudaSuccess; c = c->live_next) {
		if (c->index != index)
			continue;
		found = 1;
		what = "cudaEventRecord on a compute stream";
		err = cudaEventRecord(c->order, c->stream);
		if (err == cudaSuccess) {
			what = "cudaStreamWaitEvent";
			err = cudaStreamWaitEvent((cudaStream_t)stream, c->order, 0);
		}
	}
	pthread_mutex_unlock(&live_lock);
	if (err == cudaSuccess && !found) {
		what = "an event on the legacy default stream";
		err = cudaEventCreateWithFlags(&legacy, cudaEventDisableTiming);
		if (err == cudaSuccess) {
			err = cudaEventRecord(legacy, cudaStreamLegacy);
			if (err == cudaSuccess)
				err = cudaStreamWaitEvent((cudaStream_t)stream, legacy, 0);
			cudaEventDestroy(legacy); /* released once the wait is done */
		}
	}
	return err == cudaSuccess ? WEFT_OK :
	       cuda_fail("stream_wait_compute", index, err, "%s", what);
}

static void cuda_ctx_destroy(void *kctx)
{
	cuda_ctx *c = kctx;

	if (!c)
		return;
	live_remove(c);
	cudaSetDevice(c->index);
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	if (c->rows) {
		cudaFree(c->rows);
		cuda_account_device(WEFT_MEM_OTHER, -(int64_t)c->rows_bytes);
	}
	while (c->retired) {
		struct cuda_retired *r = c->retired;

		c->retired = r->next;
		cudaFree(r->ptr);
		cuda_account_device(WEFT_MEM_OTHER, -(int64_t)r->bytes);
		cuda_host->mem_free(r);
	}
	if (c->check_host)
		cudaFreeHost(c->check_host);
	if (c->check_dev)
		cudaFree(c->check_dev);
	if (c->blas)
		cublasDestroy(c->blas);
	cuda_lt_release(c);
	if (c->order)
		cudaEventDestroy(c->order);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	cuda_host->mem_free(c);
}

static weft_status cuda_ctx_create(int32_t index, void **kctx)
{
	const char *what = "cudaSetDevice";
	cublasStatus_t bst;
	cudaError_t err;
	weft_status st;
	cuda_ctx *c;

	*kctx = NULL;
	c = cuda_host->mem_calloc(WEFT_MEM_OTHER, sizeof(*c));
	if (!c)
		return WEFT_ERR_NOMEM;
	c->index = index;
	if ((st = cuda_sync_check_env(&c->sync_check))) {
		cuda_host->mem_free(c);
		return st;
	}
	err = cudaSetDevice(index);
	if (err == cudaSuccess) {
		what = "cudaStreamCreate";
		err = cudaStreamCreate(&c->stream);
	}
	if (err == cudaSuccess) {
		what = "cudaEventCreateWithFlags";
		err = cudaEventCreateWithFlags(&c->order, cudaEventDisableTiming);
	}
	if (err == cudaSuccess) {
		what = "cudaMalloc";
		err = cudaMalloc((void **)&c->check_dev, 3 * sizeof(unsigned long long));
	}
	if (err == cudaSuccess) {
		what = "cudaMallocHost";
		err = cudaMallocHost((void **)&c->check_host, 3 * sizeof(unsigned long long));
	}
	if (err != cudaSuccess) {
		st = cuda_fail("ctx_create", index, err, "%s", what);
		goto out_destroy;
	}
	bst = cublasCreate(&c->blas);
	if (bst == CUBLAS_STATUS_SUCCESS)
		bst = cublasSetStream(c->blas, c->stream);
	/* F32 GEMMs in full F32 (no TF32), so they match the CPU kernels; and
	 * BF16/F16 GEMMs never reduce split-K partial sums in their own 16-bit
	 * type (cuBLAS may otherwise, even with an F32 compute type) */
	if (bst == CUBLAS_STATUS_SUCCESS)
		bst = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH |
					CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
	if (bst != CUBLAS_STATUS_SUCCESS) {
		st = cuda_blas_fail("ctx_create", index, bst, "cublasCreate");
		goto out_destroy;
	}
	live_add(c);
	*kctx = c;
	return WEFT_OK;

out_destroy:
	cuda_ctx_destroy(c);
	return st;
}

/* ---- memory ---- */

static const char *cat_name(weft_mem_category cat)
{
	static const char *const names[] = { "params", "grads", "optim", "activations", "comm",
					     "other" };

	return (unsigned)cat < WEFT_MEM_NUM_CATEGORIES ? names[cat] : "?";
}

/* The current device. weft runs one GPU per process (core/train/
 * device_map.h), so the members that take a device index or a device
 * pointer make that device current for the calling thread and leave it so.
 * Restoring the previous device would be wrong: a thread that never chose
 * one reports device 0, and since CUDA 12 cudaSetDevice(0) creates a
 * context on GPU 0, so every rank of a multi-GPU job would hold a context
 * (hundreds of MiB) on GPU 0, and copies without a context would run on
 * GPU 0's default stream, unordered with the rank's own GPU. */
static cudaError_t use_device_of(const void *p)
{
	struct cudaPointerAttributes pa;

	if (cudaPointerGetAttributes(&pa, p) != cudaSuccess) {
		cudaGetLastError(); /* not CUDA's: the copy itself says what is wrong */
		return cudaSuccess;
	}
	return pa.type == cudaMemoryTypeDevice ? cudaSetDevice(pa.device) : cudaSuccess;
}

static weft_status cuda_mem_alloc(int32_t index, weft_mem_category cat, size_t bytes, void **out)
{
	cudaError_t err;

	*out = NULL;
	/* The device stays current for this thread (see use_device below). */
	err = cudaSetDevice(index);
	/* at least one granule, so bytes == 0 still gives a freeable pointer */
	if (err == cudaSuccess)
		err = cudaMalloc(out, bytes ? bytes : 256);
	if (err != cudaSuccess) {
		*out = NULL;
		if (err == cudaErrorMemoryAllocation) {
			size_t free_b = 0, total_b = 0;

			cudaGetLastError(); /* clear it: allocation failures are not sticky */
			cudaMemGetInfo(&free_b, &total_b);
			return cuda_host->error_set(WEFT_ERR_NOMEM,
						    "cuda:%d: cannot allocate %zu bytes for %s "
						    "(%zu of %zu bytes free): use a smaller batch "
						    "or model, or a strategy that shards it",
						    (int)index, bytes, cat_name(cat), free_b, total_b);
		}
		return cuda_fail("mem_alloc", index, err, "%zu bytes for %s", bytes, cat_name(cat));
	}
	cuda_account_device(cat, (int64_t)bytes);
	return WEFT_OK;
}

static void cuda_mem_free(int32_t index, weft_mem_category cat, void *ptr, size_t bytes)
{
	if (!ptr)
		return;
	cudaSetDevice(index);
	cudaFree(ptr); /* waits for work on the block */
	cuda_account_device(cat, -(int64_t)bytes);
}

static const char *kind_name(weft_copy_kind kind)
{
	switch (kind) {
	case WEFT_COPY_HOST_TO_DEVICE: return "host to device";
	case WEFT_COPY_DEVICE_TO_HOST: return "device to host";
	case WEFT_COPY_DEVICE_TO_DEVICE: return "device to device";
	}
	return "?";
}

/* A copy from pinned host memory reads its source when it runs: the call
 * waits for it, so the caller may reuse its buffer as with the CPU table.
 * From pageable memory CUDA stages the source before returning. */
static int src_is_pinned(const void *src)
{
	struct cudaPointerAttributes pa;
	int pinned = cudaPointerGetAttributes(&pa, src) == cudaSuccess &&
		     pa.type == cudaMemoryTypeHost;

	cudaGetLastError(); /* pageable memory: the query's error is not ours */
	return pinned;
}

/* Copies: with a context, on its stream; without one, on the legacy
 * default stream of the device that holds the device side (made current),
 * which is ordered after the work queued earlier on every context's
 * (blocking) stream of the device and before the work queued on them
 * later (kernels.h's contract for kctx NULL). Either way the host waits
 * only where it must: a copy to the host (the data is there on return)
 * and a copy from pinned host memory (read when it runs). A copy from
 * pageable memory or within the device returns once queued: a step
 * uploads its batch without waiting for the device. */
static weft_status cuda_copy(void *kctx, void *dst, const void *src, size_t bytes,
			     weft_copy_kind kind)
{
	static const enum cudaMemcpyKind kinds[] = { cudaMemcpyHostToDevice,
						     cudaMemcpyDeviceToHost,
						     cudaMemcpyDeviceToDevice };
	cuda_ctx *c = kctx;
	cudaStream_t stream;
	cudaError_t err;
	weft_status st;

	if (!bytes)
		return WEFT_OK;
	if ((unsigned)kind > WEFT_COPY_DEVICE_TO_DEVICE)
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda copy: unknown kind %d",
					    (int)kind);
	if (c && (st = cuda_need_ctx(c, "copy")))
		return st;
	stream = c ? c->stream : cudaStreamLegacy;
	err = c ? cudaSuccess : use_device_of(kind == WEFT_COPY_DEVICE_TO_HOST ? src : dst);
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(dst, src, bytes, c ? kinds[kind] : cudaMemcpyDefault, stream);
	if (err == cudaSuccess && (kind == WEFT_COPY_DEVICE_TO_HOST ||
				   (kind == WEFT_COPY_HOST_TO_DEVICE && src_is_pinned(src))))
		err = cudaStreamSynchronize(stream);
	return err == cudaSuccess ? WEFT_OK :
	       cuda_fail("copy", c ? c->index : -1, err, "%zu bytes %s", bytes, kind_name(kind));
}

/* Zeroing: on the context's stream, or without one on the legacy default
 * stream of the device holding dst, ordered as a copy without a context
 * is; never waited for (the gradients are zeroed every step). */
static weft_status cuda_zero(void *kctx, void *dst, size_t bytes)
{
	cuda_ctx *c = kctx;
	cudaError_t err;
	weft_status st;

	if (!bytes)
		return WEFT_OK;
	if (!c) {
		err = use_device_of(dst);
		if (err == cudaSuccess)
			err = cudaMemsetAsync(dst, 0, bytes, cudaStreamLegacy);
		return err == cudaSuccess ? WEFT_OK : cuda_fail("zero", -1, err, "%zu bytes", bytes);
	}
	if ((st = cuda_need_ctx(c, "zero")))
		return st;
	err = cudaMemsetAsync(dst, 0, bytes, c->stream);
	return err == cudaSuccess ? WEFT_OK : cuda_fail("zero", c->index, err, "%zu bytes", bytes);
}

static weft_status cuda_synchronize(void *kctx)
{
	cuda_ctx *c = kctx;
	cudaError_t err;
	weft_status st;

	if (!c) {
		err = cudaDeviceSynchronize();
		return err == cudaSuccess ? WEFT_OK : cuda_fail("synchronize", -1, err, "device");
	}
	if ((st = cuda_need_ctx(c, "synchronize")))
		return st;
	err = cudaStreamSynchronize(c->stream);
	return err == cudaSuccess ? WEFT_OK :
	       cuda_fail("synchronize", c->index, err, "work queued earlier on the stream");
}

/* ---- staging for host-side comm backends (kernels_cuda.h) ---- */

static weft_status cuda_host_alloc(weft_mem_category cat, size_t bytes, void **out)
{
	cudaError_t err;

	*out = NULL;
	err = cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocPortable);
	if (err != cudaSuccess) {
		*out = NULL;
		cudaGetLastError(); /* allocation failures are not sticky */
		return cuda_host->error_set(err == cudaErrorMemoryAllocation ? WEFT_ERR_NOMEM :
					    cuda_status_for(err),
					    "cannot allocate %zu bytes of pinned host memory for "
					    "%s: %s: %s (lower the bucket size, or free host memory)",
					    bytes, cat_name(cat), cudaGetErrorName(err),
					    cudaGetErrorString(err));
	}
	cuda_host->mem_account(cat, (int64_t)bytes);
	return WEFT_OK;
}

static void cuda_host_free(weft_mem_category cat, void *ptr, size_t bytes)
{
	cudaError_t err;

	if (!ptr)
		return;
	err = cudaFreeHost(ptr);
	if (err != cudaSuccess) /* nothing to return it to: say so */
		cuda_host->log(WEFT_LOG_WARN, "cuda host_free: cudaFreeHost of %zu bytes of %s "
			       "failed: %s: %s", bytes, cat_name(cat), cudaGetErrorName(err),
			       cudaGetErrorString(err));
	cuda_host->mem_account(cat, -(int64_t)bytes);
}

/* cudaStreamLegacy names the legacy default stream even in code built
 * with per-thread default streams; every context's stream is created
 * blocking (cudaStreamCreate), so the copy is ordered after their earlier
 * work and their later work after it. */
static weft_status cuda_copy_sync(int32_t index, void *dst, const void *src, size_t bytes,
				  weft_copy_kind kind)
{
	static const enum cudaMemcpyKind kinds[] = { cudaMemcpyHostToDevice,
						     cudaMemcpyDeviceToHost,
						     cudaMemcpyDeviceToDevice };
	const char *what = "cudaSetDevice";
	cudaError_t err;

	if (!bytes)
		return WEFT_OK;
	if ((unsigned)kind > WEFT_COPY_DEVICE_TO_DEVICE)
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda copy_sync: unknown kind %d",
					    (int)kind);
	err = cudaSetDevice(index); /* left current: see use_device_of */
	if (err == cudaSuccess) {
		what = "cudaMemcpyAsync";
		err = cudaMemcpyAsync(dst, src, bytes, kinds[kind], cudaStreamLegacy);
	}
	if (err == cudaSuccess) {
		what = "cudaStreamSynchronize";
		err = cudaStreamSynchronize(cudaStreamLegacy);
	}
	return err == cudaSuccess ? WEFT_OK :
	       cuda_fail("copy_sync", index, err, "%s, %zu bytes %s", what, bytes,
			 kind_name(kind));
}

static weft_status cuda_device_count(int32_t *out)
{
	cudaError_t err;
	int n = 0;

	*out = 0;
	err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess) {
		cudaGetLastError();
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cudaGetDeviceCount failed: %s: %s "
					    "(check nvidia-smi and CUDA_VISIBLE_DEVICES)",
					    cudaGetErrorName(err), cudaGetErrorString(err));
	}
	if (n < 1)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cudaGetDeviceCount found no GPU "
					    "(check nvidia-smi and CUDA_VISIBLE_DEVICES)");
	*out = (int32_t)n;
	return WEFT_OK;
}

static const weft_kernel_table cuda_table = {
	.head = WEFT_PLUGIN_HEAD(weft_kernel_table, "cuda"),
	.float_dtypes = WEFT_DTYPE_BIT(WEFT_F32) | WEFT_DTYPE_BIT(WEFT_BF16) |
			WEFT_DTYPE_BIT(WEFT_F16),
	.ctx_create = cuda_ctx_create,
	.ctx_destroy = cuda_ctx_destroy,
	.mem_alloc = cuda_mem_alloc,
	.mem_free = cuda_mem_free,
	.copy = cuda_copy,
	.zero = cuda_zero,
	.synchronize = cuda_synchronize,
	.gemm = cuda_gemm,
	.sum_rows = cuda_sum_rows,
	.add = cuda_add,
	.mul = cuda_mul,
	.mul_backward = cuda_mul_backward,
	.scale = cuda_scale,
	.axpy = cuda_axpy,
	.fill = cuda_fill,
	.convert = cuda_convert,
	.relu_forward = cuda_relu_forward,
	.relu_backward = cuda_relu_backward,
	.gelu_forward = cuda_gelu_forward,
	.gelu_backward = cuda_gelu_backward,
	.softmax_forward = cuda_softmax_forward,
	.softmax_backward = cuda_softmax_backward,
	.layernorm_forward = cuda_layernorm_forward,
	.layernorm_backward = cuda_layernorm_backward,
	.embedding_forward = cuda_embedding_forward,
	.embedding_backward = cuda_embedding_backward,
	.attention_forward = cuda_attention_forward,
	.attention_backward = cuda_attention_backward,
	.attention_scratch = cuda_attention_scratch,
	.dropout_forward = cuda_dropout_forward,
	.dropout_backward = cuda_dropout_backward,
	.cross_entropy_forward = cuda_cross_entropy_forward,
	.cross_entropy_backward = cuda_cross_entropy_backward,
	.accuracy = cuda_accuracy,
	.set_threads = NULL,
	.device_count = cuda_device_count,
	.gemm_lowp = cuda_gemm_lowp,
	.gemm_lowp_scratch = NULL,
	.copy_ranges = cuda_copy_ranges,
	.sum_squares_ranges = cuda_sum_squares_ranges,
	.optim_step = cuda_optim_step,
	.vocab_ce_stats = cuda_vocab_ce_stats,
	.vocab_ce_backward = cuda_vocab_ce_backward,
	.rmsnorm_forward = cuda_rmsnorm_forward,
	.rmsnorm_backward = cuda_rmsnorm_backward,
	.rope_forward = cuda_rope_forward,
	.rope_backward = cuda_rope_backward,
	.swiglu_forward = cuda_swiglu_forward,
	.swiglu_backward = cuda_swiglu_backward,
	.attention_gqa_forward = cuda_attention_gqa_forward,
	.attention_gqa_backward = cuda_attention_gqa_backward,
	.attention_gqa_scratch = cuda_attention_gqa_scratch,
	.flash_attention_forward = cuda_flash_attention_forward,
	.flash_attention_backward = cuda_flash_attention_backward,
	.gelu_erf_forward = cuda_gelu_erf_forward,
	.gelu_erf_backward = cuda_gelu_erf_backward,
	/* 16-bit activations by default under bf16-mixed and 16-mixed */
	.lowp_act_dtypes = WEFT_DTYPE_BIT(WEFT_BF16) | WEFT_DTYPE_BIT(WEFT_F16),
	.gemm_lowp_ex = cuda_gemm_lowp_ex,
	.sum_rows_lowp = cuda_sum_rows_lowp,
	.layernorm_lowp_forward = cuda_layernorm_lowp_forward,
	.layernorm_lowp_backward = cuda_layernorm_lowp_backward,
	.cross_entropy_lowp_forward = cuda_cross_entropy_lowp_forward,
	.cross_entropy_lowp_backward = cuda_cross_entropy_lowp_backward,
	/* since ABI 1.7 */
	.gemm_lowp_ex_epilogues = WEFT_GEMM_EX_EPILOGUES_1_6 | 1u << WEFT_EPI_BGRAD,
	.cross_entropy_lowp_fused = cuda_cross_entropy_lowp_fused,
	.cross_entropy_lowp_regrad = cuda_cross_entropy_lowp_regrad,
	.flash_attention_backward_write = cuda_flash_attention_backward_write,
};

static const weft_cuda_extras cuda_extras = {
	.head = WEFT_PLUGIN_HEAD(weft_cuda_extras, "cuda-extras"),
	.adamw_step = cuda_adamw_step,
	.unscale_check = cuda_unscale_check,
	.host_alloc = cuda_host_alloc,
	.host_free = cuda_host_free,
	.copy_sync = cuda_copy_sync,
	.sum_squares = cuda_sum_squares,
	.stream_wait_compute = cuda_stream_wait_compute,
};

/* The entry symbol (weft/device.h): the table, or NULL with the reason in
 * the last error when no CUDA device can be used here. */
__attribute__((visibility("default"))) const weft_kernel_table *
weft_kernels_entry(const weft_host *host)
{
	int count = 0;
	cudaError_t err;

	cuda_host = host;
	err = cudaGetDeviceCount(&count);
	if (err != cudaSuccess) {
		cudaGetLastError();
		host->error_set(WEFT_ERR_UNSUPPORTED, "no CUDA device: cudaGetDeviceCount failed: "
				"%s: %s (is the NVIDIA driver installed and a GPU visible? check "
				"nvidia-smi and CUDA_VISIBLE_DEVICES)", cudaGetErrorName(err),
				cudaGetErrorString(err));
		return NULL;
	}
	if (count == 0) {
		host->error_set(WEFT_ERR_UNSUPPORTED, "no CUDA device: cudaGetDeviceCount found 0 "
				"GPUs (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
		return NULL;
	}
	return &cuda_table;
}

/* The extras (kernels_cuda.h); valid once weft_kernels_entry returned a
 * table. */
__attribute__((visibility("default"))) const weft_cuda_extras *weft_kernels_cuda_extras(void)
{
	return &cuda_extras;
}
