/* weft/half.h, the one copy of weft's 16-bit float conversions, rounds
 * correctly. Tolerance: none, every check is on exact bits.
 *
 * - Widening and narrowing back gives every F16 and BF16 value's own bits
 *   (NaNs: a quiet NaN with the same sign and payload).
 * - Round to nearest, ties to even, at every rounding boundary: for each
 *   pair of neighbouring finite values a < b, their midpoint (exact in
 *   F32) narrows to the even one of the two, and the F32 just below and
 *   just above it to a and to b. With monotone narrowing that is the whole
 *   of correct rounding; the overflow boundary (65520 for F16) and the
 *   subnormal and zero boundaries are among the pairs.
 * - F32 -> F16 equals GCC's _Float16 conversion (libgcc's soft-float,
 *   correctly rounded, NaN payloads kept as IEEE 754 recommends) on
 *   every 1021st F32 bit pattern (4.2 million, NaNs among them).
 * - A NaN keeps the high bits of its payload: 0x7fa02000 gives F16 0x7f01
 *   (what x86 F16C's vcvtps2ph and _Float16 give). Of the three copies
 *   this header replaced, the gloo backend's and ddp's gave 0x7e00 for
 *   every NaN, dropping the payload; the CPU kernels' kept it, and that is
 *   the behaviour kept here.
 * - libweft's exported weft_f32_to_f16 & co. (weft/tensor.h) are these
 *   functions. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "weft/half.h"
#include "weft/tensor.h"
#include "weft_test.h"

typedef uint16_t (*narrow_fn)(float);
typedef float (*widen_fn)(uint16_t);

static int is_nan16(uint16_t h, int bf16)
{
	return bf16 ? (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) : (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
}

/* Every value round-trips; returns the mismatches, printing the first. */
static long round_trip(const char *what, narrow_fn narrow, widen_fn widen, int bf16)
{
	long bad = 0;

	for (uint32_t h = 0; h < 65536; h++) {
		uint16_t want = (uint16_t)h, got = narrow(widen((uint16_t)h));

		if (is_nan16(want, bf16))
			want |= bf16 ? 0x40u : 0x200u; /* quieted, payload kept */
		if (got != want && !bad++)
			fprintf(stderr, "%s: 0x%04x widens and narrows to 0x%04x\n", what, h, got);
	}
	return bad;
}

/* Ties to even and both sides of every midpoint, over the positive and
 * negative finite values. */
static long boundaries(const char *what, narrow_fn narrow, widen_fn widen, uint16_t max_finite)
{
	long bad = 0;

	for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
		for (uint32_t m = 0; m <= max_finite; m++) {
			uint16_t a = (uint16_t)(sign | m), b = (uint16_t)(sign | (m + 1));
			float fa = widen(a), fb = m < max_finite ? widen(b) : 0.0f, mid;
			uint16_t even, below, above;

			if (m == max_finite) { /* the overflow boundary: the next would be 2^k */
				fb = sign ? -INFINITY : INFINITY;
				mid = fa + (fa - widen((uint16_t)(sign | (m - 1)))) / 2;
			} else {
				mid = fa + (fb - fa) / 2; /* exact: 16-bit values have few bits */
			}
			even = m == max_finite ? b : (m & 1u) ? b : a;
			below = narrow(nextafterf(mid, fa));
			above = narrow(nextafterf(mid, fb));
			if ((narrow(mid) != even || below != a || above != b) && !bad++)
				fprintf(stderr, "%s: between 0x%04x and 0x%04x: midpoint %.9g -> 0x%04x "
					"(want 0x%04x), below -> 0x%04x, above -> 0x%04x\n",
					what, a, b, (double)mid, narrow(mid), even, below, above);
		}
	}
	return bad;
}

static uint16_t gcc_f16(float x)
{
	_Float16 h = (_Float16)x;
	uint16_t u;

	memcpy(&u, &h, sizeof(u));
	return u;
}

int main(void)
{
	long bad = 0;
	uint32_t nan_bits = 0x7fa02000u;
	float nan;

	WT_CHECK(round_trip("f16", weft_half_f32_to_f16, weft_half_f16_to_f32, 0) == 0);
	WT_CHECK(round_trip("bf16", weft_half_f32_to_bf16, weft_half_bf16_to_f32, 1) == 0);
	WT_CHECK(boundaries("f16", weft_half_f32_to_f16, weft_half_f16_to_f32, 0x7bffu) == 0);
	WT_CHECK(boundaries("bf16", weft_half_f32_to_bf16, weft_half_bf16_to_f32, 0x7f7fu) == 0);

	for (uint64_t i = 0; i <= 0xffffffffull; i += 1021) {
		uint32_t u = (uint32_t)i;
		float x;

		memcpy(&x, &u, sizeof(x));
		if (weft_half_f32_to_f16(x) != gcc_f16(x) && !bad++)
			fprintf(stderr, "f16: 0x%08x -> 0x%04x, _Float16 gives 0x%04x\n", u,
				weft_half_f32_to_f16(x), gcc_f16(x));
	}
	WT_CHECK(bad == 0);

	memcpy(&nan, &nan_bits, sizeof(nan));
	WT_CHECK(weft_half_f32_to_f16(nan) == 0x7f01u);
	WT_CHECK(gcc_f16(nan) == 0x7f01u);
	WT_CHECK(weft_half_f32_to_bf16(nan) == 0x7fe0u);
	WT_CHECK(weft_half_f32_to_f16(-nan) == 0xff01u);

	/* the exported conversions and the array form agree with the header */
	bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float f16 = weft_half_f16_to_f32((uint16_t)h), bf = weft_half_bf16_to_f32((uint16_t)h);
		uint16_t arr[1] = { (uint16_t)h };
		float out[1];

		weft_half_convert(1, WEFT_F16, arr, WEFT_F32, out);
		bad += memcmp(&f16, out, 4) != 0;
		f16 = weft_f16_to_f32((uint16_t)h);
		bad += memcmp(&f16, out, 4) != 0;
		out[0] = weft_bf16_to_f32((uint16_t)h);
		bad += memcmp(&bf, out, 4) != 0;
		bad += weft_f32_to_f16(f16 * 1.0009765625f) != weft_half_f32_to_f16(f16 * 1.0009765625f);
		bad += weft_f32_to_bf16(bf * 1.00390625f) != weft_half_f32_to_bf16(bf * 1.00390625f);
	}
	WT_CHECK(bad == 0);
	return wt_done("sdk_half");
}
