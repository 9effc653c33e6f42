/* Encoding and decoding: added tokens, pre-tokenization, BPE merges with
 * a per-encoder word cache. */
#include <stdlib.h>
#include <string.h>

#include "text/text_impl.h"

/* Words up to this many bytes are cached; the cache is emptied when it
 * holds CACHE_MAX words or its arenas are full (the corpus' common words
 * come back at once). About 5 MB per encoder. */
#define CACHE_WORD_MAX 48
#define CACHE_SLOTS (1u << 17)
#define CACHE_MAX (CACHE_SLOTS / 2)
#define CACHE_KEY_BYTES (1u << 20)
#define CACHE_IDS (1u << 18)

typedef struct cache_slot {
	uint64_t hash;      /* 0: empty */
	uint32_t key_off, key_len;
	uint32_t ids_off, ids_n;
} cache_slot;

typedef struct symbol {
	uint32_t id;
	int32_t prev, next; /* -1: none */
	uint32_t len;       /* bytes; 0 once merged into its left neighbour */
} symbol;

typedef struct merge_item {
	uint32_t rank, pos, id;
} merge_item;

struct weft_tokenizer_encoder {
	const weft_tokenizer *t;
	cache_slot *slots;
	size_t n_cached;
	uint8_t *keys;      /* CACHE_KEY_BYTES */
	size_t keys_len;
	uint32_t *cids;     /* CACHE_IDS cached ids */
	size_t cids_len;
	symbol *sym;
	merge_item *heap;
	size_t cap;         /* symbols and heap entries */
	uint8_t *prefixed;  /* a piece with a prefix space (add_prefix_space) */
	size_t prefixed_cap;
};

int64_t weft_tokenizer_vocab_size(const weft_tokenizer *t)
{
	return t->vocab_size;
}

const uint8_t *weft_tokenizer_token_bytes(const weft_tokenizer *t, uint32_t id, size_t *len)
{
	if ((int64_t)id >= t->vocab_size || t->tok_len[id] < 0) {
		*len = 0;
		return NULL;
	}
	*len = (size_t)t->tok_len[id];
	return t->pool + t->tok_off[id];
}

int weft_tokenizer_is_special(const weft_tokenizer *t, uint32_t id)
{
	return (int64_t)id < t->vocab_size && (t->tok_flags[id] & TXT_TOK_SPECIAL);
}

int64_t weft_tokenizer_token_id(const weft_tokenizer *t, const char *content)
{
	size_t n = strlen(content);

	for (size_t a = 0; a < t->n_added; a++)
		if (t->added[a].len == n && !memcmp(t->added[a].text, content, n))
			return t->added[a].id;
	return txt_vocab_find(t, (const uint8_t *)content, n);
}

int64_t weft_tokenizer_eos_id(const weft_tokenizer *t)
{
	static const char *const names[] = { "<|endoftext|>", "<|end_of_text|>", "</s>",
					     "<|im_end|>", "<eos>" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int64_t id = weft_tokenizer_token_id(t, names[i]);

		if (id >= 0 && weft_tokenizer_is_special(t, (uint32_t)id))
			return id;
	}
	return -1;
}

weft_status weft_tokenizer_encoder_create(const weft_tokenizer *t, weft_tokenizer_encoder **out)
{
	weft_tokenizer_encoder *e = calloc(1, sizeof(*e));

	*out = NULL;
	if (!e)
		goto out_nomem;
	e->t = t;
	e->slots = calloc(CACHE_SLOTS, sizeof(*e->slots));
	e->keys = malloc(CACHE_KEY_BYTES);
	e->cids = malloc(CACHE_IDS * sizeof(*e->cids));
	if (!e->slots || !e->keys || !e->cids)
		goto out_nomem;
	*out = e;
	return WEFT_OK;
out_nomem:
	weft_tokenizer_encoder_free(e);
	return weft_error_set(WEFT_ERR_NOMEM, "out of memory for a tokenizer's encoder");
}

void weft_tokenizer_encoder_free(weft_tokenizer_encoder *e)
{
	if (!e)
		return;
	free(e->slots);
	free(e->keys);
	free(e->cids);
	free(e->sym);
	free(e->heap);
	free(e->prefixed);
	free(e);
}

static weft_status push_id(weft_token_ids *out, uint32_t id)
{
	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 256;
		uint32_t *p = realloc(out->ids, cap * sizeof(*p));

		if (!p)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory for %zu token ids",
					      cap);
		out->ids = p;
		out->cap = cap;
	}
	out->ids[out->n++] = id;
	return WEFT_OK;
}

static int64_t merge_find(const weft_tokenizer *t, uint32_t a, uint32_t b, uint32_t *rank)
{
	uint64_t key = ((uint64_t)a << 32 | b) + 1;
	size_t slot = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (t->merge_nslots - 1);

	while (t->merges[slot].key) {
		if (t->merges[slot].key == key) {
			*rank = t->merges[slot].rank;
			return t->merges[slot].id;
		}
		slot = (slot + 1) & (t->merge_nslots - 1);
	}
	return -1;
}

/* The heap orders merges by rank, then by position: the leftmost of the
 * lowest-ranked pairs merges first, as `tokenizers` does. */
static int before(const merge_item *a, const merge_item *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(merge_item *h, size_t *n, merge_item it)
{
	size_t i = (*n)++;

	while (i > 0 && before(&it, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = it;
}

static merge_item heap_pop(merge_item *h, size_t *n)
{
	merge_item top = h[0], last = h[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && before(&h[c + 1], &h[c]))
			c++;
		if (!before(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = last;
	return top;
}

static void try_pair(weft_tokenizer_encoder *e, size_t *nh, int32_t pos)
{
	uint32_t rank;
	int32_t next = e->sym[pos].next;
	int64_t id;

	if (next < 0)
		return;
	id = merge_find(e->t, e->sym[pos].id, e->sym[next].id, &rank);
	if (id >= 0)
		heap_push(e->heap, nh, (merge_item){ .rank = rank, .pos = (uint32_t)pos,
						     .id = (uint32_t)id });
}

/* BPE of one piece: ids appended to out. */
static weft_status merge_word(weft_tokenizer_encoder *e, const uint8_t *w, size_t n,
			      weft_token_ids *out)
{
	const weft_tokenizer *t = e->t;
	int32_t count = 0, first;
	size_t nh = 0;
	weft_status st;

	if (n > e->cap) {
		size_t cap = n < 64 ? 64 : n;
		symbol *s = realloc(e->sym, cap * sizeof(*s));
		merge_item *h;

		if (!s)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory merging a %zu-byte word",
					      n);
		e->sym = s;
		/* each merge pushes at most two pairs: n initial + 2n */
		h = realloc(e->heap, 3 * cap * sizeof(*h));
		if (!h)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory merging a %zu-byte word",
					      n);
		e->heap = h;
		e->cap = cap;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t id = t->byte_id[w[i]];

		if (id < 0)
			id = t->unk_id;
		if (id < 0)
			continue; /* a byte the vocabulary lacks is dropped, as tokenizers does */
		e->sym[count] = (symbol){ .id = (uint32_t)id, .prev = count - 1, .next = count + 1,
					  .len = 1 };
		count++;
	}
	if (count == 0)
		return WEFT_OK;
	e->sym[count - 1].next = -1;
	for (int32_t i = 0; i + 1 < count; i++)
		try_pair(e, &nh, i);
	while (nh > 0) {
		merge_item m = heap_pop(e->heap, &nh);
		symbol *s = &e->sym[m.pos];
		uint32_t rank;
		int32_t next;

		if (s->len == 0 || s->next < 0)
			continue;
		next = s->next;
		if (merge_find(t, s->id, e->sym[next].id, &rank) != (int64_t)m.id)
			continue; /* the pair changed since it was pushed */
		s->id = m.id;
		s->len += e->sym[next].len;
		e->sym[next].len = 0;
		s->next = e->sym[next].next;
		if (s->next >= 0)
			e->sym[s->next].prev = (int32_t)m.pos;
		if (s->prev >= 0)
			try_pair(e, &nh, s->prev);
		try_pair(e, &nh, (int32_t)m.pos);
	}
	first = 0;
	for (int32_t i = first; i >= 0; i = e->sym[i].next) {
		st = push_id(out, e->sym[i].id);
		if (st)
			return st;
	}
	return WEFT_OK;
}

static void cache_clear(weft_tokenizer_encoder *e)
{
	memset(e->slots, 0, CACHE_SLOTS * sizeof(*e->slots));
	e->n_cached = 0;
	e->keys_len = 0;
	e->cids_len = 0;
}

static weft_status encode_piece(weft_tokenizer_encoder *e, const uint8_t *w, size_t n,
				weft_token_ids *out)
{
	const weft_tokenizer *t = e->t;
	uint64_t h;
	size_t slot, before_n;
	weft_status st;

	if (n == 1 && t->byte_id[w[0]] >= 0)
		return push_id(out, (uint32_t)t->byte_id[w[0]]);
	if (n > CACHE_WORD_MAX)
		goto uncached;
	h = txt_hash(w, n) | 1;
	slot = (size_t)h & (CACHE_SLOTS - 1);
	while (e->slots[slot].hash) {
		cache_slot *c = &e->slots[slot];

		if (c->hash == h && c->key_len == n && !memcmp(e->keys + c->key_off, w, n)) {
			for (uint32_t k = 0; k < c->ids_n; k++) {
				st = push_id(out, e->cids[c->ids_off + k]);
				if (st)
					return st;
			}
			return WEFT_OK;
		}
		slot = (slot + 1) & (CACHE_SLOTS - 1);
	}
	before_n = out->n;
	st = WEFT_OK;
	if (t->ignore_merges) {
		int64_t id = txt_vocab_find(t, w, n);

		st = id >= 0 ? push_id(out, (uint32_t)id) : merge_word(e, w, n, out);
	} else {
		st = merge_word(e, w, n, out);
	}
	if (st)
		return st;
	/* a word has at most as many ids as bytes */
	if (e->n_cached >= CACHE_MAX || e->keys_len + n > CACHE_KEY_BYTES ||
	    e->cids_len + n > CACHE_IDS) {
		cache_clear(e);
		slot = (size_t)h & (CACHE_SLOTS - 1);
	}
	e->slots[slot] = (cache_slot){ .hash = h, .key_off = (uint32_t)e->keys_len,
				       .key_len = (uint32_t)n, .ids_off = (uint32_t)e->cids_len,
				       .ids_n = (uint32_t)(out->n - before_n) };
	memcpy(e->keys + e->keys_len, w, n);
	e->keys_len += n;
	memcpy(e->cids + e->cids_len, out->ids + before_n, (out->n - before_n) * sizeof(uint32_t));
	e->cids_len += out->n - before_n;
	e->n_cached++;
	return WEFT_OK;
uncached:
	if (t->ignore_merges) {
		int64_t id = txt_vocab_find(t, w, n);

		if (id >= 0)
			return push_id(out, (uint32_t)id);
	}
	return merge_word(e, w, n, out);
}

/* Text between added tokens: pre-tokenized, each piece merged. */
static weft_status encode_segment(weft_tokenizer_encoder *e, const uint8_t *s, size_t n,
				  weft_token_ids *out)
{
	const weft_tokenizer *t = e->t;
	weft_status st;

	if (n == 0)
		return WEFT_OK;
	if (t->add_prefix_space && s[0] != ' ') {
		if (n + 1 > e->prefixed_cap) {
			uint8_t *p = realloc(e->prefixed, n + 1);

			if (!p)
				return weft_error_set(WEFT_ERR_NOMEM, "out of memory encoding %zu bytes",
						      n);
			e->prefixed = p;
			e->prefixed_cap = n + 1;
		}
		e->prefixed[0] = ' ';
		memcpy(e->prefixed + 1, s, n);
		s = e->prefixed;
		n++;
	}
	for (size_t i = 0; i < n;) {
		size_t end = txt_pretok_next(t->pattern, s, n, i);

		st = encode_piece(e, s + i, end - i, out);
		if (st)
			return st;
		i = end;
	}
	return WEFT_OK;
}

/* The longest added token at s[i], or NULL. */
static const txt_added *added_at(const weft_tokenizer *t, const uint8_t *s, size_t n, size_t i)
{
	size_t lo = 0, hi = t->n_added;

	/* first token starting with s[i] (sorted by first byte) */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->added[mid].text[0] < s[i])
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t a = lo; a < t->n_added && t->added[a].text[0] == s[i]; a++) {
		const txt_added *ad = &t->added[a];

		if (ad->len <= n - i && !memcmp(s + i, ad->text, ad->len))
			return ad; /* longest first */
	}
	return NULL;
}

weft_status weft_tokenizer_encode(weft_tokenizer_encoder *e, const char *text, size_t len,
				  weft_token_ids *out)
{
	const weft_tokenizer *t = e->t;
	const uint8_t *s = (const uint8_t *)text;
	size_t start = 0;
	weft_status st;

	for (size_t i = 0; i < len; i++) {
		const txt_added *ad;

		if (!t->added_first[s[i]] || !(ad = added_at(t, s, len, i)))
			continue;
		st = encode_segment(e, s + start, i - start, out);
		if (!st)
			st = push_id(out, ad->id);
		if (st)
			return st;
		i += ad->len - 1;
		start = i + 1;
	}
	return encode_segment(e, s + start, len - start, out);
}

weft_status weft_tokenizer_decode(const weft_tokenizer *t, const uint32_t *ids, size_t n,
				  int skip_special, char **out, size_t *out_len)
{
	size_t total = 0, len;
	char *buf;

	*out = NULL;
	*out_len = 0;
	for (size_t i = 0; i < n; i++) {
		if (!weft_tokenizer_token_bytes(t, ids[i], &len))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "token id %u at position %zu is "
					      "not in tokenizer '%s' (vocabulary of %lld ids)", ids[i],
					      i, t->path, (long long)t->vocab_size);
		if (!(skip_special && weft_tokenizer_is_special(t, ids[i])))
			total += len;
	}
	buf = malloc(total + 1);
	if (!buf)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory decoding %zu tokens", n);
	total = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *b = weft_tokenizer_token_bytes(t, ids[i], &len);

		if (skip_special && weft_tokenizer_is_special(t, ids[i]))
			continue;
		memcpy(buf + total, b, len);
		total += len;
	}
	buf[total] = 0;
	*out = buf;
	*out_len = total;
	return WEFT_OK;
}

static int ascii_letter(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

size_t weft_tokenizer_cut_point(const weft_tokenizer *t, const char *text, size_t len,
				size_t from)
{
	const uint8_t *s = (const uint8_t *)text;

	if (t->add_prefix_space || t->added_has_space)
		return 0;
	for (size_t i = from > 0 ? from : 1; i + 1 < len; i++) {
		if (s[i] == ' ' && ascii_letter(s[i - 1]) && ascii_letter(s[i + 1]))
			return i;
	}
	return 0;
}
