/* data/sampler.h - PyTorch DistributedSampler's semantics, in C.
 *
 * For N examples, `world` ranks, this rank `rank`:
 *   num_samples = drop_last ? floor(N / world) : ceil(N / world)
 *   total_size  = num_samples * world
 *   order       = shuffle ? a permutation of 0..N-1 drawn from seed + epoch
 *                         : 0, 1, ..., N-1
 *   padded      = order repeated from its start until total_size long
 *                 (drop_last: order cut to total_size)
 *   this rank   = padded[rank], padded[rank + world], ... (num_samples)
 * exactly as torch.utils.data.DistributedSampler does. One difference: the
 * permutation comes from weft's own counter-based generator (data/rng.h),
 * not torch's Mersenne Twister, so shuffled orders do not match PyTorch's
 * index for index; everything else (sizes, padding, striding, set_epoch,
 * determinism) does.
 *
 * Position: an epoch and the number of this rank's samples already
 * consumed in it; a checkpoint saves it and resume continues from the next
 * sample, so a run resumed mid-epoch sees exactly the batches it would
 * have seen.
 */
#ifndef WEFT_DATA_SAMPLER_H
#define WEFT_DATA_SAMPLER_H

#include <stdint.h>

#include "weft/status.h"

typedef struct weft_sampler {
	int64_t n;            /* dataset size */
	int64_t world, rank;
	int shuffle, drop_last;
	uint64_t seed;
	int64_t num_samples;  /* this rank's samples per epoch */
	int64_t total_size;   /* num_samples * world */
	int64_t epoch;        /* the epoch `indices` were drawn for; -1 before set_epoch */
	int64_t *indices;     /* this rank's num_samples indices (owned) */
	int64_t *scratch;     /* n entries, for the permutation (owned) */
} weft_sampler;

/* The position to save in a checkpoint. */
typedef struct weft_sampler_state {
	int64_t epoch;
	int64_t index;        /* samples of this rank already consumed in the epoch */
} weft_sampler_state;

/* Sets up a sampler (buffers sized here, none later).
 * Errors: WEFT_ERR_INVALID_ARG for n < 1, world < 1, rank outside
 * [0, world), or drop_last with n < world (every rank would get nothing),
 * each naming the values; WEFT_ERR_NOMEM. */
weft_status weft_sampler_init(weft_sampler *s, int64_t n, int64_t world, int64_t rank,
			      int shuffle, uint64_t seed, int drop_last);

/* Draws this rank's indices for `epoch` (O(n), no allocation). */
void weft_sampler_set_epoch(weft_sampler *s, int64_t epoch);

/* Frees the buffers; NULL is ignored. */
void weft_sampler_free(weft_sampler *s);

#endif /* WEFT_DATA_SAMPLER_H */
