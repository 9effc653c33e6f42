/* runlog/sha256.h - SHA-256 (FIPS 180-4), streaming and one-shot.
 *
 * Used for checkpoint manifests: every file written into an atomic
 * directory is hashed as it is written, and verified on load.
 */
#ifndef WEFT_RUNLOG_SHA256_H
#define WEFT_RUNLOG_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"

#define WEFT_SHA256_BYTES 32
#define WEFT_SHA256_HEX 65 /* 64 hex digits and the NUL */

typedef struct weft_sha256 {
	uint32_t h[8];
	uint64_t total; /* bytes hashed so far */
	uint8_t block[64];
	size_t used;    /* bytes waiting in block */
} weft_sha256;

/* Starts a new hash. Never fails. */
void weft_sha256_init(weft_sha256 *s);

/* Adds `len` bytes. Never fails; len 0 is fine (data may then be NULL). */
void weft_sha256_update(weft_sha256 *s, const void *data, size_t len);

/* Finishes the hash into out[32]; `s` must be re-initialised to be reused. */
void weft_sha256_final(weft_sha256 *s, uint8_t out[WEFT_SHA256_BYTES]);

/* One-shot hash of a buffer. */
void weft_sha256_buf(const void *data, size_t len, uint8_t out[WEFT_SHA256_BYTES]);

/* Lower-case hex of a digest into hex[65] (NUL-terminated). */
void weft_sha256_hex(const uint8_t digest[WEFT_SHA256_BYTES], char hex[WEFT_SHA256_HEX]);

/* Hashes a whole file, reading it in 1 MiB chunks; *bytes_out (optional)
 * gets its size. Errors: WEFT_ERR_NOT_FOUND / WEFT_ERR_IO naming the path. */
weft_status weft_sha256_file(const char *path, uint8_t out[WEFT_SHA256_BYTES],
			     int64_t *bytes_out);

#endif /* WEFT_RUNLOG_SHA256_H */
