/* The safetensors format: a checking reader and a writer (see
 * safetensors.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/safetensors.h"

/* ---- reading the header ---- */

typedef struct parser {
	const char *path;
	const char *start, *p, *end;
} parser;

static weft_status corrupt(const parser *ps, const char *fmt, ...) WEFT_PRINTF(2, 3);

static weft_status corrupt(const parser *ps, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return weft_error_set(WEFT_ERR_CORRUPT, "%s: bad safetensors header at byte %zu: %s; the "
			      "file is damaged or not safetensors", ps->path,
			      (size_t)(ps->p - ps->start) + 8, msg);
}

static void skip_ws(parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
				   *ps->p == '\r'))
		ps->p++;
}

static weft_status expect(parser *ps, char c)
{
	skip_ws(ps);
	if (ps->p >= ps->end)
		return corrupt(ps, "expected '%c', found the end of the header", c);
	if (*ps->p != c)
		return corrupt(ps, "expected '%c', found '%c'", c, *ps->p);
	ps->p++;
	return WEFT_OK;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

static weft_status read_hex4(parser *ps, unsigned *out)
{
	unsigned v = 0;

	if (ps->end - ps->p < 4)
		return corrupt(ps, "a \\u escape needs 4 hex digits");
	for (int i = 0; i < 4; i++) {
		int h = hexval(ps->p[i]);

		if (h < 0)
			return corrupt(ps, "a \\u escape needs 4 hex digits");
		v = v * 16 + (unsigned)h;
	}
	ps->p += 4;
	*out = v;
	return WEFT_OK;
}

/* A JSON string into a new malloc'd, NUL-terminated buffer. */
static weft_status parse_string(parser *ps, char **out)
{
	const char *q;
	char *s, *o;
	weft_status st;

	*out = NULL;
	if ((st = expect(ps, '"')))
		return st;
	for (q = ps->p; q < ps->end && *q != '"'; q++)
		if (*q == '\\')
			q++;
	if (q >= ps->end)
		return corrupt(ps, "a string is not closed");
	/* escapes never make the text longer than its source */
	s = malloc((size_t)(q - ps->p) + 1);
	if (!s)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading the header",
				      ps->path);
	o = s;
	while (*ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p++;
		unsigned cp, lo;

		if (c < 0x20) {
			ps->p--;
			free(s);
			return corrupt(ps, "a control character inside a string");
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		c = (unsigned char)*ps->p++;
		switch (c) {
		case '"': case '\\': case '/':
			*o++ = (char)c;
			break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if ((st = read_hex4(ps, &cp)))
				goto out_free;
			if (cp >= 0xD800 && cp < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
			    ps->p[1] == 'u') {
				ps->p += 2;
				if ((st = read_hex4(ps, &lo)))
					goto out_free;
				if (lo < 0xDC00 || lo > 0xDFFF) {
					st = corrupt(ps, "a broken UTF-16 surrogate pair");
					goto out_free;
				}
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			}
			o += put_utf8(o, cp);
			break;
		default:
			ps->p--;
			st = corrupt(ps, "an unknown escape '\\%c'", c);
			goto out_free;
		}
	}
	ps->p++;
	*o = '\0';
	*out = s;
	return WEFT_OK;
out_free:
	free(s);
	return st;
}

static weft_status parse_uint(parser *ps, uint64_t *out)
{
	uint64_t v = 0;

	skip_ws(ps);
	if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
		return corrupt(ps, "expected a non-negative integer");
	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
		unsigned d = (unsigned)(*ps->p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return corrupt(ps, "an integer too large");
		v = v * 10 + d;
		ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E'))
		return corrupt(ps, "expected an integer, found a fraction or exponent");
	*out = v;
	return WEFT_OK;
}

/* '[' uint, ... ']' into vals (at most max); *n the count. */
static weft_status parse_uint_list(parser *ps, const char *what, uint64_t *vals, int max, int *n)
{
	weft_status st;

	*n = 0;
	if ((st = expect(ps, '[')))
		return st;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == ']') {
		ps->p++;
		return WEFT_OK;
	}
	for (;;) {
		if (*n == max)
			return corrupt(ps, "%s has more than %d entries", what, max);
		if ((st = parse_uint(ps, &vals[(*n)++])))
			return st;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		return expect(ps, ']');
	}
}

/* Calls fn for each "key": value of an object, the parser left at the
 * value; fn consumes it. */
typedef weft_status (*member_fn)(parser *ps, const char *key, void *user);

static weft_status parse_object(parser *ps, member_fn fn, void *user)
{
	weft_status st;

	if ((st = expect(ps, '{')))
		return st;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		return WEFT_OK;
	}
	for (;;) {
		char *key;

		skip_ws(ps);
		if ((st = parse_string(ps, &key)))
			return st;
		st = expect(ps, ':');
		if (!st)
			st = fn(ps, key, user);
		free(key);
		if (st)
			return st;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		return expect(ps, '}');
	}
}

typedef struct tensor_seen {
	weft_st_tensor *t;
	int dtype, shape, offsets;
} tensor_seen;

static weft_status tensor_member(parser *ps, const char *key, void *user)
{
	tensor_seen *s = user;
	weft_st_tensor *t = s->t;
	uint64_t vals[WEFT_MAX_DIMS + 1];
	char *text;
	int n;
	weft_status st;

	if (!strcmp(key, "dtype")) {
		if ((st = parse_string(ps, &text)))
			return st;
		st = weft_dtype_parse(text, &t->dtype);
		if (st)
			st = corrupt(ps, "tensor '%s' has dtype '%s', which weft does not read "
				     "(known: F32, F16, BF16, I32, I64, U8, U16)", t->name, text);
		free(text);
		s->dtype = 1;
		return st;
	}
	if (!strcmp(key, "shape")) {
		if ((st = parse_uint_list(ps, "a shape", vals, WEFT_MAX_DIMS, &n)))
			return st;
		t->ndim = n;
		for (int i = 0; i < n; i++) {
			if (vals[i] > (uint64_t)INT64_MAX / 2)
				return corrupt(ps, "tensor '%s' has a dim too large", t->name);
			t->shape[i] = (int64_t)vals[i];
		}
		s->shape = 1;
		return WEFT_OK;
	}
	if (!strcmp(key, "data_offsets")) {
		if ((st = parse_uint_list(ps, "data_offsets", vals, 2, &n)))
			return st;
		if (n != 2)
			return corrupt(ps, "tensor '%s': data_offsets must be [begin, end]", t->name);
		t->begin = vals[0];
		t->end = vals[1];
		s->offsets = 1;
		return WEFT_OK;
	}
	return corrupt(ps, "tensor '%s' has an unknown field '%s' (expected dtype, shape, "
		       "data_offsets)", t->name, key);
}

static weft_status metadata_member(parser *ps, const char *key, void *user)
{
	weft_st_file *f = user;
	char *val;
	weft_status st;

	skip_ws(ps);
	if ((st = parse_string(ps, &val)))
		return corrupt(ps, "__metadata__ values must be strings ('%s' is not)", key);
	if (!strcmp(key, "format") && !f->format) {
		f->format = val;
		return WEFT_OK;
	}
	free(val);
	return WEFT_OK;
}

static weft_status top_member(parser *ps, const char *key, void *user)
{
	weft_st_file *f = user;
	tensor_seen seen = { 0 };
	weft_st_tensor *t, *grown;
	weft_status st;

	if (!strcmp(key, "__metadata__"))
		return parse_object(ps, metadata_member, f);
	if (!key[0])
		return corrupt(ps, "a tensor has an empty name");
	if (weft_st_find(f, key))
		return corrupt(ps, "tensor '%s' appears twice", key);
	grown = realloc(f->tensors, (f->count + 1) * sizeof(*grown));
	if (!grown)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading the header",
				      ps->path);
	f->tensors = grown;
	t = &f->tensors[f->count];
	memset(t, 0, sizeof(*t));
	t->name = strdup(key);
	if (!t->name)
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory reading the header",
				      ps->path);
	f->count++;
	seen.t = t;
	if ((st = parse_object(ps, tensor_member, &seen)))
		return st;
	if (!seen.dtype || !seen.shape || !seen.offsets)
		return corrupt(ps, "tensor '%s' lacks %s", key,
			       !seen.dtype ? "its dtype" : !seen.shape ? "its shape" :
			       "its data_offsets");
	return WEFT_OK;
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
		uint64_t bytes = weft_dtype_size(t->dtype);
		char sh[160];

		for (int32_t d = 0; d < t->ndim; d++) {
			if (t->shape[d] && bytes > UINT64_MAX / (uint64_t)t->shape[d])
				return weft_error_set(WEFT_ERR_CORRUPT, "%s: tensor '%s' has a shape "
						      "too large", f->path, t->name);
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

static weft_status read_whole(const char *path, unsigned char **buf, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	long len;
	weft_status st = WEFT_OK;

	*buf = NULL;
	*size = 0;
	if (!fp)
		return weft_error_set(errno == ENOENT ? WEFT_ERR_NOT_FOUND : WEFT_ERR_IO,
				      "%s: cannot open: %s", path, strerror(errno));
	if (fseek(fp, 0, SEEK_END) || (len = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET)) {
		st = weft_error_set(WEFT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
		goto out_close;
	}
	*buf = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)len);
	if (!*buf) {
		st = weft_error_wrap(WEFT_ERR_NOMEM, "%s", path);
		goto out_close;
	}
	if (len && fread(*buf, 1, (size_t)len, fp) != (size_t)len) {
		st = weft_error_set(WEFT_ERR_IO, "%s: short read", path);
		weft_mem_free(*buf);
		*buf = NULL;
		goto out_close;
	}
	*size = (size_t)len;
out_close:
	fclose(fp);
	return st;
}

weft_status weft_st_open(const char *path, weft_st_file **out)
{
	weft_st_file *f;
	parser ps = { .path = path };
	uint64_t n = 0;
	weft_status st;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory", path);
	}
	if ((st = read_whole(path, &f->buf, &f->size)))
		goto out_close;
	if (f->size < 8) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "%s: %zu bytes is too short for a safetensors "
				    "file (8-byte header length first); the file is truncated",
				    path, f->size);
		goto out_close;
	}
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | f->buf[i];
	if (n > WEFT_ST_MAX_HEADER || n > f->size - 8) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "%s: the header length is %llu bytes but %s; "
				    "the file is truncated or not safetensors", path,
				    (unsigned long long)n, n > WEFT_ST_MAX_HEADER ?
				    "the format allows at most 100 MB" :
				    "the file is shorter than that");
		goto out_close;
	}
	ps.start = ps.p = (const char *)f->buf + 8;
	ps.end = ps.start + n;
	skip_ws(&ps);
	if (ps.p >= ps.end || *ps.p != '{') {
		st = corrupt(&ps, "the header must be a JSON object");
		goto out_close;
	}
	if ((st = parse_object(&ps, top_member, f)))
		goto out_close;
	skip_ws(&ps);
	if (ps.p != ps.end) {
		st = corrupt(&ps, "text after the header's closing brace");
		goto out_close;
	}
	if ((st = check_layout(f, f->size - 8 - n)))
		goto out_close;
	for (size_t i = 0; i < f->count; i++)
		f->tensors[i].data = f->buf + 8 + n + f->tensors[i].begin;
	*out = f;
	return WEFT_OK;
out_close:
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

/* ---- writing ---- */

typedef struct strbuf {
	char *s;
	size_t len, cap;
	int oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *g;

		while (cap < b->len + n + 1)
			cap *= 2;
		g = realloc(b->s, cap);
		if (!g) {
			b->oom = 1;
			return;
		}
		b->s = g;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_printf(strbuf *b, const char *fmt, ...) WEFT_PRINTF(2, 3);

static void sb_printf(strbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	sb_put(b, tmp, (size_t)n);
}

static void sb_json_string(strbuf *b, const char *s)
{
	sb_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };

			sb_put(b, e, 2);
		} else if (c < 0x20) {
			sb_printf(b, "\\u%04x", c);
		} else {
			sb_put(b, s, 1);
		}
	}
	sb_put(b, "\"", 1);
}

weft_status weft_st_write(const char *path, const weft_st_entry *e, size_t n)
{
	strbuf h = { 0 };
	uint64_t at = 0, hlen;
	unsigned char len8[8];
	FILE *fp = NULL;
	weft_status st = WEFT_OK;

	static const char meta[] = "{\"__metadata__\":{\"format\":\"pt\"}";

	sb_put(&h, meta, sizeof(meta) - 1);
	for (size_t i = 0; i < n; i++) {
		weft_tensor tmp = { .dtype = e[i].dtype, .ndim = e[i].ndim };
		size_t bytes;

		if (!e[i].name || !e[i].name[0] || strlen(e[i].name) > 4096) {
			st = weft_error_set(WEFT_ERR_INVALID_ARG, "%s: tensor %zu has an empty or "
					    "over-long name", path, i);
			goto out_free;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(e[j].name, e[i].name)) {
				st = weft_error_set(WEFT_ERR_INVALID_ARG, "%s: tensor name '%s' "
						    "given twice", path, e[i].name);
				goto out_free;
			}
		if (e[i].ndim)
			memcpy(tmp.shape, e[i].shape, (size_t)e[i].ndim * sizeof(int64_t));
		bytes = weft_tensor_nbytes(&tmp);
		sb_put(&h, ",", 1);
		sb_json_string(&h, e[i].name);
		sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", weft_dtype_name(e[i].dtype));
		for (int32_t d = 0; d < e[i].ndim; d++)
			sb_printf(&h, d ? ",%lld" : "%lld", (long long)e[i].shape[d]);
		sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
			  (unsigned long long)(at + bytes));
		at += bytes;
	}
	sb_put(&h, "}", 1);
	while (!h.oom && h.len % 8)
		sb_put(&h, " ", 1);
	if (h.oom) {
		st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory building the header", path);
		goto out_free;
	}
	hlen = h.len;
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)(hlen >> (8 * i));
	fp = fopen(path, "wb");
	if (!fp) {
		st = weft_error_set(WEFT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
		goto out_free;
	}
	if (fwrite(len8, 1, 8, fp) != 8 || fwrite(h.s, 1, h.len, fp) != h.len)
		goto out_write_error;
	for (size_t i = 0; i < n; i++) {
		weft_tensor tmp = { .dtype = e[i].dtype, .ndim = e[i].ndim };
		size_t bytes;

		if (e[i].ndim)
			memcpy(tmp.shape, e[i].shape, (size_t)e[i].ndim * sizeof(int64_t));
		bytes = weft_tensor_nbytes(&tmp);
		if (bytes && fwrite(e[i].data, 1, bytes, fp) != bytes)
			goto out_write_error;
	}
	if (fclose(fp)) {
		fp = NULL;
		goto out_write_error;
	}
	free(h.s);
	return WEFT_OK;
out_write_error:
	st = weft_error_set(WEFT_ERR_IO, "%s: write failed: %s (is the disk full?)", path,
			    strerror(errno));
	if (fp)
		fclose(fp);
out_free:
	free(h.s);
	return st;
}
