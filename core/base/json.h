/* base/json.h - a small JSON writer and reader, the one every part of
 * weft uses (summary.json, checkpoint manifests, safetensors headers).
 *
 * The writer places the
 * commas, escapes strings as RFC 8259 asks (quote, backslash, control
 * characters as \uXXXX or their short forms), writes non-finite numbers as
 * null (JSON has no NaN), and keeps the first error so callers check once,
 * at weft_json_finish.
 *
 * The reader parses a whole document into a tree in time linear in its
 * length; errors name the document, the line and the column. Every value
 * keeps the byte offset where it starts, so a caller checking a schema can
 * point at the offending value.
 */
#ifndef WEFT_BASE_JSON_H
#define WEFT_BASE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "weft/status.h"

#define WEFT_JSON_MAX_DEPTH 32

typedef struct weft_json_writer {
	FILE *out;          /* destination, or NULL to build a string in buf */
	char *buf;          /* the string being built (out == NULL) */
	size_t len, cap;
	int pretty;         /* newline and two-space indent per level */
	int depth;
	int after_key;      /* a key was written; the value comes next */
	uint8_t count[WEFT_JSON_MAX_DEPTH]; /* items so far per level (saturating) */
	uint8_t is_obj[WEFT_JSON_MAX_DEPTH];
	weft_status err;    /* first error; later calls do nothing */
} weft_json_writer;

/* Starts a writer onto `out` (not closed by the writer). */
void weft_json_writer_file(weft_json_writer *w, FILE *out, int pretty);

/* Starts a writer that builds a string (take it with weft_json_finish). */
void weft_json_writer_string(weft_json_writer *w, int pretty);

/* Structure. Misuse (a value where a key is due, a key outside an object,
 * unbalanced ends, deeper than WEFT_JSON_MAX_DEPTH) records
 * WEFT_ERR_INVALID_ARG, reported by weft_json_finish. */
void weft_json_begin_object(weft_json_writer *w);
void weft_json_end_object(weft_json_writer *w);
void weft_json_begin_array(weft_json_writer *w);
void weft_json_end_array(weft_json_writer *w);
void weft_json_key(weft_json_writer *w, const char *key);

/* Values. A NULL string writes null; NaN and infinities write null. */
void weft_json_string(weft_json_writer *w, const char *s);
void weft_json_number(weft_json_writer *w, double v);
void weft_json_int(weft_json_writer *w, int64_t v);
void weft_json_bool(weft_json_writer *w, int v);
void weft_json_null(weft_json_writer *w);

/* Ends the document: the first error recorded, or WEFT_ERR_INVALID_ARG if
 * objects/arrays are left open. For a string writer *text_out (optional)
 * gets the NUL-terminated text (free with free()); it is freed otherwise. */
weft_status weft_json_finish(weft_json_writer *w, char **text_out);

/* ---- reader ---------------------------------------------------------- */

typedef enum weft_json_kind {
	WEFT_JSON_NULL = 0,
	WEFT_JSON_BOOL = 1,
	WEFT_JSON_NUMBER = 2,
	WEFT_JSON_STRING = 3,
	WEFT_JSON_ARRAY = 4,
	WEFT_JSON_OBJECT = 5
} weft_json_kind;

typedef struct weft_json_value {
	weft_json_kind kind;
	int boolean;
	double number;
	int64_t integer;       /* exact value when is_integer */
	int is_integer;        /* the number was written without . or e and fits */
	char *string;          /* STRING: UTF-8, NUL-terminated */
	size_t count;          /* ARRAY / OBJECT entries */
	struct weft_json_value *items;
	char **keys;           /* OBJECT: count keys, items[i] belongs to keys[i];
				* duplicate keys are kept, in document order */
	size_t at;             /* byte offset of the value's first character */
} weft_json_value;

/* Where and why a parse failed (weft_json_parse_ex). */
typedef struct weft_json_error {
	size_t at;             /* byte offset of the error in the text */
	int line, col;         /* 1-based */
	const char *what;      /* the reason alone, e.g. "expected ',' or '}'"
				* (static storage) */
} weft_json_error;

/* Parses `len` bytes of `text` into a new tree; free with weft_json_free.
 * `name` stands for the document in messages. Errors: WEFT_ERR_PARSE with
 * "name:line:col: what was expected"; WEFT_ERR_NOMEM. */
weft_status weft_json_parse(const char *name, const char *text, size_t len,
			    weft_json_value **out);

/* As weft_json_parse; on WEFT_ERR_PARSE, *err (optional) also gets the
 * position and the bare reason, for callers that word the message in their
 * own terms (a file format embedding JSON at some offset). */
weft_status weft_json_parse_ex(const char *name, const char *text, size_t len,
			       weft_json_value **out, weft_json_error *err);

/* Reads and parses a file. Errors as weft_json_parse, plus
 * WEFT_ERR_NOT_FOUND / WEFT_ERR_IO naming the path. */
weft_status weft_json_parse_file(const char *path, weft_json_value **out);

/* Frees a tree from weft_json_parse; NULL is ignored. */
void weft_json_free(weft_json_value *v);

/* The value of `key` in an object; NULL when absent or v is not an object.
 * Borrowed from the tree. */
const weft_json_value *weft_json_get(const weft_json_value *v, const char *key);

#endif /* WEFT_BASE_JSON_H */
