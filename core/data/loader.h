/* data/loader.h - batches prepared on a background thread.
 *
 * The loader owns a ring of `prefetch + 1` batches and one thread that
 * fills them in order from a weft_batch_source while the training step
 * runs; the step takes the next batch without waiting when the thread is
 * ahead. prefetch 0 fills on the caller's thread (no thread at all); the
 * batches are identical either way. An error in the thread is handed to
 * the caller by weft_loader_next, with the thread's message, after the
 * batches filled before it.
 */
#ifndef WEFT_DATA_LOADER_H
#define WEFT_DATA_LOADER_H

#include <stdint.h>

#include "data/batch.h"
#include "weft/status.h"

typedef struct weft_loader weft_loader;

/* Creates a loader over `src` (copied; its ctx must outlive the loader)
 * with `prefetch` batches prepared ahead (0 to 16), allocating every batch
 * buffer now and starting the thread. Nothing is filled until
 * weft_loader_start_epoch. Free with weft_loader_destroy.
 * Errors: WEFT_ERR_INVALID_ARG for prefetch outside [0, 16]; the source's
 * alloc errors; WEFT_ERR_INTERNAL when the thread cannot start. */
weft_status weft_loader_create(const weft_batch_source *src, int prefetch, weft_loader **out);

/* Starts epoch `epoch` at batch `first_batch` (0, or where a resumed run
 * left off): stops and discards any prefetching, prepares the source for
 * the epoch, and lets the thread run. Blocks until an in-flight fill ends.
 * Errors: WEFT_ERR_INVALID_ARG when first_batch is outside
 * [0, batches per epoch]; the source's prepare errors. */
weft_status weft_loader_start_epoch(weft_loader *l, int64_t epoch, int64_t first_batch);

/* The next batch of the epoch in *out, or *out = NULL when the epoch is
 * over. Borrowed: valid until the next call of weft_loader_next,
 * start_epoch or destroy (the slot is then reused). Blocks while the
 * thread has not filled it yet. Errors: the fill's error, as
 * "data loader, epoch E batch I: <message>". */
weft_status weft_loader_next(weft_loader *l, const weft_host_batch **out);

/* Batches per epoch for this rank (the source's count). */
int64_t weft_loader_num_batches(const weft_loader *l);

/* Where the loader stands: the epoch and the index of the next batch
 * weft_loader_next will return. Saving this after a step and passing it to
 * weft_loader_start_epoch on resume replays the same batches. */
void weft_loader_position(const weft_loader *l, int64_t *epoch, int64_t *next_batch);

/* Total seconds weft_loader_next spent waiting for the thread (the data
 * stall in the step-time breakdown). */
double weft_loader_wait_seconds(const weft_loader *l);

/* Stops the thread (waiting for an in-flight fill), frees every batch.
 * NULL is ignored. */
void weft_loader_destroy(weft_loader *l);

#endif /* WEFT_DATA_LOADER_H */
