/* weft/device.h - dtypes, devices, arenas, CPU threads; the kernel tables
 * are in weft/kernels.h and the dtypes and devices in weft/device_types.h,
 * which this includes.
 *
 * A device is `cpu` or `cuda:N`. Everything that touches tensor memory or
 * computes on it goes through the device's kernel table, a versioned
 * vtable of plain function pointers (weft_kernel_table): the CPU table is
 * built into libweft (kernels/cpu, OpenBLAS); the CUDA table lives in its
 * own shared object (kernels/cuda) that is loaded the first time a CUDA
 * device is used, so CPU users never need CUDA. Both fill the same table,
 * and the CUDA kernels are tested op by op against the CPU ones.
 *
 * Arenas hand out memory on one device from a few large blocks, counted
 * under one accounting category (weft/memory.h). A training step records
 * its activations and its tape into arenas that are reset each step: after
 * the first (warm-up) step the arena holds one block large enough for the
 * whole step and allocates nothing more.
 */
#ifndef WEFT_DEVICE_H
#define WEFT_DEVICE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "weft/status.h"
#include "weft/memory.h"
#include "weft/plugin.h"
#include "weft/device_types.h"
#include "weft/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device memory ---------------------------------------------------- */

/* Allocates `bytes` on `dev` counted under `cat`; free with
 * weft_device_free(dev, cat, ptr, bytes). Errors: as mem_alloc, or
 * weft_kernels_get's. Blocking. */
WEFT_API weft_status weft_device_alloc(weft_device dev, weft_mem_category cat, size_t bytes,
				       void **out);
WEFT_API void weft_device_free(weft_device dev, weft_mem_category cat, void *ptr, size_t bytes);

/* ---- arenas ----------------------------------------------------------- */

typedef struct weft_arena weft_arena; /* opaque */

/* Makes an arena on `dev` whose blocks are counted under `cat`. The first
 * block, of `initial_bytes` (0: 1 MiB), is allocated on first use. Free
 * with weft_arena_free. Errors: WEFT_ERR_NOMEM; weft_kernels_get's. */
WEFT_API weft_status weft_arena_create(weft_device dev, weft_mem_category cat,
				       size_t initial_bytes, weft_arena **out);

/* Frees the arena and every block; everything handed out becomes invalid.
 * NULL is ignored. */
WEFT_API void weft_arena_free(weft_arena *arena);

/* Hands out `bytes` aligned to `align` (a power of two, 0 = 64) in *out,
 * valid until the next weft_arena_reset. Adds a block (at least double
 * the last one) when the current one is full. Not thread-safe.
 * Errors: WEFT_ERR_NOMEM naming the bytes and category; *out is NULL. */
WEFT_API weft_status weft_arena_alloc(weft_arena *arena, size_t bytes, size_t align, void **out);

/* Takes back everything handed out. When the last cycle needed more than
 * one block, the blocks are freed and then replaced by one block as large
 * as that cycle's total use, so a steady workload stops allocating after
 * one cycle (and never holds the old blocks and the new one at once).
 * Never fails: if that one block cannot be had, the arena starts empty
 * and grows again on demand. */
WEFT_API void weft_arena_reset(weft_arena *arena);

/* Arena statistics. */
typedef struct weft_arena_stats {
	size_t used;          /* bytes handed out since the last reset (with padding) */
	size_t capacity;      /* bytes held in blocks now */
	size_t high_water;    /* most bytes used in any one cycle */
	int64_t block_allocs; /* blocks allocated over the arena's life */
} weft_arena_stats;

/* Fills *out. */
WEFT_API void weft_arena_get_stats(const weft_arena *arena, weft_arena_stats *out);

/* The device the arena's memory is on. */
WEFT_API weft_device weft_arena_device(const weft_arena *arena);

/* ---- CPU threads -------------------------------------------------------- */

/* The number of compute threads a process should use:
 * `configured` when > 0 (from the config); else WEFT_NUM_THREADS, then
 * OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS from the environment when set
 * to a positive integer; else the online cores divided by `local_ranks`
 * (processes on this machine; <= 0 counts as 1), at least 1. */
WEFT_API int64_t weft_cpu_threads_resolve(int64_t configured, int64_t local_ranks);

/* Sets the threads the CPU kernels use (openblas_set_num_threads and the
 * kernels' own loops). n < 1 is taken as 1. Call before compute starts. */
WEFT_API void weft_cpu_set_threads(int64_t n);

/* The current CPU kernel thread count. */
WEFT_API int64_t weft_cpu_get_threads(void);

/* Runs fn(arg, begin, end) over [0, n) in contiguous parts, one a CPU
 * kernel thread (weft_cpu_get_threads), each of at least `grain` items
 * (fewer parts when n is small; fn(arg, 0, n) at 1 thread), this thread
 * taking the first; returns when all are done. Part boundaries are
 * multiples of 16 items (a cache line of floats). fn may run on another
 * thread; a call from inside fn runs its parts on threads of its own. */
WEFT_API void weft_cpu_parallel_for(int64_t n, int64_t grain,
				    void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_DEVICE_H */
