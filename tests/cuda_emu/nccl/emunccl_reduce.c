/* The emulated NCCL's arithmetic: every reduction folds the ranks'
 * contributions in rank order (0, 1, ..., n-1), so a result is the same
 * bits on every run and every rank. Half types (f16, bf16) are widened to
 * float for each step and rounded back to the type (nearest, ties to
 * even) after it, as a GPU does elementwise; avg is the sum divided by n
 * at the end (integers: C's truncating division). */
#include <math.h>
#include <string.h>

#include "emunccl_impl.h"

size_t emu_type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: return 1;
	case ncclFloat16: case ncclBfloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
	default: return 0;
	}
}

const char *emu_type_name(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: return "i8";
	case ncclUint8: return "u8";
	case ncclInt32: return "i32";
	case ncclUint32: return "u32";
	case ncclInt64: return "i64";
	case ncclUint64: return "u64";
	case ncclFloat16: return "f16";
	case ncclFloat32: return "f32";
	case ncclFloat64: return "f64";
	case ncclBfloat16: return "bf16";
	default: return "unsupported type";
	}
}

const char *emu_op_name(ncclRedOp_t op)
{
	switch (op) {
	case ncclSum: return "sum";
	case ncclProd: return "prod";
	case ncclMax: return "max";
	case ncclMin: return "min";
	case ncclAvg: return "avg";
	default: return "unsupported op";
	}
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static float f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
	float f;

	if (e == 0) { /* zero or subnormal: m * 2^-24 */
		f = ldexpf((float)m, -24);
		return s ? -f : f;
	}
	if (e == 31)
		u = s | 0x7f800000u | (m << 13);
	else
		u = s | ((e + 112u) << 23) | (m << 13);
	memcpy(&f, &u, 4);
	return f;
}

static uint16_t f32_to_f16(float f)
{
	uint32_t u, a, s, h, rem;

	memcpy(&u, &f, 4);
	s = (u >> 16) & 0x8000u;
	a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return (uint16_t)(s | 0x7e00u);
	if (a >= 0x477ff000u) /* 65520 and up round to infinity */
		return (uint16_t)(s | 0x7c00u);
	if (a < 0x38800000u) { /* below 2^-14: a subnormal half, round(|f| * 2^24) */
		float v;

		memcpy(&v, &a, 4);
		return (uint16_t)(s | (uint32_t)nearbyintf(v * 16777216.0f));
	}
	h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
	rem = a & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
		h++; /* a carry into the exponent is the right result */
	return (uint16_t)(s | h);
}

/* One step of op on widened values. */
static double step_f(double a, double b, ncclRedOp_t op)
{
	switch (op) {
	case ncclProd: return a * b;
	case ncclMax: return b > a ? b : a;
	case ncclMin: return b < a ? b : a;
	default: return a + b; /* sum, avg */
	}
}

/* Integer types: fold in the type itself (wrapping like the GPU's). */
#define EMU_REDUCE_INT(name, T)                                                              \
	static void name(T *out, const void *const *in, int n, size_t count, ncclRedOp_t op)  \
	{                                                                                     \
		for (size_t i = 0; i < count; i++) {                                          \
			T acc = ((const T *)in[0])[i];                                        \
			for (int r = 1; r < n; r++) {                                         \
				T x = ((const T *)in[r])[i];                                  \
				switch (op) {                                                 \
				case ncclProd: acc = (T)(acc * x); break;                     \
				case ncclMax: acc = x > acc ? x : acc; break;                 \
				case ncclMin: acc = x < acc ? x : acc; break;                 \
				default: acc = (T)(acc + x); break;                           \
				}                                                             \
			}                                                                     \
			if (op == ncclAvg)                                                    \
				acc = (T)(acc / (T)n);                                        \
			out[i] = acc;                                                         \
		}                                                                             \
	}

EMU_REDUCE_INT(reduce_i8, int8_t)
EMU_REDUCE_INT(reduce_u8, uint8_t)
EMU_REDUCE_INT(reduce_i32, int32_t)
EMU_REDUCE_INT(reduce_u32, uint32_t)
EMU_REDUCE_INT(reduce_i64, int64_t)
EMU_REDUCE_INT(reduce_u64, uint64_t)

static void reduce_f32(float *out, const void *const *in, int n, size_t count, ncclRedOp_t op)
{
	for (size_t i = 0; i < count; i++) {
		float acc = ((const float *)in[0])[i];

		for (int r = 1; r < n; r++)
			acc = (float)step_f(acc, ((const float *)in[r])[i], op);
		out[i] = op == ncclAvg ? acc / (float)n : acc;
	}
}

static void reduce_f64(double *out, const void *const *in, int n, size_t count, ncclRedOp_t op)
{
	for (size_t i = 0; i < count; i++) {
		double acc = ((const double *)in[0])[i];

		for (int r = 1; r < n; r++) {
			double x = ((const double *)in[r])[i];

			switch (op) {
			case ncclProd: acc *= x; break;
			case ncclMax: acc = x > acc ? x : acc; break;
			case ncclMin: acc = x < acc ? x : acc; break;
			default: acc += x; break;
			}
		}
		out[i] = op == ncclAvg ? acc / (double)n : acc;
	}
}

/* f16 and bf16: each step in float, rounded to the type. */
static void reduce_half(uint16_t *out, const void *const *in, int n, size_t count, ncclRedOp_t op,
			int bf)
{
	for (size_t i = 0; i < count; i++) {
		uint16_t acc = ((const uint16_t *)in[0])[i];

		for (int r = 1; r < n; r++) {
			uint16_t x = ((const uint16_t *)in[r])[i];
			float a = bf ? bf16_to_f32(acc) : f16_to_f32(acc);
			float b = bf ? bf16_to_f32(x) : f16_to_f32(x);
			float v = (float)step_f(a, b, op);

			acc = bf ? f32_to_bf16(v) : f32_to_f16(v);
		}
		if (op == ncclAvg) {
			float v = (bf ? bf16_to_f32(acc) : f16_to_f32(acc)) / (float)n;

			acc = bf ? f32_to_bf16(v) : f32_to_f16(v);
		}
		out[i] = acc;
	}
}

void emu_reduce(void *out, const void *const *in, int n, size_t count, ncclDataType_t t,
		ncclRedOp_t op)
{
	switch (t) {
	case ncclInt8: reduce_i8(out, in, n, count, op); break;
	case ncclUint8: reduce_u8(out, in, n, count, op); break;
	case ncclInt32: reduce_i32(out, in, n, count, op); break;
	case ncclUint32: reduce_u32(out, in, n, count, op); break;
	case ncclInt64: reduce_i64(out, in, n, count, op); break;
	case ncclUint64: reduce_u64(out, in, n, count, op); break;
	case ncclFloat32: reduce_f32(out, in, n, count, op); break;
	case ncclFloat64: reduce_f64(out, in, n, count, op); break;
	case ncclFloat16: reduce_half(out, in, n, count, op, 0); break;
	case ncclBfloat16: reduce_half(out, in, n, count, op, 1); break;
	default: break; /* refused at issue */
	}
}
