/* cuda_shim.h - a test's own CUDA runtime and cuBLAS entry points, in
 * front of the real ones (or the emulator's), for properties that no
 * result value shows: which calls the kernel library makes, what CUDA's
 * documented rules say is still pending when a member returns, and how a
 * fault that CUDA reports late is attributed.
 *
 * The test executable defines these functions and exports them
 * (ENABLE_EXPORTS in tests/cuda/CMakeLists.txt), so the kernel library's
 * calls resolve here first; each forwards to the next definition
 * (dlsym(RTLD_NEXT)). Include once, in the test's only C file.
 *
 * What it keeps:
 * - shim_pending: work queued on the legacy default stream that CUDA does
 *   not promise is finished when the call returns, by the runtime API's
 *   synchronization rules: cudaMemset of device memory, cudaMemcpy device
 *   to device and host to device (from pageable memory it returns once the
 *   bytes are staged), any *Async call on the legacy stream. Cleared by
 *   cudaStreamSynchronize of that stream, cudaDeviceSynchronize and a
 *   cudaMemcpy to the host (which waits for the stream).
 * - shim_frees: calls of cudaFree; shim_math_mode: the last cuBLAS math
 *   mode set.
 * - shim_inject_fault(err): a fault of the next kernel to run, reported as
 *   CUDA reports a running kernel's fault: by the first synchronizing call
 *   (stream, device, event or a copy to the host), or else by the second
 *   cudaGetLastError from now on (the first is the launch check of the
 *   faulting kernel itself, which on a GPU returns before the kernel ran);
 *   after that, sticky: every such call returns it, until shim_clear_fault.
 */
#ifndef WEFT_TEST_CUDA_SHIM_H
#define WEFT_TEST_CUDA_SHIM_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int shim_pending;
static long shim_frees;
static int shim_math_mode = -1;
static cudaError_t shim_fault = cudaSuccess;
static int shim_fault_hidden; /* cudaGetLastError calls that do not see it yet */
static int shim_fault_seen;

static void *shim_next(const char *name)
{
	/* cuBLAS is loaded with the kernel library (RTLD_LOCAL), outside
	 * RTLD_NEXT's reach, except when the emulator provides it */
	static const char *const libs[] = { "libcublas.so.13", "libcublas.so.12",
					    "libcublas.so" };
	void *p = dlsym(RTLD_NEXT, name);

	for (size_t i = 0; !p && i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);

		if (h)
			p = dlsym(h, name);
	}
	if (!p) {
		fprintf(stderr, "cuda_shim: no next definition of %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

#define SHIM_NEXT(type, name) ((type)shim_next(#name))

static int shim_legacy(cudaStream_t s)
{
	return s == 0 || s == cudaStreamLegacy;
}

static inline void shim_inject_fault(cudaError_t err)
{
	shim_fault = err;
	shim_fault_hidden = 1;
	shim_fault_seen = 0;
}

static inline void shim_clear_fault(void)
{
	shim_fault = cudaSuccess;
	shim_fault_seen = 0;
}

/* The fault as a synchronizing call sees it. */
static cudaError_t shim_fault_at_sync(void)
{
	if (shim_fault != cudaSuccess)
		shim_fault_seen = 1;
	return shim_fault;
}

static int shim_is_device(const void *p)
{
	struct cudaPointerAttributes a;

	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		SHIM_NEXT(cudaError_t (*)(void), cudaGetLastError)();
		return 0;
	}
	return a.type == cudaMemoryTypeDevice;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(void), cudaGetLastError)();

	if (shim_fault != cudaSuccess && !shim_fault_seen && shim_fault_hidden > 0) {
		shim_fault_hidden--;
		return e;
	}
	return shim_fault != cudaSuccess ? shim_fault_at_sync() : e;
}

cudaError_t cudaPeekAtLastError(void)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(void), cudaPeekAtLastError)();

	return shim_fault != cudaSuccess && (shim_fault_seen || !shim_fault_hidden) ? shim_fault : e;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(cudaStream_t), cudaStreamSynchronize)(s);

	if (shim_fault != cudaSuccess)
		return shim_fault_at_sync();
	if (e == cudaSuccess && shim_legacy(s))
		shim_pending = 0;
	return e;
}

cudaError_t cudaDeviceSynchronize(void)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(void), cudaDeviceSynchronize)();

	if (shim_fault != cudaSuccess)
		return shim_fault_at_sync();
	if (e == cudaSuccess)
		shim_pending = 0;
	return e;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(cudaEvent_t), cudaEventSynchronize)(ev);

	return shim_fault != cudaSuccess ? shim_fault_at_sync() : e;
}

cudaError_t cudaMemset(void *dst, int v, size_t n)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(void *, int, size_t), cudaMemset)(dst, v, n);

	if (e == cudaSuccess && n && shim_is_device(dst))
		shim_pending = 1;
	return e;
}

cudaError_t cudaMemsetAsync(void *dst, int v, size_t n, cudaStream_t s)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(void *, int, size_t, cudaStream_t),
				  cudaMemsetAsync)(dst, v, n, s);

	if (e == cudaSuccess && n && shim_legacy(s))
		shim_pending = 1;
	return e;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(void *, const void *, size_t,
						  enum cudaMemcpyKind), cudaMemcpy)(dst, src, n, k);

	if (shim_fault != cudaSuccess)
		return shim_fault_at_sync();
	if (e != cudaSuccess || !n)
		return e;
	if (shim_is_device(dst))
		shim_pending = 1; /* to the device: may return before it lands */
	else
		shim_pending = 0; /* to the host: waits for the stream first */
	return e;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
			    cudaStream_t s)
{
	cudaError_t e = SHIM_NEXT(cudaError_t (*)(void *, const void *, size_t,
						  enum cudaMemcpyKind, cudaStream_t),
				  cudaMemcpyAsync)(dst, src, n, k, s);

	if (e == cudaSuccess && n && shim_legacy(s))
		shim_pending = 1;
	return e;
}

cudaError_t cudaFree(void *p)
{
	if (p)
		shim_frees++;
	return SHIM_NEXT(cudaError_t (*)(void *), cudaFree)(p);
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
	shim_math_mode = (int)mode;
	return SHIM_NEXT(cublasStatus_t (*)(cublasHandle_t, cublasMath_t), cublasSetMathMode)(h,
												 mode);
}

#endif /* WEFT_TEST_CUDA_SHIM_H */
