/* The safetensors format: a checking reader and a writer (see
 * safetensors.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "nn/safetensors.h"

/* ---- reading the header ---- */

/* The header is parsed by the shared JSON reader (base/json.h) into a tree;
 * this part checks the tree against the format. Positions in messages are
 * byte offsets into the file (the header starts at byte 8). */

static weft_status corrupt(const char *path, size_t at, const char *fmt, ...) WEFT_PRINTF(3, 4);

static weft_status corrupt(const char *path, size_t at, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return weft_error_set(WEFT_ERR_CORRUPT, "%s: bad safetensors header at byte %zu: %s; the "
			      "file is damaged or not safetensors", path, at + 8, msg);
}

/* A non-negative integer written without fraction or exponent, exactly. */
static weft_status header_uint(const char *path, const weft_json_value *v, uint64_t *out)
{
	if (v->kind != WEFT_JSON_NUMBER || (v->is_integer && v->integer < 0) ||
	    (!v->is_integer && v->number < 0))
		return corrupt(path, v->at, "expected a non-negative integer");
	if (!v->is_integer)
		return corrupt(path, v->at, v->number >= 0x1p63 ? "an integer too large" :
			       "expected an integer, found a fraction or exponent");
	*out = (uint64_t)v->integer;
	return WEFT_OK;
}

/* An array of at most `max` such integers into vals; *n the count. */
static weft_status header_uint_list(const char *path, const char *name, const char *what,
				    const weft_json_value *v, uint64_t *vals, int max, int *n)
{
	weft_status st;

	if (v->kind != WEFT_JSON_ARRAY)
		return corrupt(path, v->at, "tensor '%s': %s must be an array of integers", name,
			       what);
	if (v->count > (size_t)max)
		return corrupt(path, v->at, "%s has more than %d entries", what, max);
	for (size_t i = 0; i < v->count; i++)
		if ((st = header_uint(path, &v->items[i], &vals[i])))
			return st;
	*n = (int)v->count;
	return WEFT_OK;
}

/* One tensor's entry {"dtype", "shape", "data_offsets"} into t. */
static weft_status header_tensor(const char *path, const weft_json_value *v, weft_st_tensor *t)
{
	uint64_t vals[WEFT_MAX_DIMS];
	int have_dtype = 0, have_shape = 0, have_offsets = 0, n;
	weft_status st;

	if (v->kind != WEFT_JSON_OBJECT)
		return corrupt(path, v->at, "tensor '%s' must be an object of dtype, shape and "
			       "data_offsets", t->name);
	for (size_t i = 0; i < v->count; i++) {
		const char *key = v->keys[i];
		const weft_json_value *x = &v->items[i];

		if (!strcmp(key, "dtype")) {
			if (x->kind != WEFT_JSON_STRING)
				return corrupt(path, x->at, "tensor '%s': dtype must be a string",
					       t->name);
			if (weft_dtype_parse(x->string, &t->dtype))
				return corrupt(path, x->at, "tensor '%s' has dtype '%s', which weft "
					       "does not read (known: F32, F16, BF16, I32, I64, U8, "
					       "U16)", t->name, x->string);
			have_dtype = 1;
		} else if (!strcmp(key, "shape")) {
			if ((st = header_uint_list(path, t->name, "a shape", x, vals, WEFT_MAX_DIMS,
						   &n)))
				return st;
			t->ndim = n;
			for (int d = 0; d < n; d++) {
				if (vals[d] > (uint64_t)INT64_MAX / 2)
					return corrupt(path, x->items[d].at, "tensor '%s' has a dim "
						       "too large", t->name);
				t->shape[d] = (int64_t)vals[d];
			}
			have_shape = 1;
		} else if (!strcmp(key, "data_offsets")) {
			if ((st = header_uint_list(path, t->name, "data_offsets", x, vals, 2, &n)))
				return st;
			if (n != 2)
				return corrupt(path, x->at, "tensor '%s': data_offsets must be "
					       "[begin, end]", t->name);
			t->begin = vals[0];
			t->end = vals[1];
			have_offsets = 1;
		} else {
			return corrupt(path, x->at, "tensor '%s' has an unknown field '%s' "
				       "(expected dtype, shape, data_offsets)", t->name, key);
		}
	}
	if (!have_dtype || !have_shape || !have_offsets)
		return corrupt(path, v->at, "tensor '%s' lacks %s", t->name,
			       !have_dtype ? "its dtype" : !have_shape ? "its shape" :
			       "its data_offsets");
	return WEFT_OK;
}

/* Every value must be a string. The first "format" goes to f->format, and
 * every pair (the first of a repeated key) to f->meta_keys / meta_values,
 * all taken from the tree. */
static weft_status header_metadata(weft_st_file *f, weft_json_value *v)
{
	if (v->kind != WEFT_JSON_OBJECT)
		return corrupt(f->path, v->at, "__metadata__ must be an object of strings");
	if (f->meta_keys)
		return corrupt(f->path, v->at, "__metadata__ appears twice");
	f->meta_keys = calloc(v->count ? v->count : 1, sizeof(*f->meta_keys));
	f->meta_values = calloc(v->count ? v->count : 1, sizeof(*f->meta_values));
	if (!f->meta_keys || !f->meta_values)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading the header",
				      f->path);
	for (size_t i = 0; i < v->count; i++) {
		weft_json_value *x = &v->items[i];

		if (x->kind != WEFT_JSON_STRING)
			return corrupt(f->path, x->at, "__metadata__ values must be strings ('%s' "
				       "is not)", v->keys[i]);
		if (!strcmp(v->keys[i], "format") && !f->format) {
			f->format = strdup(x->string);
			if (!f->format)
				return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading "
						      "the header", f->path);
		}
		if (weft_st_meta(f, v->keys[i]))
			continue;
		f->meta_keys[f->n_meta] = v->keys[i];
		f->meta_values[f->n_meta++] = x->string;
		v->keys[i] = NULL;
		x->string = NULL;
	}
	return WEFT_OK;
}

static int by_key(const void *a, const void *b)
{
	char *const *x = *(char *const *const *)a, *const *y = *(char *const *const *)b;
	int c = strcmp(*x, *y);

	/* equal names in document order, so the later one is reported */
	return c ? c : (x > y) - (x < y);
}

/* Tensor names appear once: sorted, in O(n log n) for headers of up to
 * WEFT_ST_MAX_HEADER bytes (a linear search per name would be quadratic). */
static weft_status header_unique(const char *path, const weft_json_value *root)
{
	char ***order;
	size_t n = 0;
	weft_status st = WEFT_OK;

	order = malloc((root->count ? root->count : 1) * sizeof(*order));
	if (!order)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading the header", path);
	for (size_t i = 0; i < root->count; i++)
		if (strcmp(root->keys[i], "__metadata__"))
			order[n++] = &root->keys[i];
	qsort(order, n, sizeof(*order), by_key);
	for (size_t i = 1; i < n && !st; i++)
		if (!strcmp(*order[i - 1], *order[i]))
			st = corrupt(path, root->items[order[i] - root->keys].at,
				     "tensor '%s' appears twice", *order[i]);
	free(order);
	return st;
}

/* The header's n bytes of JSON at text into f->tensors and f->format. */
static weft_status header_parse(weft_st_file *f, const char *text, size_t n)
{
	weft_json_value *root = NULL;
	weft_json_error jerr = { 0 };
	size_t lead = 0;
	weft_status st;

	while (lead < n && (text[lead] == ' ' || text[lead] == '\t' || text[lead] == '\n' ||
			    text[lead] == '\r'))
		lead++;
	if (lead == n || text[lead] != '{')
		return corrupt(f->path, lead, "the header must be a JSON object");
	st = weft_json_parse_ex(f->path, text, n, &root, &jerr);
	if (st == WEFT_ERR_PARSE)
		return corrupt(f->path, jerr.at, "%s", jerr.what);
	if (st)
		return st;
	if ((st = header_unique(f->path, root)))
		goto out_free;
	f->tensors = calloc(root->count ? root->count : 1, sizeof(*f->tensors));
	if (!f->tensors) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading the header",
				    f->path);
		goto out_free;
	}
	for (size_t i = 0; i < root->count; i++) {
		weft_st_tensor *t = &f->tensors[f->count];

		if (!strcmp(root->keys[i], "__metadata__")) {
			if ((st = header_metadata(f, &root->items[i])))
				goto out_free;
			continue;
		}
		if (!root->keys[i][0]) {
			st = corrupt(f->path, root->items[i].at, "a tensor has an empty name");
			goto out_free;
		}
		if (strlen(root->keys[i]) > WEFT_ST_MAX_NAME) {
			st = corrupt(f->path, root->items[i].at, "a tensor name of %zu bytes "
				     "(starting '%.40s') is longer than the %d weft reads",
				     strlen(root->keys[i]), root->keys[i], WEFT_ST_MAX_NAME);
			goto out_free;
		}
		/* the name is taken from the tree, which frees what is left */
		t->name = root->keys[i];
		root->keys[i] = NULL;
		f->count++;
		if ((st = header_tensor(f->path, &root->items[i], t)))
			goto out_free;
	}
out_free:
	weft_json_free(root);
	return st;
}

static int by_begin(const void *a, const void *b)
{
	const weft_st_tensor *x = *(weft_st_tensor *const *)a, *y = *(weft_st_tensor *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* Offsets fit the data, match the shapes, and tile it without holes. */
static weft_status check_layout(weft_st_file *f, uint64_t data_bytes)
{
	weft_st_tensor **order;
	uint64_t at = 0;
	weft_status st = WEFT_OK;

	for (size_t i = 0; i < f->count; i++) {
		weft_st_tensor *t = &f->tensors[i];
		/* the product of the non-zero dims stays below 2^63, so any
		 * partial product of the shape fits an int64 */
		uint64_t bytes = weft_dtype_size(t->dtype), span = bytes;
		char sh[160];

		for (int32_t d = 0; d < t->ndim; d++) {
			if (!t->shape[d]) {
				bytes = 0;
				continue;
			}
			if (span > (uint64_t)INT64_MAX / (uint64_t)t->shape[d])
				return weft_error_set(WEFT_ERR_CORRUPT, "%s: tensor '%s' has a shape "
						      "of more than 2^63 bytes (dim %d is %lld); the "
						      "file is damaged or not safetensors", f->path,
						      t->name, (int)d, (long long)t->shape[d]);
			span *= (uint64_t)t->shape[d];
			bytes *= (uint64_t)t->shape[d];
		}
		if (t->begin > t->end || t->end > data_bytes)
			return weft_error_set(WEFT_ERR_CORRUPT, "%s: tensor '%s' has data_offsets "
					      "[%llu, %llu] outside the %llu bytes of data; the "
					      "file is damaged or truncated", f->path, t->name,
					      (unsigned long long)t->begin,
					      (unsigned long long)t->end,
					      (unsigned long long)data_bytes);
		if (t->end - t->begin != bytes) {
			weft_tensor tmp = { .ndim = t->ndim };

			memcpy(tmp.shape, t->shape, sizeof(tmp.shape));
			return weft_error_set(WEFT_ERR_CORRUPT, "%s: tensor '%s' (%s %s) needs %llu "
					      "bytes but data_offsets [%llu, %llu] hold %llu",
					      f->path, t->name, weft_dtype_name(t->dtype),
					      weft_shape_str(&tmp, sh, sizeof(sh)),
					      (unsigned long long)bytes,
					      (unsigned long long)t->begin,
					      (unsigned long long)t->end,
					      (unsigned long long)(t->end - t->begin));
		}
	}
	order = malloc((f->count ? f->count : 1) * sizeof(*order));
	if (!order)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", f->path);
	for (size_t i = 0; i < f->count; i++)
		order[i] = &f->tensors[i];
	qsort(order, f->count, sizeof(*order), by_begin);
	for (size_t i = 0; i < f->count && !st; i++) {
		if (order[i]->begin != at)
			st = weft_error_set(WEFT_ERR_CORRUPT, "%s: tensor '%s' starts at data byte "
					    "%llu but the previous tensor ends at %llu (%s); the "
					    "file is damaged", f->path, order[i]->name,
					    (unsigned long long)order[i]->begin,
					    (unsigned long long)at,
					    order[i]->begin < at ? "they overlap" : "a hole");
		at = order[i]->end;
	}
	free(order);
	if (!st && at != data_bytes)
		st = weft_error_set(WEFT_ERR_CORRUPT, "%s: the tensors cover %llu bytes of data but "
				    "the file holds %llu; the file is damaged", f->path,
				    (unsigned long long)at, (unsigned long long)data_bytes);
	return st;
}

/* The one check of a file, shared by weft_st_open and weft_st_open_header:
 * the 8-byte length `len8` and the header `text` (of that length, already
 * read) against the file's f->size bytes, into f->tensors, f->format and
 * f->data_at. */
static weft_status st_check(weft_st_file *f, const unsigned char len8[8], const char *text)
{
	uint64_t n = 0;
	weft_status st;

	for (int i = 7; i >= 0; i--)
		n = (n << 8) | len8[i];
	if ((st = header_parse(f, text, (size_t)n)))
		return st;
	if ((st = check_layout(f, f->size - 8 - n)))
		return st;
	f->data_at = 8 + n;
	return WEFT_OK;
}

/* The header length of a file of f->size bytes from its first 8 bytes:
 * refused when the file is too short or the length does not fit. */
static weft_status st_header_len(weft_st_file *f, const unsigned char len8[8], uint64_t *n)
{
	*n = 0;
	if (f->size < 8)
		return weft_error_set(WEFT_ERR_CORRUPT, "%s: %zu bytes is too short for a "
				      "safetensors file (8-byte header length first); the file is "
				      "truncated", f->path, f->size);
	for (int i = 7; i >= 0; i--)
		*n = (*n << 8) | len8[i];
	if (*n > WEFT_ST_MAX_HEADER || *n > f->size - 8)
		return weft_error_set(WEFT_ERR_CORRUPT, "%s: the header length is %llu bytes but "
				      "%s; the file is truncated or not safetensors", f->path,
				      (unsigned long long)*n, *n > WEFT_ST_MAX_HEADER ?
				      "the format allows at most 100 MB" :
				      "the file is shorter than that");
	return WEFT_OK;
}

static weft_st_file *st_new(const char *path)
{
	weft_st_file *f = calloc(1, sizeof(*f));

	if (!f || !(f->path = strdup(path))) {
		free(f);
		weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", path);
		return NULL;
	}
	return f;
}

weft_status weft_st_open(const char *path, weft_st_file **out)
{
	weft_st_file *f;
	uint64_t n;
	char *buf;
	weft_status st;

	*out = NULL;
	if (!(f = st_new(path)))
		return WEFT_ERR_NOMEM;
	if ((st = weft_file_read(path, WEFT_MEM_OTHER, &buf, &f->size)))
		goto out_close;
	f->buf = (unsigned char *)buf;
	if ((st = st_header_len(f, f->buf, &n)))
		goto out_close;
	if ((st = st_check(f, f->buf, (const char *)f->buf + 8)))
		goto out_close;
	for (size_t i = 0; i < f->count; i++)
		f->tensors[i].data = f->buf + f->data_at + f->tensors[i].begin;
	*out = f;
	return WEFT_OK;
out_close:
	weft_st_close(f);
	return st;
}

weft_status weft_st_open_header(const char *path, weft_st_file **out)
{
	unsigned char len8[8] = { 0 };
	weft_st_file *f;
	struct stat sb;
	char *text = NULL;
	uint64_t n;
	int fd;
	weft_status st;

	*out = NULL;
	if (!(f = st_new(path)))
		return WEFT_ERR_NOMEM;
	/* O_NONBLOCK: a FIFO is refused below instead of waited on */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		st = weft_error_set(errno == ENOENT ? WEFT_ERR_NOT_FOUND : WEFT_ERR_IO,
				    "%s: cannot open: %s", path, strerror(errno));
		goto out_close;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		st = weft_error_set(WEFT_ERR_IO, "%s: not a regular file; give a safetensors "
				    "file", path);
		goto out_close;
	}
	f->size = (size_t)sb.st_size;
	if (pread(fd, len8, 8, 0) != (f->size < 8 ? (ssize_t)f->size : 8)) {
		st = weft_error_set(WEFT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
		goto out_close;
	}
	if ((st = st_header_len(f, len8, &n)))
		goto out_close;
	if (!(text = malloc(n ? n : 1))) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory for a header of %llu bytes",
				    path, (unsigned long long)n);
		goto out_close;
	}
	errno = 0;
	if (n && pread(fd, text, n, 8) != (ssize_t)n) {
		st = weft_error_set(WEFT_ERR_IO, "%s: reading the header failed: %s", path,
				    errno ? strerror(errno) : "the file shrank");
		goto out_close;
	}
	if ((st = st_check(f, len8, text)))
		goto out_close;
	free(text);
	close(fd);
	*out = f;
	return WEFT_OK;
out_close:
	free(text);
	if (fd >= 0)
		close(fd);
	weft_st_close(f);
	return st;
}

void weft_st_close(weft_st_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->count; i++)
		free(f->tensors[i].name);
	free(f->tensors);
	for (size_t i = 0; i < f->n_meta; i++) {
		free(f->meta_keys[i]);
		free(f->meta_values[i]);
	}
	free(f->meta_keys);
	free(f->meta_values);
	free(f->format);
	weft_mem_free(f->buf);
	free(f->path);
	free(f);
}

const weft_st_tensor *weft_st_find(const weft_st_file *f, const char *name)
{
	for (size_t i = 0; i < f->count; i++)
		if (!strcmp(f->tensors[i].name, name))
			return &f->tensors[i];
	return NULL;
}

const char *weft_st_meta(const weft_st_file *f, const char *key)
{
	for (size_t i = 0; i < f->n_meta; i++)
		if (!strcmp(f->meta_keys[i], key))
			return f->meta_values[i];
	return NULL;
}

/* ---- writing ---- */

/* The bytes of an entry's data: numel(shape) * dtype size. */
static size_t entry_nbytes(const weft_st_entry *e)
{
	weft_tensor tmp = { .dtype = e->dtype, .ndim = e->ndim };

	if (e->ndim)
		memcpy(tmp.shape, e->shape, (size_t)e->ndim * sizeof(int64_t));
	return weft_tensor_nbytes(&tmp);
}

void weft_st_header_begin(weft_json_writer *w, const char *const *meta, size_t n_meta)
{
	weft_json_begin_object(w);
	weft_json_key(w, "__metadata__");
	weft_json_begin_object(w);
	weft_json_key(w, "format");
	weft_json_string(w, "pt");
	for (size_t i = 0; i < n_meta; i++) {
		weft_json_key(w, meta[2 * i]);
		weft_json_string(w, meta[2 * i + 1]);
	}
	weft_json_end_object(w);
}

void weft_st_header_tensor(weft_json_writer *w, const char *name, weft_dtype dtype,
			   int32_t ndim, const int64_t *shape, int64_t begin, int64_t end)
{
	weft_json_key(w, name);
	weft_json_begin_object(w);
	weft_json_key(w, "dtype");
	weft_json_string(w, weft_dtype_name(dtype));
	weft_json_key(w, "shape");
	weft_json_begin_array(w);
	for (int32_t d = 0; d < ndim; d++)
		weft_json_int(w, shape[d]);
	weft_json_end_array(w);
	weft_json_key(w, "data_offsets");
	weft_json_begin_array(w);
	weft_json_int(w, begin);
	weft_json_int(w, end);
	weft_json_end_array(w);
	weft_json_end_object(w);
}

/* The header as compact JSON (base/json.h): the metadata, then each
 * tensor with its offsets into the data in entry order. A new string in
 * *text; free(). */
static weft_status header_build(const char *path, const char *const *meta, size_t n_meta,
				const weft_st_entry *e, size_t n, char **text)
{
	weft_json_writer w;
	uint64_t at = 0;
	weft_status st;

	weft_json_writer_string(&w, 0);
	weft_st_header_begin(&w, meta, n_meta);
	for (size_t i = 0; i < n; i++) {
		uint64_t bytes = entry_nbytes(&e[i]);

		/* offsets of data held in memory: far below INT64_MAX */
		weft_st_header_tensor(&w, e[i].name, e[i].dtype, e[i].ndim, e[i].shape,
				      (int64_t)at, (int64_t)(at + bytes));
		at += bytes;
	}
	weft_json_end_object(&w);
	if ((st = weft_json_finish(&w, text)))
		return weft_error_wrap(st, "%s: building the safetensors header", path);
	return WEFT_OK;
}

weft_status weft_st_write(const char *path, const weft_st_entry *e, size_t n)
{
	return weft_st_write_meta(path, NULL, 0, e, n);
}

weft_status weft_st_write_meta(const char *path, const char *const *meta, size_t n_meta,
			       const weft_st_entry *e, size_t n)
{
	static const char spaces[8] = "        ";
	char *header = NULL;
	size_t hlen, pad;
	unsigned char len8[8];
	FILE *fp = NULL;
	weft_status st = WEFT_OK;

	for (size_t i = 0; i < n; i++) {
		if (!e[i].name || !e[i].name[0] || strlen(e[i].name) > WEFT_ST_MAX_NAME)
			return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: tensor %zu has an empty or "
					      "over-long name", path, i);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(e[j].name, e[i].name))
				return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: tensor name '%s' "
						      "given twice", path, e[i].name);
	}
	for (size_t i = 0; i < 2 * n_meta; i++)
		if (!meta[i] || (i % 2 == 0 && (!strcmp(meta[i], "format") || !meta[i][0])))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: metadata pair %zu has no "
					      "key or value, or sets \"format\" (always \"pt\")",
					      path, i / 2);
	if ((st = header_build(path, meta, n_meta, e, n, &header)))
		return st;
	/* spaces after the JSON so the data starts 8-byte aligned */
	hlen = strlen(header);
	pad = (8 - hlen % 8) % 8;
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)(hlen + pad) >> (8 * i));
	fp = fopen(path, "wb");
	if (!fp) {
		st = weft_error_set(WEFT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
		goto out_free;
	}
	if (fwrite(len8, 1, 8, fp) != 8 || fwrite(header, 1, hlen, fp) != hlen ||
	    fwrite(spaces, 1, pad, fp) != pad)
		goto out_write_error;
	for (size_t i = 0; i < n; i++) {
		size_t bytes = entry_nbytes(&e[i]);

		if (bytes && fwrite(e[i].data, 1, bytes, fp) != bytes)
			goto out_write_error;
	}
	if (fclose(fp)) {
		fp = NULL;
		goto out_write_error;
	}
	free(header);
	return WEFT_OK;
out_write_error:
	st = weft_error_set(WEFT_ERR_IO, "%s: write failed: %s (is the disk full?)", path,
			    strerror(errno));
	if (fp)
		fclose(fp);
out_free:
	free(header);
	return st;
}
