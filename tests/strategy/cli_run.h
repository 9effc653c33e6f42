/* cli_run.h - runs a shell command (the weft program, mostly) for the
 * tests of tests/strategy that drive the CLI, and keeps what it printed.
 * Header-only, as weft_test.h: each test program has its own buffer. */
#ifndef WEFT_TEST_STRATEGY_CLI_RUN_H
#define WEFT_TEST_STRATEGY_CLI_RUN_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "weft/status.h"

static char cli_buf[65536];
/* The last cli_run's output, stdout and stderr together (truncated). */
static const char *const cli_out = cli_buf;

/* Runs the command fmt... through the shell with stderr joined to stdout
 * and keeps its output in cli_out. Returns its exit status, -1 when it
 * could not be started or did not exit normally. */
static inline int cli_run(const char *fmt, ...) WEFT_PRINTF(1, 2);
static inline int cli_run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	FILE *p;
	size_t n;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(cli_buf, 1, sizeof(cli_buf) - 1, p);
	cli_buf[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif /* WEFT_TEST_STRATEGY_CLI_RUN_H */
