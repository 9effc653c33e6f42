/* sdk_util.h - helpers of the SDK tests that run the weft CLI on small
 * generated configs and data (test_abi_compat, test_config_doc). */
#ifndef WEFT_TEST_SDK_UTIL_H
#define WEFT_TEST_SDK_UTIL_H

#include <stddef.h>

#include "weft/status.h"

/* A fresh directory under $TMPDIR (or /tmp), removed by sdk_cleanup.
 * Exits the test when it cannot be made. */
const char *sdk_tmpdir(void);

/* Removes the directory sdk_tmpdir made (and everything in it). */
void sdk_cleanup(void);

/* Writes `len` bytes (len (size_t)-1: strlen(data)) to dir/name; exits the
 * test on failure. */
void sdk_write(const char *dir, const char *name, const void *data, size_t len);

/* Writes dir/corpus.txt: about 4 KiB of text for the `text` data class. */
void sdk_write_corpus(const char *dir);

/* Runs `cmd` through the shell in `dir` with stderr joined to stdout,
 * keeping the last cap - 1 bytes of output in out (NUL-terminated).
 * Returns the exit status (128 + signal when killed; -1 when it could not
 * be started). */
int sdk_run(const char *dir, char *out, size_t cap, const char *cmd);

/* $WEFT_BUILD_DIR/bin/weft, or exits the test when WEFT_BUILD_DIR is
 * unset (run under ctest). */
const char *sdk_weft(void);

#endif /* WEFT_TEST_SDK_UTIL_H */
