/* runlog/rundir.h - the run directory, <root>/<name>/version_<N>/.
 *
 * N is one more than the largest version_<k> already there (0 for the
 * first run), as Lightning's loggers number versions. The directory is
 * claimed with mkdir, which is atomic: two runs starting at once get
 * different versions, never the same one.
 */
#ifndef WEFT_RUNLOG_RUNDIR_H
#define WEFT_RUNLOG_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"

/* Creates `path` and its missing parents (mode 0777 & ~umask), as mkdir -p.
 * An existing directory is fine. Errors: WEFT_ERR_IO naming the component
 * that could not be made (a file in the way, no permission). */
weft_status weft_mkdirs(const char *path);

/* Creates <root>/<name>/version_<N>/ (root and name made if missing) and
 * writes its path into out[len]; *version_out (optional) gets N.
 * Errors: WEFT_ERR_INVALID_ARG for an empty name or one with '/' or "..";
 * WEFT_ERR_IO naming the directory; WEFT_ERR_INVALID_ARG when the path
 * does not fit in len. Blocking (a few syscalls). */
weft_status weft_rundir_create(const char *root, const char *name, char *out, size_t len,
			       int64_t *version_out);

#endif /* WEFT_RUNLOG_RUNDIR_H */
