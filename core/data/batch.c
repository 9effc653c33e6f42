/* The classification and language-model batch sources. */
#include <inttypes.h>
#include <string.h>

#include "data/batch.h"
#include "data/rng.h"
#include "weft/memory.h"

void weft_batch_free(weft_host_batch *b)
{
	if (!b)
		return;
	weft_mem_free(b->x.data);
	weft_mem_free(b->y.data);
	memset(b, 0, sizeof(*b));
}

static weft_status alloc_array(weft_host_array *a, weft_host_dtype dt, size_t bytes)
{
	a->dtype = dt;
	a->capacity = bytes;
	a->data = weft_mem_alloc(WEFT_MEM_OTHER, bytes);
	return a->data ? WEFT_OK : weft_error_wrap(WEFT_ERR_NOMEM, "allocating a batch");
}

/* ---- classification ---------------------------------------------------- */

weft_status weft_class_source_init(weft_class_source *s, const weft_dataset *ds,
				   int64_t batch_size, int64_t world, int64_t rank, int shuffle,
				   uint64_t seed, int drop_last)
{
	weft_status st;

	memset(s, 0, sizeof(*s));
	if (batch_size < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "batch_size must be >= 1, got %" PRId64,
				      batch_size);
	if (!ds->y)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "dataset '%s' has no labels; a "
				      "classification source needs them", ds->source);
	st = weft_sampler_init(&s->sampler, ds->n, world, rank, shuffle, seed, drop_last);
	if (st)
		return weft_error_wrap(st, "dataset '%s'", ds->source);
	if (drop_last && s->sampler.num_samples < batch_size) {
		weft_sampler_free(&s->sampler);
		return weft_error_set(WEFT_ERR_INVALID_ARG, "batch_size %" PRId64 " is larger than "
				      "this rank's %" PRId64 " examples of '%s' and drop_last is "
				      "set: no batch would remain; lower batch_size",
				      batch_size, s->sampler.num_samples, ds->source);
	}
	s->ds = ds;
	s->batch_size = batch_size;
	s->drop_last = drop_last;
	s->epoch = -1;
	return WEFT_OK;
}

void weft_class_source_free(weft_class_source *s)
{
	if (!s)
		return;
	weft_sampler_free(&s->sampler);
}

static int64_t class_num_batches(void *ctx)
{
	weft_class_source *s = ctx;
	int64_t n = s->sampler.num_samples;

	return s->drop_last ? n / s->batch_size : (n + s->batch_size - 1) / s->batch_size;
}

static weft_status class_prepare(void *ctx, int64_t epoch)
{
	weft_class_source *s = ctx;

	if (s->sampler.epoch != epoch)
		weft_sampler_set_epoch(&s->sampler, epoch);
	s->epoch = epoch;
	return WEFT_OK;
}

static weft_status class_alloc(void *ctx, weft_host_batch *b)
{
	weft_class_source *s = ctx;
	size_t rows = (size_t)s->batch_size;
	weft_status st;

	memset(b, 0, sizeof(*b));
	st = alloc_array(&b->x, WEFT_HOST_F32, rows * (size_t)s->ds->example_numel * sizeof(float));
	if (!st)
		st = alloc_array(&b->y, WEFT_HOST_I32, rows * sizeof(int32_t));
	if (st)
		weft_batch_free(b);
	return st;
}

static weft_status class_fill(void *ctx, int64_t index, weft_host_batch *b)
{
	weft_class_source *s = ctx;
	const weft_dataset *ds = s->ds;
	int64_t first = index * s->batch_size, rows = s->batch_size;
	size_t ex = (size_t)ds->example_numel;
	float *x = b->x.data;
	int32_t *y = b->y.data;

	if (index < 0 || first >= s->sampler.num_samples)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "batch %" PRId64 " is past the end of "
				      "the epoch (%" PRId64 " batches)", index,
				      class_num_batches(ctx));
	if (rows > s->sampler.num_samples - first)
		rows = s->sampler.num_samples - first;
	for (int64_t r = 0; r < rows; r++) {
		int64_t i = s->sampler.indices[first + r];

		memcpy(x + (size_t)r * ex, ds->x + (size_t)i * ex, ex * sizeof(float));
		y[r] = ds->y[i];
	}
	b->epoch = s->epoch;
	b->index = index;
	b->rows = rows;
	b->x.ndim = ds->ndim + 1;
	b->x.shape[0] = rows;
	for (int d = 0; d < ds->ndim; d++)
		b->x.shape[d + 1] = ds->shape[d];
	b->y.ndim = 1;
	b->y.shape[0] = rows;
	return WEFT_OK;
}

weft_batch_source weft_class_source_iface(weft_class_source *s)
{
	return (weft_batch_source){ .ctx = s, .num_batches = class_num_batches,
				    .prepare_epoch = class_prepare, .alloc = class_alloc,
				    .fill = class_fill };
}

/* ---- language model ------------------------------------------------------ */

weft_status weft_lm_source_init(weft_lm_source *s, const weft_tokens *tokens, int64_t batch_size,
				int64_t block_size, int64_t world, int64_t rank, uint64_t seed,
				int random, int64_t max_batches)
{
	memset(s, 0, sizeof(*s));
	if (batch_size < 1 || block_size < 1 || world < 1 || rank < 0 || rank >= world)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "language-model batches need "
				      "batch_size >= 1, block_size >= 1, 0 <= rank < world; got %"
				      PRId64 ", %" PRId64 ", rank %" PRId64 " of %" PRId64,
				      batch_size, block_size, rank, world);
	if (tokens->n < block_size + 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "token stream '%s' holds %" PRId64
				      " tokens, fewer than block_size + 1 = %" PRId64 "; lower "
				      "block_size or add text", tokens->source, tokens->n,
				      block_size + 1);
	*s = (weft_lm_source){ .tokens = tokens, .batch_size = batch_size,
			       .block_size = block_size, .world = world, .rank = rank,
			       .seed = seed, .random = random, .epoch = -1,
			       .windows = (tokens->n - 1) / block_size,
			       .max_batches = max_batches };
	return WEFT_OK;
}

static int64_t lm_num_batches(void *ctx)
{
	weft_lm_source *s = ctx;
	int64_t n = s->windows / (s->batch_size * s->world);

	if (n < 1)
		n = 1;
	if (s->max_batches > 0 && n > s->max_batches)
		n = s->max_batches;
	return n;
}

static weft_status lm_prepare(void *ctx, int64_t epoch)
{
	((weft_lm_source *)ctx)->epoch = epoch;
	return WEFT_OK;
}

static weft_status lm_alloc(void *ctx, weft_host_batch *b)
{
	weft_lm_source *s = ctx;
	size_t bytes = (size_t)(s->batch_size * s->block_size) * sizeof(int32_t);
	weft_status st;

	memset(b, 0, sizeof(*b));
	st = alloc_array(&b->x, WEFT_HOST_I32, bytes);
	if (!st)
		st = alloc_array(&b->y, WEFT_HOST_I32, bytes);
	if (st)
		weft_batch_free(b);
	return st;
}

static weft_status lm_fill(void *ctx, int64_t index, weft_host_batch *b)
{
	weft_lm_source *s = ctx;
	int64_t B = s->batch_size, T = s->block_size, span = s->tokens->n - T;
	int32_t *x = b->x.data, *y = b->y.data;

	if (index < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "batch index %" PRId64 " < 0", index);
	for (int64_t r = 0; r < B; r++) {
		/* Global example number: rank r's batch i at global batch size
		 * world * B. */
		int64_t e = (index * s->world + s->rank) * B + r, off;

		if (s->random)
			off = (int64_t)weft_rng_below(s->seed + (uint64_t)s->epoch * 0x100000001b3ull,
						      WEFT_RNG_STREAM_LM_OFFSET, (uint64_t)e,
						      (uint64_t)span);
		else
			off = (e % s->windows) * T;
		for (int64_t t = 0; t < T; t++) {
			x[r * T + t] = (int32_t)weft_tokens_at(s->tokens, off + t);
			y[r * T + t] = (int32_t)weft_tokens_at(s->tokens, off + t + 1);
		}
	}
	b->epoch = s->epoch;
	b->index = index;
	b->rows = B;
	b->x.ndim = b->y.ndim = 2;
	b->x.shape[0] = b->y.shape[0] = B;
	b->x.shape[1] = b->y.shape[1] = T;
	return WEFT_OK;
}

weft_batch_source weft_lm_source_iface(weft_lm_source *s)
{
	return (weft_batch_source){ .ctx = s, .num_batches = lm_num_batches,
				    .prepare_epoch = lm_prepare, .alloc = lm_alloc,
				    .fill = lm_fill };
}
