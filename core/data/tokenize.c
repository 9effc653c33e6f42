/* The text class with data.tokenizer: the bytes read by
 * weft_tokens_from_text, replaced by the ids of a BPE tokenizer.json
 * (core/text) when the data is loaded. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "text/tokenizer.h"
#include "weft/memory.h"

#define PIECE_BYTES (256u << 10)
#define MAX_THREADS 8

weft_status weft_tokens_tokenize(weft_tokens *t, const char *tokenizer_path)
{
	weft_tokenizer *tok = NULL;
	weft_tokenizer_encoder *enc[MAX_THREADS] = { 0 };
	size_t max_pieces = (size_t)t->n / PIECE_BYTES + 1, n_pieces;
	size_t *ends = NULL, *lens = NULL, total = 0;
	const char **texts = NULL;
	weft_token_ids *outs = NULL;
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	int elem;
	void *buf = NULL;
	weft_status st;

	if (t->elem_bytes != 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "'%s' is already tokenized", t->source);
	st = weft_tokenizer_load(tokenizer_path, &tok);
	if (st)
		return st;
	threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
	ends = malloc(max_pieces * sizeof(*ends));
	lens = malloc(max_pieces * sizeof(*lens));
	texts = malloc(max_pieces * sizeof(*texts));
	outs = calloc(max_pieces, sizeof(*outs));
	if (!ends || !lens || !texts || !outs) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory tokenizing '%s'", t->source);
		goto out;
	}
	n_pieces = weft_tokenizer_split(tok, t->data, (size_t)t->n, PIECE_BYTES, ends, max_pieces);
	for (size_t i = 0; i < n_pieces; i++) {
		size_t start = i ? ends[i - 1] : 0;

		texts[i] = (const char *)t->data + start;
		lens[i] = ends[i] - start;
	}
	for (long i = 0; i < threads && !st; i++)
		st = weft_tokenizer_encoder_create(tok, &enc[i]);
	if (!st)
		st = weft_tokenizer_encode_many(enc, (int)threads, texts, lens, n_pieces, outs);
	if (st)
		goto out;
	for (size_t i = 0; i < n_pieces; i++)
		total += outs[i].n;
	if (total == 0) {
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "'%s' gives no tokens with tokenizer '%s'",
				    t->source, tokenizer_path);
		goto out;
	}
	elem = weft_tokenizer_vocab_size(tok) <= 65536 ? 2 : 4;
	buf = weft_mem_alloc(WEFT_MEM_OTHER, total * (size_t)elem);
	if (!buf) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory for %zu tokens of '%s'", total,
				    t->source);
		goto out;
	}
	total = 0;
	for (size_t i = 0; i < n_pieces; i++) {
		for (size_t k = 0; k < outs[i].n; k++, total++) {
			if (elem == 2)
				((uint16_t *)buf)[total] = (uint16_t)outs[i].ids[k];
			else
				((uint32_t *)buf)[total] = outs[i].ids[k];
		}
	}
	weft_mem_free(t->owned);
	t->owned = buf;
	t->data = buf;
	t->elem_bytes = elem;
	t->n = (int64_t)total;
	t->vocab = weft_tokenizer_vocab_size(tok);
out:
	if (outs)
		for (size_t i = 0; i < max_pieces; i++)
			free(outs[i].ids);
	for (int i = 0; i < MAX_THREADS; i++)
		weft_tokenizer_encoder_free(enc[i]);
	free(outs);
	free(texts);
	free(lens);
	free(ends);
	weft_tokenizer_free(tok);
	return st;
}
