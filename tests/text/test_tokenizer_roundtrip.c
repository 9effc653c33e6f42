/* decode(encode(x)) == x for bytes no Python string can hold (invalid
 * UTF-8, NUL, lone surrogates, cut sequences) and for texts mixing special
 * tokens with their near misses; special tokens encode to their one id
 * and decoding can skip them; random byte strings round-trip too. */
#include "text/tokenizer.h"
#include "tok_corpus.h"

static weft_token_ids enc(weft_tokenizer_encoder *e, const char *s, size_t n)
{
	weft_token_ids ids = { 0 };

	WT_OK(weft_tokenizer_encode(e, s, n, &ids));
	return ids;
}

static int round_trips(const weft_tokenizer *t, weft_tokenizer_encoder *e, const char *s,
		       size_t n)
{
	weft_token_ids ids = enc(e, s, n);
	char *back;
	size_t len;
	int ok;

	WT_OK(weft_tokenizer_decode(t, ids.ids, ids.n, 0, &back, &len));
	ok = len == n && !memcmp(back, s, n);
	free(back);
	free(ids.ids);
	return ok;
}

static void check(const char *file, const char *eos_text)
{
#define C(lit) { lit, sizeof(lit) - 1 }
	static const struct { const char *s; size_t n; } cases[] = {
		C("\xff\xfe plain \x80\x81"),
		C("caf\xc3 cut \xe4\xb8 and \xf0\x9f\x99 ends"),
		C("overlong \xc0\x80 and \xe0\x80\x80 surrogate \xed\xa0\x80 big \xf4\x90\x80\x80"),
		C("nul \0 in \0\0 text"),
		C("\xc3"),
		C("'\xff's 'S 'LL x\xffy 1\xff" "2"),
		C("<|endoftext|><|end_of_text|><|endoftext|"),
		C("<|<|endoftext|>|>"),
		C(" \xff\n\n\xff  \r\n\xff\t"),
	};
#undef C
	char path[1024];
	weft_tokenizer *t;
	weft_tokenizer_encoder *e;
	weft_token_ids ids;
	int64_t eos;
	char *back;
	size_t len;
	uint64_t x = 12345;

	snprintf(path, sizeof(path), "%s", tok_fixture(file));
	WT_OK(weft_tokenizer_load(path, &t));
	WT_OK(weft_tokenizer_encoder_create(t, &e));
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int ok = round_trips(t, e, cases[c].s, cases[c].n);

		WT_CHECK(ok);
		if (!ok)
			fprintf(stderr, "%s: case %zu does not round-trip\n", file, c);
	}
	/* the end-of-text token: found, one id, skipped on request */
	eos = weft_tokenizer_eos_id(t);
	WT_CHECK(eos >= 0 && eos == weft_tokenizer_token_id(t, eos_text));
	WT_CHECK(weft_tokenizer_is_special(t, (uint32_t)eos));
	ids = enc(e, eos_text, strlen(eos_text));
	WT_CHECK(ids.n == 1 && ids.ids[0] == (uint32_t)eos);
	free(ids.ids);
	ids = enc(e, "ab", 2);
	{
		weft_token_ids with = enc(e, "ab", 2);

		WT_OK(weft_tokenizer_encode(e, eos_text, strlen(eos_text), &with));
		WT_OK(weft_tokenizer_encode(e, "ab", 2, &with));
		WT_OK(weft_tokenizer_decode(t, with.ids, with.n, 1, &back, &len));
		WT_CHECK(len == 4 && !memcmp(back, "abab", 4));
		free(back);
		free(with.ids);
	}
	free(ids.ids);
	/* random bytes, biased toward the bytes the matchers look at */
	for (int r = 0; r < 2000; r++) {
		static const char pick[] = " \t\r\n'sStL1a\xc3\xa9\xff\x80\xe4<|>";
		char buf[64];
		size_t n = tok_rng_next(&x) % sizeof(buf);
		int ok;

		for (size_t i = 0; i < n; i++) {
			uint64_t v = tok_rng_next(&x);

			buf[i] = v % 3 ? pick[(v >> 8) % (sizeof(pick) - 1)] : (char)(v >> 16);
		}
		ok = round_trips(t, e, buf, n);
		WT_CHECK(ok);
		if (!ok)
			break;
	}
	weft_tokenizer_encoder_free(e);
	weft_tokenizer_free(t);
}

int main(void)
{
	check("gpt2_style.json", "<|endoftext|>");
	check("llama3_style.json", "<|end_of_text|>");
	return wt_done("test_tokenizer_roundtrip");
}
