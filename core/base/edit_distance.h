/* base/edit_distance.h - how far apart two short words are, for the
 * "did you mean" of config keys, choices and plugin names. */
#ifndef WEFT_BASE_EDIT_DISTANCE_H
#define WEFT_BASE_EDIT_DISTANCE_H

#include <stddef.h>

/* Words longer than this are never compared (distance (size_t)-1). */
#define WEFT_EDIT_DISTANCE_MAX_LEN 128

/* The optimal string alignment distance between a and b: insertions,
 * deletions, substitutions and swaps of two neighbouring characters, one
 * edit each; ASCII letters compare without case ('Adam' is 0 from 'adam').
 * (size_t)-1 when either is longer than WEFT_EDIT_DISTANCE_MAX_LEN.
 * Pure; no allocation. */
size_t weft_edit_distance(const char *a, const char *b);

#endif /* WEFT_BASE_EDIT_DISTANCE_H */
