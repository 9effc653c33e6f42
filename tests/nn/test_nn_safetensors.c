/* safetensors: save -> load round trip is bit-identical, the file follows
 * the format (aligned header with format "pt", contiguous offsets), and
 * every malformed or mismatched file gives a status and a message naming
 * the tensor and what is wrong, changing nothing; the header-only reader
 * that weft ckpt uses gives the same verdict as the loader. */
#include <stdint.h>

#include "nn_test_util.h"

static weft_model *small_mlp(uint64_t seed)
{
	weft_mlp_config c = { .in_features = 6, .hidden = { 5 }, .n_hidden = 1, .out_features = 3 };
	weft_model_options o = { .seed = seed };
	weft_model *m;

	WT_OK(weft_model_create_mlp(&c, &o, &m));
	return m;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	unsigned char *b;
	long len;

	WT_REQUIRE(fp != NULL);
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	b = malloc((size_t)len + 1);
	WT_REQUIRE(fread(b, 1, (size_t)len, fp) == (size_t)len);
	fclose(fp);
	*n = (size_t)len;
	return b;
}

static void spit(const char *path, const void *b, size_t n)
{
	FILE *fp = fopen(path, "wb");

	WT_REQUIRE(fp != NULL);
	WT_REQUIRE(fwrite(b, 1, n, fp) == n);
	fclose(fp);
}

/* A file with header text `json` (padded to 8) and `data_bytes` bytes. */
static void write_raw(const char *path, const char *json, size_t data_bytes)
{
	size_t h = strlen(json), pad = (8 - h % 8) % 8, total = 8 + h + pad + data_bytes;
	unsigned char *b = calloc(1, total);
	uint64_t n = h + pad;

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(n >> (8 * i));
	memcpy(b + 8, json, h);
	memset(b + 8 + h, ' ', pad);
	spit(path, b, total);
	free(b);
}

static void test_round_trip(void)
{
	char p1[256], p2[256];
	weft_model *a = small_mlp(1), *b = small_mlp(2), *g = fixture_model("gpt", NULL), *g2;
	weft_params *pa = weft_model_params(a), *pb = weft_model_params(b);
	size_t n1, n2, nb = (size_t)weft_params_numel(pa, WEFT_F32) * 4;
	unsigned char *f1, *f2;
	uint64_t hlen = 0;

	scratch("a.safetensors", p1, sizeof(p1));
	scratch("b.safetensors", p2, sizeof(p2));
	WT_CHECK(memcmp(weft_params_at(pa, 0)->data, weft_params_at(pb, 0)->data, nb));
	WT_OK(weft_model_save_safetensors(a, p1));
	WT_OK(weft_model_load_safetensors(b, p1));
	WT_CHECK(!memcmp(weft_params_at(pa, 0)->data, weft_params_at(pb, 0)->data, nb));
	WT_OK(weft_model_save_safetensors(b, p2));
	f1 = slurp(p1, &n1);
	f2 = slurp(p2, &n2);
	WT_CHECK(n1 == n2 && !memcmp(f1, f2, n1)); /* the same bytes again */
	for (int i = 7; i >= 0; i--)
		hlen = (hlen << 8) | f1[i];
	WT_CHECK(hlen % 8 == 0);                   /* data starts 8-byte aligned */
	WT_CHECK(!memcmp(f1 + 8, "{\"__metadata__\":{\"format\":\"pt\"}", 31));
	WT_CHECK(n1 == 8 + hlen + nb);             /* contiguous, nothing extra */
	free(f1);
	free(f2);

	/* a GPT, through the reader: names in parameter order, and a fresh
	 * model loads it back bit for bit */
	WT_OK(weft_model_save_safetensors(g, p1));
	{
		weft_st_file *f;
		weft_params *ps = weft_model_params(g);

		WT_OK(weft_st_open(p1, &f));
		WT_CHECK(f->count == weft_params_count(ps));
		WT_CHECK(f->format && !strcmp(f->format, "pt"));
		for (size_t i = 0; i < f->count; i++)
			WT_CHECK(!strcmp(f->tensors[i].name, weft_params_at(ps, i)->name));
		weft_st_close(f);
		WT_OK(weft_model_create_gpt(weft_model_gpt_config(g), NULL, &g2));
		WT_OK(weft_model_load_safetensors(g2, p1));
		WT_CHECK(!memcmp(weft_params_at(ps, 0)->data,
				 weft_params_at(weft_model_params(g2), 0)->data,
				 (size_t)weft_params_numel(ps, WEFT_F32) * 4));
		weft_model_free(g2);
	}
	weft_model_free(g);
	weft_model_free(a);
	weft_model_free(b);
	remove(p1);
	remove(p2);
}

/* Writes m's parameters with entry `idx` changed by `edit`. */
typedef void (*edit_fn)(weft_st_entry *e, int64_t *shape);

static void write_edited(const weft_model *m, const char *path, size_t idx, edit_fn edit,
			 int drop, const weft_st_entry *extra)
{
	weft_params *ps = weft_model_params(m);
	size_t n = weft_params_count(ps), k = 0;

	WT_REQUIRE(n < 63);
	weft_st_entry e[64];
	int64_t shape[WEFT_MAX_DIMS];

	for (size_t i = 0; i < n; i++) {
		const weft_tensor *p = weft_params_at(ps, i);

		if (drop && i == idx)
			continue;
		e[k] = (weft_st_entry){ .name = p->name, .dtype = (weft_dtype)p->dtype,
					.ndim = p->ndim, .shape = p->shape, .data = p->data };
		if (edit && i == idx) {
			memcpy(shape, p->shape, sizeof(shape));
			e[k].shape = shape;
			edit(&e[k], shape);
		}
		k++;
	}
	if (extra)
		e[k++] = *extra;
	WT_OK(weft_st_write(path, e, k));
}

static void transpose(weft_st_entry *e, int64_t *shape)
{
	int64_t t = shape[0];

	(void)e;
	shape[0] = shape[1];
	shape[1] = t;
}

static void to_i32(weft_st_entry *e, int64_t *shape)
{
	(void)shape;
	e->dtype = WEFT_I32;
}

static void test_mismatch(void)
{
	char path[256];
	weft_model *src = small_mlp(1), *m = small_mlp(2);
	weft_params *ps = weft_model_params(m);
	size_t nb = (size_t)weft_params_numel(ps, WEFT_F32) * 4;
	unsigned char *before = malloc(nb);
	float junk[4] = { 0 };
	int64_t jshape[1] = { 4 };
	weft_st_entry extra = { .name = "layers.7.weight", .dtype = WEFT_F32, .ndim = 1,
				.shape = jshape, .data = junk };

	memcpy(before, weft_params_at(ps, 0)->data, nb);
	scratch("bad.safetensors", path, sizeof(path));

	write_edited(src, path, 0, transpose, 0, NULL);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_SHAPE, path, "'layers.0.weight'",
		 "has shape [6, 5] in the file but the model expects [5, 6]");
	write_edited(src, path, 1, to_i32, 0, NULL);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_DTYPE, "'layers.0.bias'",
		 "is I32 in the file but the model's parameter is F32");
	write_edited(src, path, 2, NULL, 1, NULL);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_NOT_FOUND,
		 "parameter 'layers.1.weight' [3, 5] is missing from the file");
	write_edited(src, path, 0, NULL, 0, &extra);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_INVALID_ARG,
		 "holds tensor 'layers.7.weight' [4], which this model does not have");
	/* none of the failed loads changed a parameter */
	WT_CHECK(!memcmp(weft_params_at(ps, 0)->data, before, nb));
	WT_FAILS(weft_model_load_safetensors(m, "/nonexistent/w.safetensors"), WEFT_ERR_NOT_FOUND,
		 "/nonexistent/w.safetensors", "cannot open");
	remove(path);
	free(before);
	weft_model_free(src);
	weft_model_free(m);
}

/* The tied head: lm_head.weight is accepted when it equals wte (the
 * fixture's weights file holds it, as torch's state_dict() does) and
 * refused when it differs. */
static void test_tied_head(void)
{
	char path[1024], out[256];
	weft_model *m = fixture_model("gpt", NULL);
	weft_params *ps = weft_model_params(m);
	const weft_tensor *wte = weft_params_find(ps, "transformer.wte.weight");
	float *other = calloc((size_t)weft_tensor_numel(wte), 4);
	weft_st_entry head = { .name = "lm_head.weight", .dtype = WEFT_F32, .ndim = 2,
			       .shape = wte->shape, .data = other };
	weft_st_file *f;

	WT_OK(weft_st_open(fixture("gpt_weights.safetensors", path, sizeof(path)), &f));
	WT_CHECK(weft_st_find(f, "lm_head.weight") != NULL);
	weft_st_close(f);
	scratch("head.safetensors", out, sizeof(out));
	write_edited(m, out, 0, NULL, 0, &head);
	WT_FAILS(weft_model_load_safetensors(m, out), WEFT_ERR_INVALID_ARG,
		 "'lm_head.weight' (F32 [64, 32]) differs from 'transformer.wte.weight'");
	remove(out);
	free(other);
	weft_model_free(m);
}

/* Headers that break the format's schema, and what the reader says. */
static const struct {
	const char *json;
	size_t data_bytes;
	const char *what, *where; /* where: NULL when the position is not checked */
} schema[] = {
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
	  "expected an integer, found a fraction or exponent", "at byte 37" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 4,
	  "an integer too large", NULL },
	{ "{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	  "tensor 'a': dtype must be a string", "at byte 22" },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4,
	  "tensor 'a': a shape must be an array of integers", NULL },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
	  "a shape has more than 8 entries", NULL },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4,
	  "tensor 'a': data_offsets must be [begin, end]", NULL },
	{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
	  "tensor 'a' has an unknown field 'x' (expected dtype, shape, data_offsets)", NULL },
	{ "{\"a\":[0,4]}", 4,
	  "tensor 'a' must be an object of dtype, shape and data_offsets", "at byte 13" },
	{ "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	  "a tensor has an empty name", NULL },
	{ "{\"__metadata__\":[]}", 0, "__metadata__ must be an object of strings", NULL },
	{ "{\"__metadata__\":{\"step\":3}}", 0,
	  "__metadata__ values must be strings ('step' is not)", NULL },
	{ "", 0, "the header must be a JSON object", NULL },
	{ "{} x", 0, "unexpected text after the document", "at byte 11" },
};

static void test_corrupt(void)
{
	char path[256], good[256];
	weft_model *m = small_mlp(1);
	unsigned char *b;
	size_t n;

	scratch("corrupt.safetensors", path, sizeof(path));
	scratch("good.safetensors", good, sizeof(good));
	WT_OK(weft_model_save_safetensors(m, good));
	b = slurp(good, &n);

	spit(path, b, n - 10);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, path,
		 "tensor 'layers.1.bias' has data_offsets [200, 212] outside the 202 bytes",
		 "truncated");
	spit(path, b, 5);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "5 bytes is too short", "truncated");
	spit(path, b, 40);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, "the header length is",
		 "the file is shorter than that");
	free(b);

	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, "bad safetensors header",
		 "expected ',' or '}'");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}", 8);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, "at byte 61",
		 "expected a string key");
	write_raw(path, "[1, 2]", 0);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "the header must be a JSON object");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1000]}}", 8);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, "tensor 'a'",
		 "data_offsets [0, 1000] outside the 8 bytes of data");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "tensor 'a' (F32 [3]) needs 12 bytes but data_offsets [0, 8] hold 8");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, "tensor 'b' starts at data byte 4",
		 "they overlap");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "tensor 'a' starts at data byte 4", "a hole");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "the tensors cover 8 bytes of data but the file holds 12");
	write_raw(path, "{\"a\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "tensor 'a' has dtype 'F8', which weft does not read");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, "tensor 'a' appears twice");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "expected a non-negative integer");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
	WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT,
		 "tensor 'a' lacks its data_offsets");
	/* the header's schema, value by value; "at byte N" is 8 + the value's
	 * offset in the header text, counted by hand */
	for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]); i++) {
		write_raw(path, schema[i].json, schema[i].data_bytes);
		WT_FAILS(weft_model_load_safetensors(m, path), WEFT_ERR_CORRUPT, schema[i].what,
			 schema[i].where);
	}
	/* a well-formed file with escapes and metadata reads; names decode */
	write_raw(path, "{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
		  "\"a\\u00e9\\\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
		  "\"z\":{\"dtype\":\"I64\",\"shape\":[0, 3],\"data_offsets\":[4,4]}}", 4);
	{
		weft_st_file *f;

		WT_OK(weft_st_open(path, &f));
		WT_CHECK(f->count == 2 && !strcmp(f->tensors[0].name, "a\xc3\xa9\""));
		WT_CHECK(f->tensors[0].ndim == 0 && f->tensors[1].shape[1] == 3);
		weft_st_close(f);
	}
	remove(path);
	remove(good);
	weft_model_free(m);
}

/* The loader (weft_st_open) and the header-only reader of weft ckpt
 * (weft_st_open_header) share one check: the same status and message for
 * every bad file, including names past WEFT_ST_MAX_NAME and shapes whose
 * bytes pass 2^63, and the same tensors and data offset for a good one. */
static void test_one_check(void)
{
	static const struct {
		const char *json;
		size_t data_bytes;
		const char *what;
	} bad[] = {
		{ "[1, 2]", 0, "the header must be a JSON object" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
		  "\"data_offsets\":[0,16]}}", 16, "tensor 'a' has a dim too large" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1073741824],"
		  "\"data_offsets\":[0,16]}}", 16, "tensor 'a' has a shape of more than 2^63 bytes" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[0,4611686018427387903,3],"
		  "\"data_offsets\":[0,0]}}", 0, "tensor 'a' has a shape of more than 2^63 bytes" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1000]}}", 8,
		  "data_offsets [0, 1000] outside the 8 bytes of data" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
		  "they overlap" },
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
		  "needs 12 bytes" },
	};
	size_t long_len = 10000;
	char path[256], msg[2048], *json = malloc(long_len + 128);
	weft_st_file *a, *b;

	scratch("one_check.safetensors", path, sizeof(path));
	for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
		const char *what = i < sizeof(bad) / sizeof(bad[0]) ? bad[i].what :
				   "a tensor name of 10000 bytes";

		if (i < sizeof(bad) / sizeof(bad[0])) {
			write_raw(path, bad[i].json, bad[i].data_bytes);
		} else {
			memcpy(json, "{\"", 2);
			memset(json + 2, 'n', long_len);
			snprintf(json + 2 + long_len, 128, "\":{\"dtype\":\"F32\",\"shape\":[1],"
				 "\"data_offsets\":[0,4]}}");
			write_raw(path, json, 4);
		}
		WT_FAILS(weft_st_open(path, &a), WEFT_ERR_CORRUPT, path, what);
		snprintf(msg, sizeof(msg), "%s", weft_error_last());
		WT_FAILS(weft_st_open_header(path, &b), WEFT_ERR_CORRUPT, path, what);
		WT_CHECK(strcmp(msg, weft_error_last()) == 0);
	}
	/* the longest name allowed reads */
	memcpy(json, "{\"", 2);
	memset(json + 2, 'n', WEFT_ST_MAX_NAME);
	snprintf(json + 2 + WEFT_ST_MAX_NAME, 128,
		 "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
	write_raw(path, json, 4);
	WT_OK(weft_st_open(path, &a));
	WT_OK(weft_st_open_header(path, &b));
	WT_CHECK(a->count == 1 && b->count == 1 && a->data_at == b->data_at &&
		 a->size == b->size && !strcmp(a->tensors[0].name, b->tensors[0].name));
	WT_CHECK(b->buf == NULL && b->tensors[0].data == NULL);
	WT_CHECK(a->tensors[0].data == a->buf + a->data_at);
	weft_st_close(a);
	weft_st_close(b);
	WT_FAILS(weft_st_open_header("/nonexistent/w.safetensors", &b), WEFT_ERR_NOT_FOUND,
		 "/nonexistent/w.safetensors");
	free(json);
	remove(path);
}

int main(void)
{
	test_round_trip();
	test_mismatch();
	test_tied_head();
	test_corrupt();
	test_one_check();
	return wt_done("test_nn_safetensors");
}
