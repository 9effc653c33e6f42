/* DistributedSampler: permute, pad by repeating (or cut), stride by rank. */
#include <inttypes.h>
#include <string.h>

#include "data/rng.h"
#include "data/sampler.h"
#include "weft/memory.h"

weft_status weft_sampler_init(weft_sampler *s, int64_t n, int64_t world, int64_t rank,
			      int shuffle, uint64_t seed, int drop_last)
{
	memset(s, 0, sizeof(*s));
	if (n < 1 || world < 1 || rank < 0 || rank >= world)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "sampler: need n >= 1, world >= 1 and "
				      "0 <= rank < world; got n %" PRId64 ", world %" PRId64
				      ", rank %" PRId64, n, world, rank);
	if (drop_last && n < world)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "sampler: %" PRId64 " examples over %"
				      PRId64 " ranks with drop_last leaves every rank empty; use "
				      "drop_last: false or fewer ranks", n, world);
	s->n = n;
	s->world = world;
	s->rank = rank;
	s->shuffle = shuffle;
	s->drop_last = drop_last;
	s->seed = seed;
	s->num_samples = drop_last ? n / world : (n + world - 1) / world;
	s->total_size = s->num_samples * world;
	s->epoch = -1;
	s->indices = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)s->num_samples * sizeof(int64_t));
	s->scratch = shuffle ? weft_mem_alloc(WEFT_MEM_OTHER, (size_t)n * sizeof(int64_t)) : NULL;
	if (!s->indices || (shuffle && !s->scratch)) {
		weft_sampler_free(s);
		return weft_error_wrap(WEFT_ERR_NOMEM, "sampler over %" PRId64 " examples", n);
	}
	return WEFT_OK;
}

void weft_sampler_set_epoch(weft_sampler *s, int64_t epoch)
{
	s->epoch = epoch;
	if (s->shuffle) {
		/* Fisher-Yates from the end; the draw for position i is counter i. */
		uint64_t key = s->seed + (uint64_t)epoch;

		for (int64_t i = 0; i < s->n; i++)
			s->scratch[i] = i;
		for (int64_t i = s->n - 1; i > 0; i--) {
			int64_t j = (int64_t)weft_rng_below(key, WEFT_RNG_STREAM_PERMUTE, (uint64_t)i,
							    (uint64_t)i + 1);
			int64_t t = s->scratch[i];

			s->scratch[i] = s->scratch[j];
			s->scratch[j] = t;
		}
	}
	/* padded[k] = order[k mod n] covers both padding (k >= n) and cutting
	 * (total_size <= n); this rank takes k = rank + i * world. */
	for (int64_t i = 0; i < s->num_samples; i++) {
		int64_t k = (s->rank + i * s->world) % s->n;

		s->indices[i] = s->shuffle ? s->scratch[k] : k;
	}
}

void weft_sampler_free(weft_sampler *s)
{
	if (!s)
		return;
	weft_mem_free(s->indices);
	weft_mem_free(s->scratch);
	memset(s, 0, sizeof(*s));
}
