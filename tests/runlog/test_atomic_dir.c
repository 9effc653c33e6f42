/* Atomic directories: a committed directory verifies against its manifest;
 * every kind of damage is named (missing manifest, missing file, wrong
 * size, wrong sha256, a needed file the manifest does not list); a writer killed mid-save leaves no directory and its
 * stale temp is cleaned; saving over an existing directory swaps it whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runlog/atomic_dir.h"
#include "base/json.h"
#include "runlog/sha256.h"
#include "weft_test.h"

static int exists(const char *p)
{
	struct stat sb;

	return stat(p, &sb) == 0;
}

static void save(const char *dir, const char *payload)
{
	weft_atomic_dir *d = NULL;
	char big[100000];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + 3);
	WT_OK(weft_atomic_dir_begin(dir, &d));
	WT_OK(weft_atomic_dir_write_file(d, "state.json", payload, strlen(payload)));
	/* A streamed file, written in uneven pieces. */
	WT_OK(weft_atomic_dir_file_open(d, "model.bin"));
	WT_OK(weft_atomic_dir_file_write(d, big, 1));
	WT_OK(weft_atomic_dir_file_write(d, big + 1, 65535));
	WT_OK(weft_atomic_dir_file_write(d, big + 65536, sizeof(big) - 65536));
	WT_OK(weft_atomic_dir_file_close(d));
	WT_OK(weft_atomic_dir_commit(d));
}

static void rewrite_byte(const char *path, long off)
{
	FILE *f = fopen(path, "r+b");
	int c;

	WT_REQUIRE(f);
	fseek(f, off, SEEK_SET);
	c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ 1, f);
	fclose(f);
}

int main(void)
{
	char root[64], dir[128], p[256], tmp[256];
	weft_atomic_dir *d = NULL;
	weft_json_value *m = NULL;

	snprintf(root, sizeof(root), "atomic_test_%ld", (long)getpid());
	WT_REQUIRE(mkdir(root, 0777) == 0);
	snprintf(dir, sizeof(dir), "%s/epoch=0-step=10", root);

	save(dir, "{\"step\": 10}");
	WT_OK(weft_manifest_verify(dir));
	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	WT_OK(weft_json_parse_file(p, &m));
	{
		const weft_json_value *files = weft_json_get(m, "files");
		uint8_t dg[WEFT_SHA256_BYTES];
		char hex[WEFT_SHA256_HEX];

		WT_REQUIRE(files && files->count == 2);
		WT_CHECK(strcmp(weft_json_get(&files->items[1], "name")->string, "model.bin") == 0);
		WT_CHECK(weft_json_get(&files->items[1], "bytes")->integer == 100000);
		/* The recorded hash is the file's real SHA-256. */
		snprintf(tmp, sizeof(tmp), "%s/state.json", dir);
		WT_OK(weft_sha256_file(tmp, dg, NULL));
		weft_sha256_hex(dg, hex);
		WT_CHECK(strcmp(weft_json_get(&files->items[0], "sha256")->string, hex) == 0);
	}
	weft_json_free(m);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%ld-%s", dir, (long)getpid(), weft_atomic_dir_host_tag());
	WT_CHECK(!exists(tmp));

	/* Every needed file must be listed: an unlisted one is refused by
	 * name, even when it is there, while listed ones pass. */
	{
		static const char *const listed[] = { "state.json", "model.bin" };
		static const char *const extra[] = { "model.bin", "optimizer.bin" };

		snprintf(p, sizeof(p), "%s/optimizer.bin", dir);
		fclose(fopen(p, "w"));
		WT_OK(weft_manifest_verify_listed(dir, listed, 2));
		WT_FAILS(weft_manifest_verify_listed(dir, extra, 2), WEFT_ERR_CORRUPT,
			 "manifest.json' does not list 'optimizer.bin'", dir);
		WT_CHECK(remove(p) == 0);
	}
	/* One flipped bit: the sha256 check names the file. */
	snprintf(p, sizeof(p), "%s/model.bin", dir);
	rewrite_byte(p, 5000);
	WT_FAILS(weft_manifest_verify(dir), WEFT_ERR_CORRUPT, p, "sha256", "manifest says");
	rewrite_byte(p, 5000);
	WT_OK(weft_manifest_verify(dir));
	/* Truncated: the size check names it. */
	WT_CHECK(truncate(p, 4096) == 0);
	WT_FAILS(weft_manifest_verify(dir), WEFT_ERR_CORRUPT, p, "size 4096 bytes",
		 "manifest says 100000");
	/* Missing file, missing manifest, missing directory. */
	WT_CHECK(remove(p) == 0);
	WT_FAILS(weft_manifest_verify(dir), WEFT_ERR_NOT_FOUND, p, "missing");
	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	WT_CHECK(remove(p) == 0);
	WT_FAILS(weft_manifest_verify(dir), WEFT_ERR_NOT_FOUND, "no manifest.json",
		 "not a complete");
	WT_FAILS(weft_manifest_verify("no-such-ckpt-dir"), WEFT_ERR_NOT_FOUND, "no-such-ckpt-dir");
	/* A manifest that is not JSON. */
	fclose(fopen(p, "w"));
	WT_FAILS(weft_manifest_verify(dir), WEFT_ERR_CORRUPT, p, "unreadable");

	/* Saving over an existing directory replaces it whole. */
	save(dir, "{\"step\": 20}");
	WT_OK(weft_manifest_verify(dir));
	snprintf(p, sizeof(p), "%s/state.json", dir);
	{
		char buf[64] = { 0 };
		FILE *f = fopen(p, "r");

		WT_REQUIRE(f);
		WT_CHECK(fread(buf, 1, sizeof(buf) - 1, f) > 0);
		fclose(f);
		WT_CHECK(strcmp(buf, "{\"step\": 20}") == 0);
	}

	/* Misuse is refused with the reason. */
	WT_OK(weft_atomic_dir_begin(dir, &d));
	WT_FAILS(weft_atomic_dir_file_open(d, "../escape"), WEFT_ERR_INVALID_ARG, "../escape");
	WT_FAILS(weft_atomic_dir_file_open(d, "manifest.json"), WEFT_ERR_INVALID_ARG,
		 "written by commit");
	WT_OK(weft_atomic_dir_file_open(d, "a"));
	WT_FAILS(weft_atomic_dir_file_open(d, "b"), WEFT_ERR_INVALID_ARG, "'a' is still open");
	WT_FAILS(weft_atomic_dir_commit(d), WEFT_ERR_INVALID_ARG, "still open at commit");
	/* A failed commit removed the temp directory and kept the old one. */
	WT_CHECK(!exists(tmp));
	WT_OK(weft_manifest_verify(dir));

	/* A writer that dies mid-save: no directory appears, the stale temp is
	 * found and removed once the writer is gone. */
	{
		char crash[128];
		pid_t kid;
		int status = 0, removed = -1;

		snprintf(crash, sizeof(crash), "%s/epoch=1-step=20", root);
		kid = fork();
		WT_REQUIRE(kid >= 0);
		if (kid == 0) {
			weft_atomic_dir *c = NULL;

			if (weft_atomic_dir_begin(crash, &c) != WEFT_OK ||
			    weft_atomic_dir_file_open(c, "model.bin") != WEFT_OK ||
			    weft_atomic_dir_file_write(c, "partial", 7) != WEFT_OK)
				_exit(2);
			_exit(0); /* the crash: no close, no commit */
		}
		waitpid(kid, &status, 0);
		WT_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		WT_CHECK(!exists(crash));
		snprintf(tmp, sizeof(tmp), "%s.tmp-%ld-%s", crash, (long)kid,
			 weft_atomic_dir_host_tag());
		WT_CHECK(exists(tmp));
		WT_FAILS(weft_manifest_verify(crash), WEFT_ERR_NOT_FOUND, crash);
		WT_OK(weft_atomic_dir_clean_stale(crash, &removed));
		WT_CHECK(removed == 1);
		WT_CHECK(!exists(tmp));
	}
	snprintf(p, sizeof(p), "rm -rf %s", root);
	WT_CHECK(system(p) == 0);
	return wt_done("test_atomic_dir");
}
