/* The JSON writer escapes and nests correctly; the reader parses it back
 * and names line:col for malformed input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "weft_test.h"

int main(void)
{
	weft_json_writer w;
	weft_json_value *v = NULL;
	const weft_json_value *x;
	char *text = NULL;

	/* Escapes: quote, backslash, newline, tab, a control byte, UTF-8 kept. */
	weft_json_writer_string(&w, 0);
	weft_json_begin_object(&w);
	weft_json_key(&w, "s");
	weft_json_string(&w, "a\"b\\c\nd\te\x01" "f \xc3\xa9");
	weft_json_key(&w, "n");
	weft_json_number(&w, 0.1);
	weft_json_key(&w, "i");
	weft_json_int(&w, -9007199254740993LL);
	weft_json_key(&w, "nan");
	weft_json_number(&w, NAN);
	weft_json_key(&w, "a");
	weft_json_begin_array(&w);
	weft_json_bool(&w, 1);
	weft_json_null(&w);
	weft_json_begin_object(&w);
	weft_json_end_object(&w);
	weft_json_end_array(&w);
	weft_json_end_object(&w);
	WT_OK(weft_json_finish(&w, &text));
	WT_STR_CONTAINS(text, "\"a\\\"b\\\\c\\nd\\te\\u0001f \xc3\xa9\"");
	WT_STR_CONTAINS(text, "\"nan\":null");
	WT_STR_CONTAINS(text, "\"a\":[true,null,{}]");

	WT_OK(weft_json_parse("t", text, strlen(text), &v));
	x = weft_json_get(v, "s");
	WT_REQUIRE(x && x->kind == WEFT_JSON_STRING);
	WT_CHECK(strcmp(x->string, "a\"b\\c\nd\te\x01" "f \xc3\xa9") == 0);
	x = weft_json_get(v, "n");
	WT_CHECK(x && x->kind == WEFT_JSON_NUMBER && x->number == 0.1 && !x->is_integer);
	x = weft_json_get(v, "i");
	/* Beyond 2^53 a double is inexact; the integer must stay exact. */
	WT_CHECK(x && x->is_integer && x->integer == -9007199254740993LL);
	x = weft_json_get(v, "a");
	WT_CHECK(x && x->kind == WEFT_JSON_ARRAY && x->count == 3 &&
		 x->items[0].kind == WEFT_JSON_BOOL && x->items[0].boolean == 1 &&
		 x->items[1].kind == WEFT_JSON_NULL && x->items[2].kind == WEFT_JSON_OBJECT);
	WT_CHECK(weft_json_get(v, "missing") == NULL);
	weft_json_free(v);
	free(text);

	/* \u escapes, surrogate pairs included, decode to UTF-8. */
	{
		const char *doc = "[\"\\u00e9\\ud83d\\ude00\\/\"]";

		WT_OK(weft_json_parse("u", doc, strlen(doc), &v));
		WT_CHECK(strcmp(v->items[0].string, "\xc3\xa9\xf0\x9f\x98\x80/") == 0);
		weft_json_free(v);
	}

	/* Pretty output parses to the same tree. */
	weft_json_writer_string(&w, 1);
	weft_json_begin_object(&w);
	weft_json_key(&w, "k");
	weft_json_begin_array(&w);
	weft_json_int(&w, 1);
	weft_json_int(&w, 2);
	weft_json_end_array(&w);
	weft_json_end_object(&w);
	WT_OK(weft_json_finish(&w, &text));
	WT_CHECK(strcmp(text, "{\n  \"k\": [\n    1,\n    2\n  ]\n}\n") == 0);
	free(text);

	/* Misuse is reported once, at finish. */
	weft_json_writer_string(&w, 0);
	weft_json_begin_object(&w);
	weft_json_int(&w, 1);
	WT_FAILS(weft_json_finish(&w, &text), WEFT_ERR_INVALID_ARG, "needs a key");
	weft_json_writer_string(&w, 0);
	weft_json_begin_array(&w);
	WT_FAILS(weft_json_finish(&w, NULL), WEFT_ERR_INVALID_ARG, "1 unclosed");

	/* Malformed documents name the place. */
	WT_FAILS(weft_json_parse("m.json", "{\n  \"a\": 1,\n}", 14, &v), WEFT_ERR_PARSE,
		 "m.json:3:1:", "string key");
	WT_FAILS(weft_json_parse("m.json", "[01]", 4, &v), WEFT_ERR_PARSE, "leading zeros");
	WT_FAILS(weft_json_parse("m.json", "\"abc", 4, &v), WEFT_ERR_PARSE, "unterminated");
	WT_FAILS(weft_json_parse("m.json", "[1] x", 5, &v), WEFT_ERR_PARSE, "m.json:1:5",
		 "after the document");
	WT_FAILS(weft_json_parse("m.json", "[\"\\ud800\"]", 10, &v), WEFT_ERR_PARSE, "surrogate");
	WT_CHECK(v == NULL);

	/* Each value keeps its byte offset; duplicate keys stay, in order. */
	{
		const char *doc = " {\"k\": [10, \"x\"],\n \"k\": null}";

		WT_OK(weft_json_parse("p", doc, strlen(doc), &v));
		WT_CHECK(v->at == 1 && v->count == 2);
		WT_CHECK(!strcmp(v->keys[0], "k") && !strcmp(v->keys[1], "k"));
		WT_CHECK(v->items[0].at == 7 && v->items[0].items[0].at == 8 &&
			 v->items[0].items[1].at == 12);
		WT_CHECK(v->items[1].kind == WEFT_JSON_NULL && v->items[1].at == 24);
		weft_json_free(v);
	}

	/* weft_json_parse_ex gives the failure's place and bare reason too. */
	{
		weft_json_error err = { 0 };

		WT_FAILS(weft_json_parse_ex("e.json", "{\"a\": 1,\n  ]", 12, &v, &err),
			 WEFT_ERR_PARSE, "e.json:2:3:", "expected a string key");
		WT_CHECK(err.at == 11 && err.line == 2 && err.col == 3);
		WT_CHECK(err.what && !strcmp(err.what, "expected a string key"));
		/* at the end of the text, the offset is the text's length */
		WT_FAILS(weft_json_parse_ex("e.json", "[1, 2", 5, &v, &err), WEFT_ERR_PARSE,
			 "e.json:1:6:");
		WT_CHECK(err.at == 5 && err.col == 6);
		WT_CHECK(v == NULL);
	}
	return wt_done("test_json");
}
