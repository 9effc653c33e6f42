/* Dtypes: sizes, safetensors names, and half-precision conversion. */
#include <string.h>
#include <strings.h>

#include "weft/tensor.h"
#include "weft/half.h"

static const struct {
	const char *name;  /* safetensors */
	const char *alias; /* PyTorch-ish */
	size_t size;
} dtypes[WEFT_DTYPE_COUNT] = {
	[WEFT_F32] = { "F32", "float32", 4 },
	[WEFT_F16] = { "F16", "float16", 2 },
	[WEFT_BF16] = { "BF16", "bfloat16", 2 },
	[WEFT_I32] = { "I32", "int32", 4 },
	[WEFT_I64] = { "I64", "int64", 8 },
	[WEFT_U8] = { "U8", "uint8", 1 },
	[WEFT_U16] = { "U16", "uint16", 2 },
};

size_t weft_dtype_size(weft_dtype dt)
{
	if ((unsigned)dt >= WEFT_DTYPE_COUNT)
		return 0;
	return dtypes[dt].size;
}

const char *weft_dtype_name(weft_dtype dt)
{
	if ((unsigned)dt >= WEFT_DTYPE_COUNT)
		return "unknown";
	return dtypes[dt].name;
}

int weft_dtype_is_float(weft_dtype dt)
{
	return dt == WEFT_F32 || dt == WEFT_F16 || dt == WEFT_BF16;
}

weft_status weft_dtype_parse(const char *text, weft_dtype *out)
{
	for (int i = 0; text && i < WEFT_DTYPE_COUNT; i++) {
		if (!strcasecmp(text, dtypes[i].name) || !strcasecmp(text, dtypes[i].alias)) {
			*out = (weft_dtype)i;
			return WEFT_OK;
		}
	}
	return weft_error_set(WEFT_ERR_DTYPE,
			      "unknown dtype '%s': use one of F32, F16, BF16, I32, I64, U8, U16",
			      text ? text : "(null)");
}

uint16_t weft_f32_to_f16(float x) { return weft_half_f32_to_f16(x); }
float weft_f16_to_f32(uint16_t h) { return weft_half_f16_to_f32(h); }
uint16_t weft_f32_to_bf16(float x) { return weft_half_f32_to_bf16(x); }
float weft_bf16_to_f32(uint16_t h) { return weft_half_bf16_to_f32(h); }

weft_status weft_convert_host(int64_t n, weft_dtype src_dt, const void *src, weft_dtype dst_dt,
			      void *dst)
{
	if (!weft_dtype_is_float(src_dt) || !weft_dtype_is_float(dst_dt))
		return weft_error_set(WEFT_ERR_DTYPE,
				      "convert: %s to %s: only F32, F16 and BF16 convert",
				      weft_dtype_name(src_dt), weft_dtype_name(dst_dt));
	if (n <= 0)
		return WEFT_OK;
	if (src_dt == dst_dt) {
		memmove(dst, src, (size_t)n * weft_dtype_size(src_dt));
		return WEFT_OK;
	}
	weft_half_convert(n, src_dt, src, dst_dt, dst);
	return WEFT_OK;
}
