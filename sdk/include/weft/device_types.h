/* weft/device_types.h - dtypes, the dropout RNG, device names: the
 * vocabulary weft/kernels.h (the kernel tables) and weft/device.h (device
 * memory, arenas, CPU threads) share. Include weft/device.h, which
 * includes this. */
#ifndef WEFT_DEVICE_TYPES_H
#define WEFT_DEVICE_TYPES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "weft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes ----------------------------------------------------------- */

/* Element types. Values are part of the ABI: only ever appended. */
typedef enum weft_dtype {
	WEFT_F32 = 0,
	WEFT_F16 = 1,
	WEFT_BF16 = 2,
	WEFT_I32 = 3,
	WEFT_I64 = 4,
	WEFT_U8 = 5,
	WEFT_U16 = 6,
	WEFT_DTYPE_COUNT = 7
} weft_dtype;

/* Bit for a dtype in a dtype mask (weft_kernel_table.float_dtypes). */
#define WEFT_DTYPE_BIT(dt) (1u << (unsigned)(dt))

/* ---- counter-based RNG for dropout ------------------------------------ */

/* A 64-bit mix of (key, counter) (splitmix64 finalizer): stateless, so any
 * element's random number is computed from its global index alone, on any
 * device and any rank. */
static inline uint64_t weft_rng_hash(uint64_t key, uint64_t counter)
{
	uint64_t z = key ^ (counter * 0x9E3779B97F4A7C15ull);

	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	z = (z ^ (z >> 33)) * 0xFF51AFD7ED558CCDull; /* second round: counters differ in low bits only */
	return z ^ (z >> 33);
}

/* A uniform float in [0, 1) from (key, counter), with 24 random bits. */
static inline float weft_rng_uniform(uint64_t key, uint64_t counter)
{
	return (float)(weft_rng_hash(key, counter) >> 40) * (1.0f / 16777216.0f);
}

/* Whether dropout with probability p keeps element `counter`. */
static inline int weft_dropout_keep(uint64_t key, uint64_t counter, float p)
{
	return weft_rng_uniform(key, counter) >= p;
}

/* The key of one dropout call: from the run's seed, the step, and the
 * call's position in that step's forward (0, 1, ...). Every rank derives the
 * same key for the same call. */
static inline uint64_t weft_dropout_key(uint64_t seed, uint64_t step, uint64_t call)
{
	return weft_rng_hash(weft_rng_hash(seed, step), call);
}

/* ---- devices ---------------------------------------------------------- */

/* Device kinds. Values are part of the ABI. */
typedef enum weft_device_type {
	WEFT_DEVICE_CPU = 0,
	WEFT_DEVICE_CUDA = 1,
	WEFT_DEVICE_TYPE_COUNT = 2
} weft_device_type;

/* A device: kind and ordinal (always 0 for the CPU). Passed by value. */
typedef struct weft_device {
	int32_t type;  /* weft_device_type */
	int32_t index; /* CUDA ordinal; 0 for cpu */
} weft_device;

/* The CPU device, for initializers: `weft_device d = WEFT_CPU;` */
#define WEFT_CPU ((weft_device){ .type = WEFT_DEVICE_CPU, .index = 0 })

/* Parses "cpu", "cuda" (= cuda:0) or "cuda:N" into *out.
 * Errors: WEFT_ERR_INVALID_ARG quoting the text and listing the accepted
 * forms. Does not check that the device exists. */
WEFT_API weft_status weft_device_parse(const char *text, weft_device *out);

/* Writes "cpu" or "cuda:N" into buf (at most len bytes, NUL-terminated)
 * and returns buf. */
WEFT_API const char *weft_device_str(weft_device dev, char *buf, size_t len);

/* 1 when both name the same device, else 0. */
static inline int weft_device_equal(weft_device a, weft_device b)
{
	return a.type == b.type && a.index == b.index;
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_DEVICE_TYPES_H */
