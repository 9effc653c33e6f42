/* The JSON writer: commas, indentation and escaping in one place. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

static void init(weft_json_writer *w, FILE *out, int pretty)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->pretty = pretty;
}

void weft_json_writer_file(weft_json_writer *w, FILE *out, int pretty)
{
	init(w, out, pretty);
}

void weft_json_writer_string(weft_json_writer *w, int pretty)
{
	init(w, NULL, pretty);
}

static void put(weft_json_writer *w, const char *s, size_t n)
{
	if (w->err)
		return;
	if (w->out) {
		if (fwrite(s, 1, n, w->out) != n)
			w->err = weft_error_set(WEFT_ERR_IO, "writing JSON failed");
		return;
	}
	if (w->len + n + 1 > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		char *nb;

		while (cap < w->len + n + 1)
			cap *= 2;
		nb = realloc(w->buf, cap);
		if (!nb) {
			w->err = weft_error_set(WEFT_ERR_NOMEM, "out of memory building JSON");
			return;
		}
		w->buf = nb;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void puts_(weft_json_writer *w, const char *s)
{
	put(w, s, strlen(s));
}

static void misuse(weft_json_writer *w, const char *what)
{
	if (!w->err)
		w->err = weft_error_set(WEFT_ERR_INVALID_ARG, "JSON writer misuse: %s", what);
}

static void newline(weft_json_writer *w)
{
	if (!w->pretty)
		return;
	put(w, "\n", 1);
	for (int i = 0; i < w->depth; i++)
		put(w, "  ", 2);
}

/* Everything that precedes a value: the comma and the indent, or nothing
 * right after a key. */
static void before_value(weft_json_writer *w)
{
	if (w->after_key) {
		w->after_key = 0;
		return;
	}
	if (w->depth > 0) {
		if (w->is_obj[w->depth - 1]) {
			misuse(w, "a value inside an object needs a key first");
			return;
		}
		if (w->count[w->depth - 1])
			put(w, ",", 1);
		w->count[w->depth - 1] = 1;
		newline(w);
	}
}

static void escaped(weft_json_writer *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const char *run = s;

	put(w, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[7];
		const char *rep = NULL;

		switch (c) {
		case '"': rep = "\\\""; break;
		case '\\': rep = "\\\\"; break;
		case '\n': rep = "\\n"; break;
		case '\r': rep = "\\r"; break;
		case '\t': rep = "\\t"; break;
		case '\b': rep = "\\b"; break;
		case '\f': rep = "\\f"; break;
		default:
			if (c < 0x20) {
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				esc[6] = '\0';
				rep = esc;
			}
		}
		if (rep) {
			put(w, run, (size_t)(s - run));
			puts_(w, rep);
			run = s + 1;
		}
	}
	put(w, run, (size_t)(s - run));
	put(w, "\"", 1);
}

static void open_(weft_json_writer *w, int obj)
{
	before_value(w);
	if (w->depth >= WEFT_JSON_MAX_DEPTH) {
		misuse(w, "nesting deeper than WEFT_JSON_MAX_DEPTH");
		return;
	}
	put(w, obj ? "{" : "[", 1);
	w->is_obj[w->depth] = (uint8_t)obj;
	w->count[w->depth] = 0;
	w->depth++;
}

static void close_(weft_json_writer *w, int obj)
{
	int had;

	if (w->depth == 0 || w->is_obj[w->depth - 1] != obj || w->after_key) {
		misuse(w, obj ? "end_object without a matching begin_object"
			      : "end_array without a matching begin_array");
		return;
	}
	had = w->count[w->depth - 1];
	w->depth--;
	if (had)
		newline(w);
	put(w, obj ? "}" : "]", 1);
}

void weft_json_begin_object(weft_json_writer *w) { open_(w, 1); }
void weft_json_end_object(weft_json_writer *w) { close_(w, 1); }
void weft_json_begin_array(weft_json_writer *w) { open_(w, 0); }
void weft_json_end_array(weft_json_writer *w) { close_(w, 0); }

void weft_json_key(weft_json_writer *w, const char *key)
{
	if (w->depth == 0 || !w->is_obj[w->depth - 1] || w->after_key || !key) {
		misuse(w, "a key must be written inside an object, before its value");
		return;
	}
	if (w->count[w->depth - 1])
		put(w, ",", 1);
	w->count[w->depth - 1] = 1;
	newline(w);
	escaped(w, key);
	put(w, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
	w->after_key = 1;
}

void weft_json_string(weft_json_writer *w, const char *s)
{
	before_value(w);
	if (s)
		escaped(w, s);
	else
		puts_(w, "null");
}

void weft_json_number(weft_json_writer *w, double v)
{
	char b[40];

	before_value(w);
	if (!isfinite(v)) {
		puts_(w, "null");
		return;
	}
	/* %.17g round-trips every double; integers print without exponent. */
	snprintf(b, sizeof(b), "%.17g", v);
	puts_(w, b);
}

void weft_json_int(weft_json_writer *w, int64_t v)
{
	char b[24];

	before_value(w);
	snprintf(b, sizeof(b), "%" PRId64, v);
	puts_(w, b);
}

void weft_json_bool(weft_json_writer *w, int v)
{
	before_value(w);
	puts_(w, v ? "true" : "false");
}

void weft_json_null(weft_json_writer *w)
{
	before_value(w);
	puts_(w, "null");
}

weft_status weft_json_finish(weft_json_writer *w, char **text_out)
{
	weft_status st = w->err;

	if (!st && (w->depth != 0 || w->after_key))
		st = weft_error_set(WEFT_ERR_INVALID_ARG,
				    "JSON writer finished with %d unclosed object(s)/array(s)",
				    w->depth);
	if (!st && w->pretty)
		put(w, "\n", 1);
	if (!st)
		st = w->err;
	if (!w->out && !st && text_out && !w->buf) {
		w->buf = calloc(1, 1);
		if (!w->buf)
			st = weft_error_set(WEFT_ERR_NOMEM, "out of memory building JSON");
	}
	if (text_out && !w->out && !st) {
		*text_out = w->buf;
		w->buf = NULL;
	}
	free(w->buf);
	w->buf = NULL;
	return st;
}
