/* The JSON reader: recursive descent into a tree, RFC 8259 strict (no
 * comments, no trailing commas), with line:col in every message. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"

typedef struct parser {
	const char *name;
	const char *p, *start, *end;
	weft_json_error *err;  /* optional: the failure's position and reason */
} parser;

/* Counts lines only here, on the one failure, so parsing stays linear. */
static weft_status fail(parser *ps, const char *what)
{
	const char *at = ps->p < ps->end ? ps->p : ps->end;
	int line = 1, col = 1;

	for (const char *q = ps->start; q < at; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	if (ps->err)
		*ps->err = (weft_json_error){ .at = (size_t)(at - ps->start), .line = line,
					      .col = col, .what = what };
	return weft_error_set(WEFT_ERR_PARSE, "%s:%d:%d: %s", ps->name, line, col, what);
}

static void skip_ws(parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int literal(parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
		ps->p += n;
		return 1;
	}
	return 0;
}

static int hex4(parser *ps, unsigned *out)
{
	unsigned v = 0;

	if (ps->end - ps->p < 4)
		return 0;
	for (int i = 0; i < 4; i++) {
		char c = ps->p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return 0;
	}
	ps->p += 4;
	*out = v;
	return 1;
}

static size_t utf8_put(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* At the opening quote; leaves a new NUL-terminated string in *out. */
static weft_status parse_string(parser *ps, char **out)
{
	const char *q;
	char *s, *o;

	ps->p++;
	/* The decoded text is never longer than the escaped text. */
	for (q = ps->p; q < ps->end && *q != '"'; q++) {
		if (*q == '\\')
			q++;
	}
	if (q > ps->end)
		q = ps->end;
	s = malloc((size_t)(q - ps->p) + 1);
	if (!s)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory parsing %s", ps->name);
	o = s;
	for (;;) {
		unsigned char c;

		if (ps->p >= ps->end) {
			free(s);
			return fail(ps, "unterminated string");
		}
		c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			break;
		}
		if (c < 0x20) {
			free(s);
			return fail(ps, "control character inside a string (escape it)");
		}
		if (c != '\\') {
			*o++ = (char)c;
			ps->p++;
			continue;
		}
		ps->p++;
		if (ps->p >= ps->end) {
			free(s);
			return fail(ps, "unterminated escape");
		}
		c = (unsigned char)*ps->p++;
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;

			if (!hex4(ps, &cp)) {
				free(s);
				return fail(ps, "\\u must be followed by 4 hex digits");
			}
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (!literal(ps, "\\u") || !hex4(ps, &lo) || lo < 0xdc00 || lo > 0xdfff) {
					free(s);
					return fail(ps, "a high surrogate must be followed by a low one");
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				free(s);
				return fail(ps, "lone low surrogate in \\u escape");
			}
			o += utf8_put(o, cp);
			break;
		}
		default:
			free(s);
			ps->p--;
			return fail(ps, "unknown escape in string");
		}
	}
	*o = '\0';
	*out = s;
	return WEFT_OK;
}

static weft_status parse_number(parser *ps, weft_json_value *v)
{
	const char *q = ps->p;
	char buf[64], *endp;
	size_t n;
	int integral = 1;

	if (q < ps->end && *q == '-')
		q++;
	if (q >= ps->end || *q < '0' || *q > '9')
		return fail(ps, "expected a value");
	if (*q == '0' && q + 1 < ps->end && q[1] >= '0' && q[1] <= '9')
		return fail(ps, "numbers must not have leading zeros");
	while (q < ps->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
			       *q == '+' || *q == '-')) {
		if (*q == '.' || *q == 'e' || *q == 'E')
			integral = 0;
		q++;
	}
	n = (size_t)(q - ps->p);
	if (n >= sizeof(buf))
		return fail(ps, "number too long");
	memcpy(buf, ps->p, n);
	buf[n] = '\0';
	errno = 0;
	v->number = strtod(buf, &endp);
	if (endp != buf + n || (n && (buf[n - 1] == '.' || buf[n - 1] == 'e' || buf[n - 1] == 'E')))
		return fail(ps, "malformed number");
	v->kind = WEFT_JSON_NUMBER;
	if (integral) {
		long long ll;

		errno = 0;
		ll = strtoll(buf, &endp, 10);
		if (errno == 0 && endp == buf + n) {
			v->integer = ll;
			v->is_integer = 1;
		}
	}
	ps->p = q;
	return WEFT_OK;
}

static weft_status parse_value(parser *ps, weft_json_value *v, int depth);

static weft_status push(parser *ps, weft_json_value *v, size_t *cap, char *key)
{
	if (v->count == *cap) {
		size_t nc = *cap ? *cap * 2 : 4;
		weft_json_value *ni = realloc(v->items, nc * sizeof(*ni));

		if (!ni)
			goto out_nomem;
		v->items = ni;
		if (v->kind == WEFT_JSON_OBJECT) {
			char **nk = realloc(v->keys, nc * sizeof(*nk));

			if (!nk)
				goto out_nomem;
			v->keys = nk;
		}
		*cap = nc;
	}
	memset(&v->items[v->count], 0, sizeof(v->items[0]));
	if (v->kind == WEFT_JSON_OBJECT)
		v->keys[v->count] = key;
	v->count++;
	return WEFT_OK;
out_nomem:
	free(key);
	return weft_error_set(WEFT_ERR_NOMEM, "out of memory parsing %s", ps->name);
}

/* Gives back the unused tail of a finished container's arrays (a large
 * document is mostly small objects and arrays; the doubling would leave up
 * to half of them unused). A failed shrink keeps the larger block. */
static void shrink(weft_json_value *v, size_t cap)
{
	weft_json_value *ni;

	if (v->count == cap)
		return;
	ni = realloc(v->items, v->count * sizeof(*ni));
	if (ni)
		v->items = ni;
	if (v->kind == WEFT_JSON_OBJECT) {
		char **nk = realloc(v->keys, v->count * sizeof(*nk));

		if (nk)
			v->keys = nk;
	}
}

static weft_status parse_container(parser *ps, weft_json_value *v, int depth, int obj)
{
	size_t cap = 0;
	weft_status st;

	v->kind = obj ? WEFT_JSON_OBJECT : WEFT_JSON_ARRAY;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
		ps->p++;
		return WEFT_OK;
	}
	for (;;) {
		char *key = NULL;

		skip_ws(ps);
		if (obj) {
			if (ps->p >= ps->end || *ps->p != '"')
				return fail(ps, "expected a string key");
			st = parse_string(ps, &key);
			if (st)
				return st;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				free(key);
				return fail(ps, "expected ':' after the key");
			}
			ps->p++;
		}
		st = push(ps, v, &cap, key);
		if (st)
			return st;
		st = parse_value(ps, &v->items[v->count - 1], depth + 1);
		if (st)
			return st;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
			ps->p++;
			shrink(v, cap);
			return WEFT_OK;
		}
		return fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static weft_status parse_value(parser *ps, weft_json_value *v, int depth)
{
	if (depth > 64)
		return fail(ps, "nesting deeper than 64 levels");
	skip_ws(ps);
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end of document, expected a value");
	v->at = (size_t)(ps->p - ps->start);
	switch (*ps->p) {
	case '{': return parse_container(ps, v, depth, 1);
	case '[': return parse_container(ps, v, depth, 0);
	case '"':
		v->kind = WEFT_JSON_STRING;
		return parse_string(ps, &v->string);
	case 't':
	case 'f':
	case 'n':
		if (literal(ps, "true")) {
			v->kind = WEFT_JSON_BOOL;
			v->boolean = 1;
		} else if (literal(ps, "false")) {
			v->kind = WEFT_JSON_BOOL;
		} else if (literal(ps, "null")) {
			v->kind = WEFT_JSON_NULL;
		} else {
			return fail(ps, "expected a value");
		}
		return WEFT_OK;
	default:
		return parse_number(ps, v);
	}
}

static void free_inner(weft_json_value *v)
{
	for (size_t i = 0; i < v->count; i++) {
		free_inner(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->string);
}

void weft_json_free(weft_json_value *v)
{
	if (!v)
		return;
	free_inner(v);
	free(v);
}

weft_status weft_json_parse(const char *name, const char *text, size_t len, weft_json_value **out)
{
	return weft_json_parse_ex(name, text, len, out, NULL);
}

weft_status weft_json_parse_ex(const char *name, const char *text, size_t len,
			       weft_json_value **out, weft_json_error *err)
{
	parser ps = { .name = name ? name : "<json>", .p = text, .start = text, .end = text + len,
		      .err = err };
	weft_json_value *v = calloc(1, sizeof(*v));
	weft_status st;

	*out = NULL;
	if (!v)
		return weft_error_set(WEFT_ERR_NOMEM, "out of memory parsing %s", ps.name);
	st = parse_value(&ps, v, 0);
	if (!st) {
		skip_ws(&ps);
		if (ps.p != ps.end)
			st = fail(&ps, "unexpected text after the document");
	}
	if (st) {
		weft_json_free(v);
		return st;
	}
	*out = v;
	return WEFT_OK;
}

weft_status weft_json_parse_file(const char *path, weft_json_value **out)
{
	weft_status st;
	char *text;
	size_t n;

	*out = NULL;
	if ((st = weft_file_read(path, WEFT_MEM_OTHER, &text, &n)))
		return st;
	st = weft_json_parse(path, text, n, out);
	weft_mem_free(text);
	return st;
}

const weft_json_value *weft_json_get(const weft_json_value *v, const char *key)
{
	if (!v || v->kind != WEFT_JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < v->count; i++)
		if (strcmp(v->keys[i], key) == 0)
			return &v->items[i];
	return NULL;
}
