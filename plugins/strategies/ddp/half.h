/* bf16 and f16 from/to f32 for the ddp compression hook (round to nearest
 * even, NaN kept NaN, overflow to infinity). The plugin cannot call the
 * core's converters (it links nothing of the core), so it has its own. */
#ifndef WEFT_STRATEGY_HALF_H
#define WEFT_STRATEGY_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ddp_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float ddp_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline uint16_t ddp_to_bf16(float f)
{
	uint32_t u = ddp_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float ddp_from_bf16(uint16_t h)
{
	return ddp_bits_f32((uint32_t)h << 16);
}

static inline uint16_t ddp_to_f16(float f)
{
	uint32_t u = ddp_f32_bits(f), sign = (u >> 16) & 0x8000u, mant;
	int32_t exp = (int32_t)((u >> 23) & 0xffu);

	u &= 0x7fffffffu;
	if (u > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u);
	if (u >= 0x477ff000u) /* rounds to >= 65520: infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (exp < 113) { /* subnormal half (or zero) */
		uint32_t shift, half, rem;

		if (exp < 102)
			return (uint16_t)sign;
		mant = (u & 0x7fffffu) | 0x800000u;
		shift = (uint32_t)(126 - exp);
		half = mant >> shift;
		rem = mant & ((1u << shift) - 1u);
		if (rem > (1u << (shift - 1)) || (rem == (1u << (shift - 1)) && (half & 1u)))
			half++;
		return (uint16_t)(sign | half);
	}
	mant = u & 0x7fffffu;
	{
		uint32_t h = ((uint32_t)(exp - 112) << 10) | (mant >> 13);
		uint32_t rem = mant & 0x1fffu;

		if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
}

static inline float ddp_from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;

	if (exp == 0x1f)
		return ddp_bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp)
		return ddp_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
	/* subnormal: man * 2^-24 */
	return (sign ? -1.0f : 1.0f) * (float)man * (1.0f / 16777216.0f);
}

/* h[i] = g[i] in bf16 (bf16 = 1) or f16, i < n. */
static inline void ddp_pack_half(const float *g, uint16_t *h, int64_t n, int bf16)
{
	if (bf16)
		for (int64_t i = 0; i < n; i++)
			h[i] = ddp_to_bf16(g[i]);
	else
		for (int64_t i = 0; i < n; i++)
			h[i] = ddp_to_f16(g[i]);
}

/* g[i] = h[i] from bf16 (bf16 = 1) or f16, i < n. */
static inline void ddp_unpack_half(const uint16_t *h, float *g, int64_t n, int bf16)
{
	if (bf16)
		for (int64_t i = 0; i < n; i++)
			g[i] = ddp_from_bf16(h[i]);
	else
		for (int64_t i = 0; i < n; i++)
			g[i] = ddp_from_f16(h[i]);
}

#endif
