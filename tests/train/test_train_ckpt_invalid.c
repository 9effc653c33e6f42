/* Checkpoints with a damaged model.safetensors or an incomplete manifest,
 * through all three readers: `weft ckpt inspect`, `weft ckpt export` and
 * the loader (`weft validate --ckpt`, `weft fit --trainer.resume`). They
 * share one check (nn/safetensors.h, train/checkpoint_files.h), so each
 * case must end in the same clear error from each: exit status 1, one
 * stderr line starting "weft: " that says what is wrong, no crash, no
 * "manifest verified", no exported file. Each crafted file comes with a
 * manifest that matches it, so only the safetensors check can refuse it:
 *   - a 10000-byte tensor name (export overflowed a buffer);
 *   - a header that is a JSON array (export and inspect crashed);
 *   - a dim of 2^62, and dims whose product passes 2^63 bytes (inspect
 *     overflowed an int64);
 *   - data_offsets outside the file, two tensors that overlap, a shape
 *     whose bytes differ from its offsets (inspect said "verified",
 *     export wrote invalid files).
 * A valid file with names to escape (a quote, 4000 bytes) exports to a
 * file the reader accepts with the names intact.
 */
#include "ckpt_test.h"

#include "nn/safetensors.h"

/* A safetensors file: the length, `header` as it is, data_bytes zeros. */
static void write_st(const char *path, const char *header, size_t data_bytes)
{
	size_t hlen = strlen(header);
	unsigned char *b = calloc(1, 8 + hlen + data_bytes);

	WT_REQUIRE(b);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	memcpy(b + 8, header, hlen);
	tt_write(path, b, 8 + hlen + data_bytes);
	free(b);
}

/* Checkpoint `tag` (a copy of good) with model.safetensors replaced by
 * `header` + data_bytes, manifest matching: every reader refuses it with
 * `what` in its message. */
static void bad_model(const char *good, const char *tag, const char *header, size_t data_bytes,
		      const char *what)
{
	char t[128], out[128];
	int rc;

	ckpt_copy(good, tag);
	write_st(tt_path("%s/model.safetensors", tag), header, data_bytes);
	ckpt_write_manifest(tt_path("%s", tag), ckpt_files, 3);

	snprintf(t, sizeof(t), "%s_inspect", tag);
	rc = tt_weft(t, "ckpt", "inspect", tag);
	ckpt_expect_error(t, rc, what);

	snprintf(t, sizeof(t), "%s_export", tag);
	snprintf(out, sizeof(out), "%s.safetensors", tag);
	rc = tt_weft(t, "ckpt", "export", tag, out, "--optimizer");
	ckpt_expect_error(t, rc, what);
	WT_CHECK(!tt_exists(tt_path("%s", out)));

	snprintf(t, sizeof(t), "%s_load", tag);
	rc = tt_weft(t, "validate", "--config", "mlp.yaml", "--ckpt", tag);
	ckpt_expect_error(t, rc, what);
}

static void test_bad_models(const char *good)
{
	size_t long_len = 10000;
	char *hdr = malloc(long_len + 256);

	WT_REQUIRE(hdr);
	memcpy(hdr, "{\"", 2);
	memset(hdr + 2, 'w', long_len);
	snprintf(hdr + 2 + long_len, 256,
		 "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
	bad_model(good, "long_name", hdr, 4, "a tensor name of 10000 bytes");
	free(hdr);

	bad_model(good, "array", "[{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}]",
		  4, "the header must be a JSON object");
	/* 2^62 */
	bad_model(good, "huge_dim",
		  "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
		  "\"data_offsets\":[0,16]}}", 16, "tensor 'w' has a dim too large");
	/* 2^40 x 2^30 floats: 2^72 bytes */
	bad_model(good, "huge_shape",
		  "{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1073741824],"
		  "\"data_offsets\":[0,16]}}", 16, "tensor 'w' has a shape of more than 2^63 bytes");
	/* zero elements, but the other dims' product past 2^63 */
	bad_model(good, "huge_empty",
		  "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387903,3],"
		  "\"data_offsets\":[0,0]}}", 0, "tensor 'w' has a shape of more than 2^63 bytes");
	bad_model(good, "outside",
		  "{\"w\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[0,4000]}}", 16,
		  "tensor 'w' has data_offsets [0, 4000] outside the 16 bytes of data");
	bad_model(good, "overlap",
		  "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
		  "they overlap");
	bad_model(good, "mismatch",
		  "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
		  "tensor 'w' (F32 [3]) needs 12 bytes but data_offsets [0, 8] hold 8");
	bad_model(good, "bad_dtype",
		  "{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
		  "tensor 'w' has dtype 'Q4'");
}

/* Names that need escaping, and one of 4000 bytes (within the limit):
 * inspect lists them, export writes a file the reader accepts. */
static void test_odd_names(const char *good)
{
	size_t long_len = 4000;
	char *hdr = malloc(long_len + 256), *name = malloc(long_len + 1);
	weft_st_file *f = NULL;
	int rc;

	WT_REQUIRE(hdr && name);
	memset(name, 'n', long_len);
	name[long_len] = '\0';
	snprintf(hdr, long_len + 256,
		 "{\"a\\\"b\\\\c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		 "\"%s\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[8,12]}}", name);
	ckpt_copy(good, "odd");
	write_st(tt_path("odd/model.safetensors"), hdr, 12);
	ckpt_write_manifest(tt_path("odd"), ckpt_files, 3);
	rc = tt_weft("odd_inspect", "ckpt", "inspect", "odd");
	WT_CHECK(tt_expect_ok("odd_inspect", rc));
	WT_STR_CONTAINS(tt_output("odd_inspect", "out"), "a\"b\\c");
	WT_STR_CONTAINS(tt_output("odd_inspect", "out"), "2 tensors, 3 elements");
	rc = tt_weft("odd_export", "ckpt", "export", "odd", "odd.safetensors");
	WT_CHECK(tt_expect_ok("odd_export", rc));
	WT_REQUIRE(weft_st_open(tt_path("odd.safetensors"), &f) == WEFT_OK);
	WT_CHECK(f->count == 2);
	WT_CHECK(weft_st_find(f, "a\"b\\c") != NULL);
	WT_CHECK(weft_st_find(f, name) != NULL);
	weft_st_close(f);
	/* the optimizer state is for the mlp, not these tensors: refused */
	rc = tt_weft("odd_export_optim", "ckpt", "export", "odd", "odd2.safetensors",
		     "--optimizer");
	ckpt_expect_error("odd_export_optim", rc, "the F32 tensors of model.safetensors have 2");
	WT_CHECK(!tt_exists(tt_path("odd2.safetensors")));
	free(name);
	free(hdr);
}

int main(void)
{
	const char *good;
	int rc;

	tt_scratch("weft_ckpt_invalid");
	good = ckpt_make_good();

	/* the good checkpoint passes all three */
	rc = tt_weft("good_inspect", "ckpt", "inspect", good);
	WT_CHECK(tt_expect_ok("good_inspect", rc));
	WT_STR_CONTAINS(tt_output("good_inspect", "out"), "manifest verified");
	rc = tt_weft("good_export", "ckpt", "export", good, "good.safetensors", "--optimizer");
	WT_CHECK(tt_expect_ok("good_export", rc));

	test_bad_models(good);
	test_odd_names(good);
	tt_cleanup();
	return wt_done("test_train_ckpt_invalid");
}
