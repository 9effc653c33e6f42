/* core/config: the config written back as YAML reads back to the same
 * tree, in a canonical form whose hash does not depend on formatting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg_test_util.h"

static const char *doc = "# comment dropped\n"
			 "trainer:\n"
			 "  devices: 2\n"
			 "  strategy: {name: zero, stage: 2}\n"
			 "  lr: -1.5e-3\n"
			 "model:\n"
			 "  hidden: [128, 64]\n"
			 "  nested: [[1, 2], [], {a: 1, b: [x]}, {}]\n"
			 "  empty_map: {}\n"
			 "  nothing: ~\n"
			 "strings:\n"
			 "  - 'null'\n"
			 "  - ''\n"
			 "  - ' padded '\n"
			 "  - 'a: b'\n"
			 "  - 'x #y'\n"
			 "  - '- dash'\n"
			 "  - '-'\n"
			 "  - '---'\n"
			 "  - \"line\\nbreak\\ttab\\\\ \\\" quote\"\n"
			 "  - \"bell\\a and \\x80 and \\u2028 and \\uFEFF\"\n"
			 "  - 'caf\xc3\xa9 \xe2\x9c\x93'\n"
			 "  - '*star'\n"
			 "  - '&amp'\n"
			 "  - '[x]'\n"
			 "  - '@at'\n"
			 "  - '~'\n"
			 "  - 'true'\n"
			 "'key with: colon': 1\n"
			 "'': empty key\n"
			 "'<<': not a merge\n";

static weft_config *reparse(const weft_config *cfg, char **text)
{
	weft_config *again = NULL;

	WT_OK(weft_config_to_string(cfg, text));
	WT_OK(weft_config_load_string("out.yaml", *text, strlen(*text), &again));
	return again;
}

static void test_round_trip(void)
{
	weft_config *cfg = load(doc), *again, *third;
	char *text, *text2;

	again = reparse(cfg, &text);
	WT_CHECK(same_tree(weft_config_root(cfg), weft_config_root(again)));
	third = reparse(again, &text2);
	/* writing is a fixed point */
	WT_CHECK(strcmp(text, text2) == 0);
	WT_CHECK(weft_config_hash(cfg) == weft_config_hash(again));
	/* block style, document order, plain where that is safe */
	WT_STR_CONTAINS(text, "trainer:\n  devices: 2\n  strategy:\n    name: zero\n"
			      "    stage: 2\n  lr: -1.5e-3\n");
	WT_STR_CONTAINS(text, "  nested:\n    - - 1\n      - 2\n    - []\n    - a: 1\n"
			      "      b:\n        - x\n    - {}\n");
	WT_STR_CONTAINS(text, "  nothing: null\n");
	WT_STR_CONTAINS(text, "  - \"null\"\n");
	WT_STR_CONTAINS(text, "\"key with: colon\": 1\n");
	WT_CHECK(strstr(text, "comment") == NULL);
	weft_config_free(third);
	weft_config_free(again);
	free(text);
	free(text2);
	weft_config_free(cfg);
}

static void test_empty(void)
{
	weft_config *cfg = load("");
	char *text;

	WT_OK(weft_config_to_string(cfg, &text));
	WT_CHECK(strcmp(text, "{}\n") == 0);
	free(text);
	weft_config_free(cfg);
}

static void test_hash(void)
{
	weft_config *a = load("a: 1\nb: {c: [1, 2]}\n");
	weft_config *b = load("# other formatting\na:   '1'\nb:\n  c:\n  - 1\n  - \"2\"\n");
	weft_config *c = load("a: 1\nb: {c: [1, 3]}\n");
	uint64_t ha = weft_config_hash(a);

	/* FNV-1a 64 (published offset basis and prime) of the canonical text,
	 * computed here independently of the library */
	{
		const char *t = "a: 1\nb:\n  c:\n    - 1\n    - 2\n";
		uint64_t h = 0xcbf29ce484222325ULL;

		for (; *t; t++)
			h = (h ^ (unsigned char)*t) * 0x100000001b3ULL;
		WT_CHECK(ha == h);
	}
	WT_CHECK(ha == weft_config_hash(a)); /* stable across calls */
	WT_CHECK(ha == weft_config_hash(b)); /* formatting does not matter */
	WT_CHECK(ha != weft_config_hash(c)); /* values do */
	/* reading does not change the hash; an override does */
	weft_cfg_mark_used(weft_config_root(a));
	WT_CHECK(ha == weft_config_hash(a));
	WT_OK(weft_config_override(a, "--b.c.1=3"));
	WT_CHECK(weft_config_hash(a) == weft_config_hash(c));
	weft_config_free(a);
	weft_config_free(b);
	weft_config_free(c);
}

static void test_write_file(void)
{
	weft_config *cfg = load("x: {y: 1}\n");
	FILE *f = tmpfile();
	char buf[64] = { 0 };

	WT_REQUIRE(f != NULL);
	WT_OK(weft_config_write(cfg, f));
	rewind(f);
	WT_CHECK(fread(buf, 1, sizeof(buf) - 1, f) == strlen("x:\n  y: 1\n"));
	WT_CHECK(strcmp(buf, "x:\n  y: 1\n") == 0);
	fclose(f);
	/* a stream that cannot be written */
	f = fopen("/dev/full", "w");
	if (f) {
		WT_FAILS(weft_config_write(cfg, f), WEFT_ERR_IO, "writing the config");
		fclose(f);
	}
	weft_config_free(cfg);
}

int main(void)
{
	test_round_trip();
	test_empty();
	test_hash();
	test_write_file();
	return wt_done("test_config_write");
}
