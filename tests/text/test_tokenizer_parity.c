/* weft's byte-level BPE encodes the ~1 MB test text (tok_corpus.h) to the
 * very ids the `tokenizers` package gives, for a GPT-2-style and a
 * Llama-3-style tokenizer (tolerance: none; every document's id count and
 * hash must match the fixture make_tokenizer.py wrote), and decoding those
 * ids gives the text back byte for byte. */
#include <inttypes.h>
#include <time.h>

#include "text/tokenizer.h"
#include "tok_corpus.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check_one(const char *name, const tok_doc *docs)
{
	char file[64], line[256];
	weft_tokenizer *t;
	weft_tokenizer_encoder *e;
	FILE *f;
	size_t bytes = 0, ids_total = 0;
	int mismatches = 0;
	double t0, secs = 0;

	snprintf(file, sizeof(file), "%s.json", name);
	WT_OK(weft_tokenizer_load(tok_fixture(file), &t));
	WT_OK(weft_tokenizer_encoder_create(t, &e));
	snprintf(file, sizeof(file), "expected_%s.txt", name);
	f = fopen(tok_fixture(file), "r");
	WT_REQUIRE(f);
	WT_REQUIRE(fgets(line, sizeof(line), f)); /* the comment line */
	for (size_t d = 0; d < TOK_N_DOCS; d++) {
		weft_token_ids ids = { 0 };
		size_t want_n;
		uint64_t want_h, got_h;
		char *back;
		size_t back_len;

		WT_REQUIRE(fgets(line, sizeof(line), f));
		WT_REQUIRE(sscanf(line, "%zu %" SCNx64, &want_n, &want_h) == 2);
		t0 = now();
		WT_OK(weft_tokenizer_encode(e, docs[d].text, docs[d].len, &ids));
		secs += now() - t0;
		got_h = tok_fnv(ids.ids, ids.n);
		bytes += docs[d].len;
		ids_total += ids.n;
		if (ids.n != want_n || got_h != want_h) {
			if (mismatches++ < 3)
				fprintf(stderr, "%s: document %zu: %zu ids (hash %016" PRIx64 "), "
					"tokenizers gives %zu (hash %016" PRIx64 ")\n", name, d,
					ids.n, got_h, want_n, want_h);
		}
		WT_OK(weft_tokenizer_decode(t, ids.ids, ids.n, 0, &back, &back_len));
		WT_CHECK(back_len == docs[d].len && !memcmp(back, docs[d].text, back_len));
		free(back);
		free(ids.ids);
	}
	fclose(f);
	WT_CHECK(mismatches == 0);
	WT_CHECK(bytes >= 1000000); /* the issue asks for at least 1 MB of text */
	fprintf(stderr, "%s: %zu bytes -> %zu ids, %d of %d documents differ; %.1f MB/s\n", name,
		bytes, ids_total, mismatches, TOK_N_DOCS, (double)bytes / secs / 1e6);
	weft_tokenizer_encoder_free(e);
	weft_tokenizer_free(t);
}

int main(void)
{
	tok_doc *docs = tok_corpus();

	check_one("gpt2_style", docs);
	check_one("llama3_style", docs);
	tok_corpus_free(docs);
	return wt_done("test_tokenizer_parity");
}
