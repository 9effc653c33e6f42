/* Token streams: text files as bytes (globs, several files, a split), the
 * fortunes corpus when installed, and both .bin formats (nanoGPT's bare
 * uint16, llm.c's header) with their damage named. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "weft/memory.h"
#include "weft_test.h"

static void put(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	WT_REQUIRE(f && fwrite(data, 1, len, f) == len);
	fclose(f);
}

int main(void)
{
	char dir[64], a[128], b[128], pat[128], bin[128];
	weft_tokens t, tr, va;
	weft_mem_stats before, after;
	const char *one[1];

	snprintf(dir, sizeof(dir), "tokens_test_%ld", (long)getpid());
	WT_REQUIRE(mkdir(dir, 0777) == 0);
	snprintf(a, sizeof(a), "%s/a.txt", dir);
	snprintf(b, sizeof(b), "%s/b.txt", dir);
	snprintf(bin, sizeof(bin), "%s/t.bin", dir);
	put(a, "hello ", 6);
	put(b, "world\n\xff", 7);
	weft_mem_get_stats(&before);

	/* A glob expands in sorted order: a.txt then b.txt. */
	snprintf(pat, sizeof(pat), "%s/*.txt", dir);
	one[0] = pat;
	WT_OK(weft_tokens_from_text(one, 1, &t));
	WT_CHECK(t.n == 13 && t.vocab == 256 && t.elem_bytes == 1);
	WT_CHECK(weft_tokens_at(&t, 0) == 'h' && weft_tokens_at(&t, 6) == 'w' &&
		 weft_tokens_at(&t, 12) == 0xff);
	/* 13 tokens at val_fraction 0.25: floor(3.25) = 3 for validation. */
	WT_OK(weft_tokens_split(&t, 0.25, &tr, &va));
	WT_CHECK(tr.n == 10 && va.n == 3 && weft_tokens_at(&va, 0) == 'd');
	WT_FAILS(weft_tokens_split(&t, 1.0, &tr, &va), WEFT_ERR_INVALID_ARG, "[0, 1)");
	weft_tokens_free(&tr); /* views: nothing to free, must not crash */
	weft_tokens_free(&t);

	{
		const char *two[2] = { b, a };

		WT_OK(weft_tokens_from_text(two, 2, &t));
		WT_CHECK(t.n == 13 && weft_tokens_at(&t, 0) == 'w');
		weft_tokens_free(&t);
	}
	one[0] = "/usr/share/games/fortunes/no-such-file";
	WT_FAILS(weft_tokens_from_text(one, 1, &t), WEFT_ERR_NOT_FOUND,
		 "/usr/share/games/fortunes/no-such-file", "apt-get install fortunes-min");
	one[0] = "/nonexistent/*.txt";
	WT_FAILS(weft_tokens_from_text(one, 1, &t), WEFT_ERR_NOT_FOUND, "/nonexistent/*.txt");

	/* nanoGPT: a bare little-endian uint16 array. */
	{
		uint16_t toks[5] = { 50256, 1, 2, 3, 40000 };

		put(bin, toks, sizeof(toks));
		WT_OK(weft_tokens_from_bin(bin, &t));
		WT_CHECK(t.n == 5 && t.elem_bytes == 2 && t.vocab == 50257);
		WT_CHECK(weft_tokens_at(&t, 4) == 40000);
		weft_tokens_free(&t);
		put(bin, toks, 9);
		WT_FAILS(weft_tokens_from_bin(bin, &t), WEFT_ERR_CORRUPT, "9 bytes",
			 "whole number of uint16");
	}
	/* llm.c: 256 int32 header (magic, version, count), then uint16. */
	{
		size_t len = 1024 + 2 * 7;
		uint8_t *f = calloc(1, len);
		int32_t *h = (int32_t *)f;
		uint16_t *d = (uint16_t *)(f + 1024);

		h[0] = 20240520;
		h[1] = 1;
		h[2] = 7;
		for (int i = 0; i < 7; i++)
			d[i] = (uint16_t)(100 + i);
		put(bin, f, len);
		WT_OK(weft_tokens_from_bin(bin, &t));
		WT_CHECK(t.n == 7 && t.vocab == 107 && weft_tokens_at(&t, 0) == 100 &&
			 weft_tokens_at(&t, 6) == 106);
		weft_tokens_free(&t);
		h[2] = 9;
		put(bin, f, len);
		WT_FAILS(weft_tokens_from_bin(bin, &t), WEFT_ERR_CORRUPT, "announces 9 tokens",
			 "1038 bytes");
		h[2] = 7;
		h[1] = 3;
		put(bin, f, len);
		WT_FAILS(weft_tokens_from_bin(bin, &t), WEFT_ERR_CORRUPT, "version 3");
		free(f);
	}
	WT_FAILS(weft_tokens_from_bin("no-such.bin", &t), WEFT_ERR_NOT_FOUND, "no-such.bin");
	weft_mem_get_stats(&after);
	WT_CHECK(after.current[WEFT_MEM_OTHER] == before.current[WEFT_MEM_OTHER]);

	/* The real corpus the language-model example uses, when installed. */
	one[0] = "/usr/share/games/fortunes/fortunes";
	if (access(one[0], R_OK) == 0) {
		WT_OK(weft_tokens_from_text(one, 1, &t));
		WT_CHECK(t.n > 10000);
		weft_tokens_free(&t);
	}
	remove(a);
	remove(b);
	remove(bin);
	rmdir(dir);
	return wt_done("test_data_tokens");
}
