/* weft/log.h - leveled logging with a rank prefix.
 *
 * Level comes from WEFT_LOG_LEVEL (error, warn, info, debug, trace; default
 * info). Once the process knows its rank, lines read
 * "[rank 1] warn: message". Logging is thread-safe and writes to stderr.
 */
#ifndef WEFT_LOG_H
#define WEFT_LOG_H

#include "weft/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_log_level {
	WEFT_LOG_ERROR = 0,
	WEFT_LOG_WARN = 1,
	WEFT_LOG_INFO = 2,
	WEFT_LOG_DEBUG = 3,
	WEFT_LOG_TRACE = 4
} weft_log_level;

/* Writes one line at `level` if the current level lets it through. */
WEFT_API void weft_log(weft_log_level level, const char *fmt, ...) WEFT_PRINTF(2, 3);
WEFT_API void weft_logv(weft_log_level level, const char *fmt, va_list ap);

/* Whether a line at `level` would be written. */
WEFT_API int weft_log_enabled(weft_log_level level);

/* Sets the level (overrides WEFT_LOG_LEVEL). */
WEFT_API void weft_log_set_level(weft_log_level level);

/* Parses "error|warn|info|debug|trace"; WEFT_ERR_INVALID_ARG otherwise. */
WEFT_API weft_status weft_log_level_parse(const char *text, weft_log_level *out);

/* Sets the rank shown in the prefix; a negative rank removes the prefix. */
WEFT_API void weft_log_set_rank(int rank);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_LOG_H */
