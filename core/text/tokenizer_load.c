/* Reading a Hugging Face tokenizer.json into a weft_tokenizer. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "text/text_impl.h"
#include "weft/memory.h"

/* GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for
 * themselves, the other 68 bytes for U+0100 on, in byte order. */
static void byte_level_maps(uint16_t byte_to_cp[256], int16_t cp_to_byte[324])
{
	int next = 256;

	for (int i = 0; i < 324; i++)
		cp_to_byte[i] = -1;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;

		byte_to_cp[b] = (uint16_t)(printable ? b : next++);
		cp_to_byte[byte_to_cp[b]] = (int16_t)b;
	}
}

/* Turns a byte-level token (UTF-8 of mapped code points) into the bytes it
 * stands for, in place (never longer; s is left as it was when it fails).
 * Returns the byte count, or -1 when a character is not one of the 256 of
 * the map. */
static long unmap_bytes(char *s, const int16_t cp_to_byte[324])
{
	const uint8_t *p = (const uint8_t *)s;
	size_t n = strlen(s);
	long out = 0;

	for (int write = 0; write < 2; write++) {
		out = 0;
		for (size_t i = 0; i < n;) {
			uint32_t cp;

			if (p[i] < 0x80) {
				cp = p[i];
				i += 1;
			} else if ((p[i] & 0xe0) == 0xc0 && i + 1 < n) {
				cp = (uint32_t)(p[i] & 0x1f) << 6 | (p[i + 1] & 0x3f);
				i += 2;
			} else {
				return -1; /* every mapped code point is below U+0800 */
			}
			if (cp >= 324 || cp_to_byte[cp] < 0)
				return -1;
			if (write)
				s[out] = (char)cp_to_byte[cp];
			out++;
		}
	}
	return out;
}

static weft_status fail(weft_tokenizer *t, weft_status code, const char *fmt, const char *a,
			const char *b)
{
	char msg[768];

	snprintf(msg, sizeof(msg), fmt, a, b);
	return weft_error_set(code, "tokenizer '%s': %s", t->path, msg);
}

static weft_status pool_add(weft_tokenizer *t, const void *s, size_t n, int64_t *off)
{
	if (t->pool_len + n > t->pool_cap) {
		size_t cap = t->pool_cap ? t->pool_cap * 2 : 1 << 16;
		uint8_t *p;

		while (cap < t->pool_len + n)
			cap *= 2;
		p = realloc(t->pool, cap);
		if (!p)
			return weft_error_set(WEFT_ERR_NOMEM, "out of memory reading tokenizer '%s'",
					      t->path);
		t->pool = p;
		t->pool_cap = cap;
	}
	memcpy(t->pool + t->pool_len, s, n);
	*off = (int64_t)t->pool_len;
	t->pool_len += n;
	return WEFT_OK;
}

static const char *str_of(const weft_json_value *v)
{
	return v && v->kind == WEFT_JSON_STRING ? v->string : NULL;
}

static int is_true(const weft_json_value *v)
{
	return v && v->kind == WEFT_JSON_BOOL && v->boolean;
}

static int is_null(const weft_json_value *v)
{
	return !v || v->kind == WEFT_JSON_NULL;
}

static weft_status check_model(weft_tokenizer *t, const weft_json_value *model)
{
	const char *type = str_of(weft_json_get(model, "type"));
	const weft_json_value *v;

	if (!model || model->kind != WEFT_JSON_OBJECT)
		return fail(t, WEFT_ERR_CORRUPT, "has no 'model' object%s%s", "", "");
	if (type && strcmp(type, "BPE"))
		return fail(t, WEFT_ERR_UNSUPPORTED, "model.type is '%s'; weft reads byte-level "
			    "BPE tokenizers only%s", type, "");
	v = weft_json_get(model, "dropout");
	if (!is_null(v) && !(v->kind == WEFT_JSON_NUMBER && v->number == 0))
		return fail(t, WEFT_ERR_UNSUPPORTED, "model.dropout is set; BPE dropout is for "
			    "training a tokenizer, weft encodes without it: remove it%s%s", "", "");
	if (is_true(weft_json_get(model, "byte_fallback")))
		return fail(t, WEFT_ERR_UNSUPPORTED, "model.byte_fallback is true (a "
			    "SentencePiece-style BPE); weft reads byte-level BPE only%s%s", "", "");
	for (int k = 0; k < 2; k++) {
		const char *key = k ? "end_of_word_suffix" : "continuing_subword_prefix";
		const char *s = str_of(weft_json_get(model, key));

		if (s && *s)
			return fail(t, WEFT_ERR_UNSUPPORTED, "model.%s is '%s'; weft reads "
				    "byte-level BPE without word affixes", key, s);
	}
	t->ignore_merges = is_true(weft_json_get(model, "ignore_merges"));
	return WEFT_OK;
}

static weft_status check_pipeline(weft_tokenizer *t, const weft_json_value *root)
{
	const weft_json_value *norm = weft_json_get(root, "normalizer");
	const weft_json_value *pre = weft_json_get(root, "pre_tokenizer");
	const weft_json_value *dec = weft_json_get(root, "decoder");
	const char *type;

	if (!is_null(norm))
		return fail(t, WEFT_ERR_UNSUPPORTED, "normalizer '%s' is not supported (weft "
			    "reads byte-level BPE tokenizers without a normalizer, as GPT-2's "
			    "and Llama 3's are)%s", str_of(weft_json_get(norm, "type"))
			    ? str_of(weft_json_get(norm, "type")) : "?", "");
	type = str_of(weft_json_get(dec, "type"));
	if (!type || strcmp(type, "ByteLevel"))
		return fail(t, WEFT_ERR_UNSUPPORTED, "decoder '%s' is not supported; weft "
			    "decodes byte-level BPE (decoder ByteLevel)%s", type ? type : "null", "");
	type = str_of(weft_json_get(pre, "type"));
	if (type && !strcmp(type, "ByteLevel")) {
		const weft_json_value *re = weft_json_get(pre, "use_regex");

		if (re && re->kind == WEFT_JSON_BOOL && !re->boolean)
			return fail(t, WEFT_ERR_UNSUPPORTED, "pre_tokenizer is ByteLevel without "
				    "a regex; weft needs GPT-2's regex (use_regex true) or a Split "
				    "before it%s%s", "", "");
		t->pattern = TXT_PAT_GPT2;
		t->add_prefix_space = is_true(weft_json_get(pre, "add_prefix_space"));
		return WEFT_OK;
	}
	if (type && !strcmp(type, "Sequence")) {
		const weft_json_value *seq = weft_json_get(pre, "pretokenizers");
		const weft_json_value *split, *bl;
		const char *pat, *beh, *bltype;

		if (!seq || seq->kind != WEFT_JSON_ARRAY || seq->count != 2)
			goto unknown;
		split = &seq->items[0];
		bl = &seq->items[1];
		pat = str_of(weft_json_get(weft_json_get(split, "pattern"), "Regex"));
		beh = str_of(weft_json_get(split, "behavior"));
		bltype = str_of(weft_json_get(bl, "type"));
		if (!pat || !beh || !bltype || strcmp(bltype, "ByteLevel") ||
		    is_true(weft_json_get(split, "invert")))
			goto unknown;
		if (strcmp(beh, "Isolated"))
			return fail(t, WEFT_ERR_UNSUPPORTED, "pre_tokenizer Split has behavior "
				    "'%s'; weft implements 'Isolated' (as Llama 3's)%s", beh, "");
		if (is_true(weft_json_get(bl, "use_regex")) ||
		    is_true(weft_json_get(bl, "add_prefix_space")))
			return fail(t, WEFT_ERR_UNSUPPORTED, "pre_tokenizer ByteLevel after a "
				    "Split must have use_regex and add_prefix_space false, as Llama "
				    "3's has%s%s", "", "");
		for (int p = 0; p < 3; p++) {
			if (!strcmp(pat, txt_pattern_source[p])) {
				t->pattern = (txt_pattern)p;
				return WEFT_OK;
			}
		}
		return fail(t, WEFT_ERR_UNSUPPORTED, "pre_tokenizer regex '%s' is not one weft "
			    "matches (GPT-2's, Llama 3's or Qwen 2's, character for "
			    "character)%s", pat, "");
	}
unknown:
	return fail(t, WEFT_ERR_UNSUPPORTED, "pre_tokenizer '%s' is not supported: weft reads "
		    "ByteLevel (GPT-2) or Sequence[Split(Regex), ByteLevel] (Llama 3)%s",
		    type ? type : "null", "");
}

static weft_status set_token(weft_tokenizer *t, int64_t id, const void *s, size_t n)
{
	int64_t off;
	weft_status st = pool_add(t, s, n, &off);

	if (st)
		return st;
	t->tok_off[id] = off;
	t->tok_len[id] = (int32_t)n;
	return WEFT_OK;
}

static weft_status vocab_put(weft_tokenizer *t, uint32_t id, const char *name)
{
	const uint8_t *s = t->pool + t->tok_off[id];
	size_t n = (size_t)t->tok_len[id];
	size_t slot = txt_hash(s, n) & (t->vocab_nslots - 1);

	while (t->vocab_slots[slot]) {
		uint32_t other = t->vocab_slots[slot] - 1;

		if ((size_t)t->tok_len[other] == n && !memcmp(t->pool + t->tok_off[other], s, n))
			return fail(t, WEFT_ERR_CORRUPT, "model.vocab has '%s' twice (as bytes): "
				    "a vocabulary maps each token to one id%s", name, "");
		slot = (slot + 1) & (t->vocab_nslots - 1);
	}
	t->vocab_slots[slot] = id + 1;
	return WEFT_OK;
}

int64_t txt_vocab_find(const weft_tokenizer *t, const uint8_t *s, size_t n)
{
	size_t slot = txt_hash(s, n) & (t->vocab_nslots - 1);

	while (t->vocab_slots[slot]) {
		uint32_t id = t->vocab_slots[slot] - 1;

		if ((size_t)t->tok_len[id] == n && !memcmp(t->pool + t->tok_off[id], s, n))
			return id;
		slot = (slot + 1) & (t->vocab_nslots - 1);
	}
	return -1;
}

static size_t pow2_above(size_t n)
{
	size_t s = 16;

	while (s < 2 * n)
		s *= 2;
	return s;
}

static int by_first_then_longest(const void *a, const void *b)
{
	const txt_added *x = a, *y = b;

	if (x->text[0] != y->text[0])
		return x->text[0] < y->text[0] ? -1 : 1;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return 0;
}

/* The added tokens: their ids, and their texts in the pool. */
static weft_status read_added(weft_tokenizer *t, const weft_json_value *added,
			      int64_t *max_id)
{
	if (is_null(added))
		return WEFT_OK;
	if (added->kind != WEFT_JSON_ARRAY)
		return fail(t, WEFT_ERR_CORRUPT, "added_tokens is not a list%s%s", "", "");
	t->added = calloc(added->count + 1, sizeof(*t->added));
	if (!t->added)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory reading '%s'", t->path);
	for (size_t i = 0; i < added->count; i++) {
		const weft_json_value *a = &added->items[i], *id = weft_json_get(a, "id");
		const char *content = str_of(weft_json_get(a, "content"));

		if (!content || !*content || !id || !id->is_integer || id->integer < 0 ||
		    id->integer >= INT32_MAX)
			return fail(t, WEFT_ERR_CORRUPT, "an entry of added_tokens lacks a "
				    "non-empty 'content' or an 'id' in [0, 2^31) (content '%s')%s",
				    content ? content : "?", "");
		if (is_true(weft_json_get(a, "single_word")) || is_true(weft_json_get(a, "lstrip")) ||
		    is_true(weft_json_get(a, "rstrip")))
			return fail(t, WEFT_ERR_UNSUPPORTED, "added token '%s' sets single_word, "
				    "lstrip or rstrip, which weft does not implement; set them to "
				    "false%s", content, "");
		t->added[t->n_added].id = (uint32_t)id->integer;
		t->added[t->n_added].len = (uint32_t)strlen(content);
		t->added[t->n_added].special = is_true(weft_json_get(a, "special"));
		/* text points into the JSON tree until the pool is final */
		t->added[t->n_added].text = (const uint8_t *)content;
		t->n_added++;
		if (id->integer > *max_id)
			*max_id = id->integer;
	}
	return WEFT_OK;
}

static weft_status read_vocab(weft_tokenizer *t, const weft_json_value *vocab,
			      const int16_t cp_to_byte[324])
{
	weft_status st;

	for (size_t i = 0; i < vocab->count; i++) {
		char *name = vocab->keys[i];
		int64_t id = vocab->items[i].integer;
		long n;

		if (t->tok_len[id] >= 0)
			return weft_error_set(WEFT_ERR_CORRUPT, "tokenizer '%s': model.vocab gives "
					      "id %lld to two tokens (the second is '%s')", t->path,
					      (long long)id, name);
		n = unmap_bytes(name, cp_to_byte); /* rewrites the key in place */
		if (n < 0) {
			int added = 0;

			for (size_t a = 0; a < t->n_added; a++)
				added |= t->added[a].id == (uint32_t)id;
			if (added)
				continue; /* decoded through its added token */
			return fail(t, WEFT_ERR_UNSUPPORTED, "model.vocab entry '%s' is not "
				    "byte-level: it has characters outside GPT-2's byte-to-unicode "
				    "map%s", name, "");
		}
		st = set_token(t, id, name, (size_t)n);
		if (!st)
			st = vocab_put(t, (uint32_t)id, name);
		if (st)
			return st;
		if (n == 1)
			t->byte_id[(uint8_t)name[0]] = (int32_t)id;
	}
	return WEFT_OK;
}

static weft_status merge_put(weft_tokenizer *t, uint32_t a, uint32_t b, uint32_t rank,
			     uint32_t id)
{
	uint64_t key = ((uint64_t)a << 32 | b) + 1;
	size_t slot = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (t->merge_nslots - 1);

	while (t->merges[slot].key) {
		if (t->merges[slot].key == key)
			return WEFT_OK; /* a repeated merge keeps its first rank */
		slot = (slot + 1) & (t->merge_nslots - 1);
	}
	t->merges[slot].key = key;
	t->merges[slot].rank = rank;
	t->merges[slot].id = id;
	return WEFT_OK;
}

static weft_status read_merges(weft_tokenizer *t, const weft_json_value *merges,
			       const int16_t cp_to_byte[324])
{
	char buf[2048];

	t->merge_nslots = pow2_above(merges->count);
	t->merges = calloc(t->merge_nslots, sizeof(*t->merges));
	if (!t->merges)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory reading '%s'", t->path);
	for (size_t r = 0; r < merges->count; r++) {
		const weft_json_value *m = &merges->items[r];
		char *left, *right;
		long ln, rn;
		int64_t a, b, id;
		char joined[2048];

		if (m->kind == WEFT_JSON_STRING && strlen(m->string) < sizeof(buf)) {
			char *sp;

			strcpy(buf, m->string);
			sp = strchr(buf + 1, ' ');
			if (!sp)
				return fail(t, WEFT_ERR_CORRUPT, "model.merges entry '%s' is not "
					    "two tokens separated by a space%s", m->string, "");
			*sp = 0;
			left = buf;
			right = sp + 1;
		} else if (m->kind == WEFT_JSON_ARRAY && m->count == 2 && str_of(&m->items[0]) &&
			   str_of(&m->items[1]) &&
			   strlen(m->items[0].string) + strlen(m->items[1].string) + 2 <
				   sizeof(buf)) {
			size_t l = strlen(m->items[0].string);

			memcpy(buf, m->items[0].string, l + 1);
			left = buf;
			right = buf + l + 1;
			strcpy(right, m->items[1].string);
		} else {
			return fail(t, WEFT_ERR_CORRUPT, "model.merges has an entry that is neither "
				    "\"a b\" nor [\"a\", \"b\"]%s%s", "", "");
		}
		snprintf(joined, sizeof(joined), "%s + %s", left, right);
		ln = unmap_bytes(left, cp_to_byte);
		rn = unmap_bytes(right, cp_to_byte);
		a = ln < 0 ? -1 : txt_vocab_find(t, (const uint8_t *)left, (size_t)ln);
		b = rn < 0 ? -1 : txt_vocab_find(t, (const uint8_t *)right, (size_t)rn);
		if (a < 0 || b < 0)
			return fail(t, WEFT_ERR_CORRUPT, "model.merges entry '%s' names a token "
				    "model.vocab lacks%s", joined, "");
		memmove(left + ln, right, (size_t)rn);
		id = txt_vocab_find(t, (const uint8_t *)left, (size_t)(ln + rn));
		if (id < 0)
			return fail(t, WEFT_ERR_CORRUPT, "model.merges entry '%s' makes a token "
				    "model.vocab lacks%s", joined, "");
		merge_put(t, (uint32_t)a, (uint32_t)b, (uint32_t)r, (uint32_t)id);
	}
	return WEFT_OK;
}

static weft_status build(weft_tokenizer *t, weft_json_value *root)
{
	const weft_json_value *model = weft_json_get(root, "model"), *vocab, *merges, *unk;
	uint16_t byte_to_cp[256];
	int16_t cp_to_byte[324];
	int64_t max_id = -1;
	weft_status st;

	byte_level_maps(byte_to_cp, cp_to_byte);
	if ((st = check_model(t, model)) || (st = check_pipeline(t, root)))
		return st;
	vocab = weft_json_get(model, "vocab");
	merges = weft_json_get(model, "merges");
	if (!vocab || vocab->kind != WEFT_JSON_OBJECT || !merges ||
	    merges->kind != WEFT_JSON_ARRAY)
		return fail(t, WEFT_ERR_CORRUPT, "model lacks 'vocab' (an object) or 'merges' (a "
			    "list)%s%s", "", "");
	for (size_t i = 0; i < vocab->count; i++) {
		const weft_json_value *v = &vocab->items[i];

		if (v->kind != WEFT_JSON_NUMBER || !v->is_integer || v->integer < 0 ||
		    v->integer >= INT32_MAX)
			return fail(t, WEFT_ERR_CORRUPT, "model.vocab['%s'] is not an id in [0, "
				    "2^31)%s", vocab->keys[i], "");
		if (v->integer > max_id)
			max_id = v->integer;
	}
	st = read_added(t, weft_json_get(root, "added_tokens"), &max_id);
	if (st)
		return st;
	if (max_id < 0)
		return fail(t, WEFT_ERR_CORRUPT, "has an empty vocabulary%s%s", "", "");
	t->vocab_size = max_id + 1;
	t->tok_off = calloc((size_t)t->vocab_size, sizeof(*t->tok_off));
	t->tok_len = malloc((size_t)t->vocab_size * sizeof(*t->tok_len));
	t->tok_flags = calloc((size_t)t->vocab_size, 1);
	t->vocab_nslots = pow2_above(vocab->count);
	t->vocab_slots = calloc(t->vocab_nslots, sizeof(*t->vocab_slots));
	if (!t->tok_off || !t->tok_len || !t->tok_flags || !t->vocab_slots)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory reading '%s'", t->path);
	for (int64_t i = 0; i < t->vocab_size; i++)
		t->tok_len[i] = -1;
	for (int b = 0; b < 256; b++)
		t->byte_id[b] = -1;
	if ((st = read_vocab(t, vocab, cp_to_byte)) || (st = read_merges(t, merges, cp_to_byte)))
		return st;
	t->unk_id = -1;
	unk = weft_json_get(model, "unk_token");
	if (str_of(unk)) {
		size_t n = strlen(unk->string);

		/* an added token's id, else the vocabulary's (bpe.c looks up the
		 * same way; the added texts still point into the JSON tree here) */
		for (size_t a = 0; a < t->n_added && t->unk_id < 0; a++)
			if (t->added[a].len == n && !memcmp(t->added[a].text, unk->string, n))
				t->unk_id = t->added[a].id;
		if (t->unk_id < 0)
			t->unk_id = txt_vocab_find(t, (const uint8_t *)unk->string, n);
		if (t->unk_id < 0)
			return fail(t, WEFT_ERR_CORRUPT, "model.unk_token '%s' is not in the "
				    "vocabulary%s", unk->string, "");
	}
	/* added tokens decode as their content (over a vocab entry of the same id) */
	for (size_t a = 0; a < t->n_added; a++) {
		txt_added *ad = &t->added[a];

		st = set_token(t, ad->id, ad->text, ad->len);
		if (st)
			return st;
		t->tok_flags[ad->id] = TXT_TOK_ADDED | (ad->special ? TXT_TOK_SPECIAL : 0);
	}
	for (size_t a = 0; a < t->n_added; a++) {
		txt_added *ad = &t->added[a];

		ad->text = t->pool + t->tok_off[ad->id];
		t->added_first[ad->text[0]] = 1;
		t->added_has_space |= memchr(ad->text, ' ', ad->len) != NULL;
	}
	if (t->n_added)
		qsort(t->added, t->n_added, sizeof(*t->added), by_first_then_longest);
	return WEFT_OK;
}

weft_status weft_tokenizer_load(const char *path, weft_tokenizer **out)
{
	weft_json_value *root = NULL;
	weft_tokenizer *t;
	weft_status st;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory reading '%s'", path);
	snprintf(t->path, sizeof(t->path), "%s", path);
	st = weft_json_parse_file(path, &root);
	if (st) {
		st = weft_error_wrap(st, "reading tokenizer '%s' (a Hugging Face tokenizer.json)",
				     path);
		goto out_free;
	}
	st = build(t, root);
	weft_json_free(root);
	if (st)
		goto out_free;
	*out = t;
	return WEFT_OK;
out_free:
	weft_tokenizer_free(t);
	return st;
}

void weft_tokenizer_free(weft_tokenizer *t)
{
	if (!t)
		return;
	free(t->tok_off);
	free(t->tok_len);
	free(t->tok_flags);
	free(t->pool);
	free(t->vocab_slots);
	free(t->merges);
	free(t->added);
	free(t);
}
