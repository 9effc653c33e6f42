/* `weft tokenize`: the token files core/data reads back hold the
 * documents' ids with the end-of-text token after each, split into train
 * and validation at the asked fraction; the output is byte-identical
 * whatever the thread count, and a document cut into pieces for the threads
 * encodes to the ids of encoding it whole; a vocabulary past 65536 ids
 * gives uint32 files; each user error ends in one clear message. */
#include <sys/wait.h>
#include <unistd.h>

#include "data/dataset.h"
#include "text/tokenizer.h"
#include "tok_corpus.h"

static char dir[] = "/tmp/weft_tokcliXXXXXX";
static char out_buf[1 << 16];
static const char *out = out_buf;

/* Runs `weft tokenize ARGS 2>&1` into out[]; returns the exit status. */
static int run(const char *args)
{
	char cmd[4096];
	size_t len = 0, k;
	FILE *p;
	int status;

	snprintf(cmd, sizeof(cmd), "%s/bin/weft tokenize %s 2>&1", getenv("WEFT_BUILD_DIR"), args);
	p = popen(cmd, "r");
	WT_REQUIRE(p != NULL);
	while ((k = fread(out_buf + len, 1, sizeof(out_buf) - 1 - len, p)) > 0)
		len += k;
	out_buf[len] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *slurp(const char *path, size_t *len)
{
	char *buf;

	WT_OK(weft_file_read(path, WEFT_MEM_OTHER, &buf, len));
	return buf;
}

static int same_file(const char *a, const char *b)
{
	size_t la, lb;
	char *x = slurp(a, &la), *y = slurp(b, &lb);
	int same = la == lb && !memcmp(x, y, la);

	weft_mem_free(x);
	weft_mem_free(y);
	return same;
}

static const char *tmp(const char *name)
{
	static char path[8][512];
	static int k;

	k = (k + 1) % 8;
	snprintf(path[k], sizeof(path[k]), "%s/%s", dir, name);
	return path[k];
}

/* Decoded train + val == each fortune followed by <|endoftext|>. */
static void test_fortunes(weft_tokenizer *t)
{
	const char *tok = tok_fixture("gpt2_style.json");
	const char *files = "/usr/share/games/fortunes/fortunes /usr/share/games/fortunes/riddles";
	char args[2048], *text, *want, *got;
	size_t want_len = 0, got_len, len;
	weft_tokens tr, va;
	uint32_t *ids;
	int64_t n;

	snprintf(args, sizeof(args), "--tokenizer %s --out %s --val-fraction 0.1 --threads 1 "
		 "--doc-delimiter '\\n%%\\n' %s", tok, tmp("fort_train.bin"), files);
	WT_CHECK(run(args) == 0);
	WT_STR_CONTAINS(out, "fort_val.bin");
	snprintf(args, sizeof(args), "--tokenizer %s --out %s --val-out %s --val-fraction 0.1 "
		 "--threads 3 --doc-delimiter '\\n%%\\n' %s", tok, tmp("t3.bin"), tmp("v3.bin"),
		 files);
	WT_CHECK(run(args) == 0);
	WT_CHECK(same_file(tmp("fort_train.bin"), tmp("t3.bin")));
	WT_CHECK(same_file(tmp("fort_val.bin"), tmp("v3.bin")));

	WT_OK(weft_tokens_from_bin(tmp("fort_train.bin"), &tr));
	WT_OK(weft_tokens_from_bin(tmp("fort_val.bin"), &va));
	WT_CHECK(tr.elem_bytes == 2 && va.elem_bytes == 2);
	/* the split: validation holds about 10% of the tokens (documents vary in
	 * length; 7% to 13% allowed) */
	WT_CHECK(va.n > 0.07 * (double)(tr.n + va.n) && va.n < 0.13 * (double)(tr.n + va.n));
	n = tr.n + va.n;
	ids = malloc((size_t)n * sizeof(*ids));
	WT_REQUIRE(ids);
	for (int64_t i = 0; i < n; i++)
		ids[i] = i < tr.n ? weft_tokens_at(&tr, i) : weft_tokens_at(&va, i - tr.n);
	WT_CHECK(ids[n - 1] == (uint32_t)weft_tokenizer_eos_id(t));
	WT_OK(weft_tokenizer_decode(t, ids, (size_t)n, 0, &got, &got_len));
	want = malloc(1 << 20);
	WT_REQUIRE(want);
	for (int f = 0; f < 2; f++) {
		char *s = slurp(f ? "/usr/share/games/fortunes/riddles"
				  : "/usr/share/games/fortunes/fortunes", &len);
		char *p = s, *end = s + len;

		while (p < end) {
			char *hit = memmem(p, (size_t)(end - p), "\n%\n", 3);
			char *e = hit ? hit : end;

			if (e > p) {
				memcpy(want + want_len, p, (size_t)(e - p));
				want_len += (size_t)(e - p);
				memcpy(want + want_len, "<|endoftext|>", 13);
				want_len += 13;
			}
			p = hit ? hit + 3 : end;
		}
		weft_mem_free(s);
	}
	WT_CHECK(got_len == want_len && !memcmp(got, want, want_len));
	free(want);
	free(got);
	free(ids);
	weft_tokens_free(&tr);
	weft_tokens_free(&va);
	(void)text;
}

/* One document of ~490 KB (fortunes, 20 times) is cut into pieces for the threads: the ids
 * equal those of encoding it in one call. */
static void test_pieces(weft_tokenizer *t)
{
	char args[2048], *base;
	size_t len;
	FILE *f = fopen(tmp("big.txt"), "wb");
	weft_tokenizer_encoder *e;
	weft_token_ids whole = { 0 };
	char *all = NULL;
	size_t all_len = 0;
	weft_tokens got;
	int same;

	WT_REQUIRE(f);
	base = slurp("/usr/share/games/fortunes/fortunes", &len);
	all = malloc(20 * len);
	WT_REQUIRE(all);
	for (int r = 0; r < 20; r++) {
		memcpy(all + all_len, base, len);
		all_len += len;
	}
	WT_REQUIRE(fwrite(all, 1, all_len, f) == all_len);
	fclose(f);
	WT_CHECK(weft_tokenizer_split(t, all, all_len, 256 << 10, (size_t[8]){ 0 }, 8) > 1);
	snprintf(args, sizeof(args), "--tokenizer %s --out %s --no-eos --threads 2 %s",
		 tok_fixture("gpt2_style.json"), tmp("big.bin"), tmp("big.txt"));
	WT_CHECK(run(args) == 0);
	WT_OK(weft_tokenizer_encoder_create(t, &e));
	WT_OK(weft_tokenizer_encode(e, all, all_len, &whole));
	WT_OK(weft_tokens_from_bin(tmp("big.bin"), &got));
	same = got.n == (int64_t)whole.n;
	for (int64_t i = 0; same && i < got.n; i++)
		same = weft_tokens_at(&got, i) == whole.ids[i];
	WT_CHECK(same);
	weft_tokens_free(&got);
	/* one long document split for validation: cut near 10% from its end */
	snprintf(args, sizeof(args), "--tokenizer %s --out %s --val-fraction 0.1 %s",
		 tok_fixture("gpt2_style.json"), tmp("one_train.bin"), tmp("big.txt"));
	WT_CHECK(run(args) == 0);
	{
		weft_tokens tr, va;

		WT_OK(weft_tokens_from_bin(tmp("one_train.bin"), &tr));
		WT_OK(weft_tokens_from_bin(tmp("one_val.bin"), &va));
		/* the cut is the first space between letters after the split: within a
		 * line of text, so the share is 10% within half a point */
		WT_CLOSE((double)va.n / (double)(tr.n + va.n), 0.1, 0, 0.005);
		WT_CHECK(tr.n + va.n == (int64_t)whole.n + 1); /* + the end-of-text */
		weft_tokens_free(&tr);
		weft_tokens_free(&va);
	}
	weft_tokenizer_encoder_free(e);
	free(whole.ids);
	free(all);
	weft_mem_free(base);
}

/* A vocabulary past 65536 ids: uint32 tokens behind llm.c's 20240801. */
static void test_uint32(void)
{
	char args[2048];
	FILE *f = fopen(tmp("wide.json"), "w");
	weft_tokens got;

	WT_REQUIRE(f);
	fputs("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":"
	      "[\"a b\"]},\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},"
	      "\"decoder\":{\"type\":\"ByteLevel\"},\"added_tokens\":[{\"id\":70000,"
	      "\"content\":\"<|endoftext|>\",\"special\":true}]}", f);
	fclose(f);
	f = fopen(tmp("ab.txt"), "w");
	WT_REQUIRE(f);
	fputs("abab", f);
	fclose(f);
	snprintf(args, sizeof(args), "--tokenizer %s --out %s %s", tmp("wide.json"),
		 tmp("wide.bin"), tmp("ab.txt"));
	WT_CHECK(run(args) == 0);
	WT_STR_CONTAINS(out, "uint32");
	WT_OK(weft_tokens_from_bin(tmp("wide.bin"), &got));
	WT_CHECK(got.elem_bytes == 4 && got.n == 3);
	WT_CHECK(weft_tokens_at(&got, 0) == 2 && weft_tokens_at(&got, 2) == 70000);
	weft_tokens_free(&got);
}

static void test_errors(void)
{
	char args[2048];
	const char *tok = tok_fixture("gpt2_style.json");

	WT_CHECK(run("--out x.bin /usr/share/games/fortunes/riddles") == 2);
	WT_STR_CONTAINS(out, "needs --tokenizer");
	snprintf(args, sizeof(args), "--tokenizer %s /usr/share/games/fortunes/riddles", tok);
	WT_CHECK(run(args) == 2);
	WT_STR_CONTAINS(out, "needs --out");
	snprintf(args, sizeof(args), "--tokenizer %s --out %s --val-fraction 1.5 x", tok,
		 tmp("e.bin"));
	WT_CHECK(run(args) == 2);
	WT_STR_CONTAINS(out, "--val-fraction must be a number in [0, 1), got '1.5'");
	snprintf(args, sizeof(args), "--tokenizer %s --out %s %s", tok, tmp("e.bin"),
		 tmp("missing.txt"));
	WT_CHECK(run(args) == 1);
	WT_STR_CONTAINS(out, "missing.txt");
	WT_STR_CONTAINS(out, "not found");
	snprintf(args, sizeof(args), "--tokenizer %s --out %s/no/such/dir/t.bin "
		 "/usr/share/games/fortunes/riddles", tok, dir);
	WT_CHECK(run(args) == 1);
	WT_STR_CONTAINS(out, "cannot create");
	WT_STR_CONTAINS(out, "folder exists");
	snprintf(args, sizeof(args), "--tokenizer %s --out %s --eos '<nope>' "
		 "/usr/share/games/fortunes/riddles", tok, tmp("e.bin"));
	WT_CHECK(run(args) == 1);
	WT_STR_CONTAINS(out, "--eos '<nope>' is no token");
	snprintf(args, sizeof(args), "--tokenizer %s --out %s /usr/share/games/fortunes/riddles",
		 tmp("ab.txt"), tmp("e.bin"));
	WT_CHECK(run(args) == 1);
	WT_STR_CONTAINS(out, "ab.txt");
	WT_CHECK(access(tmp("e.bin"), F_OK) != 0); /* nothing half-written is left */
}

int main(void)
{
	weft_tokenizer *t;
	char cmd[600];

	WT_REQUIRE(mkdtemp(dir));
	WT_OK(weft_tokenizer_load(tok_fixture("gpt2_style.json"), &t));
	test_fortunes(t);
	test_pieces(t);
	test_uint32();
	test_errors();
	weft_tokenizer_free(t);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	WT_CHECK(system(cmd) == 0);
	return wt_done("test_tokenize_cli");
}
