/* weft/weft.h - everything public, in one include. */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include "weft/status.h"
#include "weft/log.h"
#include "weft/memory.h"
#include "weft/config.h"
#include "weft/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH". */
WEFT_API const char *weft_version(void);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_WEFT_H */
