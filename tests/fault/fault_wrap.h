/* fault_wrap.h - the allocation functions the fault tests wrap at link
 * time (-Wl,--wrap, tests/fault/CMakeLists.txt): each fails with ENOMEM
 * when the includer's should_fail() says so, else calls the real one.
 * Include once, after defining `static int should_fail(void)`; the file
 * needs <errno.h>, <stdarg.h>, <stdio.h> and <stdlib.h>. */
#ifndef WEFT_TEST_FAULT_WRAP_H
#define WEFT_TEST_FAULT_WRAP_H

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
int __wrap_asprintf(char **out, const char *fmt, ...);

void *__wrap_malloc(size_t n)
{
	return should_fail() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t a, size_t b)
{
	return should_fail() ? NULL : __real_calloc(a, b);
}

void *__wrap_realloc(void *p, size_t n)
{
	return should_fail() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return should_fail() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	return should_fail() ? NULL : __real_strndup(s, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	return should_fail() ? ENOMEM : __real_posix_memalign(p, align, n);
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (should_fail()) {
		*out = NULL;
		return -1;
	}
	va_start(ap, fmt);
	r = vasprintf(out, fmt, ap);
	va_end(ap);
	return r;
}

#endif /* WEFT_TEST_FAULT_WRAP_H */
