/* Sampling from a language model: through the transformer's KV cache
 * (nn/gpt_decode.h) where the model has one, else through its forward over
 * the whole window for every token. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "generate/generate.h"
#include "nn/gpt_decode.h"
#include "weft/autograd.h"
#include "weft/tensor.h"

/* splitmix64: a seeded stream of 64-bit values. */
static uint64_t next_u64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
	return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

static uint32_t argmax(const float *x, int64_t v)
{
	int64_t best = 0;

	for (int64_t i = 1; i < v; i++)
		if (x[i] > x[best])
			best = i;
	return (uint32_t)best;
}

size_t weft_gen_scratch_bytes(int64_t v)
{
	return (size_t)v * (sizeof(float) * 2 + sizeof(int32_t));
}

/* Ids by their key, largest first, lower id first on ties (qsort_r). */
static int by_prob_desc(const void *a, const void *b, void *keys)
{
	const float *k = keys;
	float x = k[*(const int32_t *)a], y = k[*(const int32_t *)b];

	if (x != y)
		return x > y ? -1 : 1;
	return *(const int32_t *)a < *(const int32_t *)b ? -1 : 1;
}

uint32_t weft_gen_sample(const float *logits, int64_t v, const weft_gen_options *o,
			 uint64_t *rng, void *scratch)
{
	float *p = scratch, *tmp = p + v;
	int32_t *order = (int32_t *)(tmp + v);
	double sum = 0, r, acc = 0;
	float mx, kth = -INFINITY;
	int64_t keep = v;

	if (o->temperature <= 0 || o->top_k == 1)
		return argmax(logits, v);
	if (o->top_k > 0 && o->top_k < v) {
		/* the k-th largest logit: ids below it are out (ties kept) */
		memcpy(tmp, logits, (size_t)v * sizeof(float));
		for (int64_t i = 0; i < v; i++)
			order[i] = (int32_t)i;
		qsort_r(order, (size_t)v, sizeof(*order), by_prob_desc, tmp);
		kth = tmp[order[o->top_k - 1]];
	}
	mx = logits[argmax(logits, v)];
	for (int64_t i = 0; i < v; i++) {
		p[i] = logits[i] >= kth ? (float)exp((double)(logits[i] - mx) / o->temperature) : 0;
		sum += p[i];
	}
	for (int64_t i = 0; i < v; i++)
		p[i] = (float)(p[i] / sum);
	for (int64_t i = 0; i < v; i++)
		order[i] = (int32_t)i;
	if (o->top_p > 0 && o->top_p < 1) {
		double cum = 0;

		qsort_r(order, (size_t)v, sizeof(*order), by_prob_desc, p);
		for (keep = 0; keep < v; keep++) {
			cum += p[order[keep]];
			if (cum >= o->top_p) {
				keep++;
				break;
			}
		}
		if (keep > v)
			keep = v;
	}
	sum = 0;
	for (int64_t i = 0; i < keep; i++)
		sum += p[order[i]];
	r = uniform(rng) * sum;
	for (int64_t i = 0; i < keep; i++) {
		acc += p[order[i]];
		if (r < acc && p[order[i]] > 0)
			return (uint32_t)order[i];
	}
	/* rounding left r at the very top: the last id with any probability */
	for (int64_t i = keep - 1; i >= 0; i--)
		if (p[order[i]] > 0)
			return (uint32_t)order[i];
	return argmax(logits, v);
}

static weft_status push(weft_token_ids *out, uint32_t id)
{
	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 64;
		uint32_t *p = realloc(out->ids, cap * sizeof(*p));

		if (!p)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory for %zu generated ids",
					      cap);
		out->ids = p;
		out->cap = cap;
	}
	out->ids[out->n++] = id;
	return WEFT_OK;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static weft_status check_options(const weft_gen_options *o, size_t n)
{
	if (n == 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "generation needs a prompt of at least "
				      "one token");
	if (o->max_new_tokens < 0 || o->context < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "max_new_tokens must be >= 0 and the "
				      "context >= 1, got %lld and %lld",
				      (long long)o->max_new_tokens, (long long)o->context);
	if (!(o->temperature >= 0) || isinf(o->temperature))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "temperature must be >= 0 (0: "
				      "greedy), got %g", o->temperature);
	if (o->top_k < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "top_k must be >= 0 (0: no limit), "
				      "got %lld", (long long)o->top_k);
	if (!(o->top_p > 0 && o->top_p <= 1))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "top_p must be in (0, 1], got %g",
				      o->top_p);
	return WEFT_OK;
}

/* The last row of (1, T, V) logits, as float on the host. */
static weft_status last_row(const weft_tensor *logits, const float **row, int64_t *v,
			    float **buf, int64_t *buf_v)
{
	int64_t t, vv;
	weft_tensor *view = NULL;
	weft_status st;
	char shape[64];

	if (logits->ndim != 3 || logits->shape[0] != 1)
		return weft_error_set(WEFT_ERR_SHAPE, "generation needs logits (1, T, V) from the "
				      "model's forward, got %s",
				      weft_shape_str(logits, shape, sizeof(shape)));
	t = logits->shape[1];
	vv = logits->shape[2];
	if (vv > *buf_v) {
		float *p = realloc(*buf, (size_t)vv * sizeof(float));

		if (!p)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory for %lld logits",
					      (long long)vv);
		*buf = p;
		*buf_v = vv;
	}
	st = weft_tensor_view(logits, (t - 1) * vv, 1, &vv, &view);
	if (st)
		return st;
	if (logits->dtype == WEFT_F32) {
		st = weft_tensor_copy_to_host(view, *buf, (size_t)vv * sizeof(float));
	} else {
		void *raw = malloc(weft_tensor_nbytes(view));

		st = raw ? weft_tensor_copy_to_host(view, raw, weft_tensor_nbytes(view))
			 : weft_error_set(WEFT_ERR_NOMEM, "out of memory for logits");
		if (!st)
			st = weft_convert_host(vv, (weft_dtype)logits->dtype, raw, WEFT_F32, *buf);
		free(raw);
	}
	weft_tensor_free(view);
	*row = *buf;
	*v = vv;
	return st;
}

weft_status weft_generate(weft_model *m, weft_ctx *ctx, const uint32_t *prompt, size_t n,
			  const weft_gen_options *o, weft_token_ids *out, weft_gen_stats *stats)
{
	weft_token_ids seq = { 0 };
	int32_t *window = NULL;
	float *row_buf = NULL;
	const float *row = NULL;
	int64_t row_cap = 0, v = 0;
	void *scratch = NULL;
	size_t scratch_v = 0;
	uint64_t rng = o->seed;
	nn_kv_cache *cache = NULL;
	size_t start = 0, fed;
	int grad, training;
	double t0 = now();
	weft_status st;

	memset(stats, 0, sizeof(*stats));
	st = check_options(o, n);
	if (st)
		return st;
	for (size_t i = 0; i < n && !st; i++)
		st = push(&seq, prompt[i]);
	window = malloc((size_t)o->context * sizeof(*window));
	if (!st && !window)
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory for a %lld-token window",
				    (long long)o->context);
	/* the cache holds the longest window this generation reaches */
	if (!st && !o->no_kv_cache && nn_gpt_decode_supported(m) &&
	    o->context <= weft_model_gpt_config(m)->block_size)
		st = nn_kv_cache_create(m, (int64_t)n + o->max_new_tokens < o->context ?
					(int64_t)n + o->max_new_tokens : o->context, &cache);
	if (st)
		goto out_free;
	stats->kv_cache = cache != NULL;
	grad = weft_ctx_set_grad_enabled(ctx, 0);
	training = weft_ctx_set_training(ctx, 0);
	for (int64_t k = 0; k < o->max_new_tokens; k++) {
		size_t w = seq.n < (size_t)o->context ? seq.n : (size_t)o->context;
		int64_t shape[2] = { 1, (int64_t)w };
		weft_tensor x, *logits;
		uint32_t id;

		weft_ctx_step_begin(ctx);
		if (cache) {
			/* the cache holds seq[start ...] at positions 0 ...: feed
			 * what the window adds, or, once the window has slid (every
			 * position moved), the whole window again */
			if (start != seq.n - w) {
				nn_kv_cache_reset(cache);
				start = seq.n - w;
			}
			fed = start + (size_t)nn_kv_cache_len(cache);
			st = nn_gpt_decode(m, ctx, cache, seq.ids + fed, seq.n - fed, &row, &v);
		} else {
			for (size_t i = 0; i < w; i++)
				window[i] = (int32_t)seq.ids[seq.n - w + i];
			st = weft_tensor_init(&x, WEFT_I32, 2, shape, WEFT_CPU, window);
			if (!st)
				st = weft_model_forward(m, ctx, &x, &logits);
			if (!st)
				st = last_row(logits, &row, &v, &row_buf, &row_cap);
		}
		if (st)
			break;
		if ((size_t)v > scratch_v) {
			free(scratch);
			scratch = malloc(weft_gen_scratch_bytes(v));
			scratch_v = (size_t)v;
			if (!scratch) {
				st = weft_error_set(WEFT_ERR_NOMEM, "out of memory sampling");
				break;
			}
		}
		id = weft_gen_sample(row, v, o, &rng, scratch);
		st = push(&seq, id);
		if (!st)
			st = push(out, id);
		if (st)
			break;
		stats->new_tokens++;
		if (o->eos_id >= 0 && id == (uint32_t)o->eos_id) {
			stats->stopped_at_eos = 1;
			if (o->on_token)
				o->on_token(o->arg, id);
			break;
		}
		if (o->on_token && o->on_token(o->arg, id))
			break;
	}
	weft_ctx_set_grad_enabled(ctx, grad);
	weft_ctx_set_training(ctx, training);
out_free:
	stats->seconds = now() - t0;
	free(seq.ids);
	free(window);
	free(row_buf);
	free(scratch);
	nn_kv_cache_free(cache);
	return st;
}
