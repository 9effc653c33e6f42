/* A stand-in SDK for the checker's self-test (fx_exports.c): one function
 * the library defines and exports, one it never defines. */
#ifndef WEFT_STRUCTURE_FX_H
#define WEFT_STRUCTURE_FX_H

#define WEFT_API __attribute__((visibility("default")))

/* exported by libstructure_fx_exports.so */
WEFT_API int weft_structure_fx_api(int x);

/* declared, never defined: the checker must report it */
WEFT_API int weft_structure_fx_missing(void);

#endif
