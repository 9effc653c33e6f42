/* Opening user-given files for reading (regular files only), and
 * whole-file reads (base/file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"

/* What a non-regular file is, for messages. */
static const char *file_type(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO (named pipe), which would wait forever for a writer";
	if (S_ISCHR(mode))
		return "a character device (like /dev/zero), which may never end";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a plain file";
}

weft_status weft_file_open_read(const char *path, const char *what, int *fd, int64_t *size)
{
	struct stat sb;
	int d, flags, err;

	*fd = -1;
	if (size)
		*size = 0;
	/* O_NONBLOCK: opening a FIFO for reading returns at once instead of
	 * waiting for a writer; it is refused below before anything reads */
	d = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (d < 0) {
		err = errno;
		if (what)
			return weft_error_set(err == ENOENT ? WEFT_ERR_NOT_FOUND : WEFT_ERR_IO,
					      "cannot open %s '%s': %s", what, path, strerror(err));
		return weft_error_set(err == ENOENT ? WEFT_ERR_NOT_FOUND : WEFT_ERR_IO,
				      "%s: cannot open: %s", path, strerror(err));
	}
	if (fstat(d, &sb) != 0) {
		err = errno;
		close(d);
		return weft_error_set(WEFT_ERR_IO, "%s%s%s: cannot stat it: %s", what ? what : "",
				      what ? " " : "", path, strerror(err));
	}
	if (!S_ISREG(sb.st_mode)) {
		close(d);
		if (what)
			return weft_error_set(WEFT_ERR_IO, "%s '%s' is not a regular file: it is %s; "
					      "give the path of a file", what, path,
					      file_type(sb.st_mode));
		return weft_error_set(WEFT_ERR_IO, "%s: not a regular file (it is %s); give the "
				      "path of a file", path, file_type(sb.st_mode));
	}
	flags = fcntl(d, F_GETFL);
	if (flags < 0 || fcntl(d, F_SETFL, flags & ~O_NONBLOCK) != 0) {
		err = errno;
		close(d);
		return weft_error_set(WEFT_ERR_IO, "%s%s%s: cannot set it blocking: %s",
				      what ? what : "", what ? " " : "", path, strerror(err));
	}
	*fd = d;
	if (size)
		*size = (int64_t)sb.st_size;
	return WEFT_OK;
}

weft_status weft_file_fopen_read(const char *path, const char *what, FILE **f, int64_t *size)
{
	weft_status st;
	int fd;

	*f = NULL;
	st = weft_file_open_read(path, what, &fd, size);
	if (st)
		return st;
	*f = fdopen(fd, "rb");
	if (!*f) {
		int err = errno;

		close(fd);
		return weft_error_set(WEFT_ERR_NOMEM, "%s%s%s: cannot make a stream for it: %s",
				      what ? what : "", what ? " " : "", path, strerror(err));
	}
	return WEFT_OK;
}

weft_status weft_file_read(const char *path, weft_mem_category cat, char **buf, size_t *len)
{
	weft_status st = WEFT_OK;
	int64_t n;
	FILE *f;

	*buf = NULL;
	*len = 0;
	st = weft_file_fopen_read(path, NULL, &f, &n);
	if (st)
		return st;
	*buf = weft_mem_alloc(cat, (size_t)n + 1);
	if (!*buf) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading its %lld bytes", path,
				    (long long)n);
		goto out_close;
	}
	/* one byte more than the size: a file that grew is not taken cut */
	if (fread(*buf, 1, (size_t)n + 1, f) != (size_t)n || ferror(f)) {
		st = weft_error_set(WEFT_ERR_IO, "%s: short read of its %lld bytes (%s)", path,
				    (long long)n, ferror(f) ? strerror(errno) : "it changed while read");
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
