/* bf16 and f16 <-> f32 conversions (round to nearest even), for reducing
 * 16-bit floats in f32. */
#ifndef WEFT_GLOO_HALF_H
#define WEFT_GLOO_HALF_H

#include <stdint.h>
#include <string.h>

static inline float weft_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline uint16_t weft_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40); /* quiet NaN, sign kept */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float weft_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	uint32_t u;
	float f;

	if (exp == 0x1f) {
		u = sign | 0x7f800000u | (man << 13); /* inf or NaN */
	} else if (exp != 0) {
		u = sign | ((exp + 112u) << 23) | (man << 13);
	} else if (man == 0) {
		u = sign;
	} else { /* subnormal: normalise */
		int e = -1;

		do {
			e++;
			man <<= 1;
		} while (!(man & 0x400u));
		u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
	}
	memcpy(&f, &u, 4);
	return f;
}

static inline uint16_t weft_f32_to_f16(float f)
{
	uint32_t u, sign, absu;

	memcpy(&u, &f, 4);
	sign = (u >> 16) & 0x8000u;
	absu = u & 0x7fffffffu;
	if (absu > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u); /* NaN */
	if (absu >= 0x477ff000u)
		return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
	if (absu < 0x38800000u) { /* below the smallest normal: subnormal or 0 */
		uint32_t shift, man, rounded, rem, half;

		if (absu < 0x33000000u)
			return (uint16_t)sign; /* at most half the smallest subnormal */
		shift = 126u - (absu >> 23); /* 14..24 */
		man = (absu & 0x7fffffu) | 0x800000u;
		rounded = man >> shift;
		rem = man & ((1u << shift) - 1u);
		half = 1u << (shift - 1u);
		if (rem > half || (rem == half && (rounded & 1u)))
			rounded++;
		return (uint16_t)(sign | rounded);
	}
	/* normal: rebias and round to 10 mantissa bits */
	absu += 0xfffu + ((absu >> 13) & 1u);
	absu -= 112u << 23;
	return (uint16_t)(sign | (absu >> 13));
}

#endif /* WEFT_GLOO_HALF_H */
