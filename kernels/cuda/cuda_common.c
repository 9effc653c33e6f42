/* What every file of the CUDA kernel library uses, below them all: the
 * host services table (set by the entry symbol in cuda_table.c), the error
 * helpers, the context check, the per-context row scratch and index
 * checks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

const weft_host *cuda_host;

void cuda_account_device(weft_mem_category cat, int64_t delta)
{
	weft_host_account_device(cuda_host, cat, delta);
}

weft_status cuda_status_for(cudaError_t err)
{
	switch (err) {
	case cudaErrorMemoryAllocation: return WEFT_ERR_NOMEM;
	case cudaErrorNoKernelImageForDevice:
	case cudaErrorInvalidDeviceFunction:
	case cudaErrorUnsupportedPtxVersion:
	case cudaErrorInsufficientDriver:
	case cudaErrorNoDevice:
	case cudaErrorInvalidDevice: return WEFT_ERR_UNSUPPORTED;
	default: return WEFT_ERR_INTERNAL;
	}
}

static const char *advice_for(cudaError_t err)
{
	switch (err) {
	case cudaErrorMemoryAllocation:
		return "; the GPU is out of memory: use a smaller batch or model";
	case cudaErrorNoKernelImageForDevice:
	case cudaErrorInvalidDeviceFunction:
		return "; this build has GPU code for sm_80 and sm_90 only: rebuild with "
		       "CMAKE_CUDA_ARCHITECTURES naming this GPU";
	case cudaErrorInsufficientDriver:
		return "; the NVIDIA driver is older than this CUDA toolkit: update the driver";
	default:
		return "";
	}
}

/* Faults of a running kernel. CUDA reports them at whatever call comes
 * next (and at every call after: the context is lost), so the call that
 * sees one is often not the kernel that caused it. */
static int kernel_fault(cudaError_t err)
{
	switch (err) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorLaunchTimeout:
	case cudaErrorMisalignedAddress:
	case cudaErrorIllegalInstruction:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorHardwareStackError:
	case cudaErrorAssert:
		return 1;
	default:
		return 0;
	}
}

#define LATE_FAULT_ADVICE \
	"; CUDA reports a kernel's fault at a later call, so an earlier kernel may have " \
	"caused it: rerun with WEFT_CUDA_SYNC_CHECK=1 (waits after every kernel) to name it"

/* The message of cuda_fail and cuda_launched; `when` follows "failed". */
static weft_status fail_as(const char *kernel, int32_t index, cudaError_t err, const char *when,
			   int late_advice, const char *sizes)
{
	return cuda_host->error_set(cuda_status_for(err), "cuda:%d kernel %s (%s) failed%s: %s: "
				    "%s%s%s", (int)index, kernel, sizes, when,
				    cudaGetErrorName(err), cudaGetErrorString(err),
				    advice_for(err),
				    late_advice && kernel_fault(err) ? LATE_FAULT_ADVICE : "");
}

weft_status cuda_fail(const char *kernel, int32_t index, cudaError_t err, const char *fmt, ...)
{
	char sizes[512] = "";
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(sizes, sizeof(sizes), fmt, ap);
		va_end(ap);
	}
	return fail_as(kernel, index, err, "", 1, sizes);
}

weft_status cuda_blas_fail(const char *kernel, int32_t index, cublasStatus_t err,
			   const char *fmt, ...)
{
	char sizes[512] = "";
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(sizes, sizeof(sizes), fmt, ap);
		va_end(ap);
	}
	return cuda_host->error_set(err == CUBLAS_STATUS_ALLOC_FAILED ? WEFT_ERR_NOMEM :
				    err == CUBLAS_STATUS_NOT_SUPPORTED ? WEFT_ERR_UNSUPPORTED :
				    WEFT_ERR_INTERNAL,
				    "cuda:%d kernel %s (%s) failed in cuBLAS: %s: %s", (int)index,
				    kernel, sizes, cublasGetStatusName(err),
				    cublasGetStatusString(err));
}

weft_status cuda_launched(const cuda_ctx *c, const char *kernel, const char *fmt, ...)
{
	cudaError_t err = cudaGetLastError();
	const char *when = "";
	char sizes[512] = "";
	va_list ap;

	if (err == cudaSuccess && c->sync_check) {
		err = cudaStreamSynchronize(c->stream);
		when = " while running (WEFT_CUDA_SYNC_CHECK=1 waited for it after its launch)";
	}
	if (err == cudaSuccess)
		return WEFT_OK;
	va_start(ap, fmt);
	vsnprintf(sizes, sizeof(sizes), fmt, ap);
	va_end(ap);
	return fail_as(kernel, c->index, err, when, !c->sync_check, sizes);
}

weft_status cuda_sync_check_env(int *on)
{
	const char *v = getenv("WEFT_CUDA_SYNC_CHECK");

	*on = 0;
	if (!v || !*v || !strcmp(v, "0"))
		return WEFT_OK;
	if (!strcmp(v, "1")) {
		*on = 1;
		return WEFT_OK;
	}
	return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "WEFT_CUDA_SYNC_CHECK is '%s' in the "
				    "environment: set it to 1 (wait after every CUDA kernel and "
				    "name the one that faults) or 0 (off, the default)", v);
}

weft_status cuda_need_ctx(const cuda_ctx *c, const char *kernel)
{
	cudaError_t err;

	if (!c)
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG,
					    "cuda kernel %s was called without a context: create "
					    "one with the kernel table's ctx_create", kernel);
	err = cudaSetDevice(c->index);
	return err == cudaSuccess ? WEFT_OK : cuda_fail(kernel, c->index, err, "cudaSetDevice");
}

weft_status cuda_rows_reserve(cuda_ctx *c, const char *kernel, size_t bytes)
{
	struct cuda_retired *old = NULL;
	cudaError_t err;
	void *p = NULL;

	if (bytes <= c->rows_bytes)
		return WEFT_OK;
	/* at least doubling: the retired blocks add up to less than the live one */
	if (bytes < 2 * c->rows_bytes)
		bytes = 2 * c->rows_bytes;
	if (bytes < 4096)
		bytes = 4096;
	if (c->rows) {
		old = cuda_host->mem_calloc(WEFT_MEM_OTHER, sizeof(*old));
		if (!old)
			return cuda_host->error_set(WEFT_ERR_NOMEM, "cuda:%d kernel %s: no host "
						    "memory to grow the row scratch",
						    (int)c->index, kernel);
	}
	err = cudaMalloc(&p, bytes);
	if (err != cudaSuccess) {
		cuda_host->mem_free(old);
		if (err == cudaErrorMemoryAllocation)
			cudaGetLastError(); /* allocation failures are not sticky */
		return cuda_fail(kernel, c->index, err, "%zu bytes of row scratch", bytes);
	}
	if (old) {
		/* work queued on the stream may still read it: freed at ctx_destroy */
		old->ptr = c->rows;
		old->bytes = c->rows_bytes;
		old->next = c->retired;
		c->retired = old;
	}
	c->rows = p;
	c->rows_bytes = bytes;
	cuda_account_device(WEFT_MEM_OTHER, (int64_t)bytes);
	return WEFT_OK;
}

weft_status cuda_check_reset(cuda_ctx *c, const char *kernel)
{
	/* all ones is ULLONG_MAX: "no bad position yet"; counters start at 0 */
	cudaError_t err = cudaMemsetAsync(c->check_dev, 0xff, sizeof(unsigned long long),
					  c->stream);

	if (err == cudaSuccess)
		err = cudaMemsetAsync(c->check_dev + 1, 0, 2 * sizeof(unsigned long long),
				      c->stream);
	return err == cudaSuccess ? WEFT_OK : cuda_fail(kernel, c->index, err, "resetting checks");
}

weft_status cuda_check_fetch(cuda_ctx *c, const char *kernel)
{
	cudaError_t err;

	err = cudaMemcpyAsync(c->check_host, c->check_dev, 3 * sizeof(unsigned long long),
			      cudaMemcpyDeviceToHost, c->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(c->stream);
	return err == cudaSuccess ? WEFT_OK : cuda_fail(kernel, c->index, err, "reading checks");
}
