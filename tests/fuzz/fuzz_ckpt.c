/* libFuzzer target for the checkpoint reader's parsers: the safetensors
 * header (core/nn/safetensors.c) and manifest.json (core/runlog/atomic_dir.c).
 *
 * The first byte picks the parser, the rest is the file:
 *   - a multiple of 4: the bytes are a safetensors file, opened by the loader's reader
 *     (weft_st_open) and by weft ckpt's header-only reader
 *     (weft_st_open_header). They share one check, so they must agree: the
 *     same status and message on a refusal; on success the same tensors,
 *     each inside the file and of its shape's bytes (abort otherwise).
 *   - odd: the bytes are the manifest.json of a directory holding one file,
 *     checked by weft_manifest_verify_listed with that file needed.
 *   - 2 more than a multiple of 4: the bytes are a trainer_state.json, read
 *     by the JSON reader the checkpoint loader reads it with
 *     (weft_json_parse_file), every field the loader reads looked up. The
 *     loader's range checks need a trainer; tests/train/
 *     test_train_state_ranges covers them.
 * Errors are fine; crashes, leaks and undefined behaviour are caught by the
 * sanitizers. Files go to a private folder under $TMPDIR made once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "nn/safetensors.h"
#include "runlog/atomic_dir.h"

static char dir[256], st_path[300], manifest_path[300], state_path[300];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/weft_fuzz_ckpt.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		abort();
	snprintf(st_path, sizeof(st_path), "%s/model.safetensors", dir);
	snprintf(manifest_path, sizeof(manifest_path), "%s/manifest.json", dir);
	snprintf(state_path, sizeof(state_path), "%s/trainer_state.json", dir);
	/* the file manifests may list: 3 bytes "abc" */
	f = fopen(st_path, "wb");
	if (!f || fwrite("abc", 1, 3, f) != 3 || fclose(f) != 0)
		abort();
}

static void put(const char *path, const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
		abort();
}

static void same_tensors(const weft_st_file *a, const weft_st_file *b)
{
	if (a->count != b->count || a->size != b->size || a->data_at != b->data_at ||
	    a->data_at > a->size)
		abort();
	for (size_t i = 0; i < a->count; i++) {
		const weft_st_tensor *x = &a->tensors[i], *y = &b->tensors[i];
		weft_tensor t = { .dtype = x->dtype, .ndim = x->ndim };

		memcpy(t.shape, x->shape, sizeof(t.shape));
		if (strcmp(x->name, y->name) != 0 || x->dtype != y->dtype || x->ndim != y->ndim ||
		    memcmp(x->shape, y->shape, sizeof(x->shape)) != 0 || x->begin != y->begin ||
		    x->end != y->end || x->end > a->size - a->data_at ||
		    x->end - x->begin != (uint64_t)weft_tensor_nbytes(&t))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const needed[] = { "model.safetensors" };
	weft_st_file *a = NULL, *b = NULL;
	weft_status sa, sb;
	char msg[2048];

	if (!dir[0])
		setup();
	if (size < 1)
		return 0;
	if (data[0] & 1) {
		put(manifest_path, data + 1, size - 1);
		(void)weft_manifest_verify_listed(dir, needed, 1);
		return 0;
	}
	if (data[0] & 2) {
		static const char *const fields[] = {
			"format", "version", "global_step", "epoch", "next_batch", "seed",
			"global_batch", "world_size", "numel", "bad_checks", "strategy",
			"optimizer", "optimizer_slots", "best_score", "train_loss", "loss_scaler"
		};
		weft_json_value *js = NULL;

		put(state_path, data + 1, size - 1);
		if (weft_json_parse_file(state_path, &js) == WEFT_OK) {
			for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
				(void)weft_json_get(js, fields[i]);
		}
		weft_json_free(js);
		return 0;
	}
	put(st_path, data + 1, size - 1);
	sa = weft_st_open(st_path, &a);
	snprintf(msg, sizeof(msg), "%s", sa ? weft_error_last() : "");
	sb = weft_st_open_header(st_path, &b);
	if (sa != sb || (sa && strcmp(msg, weft_error_last()) != 0)) {
		fprintf(stderr, "the readers disagree:\n  weft_st_open: %s\n  "
			"weft_st_open_header: %s\n", msg, sb ? weft_error_last() : "ok");
		abort();
	}
	if (!sa)
		same_tensors(a, b);
	weft_st_close(a);
	weft_st_close(b);
	/* put back the 3-byte file the manifests may list */
	put(st_path, (const uint8_t *)"abc", 3);
	return 0;
}
