/* Data files are checked once, at load:
 *  - a token file whose first int32 is near an llm.c magic (a byte off, or
 *    a newer date-like magic with a version after it) is refused, naming
 *    the number found and the magics expected, instead of being read as
 *    bare uint16 tokens, header and all; a bare file still loads;
 *  - token ids at or past the model's vocabulary, and labels at or past
 *    its class count, are refused naming the file, the value, its position
 *    and the limit (weft_data_module_check_ids), instead of failing when a
 *    batch holding one is drawn, maybe hours in;
 *  - a FIFO given as a token, text, npy or idx file is refused at once (an
 *    alarm turns a reader that blocks into a failed test, not a hang).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_module.h"
#include "weft/config.h"
#include "weft_test.h"

static char dir[64];

static const char *at(const char *name)
{
	static char buf[4][160];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

static void put(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	WT_REQUIRE(f && fwrite(data, 1, len, f) == len);
	fclose(f);
}

/* An llm.c-shaped file: header (magic, version, count, zeros), uint16 ids. */
static void put_llmc(const char *path, int32_t magic, int32_t version, int n)
{
	int32_t head[256] = { magic, version, n };
	size_t bytes = sizeof(head) + (size_t)n * 2;
	char *buf = malloc(bytes);

	WT_REQUIRE(buf);
	memcpy(buf, head, sizeof(head));
	for (int i = 0; i < n; i++) {
		uint16_t v = (uint16_t)(i % 50);

		memcpy(buf + sizeof(head) + 2 * i, &v, 2);
	}
	put(path, buf, bytes);
	free(buf);
}

static void test_near_magic(void)
{
	const char *p = at("m.bin");
	weft_tokens t;
	uint16_t raw[64];

	/* one byte off 20240520 (a damaged header) */
	put_llmc(p, 20240520 ^ 0x100, 1, 100);
	WT_FAILS(weft_tokens_from_bin(p, &t), WEFT_ERR_CORRUPT, p, "starts with 20240776",
		 "not an llm.c magic", "expected 20240520", "or 20240801");
	/* one byte off 20240801 */
	put_llmc(p, 20240801 + 1, 7, 100);
	WT_FAILS(weft_tokens_from_bin(p, &t), WEFT_ERR_CORRUPT, "starts with 20240802");
	/* a newer date-like magic with a version */
	put_llmc(p, 20250115, 3, 100);
	WT_FAILS(weft_tokens_from_bin(p, &t), WEFT_ERR_CORRUPT, "starts with 20250115",
		 "a damaged or newer llm.c header");
	/* the real magics still load */
	put_llmc(p, 20240520, 1, 100);
	WT_OK(weft_tokens_from_bin(p, &t));
	WT_CHECK(t.n == 100 && t.elem_bytes == 2 && t.vocab == 50);
	weft_tokens_free(&t);
	/* bare uint16 tokens load, also when the first pair reads as a date
	 * but no version follows (tokens 3 and 4 are not a byte and a 0) */
	for (int i = 0; i < 64; i++)
		raw[i] = (uint16_t)(1000 + i);
	{
		int32_t date = 20250115;

		memcpy(raw, &date, 4);
	}
	put(p, raw, sizeof(raw));
	WT_OK(weft_tokens_from_bin(p, &t));
	WT_CHECK(t.n == 64 && t.elem_bytes == 2);
	weft_tokens_free(&t);
}

static weft_status build(const char *yaml, weft_config **cfg, weft_data_module **m)
{
	weft_data_env env = { .world = 1, .rank = 0, .seed = 42 };

	*m = NULL;
	WT_OK(weft_config_load_string("data.yaml", yaml, strlen(yaml), cfg));
	return weft_data_module_from_config(weft_cfg_get(weft_config_root(*cfg), "data"), &env, m);
}

static void test_token_ids(void)
{
	enum { N = 20000, BAD_AT = 12345 };
	uint16_t *ids = malloc(N * sizeof(*ids));
	weft_config *cfg = NULL;
	weft_data_module *m = NULL;
	char yaml[512];

	WT_REQUIRE(ids);
	for (int i = 0; i < N; i++)
		ids[i] = (uint16_t)(i % 100);
	ids[BAD_AT] = 5000;
	ids[BAD_AT + 7] = 6000; /* the largest, later: the first bad one is named */
	put(at("ids.bin"), ids, N * sizeof(*ids));
	snprintf(yaml, sizeof(yaml), "data: {class: tokens, path: %s, block_size: 8, "
		 "val_fraction: 0.1}\n", at("ids.bin"));
	WT_OK(build(yaml, &cfg, &m));
	WT_CHECK(m->vocab_size == 6001);
	WT_FAILS(weft_data_module_check_ids(m, 1000, -1, "model.vocab_size"), WEFT_ERR_CONFIG,
		 "token file '", "ids.bin' holds token id 5000 at position 12345 (of 20000)",
		 "vocabulary has 1000 ids (model.vocab_size)",
		 "set model.vocab_size to at least 6001");
	WT_OK(weft_data_module_check_ids(m, 6001, -1, "model.vocab_size"));
	weft_data_module_free(m);
	weft_config_free(cfg);

	/* text is bytes: a vocabulary under 256 meets the first byte past it */
	put(at("t.txt"), "hello world, hello data\n", 24);
	snprintf(yaml, sizeof(yaml), "data: {class: text, paths: [%s], block_size: 4}\n",
		 at("t.txt"));
	WT_OK(build(yaml, &cfg, &m));
	WT_FAILS(weft_data_module_check_ids(m, 108, -1, "model.vocab_size"), WEFT_ERR_CONFIG,
		 "text '", "holds token id 108 at position 2");
	weft_data_module_free(m);
	weft_config_free(cfg);
	free(ids);
}

/* An npy int32 vector. */
static void put_npy_i4(const char *path, const int32_t *v, int n)
{
	char head[128];
	int len = snprintf(head + 10, sizeof(head) - 10, "{'descr': '<i4', 'fortran_order': False, "
			   "'shape': (%d,), }", n);
	FILE *f = fopen(path, "wb");
	int total = 10 + len + 1, pad = (64 - total % 64) % 64;

	memcpy(head, "\x93NUMPY\x01\x00", 8);
	head[8] = (char)((len + 1 + pad) & 0xff);
	head[9] = (char)((len + 1 + pad) >> 8);
	WT_REQUIRE(f);
	fwrite(head, 1, (size_t)(10 + len), f);
	for (int i = 0; i < pad; i++)
		fputc(' ', f);
	fputc('\n', f);
	fwrite(v, sizeof(*v), (size_t)n, f);
	fclose(f);
}

static void put_npy_f4(const char *path, int n, int d)
{
	char head[128];
	int len = snprintf(head + 10, sizeof(head) - 10, "{'descr': '<f4', 'fortran_order': False, "
			   "'shape': (%d, %d), }", n, d);
	FILE *f = fopen(path, "wb");
	int total = 10 + len + 1, pad = (64 - total % 64) % 64;
	float z = 0.5f;

	memcpy(head, "\x93NUMPY\x01\x00", 8);
	head[8] = (char)((len + 1 + pad) & 0xff);
	head[9] = (char)((len + 1 + pad) >> 8);
	WT_REQUIRE(f);
	fwrite(head, 1, (size_t)(10 + len), f);
	for (int i = 0; i < pad; i++)
		fputc(' ', f);
	fputc('\n', f);
	for (int i = 0; i < n * d; i++)
		fwrite(&z, sizeof(z), 1, f);
	fclose(f);
}

static void test_labels(void)
{
	enum { N = 400 };
	int32_t y[N];
	weft_config *cfg = NULL;
	weft_data_module *m = NULL;
	char yaml[512];

	for (int i = 0; i < N; i++)
		y[i] = i % 4;
	y[123] = 9;
	y[390] = 7; /* in the validation tail: its place in the file is named */
	put_npy_f4(at("x.npy"), N, 3);
	put_npy_i4(at("y.npy"), y, N);
	snprintf(yaml, sizeof(yaml), "data: {class: npy, x: %s, y: %s, val_fraction: 0.1}\n",
		 at("x.npy"), at("y.npy"));
	WT_OK(build(yaml, &cfg, &m));
	WT_FAILS(weft_data_module_check_ids(m, 4, -100, "model.num_classes"), WEFT_ERR_CONFIG,
		 "labels '", "y.npy' hold class 9 at entry 123",
		 "the model has 4 classes (model.num_classes, labels 0 to 3)",
		 "set model.num_classes to at least 10");
	y[123] = 1;
	put_npy_i4(at("y.npy"), y, N);
	weft_data_module_free(m);
	weft_config_free(cfg);
	WT_OK(build(yaml, &cfg, &m));
	WT_FAILS(weft_data_module_check_ids(m, 4, -100, "model.num_classes"), WEFT_ERR_CONFIG,
		 "y.npy' hold class 7 at entry 390");
	WT_OK(weft_data_module_check_ids(m, 8, -100, "model.num_classes"));
	weft_data_module_free(m);
	weft_config_free(cfg);
}

static void test_fifos(void)
{
	const char *fifo = at("pipe.bin");
	const char *paths[1];
	weft_tokens t;
	weft_npy a;
	weft_idx idx;
	char pat[160];

	WT_REQUIRE(mkfifo(fifo, 0600) == 0);
	alarm(20);
	WT_FAILS(weft_tokens_from_bin(fifo, &t), WEFT_ERR_IO, "token file '", fifo,
		 "is not a regular file: it is a FIFO");
	paths[0] = fifo;
	WT_FAILS(weft_tokens_from_text(paths, 1, &t), WEFT_ERR_IO, "text file '", "it is a FIFO");
	snprintf(pat, sizeof(pat), "%s/pipe.*", dir);
	paths[0] = pat;
	WT_FAILS(weft_tokens_from_text(paths, 1, &t), WEFT_ERR_IO, "it is a FIFO");
	WT_FAILS(weft_npy_read(fifo, &a), WEFT_ERR_IO, "npy file '", "it is a FIFO");
	WT_FAILS(weft_idx_read(fifo, &idx), WEFT_ERR_IO, "idx file '", "it is a FIFO");
	WT_FAILS(weft_tokens_from_bin("/dev/zero", &t), WEFT_ERR_IO, "character device");
	alarm(0);
	unlink(fifo);
}

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "data_checks_%ld", (long)getpid());
	WT_REQUIRE(mkdir(dir, 0777) == 0);
	test_fifos();
	test_near_magic();
	test_token_ids();
	test_labels();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	WT_CHECK(system(cmd) == 0);
	return wt_done("test_data_checks");
}
