/* Token streams: raw text as bytes, and token .bin files (nanoGPT, llm.c). */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "data/dataset.h"
#include "weft/memory.h"

/* Token files are little-endian; so is every host weft targets. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "weft's data readers assume a "
	       "little-endian host");

#define LLMC_MAGIC_GPT2 20240520
#define LLMC_MAGIC_LLAMA3 20240801
#define LLMC_HEADER_BYTES (256 * 4)

/* Whether a first int32 that is no llm.c magic still looks like an llm.c
 * header: one byte away from a magic (a damaged header), or a date-like
 * magic (YYYYMMDD, years 2020 to 2039, as llm.c's are) followed by a
 * small version number. Bare uint16 tokens hit either only when their
 * first tokens are a near-exact pair, or when tokens 3 and 4 are a byte
 * and a 0 after a date-like pair. */
static int near_magic(int32_t m, int32_t version)
{
	static const int32_t magics[] = { LLMC_MAGIC_GPT2, LLMC_MAGIC_LLAMA3 };
	int32_t year = m / 10000, month = m / 100 % 100, day = m % 100;

	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++) {
		uint32_t diff = (uint32_t)m ^ (uint32_t)magics[i];
		int bytes = 0;

		for (int b = 0; b < 4; b++)
			bytes += (diff >> (8 * b) & 0xff) != 0;
		if (bytes == 1)
			return 1;
	}
	return year >= 2020 && year <= 2039 && month >= 1 && month <= 12 && day >= 1 &&
	       day <= 31 && version >= 0 && version < 256;
}

void weft_tokens_free(weft_tokens *t)
{
	if (!t)
		return;
	weft_mem_free(t->owned);
	if (t->map) {
		munmap(t->map, t->map_len);
		weft_mem_account(WEFT_MEM_OTHER, -(int64_t)t->map_len);
	}
	memset(t, 0, sizeof(*t));
}

static weft_status missing(const char *what)
{
	const char *hint = strncmp(what, "/usr/share/games/fortunes", 25) == 0
				   ? "; install the Debian package fortunes-min (apt-get install "
				     "fortunes-min)"
				   : "";

	return weft_error_set(WEFT_ERR_NOT_FOUND, "text file '%s' not found%s", what, hint);
}

/* Appends every regular file matching `pattern` to the list. */
static weft_status expand(const char *pattern, glob_t *g, int *first)
{
	int rc = glob(pattern, GLOB_MARK | (*first ? 0 : GLOB_APPEND), NULL, g);

	if (rc == GLOB_NOMATCH)
		return missing(pattern);
	if (rc != 0)
		return weft_error_set(WEFT_ERR_IO, "cannot expand '%s'", pattern);
	*first = 0;
	return WEFT_OK;
}

weft_status weft_tokens_from_text(const char *const *paths, size_t n, weft_tokens *out)
{
	glob_t g = { 0 };
	weft_status st = WEFT_OK;
	int first = 1;
	int64_t total = 0, off = 0;
	uint8_t *buf;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "no text files given");
	for (size_t i = 0; i < n; i++) {
		st = expand(paths[i], &g, &first);
		if (st)
			goto out_glob;
	}
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *p = g.gl_pathv[i];
		size_t l = strlen(p);

		int fd;
		int64_t size;

		if (l && p[l - 1] == '/')
			continue; /* a directory matched by the pattern */
		st = weft_file_open_read(p, "text file", &fd, &size);
		if (st)
			goto out_glob;
		close(fd);
		total += size;
	}
	if (total == 0) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "text files '%s'%s hold no bytes to train "
				    "on", paths[0], n > 1 ? " and others" : "");
		goto out_glob;
	}
	buf = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)total);
	if (!buf) {
		st = weft_error_wrap(WEFT_ERR_NOMEM, "loading text '%s'", paths[0]);
		goto out_glob;
	}
	for (size_t i = 0; i < g.gl_pathc && off < total; i++) {
		const char *p = g.gl_pathv[i];
		size_t l = strlen(p), got;
		FILE *f;

		if (l && p[l - 1] == '/')
			continue;
		st = weft_file_fopen_read(p, "text file", &f, NULL);
		if (st) {
			weft_mem_free(buf);
			goto out_glob;
		}
		got = fread(buf + off, 1, (size_t)(total - off), f);
		fclose(f);
		off += (int64_t)got;
	}
	out->data = buf;
	out->owned = buf;
	out->elem_bytes = 1;
	out->n = off;
	out->vocab = 256;
	snprintf(out->source, sizeof(out->source), "%s%s", paths[0], g.gl_pathc > 1 ? " (+more)" : "");
out_glob:
	if (!first)
		globfree(&g);
	return st;
}

weft_status weft_tokens_from_bin(const char *path, weft_tokens *out)
{
	weft_status st = WEFT_OK;
	int64_t size;
	int32_t head[3] = { 0 };
	int64_t data_off = 0, count;
	int fd, have_head;
	void *map;

	memset(out, 0, sizeof(*out));
	st = weft_file_open_read(path, "token file", &fd, &size);
	if (st)
		return st;
	if (size == 0) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "token file '%s' is empty", path);
		goto out_close;
	}
	out->elem_bytes = 2;
	have_head = size >= 12 && pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head);
	if (have_head && head[0] != LLMC_MAGIC_GPT2 && head[0] != LLMC_MAGIC_LLAMA3 &&
	    near_magic(head[0], head[1])) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "token file '%s' starts with %d, which is not "
				    "an llm.c magic (expected %d for uint16 tokens or %d for uint32 "
				    "tokens) but too close to one to be read as bare uint16 "
				    "tokens: a damaged or newer llm.c header; write the file again "
				    "with llm.c's magic, or as a bare uint16 array", path, head[0],
				    LLMC_MAGIC_GPT2, LLMC_MAGIC_LLAMA3);
		goto out_close;
	}
	if (have_head && (head[0] == LLMC_MAGIC_GPT2 || head[0] == LLMC_MAGIC_LLAMA3)) {
		if (head[0] == LLMC_MAGIC_GPT2 && head[1] != 1) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': llm.c token file version %d is "
					    "not supported (magic 20240520 goes with version 1)", path,
					    head[1]);
			goto out_close;
		}
		if (head[0] == LLMC_MAGIC_LLAMA3 && head[1] != 7) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': llm.c token file version %d is "
					    "not supported (magic 20240801 goes with version 7)", path,
					    head[1]);
			goto out_close;
		}
		out->elem_bytes = head[0] == LLMC_MAGIC_GPT2 ? 2 : 4;
		data_off = LLMC_HEADER_BYTES;
		count = head[2];
		if (count <= 0 || size != data_off + count * out->elem_bytes) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': the llm.c header announces %" PRId64
					    " tokens (%" PRId64 " bytes after the 1024-byte header) "
					    "but the file has %lld bytes: truncated or not a token file",
					    path, count, count * out->elem_bytes,
					    (long long)size);
			goto out_close;
		}
	} else {
		if (size % 2) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': %lld bytes is not a whole number "
					    "of uint16 tokens (nanoGPT .bin) and there is no llm.c "
					    "header", path, (long long)size);
			goto out_close;
		}
		count = size / 2;
	}
	map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		st = weft_error_set(WEFT_ERR_IO, "cannot map token file '%s': %s", path,
				    strerror(errno));
		goto out_close;
	}
	out->map = map;
	out->map_len = (size_t)size;
	weft_mem_account(WEFT_MEM_OTHER, (int64_t)out->map_len);
	out->data = (const uint8_t *)map + data_off;
	out->n = count;
	snprintf(out->source, sizeof(out->source), "%s", path);
	for (int64_t i = 0; i < count; i++) {
		uint32_t t = weft_tokens_at(out, i);

		if ((int64_t)t + 1 > out->vocab) {
			out->vocab = (int64_t)t + 1;
			out->max_at = i;
		}
	}
out_close:
	close(fd);
	return st;
}

weft_status weft_tokens_split(const weft_tokens *all, double val_fraction, weft_tokens *train,
			      weft_tokens *val)
{
	int64_t n_val, n_train;

	if (!(val_fraction >= 0 && val_fraction < 1))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "val_fraction must be in [0, 1), got %g",
				      val_fraction);
	n_val = (int64_t)((double)all->n * val_fraction);
	n_train = all->n - n_val;
	*train = *all;
	*val = *all;
	train->owned = val->owned = NULL;
	train->map = val->map = NULL;
	train->map_len = val->map_len = 0;
	train->n = n_train;
	val->n = n_val;
	val->data = (const uint8_t *)all->data + n_train * all->elem_bytes;
	return WEFT_OK;
}
