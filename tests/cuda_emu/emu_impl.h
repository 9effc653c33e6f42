/* emu_impl.h - what the parts of the emulated CUDA runtime (libemucuda.so)
 * share: device memory and its host-access trap (emu_mem.cpp), deferred
 * streams and events (emu_stream.cpp), kernel execution on fibers
 * (emu_launch.cpp) and the cuBLAS stand-in (emu_blas.cpp). Not a public
 * header: the kernels see only cuda_emu.h. */
#ifndef WEFT_EMU_IMPL_H
#define WEFT_EMU_IMPL_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <functional>
#include <vector>

/* The launch configuration of one kernel (cuda_emu.h declares the same). */
struct emu_cfg_t {
	dim3 grid, block;
	size_t shmem;
	cudaStream_t stream;
};

/* ---- reporting (emu_mem.cpp) ---- */

/* Prints "EMU DEFECT: <message>" on stderr; aborts when EMU_ABORT_ON_DEFECT
 * is set. */
void emu_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* EMU_TRACE=1: print every launch, GEMM and stream operation. */
int emu_tracing(void);
/* Sets the calling thread's last error (cudaGetLastError) and returns e. */
cudaError_t emu_set_error(cudaError_t e);

/* ---- device memory (emu_mem.cpp) ---- */

/* The emulated devices (EMU_DEVICES, default 1, at most EMU_MAX_DEVICES)
 * and the calling thread's current one (cudaSetDevice). */
#define EMU_MAX_DEVICES 16
int emu_device_count(void);
int emu_current_device(void);
/* Device `dev`'s memory is readable and writable only between
 * emu_dev_enter(dev) and the matching emu_dev_exit(dev) (nesting, any
 * thread); PROT_NONE otherwise unless EMU_NO_PROTECT=1. So work of one
 * device that touches another's memory faults, as host code does. */
void emu_dev_enter(int dev);
void emu_dev_exit(int dev);
/* [p, p + n) lies inside one cudaMalloc allocation. */
int emu_dev_range_ok(const void *p, size_t n);
/* The device p's cudaMalloc allocation belongs to; -1 for other memory. */
int emu_device_of(const void *p);
/* p points into a cudaMalloc allocation. */
int emu_is_dev(const void *p);
/* p points into cudaMallocHost / cudaHostAlloc memory. */
int emu_is_pinned(const void *p);

/* ---- streams (emu_stream.cpp) ---- */

/* Queues `work` on stream s (0, cudaStreamLegacy, cudaStreamPerThread or
 * a created stream) behind everything CUDA orders it after; it runs when
 * something forces it. `what` names it in traces and reports (a string
 * literal or one that outlives the work). Returns cudaErrorInvalidResourceHandle
 * for a destroyed or unknown stream. */
cudaError_t emu_enqueue(cudaStream_t s, const char *what, std::function<void()> work);
/* Queues `work` as emu_enqueue does, then runs it and what it depends on
 * before returning (a host-synchronous operation on that stream). */
cudaError_t emu_enqueue_sync(cudaStream_t s, const char *what, std::function<void()> work);
/* Inside a host function (cudaLaunchHostFunc) on this thread: the runtime
 * calls that the host-function interface executes at once. */
int emu_in_host_fn(void);

/* ---- kernels (emu_launch.cpp) ---- */

/* The entry points of cuda_emu.h: a launch (checked, then queued on
 * cfg.stream), __syncthreads, __shfl_xor_sync and the lock of atomics. */
void emu_run(const emu_cfg_t &cfg, const char *name, std::function<void()> body);
void emu_syncthreads();
float emu_shfl_xor(float v, int lane_mask);
void emu_atomic_lock();
void emu_atomic_unlock();
/* cuda_emu_wmma.h's: a load or store's pointer and ldm checked; a warp's
 * mma_sync computed once (emu_launch.cpp). */
void emu_wmma_check(const char *call, const void *p, unsigned ldm, size_t elem_bytes);
float *emu_wmma_collective(const char *call, int *first);
/* ---- cp.async, deferred (emu_async.cpp; the calls of cuda_mma.cuh) ---- */

/* One copy a CUDA thread issued and the commit group it belongs to (the
 * thread's count of commits when it was issued). */
struct emu_async_copy {
	void *dst;
	const void *src;
	unsigned bytes;
	unsigned group;
};
/* One CUDA thread's copies not yet performed, in issue order, and the
 * groups it has committed. */
struct emu_async_thread {
	std::vector<emu_async_copy> copies;
	unsigned committed = 0;
};
/* The running CUDA thread's state and its kernel's name (emu_launch.cpp);
 * NULL outside a kernel. */
emu_async_thread *emu_cur_async(const char **kernel);
/* Performs, in issue order, and forgets t's copies of the groups before
 * `before` (~0u: every copy, committed or not: the thread's end). */
void emu_async_complete(emu_async_thread *t, unsigned before);

/* Runs every thread of every block of one launch, now (the caller holds
 * the device). */
void emu_kernel_exec(const emu_cfg_t &cfg, const char *name, const std::function<void()> &body);
/* The next value of the EMU_SEED generator (0 when EMU_SEED is unset). */
int emu_seeded(void);
uint64_t emu_rand(void);

/* Calls fn(base, bytes) for each cudaMalloc allocation of device dev. */
void emu_dev_blocks(int dev, const std::function<void(uintptr_t, size_t)> &fn);

/* ---- EMU_COUNTS: bytes and FLOPs per operation (emu_count.cpp) ---- */

/* 1 when EMU_COUNTS names a file that is being written. */
int emu_counting(void);
/* One line of the counts file: kind 'K' kernel, 'G' GEMM, 'C' copy. */
void emu_count_record(char kind, const char *name, double rd, double wr, double flops,
		      const char *cls);
/* Around one kernel's execution (the device is open): the pages of dev's
 * allocations it reads and writes. */
void emu_count_kernel_begin(int dev);
void emu_count_kernel_end(const char *name);
/* From a kernel (wmma::mma_sync and mma_16816, once per warp): adds
 * flops of class cls to the running launch's count; a launch's line takes
 * the class of its counted FLOPs ("-" when none). */
void emu_count_add_flops(double flops, const char *cls);
/* The SIGSEGV handler's first question: a fault of the launch being
 * counted at addr (is_write 1 a store, 0 a load, -1 unknown)? Opens the
 * page and returns 1 when so. */
int emu_count_fault(const void *addr, int is_write);

/* ---- counters for EMU_SUMMARY (launches and GEMMs counted in any thread) ---- */
extern std::atomic<long> emu_launches, emu_gemms;
extern long emu_deferred; /* under the stream graph's lock */

/* ---- what the program's host threads wait for and allocate (EMU_SUMMARY) ----
 * Counted when the program calls them, from any thread, but not from inside a
 * host function (there they run at once and wait for nothing) nor when the
 * runtime calls itself (cudaFree's synchronize counts as a cudaFree). */
enum emu_host_kind {
	EMU_WAIT_STREAM_SYNC,  /* cudaStreamSynchronize */
	EMU_WAIT_DEVICE_SYNC,  /* cudaDeviceSynchronize */
	EMU_WAIT_EVENT_SYNC,   /* cudaEventSynchronize */
	EMU_WAIT_STREAM_QUERY, /* cudaStreamQuery (forces the stream: the emulator has no clock) */
	EMU_WAIT_EVENT_QUERY,  /* cudaEventQuery (idem) */
	EMU_WAIT_MEMCPY_D2H,   /* a copy from device memory the host waits for: cudaMemcpy,
				* or cudaMemcpyAsync into pageable memory */
	EMU_WAIT_MEMCPY_OTHER, /* cudaMemcpy host to device or device to device */
	EMU_WAIT_MEMSET,       /* cudaMemset */
	EMU_WAITS,             /* the kinds above are host waits */
	EMU_ALLOC_MALLOC = EMU_WAITS, /* cudaMalloc */
	EMU_ALLOC_FREE,        /* cudaFree */
	EMU_ALLOC_HOST,        /* cudaMallocHost, cudaHostAlloc */
	EMU_ALLOC_FREE_HOST,   /* cudaFreeHost */
	EMU_HOST_KINDS
};
/* Counts one call of `kind` made by the program (see above). */
void emu_host_count(enum emu_host_kind kind);
/* Around the runtime's own calls of its entry points (cudaFree's
 * synchronize, emu_count_mark's): what runs between is not counted. */
void emu_internal_begin(void);
void emu_internal_end(void);

#endif
