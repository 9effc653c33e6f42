/* runlog/atomic_dir.h - directories that appear whole or not at all.
 *
 * A checkpoint is written into `<dir>.tmp-<pid>`; each file is hashed
 * (SHA-256) while it is written and fsync'ed when closed; commit writes
 * manifest.json (name, size and sha256 of every file), fsyncs it and the
 * directory, renames the directory to `<dir>` and fsyncs the parent. A
 * crash at any point leaves either no `<dir>` or a complete one (plus a
 * stale `.tmp-<pid>` that weft_atomic_dir_clean_stale removes). When
 * `<dir>` exists already (last.ckpt saved again) the two are swapped with
 * renameat2(RENAME_EXCHANGE) and the old one removed afterwards.
 *
 * Directories are flat: file names are plain names (no '/').
 *
 * manifest.json:
 *   {"format": "weft-manifest", "version": 1,
 *    "files": [{"name": "model.safetensors", "bytes": 1234,
 *               "sha256": "9f86d0..."}, ...]}
 */
#ifndef WEFT_RUNLOG_ATOMIC_DIR_H
#define WEFT_RUNLOG_ATOMIC_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"

#define WEFT_MANIFEST_NAME "manifest.json"

typedef struct weft_atomic_dir weft_atomic_dir;

/* Starts writing the directory `final_path` (its parent must exist): makes
 * `<final_path>.tmp-<pid>` (removing a leftover of that name). Finish with
 * weft_atomic_dir_commit or weft_atomic_dir_abort.
 * Errors: WEFT_ERR_IO naming the directory. */
weft_status weft_atomic_dir_begin(const char *final_path, weft_atomic_dir **out);

/* The temporary directory being filled; borrowed. */
const char *weft_atomic_dir_tmp_path(const weft_atomic_dir *d);

/* Opens file `name` in the directory for writing; one file is open at a
 * time. Errors: WEFT_ERR_INVALID_ARG for a name with '/', "." / "..",
 * manifest.json, a name already written, or another file still open;
 * WEFT_ERR_IO naming the file. */
weft_status weft_atomic_dir_file_open(weft_atomic_dir *d, const char *name);

/* Adds file `name`, already written into the temporary directory by other
 * code (a model's safetensors writer, other ranks' pwrite of their shards),
 * to the manifest: reads it for its sha256 and size and flushes it to
 * disk. Errors: as file_open for the name; WEFT_ERR_IO naming the file
 * when it cannot be read. */
weft_status weft_atomic_dir_adopt_file(weft_atomic_dir *d, const char *name);

/* Appends to the open file (and to its hash). Blocking write(2).
 * Errors: WEFT_ERR_INVALID_ARG when no file is open; WEFT_ERR_IO naming the
 * file (disk full, ...). */
weft_status weft_atomic_dir_file_write(weft_atomic_dir *d, const void *buf, size_t len);

/* fsyncs and closes the open file, recording its size and sha256.
 * Errors: WEFT_ERR_IO naming the file. */
weft_status weft_atomic_dir_file_close(weft_atomic_dir *d);

/* open + write + close of one whole file. */
weft_status weft_atomic_dir_write_file(weft_atomic_dir *d, const char *name, const void *buf,
				       size_t len);

/* Writes the manifest, makes everything durable and renames the directory
 * into place. Frees `d` whatever happens; on error the temporary directory
 * is removed and `<final_path>` is as it was. Errors: WEFT_ERR_INVALID_ARG
 * if a file is still open; WEFT_ERR_IO naming the path and the step. */
weft_status weft_atomic_dir_commit(weft_atomic_dir *d);

/* Removes the temporary directory and frees `d`. NULL is ignored. */
void weft_atomic_dir_abort(weft_atomic_dir *d);

/* This host's tag in the names of in-progress and leftover directories
 * (`<name>.tmp-<pid>-<tag>`): 8 hex digits of a hash of the host name, so
 * that on a file system shared by several hosts a leftover whose writer
 * runs on another host (where its pid means nothing here) is never taken
 * for this host's and removed. Names without a tag (older weft) count as
 * this host's. */
const char *weft_atomic_dir_host_tag(void);

/* Removes `<final_path>.tmp-<pid>` directories left by processes that are
 * no longer running (a crash mid-save); another host's are kept.
 * *removed (optional) gets the count.
 * The writer counts as gone when no process <pid> runs, or when the one
 * that does started after the directory last changed (the pid was reused,
 * as a restarted container reuses its pids).
 * Errors: WEFT_ERR_IO naming what could not be removed. */
weft_status weft_atomic_dir_clean_stale(const char *final_path, int *removed);

/* As weft_atomic_dir_clean_stale for every directory in `parent`: removes
 * `<name>.tmp-<pid>` (an interrupted save), `<name>.old-<pid>` (an
 * interrupted replace where RENAME_EXCHANGE is missing) and
 * `.<name>.del-<pid>` (an interrupted weft_atomic_dir_remove) whose writer
 * is gone. Only directories are touched, never symlinks. A missing parent
 * is fine. Blocking (one listing, a stat per candidate). Errors:
 * WEFT_ERR_IO naming what could not be listed or removed (the rest of the
 * listing is then left for the next call). */
weft_status weft_atomic_dir_clean_stale_in(const char *parent, int *removed);

/* Removes the (flat) directory `path` without ever leaving it half-deleted
 * under its name: renames it to `<parent>/.<name>.del-<pid>`, flushes the
 * parent, then deletes the files and the directory. A crash during that
 * leaves only the hidden name, which weft_atomic_dir_clean_stale_in removes.
 * A missing `path` is fine. Errors: WEFT_ERR_IO naming the path when the
 * rename fails (nothing deleted), or the hidden directory when it could not
 * be flushed or deleted (`path` is gone either way). */
weft_status weft_atomic_dir_remove(const char *path);

/* Checks a directory against its manifest: every listed file exists, has
 * the listed size and sha256. Files not in the manifest are ignored.
 * Errors: WEFT_ERR_NOT_FOUND when `dir` or its manifest.json is missing
 * ("not a complete checkpoint"), or a listed file is missing (naming it);
 * WEFT_ERR_CORRUPT naming the file and the failed check ("size 10 bytes,
 * manifest says 20", "sha256 ..., manifest says ..."), or what is wrong
 * with the manifest itself. */
weft_status weft_manifest_verify(const char *dir);

/* weft_manifest_verify, and each of needed[0..n_needed) (the files a
 * reader of the directory will open) must be listed, so none is read
 * unchecked. Errors: as weft_manifest_verify, and WEFT_ERR_CORRUPT naming
 * the directory and the first needed file the manifest does not list. */
weft_status weft_manifest_verify_listed(const char *dir, const char *const *needed,
					size_t n_needed);

#endif /* WEFT_RUNLOG_ATOMIC_DIR_H */
