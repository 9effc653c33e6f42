/* Status names and the thread-local last error. */
#include <stdio.h>
#include <string.h>

#include "weft/status.h"

#define WEFT_ERROR_MAX 4096

static _Thread_local char last_msg[WEFT_ERROR_MAX];
static _Thread_local weft_status last_status;

const char *weft_status_str(weft_status st)
{
	switch (st) {
	case WEFT_OK: return "ok";
	case WEFT_ERR_INVALID_ARG: return "invalid argument";
	case WEFT_ERR_CONFIG: return "config error";
	case WEFT_ERR_NOT_FOUND: return "not found";
	case WEFT_ERR_IO: return "i/o error";
	case WEFT_ERR_NOMEM: return "out of memory";
	case WEFT_ERR_PLUGIN: return "plugin error";
	case WEFT_ERR_ABI: return "plugin ABI mismatch";
	case WEFT_ERR_SHAPE: return "shape mismatch";
	case WEFT_ERR_DTYPE: return "dtype error";
	case WEFT_ERR_UNSUPPORTED: return "unsupported";
	case WEFT_ERR_COMM: return "communication error";
	case WEFT_ERR_TIMEOUT: return "timed out";
	case WEFT_ERR_CORRUPT: return "corrupt data";
	case WEFT_ERR_INTERNAL: return "internal error";
	case WEFT_ERR_CANCELLED: return "cancelled";
	case WEFT_ERR_PARSE: return "parse error";
	}
	return "unknown status";
}

weft_status weft_error_setv(weft_status st, const char *fmt, va_list ap)
{
	vsnprintf(last_msg, sizeof(last_msg), fmt, ap);
	last_status = st;
	return st;
}

weft_status weft_error_set(weft_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	weft_error_setv(st, fmt, ap);
	va_end(ap);
	return st;
}

weft_status weft_error_wrap(weft_status st, const char *fmt, ...)
{
	char prefix[1024];
	char old[WEFT_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, last_msg, sizeof(old));
	if (old[0])
		snprintf(last_msg, sizeof(last_msg), "%s: %s", prefix, old);
	else
		snprintf(last_msg, sizeof(last_msg), "%s: %s", prefix, weft_status_str(st));
	last_status = st;
	return st;
}

const char *weft_error_last(void)
{
	return last_msg;
}

weft_status weft_error_last_status(void)
{
	return last_status;
}

void weft_error_clear(void)
{
	last_msg[0] = '\0';
	last_status = WEFT_OK;
}
