/* IEEE binary16 and bfloat16 <-> float, round to nearest even; shared by
 * core/tensor (weft_convert_host) and the CPU kernels (convert). */
#ifndef WEFT_CPU_HALF_H
#define WEFT_CPU_HALF_H

#include <stdint.h>
#include <string.h>

#include "weft/device.h"

static inline uint32_t half_f32_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

static inline float half_bits_f32(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

static inline uint16_t half_from_f32_bf16(float x)
{
	uint32_t u = half_f32_bits(x);

	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
	return (uint16_t)(u >> 16);
}

static inline float half_bf16_to_f32(uint16_t h)
{
	return half_bits_f32((uint32_t)h << 16);
}

static inline uint16_t half_from_f32_f16(float x)
{
	uint32_t u = half_f32_bits(x);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t absu = u & 0x7fffffffu;
	int32_t exp;
	uint32_t mant, half, rest, halfway;

	if (absu > 0x7f800000u) /* NaN */
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
	{
		uint32_t shift = (uint32_t)(-exp - 14 + 13); /* 14..24 */
		half = mant >> shift;
		rest = mant & ((1u << shift) - 1u);
		halfway = 1u << (shift - 1u);
		if (rest > halfway || (rest == halfway && (half & 1u)))
			half++;
	}
	return (uint16_t)(sign | half);
}

static inline float half_f16_to_f32(uint16_t h)
{
	uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
	uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
	uint32_t mant = (uint32_t)h & 0x3ffu;

	if (exp == 0x1fu)
		return half_bits_f32(sign | 0x7f800000u | (mant << 13));
	if (exp == 0) {
		if (mant == 0)
			return half_bits_f32(sign);
		/* subnormal: mant * 2^-24 */
		float v = (float)mant * (1.0f / 16777216.0f);
		return sign ? -v : v;
	}
	return half_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline float half_load(weft_dtype dt, const void *p, int64_t i)
{
	switch (dt) {
	case WEFT_F16: return half_f16_to_f32(((const uint16_t *)p)[i]);
	case WEFT_BF16: return half_bf16_to_f32(((const uint16_t *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

static inline void half_store(weft_dtype dt, void *p, int64_t i, float v)
{
	switch (dt) {
	case WEFT_F16: ((uint16_t *)p)[i] = half_from_f32_f16(v); break;
	case WEFT_BF16: ((uint16_t *)p)[i] = half_from_f32_bf16(v); break;
	default: ((float *)p)[i] = v; break;
	}
}

/* Converts n elements between F32, F16 and BF16 (dtypes already checked). */
static inline void half_convert(int64_t n, weft_dtype src_dt, const void *src, weft_dtype dst_dt,
				void *dst)
{
	for (int64_t i = 0; i < n; i++)
		half_store(dst_dt, dst, i, half_load(src_dt, src, i));
}

#endif /* WEFT_CPU_HALF_H */
