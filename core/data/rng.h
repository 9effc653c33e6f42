/* data/rng.h - the counter-based random numbers the data layer draws.
 *
 * Every draw is a pure function of (seed, stream, counter): no state to
 * save in a checkpoint, any rank or thread can compute any draw, and the
 * same seed gives the same batches. The mixer is SplitMix64's finalizer
 * (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
 * 2014) applied twice.
 */
#ifndef WEFT_DATA_RNG_H
#define WEFT_DATA_RNG_H

#include <stdint.h>

/* Streams keep unrelated uses of one seed apart. */
enum {
	WEFT_RNG_STREAM_PERMUTE = 1, /* sampler shuffles: counter = position */
	WEFT_RNG_STREAM_LM_OFFSET = 2 /* language-model window offsets */
};

static inline uint64_t weft_rng_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* 64 random bits for (seed, stream, counter). */
static inline uint64_t weft_rng_u64(uint64_t seed, uint64_t stream, uint64_t counter)
{
	uint64_t key = weft_rng_mix(seed ^ weft_rng_mix(stream * 0x9e3779b97f4a7c15ull + 1));

	return weft_rng_mix(key + counter * 0x9e3779b97f4a7c15ull);
}

/* A value in [0, n) for n >= 1, by Lemire's multiply-shift; the bias is at
 * most n / 2^64, far below anything a dataset size can show. */
static inline uint64_t weft_rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)weft_rng_u64(seed, stream, counter) * n) >> 64);
}

#endif /* WEFT_DATA_RNG_H */
