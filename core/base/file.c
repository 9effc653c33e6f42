/* Whole-file reads (base/file.h): sized once, read once. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"

weft_status weft_file_read(const char *path, weft_mem_category cat, char **buf, size_t *len)
{
	weft_status st = WEFT_OK;
	struct stat sb;
	FILE *f;
	long n;

	*buf = NULL;
	*len = 0;
	f = fopen(path, "rb");
	if (!f)
		return weft_error_set(errno == ENOENT ? WEFT_ERR_NOT_FOUND : WEFT_ERR_IO,
				      "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fileno(f), &sb) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "%s: cannot size it: %s", path, strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = weft_error_set(WEFT_ERR_IO, "%s: not a regular file (a directory or a "
				    "device?); give the path of a file", path);
		goto out_close;
	}
	n = (long)sb.st_size;
	*buf = weft_mem_alloc(cat, (size_t)n + 1);
	if (!*buf) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading its %ld bytes", path,
				    n);
		goto out_close;
	}
	/* one byte more than the size: a file that grew is not taken cut */
	if (fread(*buf, 1, (size_t)n + 1, f) != (size_t)n || ferror(f)) {
		st = weft_error_set(WEFT_ERR_IO, "%s: short read of its %ld bytes (%s)", path, n,
				    ferror(f) ? strerror(errno) : "it changed while read");
		weft_mem_free(*buf);
		*buf = NULL;
		goto out_close;
	}
	(*buf)[n] = '\0';
	*len = (size_t)n;
out_close:
	fclose(f);
	return st;
}
