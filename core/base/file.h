/* base/file.h - reading a whole file into memory. */
#ifndef WEFT_BASE_FILE_H
#define WEFT_BASE_FILE_H

#include <stddef.h>

#include "weft/memory.h"
#include "weft/status.h"

/* Reads the regular file at `path` whole into *buf, a new block of
 * *len + 1 bytes from weft_mem_alloc(cat) (free with weft_mem_free), the
 * last one a NUL so text can be used as a string. Blocking. Errors, each
 * naming the path: WEFT_ERR_NOT_FOUND ("path: cannot open: reason"),
 * WEFT_ERR_IO (cannot open, size or read it, not a regular file, or it
 * changed size while read), WEFT_ERR_NOMEM. On error *buf is NULL and *len 0. */
weft_status weft_file_read(const char *path, weft_mem_category cat, char **buf, size_t *len);

#endif /* WEFT_BASE_FILE_H */
