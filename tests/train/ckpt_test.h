/* ckpt_test.h - helpers for the tests that damage a checkpoint on purpose:
 * a copy of a good checkpoint, a manifest rewritten to match (so only the
 * check under test can refuse it), and the one-line error every refusal
 * must be. Link weft_runlog (sha256). */
#ifndef WEFT_TESTS_TRAIN_CKPT_TEST_H
#define WEFT_TESTS_TRAIN_CKPT_TEST_H

#include "train_test.h"

#include "runlog/sha256.h"

static const char *const ckpt_files[] = { "model.safetensors", "optimizer.bin",
					  "trainer_state.json" };

/* A failed run: exit 1, one stderr line "weft: ...", holding `what`, and
 * no "manifest verified" on stdout. */
static inline void ckpt_expect_error(const char *tag, int rc, const char *what)
{
	const char *err = tt_output(tag, "err");
	const char *nl = strchr(err, '\n');

	wt_checks += 4;
	if (rc != 1) {
		wt_failures++;
		fprintf(stderr, "%s: exit status %d, expected 1; stderr:\n%.2000s\n", tag, rc, err);
	}
	if (strncmp(err, "weft: ", 6) != 0) {
		wt_failures++;
		fprintf(stderr, "%s: stderr does not start with 'weft: ':\n%.2000s\n", tag, err);
	}
	if (!nl || nl[1] != '\0') {
		wt_failures++;
		fprintf(stderr, "%s: stderr is not exactly one line:\n%.2000s\n", tag, err);
	}
	if (!strstr(err, what)) {
		wt_failures++;
		fprintf(stderr, "%s: message lacks '%s':\n%.2000s\n", tag, what, err);
	}
	WT_CHECK(!strstr(tt_output(tag, "out"), "manifest verified"));
}

/* Writes dir/manifest.json listing names[0..n) with their sizes and
 * sha256, as weft fit does. */
static inline void ckpt_write_manifest(const char *dir, const char *const *names, size_t n)
{
	char text[4096], p[TT_PATH];
	size_t len = 0;

	len += (size_t)snprintf(text, sizeof(text), "{\"format\": \"weft-manifest\", "
				"\"version\": 1, \"files\": [");
	for (size_t i = 0; i < n; i++) {
		uint8_t digest[WEFT_SHA256_BYTES];
		char hex[WEFT_SHA256_HEX];
		int64_t bytes = 0;

		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		WT_REQUIRE(weft_sha256_file(p, digest, &bytes) == WEFT_OK);
		weft_sha256_hex(digest, hex);
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"%s{\"name\": \"%s\", \"bytes\": %lld, \"sha256\": \"%s\"}",
					i ? ", " : "", names[i], (long long)bytes, hex);
	}
	snprintf(text + len, sizeof(text) - len, "]}\n");
	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	tt_write_text(p, text);
}

/* A copy of checkpoint `from` in scratch folder `to`, all files listed. */
static inline void ckpt_copy(const char *from, const char *to)
{
	char a[TT_PATH], b[TT_PATH];

	WT_REQUIRE(mkdir(tt_path("%s", to), 0777) == 0);
	for (size_t i = 0; i < 3; i++) {
		size_t len = 0;
		char *data;

		snprintf(a, sizeof(a), "%s/%s", from, ckpt_files[i]);
		snprintf(b, sizeof(b), "%s/%s", tt_path("%s", to), ckpt_files[i]);
		data = tt_read(a, &len);
		WT_REQUIRE(data);
		tt_write(b, data, len);
		free(data);
	}
	ckpt_write_manifest(tt_path("%s", to), ckpt_files, 3);
}

/* A small mlp trained 2 steps with adamw (two slots: optimizer.bin is not
 * empty); returns its last checkpoint's path (static). */
static inline const char *ckpt_make_good(void)
{
	static char good[TT_PATH];
	int rc;

	tt_make_npy_dataset(256, 16, 4);
	tt_write_text(tt_path("mlp.yaml"),
		      "seed_everything: 1\n"
		      "trainer:\n"
		      "  max_steps: 2\n"
		      "  enable_progress_bar: false\n"
		      "model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
		      "data: {class: npy, x: x.npy, y: y.npy, batch_size: 32, "
		      "val_fraction: 0.25}\n"
		      "optimizer: {name: adamw, lr: 0.01}\n");
	rc = tt_weft("fit", "fit", "--config", "mlp.yaml");
	WT_REQUIRE(tt_expect_ok("fit", rc));
	snprintf(good, sizeof(good), "%s", tt_path("runs/mlp/version_0/checkpoints/last"));
	return good;
}

#endif /* WEFT_TESTS_TRAIN_CKPT_TEST_H */
