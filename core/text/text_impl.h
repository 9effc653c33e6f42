/* Internals shared by core/text's files: the tokenizer object, the
 * Unicode classes and the pre-tokenizers. */
#ifndef WEFT_TEXT_IMPL_H
#define WEFT_TEXT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* ---- Unicode classes (unicode_class.c) ---- */

/* What the pre-tokenizer regexes ask of a character: \p{L}, \p{N}, \s, or
 * none of them. */
enum { TXT_OTHER = 0, TXT_LETTER = 1, TXT_NUMBER = 2, TXT_SPACE = 3 };

/* The class of code point cp, as the `tokenizers` package's regex engine
 * sees it. */
int txt_class_of(uint32_t cp);

/* The class of the character at s[i] (i < n) and, in *len, its length in
 * bytes: a well-formed UTF-8 sequence is one character; a byte that starts
 * none is one character of class TXT_OTHER. */
int txt_char_at(const uint8_t *s, size_t n, size_t i, size_t *len);

/* ---- pre-tokenizers (pretok.c) ---- */

typedef enum txt_pattern {
	TXT_PAT_GPT2 = 0,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|... */
	TXT_PAT_LLAMA3 = 1, /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|... */
	TXT_PAT_QWEN2 = 2   /* Llama 3's with \p{N} one digit at a time */
} txt_pattern;

/* The regex source of each pattern, as tokenizer.json spells it. */
extern const char *const txt_pattern_source[3];

/* The end of the piece the pattern matches at s[i] (i < n): the pieces
 * from i = 0 on cover the text. */
size_t txt_pretok_next(txt_pattern pat, const uint8_t *s, size_t n, size_t i);

/* ---- the tokenizer ---- */

typedef struct txt_added {
	const uint8_t *text;  /* in the pool */
	uint32_t len, id;
	int special;
} txt_added;

typedef struct txt_merge_slot {
	uint64_t key;          /* (left id << 32 | right id) + 1; 0: empty */
	uint32_t rank, id;
} txt_merge_slot;

struct weft_tokenizer {
	char path[512];
	int64_t vocab_size;     /* 1 + largest id */
	/* per id: bytes in the pool (len -1: no token has the id) */
	int64_t *tok_off;
	int32_t *tok_len;
	uint8_t *tok_flags;     /* TXT_TOK_* */
	uint8_t *pool;
	size_t pool_len, pool_cap;

	/* BPE vocabulary: bytes -> id, open addressing (slot: id + 1) */
	uint32_t *vocab_slots;
	size_t vocab_nslots;
	int32_t byte_id[256];   /* the token of each single byte, or -1 */
	txt_merge_slot *merges;
	size_t merge_nslots;
	int ignore_merges;
	int64_t unk_id;         /* -1: unknown bytes are dropped, as tokenizers does */

	txt_pattern pattern;
	int add_prefix_space;

	txt_added *added;       /* sorted by first byte, then longest first */
	size_t n_added;
	uint8_t added_first[256]; /* 1 where an added token starts with that byte */
	int added_has_space;
};

#define TXT_TOK_ADDED 1
#define TXT_TOK_SPECIAL 2

/* FNV-1a over bytes. */
static inline uint64_t txt_hash(const uint8_t *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

/* The BPE vocabulary's id of bytes s[0..n), or -1. */
int64_t txt_vocab_find(const weft_tokenizer *t, const uint8_t *s, size_t n);

#endif /* WEFT_TEXT_IMPL_H */
