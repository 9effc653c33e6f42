/* The rendezvous store's wire format, shared by server and client.
 *
 * All integers little-endian. A connection starts with a hello:
 *     "WEFTSTO1" u32 secret_len secret[secret_len]
 * answered by one byte: 'Y' (accepted) or 'N' (refused; the server closes).
 * Then requests and responses alternate, one at a time:
 *     request:  u32 len | u8 cmd | i64 timeout_ms | u32 n | n x (u32 len, bytes)
 *     response: u32 len | u8 status | u32 n | n x (u32 len, bytes)
 * where the leading len counts the bytes after itself.
 */
#ifndef WEFT_DIST_STORE_PROTO_H
#define WEFT_DIST_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define STORE_MAGIC "WEFTSTO1"
#define STORE_MAGIC_LEN 8
#define STORE_SECRET_MAX 4096
#define STORE_FRAME_MAX (64u << 20) /* a value larger than this is a bug */
#define STORE_ITEMS_MAX 4096

enum store_cmd {
	STORE_SET = 1,   /* [key, value] -> [] */
	STORE_GET = 2,   /* [key] -> [value], waits for the key */
	STORE_ADD = 3,   /* [key, i64 delta] -> [i64 new value] */
	STORE_WAIT = 4,  /* [key...] -> [], waits for every key */
	STORE_CHECK = 5  /* [key] -> [u8 exists] */
};

enum store_reply {
	STORE_R_OK = 0,
	STORE_R_TIMEOUT = 1,
	STORE_R_BAD = 2
};

static inline void store_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t store_get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline void store_put_i64(uint8_t *p, int64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)((uint64_t)v >> (8 * i));
}

static inline int64_t store_get_i64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return (int64_t)v;
}

/* One item of a parsed message: a view into the frame. */
typedef struct store_item {
	const uint8_t *data;
	uint32_t len;
} store_item;

/* Parses n items from p[0..len); returns the count or -1 when malformed. */
static inline int store_parse_items(const uint8_t *p, size_t len, store_item *items, int max)
{
	uint32_t n;
	size_t off = 4;

	if (len < 4)
		return -1;
	n = store_get_u32(p);
	if (n > (uint32_t)max)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t l;

		if (len - off < 4)
			return -1;
		l = store_get_u32(p + off);
		off += 4;
		if (len - off < l)
			return -1;
		items[i].data = p + off;
		items[i].len = l;
		off += l;
	}
	return off == len ? (int)n : -1;
}

/* Constant-time comparison of two byte strings of the same length. */
static inline int store_secret_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	volatile uint8_t diff = 0;

	for (size_t i = 0; i < len; i++)
		diff |= (uint8_t)(a[i] ^ b[i]);
	return diff == 0;
}

#endif /* WEFT_DIST_STORE_PROTO_H */
