/* An index of strings to positions, open addressing over a power-of-two
 * table of size_t slots: 0 is an empty slot, i + 1 names position i. The
 * owner keeps the table at most half full and compares the keys it finds
 * (config mappings, core/config/node.c; parameter sets,
 * core/tensor/params.c). Header-only: the helpers below allocate nothing
 * and cannot fail. */
#ifndef WEFT_BASE_STR_INDEX_H
#define WEFT_BASE_STR_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a of a NUL-terminated string, folded to size_t. */
static inline size_t weft_str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		h = (h ^ *c) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 32));
}

/* Records position i under `key` in slots[0..n_slots): the first empty
 * slot from the key's hash on. n_slots is a power of two and the table
 * has an empty slot (the owner keeps it at most half full). */
static inline void weft_str_index_put(size_t *slots, size_t n_slots, const char *key, size_t i)
{
	size_t s = weft_str_hash(key) & (n_slots - 1);

	while (slots[s])
		s = (s + 1) & (n_slots - 1);
	slots[s] = i + 1;
}

#endif
