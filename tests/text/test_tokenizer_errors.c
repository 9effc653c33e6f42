/* Every tokenizer.json weft cannot read is refused with one message that
 * names the file, the key and what to do; a minimal file with merges in
 * the older "a b" spelling loads and merges. */
#include <unistd.h>

#include "text/tokenizer.h"
#include "weft/weft.h"
#include "weft_test.h"

static char dir[] = "/tmp/weft_tok_errXXXXXX";

static const char *write_json(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	WT_REQUIRE(f);
	fputs(text, f);
	fclose(f);
	return path;
}

#define PRE_GPT2 "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true}"
#define DEC "\"decoder\":{\"type\":\"ByteLevel\"}"
#define ADDED "\"added_tokens\":[{\"id\":3,\"content\":\"<|endoftext|>\",\"special\":true}]"
#define MODEL(merges) "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}," \
		      "\"merges\":" merges "}"

int main(void)
{
	weft_tokenizer *t = NULL;
	weft_tokenizer_encoder *e;
	weft_token_ids ids = { 0 };
	uint32_t bad = 99;
	char *out;
	size_t len;
	const char *p;

	WT_REQUIRE(mkdtemp(dir));
	/* the older merges spelling, and the merge applied */
	p = write_json("ok.json", "{" MODEL("[\"a b\"]") "," PRE_GPT2 "," DEC "," ADDED "}");
	WT_OK(weft_tokenizer_load(p, &t));
	WT_OK(weft_tokenizer_encoder_create(t, &e));
	WT_OK(weft_tokenizer_encode(e, "aab<|endoftext|>", 16, &ids));
	WT_CHECK(ids.n == 3 && ids.ids[0] == 0 && ids.ids[1] == 2 && ids.ids[2] == 3);
	WT_CHECK(weft_tokenizer_vocab_size(t) == 4);
	WT_CHECK(weft_tokenizer_eos_id(t) == 3);
	WT_FAILS(weft_tokenizer_decode(t, &bad, 1, 0, &out, &len), WEFT_ERR_INVALID_ARG,
		 "token id 99 at position 0", "vocabulary of 4 ids");
	free(ids.ids);
	weft_tokenizer_encoder_free(e);
	weft_tokenizer_free(t);

	/* a byte the vocabulary lacks becomes unk_token */
	p = write_json("unk.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,"
		       "\"ab\":2,\"<unk>\":3},\"merges\":[\"a b\"],\"unk_token\":\"<unk>\"},"
		       PRE_GPT2 "," DEC "}");
	WT_OK(weft_tokenizer_load(p, &t));
	WT_OK(weft_tokenizer_encoder_create(t, &e));
	ids = (weft_token_ids){ 0 };
	WT_OK(weft_tokenizer_encode(e, "azb", 3, &ids));
	WT_CHECK(ids.n == 3 && ids.ids[0] == 0 && ids.ids[1] == 3 && ids.ids[2] == 1);
	WT_CHECK(weft_tokenizer_eos_id(t) == -1);
	free(ids.ids);
	weft_tokenizer_encoder_free(e);
	weft_tokenizer_free(t);
	p = write_json("unk2.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},"
		       "\"merges\":[],\"unk_token\":\"<unk>\"}," PRE_GPT2 "," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_CORRUPT, "unk_token '<unk>'");

	WT_FAILS(weft_tokenizer_load("/nonexistent/tokenizer.json", &t), WEFT_ERR_NOT_FOUND,
		 "/nonexistent/tokenizer.json");
	p = write_json("broken.json", "{\"model\": [");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_PARSE, "broken.json", "tokenizer.json");
	p = write_json("wordpiece.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}},"
		       PRE_GPT2 "," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_UNSUPPORTED, "wordpiece.json",
		 "model.type is 'WordPiece'", "byte-level BPE");
	p = write_json("norm.json", "{" MODEL("[]") ",\"normalizer\":{\"type\":\"NFC\"},"
		       PRE_GPT2 "," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_UNSUPPORTED, "normalizer 'NFC'");
	p = write_json("regex.json", "{" MODEL("[]") ",\"pre_tokenizer\":{\"type\":\"Sequence\","
		       "\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},"
		       "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
		       "\"use_regex\":false}]}," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_UNSUPPORTED, "regex '\\w+'", "Llama 3's");
	p = write_json("pre.json", "{" MODEL("[]") ",\"pre_tokenizer\":{\"type\":\"Whitespace\"},"
		       DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_UNSUPPORTED, "pre_tokenizer 'Whitespace'");
	p = write_json("dec.json", "{" MODEL("[]") "," PRE_GPT2 ",\"decoder\":{\"type\":"
		       "\"WordPiece\"}}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_UNSUPPORTED, "decoder 'WordPiece'");
	p = write_json("merge.json", "{" MODEL("[\"a c\"]") "," PRE_GPT2 "," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_CORRUPT, "merges entry 'a + c'",
		 "lacks");
	p = write_json("merge2.json", "{" MODEL("[\"b a\"]") "," PRE_GPT2 "," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_CORRUPT, "'b + a' makes a token");
	p = write_json("strip.json", "{" MODEL("[]") "," PRE_GPT2 "," DEC ",\"added_tokens\":"
		       "[{\"id\":3,\"content\":\"<x>\",\"lstrip\":true}]}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_UNSUPPORTED, "'<x>'", "lstrip");
	p = write_json("dup.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},"
		       "\"merges\":[]}," PRE_GPT2 "," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_CORRUPT, "id 0 to two tokens");
	p = write_json("notbl.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,"
		       "\"\\u4e2d\":1},\"merges\":[]}," PRE_GPT2 "," DEC "}");
	WT_FAILS(weft_tokenizer_load(p, &t), WEFT_ERR_UNSUPPORTED, "not byte-level");
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		WT_CHECK(system(cmd) == 0);
	}
	return wt_done("test_tokenizer_errors");
}
