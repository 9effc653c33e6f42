/* weft/half.h - IEEE binary16 (F16) and bfloat16 (BF16) <-> float (F32).
 *
 * Header-only (`static inline`, nothing to link): the one copy of these
 * conversions in weft. The CPU kernels (convert, the low-precision matrix
 * product), weft_convert_host and weft_f32_to_f16 & co. (weft/tensor.h),
 * the gloo backend's 16-bit reductions and ddp's compression hooks all
 * use it, so a value rounds the same way wherever it is narrowed.
 *
 * Narrowing is correctly rounded: to nearest, ties to even, as IEEE 754
 * and the hardware converters (x86 F16C, CUDA's __float2half_rn and
 * __float2bfloat16_rn) do:
 * - finite values round to the nearest representable one; F16 subnormals
 *   are produced (not flushed), values at most half the smallest F16
 *   subnormal (2^-25) become a signed zero, and values that round to
 *   65520 or more become a signed infinity (F16's largest finite value
 *   is 65504);
 * - BF16 keeps F32's exponent range, so only rounding can overflow it;
 * - infinities stay infinities, signed zeros keep their sign;
 * - a NaN stays a NaN, quiet, with its sign and the high bits of its
 *   payload (IEEE 754's recommendation, and what F16C does).
 * Widening is exact.
 */
#ifndef WEFT_HALF_H
#define WEFT_HALF_H

#include <stdint.h>
#include <string.h>

#include "weft/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bits of an F32, and the F32 of some bits. */
static inline uint32_t weft_half_f32_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

static inline float weft_half_bits_f32(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

/* F32 -> BF16, round to nearest even. */
static inline uint16_t weft_half_f32_to_bf16(float x)
{
	uint32_t u = weft_half_f32_bits(x);

	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
	return (uint16_t)(u >> 16);
}

/* BF16 -> F32, exact. */
static inline float weft_half_bf16_to_f32(uint16_t h)
{
	return weft_half_bits_f32((uint32_t)h << 16);
}

/* F32 -> F16, round to nearest even (subnormals kept, overflow to inf). */
static inline uint16_t weft_half_f32_to_f16(float x)
{
	uint32_t u = weft_half_f32_bits(x);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t absu = u & 0x7fffffffu;
	int32_t exp;
	uint32_t mant, half, rest, halfway, shift;

	if (absu > 0x7f800000u) /* NaN: quiet, the payload's high 10 bits kept */
		return (uint16_t)(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
	if (absu >= 0x477ff000u) /* rounds to >= 65520: infinity */
		return (uint16_t)(sign | 0x7c00u);
	exp = (int32_t)(absu >> 23) - 127;
	if (exp >= -14) { /* normal half */
		mant = absu & 0x7fffffu;
		half = ((uint32_t)(exp + 15) << 10) | (mant >> 13);
		rest = mant & 0x1fffu;
		halfway = 0x1000u;
		if (rest > halfway || (rest == halfway && (half & 1u)))
			half++; /* a carry into the exponent is still correct */
		return (uint16_t)(sign | half);
	}
	if (exp < -25) /* below half the smallest subnormal: zero */
		return (uint16_t)sign;
	/* subnormal half: value = mant_full * 2^(exp-23), unit 2^-24 */
	mant = (absu & 0x7fffffu) | 0x800000u;
	shift = (uint32_t)(-exp - 14 + 13); /* 14..24 */
	half = mant >> shift;
	rest = mant & ((1u << shift) - 1u);
	halfway = 1u << (shift - 1u);
	if (rest > halfway || (rest == halfway && (half & 1u)))
		half++;
	return (uint16_t)(sign | half);
}

/* F16 -> F32, exact. */
static inline float weft_half_f16_to_f32(uint16_t h)
{
	uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
	uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
	uint32_t mant = (uint32_t)h & 0x3ffu;
	float v;

	if (exp == 0x1fu)
		return weft_half_bits_f32(sign | 0x7f800000u | (mant << 13));
	if (exp == 0) {
		if (mant == 0)
			return weft_half_bits_f32(sign);
		v = (float)mant * (1.0f / 16777216.0f); /* subnormal: mant * 2^-24 */
		return sign ? -v : v;
	}
	return weft_half_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* Element i of an array of dtype dt (F16, BF16; anything else is read as
 * F32) as a float. */
static inline float weft_half_load(weft_dtype dt, const void *p, int64_t i)
{
	switch (dt) {
	case WEFT_F16: return weft_half_f16_to_f32(((const uint16_t *)p)[i]);
	case WEFT_BF16: return weft_half_bf16_to_f32(((const uint16_t *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

/* Stores v as element i of an array of dtype dt (F16, BF16, else F32),
 * rounded to nearest even. */
static inline void weft_half_store(weft_dtype dt, void *p, int64_t i, float v)
{
	switch (dt) {
	case WEFT_F16: ((uint16_t *)p)[i] = weft_half_f32_to_f16(v); break;
	case WEFT_BF16: ((uint16_t *)p)[i] = weft_half_f32_to_bf16(v); break;
	default: ((float *)p)[i] = v; break;
	}
}

/* Converts n elements between F32, F16 and BF16 (src_dt and dst_dt among
 * them; the caller checks), rounding to nearest even. src and dst do not
 * overlap. Host memory; never fails. */
static inline void weft_half_convert(int64_t n, weft_dtype src_dt, const void *src,
				     weft_dtype dst_dt, void *dst)
{
	const float *f = (const float *)src;
	const uint16_t *h = (const uint16_t *)src;
	float *fo = (float *)dst;
	uint16_t *ho = (uint16_t *)dst;

	/* the pairs of mixed precision and 16-bit comm, as plain loops */
	if (src_dt == WEFT_F32 && dst_dt == WEFT_BF16) {
		for (int64_t i = 0; i < n; i++)
			ho[i] = weft_half_f32_to_bf16(f[i]);
	} else if (src_dt == WEFT_F32 && dst_dt == WEFT_F16) {
		for (int64_t i = 0; i < n; i++)
			ho[i] = weft_half_f32_to_f16(f[i]);
	} else if (src_dt == WEFT_BF16 && dst_dt == WEFT_F32) {
		for (int64_t i = 0; i < n; i++)
			fo[i] = weft_half_bf16_to_f32(h[i]);
	} else if (src_dt == WEFT_F16 && dst_dt == WEFT_F32) {
		for (int64_t i = 0; i < n; i++)
			fo[i] = weft_half_f16_to_f32(h[i]);
	} else {
		for (int64_t i = 0; i < n; i++)
			weft_half_store(dst_dt, dst, i, weft_half_load(src_dt, src, i));
	}
}

#ifdef __cplusplus
}
#endif
#endif /* WEFT_HALF_H */
