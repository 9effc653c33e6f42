/* text/tokenizer.h - byte-level BPE tokenizers read from a Hugging Face
 * `tokenizer.json` (GPT-2's kind and Llama 3's kind), encode and decode.
 *
 * What is read: model.type "BPE" (vocab, merges as "a b" strings or
 * [a, b] pairs, ignore_merges, unk_token), added_tokens (special or not),
 * the pre-tokenizer (ByteLevel with use_regex, i.e. GPT-2's pattern; or a
 * Sequence of Split(Regex) + ByteLevel(use_regex false) whose pattern is
 * Llama 3's, or Qwen 2's that differs in taking digits one at a time), a
 * ByteLevel decoder and no normalizer. The regexes are matched by hand
 * (text/pretok.c) with the Unicode classes the `tokenizers` package's
 * regex engine uses (text/unicode_class.c, generated). The post-processor
 * is not applied: ids are those of `tokenizers`'
 * `encode(text, add_special_tokens=False)`.
 *
 * Text is bytes: invalid UTF-8 is encoded byte by byte (each invalid byte
 * counts as punctuation for the pre-tokenizer), so decode(encode(x)) == x
 * for any bytes x when the vocabulary holds all 256 bytes, as byte-level
 * trainers make it.
 *
 * A weft_tokenizer is read-only once loaded and may be shared by threads;
 * each thread encodes through its own weft_tokenizer_encoder (a word cache
 * and scratch space).
 */
#ifndef WEFT_TEXT_TOKENIZER_H
#define WEFT_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"

typedef struct weft_tokenizer weft_tokenizer;
typedef struct weft_tokenizer_encoder weft_tokenizer_encoder;

/* A growing array of token ids (free ids with free()). */
typedef struct weft_token_ids {
	uint32_t *ids;
	size_t n, cap;
} weft_token_ids;

/* Reads a tokenizer.json. Returns a new tokenizer in *out (free with
 * weft_tokenizer_free). Errors, each naming the file and, where there is
 * one, the JSON key: WEFT_ERR_NOT_FOUND / WEFT_ERR_IO (the file);
 * WEFT_ERR_PARSE (not JSON, line and column); WEFT_ERR_UNSUPPORTED (a
 * model, normalizer, pre-tokenizer, regex or decoder weft does not
 * implement, naming it); WEFT_ERR_CORRUPT (a merge of tokens the vocab
 * lacks, duplicate ids, ids out of range); WEFT_ERR_NOMEM. */
weft_status weft_tokenizer_load(const char *path, weft_tokenizer **out);

/* Frees a tokenizer; NULL is ignored. Its encoders must be freed first. */
void weft_tokenizer_free(weft_tokenizer *t);

/* 1 + the largest id of the vocabulary and the added tokens. */
int64_t weft_tokenizer_vocab_size(const weft_tokenizer *t);

/* The id of the token whose text is `content` (an added token's content,
 * or a vocabulary entry's bytes), or -1. */
int64_t weft_tokenizer_token_id(const weft_tokenizer *t, const char *content);

/* The end-of-text token: the first special token among <|endoftext|>,
 * <|end_of_text|>, </s>, <|im_end|>, <eos>; or -1 when none exists. */
int64_t weft_tokenizer_eos_id(const weft_tokenizer *t);

/* The bytes token `id` stands for (borrowed from t; *len gets their
 * count), or NULL for an id no token has. */
const uint8_t *weft_tokenizer_token_bytes(const weft_tokenizer *t, uint32_t id, size_t *len);

/* Whether `id` is an added token marked special. */
int weft_tokenizer_is_special(const weft_tokenizer *t, uint32_t id);

/* A new encoder for t (free with weft_tokenizer_encoder_free). Errors:
 * WEFT_ERR_NOMEM. */
weft_status weft_tokenizer_encoder_create(const weft_tokenizer *t, weft_tokenizer_encoder **out);

/* Frees an encoder; NULL is ignored. */
void weft_tokenizer_encoder_free(weft_tokenizer_encoder *e);

/* Appends the ids of `len` bytes of `text` to *out (grown with realloc;
 * start from a zeroed weft_token_ids). Added tokens in the text are
 * matched first (leftmost, then longest), the rest is pre-tokenized and
 * merged. Not thread-safe for one encoder. Errors: WEFT_ERR_NOMEM. */
weft_status weft_tokenizer_encode(weft_tokenizer_encoder *e, const char *text, size_t len,
				  weft_token_ids *out);

/* Decodes `n` ids into a new NUL-terminated string of *out_len bytes
 * (free with free()): each id's bytes, concatenated; special tokens are
 * written as their text unless skip_special. Errors: WEFT_ERR_INVALID_ARG
 * naming the first id no token has, and its position; WEFT_ERR_NOMEM. */
weft_status weft_tokenizer_decode(const weft_tokenizer *t, const uint32_t *ids, size_t n,
				  int skip_special, char **out, size_t *out_len);

/* Where text may be cut so that encoding the two sides apart gives the
 * ids of encoding the whole: returns a position in (from, len) just before
 * a ' ' that sits between two ASCII letters, searching forward from
 * `from`, or 0 when the text has none there or the tokenizer cannot be
 * cut (it adds a prefix space to each piece, or an added token holds a
 * space). No pattern weft knows puts a letter and a following space in one
 * piece, so the pre-tokenizer splits there whatever came before. */
size_t weft_tokenizer_cut_point(const weft_tokenizer *t, const char *text, size_t len,
				size_t from);

/* Encodes n texts at once on as many threads as there are encoders (one
 * per thread, all of the same tokenizer): texts[i] (lens[i] bytes) is
 * appended to outs[i], so the result does not depend on the thread count.
 * Blocks until all are done. Errors: WEFT_ERR_NOMEM; WEFT_ERR_IO when a
 * thread cannot be started. */
weft_status weft_tokenizer_encode_many(weft_tokenizer_encoder *const *encoders, int n_encoders,
				       const char *const *texts, const size_t *lens, size_t n,
				       weft_token_ids *outs);

/* Splits `len` bytes of text into pieces of about `target` bytes at
 * weft_tokenizer_cut_point positions (so they encode apart to the ids of
 * the whole), writing the end of each piece to ends[] (at most max_pieces;
 * the last end is len). Returns the count of pieces (1 when the text has
 * no cut point or the tokenizer cannot be cut). */
size_t weft_tokenizer_split(const weft_tokenizer *t, const char *text, size_t len,
			    size_t target, size_t *ends, size_t max_pieces);

#endif /* WEFT_TEXT_TOKENIZER_H */
