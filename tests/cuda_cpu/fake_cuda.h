/* A stand-in for weft_kernels_cuda.so's staging copies, for testing comm
 * gloo's CUDA path on machines without a GPU (fake_cuda.c). Built as a
 * library named weft_kernels_cuda.so in a directory of its own, so the
 * plugin finds it among the loaded objects exactly as it finds the real
 * one.
 *
 * Its "device memory" is host memory whose address has bit 55 set: not a
 * user address on x86-64 (non-canonical with 4-level paging, unmapped with
 * 5-level) nor on AArch64 (the kernel half; bit 55 is below the top byte
 * that TBI ignores), so any direct CPU access by the code under test
 * faults instead of silently working. Only the fake's
 * copy_sync (and fake_cuda_dev_host, for the test's own checks) translates
 * it back. Its pinned blocks are tracked: a copy whose host side is not
 * inside a live pinned block counts as bad. */
#ifndef WEFT_TEST_FAKE_CUDA_H
#define WEFT_TEST_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "weft/device.h"
#include "weft/plugin.h"

typedef struct fake_cuda_stats {
	int64_t pinned_allocs;   /* host_alloc calls that succeeded */
	int64_t pinned_frees;    /* host_free calls with a live block */
	int64_t pinned_live;     /* blocks allocated and not freed */
	int64_t pinned_bytes;    /* bytes in live blocks */
	int64_t copies_to_host;  /* copy_sync device -> host */
	int64_t copies_to_device;
	int64_t bad_copies;      /* wrong sides, or a host side outside a pinned block */
	int32_t last_index;      /* device_index of the last copy */
	/* ---- appended: the fake kernel table and the optimizer extras ---- */
	int64_t dev_live;        /* device blocks from the table's mem_alloc not freed */
	int64_t table_copies;    /* the table's copy calls */
	int64_t adamw_launches;  /* adamw_step calls */
	int64_t adamw_elements;  /* elements they stepped */
	int64_t sumsq_calls;     /* sum_squares calls */
	int64_t bad_calls;       /* table or extras calls with a host pointer where device
				  * memory belongs, or without the fake's context */
} fake_cuda_stats;

/* Sets the host services the fake reports errors through. */
typedef void (*fake_cuda_setup_fn)(const weft_host *host);
/* "Device" memory of `bytes` (zeroed); free with fake_cuda_dev_free. */
typedef void *(*fake_cuda_dev_alloc_fn)(size_t bytes);
typedef void (*fake_cuda_dev_free_fn)(void *dev);
/* The host address behind a fake device pointer (for checking results). */
typedef void *(*fake_cuda_dev_host_fn)(void *dev);
/* Fills *out (thread-safe). */
typedef void (*fake_cuda_get_stats_fn)(fake_cuda_stats *out);
/* Makes the next n copy_sync calls fail with WEFT_ERR_INTERNAL. */
typedef void (*fake_cuda_fail_copies_fn)(int n);
/* A kernel table named "cuda" with only the context and memory members
 * (ctx_create, ctx_destroy, mem_alloc, mem_free, copy, zero, synchronize,
 * fill) over the same fake device memory; register it with
 * weft_kernels_register(WEFT_DEVICE_CUDA, ...) so that parameters and
 * contexts on cuda:N live there. Its compute members are NULL: no op can
 * run on it. The extras' adamw_step and sum_squares compute on the host
 * behind the fake addresses, in the CUDA kernels' order of operations
 * (kernels/cuda/cuda_optim.cu), and insist on the table's context. */
typedef const weft_kernel_table *(*fake_cuda_kernels_fn)(void);
/* Whether the fake's extras offer adamw_step and sum_squares (1, the
 * default) or not (0, as an older CUDA library). */
typedef void (*fake_cuda_offer_fused_fn)(int on);

#endif /* WEFT_TEST_FAKE_CUDA_H */
