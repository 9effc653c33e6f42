/* The allocation fault of weft_fault (a test build of the weft command,
 * tests/fault/CMakeLists.txt): with WEFT_FAULT_AT=N in the environment the
 * Nth allocation of the process (malloc, calloc, realloc, strdup, strndup,
 * posix_memalign, asprintf; every reference in the command and the static
 * core libraries, through -Wl,--wrap) fails with ENOMEM, and the file
 * named by WEFT_FAULT_HIT is created when it does. Allocations after it
 * succeed again. Threads share the count. With WEFT_FAULT_COUNT set, a
 * process that exits normally writes its allocation count to that file. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_long count;
static long fail_at = -1; /* -1: not read yet; 0: no fault */

static int should_fail(void)
{
	long n;

	if (fail_at < 0) {
		const char *at = getenv("WEFT_FAULT_AT");

		fail_at = at ? strtol(at, NULL, 10) : 0;
	}
	n = atomic_fetch_add(&count, 1) + 1;
	if (fail_at <= 0)
		return 0;
	if (n != fail_at)
		return 0;
	{
		const char *hit = getenv("WEFT_FAULT_HIT");
		int fd = hit ? open(hit, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;

		if (fd >= 0)
			close(fd);
	}
	errno = ENOMEM;
	return 1;
}

#include "fault_wrap.h"

__attribute__((destructor)) static void write_count(void)
{
	const char *path = getenv("WEFT_FAULT_COUNT");
	FILE *f = path ? fopen(path, "w") : NULL;

	if (f) {
		fprintf(f, "%ld\n", atomic_load(&count));
		fclose(f);
	}
}
