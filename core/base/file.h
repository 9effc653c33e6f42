/* base/file.h - opening files for reading, and reading a whole file. */
#ifndef WEFT_BASE_FILE_H
#define WEFT_BASE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "weft/memory.h"
#include "weft/status.h"

/* Opens `path` read-only (O_CLOEXEC) and checks that it is a regular file
 * before anything reads it: a FIFO, a socket, a device (/dev/zero) or a
 * directory is refused, so no reader blocks forever on a pipe nobody
 * writes or reads an endless device. The open itself never blocks (it is
 * made with O_NONBLOCK, cleared again for a regular file). Every reader
 * of user-given files (config, data, checkpoints) opens through here.
 * `what` names the file's role in messages ("config", "token file"). On
 * success *fd is the descriptor (close it) and *size, when not NULL, the
 * file's size in bytes. Errors, each naming the role and the path:
 * WEFT_ERR_NOT_FOUND (no such file), WEFT_ERR_IO (cannot open or stat it;
 * not a regular file, naming what it is). On error *fd is -1. */
weft_status weft_file_open_read(const char *path, const char *what, int *fd, int64_t *size);

/* weft_file_open_read as a stdio stream ("rb"); close with fclose. On
 * error *f is NULL. */
weft_status weft_file_fopen_read(const char *path, const char *what, FILE **f, int64_t *size);

/* Reads the regular file at `path` whole into *buf, a new block of
 * *len + 1 bytes from weft_mem_alloc(cat) (free with weft_mem_free), the
 * last one a NUL so text can be used as a string. Blocking. Errors, each
 * naming the path: WEFT_ERR_NOT_FOUND ("path: cannot open: reason"),
 * WEFT_ERR_IO (cannot open, size or read it, not a regular file, or it
 * changed size while read), WEFT_ERR_NOMEM. On error *buf is NULL and *len 0. */
weft_status weft_file_read(const char *path, weft_mem_category cat, char **buf, size_t *len);

#endif /* WEFT_BASE_FILE_H */
