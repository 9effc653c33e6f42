/* The run directory: mkdir -p, then claim version_<N> with mkdir. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runlog/rundir.h"

weft_status weft_mkdirs(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);
	struct stat sb;

	if (n == 0 || n >= sizeof(buf))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "directory path is empty or too long "
				      "(%zu bytes)", n);
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST)
			return weft_error_set(WEFT_ERR_IO, "cannot create directory '%s': %s", buf,
					      strerror(errno));
		if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
			return weft_error_set(WEFT_ERR_IO, "cannot create directory '%s': a file "
					      "of that name is in the way", buf);
		buf[i] = path[i];
	}
	return WEFT_OK;
}

/* The largest k of the version_<k> entries in dir, or -1. */
static int64_t max_version(const char *dir)
{
	int64_t best = -1;
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char *end;
		long long k;

		if (strncmp(e->d_name, "version_", 8) != 0 || !e->d_name[8])
			continue;
		errno = 0;
		k = strtoll(e->d_name + 8, &end, 10);
		if (*end || errno || k < 0)
			continue;
		if (k > best)
			best = k;
	}
	closedir(d);
	return best;
}

weft_status weft_rundir_create(const char *root, const char *name, char *out, size_t len,
			       int64_t *version_out)
{
	char parent[4096];
	weft_status st;
	int64_t v;

	if (!name || !name[0] || strchr(name, '/') || strcmp(name, "..") == 0 ||
	    strcmp(name, ".") == 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "run name '%s' must be a plain directory name (no '/', not "
				      "'.' or '..')", name ? name : "");
	if ((size_t)snprintf(parent, sizeof(parent), "%s/%s", root, name) >= sizeof(parent))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "run directory path too long");
	st = weft_mkdirs(parent);
	if (st)
		return st;
	v = max_version(parent) + 1;
	for (int tries = 0; tries < 10000; tries++, v++) {
		if ((size_t)snprintf(out, len, "%s/version_%" PRId64, parent, v) >= len)
			return weft_error_set(WEFT_ERR_INVALID_ARG,
					      "run directory path does not fit in %zu bytes", len);
		if (mkdir(out, 0777) == 0) {
			if (version_out)
				*version_out = v;
			return WEFT_OK;
		}
		if (errno != EEXIST)
			return weft_error_set(WEFT_ERR_IO, "cannot create run directory '%s': %s",
					      out, strerror(errno));
	}
	return weft_error_set(WEFT_ERR_IO, "cannot claim a version directory under '%s' "
			      "(10000 attempts raced with other runs)", parent);
}
