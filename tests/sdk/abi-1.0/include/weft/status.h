/* weft/status.h - status codes and the thread-local last error.
 *
 * Every fallible weft call returns a weft_status. On failure the callee
 * has stored a message with the specifics (the path, the key, the rank, the
 * sizes) in the calling thread's last-error, which weft_error_last()
 * returns. Plugins report errors through the host services table
 * (weft/plugin.h), which writes the same last-error.
 */
#ifndef WEFT_STATUS_H
#define WEFT_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#define WEFT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define WEFT_NODISCARD __attribute__((warn_unused_result))
#else
#define WEFT_API
#define WEFT_PRINTF(fmt, args)
#define WEFT_NODISCARD
#endif

/* Status codes. Values are part of the ABI: only ever appended. */
typedef enum weft_status {
	WEFT_OK = 0,
	WEFT_ERR_INVALID_ARG = 1, /* a caller passed something impossible */
	WEFT_ERR_CONFIG = 2,      /* the user's configuration is wrong */
	WEFT_ERR_NOT_FOUND = 3,   /* a file, key, plugin or name is missing */
	WEFT_ERR_IO = 4,          /* reading or writing a file failed */
	WEFT_ERR_NOMEM = 5,       /* an allocation failed */
	WEFT_ERR_PLUGIN = 6,      /* a plugin could not be loaded or is malformed */
	WEFT_ERR_ABI = 7,         /* a plugin was built for an incompatible ABI */
	WEFT_ERR_SHAPE = 8,       /* tensor shapes do not fit together */
	WEFT_ERR_DTYPE = 9,       /* a dtype is unknown or unsupported here */
	WEFT_ERR_UNSUPPORTED = 10,/* valid, but not supported by this build/device */
	WEFT_ERR_COMM = 11,       /* a collective or peer failed */
	WEFT_ERR_TIMEOUT = 12,    /* a deadline passed */
	WEFT_ERR_CORRUPT = 13,    /* a file failed a checksum or format check */
	WEFT_ERR_INTERNAL = 14,   /* a bug in weft: please report it */
	WEFT_ERR_CANCELLED = 15,  /* stopped on request (signal, abort) */
	WEFT_ERR_PARSE = 16       /* text (YAML, JSON, a number) is malformed */
} weft_status;

/* A short, constant name for a status ("config error"). Never NULL. */
WEFT_API const char *weft_status_str(weft_status st);

/* Stores a formatted message as this thread's last error and returns st,
 * so that `return weft_error_set(WEFT_ERR_IO, "...", ...);` reads well.
 * The message is truncated at 4095 bytes. */
WEFT_API weft_status weft_error_set(weft_status st, const char *fmt, ...) WEFT_PRINTF(2, 3);
WEFT_API weft_status weft_error_setv(weft_status st, const char *fmt, va_list ap);

/* Prepends "context: " to this thread's last error (for example the file
 * being read) and returns st unchanged. */
WEFT_API weft_status weft_error_wrap(weft_status st, const char *fmt, ...) WEFT_PRINTF(2, 3);

/* This thread's last error message; "" when none. Borrowed: valid until the
 * next weft call on this thread. */
WEFT_API const char *weft_error_last(void);

/* The status stored with the last error; WEFT_OK when none. */
WEFT_API weft_status weft_error_last_status(void);

/* Forgets this thread's last error. */
WEFT_API void weft_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_STATUS_H */
