/* data/batch.h - batches as plain host arrays, and the sources that fill them.
 *
 * A batch is two host arrays with shapes: inputs x and targets y. A source
 * fills batch number i of an epoch into preallocated buffers; it is a pure
 * function of (epoch, i), which is what makes prefetching on another
 * thread, exact resume and multi-rank runs deterministic.
 *
 * Two sources cover weft's examples:
 *  - classification: x float32 (b, example shape...), y int32 (b), from a
 *    weft_dataset through a DistributedSampler; the last batch of an epoch
 *    has fewer rows unless drop_last;
 *  - language model: x int32 (B, T) and y int32 (B, T) = the window shifted
 *    by one, from (B, T+1) windows of a token stream.
 * Union over ranks: rank r's batch i holds global examples
 * (i * world + r) * B ... + B - 1 (LM) or sampler positions striding the
 * same way (classification), so `world` ranks at batch size B see what one
 * process at batch size world * B sees.
 */
#ifndef WEFT_DATA_BATCH_H
#define WEFT_DATA_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"
#include "data/sampler.h"
#include "weft/status.h"

typedef enum weft_host_dtype {
	WEFT_HOST_F32 = 0,
	WEFT_HOST_I32 = 1
} weft_host_dtype;

typedef struct weft_host_array {
	weft_host_dtype dtype;
	int ndim;
	int64_t shape[WEFT_DATA_MAX_DIMS + 1];
	void *data;          /* owned by the batch (weft_mem_alloc, OTHER) */
	size_t capacity;     /* bytes allocated: the largest batch */
} weft_host_array;

typedef struct weft_host_batch {
	weft_host_array x, y;
	int64_t epoch;       /* which epoch and batch this is */
	int64_t index;
	int64_t rows;        /* examples in it (x.shape[0]) */
} weft_host_batch;

/* Frees a batch's arrays; NULL is ignored. */
void weft_batch_free(weft_host_batch *b);

/* What a batch's indices must satisfy for the model that reads them. */
typedef struct weft_batch_limits {
	int64_t id_limit;      /* > 0: x is token ids (I32), each in [0, id_limit) */
	int64_t target_limit;  /* > 0: y is class ids (I32), each in [0, target_limit)
				* or equal to ignore_index */
	int64_t ignore_index;
	const char *target_what; /* names the limit in the advice
				  * ("model.vocab_size"); NULL: "the model's classes" */
} weft_batch_limits;

/* Checks b's ids and targets against lim (batch_check.c): the host check
 * that spares the device kernels a wait to read theirs back (weft/kernels.h).
 * Errors: WEFT_ERR_INVALID_ARG naming the batch (index, epoch), the
 * position or row and the value, worded as the CPU kernels word it. */
weft_status weft_batch_check_indices(const weft_host_batch *b, const weft_batch_limits *lim);

/* Something that fills batches. `ctx` is the concrete source. */
typedef struct weft_batch_source {
	void *ctx;
	/* Batches per epoch for this rank. */
	int64_t (*num_batches)(void *ctx);
	/* Called before an epoch's first fill, from the consumer's thread,
	 * while no fill runs (the sampler draws its permutation here). */
	weft_status (*prepare_epoch)(void *ctx, int64_t epoch);
	/* Allocates a batch's buffers for the largest batch. */
	weft_status (*alloc)(void *ctx, weft_host_batch *b);
	/* Fills batch `index` of the prepared epoch. Called from the loader's
	 * thread; never allocates; errors set the thread's last error. */
	weft_status (*fill)(void *ctx, int64_t index, weft_host_batch *b);
} weft_batch_source;

/* ---- classification --------------------------------------------------- */

typedef struct weft_class_source {
	const weft_dataset *ds;   /* borrowed; must outlive the source */
	weft_sampler sampler;
	int64_t batch_size;
	int drop_last;            /* drop the last, short batch of an epoch */
	int64_t epoch;
} weft_class_source;

/* Sets up a classification source over `ds` for this rank: a sampler with
 * (world, rank, shuffle, seed, drop_last) and batches of batch_size. With
 * drop_last, both the sampler drops its uneven tail and the last short
 * batch is dropped (PyTorch's two drop_last flags, set together).
 * Errors: WEFT_ERR_INVALID_ARG for batch_size < 1, a dataset without
 * labels, or a batch size above the rank's share with drop_last (no batch
 * at all); those of weft_sampler_init. */
weft_status weft_class_source_init(weft_class_source *s, const weft_dataset *ds,
				   int64_t batch_size, int64_t world, int64_t rank, int shuffle,
				   uint64_t seed, int drop_last);

/* The source interface of `s` (which must stay in place). */
weft_batch_source weft_class_source_iface(weft_class_source *s);

/* Frees the sampler; NULL is ignored. */
void weft_class_source_free(weft_class_source *s);

/* ---- language model ---------------------------------------------------- */

typedef struct weft_lm_source {
	const weft_tokens *tokens; /* borrowed; must outlive the source */
	int64_t batch_size;        /* B, per rank */
	int64_t block_size;        /* T */
	int64_t world, rank;
	uint64_t seed;
	int random;                /* 1: random offsets; 0: sequential windows */
	int64_t epoch;
	int64_t windows;           /* sequential windows: (n - 1) / T */
	int64_t max_batches;       /* cap on batches per epoch; 0: no cap */
} weft_lm_source;

/* Sets up a language-model source. Random mode: example e of epoch k
 * starts at a uniform offset in [0, n - T - 1] drawn from (seed, k, e).
 * Sequential mode: example e starts at (e mod windows) * T. An epoch is
 * floor(n_windows / (B * world)) batches (at least 1), capped by
 * max_batches when > 0.
 * Errors: WEFT_ERR_INVALID_ARG when the stream holds fewer than T + 1
 * tokens (naming both), or B, T < 1, or rank outside [0, world). */
weft_status weft_lm_source_init(weft_lm_source *s, const weft_tokens *tokens, int64_t batch_size,
				int64_t block_size, int64_t world, int64_t rank, uint64_t seed,
				int random, int64_t max_batches);

weft_batch_source weft_lm_source_iface(weft_lm_source *s);

#endif /* WEFT_DATA_BATCH_H */
