/* Config size: parsing and reading are linear in the number of keys (a
 * hash index per large mapping), a config over WEFT_CFG_MAX_BYTES is
 * refused, and a config path that is no regular file (a FIFO, /dev/zero,
 * a directory) is refused at once instead of blocking or reading forever.
 *
 * The timed case: 100,000 keys in one mapping, parsed, each read back by
 * name, the whole tree checked for unused keys, and an override into the
 * big mapping. Linear code does this in about 1.2 s on one core (50,000
 * keys in about 3 s under ASan); the quadratic scans it replaces took 86 s.
 * The bound, 8 s, leaves a slow shared machine and the sanitizers room
 * while still failing the quadratic code by a wide margin.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cfg_test_util.h"

/* The sanitizer build (Debug, ASan + UBSan) runs the linear code about 7
 * times slower: it times half the keys, which the quadratic code still
 * missed by minutes. */
#if defined(__SANITIZE_ADDRESS__)
#define N_KEYS 50000
#else
#define N_KEYS 100000
#endif
#define BOUND_S 8.0

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_many_keys(void)
{
	size_t cap = (size_t)N_KEYS * 32 + 256, pos = 0;
	char *text = malloc(cap), key[32];
	weft_config *cfg = NULL;
	const weft_cfg *big;
	double t0, dt;
	int ok = 1;

	WT_REQUIRE(text);
	pos += (size_t)snprintf(text + pos, cap - pos, "big:\n");
	for (int i = 0; i < N_KEYS; i++)
		pos += (size_t)snprintf(text + pos, cap - pos, "  k%d: %d\n", i, i);
	pos += (size_t)snprintf(text + pos, cap - pos, "tail: 1\n");
	t0 = now();
	WT_OK(weft_config_load_string("big.yaml", text, pos, &cfg));
	big = weft_cfg_get(weft_config_root(cfg), "big");
	WT_REQUIRE(weft_cfg_size(big) == N_KEYS);
	/* every key by name, in an order unlike the file's */
	for (int i = N_KEYS - 1; i >= 0; i--) {
		int64_t v = -1;

		snprintf(key, sizeof(key), "k%d", i);
		if (weft_cfg_int(big, key, -1, &v) != WEFT_OK || v != i)
			ok = 0;
	}
	WT_CHECK(ok);
	WT_CHECK(weft_cfg_get(big, "k100000") == NULL);
	WT_OK(weft_config_override(cfg, "--big.k37777=5"));
	WT_OK(weft_config_override(cfg, "--big.new_key=6"));
	WT_CHECK(weft_cfg_size(big) == N_KEYS + 1);
	WT_CHECK(weft_cfg_get(big, "new_key") != NULL);
	WT_FAILS(weft_config_check_unused(cfg), WEFT_ERR_CONFIG, "unknown key 'tail'");
	dt = now() - t0;
	fprintf(stderr, "%d keys: parsed, read and checked in %.3f s (bound %.0f s)\n", N_KEYS, dt,
		BOUND_S);
	WT_CHECK(dt < BOUND_S);
	{
		int64_t v = 0;

		WT_OK(weft_cfg_int(big, "k37777", 0, &v));
		WT_CHECK(v == 5);
		WT_OK(weft_cfg_int(big, "new_key", 0, &v));
		WT_CHECK(v == 6);
		WT_OK(weft_cfg_int(big, "k0", 0, &v));
		WT_CHECK(v == 0);
	}
	weft_config_free(cfg);

	/* a duplicate far into a big mapping is still found, with both places */
	pos = (size_t)snprintf(text, cap, "m:\n");
	for (int i = 0; i < 1000; i++)
		pos += (size_t)snprintf(text + pos, cap - pos, "  k%d: %d\n", i, i);
	pos += (size_t)snprintf(text + pos, cap - pos, "  k17: again\n");
	WT_CHECK(load_err(text) == WEFT_ERR_CONFIG);
	WT_STR_CONTAINS(weft_error_last(), "cfg.yaml:1002:3: duplicate key 'k17' in 'm' (first at "
					   "cfg.yaml:19:3)");
	free(text);
}

/* Merge keys into a big mapping copy only what it lacks. */
static void test_big_merge(void)
{
	size_t cap = 64 * 1024, pos = 0;
	char *text = malloc(cap);
	weft_config *cfg = NULL;
	const weft_cfg *b;
	int64_t v = 0;

	WT_REQUIRE(text);
	pos += (size_t)snprintf(text + pos, cap - pos, "a: &a\n");
	for (int i = 0; i < 500; i++)
		pos += (size_t)snprintf(text + pos, cap - pos, "  k%d: %d\n", i, i);
	pos += (size_t)snprintf(text + pos, cap - pos, "b:\n  k3: 33\n  <<: *a\n  k499: 44\n");
	WT_OK(weft_config_load_string("m.yaml", text, pos, &cfg));
	b = weft_cfg_get(weft_config_root(cfg), "b");
	WT_CHECK(weft_cfg_size(b) == 500);
	WT_OK(weft_cfg_int(b, "k3", 0, &v));
	WT_CHECK(v == 33);
	WT_OK(weft_cfg_int(b, "k499", 0, &v));
	WT_CHECK(v == 44);
	WT_OK(weft_cfg_int(b, "k250", 0, &v));
	WT_CHECK(v == 250);
	weft_config_free(cfg);
	free(text);
}

/* Over WEFT_CFG_MAX_BYTES (16 MiB): refused before parsing, from a
 * string and from a file, with the size and the limit. */
static void test_size_cap(void)
{
	size_t n = (16u << 20) + 1;
	char *text = malloc(n), path[64];
	weft_config *cfg = NULL;
	FILE *f;

	WT_REQUIRE(text);
	memset(text, '#', n);
	WT_FAILS(weft_config_load_string("huge.yaml", text, n, &cfg), WEFT_ERR_CONFIG,
		 "config 'huge.yaml' is 16777217 bytes", "at most 16 MiB");
	WT_CHECK(cfg == NULL);
	snprintf(path, sizeof(path), "huge-%d.yaml", (int)getpid());
	f = fopen(path, "wb");
	WT_REQUIRE(f && fwrite(text, 1, n, f) == n && fclose(f) == 0);
	WT_FAILS(weft_config_load_file(path, &cfg), WEFT_ERR_CONFIG, path, "is 16777217 bytes",
		 "at most 16 MiB");
	WT_CHECK(cfg == NULL);
	unlink(path);
	free(text);
}

/* A FIFO nobody writes, and endless or odd files: refused at once. The
 * alarm turns a reader that blocks into a failure instead of a hang. */
static void test_not_regular(void)
{
	weft_config *cfg = NULL;
	char path[64];

	snprintf(path, sizeof(path), "fifo-%d.yaml", (int)getpid());
	unlink(path);
	WT_REQUIRE(mkfifo(path, 0600) == 0);
	alarm(20);
	WT_FAILS(weft_config_load_file(path, &cfg), WEFT_ERR_IO, "config '", path,
		 "is not a regular file: it is a FIFO");
	WT_CHECK(cfg == NULL);
	WT_FAILS(weft_config_load_file("/dev/zero", &cfg), WEFT_ERR_IO,
		 "config '/dev/zero' is not a regular file: it is a character device");
	WT_CHECK(cfg == NULL);
	WT_FAILS(weft_config_load_file(".", &cfg), WEFT_ERR_IO, "it is a directory");
	alarm(0);
	unlink(path);
}

int main(void)
{
	test_not_regular();
	test_size_cap();
	test_big_merge();
	test_many_keys();
	return wt_done("test_config_scale");
}
