/* weft/memory.h - allocation with exact accounting by category.
 *
 * Every byte weft allocates for training data goes through these calls, so
 * the current and peak bytes per category are exact at any moment; ZeRO's
 * memory claims are checked against them. Host (CPU) memory is counted
 * here; device memory is counted by the device layer with the same
 * categories (weft_mem_account_device, since ABI 1.5; before, with
 * weft_mem_account). The totals (weft_mem_get_stats) count both; the
 * host's and the device's own counters are apart (weft_mem_get_split_stats).
 */
#ifndef WEFT_MEMORY_H
#define WEFT_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Categories. Values are part of the ABI: only ever appended. */
typedef enum weft_mem_category {
	WEFT_MEM_PARAMS = 0,
	WEFT_MEM_GRADS = 1,
	WEFT_MEM_OPTIM = 2,       /* optimizer state */
	WEFT_MEM_ACTIVATIONS = 3,
	WEFT_MEM_COMM = 4,        /* communication buffers */
	WEFT_MEM_OTHER = 5,
	WEFT_MEM_NUM_CATEGORIES = 6
} weft_mem_category;

typedef struct weft_mem_stats {
	int64_t current[WEFT_MEM_NUM_CATEGORIES];
	int64_t peak[WEFT_MEM_NUM_CATEGORIES];
	int64_t current_total;
	int64_t peak_total;       /* peak of the sum, not the sum of peaks */
} weft_mem_stats;

/* Allocates `bytes` (64-byte aligned) counted under `cat`. Returns NULL and
 * sets the last error (naming the size and category) on failure. Free
 * with weft_mem_free. bytes == 0 returns a valid, freeable pointer. */
WEFT_API void *weft_mem_alloc(weft_mem_category cat, size_t bytes);

/* As weft_mem_alloc, zero-filled. */
WEFT_API void *weft_mem_calloc(weft_mem_category cat, size_t bytes);

/* Frees a block from weft_mem_alloc; NULL is ignored. */
WEFT_API void weft_mem_free(void *ptr);

/* The size the block was allocated with. */
WEFT_API size_t weft_mem_size(const void *ptr);

/* Adds `delta` bytes (may be negative) to a category without allocating:
 * for memory owned elsewhere (a device allocator, a library's buffers). */
WEFT_API void weft_mem_account(weft_mem_category cat, int64_t delta);

/* Current and peak bytes per category. Thread-safe. */
WEFT_API void weft_mem_get_stats(weft_mem_stats *out);

/* As weft_mem_account, for device memory (a device allocator's blocks):
 * counted in the totals (weft_mem_get_stats) and in the device's own
 * counters, where weft_mem_account counts in the host's. Since ABI 1.5. */
WEFT_API void weft_mem_account_device(weft_mem_category cat, int64_t delta);

/* The host's and the device's counters apart: *host the bytes counted by
 * weft_mem_alloc and weft_mem_account, *device those counted by
 * weft_mem_account_device (all 0 in a process without a device), each
 * with its own peaks (the peak of the host's total is not the total's
 * peak less the device's). Either pointer may be NULL. Thread-safe.
 * Since ABI 1.5. */
WEFT_API void weft_mem_get_split_stats(weft_mem_stats *host, weft_mem_stats *device);

/* Sets every peak (the totals', the host's, the device's) to the current
 * value (start of a measured region). */
WEFT_API void weft_mem_reset_peaks(void);

/* A short name: "params", "grads", "optim", "activations", "comm", "other". */
WEFT_API const char *weft_mem_category_name(weft_mem_category cat);

/* Fault injection for tests: the n-th allocation from now (1 = the next)
 * fails as if the system were out of memory; 0 turns it off. */
WEFT_API void weft_mem_fail_after(int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_MEMORY_H */
