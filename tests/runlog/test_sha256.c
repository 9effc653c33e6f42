/* SHA-256 against the FIPS 180-2/180-4 example vectors (NIST CSRC
 * "Examples with intermediate values"), streamed in odd chunk sizes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runlog/sha256.h"
#include "weft_test.h"

static void hex_of(const void *data, size_t len, char hex[WEFT_SHA256_HEX])
{
	uint8_t d[WEFT_SHA256_BYTES];

	weft_sha256_buf(data, len, d);
	weft_sha256_hex(d, hex);
}

int main(void)
{
	static const char *const abc_448 =
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	static const char *const abc_896 =
		"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
		"jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
	char hex[WEFT_SHA256_HEX];
	uint8_t d[WEFT_SHA256_BYTES];
	weft_sha256 s;
	char *million;

	hex_of("", 0, hex);
	WT_CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
	hex_of("abc", 3, hex);
	WT_CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
	hex_of(abc_448, strlen(abc_448), hex);
	WT_CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
	hex_of(abc_896, strlen(abc_896), hex);
	WT_CHECK(strcmp(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1") == 0);

	/* One million 'a', fed in chunks of 1..127 bytes so block boundaries
	 * fall everywhere. */
	million = malloc(1000000);
	WT_REQUIRE(million);
	memset(million, 'a', 1000000);
	weft_sha256_init(&s);
	for (size_t off = 0, step = 1; off < 1000000; step = step % 127 + 1) {
		size_t n = 1000000 - off < step ? 1000000 - off : step;

		weft_sha256_update(&s, million + off, n);
		off += n;
	}
	weft_sha256_final(&s, d);
	weft_sha256_hex(d, hex);
	WT_CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);

	/* Lengths around the padding boundary (55, 56, 63, 64, 65 bytes):
	 * streamed one byte at a time must equal one-shot. */
	for (size_t len = 50; len < 130; len++) {
		uint8_t one[WEFT_SHA256_BYTES], two[WEFT_SHA256_BYTES];

		weft_sha256_buf(million, len, one);
		weft_sha256_init(&s);
		for (size_t i = 0; i < len; i++)
			weft_sha256_update(&s, million + i, 1);
		weft_sha256_final(&s, two);
		WT_CHECK(memcmp(one, two, sizeof(one)) == 0);
	}

	/* A file hashes like its contents; a missing one is named. */
	{
		char path[64];
		int64_t bytes = 0;
		FILE *f;

		snprintf(path, sizeof(path), "sha256_test_%ld.bin", (long)getpid());
		f = fopen(path, "wb");
		WT_REQUIRE(f);
		fwrite(million, 1, 3000, f);
		fclose(f);
		WT_OK(weft_sha256_file(path, d, &bytes));
		WT_CHECK(bytes == 3000);
		{
			uint8_t want[WEFT_SHA256_BYTES];

			weft_sha256_buf(million, 3000, want);
			WT_CHECK(memcmp(d, want, sizeof(d)) == 0);
		}
		remove(path);
		WT_FAILS(weft_sha256_file(path, d, NULL), WEFT_ERR_NOT_FOUND, path);
	}
	free(million);
	return wt_done("test_sha256");
}
