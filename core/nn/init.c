/* Deterministic initialisation: element j of parameter P comes from
 * weft's counter-based RNG keyed by (seed, FNV-1a of P's name, j), so it
 * does not depend on the device, the stage or the shard that holds it. */
#include <math.h>
#include <stdlib.h>

#include "nn/nn_impl.h"

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

typedef float (*draw_fn)(uint64_t key, int64_t j, float arg);

static float draw_normal(uint64_t key, int64_t j, float std)
{
	/* Box-Muller on two 24-bit uniforms; 1 - u is in (0, 1], so log is finite */
	double u1 = 1.0 - (double)weft_rng_uniform(key, 2 * (uint64_t)j);
	double u2 = (double)weft_rng_uniform(key, 2 * (uint64_t)j + 1);

	return (float)((double)std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static float draw_uniform(uint64_t key, int64_t j, float bound)
{
	return bound * (2.0f * weft_rng_uniform(key, (uint64_t)j) - 1.0f);
}

static float draw_const(uint64_t key, int64_t j, float value)
{
	(void)key;
	(void)j;
	return value;
}

static weft_status fill(weft_tensor *t, uint64_t seed, draw_fn fn, float arg)
{
	int64_t n = weft_tensor_numel(t);
	uint64_t key = weft_rng_hash(seed, name_hash(t->name));
	float *host;
	weft_status st;

	host = malloc((size_t)(n ? n : 1) * sizeof(float));
	if (!host)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory initialising '%s'", t->name);
	for (int64_t j = 0; j < n; j++)
		host[j] = fn(key, j, arg);
	st = weft_tensor_copy_from_host(t, host, (size_t)n * sizeof(float));
	free(host);
	return st;
}

weft_status nn_init_normal(weft_tensor *t, uint64_t seed, float std)
{
	return fill(t, seed, draw_normal, std);
}

weft_status nn_init_uniform(weft_tensor *t, uint64_t seed, float bound)
{
	return fill(t, seed, draw_uniform, bound);
}

weft_status nn_init_const(weft_tensor *t, float value)
{
	return fill(t, 0, draw_const, value);
}
