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

#endif /* WEFT_TEST_FAKE_CUDA_H */
