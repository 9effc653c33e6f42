/* The tokenizer tests' text: documents of about 4000 bytes each, lines of
 * the Debian package fortunes-min's files and entries of
 * tests/fixtures/tokenizer/palette.json (Unicode letters and numbers,
 * whitespace runs, contractions, special-token texts) drawn by a seeded
 * xorshift64*. tests/fixtures/tokenizer/make_tokenizer.py makes the same
 * documents, byte for byte, to record what `tokenizers` gives for them. */
#ifndef TOK_CORPUS_H
#define TOK_CORPUS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "weft_test.h"

#define TOK_N_DOCS 260
#define TOK_DOC_BYTES 4000

typedef struct tok_doc {
	char *text;
	size_t len;
} tok_doc;

static inline uint64_t tok_rng_next(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545F4914F6CDD1Dull;
}

static inline void tok_append(tok_doc *d, size_t *cap, const char *s, size_t n)
{
	if (d->len + n + 1 > *cap) {
		*cap = (d->len + n + 1) * 2;
		d->text = realloc(d->text, *cap);
		WT_REQUIRE(d->text);
	}
	memcpy(d->text + d->len, s, n);
	d->len += n;
	d->text[d->len] = 0;
}

/* The fixture folder: $WEFT_SOURCE_DIR/tests/fixtures/tokenizer. */
static inline const char *tok_fixture(const char *name)
{
	static char path[4][1024];
	static int k;
	const char *src = getenv("WEFT_SOURCE_DIR");

	k = (k + 1) % 4;
	snprintf(path[k], sizeof(path[k]), "%s/tests/fixtures/tokenizer/%s", src ? src : "..",
		 name);
	return path[k];
}

/* Makes the TOK_N_DOCS documents (free each text, then the array). */
static inline tok_doc *tok_corpus(void)
{
	static const char *const files[] = { "/usr/share/games/fortunes/fortunes",
					     "/usr/share/games/fortunes/literature",
					     "/usr/share/games/fortunes/riddles" };
	char *base = NULL, *text;
	size_t base_len = 0, len, n_lines = 0, *line_off, *line_len;
	weft_json_value *pal;
	tok_doc *docs = calloc(TOK_N_DOCS, sizeof(*docs));
	uint64_t x = 0x9E3779B97F4A7C15ull;

	WT_REQUIRE(docs);
	for (size_t f = 0; f < 3; f++) {
		WT_OK(weft_file_read(files[f], WEFT_MEM_OTHER, &text, &len));
		base = realloc(base, base_len + len + 1);
		WT_REQUIRE(base);
		memcpy(base + base_len, text, len);
		base_len += len;
		weft_mem_free(text);
	}
	line_off = malloc((base_len + 1) * sizeof(size_t));
	line_len = malloc((base_len + 1) * sizeof(size_t));
	WT_REQUIRE(line_off && line_len);
	for (size_t i = 0, start = 0; i < base_len; i++) {
		if (base[i] == '\n' || i + 1 == base_len) {
			line_off[n_lines] = start;
			line_len[n_lines++] = i + 1 - start;
			start = i + 1;
		}
	}
	WT_OK(weft_json_parse_file(tok_fixture("palette.json"), &pal));
	for (size_t d = 0; d < TOK_N_DOCS; d++) {
		size_t cap = 0;

		while (docs[d].len < TOK_DOC_BYTES) {
			uint64_t r = tok_rng_next(&x);

			if (r % 4 != 0) {
				size_t l = tok_rng_next(&x) % n_lines;

				tok_append(&docs[d], &cap, base + line_off[l], line_len[l]);
			} else {
				const char *s = pal->items[tok_rng_next(&x) % pal->count].string;

				tok_append(&docs[d], &cap, s, strlen(s));
			}
		}
	}
	weft_json_free(pal);
	free(line_off);
	free(line_len);
	free(base);
	return docs;
}

static inline void tok_corpus_free(tok_doc *docs)
{
	for (size_t d = 0; d < TOK_N_DOCS; d++)
		free(docs[d].text);
	free(docs);
}

/* FNV-1a 64 of ids as little-endian uint32, as make_tokenizer.py. */
static inline uint64_t tok_fnv(const uint32_t *ids, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++)
			h = (h ^ ((ids[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
	return h;
}

#endif
