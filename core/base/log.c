/* Leveled, rank-prefixed logging to stderr. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "weft/log.h"

static atomic_int log_level = -1; /* -1: not yet read from the environment */
static atomic_int log_rank = -1;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

weft_status weft_log_level_parse(const char *text, weft_log_level *out)
{
	for (int i = 0; i <= WEFT_LOG_TRACE; i++) {
		if (text && strcasecmp(text, level_names[i]) == 0) {
			*out = (weft_log_level)i;
			return WEFT_OK;
		}
	}
	if (text && strcasecmp(text, "warning") == 0) {
		*out = WEFT_LOG_WARN;
		return WEFT_OK;
	}
	return weft_error_set(WEFT_ERR_INVALID_ARG,
			      "unknown log level '%s' (use error, warn, info, debug or trace)",
			      text ? text : "(null)");
}

static int current_level(void)
{
	int lvl = atomic_load(&log_level);

	if (lvl < 0) {
		weft_log_level parsed = WEFT_LOG_INFO;
		const char *env = getenv("WEFT_LOG_LEVEL");

		if (env && *env && weft_log_level_parse(env, &parsed) != WEFT_OK) {
			fprintf(stderr, "weft: warn: WEFT_LOG_LEVEL='%s' is not a level "
				"(error, warn, info, debug, trace); using info\n", env);
			parsed = WEFT_LOG_INFO;
		}
		lvl = (int)parsed;
		atomic_store(&log_level, lvl);
	}
	return lvl;
}

int weft_log_enabled(weft_log_level level)
{
	return (int)level <= current_level();
}

void weft_log_set_level(weft_log_level level)
{
	atomic_store(&log_level, (int)level);
}

void weft_log_set_rank(int rank)
{
	atomic_store(&log_rank, rank < 0 ? -1 : rank);
}

void weft_logv(weft_log_level level, const char *fmt, va_list ap)
{
	char line[4096];
	int rank = atomic_load(&log_rank);
	int n;

	if ((int)level < 0 || level > WEFT_LOG_TRACE)
		level = WEFT_LOG_ERROR;
	if (!weft_log_enabled(level))
		return;
	if (rank >= 0)
		n = snprintf(line, sizeof(line), "[rank %d] %s: ", rank, level_names[level]);
	else
		n = snprintf(line, sizeof(line), "weft: %s: ", level_names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	pthread_mutex_lock(&log_lock);
	fputs(line, stderr);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}

void weft_log(weft_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	weft_logv(level, fmt, ap);
	va_end(ap);
}
